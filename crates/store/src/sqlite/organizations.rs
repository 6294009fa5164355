use async_trait::async_trait;
use netacl_model::{
    AccessLevel, Connection, Organization, OrganizationConnection, OrganizationConnectionPatch,
    OrganizationId, OrganizationPatch,
};
use rusqlite::{params, ErrorCode, OptionalExtension, Row, Transaction};

use super::{now_ms, SqliteStore};
use crate::organizations::{parse_organization, stored_access_level};
use crate::{
    OrganizationConnectionEntry, OrganizationConnectionPage, OrganizationCursor, OrganizationPage,
    OrganizationStore, StoreError, TenantId,
};

/// The columns [`entry_from_row`] reads, in its order (`oc`: organization_connections, `c`:
/// connections).
const ENTRY_COLUMNS: &str = "oc.connection_id, oc.assign_membership_on_login, oc.show_as_button,
     oc.is_signup_enabled, oc.is_enabled, oc.organization_connection_name,
     oc.organization_access_level, c.name, c.strategy";

/// An organization's connection joined with the tenant's connection it names.
const ENTRY_FROM: &str = "organization_connections AS oc JOIN connections AS c
     ON c.tenant_id = oc.tenant_id AND c.id = oc.connection_id";

/// An entry and its stored access level (checked by [`checked_entry`]).
type RawEntry = (OrganizationConnectionEntry, Option<String>);

fn entry_from_row(row: &Row<'_>) -> rusqlite::Result<RawEntry> {
    let connection_id: String = row.get(0)?;
    let entry = OrganizationConnectionEntry {
        settings: OrganizationConnection {
            connection_id: connection_id.clone(),
            assign_membership_on_login: row.get(1)?,
            show_as_button: row.get(2)?,
            is_signup_enabled: row.get(3)?,
            is_enabled: row.get(4)?,
            organization_connection_name: row.get(5)?,
            organization_access_level: None,
        },
        connection: Connection {
            id: connection_id,
            name: row.get(7)?,
            strategy: row.get(8)?,
        },
    };
    Ok((entry, row.get(6)?))
}

fn checked_entry(
    tenant: &TenantId,
    (mut entry, level): RawEntry,
) -> Result<OrganizationConnectionEntry, StoreError> {
    entry.settings.organization_access_level =
        stored_access_level(tenant, &entry.connection.id, level.as_deref())?;
    Ok(entry)
}

fn name_taken(err: rusqlite::Error, name: &str) -> StoreError {
    match &err {
        rusqlite::Error::SqliteFailure(e, Some(message))
            if e.code == ErrorCode::ConstraintViolation
                && message.contains("organizations.name") =>
        {
            StoreError::NameTaken(format!("organization name {name}"))
        }
        _ => StoreError::from(err),
    }
}

fn require_organization(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    organization: &OrganizationId,
) -> Result<(), StoreError> {
    tx.query_row(
        "SELECT 1 FROM organizations WHERE tenant_id = ?1 AND id = ?2",
        params![tenant.as_str(), organization.as_str()],
        |_| Ok(()),
    )
    .optional()?
    .ok_or_else(|| StoreError::UnknownOrganization(organization.to_string()))
}

fn read_entry(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    organization: &OrganizationId,
    connection_id: &str,
    enabled_only: bool,
) -> Result<OrganizationConnectionEntry, StoreError> {
    require_organization(tx, tenant, organization)?;
    let row = tx
        .query_row(
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM {ENTRY_FROM}
                 WHERE oc.tenant_id = ?1 AND oc.organization_id = ?2 AND oc.connection_id = ?3
                   AND (oc.is_enabled OR NOT ?4)"
            ),
            params![
                tenant.as_str(),
                organization.as_str(),
                connection_id,
                enabled_only
            ],
            entry_from_row,
        )
        .optional()?;
    let row =
        row.ok_or_else(|| StoreError::ConnectionNotInOrganization(connection_id.to_owned()))?;
    checked_entry(tenant, row)
}

fn write_settings(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    organization: &OrganizationId,
    s: &OrganizationConnection,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE organization_connections SET assign_membership_on_login = ?4,
             show_as_button = ?5, is_signup_enabled = ?6, is_enabled = ?7,
             organization_connection_name = ?8, organization_access_level = ?9
         WHERE tenant_id = ?1 AND organization_id = ?2 AND connection_id = ?3",
        params![
            tenant.as_str(),
            organization.as_str(),
            s.connection_id,
            s.assign_membership_on_login,
            s.show_as_button,
            s.is_signup_enabled,
            s.is_enabled,
            s.organization_connection_name,
            s.organization_access_level.map(AccessLevel::as_str),
        ],
    )?;
    Ok(())
}

fn insert_connection(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    organization: &OrganizationId,
    s: &OrganizationConnection,
    position: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO organization_connections
         (tenant_id, organization_id, connection_id, position, assign_membership_on_login,
          show_as_button, is_signup_enabled, is_enabled, organization_connection_name,
          organization_access_level)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            tenant.as_str(),
            organization.as_str(),
            s.connection_id,
            position,
            s.assign_membership_on_login,
            s.show_as_button,
            s.is_signup_enabled,
            s.is_enabled,
            s.organization_connection_name,
            s.organization_access_level.map(AccessLevel::as_str),
        ],
    )?;
    Ok(())
}

/// The tenant's connection `id` (name and strategy), if it has one.
fn tenant_connection(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    id: &str,
) -> Result<Option<Connection>, StoreError> {
    Ok(tx
        .query_row(
            "SELECT name, strategy FROM connections WHERE tenant_id = ?1 AND id = ?2",
            params![tenant.as_str(), id],
            |row| {
                Ok(Connection {
                    id: id.to_owned(),
                    name: row.get(0)?,
                    strategy: row.get(1)?,
                })
            },
        )
        .optional()?)
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[async_trait]
impl OrganizationStore for SqliteStore {
    async fn create_organization(
        &self,
        tenant: &TenantId,
        organization: &Organization,
    ) -> Result<Vec<Connection>, StoreError> {
        let (tenant, org) = (tenant.clone(), organization.clone());
        let record = organization.record_json().to_string();
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let enabled = org.spec.enabled_connections.as_deref().unwrap_or(&[]);
            let mut connections = Vec::with_capacity(enabled.len());
            for e in enabled {
                let Some(found) = tenant_connection(&tx, &tenant, &e.connection_id)? else {
                    return Err(StoreError::UnknownConnection(e.connection_id.clone()));
                };
                connections.push(found);
            }
            // `created_at` strictly increases within a tenant (writes are serialised), so the
            // creation order is the commit order and a checkpoint never skips a later create.
            tx.execute(
                "INSERT INTO organizations (tenant_id, id, name, record, created_at)
                 SELECT ?1, ?2, ?3, ?4, MAX(?5, COALESCE(MAX(created_at) + 1, ?5))
                 FROM organizations WHERE tenant_id = ?1",
                params![
                    tenant.as_str(),
                    org.id.as_str(),
                    org.spec.name,
                    record,
                    now_ms()
                ],
            )
            .map_err(|err| name_taken(err, &org.spec.name))?;
            for (position, e) in enabled.iter().enumerate() {
                let settings = OrganizationConnection::from(e);
                insert_connection(&tx, &tenant, &org.id, &settings, position as i64)?;
            }
            tx.commit()?;
            Ok(connections)
        })
        .await
    }

    async fn list_organizations(
        &self,
        tenant: &TenantId,
        offset: u64,
        limit: u64,
    ) -> Result<OrganizationPage, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            let total: i64 = tx.query_row(
                "SELECT COUNT(*) FROM organizations WHERE tenant_id = ?1",
                [tenant.as_str()],
                |row| row.get(0),
            )?;
            let mut stmt = tx.prepare(
                "SELECT id, record FROM organizations WHERE tenant_id = ?1
                 ORDER BY created_at, id LIMIT ?2 OFFSET ?3",
            )?;
            let rows = stmt.query_map(
                params![tenant.as_str(), to_i64(limit), to_i64(offset)],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
            )?;
            let mut organizations = Vec::new();
            for row in rows {
                let (id, record) = row?;
                organizations.push(parse_organization(&tenant, &id, &record)?);
            }
            Ok(OrganizationPage {
                organizations,
                total: Some(u64::try_from(total).unwrap_or(0)),
                next: None,
            })
        })
        .await
    }

    async fn organizations_after(
        &self,
        tenant: &TenantId,
        after: Option<&OrganizationCursor>,
        take: u32,
    ) -> Result<OrganizationPage, StoreError> {
        let tenant = tenant.clone();
        let (after_ms, after_id) = match after {
            Some(c) => (c.created_at_ms, c.id.as_str().to_owned()),
            None => (i64::MIN, String::new()),
        };
        self.read(move |conn, _| {
            let mut stmt = conn.prepare(
                "SELECT id, record, created_at FROM organizations
                 WHERE tenant_id = ?1 AND (created_at > ?2 OR (created_at = ?2 AND id > ?3))
                 ORDER BY created_at, id LIMIT ?4",
            )?;
            let rows = stmt.query_map(
                params![tenant.as_str(), after_ms, after_id, i64::from(take) + 1],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                },
            )?;
            let mut organizations = Vec::new();
            let mut last_created = i64::MIN;
            let mut more = false;
            for row in rows {
                let (id, record, created_at) = row?;
                if organizations.len() == take as usize {
                    more = true;
                    break;
                }
                organizations.push(parse_organization(&tenant, &id, &record)?);
                last_created = created_at;
            }
            let next = match organizations.last() {
                Some(last) if more => Some(OrganizationCursor {
                    created_at_ms: last_created,
                    id: last.id.clone(),
                }),
                _ => None,
            };
            Ok(OrganizationPage {
                organizations,
                total: None,
                next,
            })
        })
        .await
    }

    async fn organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
    ) -> Result<Organization, StoreError> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.read(move |conn, _| {
            let record: Option<String> = conn
                .query_row(
                    "SELECT record FROM organizations WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant.as_str(), id.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            let record = record.ok_or_else(|| StoreError::UnknownOrganization(id.to_string()))?;
            parse_organization(&tenant, id.as_str(), &record)
        })
        .await
    }

    async fn organization_by_name(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Organization, StoreError> {
        let (tenant, name) = (tenant.clone(), name.to_owned());
        self.read(move |conn, _| {
            let found: Option<(String, String)> = conn
                .query_row(
                    "SELECT id, record FROM organizations WHERE tenant_id = ?1 AND name = ?2",
                    params![tenant.as_str(), name],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            let (id, record) = found.ok_or(StoreError::UnknownOrganization(name))?;
            parse_organization(&tenant, &id, &record)
        })
        .await
    }

    async fn update_organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
        patch: &OrganizationPatch,
    ) -> Result<Organization, StoreError> {
        let (tenant, id, patch) = (tenant.clone(), id.clone(), patch.clone());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let record: Option<String> = tx
                .query_row(
                    "SELECT record FROM organizations WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant.as_str(), id.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            let record = record.ok_or_else(|| StoreError::UnknownOrganization(id.to_string()))?;
            let updated = patch.apply(&parse_organization(&tenant, id.as_str(), &record)?);
            tx.execute(
                "UPDATE organizations SET name = ?3, record = ?4 WHERE tenant_id = ?1 AND id = ?2",
                params![
                    tenant.as_str(),
                    id.as_str(),
                    updated.spec.name,
                    updated.record_json().to_string()
                ],
            )
            .map_err(|err| name_taken(err, &updated.spec.name))?;
            tx.commit()?;
            Ok(updated)
        })
        .await
    }

    async fn delete_organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
    ) -> Result<(), StoreError> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            tx.execute(
                "DELETE FROM organization_connections WHERE tenant_id = ?1 AND organization_id = ?2",
                params![tenant.as_str(), id.as_str()],
            )?;
            let deleted = tx.execute(
                "DELETE FROM organizations WHERE tenant_id = ?1 AND id = ?2",
                params![tenant.as_str(), id.as_str()],
            )?;
            if deleted == 0 {
                return Err(StoreError::UnknownOrganization(id.to_string()));
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn organization_connections(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        enabled: Option<bool>,
        offset: u64,
        limit: u64,
    ) -> Result<OrganizationConnectionPage, StoreError> {
        let (tenant, organization) = (tenant.clone(), organization.clone());
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            require_organization(&tx, &tenant, &organization)?;
            // ?3 is NULL (no filter) or the wanted is_enabled.
            let filter = "oc.tenant_id = ?1 AND oc.organization_id = ?2
                 AND (?3 IS NULL OR oc.is_enabled = ?3)";
            let total: i64 = tx.query_row(
                &format!("SELECT COUNT(*) FROM {ENTRY_FROM} WHERE {filter}"),
                params![tenant.as_str(), organization.as_str(), enabled],
                |row| row.get(0),
            )?;
            let mut stmt = tx.prepare(&format!(
                "SELECT {ENTRY_COLUMNS} FROM {ENTRY_FROM} WHERE {filter}
                 ORDER BY oc.position, oc.connection_id LIMIT ?4 OFFSET ?5"
            ))?;
            let rows = stmt.query_map(
                params![
                    tenant.as_str(),
                    organization.as_str(),
                    enabled,
                    to_i64(limit),
                    to_i64(offset)
                ],
                entry_from_row,
            )?;
            let mut entries = Vec::new();
            for row in rows {
                entries.push(checked_entry(&tenant, row?)?);
            }
            Ok(OrganizationConnectionPage {
                entries,
                total: u64::try_from(total).unwrap_or(0),
            })
        })
        .await
    }

    async fn organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection_id: &str,
        enabled_only: bool,
    ) -> Result<OrganizationConnectionEntry, StoreError> {
        let (tenant, organization) = (tenant.clone(), organization.clone());
        let connection_id = connection_id.to_owned();
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            read_entry(&tx, &tenant, &organization, &connection_id, enabled_only)
        })
        .await
    }

    async fn add_organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection: &OrganizationConnection,
    ) -> Result<OrganizationConnectionEntry, StoreError> {
        let (tenant, organization) = (tenant.clone(), organization.clone());
        let settings = connection.clone();
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            require_organization(&tx, &tenant, &organization)?;
            let Some(found) = tenant_connection(&tx, &tenant, &settings.connection_id)? else {
                return Err(StoreError::UnknownConnection(settings.connection_id));
            };
            let taken = tx
                .query_row(
                    "SELECT 1 FROM organization_connections
                     WHERE tenant_id = ?1 AND organization_id = ?2 AND connection_id = ?3",
                    params![
                        tenant.as_str(),
                        organization.as_str(),
                        settings.connection_id
                    ],
                    |_| Ok(()),
                )
                .optional()?;
            if taken.is_some() {
                return Err(StoreError::ConnectionAlreadyInOrganization(
                    settings.connection_id,
                ));
            }
            let position: i64 = tx.query_row(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM organization_connections
                 WHERE tenant_id = ?1 AND organization_id = ?2",
                params![tenant.as_str(), organization.as_str()],
                |row| row.get(0),
            )?;
            insert_connection(&tx, &tenant, &organization, &settings, position)?;
            tx.commit()?;
            Ok(OrganizationConnectionEntry {
                settings,
                connection: found,
            })
        })
        .await
    }

    async fn update_organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection_id: &str,
        patch: &OrganizationConnectionPatch,
        enabled_only: bool,
    ) -> Result<OrganizationConnectionEntry, StoreError> {
        let (tenant, organization) = (tenant.clone(), organization.clone());
        let (connection_id, patch) = (connection_id.to_owned(), patch.clone());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let mut entry = read_entry(&tx, &tenant, &organization, &connection_id, enabled_only)?;
            entry.settings = patch.apply(&entry.settings);
            write_settings(&tx, &tenant, &organization, &entry.settings)?;
            tx.commit()?;
            Ok(entry)
        })
        .await
    }

    async fn remove_organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection_id: &str,
        enabled_only: bool,
    ) -> Result<(), StoreError> {
        let (tenant, organization) = (tenant.clone(), organization.clone());
        let connection_id = connection_id.to_owned();
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            require_organization(&tx, &tenant, &organization)?;
            let removed = tx.execute(
                "DELETE FROM organization_connections
                 WHERE tenant_id = ?1 AND organization_id = ?2 AND connection_id = ?3
                   AND (is_enabled OR NOT ?4)",
                params![
                    tenant.as_str(),
                    organization.as_str(),
                    connection_id,
                    enabled_only
                ],
            )?;
            if removed == 0 {
                return Err(StoreError::ConnectionNotInOrganization(connection_id));
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }
}

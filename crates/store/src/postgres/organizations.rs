use async_trait::async_trait;
use netacl_model::{
    AccessLevel, Connection, Organization, OrganizationConnection, OrganizationConnectionPatch,
    OrganizationId, OrganizationPatch,
};
use tokio_postgres::{GenericClient, Row};

use super::{now_ms, read_snapshot, unique_violation, PostgresStore};
use crate::organizations::{parse_organization, stored_access_level};
use crate::{
    OrganizationConnectionEntry, OrganizationConnectionPage, OrganizationCursor, OrganizationPage,
    OrganizationStore, StoreError, TenantId,
};

/// The first key of the two-key advisory lock that serialises a tenant's organization creates.
const ORGANIZATION_LOCK: i32 = 0x6f72_6773; // "orgs"

/// The columns [`entry_from_row`] reads, in its order (`oc`: organization_connections, `c`:
/// connections).
const ENTRY_COLUMNS: &str = "oc.connection_id, oc.assign_membership_on_login, oc.show_as_button,
     oc.is_signup_enabled, oc.is_enabled, oc.organization_connection_name,
     oc.organization_access_level, c.name, c.strategy";

/// An organization's connection joined with the tenant's connection it names.
const ENTRY_FROM: &str = "organization_connections AS oc JOIN connections AS c
     ON c.tenant_id = oc.tenant_id AND c.id = oc.connection_id";

fn entry_from_row(tenant: &TenantId, row: &Row) -> Result<OrganizationConnectionEntry, StoreError> {
    let connection_id: String = row.get(0);
    let level: Option<&str> = row.get(6);
    Ok(OrganizationConnectionEntry {
        settings: OrganizationConnection {
            connection_id: connection_id.clone(),
            assign_membership_on_login: row.get(1),
            show_as_button: row.get(2),
            is_signup_enabled: row.get(3),
            is_enabled: row.get(4),
            organization_connection_name: row.get(5),
            organization_access_level: stored_access_level(tenant, &connection_id, level)?,
        },
        connection: Connection {
            id: connection_id,
            name: row.get(7),
            strategy: row.get(8),
        },
    })
}

fn name_taken(err: tokio_postgres::Error, name: &str) -> StoreError {
    match unique_violation(&err) {
        Some("organizations_name_key") => {
            StoreError::NameTaken(format!("organization name {name}"))
        }
        _ => StoreError::from(err),
    }
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Locks the organization's row for the rest of the transaction (so writes to one organization
/// and its connections apply one after the other, and a delete waits for them);
/// [`StoreError::UnknownOrganization`] when it does not exist.
async fn lock_organization(
    client: &impl GenericClient,
    tenant: &TenantId,
    organization: &OrganizationId,
) -> Result<String, StoreError> {
    client
        .query_opt(
            "SELECT record FROM organizations WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
            &[&tenant.as_str(), &organization.as_str()],
        )
        .await?
        .map(|row| row.get(0))
        .ok_or_else(|| StoreError::UnknownOrganization(organization.to_string()))
}

async fn require_organization(
    client: &impl GenericClient,
    tenant: &TenantId,
    organization: &OrganizationId,
) -> Result<(), StoreError> {
    client
        .query_opt(
            "SELECT 1 FROM organizations WHERE tenant_id = $1 AND id = $2",
            &[&tenant.as_str(), &organization.as_str()],
        )
        .await?
        .map(|_| ())
        .ok_or_else(|| StoreError::UnknownOrganization(organization.to_string()))
}

async fn read_entry(
    client: &impl GenericClient,
    tenant: &TenantId,
    organization: &OrganizationId,
    connection_id: &str,
    enabled_only: bool,
) -> Result<OrganizationConnectionEntry, StoreError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM {ENTRY_FROM}
                 WHERE oc.tenant_id = $1 AND oc.organization_id = $2 AND oc.connection_id = $3
                   AND (oc.is_enabled OR NOT $4)"
            ),
            &[
                &tenant.as_str(),
                &organization.as_str(),
                &connection_id,
                &enabled_only,
            ],
        )
        .await?
        .ok_or_else(|| StoreError::ConnectionNotInOrganization(connection_id.to_owned()))?;
    entry_from_row(tenant, &row)
}

/// The tenant's connection `id` (name and strategy), if it has one, share-locked until the
/// transaction ends (it cannot change name or strategy before we commit).
async fn tenant_connection(
    client: &impl GenericClient,
    tenant: &TenantId,
    id: &str,
) -> Result<Option<Connection>, StoreError> {
    Ok(client
        .query_opt(
            "SELECT name, strategy FROM connections WHERE tenant_id = $1 AND id = $2 FOR SHARE",
            &[&tenant.as_str(), &id],
        )
        .await?
        .map(|row| Connection {
            id: id.to_owned(),
            name: row.get(0),
            strategy: row.get(1),
        }))
}

async fn insert_connection(
    client: &impl GenericClient,
    tenant: &TenantId,
    organization: &OrganizationId,
    s: &OrganizationConnection,
    position: i32,
) -> Result<(), StoreError> {
    client
        .execute(
            "INSERT INTO organization_connections
             (tenant_id, organization_id, connection_id, position, assign_membership_on_login,
              show_as_button, is_signup_enabled, is_enabled, organization_connection_name,
              organization_access_level)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &tenant.as_str(),
                &organization.as_str(),
                &s.connection_id,
                &position,
                &s.assign_membership_on_login,
                &s.show_as_button,
                &s.is_signup_enabled,
                &s.is_enabled,
                &s.organization_connection_name,
                &s.organization_access_level.map(AccessLevel::as_str),
            ],
        )
        .await
        .map_err(|err| match unique_violation(&err) {
            Some("organization_connections_pkey") => {
                StoreError::ConnectionAlreadyInOrganization(s.connection_id.clone())
            }
            _ => StoreError::from(err),
        })?;
    Ok(())
}

fn organizations_of(tenant: &TenantId, rows: &[Row]) -> Result<Vec<Organization>, StoreError> {
    rows.iter()
        .map(|row| parse_organization(tenant, row.get(0), row.get(1)))
        .collect()
}

#[async_trait]
impl OrganizationStore for PostgresStore {
    async fn create_organization(
        &self,
        tenant: &TenantId,
        organization: &Organization,
    ) -> Result<Vec<Connection>, StoreError> {
        let record = organization.record_json().to_string();
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let enabled = organization
                .spec
                .enabled_connections
                .as_deref()
                .unwrap_or(&[]);
            let mut connections = Vec::with_capacity(enabled.len());
            for e in enabled {
                let Some(found) = tenant_connection(&*tx, tenant, &e.connection_id).await? else {
                    return Err(StoreError::UnknownConnection(e.connection_id.clone()));
                };
                connections.push(found);
            }
            // Creates of one tenant are serialised and `created_at` strictly increases, so the
            // creation order is the commit order and a checkpoint never skips a later create.
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&ORGANIZATION_LOCK, &tenant.as_str()],
            )
            .await?;
            tx.execute(
                "INSERT INTO organizations (tenant_id, id, name, record, created_at)
                 SELECT $1, $2, $3, $4, GREATEST($5::BIGINT, COALESCE(MAX(created_at) + 1, $5))
                 FROM organizations WHERE tenant_id = $1",
                &[
                    &tenant.as_str(),
                    &organization.id.as_str(),
                    &organization.spec.name,
                    &record,
                    &now_ms(),
                ],
            )
            .await
            .map_err(|err| name_taken(err, &organization.spec.name))?;
            for (position, e) in enabled.iter().enumerate() {
                let position = i32::try_from(position).unwrap_or(i32::MAX);
                let settings = OrganizationConnection::from(e);
                insert_connection(&*tx, tenant, &organization.id, &settings, position).await?;
            }
            tx.commit().await?;
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
        let (offset, limit) = (to_i64(offset), to_i64(limit));
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let total: i64 = tx
                .query_one(
                    "SELECT COUNT(*) FROM organizations WHERE tenant_id = $1",
                    &[&tenant.as_str()],
                )
                .await?
                .get(0);
            let rows = tx
                .query(
                    r#"SELECT id, record FROM organizations WHERE tenant_id = $1
                       ORDER BY created_at, id COLLATE "C" LIMIT $2 OFFSET $3"#,
                    &[&tenant.as_str(), &limit, &offset],
                )
                .await?;
            tx.commit().await?;
            Ok(OrganizationPage {
                organizations: organizations_of(tenant, &rows)?,
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
        let (after_ms, after_id) = match after {
            Some(c) => (c.created_at_ms, c.id.as_str().to_owned()),
            None => (i64::MIN, String::new()),
        };
        let limit = i64::from(take) + 1;
        self.call(|client| async move {
            let rows = client
                .query(
                    r#"SELECT id, record, created_at FROM organizations
                       WHERE tenant_id = $1
                         AND (created_at > $2 OR (created_at = $2 AND id COLLATE "C" > $3))
                       ORDER BY created_at, id COLLATE "C" LIMIT $4"#,
                    &[&tenant.as_str(), &after_ms, &after_id, &limit],
                )
                .await?;
            let more = rows.len() > take as usize;
            let served = &rows[..rows.len().min(take as usize)];
            let organizations = organizations_of(tenant, served)?;
            let next = match (served.last(), organizations.last()) {
                (Some(row), Some(last)) if more => Some(OrganizationCursor {
                    created_at_ms: row.get(2),
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
        self.call(|client| async move {
            let row = client
                .query_opt(
                    "SELECT id, record FROM organizations WHERE tenant_id = $1 AND id = $2",
                    &[&tenant.as_str(), &id.as_str()],
                )
                .await?
                .ok_or_else(|| StoreError::UnknownOrganization(id.to_string()))?;
            parse_organization(tenant, row.get(0), row.get(1))
        })
        .await
    }

    async fn organization_by_name(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Organization, StoreError> {
        self.call(|client| async move {
            let row = client
                .query_opt(
                    "SELECT id, record FROM organizations WHERE tenant_id = $1 AND name = $2",
                    &[&tenant.as_str(), &name],
                )
                .await?
                .ok_or_else(|| StoreError::UnknownOrganization(name.to_owned()))?;
            parse_organization(tenant, row.get(0), row.get(1))
        })
        .await
    }

    async fn update_organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
        patch: &OrganizationPatch,
    ) -> Result<Organization, StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let record = lock_organization(&*tx, tenant, id).await?;
            let updated = patch.apply(&parse_organization(tenant, id.as_str(), &record)?);
            tx.execute(
                "UPDATE organizations SET name = $3, record = $4 WHERE tenant_id = $1 AND id = $2",
                &[
                    &tenant.as_str(),
                    &id.as_str(),
                    &updated.spec.name,
                    &updated.record_json().to_string(),
                ],
            )
            .await
            .map_err(|err| name_taken(err, &updated.spec.name))?;
            tx.commit().await?;
            Ok(updated)
        })
        .await
    }

    async fn delete_organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
    ) -> Result<(), StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            lock_organization(&*tx, tenant, id).await?;
            tx.execute(
                "DELETE FROM organization_connections WHERE tenant_id = $1 AND organization_id = $2",
                &[&tenant.as_str(), &id.as_str()],
            )
            .await?;
            tx.execute(
                "DELETE FROM organizations WHERE tenant_id = $1 AND id = $2",
                &[&tenant.as_str(), &id.as_str()],
            )
            .await?;
            tx.commit().await?;
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
        let (offset, limit) = (to_i64(offset), to_i64(limit));
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            require_organization(&*tx, tenant, organization).await?;
            // $3 is NULL (no filter) or the wanted is_enabled.
            let filter = "oc.tenant_id = $1 AND oc.organization_id = $2
                 AND ($3::BOOLEAN IS NULL OR oc.is_enabled = $3)";
            let total: i64 = tx
                .query_one(
                    &format!("SELECT COUNT(*) FROM {ENTRY_FROM} WHERE {filter}"),
                    &[&tenant.as_str(), &organization.as_str(), &enabled],
                )
                .await?
                .get(0);
            let rows = tx
                .query(
                    &format!(
                        r#"SELECT {ENTRY_COLUMNS} FROM {ENTRY_FROM} WHERE {filter}
                           ORDER BY oc.position, oc.connection_id COLLATE "C"
                           LIMIT $4 OFFSET $5"#
                    ),
                    &[
                        &tenant.as_str(),
                        &organization.as_str(),
                        &enabled,
                        &limit,
                        &offset,
                    ],
                )
                .await?;
            tx.commit().await?;
            let entries = rows
                .iter()
                .map(|row| entry_from_row(tenant, row))
                .collect::<Result<Vec<_>, _>>()?;
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
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            require_organization(&*tx, tenant, organization).await?;
            let entry = read_entry(&*tx, tenant, organization, connection_id, enabled_only).await?;
            tx.commit().await?;
            Ok(entry)
        })
        .await
    }

    async fn add_organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection: &OrganizationConnection,
    ) -> Result<OrganizationConnectionEntry, StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            lock_organization(&*tx, tenant, organization).await?;
            let Some(found) = tenant_connection(&*tx, tenant, &connection.connection_id).await?
            else {
                return Err(StoreError::UnknownConnection(
                    connection.connection_id.clone(),
                ));
            };
            let position: i32 = tx
                .query_one(
                    "SELECT COALESCE(MAX(position) + 1, 0) FROM organization_connections
                     WHERE tenant_id = $1 AND organization_id = $2",
                    &[&tenant.as_str(), &organization.as_str()],
                )
                .await?
                .get(0);
            insert_connection(&*tx, tenant, organization, connection, position).await?;
            tx.commit().await?;
            Ok(OrganizationConnectionEntry {
                settings: connection.clone(),
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
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            lock_organization(&*tx, tenant, organization).await?;
            let mut entry =
                read_entry(&*tx, tenant, organization, connection_id, enabled_only).await?;
            entry.settings = patch.apply(&entry.settings);
            let s = &entry.settings;
            tx.execute(
                "UPDATE organization_connections SET assign_membership_on_login = $4,
                     show_as_button = $5, is_signup_enabled = $6, is_enabled = $7,
                     organization_connection_name = $8, organization_access_level = $9
                 WHERE tenant_id = $1 AND organization_id = $2 AND connection_id = $3",
                &[
                    &tenant.as_str(),
                    &organization.as_str(),
                    &connection_id,
                    &s.assign_membership_on_login,
                    &s.show_as_button,
                    &s.is_signup_enabled,
                    &s.is_enabled,
                    &s.organization_connection_name,
                    &s.organization_access_level.map(AccessLevel::as_str),
                ],
            )
            .await?;
            tx.commit().await?;
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
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            lock_organization(&*tx, tenant, organization).await?;
            let removed = tx
                .execute(
                    "DELETE FROM organization_connections
                     WHERE tenant_id = $1 AND organization_id = $2 AND connection_id = $3
                       AND (is_enabled OR NOT $4)",
                    &[
                        &tenant.as_str(),
                        &organization.as_str(),
                        &connection_id,
                        &enabled_only,
                    ],
                )
                .await?;
            if removed == 0 {
                return Err(StoreError::ConnectionNotInOrganization(
                    connection_id.to_owned(),
                ));
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

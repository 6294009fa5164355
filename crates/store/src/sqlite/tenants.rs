use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Transaction};

use super::{now_ms, to_version, SqliteStore};
use crate::tenant::TENANT_TABLES;
use crate::{StoreError, Tenant, TenantCredentials, TenantId, TenantRecord, TenantStore};

#[async_trait]
impl TenantStore for SqliteStore {
    async fn ensure_tenant(&self, tenant: &TenantId, domain: &str) -> Result<Tenant, StoreError> {
        let (tenant, domain) = (tenant.clone(), domain.to_owned());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            tx.execute(
                "INSERT INTO tenants (id, domain, acl_version, created_at) VALUES (?1, ?2, 0, ?3)
                 ON CONFLICT (id) DO UPDATE SET domain = excluded.domain",
                params![tenant.as_str(), domain, now_ms()],
            )?;
            let version = acl_version(&tx, &tenant)?;
            tx.commit()?;
            Ok(Tenant {
                id: tenant,
                domain,
                acl_version: version,
            })
        })
        .await
    }

    async fn tenant(&self, tenant: &TenantId) -> Result<Option<Tenant>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let row = conn
                .query_row(
                    "SELECT domain, acl_version FROM tenants WHERE id = ?1",
                    [tenant.as_str()],
                    |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
                )
                .optional()?;
            Ok(row.map(|(domain, version)| Tenant {
                id: tenant,
                domain,
                acl_version: to_version(version),
            }))
        })
        .await
    }

    async fn create_tenant(
        &self,
        tenant: &TenantId,
        domains: &[String],
        credentials: &TenantCredentials,
        created_at_ms: i64,
    ) -> Result<TenantRecord, StoreError> {
        let (tenant, domains, credentials) =
            (tenant.clone(), domains.to_vec(), credentials.clone());
        self.write(move |conn, _| {
            Self::create_tenant_in(conn, &tenant, &domains, &credentials, created_at_ms)
        })
        .await
    }

    async fn tenant_record(&self, tenant: &TenantId) -> Result<Option<TenantRecord>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let row = conn
                .query_row(
                    "SELECT domain, created_at FROM tenants WHERE id = ?1",
                    [tenant.as_str()],
                    |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
                )
                .optional()?;
            let Some((domain, created_at_ms)) = row else {
                return Ok(None);
            };
            let domains = domains(conn, &tenant)?;
            Ok(Some(TenantRecord {
                id: tenant,
                domain,
                domains,
                created_at_ms,
            }))
        })
        .await
    }

    async fn list_tenants(
        &self,
        after: Option<&TenantId>,
        limit: u32,
    ) -> Result<Vec<TenantRecord>, StoreError> {
        let after = after.map(|t| t.as_str().to_owned());
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            let rows = {
                let mut statement = tx.prepare_cached(
                    "SELECT id, domain, created_at FROM tenants
                     WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2",
                )?;
                let rows = statement.query_map(params![after, i64::from(limit)], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })?;
                rows.collect::<Result<Vec<_>, _>>()?
            };
            let mut records = Vec::with_capacity(rows.len());
            for (id, domain, created_at_ms) in rows {
                let id = TenantId::new(&id).ok_or_else(|| StoreError::Corrupt {
                    tenant: id.clone(),
                    id: "tenants".into(),
                    reason: "not a tenant id".into(),
                })?;
                let domains = domains(&tx, &id)?;
                records.push(TenantRecord {
                    id,
                    domain,
                    domains,
                    created_at_ms,
                });
            }
            tx.commit()?;
            Ok(records)
        })
        .await
    }

    async fn delete_tenant(&self, tenant: &TenantId) -> Result<(), StoreError> {
        let tenant = tenant.clone();
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            for table in TENANT_TABLES {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE tenant_id = ?1"),
                    [tenant.as_str()],
                )?;
            }
            let deleted = tx.execute("DELETE FROM tenants WHERE id = ?1", [tenant.as_str()])?;
            if deleted == 0 {
                return Err(StoreError::NotFound(format!("tenant {tenant}")));
            }
            bump_generation(&tx)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn tenants_generation(&self) -> Result<u64, StoreError> {
        self.read(move |conn, _| {
            let generation = conn.query_row(
                "SELECT generation FROM tenants_generation WHERE id = 1",
                [],
                |row| row.get::<_, i64>(0),
            )?;
            Ok(to_version(generation))
        })
        .await
    }
}

/// The tenant's ACL version inside a transaction; `NotFound` when the tenant does not exist.
pub(super) fn acl_version(tx: &Transaction<'_>, tenant: &TenantId) -> Result<u64, StoreError> {
    tx.query_row(
        "SELECT acl_version FROM tenants WHERE id = ?1",
        [tenant.as_str()],
        |row| row.get::<_, i64>(0),
    )
    .optional()?
    .map(to_version)
    .ok_or_else(|| StoreError::NotFound(format!("tenant {tenant}")))
}

/// Checks the tenant's ACL version against `expected` and bumps it; returns the new version.
pub(super) fn bump_acl_version(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    expected: u64,
) -> Result<u64, StoreError> {
    let actual = acl_version(tx, tenant)?;
    if actual != expected {
        return Err(StoreError::VersionConflict { expected, actual });
    }
    let next = expected + 1;
    let stored = i64::try_from(next)
        .map_err(|_| StoreError::Unavailable("rule-set version overflow".into()))?;
    tx.execute(
        "UPDATE tenants SET acl_version = ?1 WHERE id = ?2",
        params![stored, tenant.as_str()],
    )?;
    Ok(next)
}

/// The tenant's domains in order.
fn domains(conn: &rusqlite::Connection, tenant: &TenantId) -> Result<Vec<String>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT domain FROM tenant_domains WHERE tenant_id = ?1 ORDER BY position",
    )?;
    let rows = statement.query_map([tenant.as_str()], |row| row.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn bump_generation(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE tenants_generation SET generation = generation + 1 WHERE id = 1",
        [],
    )?;
    Ok(())
}

impl SqliteStore {
    pub(super) fn create_tenant_in(
        conn: &mut rusqlite::Connection,
        tenant: &TenantId,
        domains: &[String],
        credentials: &TenantCredentials,
        created_at_ms: i64,
    ) -> Result<TenantRecord, StoreError> {
        let scopes = serde_json::to_string(&credentials.client.scopes)
            .map_err(|err| StoreError::Unavailable(err.to_string()))?;
        let Some(first) = domains.first() else {
            return Err(StoreError::NotFound("a domain for the tenant".into()));
        };
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let exists = tx
            .query_row(
                "SELECT 1 FROM tenants WHERE id = ?1",
                [tenant.as_str()],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if exists {
            return Err(StoreError::TenantExists(tenant.to_string()));
        }
        tx.execute(
            "INSERT INTO tenants (id, domain, acl_version, created_at) VALUES (?1, ?2, 0, ?3)",
            params![tenant.as_str(), first, created_at_ms],
        )?;
        for (position, domain) in domains.iter().enumerate() {
            let inserted = tx.execute(
                "INSERT INTO tenant_domains (domain, tenant_id, position) VALUES (?1, ?2, ?3)
                 ON CONFLICT (domain) DO NOTHING",
                params![domain, tenant.as_str(), position as i64],
            )?;
            if inserted == 0 {
                return Err(StoreError::DomainTaken(domain.clone()));
            }
        }
        super::credentials::insert_key(&tx, tenant, &credentials.signing_key)?;
        let client = &credentials.client;
        tx.execute(
            "INSERT INTO clients (tenant_id, client_id, secret_hash, scopes, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                tenant.as_str(),
                client.client_id,
                client.secret_hash,
                scopes,
                client.created_at_ms
            ],
        )?;
        bump_generation(&tx)?;
        tx.commit()?;
        Ok(TenantRecord {
            id: tenant.clone(),
            domain: first.clone(),
            domains: domains.to_vec(),
            created_at_ms,
        })
    }
}

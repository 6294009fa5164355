use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Transaction};

use super::{now_ms, to_version, SqliteStore};
use crate::{StoreError, Tenant, TenantId, TenantStore};

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

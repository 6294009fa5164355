use async_trait::async_trait;
use tokio_postgres::GenericClient;

use super::{from_version, now_ms, to_version, PostgresStore};
use crate::{StoreError, Tenant, TenantId, TenantStore};

#[async_trait]
impl TenantStore for PostgresStore {
    async fn ensure_tenant(&self, tenant: &TenantId, domain: &str) -> Result<Tenant, StoreError> {
        self.call(|client| async move {
            let row = client
                .query_one(
                    "INSERT INTO tenants (id, domain, acl_version, created_at)
                     VALUES ($1, $2, 0, $3)
                     ON CONFLICT (id) DO UPDATE SET domain = excluded.domain
                     RETURNING acl_version",
                    &[&tenant.as_str(), &domain, &now_ms()],
                )
                .await?;
            Ok(Tenant {
                id: tenant.clone(),
                domain: domain.to_owned(),
                acl_version: to_version(row.get(0)),
            })
        })
        .await
    }

    async fn tenant(&self, tenant: &TenantId) -> Result<Option<Tenant>, StoreError> {
        self.call(|client| async move {
            let row = client
                .query_opt(
                    "SELECT domain, acl_version FROM tenants WHERE id = $1",
                    &[&tenant.as_str()],
                )
                .await?;
            Ok(row.map(|row| Tenant {
                id: tenant.clone(),
                domain: row.get(0),
                acl_version: to_version(row.get(1)),
            }))
        })
        .await
    }
}

/// The tenant's ACL version; `NotFound` when the tenant does not exist.
pub(super) async fn acl_version(
    client: &impl GenericClient,
    tenant: &TenantId,
) -> Result<u64, StoreError> {
    client
        .query_opt(
            "SELECT acl_version FROM tenants WHERE id = $1",
            &[&tenant.as_str()],
        )
        .await?
        .map(|row| to_version(row.get(0)))
        .ok_or_else(|| StoreError::NotFound(format!("tenant {tenant}")))
}

/// Bumps the tenant's ACL version from `expected` to `expected + 1` and queues the change
/// notification, inside the caller's transaction; returns the new version. The `UPDATE` takes the
/// tenant row's lock, so a concurrent writer waits for this transaction and then finds the
/// version moved on ([`StoreError::VersionConflict`]).
pub(super) async fn bump_acl_version(
    tx: &impl GenericClient,
    tenant: &TenantId,
    expected: u64,
) -> Result<u64, StoreError> {
    let next = expected
        .checked_add(1)
        .ok_or_else(|| StoreError::Unavailable("rule-set version overflow".into()))?;
    let updated = tx
        .execute(
            "UPDATE tenants SET acl_version = $3 WHERE id = $1 AND acl_version = $2",
            &[
                &tenant.as_str(),
                &from_version(expected)?,
                &from_version(next)?,
            ],
        )
        .await?;
    if updated == 0 {
        let actual = acl_version(tx, tenant).await?;
        return Err(StoreError::VersionConflict { expected, actual });
    }
    let payload = format!("{tenant}:{next}");
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&super::CHANGES_CHANNEL, &payload],
    )
    .await?;
    Ok(next)
}

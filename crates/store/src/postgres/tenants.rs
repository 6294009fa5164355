use async_trait::async_trait;
use tokio_postgres::GenericClient;

use super::{from_version, now_ms, read_snapshot, to_version, unique_violation, PostgresStore};
use crate::tenant::TENANT_TABLES;
use crate::{StoreError, Tenant, TenantCredentials, TenantId, TenantRecord, TenantStore};

/// The payload of a tenant created or deleted, on [`super::CHANGES_CHANNEL`].
pub(super) const TENANTS_PAYLOAD: &str = "tenants";

/// The tenant's domains in order.
async fn domains(client: &impl GenericClient, tenant: &str) -> Result<Vec<String>, StoreError> {
    let rows = client
        .query(
            "SELECT domain FROM tenant_domains WHERE tenant_id = $1 ORDER BY position",
            &[&tenant],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Bumps the tenants generation and queues the `tenants` notice, inside the caller's transaction.
async fn bump_generation(tx: &impl GenericClient) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE tenants_generation SET generation = generation + 1 WHERE id = 1",
        &[],
    )
    .await?;
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&super::CHANGES_CHANNEL, &TENANTS_PAYLOAD],
    )
    .await?;
    Ok(())
}

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

    async fn create_tenant(
        &self,
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
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            tx.execute(
                "INSERT INTO tenants (id, domain, acl_version, created_at) VALUES ($1, $2, 0, $3)",
                &[&tenant.as_str(), first, &created_at_ms],
            )
            .await
            .map_err(|err| match unique_violation(&err) {
                Some("tenants_pkey") => StoreError::TenantExists(tenant.to_string()),
                _ => StoreError::from(err),
            })?;
            for (position, domain) in domains.iter().enumerate() {
                let position = i32::try_from(position).unwrap_or(i32::MAX);
                tx.execute(
                    "INSERT INTO tenant_domains (domain, tenant_id, position) VALUES ($1, $2, $3)",
                    &[domain, &tenant.as_str(), &position],
                )
                .await
                .map_err(|err| match unique_violation(&err) {
                    Some("tenant_domains_pkey") => StoreError::DomainTaken(domain.clone()),
                    _ => StoreError::from(err),
                })?;
            }
            super::credentials::insert_key(&tx, tenant, &credentials.signing_key).await?;
            let client = &credentials.client;
            tx.execute(
                "INSERT INTO clients (tenant_id, client_id, secret_hash, scopes, created_at)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &tenant.as_str(),
                    &client.client_id,
                    &client.secret_hash,
                    &scopes,
                    &client.created_at_ms,
                ],
            )
            .await?;
            bump_generation(&*tx).await?;
            tx.commit().await?;
            Ok(TenantRecord {
                id: tenant.clone(),
                domain: first.clone(),
                domains: domains.to_vec(),
                created_at_ms,
            })
        })
        .await
    }

    async fn tenant_record(&self, tenant: &TenantId) -> Result<Option<TenantRecord>, StoreError> {
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let row = tx
                .query_opt(
                    "SELECT domain, created_at FROM tenants WHERE id = $1",
                    &[&tenant.as_str()],
                )
                .await?;
            let Some(row) = row else {
                return Ok(None);
            };
            let domains = domains(&*tx, tenant.as_str()).await?;
            tx.commit().await?;
            Ok(Some(TenantRecord {
                id: tenant.clone(),
                domain: row.get(0),
                domains,
                created_at_ms: row.get(1),
            }))
        })
        .await
    }

    async fn list_tenants(
        &self,
        after: Option<&TenantId>,
        limit: u32,
    ) -> Result<Vec<TenantRecord>, StoreError> {
        let after = after.map(TenantId::as_str);
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let rows = tx
                .query(
                    "SELECT t.id, t.domain, t.created_at,
                            COALESCE(array_agg(d.domain ORDER BY d.position)
                                     FILTER (WHERE d.domain IS NOT NULL), '{}')
                     FROM tenants AS t LEFT JOIN tenant_domains AS d ON d.tenant_id = t.id
                     WHERE $1::TEXT IS NULL OR t.id COLLATE \"C\" > $1::TEXT COLLATE \"C\"
                     GROUP BY t.id, t.domain, t.created_at
                     ORDER BY t.id COLLATE \"C\" LIMIT $2",
                    &[&after, &i64::from(limit)],
                )
                .await?;
            tx.commit().await?;
            rows.iter()
                .map(|row| {
                    let id: String = row.get(0);
                    let id = TenantId::new(&id).ok_or_else(|| StoreError::Corrupt {
                        tenant: id.clone(),
                        id: "tenants".into(),
                        reason: "not a tenant id".into(),
                    })?;
                    Ok(TenantRecord {
                        id,
                        domain: row.get(1),
                        domains: row.get(3),
                        created_at_ms: row.get(2),
                    })
                })
                .collect()
        })
        .await
    }

    async fn delete_tenant(&self, tenant: &TenantId) -> Result<(), StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            // The tenant row's lock first: a writer of this tenant (which bumps its version
            // under that lock) finishes before, or finds the tenant gone after.
            let locked = tx
                .query_opt(
                    "SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE",
                    &[&tenant.as_str()],
                )
                .await?;
            if locked.is_none() {
                return Err(StoreError::NotFound(format!("tenant {tenant}")));
            }
            for table in TENANT_TABLES {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE tenant_id = $1"),
                    &[&tenant.as_str()],
                )
                .await?;
            }
            tx.execute("DELETE FROM tenants WHERE id = $1", &[&tenant.as_str()])
                .await?;
            bump_generation(&*tx).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn tenants_generation(&self) -> Result<u64, StoreError> {
        self.call(|client| async move {
            let row = client
                .query_one(
                    "SELECT generation FROM tenants_generation WHERE id = 1",
                    &[],
                )
                .await?;
            Ok(to_version(row.get(0)))
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

use async_trait::async_trait;

use super::{unique_violation, PostgresStore};
use crate::{CredentialStore, StoreError, StoredClient, StoredSigningKey, TenantId};

/// The first key of the two-key advisory locks taken per tenant for signing-key set-up.
const SIGNING_KEY_LOCK: i32 = 0x6b65_7973; // "keys"

const KEY_COLUMNS: &str =
    "kid, private_key, cert_pem, created_at, current_since, current_until, revoked_at";

fn key_row(row: &tokio_postgres::Row) -> StoredSigningKey {
    StoredSigningKey {
        kid: row.get(0),
        private_key: row.get(1),
        cert_pem: row.get(2),
        created_at_ms: row.get(3),
        current_since_ms: row.get(4),
        current_until_ms: row.get(5),
        revoked_at_ms: row.get(6),
    }
}

/// Signing-key changes of one tenant, one at a time.
async fn lock_keys(
    tx: &tokio_postgres::Transaction<'_>,
    tenant: &TenantId,
) -> Result<(), tokio_postgres::Error> {
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&SIGNING_KEY_LOCK, &tenant.as_str()],
    )
    .await
    .map(drop)
}

async fn all_keys(
    tx: &tokio_postgres::Transaction<'_>,
    tenant: &TenantId,
) -> Result<Vec<StoredSigningKey>, tokio_postgres::Error> {
    let rows = tx
        .query(
            &format!(
                "SELECT {KEY_COLUMNS} FROM signing_keys
                 WHERE tenant_id = $1 ORDER BY created_at, kid COLLATE \"C\""
            ),
            &[&tenant.as_str()],
        )
        .await?;
    Ok(rows.iter().map(key_row).collect())
}

pub(super) async fn insert_key(
    client: &tokio_postgres::Transaction<'_>,
    tenant: &TenantId,
    key: &StoredSigningKey,
) -> Result<u64, tokio_postgres::Error> {
    client
        .execute(
            &format!(
                "INSERT INTO signing_keys (tenant_id, {KEY_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            ),
            &[
                &tenant.as_str(),
                &key.kid,
                &key.private_key,
                &key.cert_pem,
                &key.created_at_ms,
                &key.current_since_ms,
                &key.current_until_ms,
                &key.revoked_at_ms,
            ],
        )
        .await
}

/// Tells the nodes listening that the tenant's signing keys changed (sent at commit).
async fn notify_keys(
    tx: &tokio_postgres::Transaction<'_>,
    tenant: &TenantId,
) -> Result<(), tokio_postgres::Error> {
    let payload = format!("{tenant}:{}", super::listen::KEYS_SUFFIX);
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&super::CHANGES_CHANNEL, &payload],
    )
    .await
    .map(drop)
}

#[async_trait]
impl CredentialStore for PostgresStore {
    async fn signing_keys(&self, tenant: &TenantId) -> Result<Vec<StoredSigningKey>, StoreError> {
        self.call(|client| async move {
            let rows = client
                .query(
                    &format!(
                        "SELECT {KEY_COLUMNS} FROM signing_keys
                         WHERE tenant_id = $1 ORDER BY created_at, kid COLLATE \"C\""
                    ),
                    &[&tenant.as_str()],
                )
                .await?;
            Ok(rows.iter().map(key_row).collect())
        })
        .await
    }

    async fn add_signing_key(
        &self,
        tenant: &TenantId,
        key: &StoredSigningKey,
    ) -> Result<(), StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            insert_key(&tx, tenant, key)
                .await
                .map_err(|err| match unique_violation(&err) {
                    Some(_) => StoreError::Setup(format!("signing key {} exists", key.kid)),
                    None => err.into(),
                })?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn ensure_signing_key(
        &self,
        tenant: &TenantId,
        candidate: &StoredSigningKey,
    ) -> Result<StoredSigningKey, StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            // Nodes starting together queue here; the first inserts, the others read its key.
            lock_keys(&tx, tenant).await?;
            let keys = all_keys(&tx, tenant).await?;
            let chosen = match crate::current_key(&keys) {
                Some(current) => current.clone(),
                None => {
                    insert_key(&tx, tenant, candidate).await?;
                    candidate.clone()
                }
            };
            tx.commit().await?;
            Ok(chosen)
        })
        .await
    }

    async fn rotate_signing_key(
        &self,
        tenant: &TenantId,
        expected_current: &str,
        next: &StoredSigningKey,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            lock_keys(&tx, tenant).await?;
            let keys = all_keys(&tx, tenant).await?;
            let plan = crate::credentials::plan_rotation(&keys, expected_current, &next.kid)?;
            for kid in &plan.retire {
                tx.execute(
                    "UPDATE signing_keys SET current_until = $3
                     WHERE tenant_id = $1 AND kid = $2 AND current_until IS NULL",
                    &[&tenant.as_str(), kid, &at_ms],
                )
                .await?;
            }
            if plan.exists {
                tx.execute(
                    "UPDATE signing_keys SET current_since = $3, current_until = NULL
                     WHERE tenant_id = $1 AND kid = $2",
                    &[&tenant.as_str(), &next.kid, &at_ms],
                )
                .await?;
            } else {
                let mut row = next.clone();
                row.current_since_ms = Some(at_ms);
                row.current_until_ms = None;
                row.revoked_at_ms = None;
                insert_key(&tx, tenant, &row).await?;
            }
            notify_keys(&tx, tenant).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn revoke_signing_key(
        &self,
        tenant: &TenantId,
        kid: &str,
        at_ms: i64,
    ) -> Result<StoredSigningKey, StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            lock_keys(&tx, tenant).await?;
            let keys = all_keys(&tx, tenant).await?;
            crate::credentials::check_revocation(&keys, kid)?;
            tx.execute(
                "UPDATE signing_keys SET revoked_at = $3
                 WHERE tenant_id = $1 AND kid = $2 AND revoked_at IS NULL",
                &[&tenant.as_str(), &kid, &at_ms],
            )
            .await?;
            let row = tx
                .query_one(
                    &format!(
                        "SELECT {KEY_COLUMNS} FROM signing_keys WHERE tenant_id = $1 AND kid = $2"
                    ),
                    &[&tenant.as_str(), &kid],
                )
                .await?;
            notify_keys(&tx, tenant).await?;
            tx.commit().await?;
            Ok(key_row(&row))
        })
        .await
    }

    async fn seal_signing_key(
        &self,
        tenant: &TenantId,
        kid: &str,
        expected_private_key: &str,
        private_key: &str,
        cert_pem: &str,
    ) -> Result<bool, StoreError> {
        self.call(|client| async move {
            let changed = client
                .execute(
                    "UPDATE signing_keys SET private_key = $4, cert_pem = $5
                     WHERE tenant_id = $1 AND kid = $2 AND private_key = $3",
                    &[
                        &tenant.as_str(),
                        &kid,
                        &expected_private_key,
                        &private_key,
                        &cert_pem,
                    ],
                )
                .await?;
            Ok(changed > 0)
        })
        .await
    }

    async fn clients(&self, tenant: &TenantId) -> Result<Vec<StoredClient>, StoreError> {
        self.call(|client| async move {
            let rows = client
                .query(
                    "SELECT client_id, secret_hash, scopes, created_at FROM clients
                     WHERE tenant_id = $1 ORDER BY client_id",
                    &[&tenant.as_str()],
                )
                .await?;
            let mut clients = Vec::with_capacity(rows.len());
            for row in rows {
                let client_id: String = row.get(0);
                let scopes: &str = row.get(2);
                let scopes: Vec<String> =
                    serde_json::from_str(scopes).map_err(|err| StoreError::Corrupt {
                        tenant: tenant.to_string(),
                        id: client_id.clone(),
                        reason: format!("scopes: {err}"),
                    })?;
                clients.push(StoredClient {
                    client_id,
                    secret_hash: row.get(1),
                    scopes,
                    created_at_ms: row.get(3),
                });
            }
            Ok(clients)
        })
        .await
    }

    async fn put_client(&self, tenant: &TenantId, client: &StoredClient) -> Result<(), StoreError> {
        let scopes = serde_json::to_string(&client.scopes)
            .map_err(|err| StoreError::Unavailable(err.to_string()))?;
        self.call(|db| async move {
            db.execute(
                "INSERT INTO clients (tenant_id, client_id, secret_hash, scopes, created_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant_id, client_id) DO UPDATE
                 SET secret_hash = excluded.secret_hash, scopes = excluded.scopes",
                &[
                    &tenant.as_str(),
                    &client.client_id,
                    &client.secret_hash,
                    &scopes,
                    &client.created_at_ms,
                ],
            )
            .await?;
            Ok(())
        })
        .await
    }
}

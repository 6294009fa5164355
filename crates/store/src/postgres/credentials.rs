use async_trait::async_trait;

use super::{unique_violation, PostgresStore};
use crate::{CredentialStore, StoreError, StoredClient, StoredSigningKey, TenantId};

/// The first key of the two-key advisory locks taken per tenant for signing-key set-up.
const SIGNING_KEY_LOCK: i32 = 0x6b65_7973; // "keys"

#[async_trait]
impl CredentialStore for PostgresStore {
    async fn signing_keys(&self, tenant: &TenantId) -> Result<Vec<StoredSigningKey>, StoreError> {
        self.call(|client| async move {
            let rows = client
                .query(
                    "SELECT kid, private_key_pem, created_at FROM signing_keys
                     WHERE tenant_id = $1 ORDER BY created_at, kid",
                    &[&tenant.as_str()],
                )
                .await?;
            Ok(rows
                .into_iter()
                .map(|row| StoredSigningKey {
                    kid: row.get(0),
                    private_key_pem: row.get(1),
                    created_at_ms: row.get(2),
                })
                .collect())
        })
        .await
    }

    async fn add_signing_key(
        &self,
        tenant: &TenantId,
        key: &StoredSigningKey,
    ) -> Result<(), StoreError> {
        self.call(|client| async move {
            client
                .execute(
                    "INSERT INTO signing_keys (tenant_id, kid, private_key_pem, created_at)
                     VALUES ($1, $2, $3, $4)",
                    &[
                        &tenant.as_str(),
                        &key.kid,
                        &key.private_key_pem,
                        &key.created_at_ms,
                    ],
                )
                .await
                .map_err(|err| match unique_violation(&err) {
                    Some(_) => StoreError::Setup(format!("signing key {} exists", key.kid)),
                    None => err.into(),
                })?;
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
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&SIGNING_KEY_LOCK, &tenant.as_str()],
            )
            .await?;
            tx.execute(
                "INSERT INTO signing_keys (tenant_id, kid, private_key_pem, created_at)
                 SELECT $1, $2, $3, $4
                 WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE tenant_id = $1)",
                &[
                    &tenant.as_str(),
                    &candidate.kid,
                    &candidate.private_key_pem,
                    &candidate.created_at_ms,
                ],
            )
            .await?;
            let row = tx
                .query_one(
                    "SELECT kid, private_key_pem, created_at FROM signing_keys
                     WHERE tenant_id = $1 ORDER BY created_at DESC, kid DESC LIMIT 1",
                    &[&tenant.as_str()],
                )
                .await?;
            tx.commit().await?;
            Ok(StoredSigningKey {
                kid: row.get(0),
                private_key_pem: row.get(1),
                created_at_ms: row.get(2),
            })
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

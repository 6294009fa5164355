use async_trait::async_trait;
use rusqlite::params;

use super::SqliteStore;
use crate::{CredentialStore, StoreError, StoredClient, StoredSigningKey, TenantId};

#[async_trait]
impl CredentialStore for SqliteStore {
    async fn signing_keys(&self, tenant: &TenantId) -> Result<Vec<StoredSigningKey>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let mut stmt = conn.prepare(
                "SELECT kid, private_key_pem, created_at FROM signing_keys
                 WHERE tenant_id = ?1 ORDER BY created_at, kid",
            )?;
            let rows = stmt.query_map([tenant.as_str()], |row| {
                Ok(StoredSigningKey {
                    kid: row.get(0)?,
                    private_key_pem: row.get(1)?,
                    created_at_ms: row.get(2)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn add_signing_key(
        &self,
        tenant: &TenantId,
        key: &StoredSigningKey,
    ) -> Result<(), StoreError> {
        let (tenant, key) = (tenant.clone(), key.clone());
        self.write(move |conn, _| {
            conn.execute(
                "INSERT INTO signing_keys (tenant_id, kid, private_key_pem, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![
                    tenant.as_str(),
                    key.kid,
                    key.private_key_pem,
                    key.created_at_ms
                ],
            )
            .map_err(|err| match super::network_acls::constraint_message(&err) {
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
        let (tenant, key) = (tenant.clone(), candidate.clone());
        self.write(move |conn, _| {
            // IMMEDIATE: the write lock first, so two processes on one file decide in turn.
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            tx.execute(
                "INSERT INTO signing_keys (tenant_id, kid, private_key_pem, created_at)
                 SELECT ?1, ?2, ?3, ?4
                 WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE tenant_id = ?1)",
                params![
                    tenant.as_str(),
                    key.kid,
                    key.private_key_pem,
                    key.created_at_ms
                ],
            )?;
            let newest = tx.query_row(
                "SELECT kid, private_key_pem, created_at FROM signing_keys
                 WHERE tenant_id = ?1 ORDER BY created_at DESC, kid DESC LIMIT 1",
                [tenant.as_str()],
                |row| {
                    Ok(StoredSigningKey {
                        kid: row.get(0)?,
                        private_key_pem: row.get(1)?,
                        created_at_ms: row.get(2)?,
                    })
                },
            )?;
            tx.commit()?;
            Ok(newest)
        })
        .await
    }

    async fn clients(&self, tenant: &TenantId) -> Result<Vec<StoredClient>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let mut stmt = conn.prepare(
                "SELECT client_id, secret_hash, scopes, created_at FROM clients
                 WHERE tenant_id = ?1 ORDER BY client_id",
            )?;
            let rows = stmt.query_map([tenant.as_str()], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                ))
            })?;
            let mut clients = Vec::new();
            for row in rows {
                let (client_id, secret_hash, scopes, created_at_ms) = row?;
                let scopes: Vec<String> =
                    serde_json::from_str(&scopes).map_err(|err| StoreError::Corrupt {
                        tenant: tenant.to_string(),
                        id: client_id.clone(),
                        reason: format!("scopes: {err}"),
                    })?;
                clients.push(StoredClient {
                    client_id,
                    secret_hash,
                    scopes,
                    created_at_ms,
                });
            }
            Ok(clients)
        })
        .await
    }

    async fn put_client(&self, tenant: &TenantId, client: &StoredClient) -> Result<(), StoreError> {
        let (tenant, client) = (tenant.clone(), client.clone());
        let scopes = serde_json::to_string(&client.scopes)
            .map_err(|err| StoreError::Unavailable(err.to_string()))?;
        self.write(move |conn, _| {
            conn.execute(
                "INSERT INTO clients (tenant_id, client_id, secret_hash, scopes, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant_id, client_id) DO UPDATE
                 SET secret_hash = excluded.secret_hash, scopes = excluded.scopes",
                params![
                    tenant.as_str(),
                    client.client_id,
                    client.secret_hash,
                    scopes,
                    client.created_at_ms
                ],
            )?;
            Ok(())
        })
        .await
    }
}

use async_trait::async_trait;
use rusqlite::params;

use super::SqliteStore;
use crate::{CredentialStore, StoreError, StoredClient, StoredSigningKey, TenantId};
use zeroize::Zeroizing;

const KEY_COLUMNS: &str =
    "kid, private_key, cert_pem, created_at, current_since, current_until, revoked_at";

fn key_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredSigningKey> {
    Ok(StoredSigningKey {
        kid: row.get(0)?,
        private_key: row.get(1)?,
        cert_pem: row.get(2)?,
        created_at_ms: row.get(3)?,
        current_since_ms: row.get(4)?,
        current_until_ms: row.get(5)?,
        revoked_at_ms: row.get(6)?,
    })
}

fn all_keys(
    conn: &rusqlite::Connection,
    tenant: &TenantId,
) -> Result<Vec<StoredSigningKey>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {KEY_COLUMNS} FROM signing_keys WHERE tenant_id = ?1 ORDER BY created_at, kid"
    ))?;
    let rows = stmt.query_map([tenant.as_str()], key_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

pub(super) fn insert_key(
    conn: &rusqlite::Connection,
    tenant: &TenantId,
    key: &StoredSigningKey,
) -> rusqlite::Result<usize> {
    conn.execute(
        &format!(
            "INSERT INTO signing_keys (tenant_id, {KEY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        ),
        params![
            tenant.as_str(),
            key.kid,
            key.private_key,
            key.cert_pem,
            key.created_at_ms,
            key.current_since_ms,
            key.current_until_ms,
            key.revoked_at_ms
        ],
    )
}

#[async_trait]
impl CredentialStore for SqliteStore {
    async fn signing_keys(&self, tenant: &TenantId) -> Result<Vec<StoredSigningKey>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {KEY_COLUMNS} FROM signing_keys
                 WHERE tenant_id = ?1 ORDER BY created_at, kid"
            ))?;
            let rows = stmt.query_map([tenant.as_str()], key_row)?;
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
            insert_key(conn, &tenant, &key).map_err(|err| {
                match super::network_acls::constraint_message(&err) {
                    Some(_) => StoreError::Setup(format!("signing key {} exists", key.kid)),
                    None => err.into(),
                }
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
            let keys = all_keys(&tx, &tenant)?;
            let chosen = match crate::current_key(&keys) {
                Some(current) => current.clone(),
                None => {
                    insert_key(&tx, &tenant, &key)?;
                    key
                }
            };
            tx.commit()?;
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
        let (tenant, next, expected) = (tenant.clone(), next.clone(), expected_current.to_owned());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let keys = all_keys(&tx, &tenant)?;
            let plan = crate::credentials::plan_rotation(&keys, &expected, &next.kid)?;
            for kid in plan.retire {
                tx.execute(
                    "UPDATE signing_keys SET current_until = ?3
                     WHERE tenant_id = ?1 AND kid = ?2 AND current_until IS NULL",
                    params![tenant.as_str(), kid, at_ms],
                )?;
            }
            if plan.exists {
                tx.execute(
                    "UPDATE signing_keys SET current_since = ?3, current_until = NULL
                     WHERE tenant_id = ?1 AND kid = ?2",
                    params![tenant.as_str(), next.kid, at_ms],
                )?;
            } else {
                let mut row = next.clone();
                row.current_since_ms = Some(at_ms);
                row.current_until_ms = None;
                row.revoked_at_ms = None;
                insert_key(&tx, &tenant, &row)?;
            }
            tx.commit()?;
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
        let (tenant, kid) = (tenant.clone(), kid.to_owned());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let keys = all_keys(&tx, &tenant)?;
            crate::credentials::check_revocation(&keys, &kid)?;
            tx.execute(
                "UPDATE signing_keys SET revoked_at = ?3
                 WHERE tenant_id = ?1 AND kid = ?2 AND revoked_at IS NULL",
                params![tenant.as_str(), kid, at_ms],
            )?;
            let row = tx.query_row(
                &format!(
                    "SELECT {KEY_COLUMNS} FROM signing_keys WHERE tenant_id = ?1 AND kid = ?2"
                ),
                params![tenant.as_str(), kid],
                key_row,
            )?;
            tx.commit()?;
            Ok(row)
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
        let tenant = tenant.clone();
        let (kid, expected, private_key, cert_pem) = (
            kid.to_owned(),
            Zeroizing::new(expected_private_key.to_owned()),
            private_key.to_owned(),
            cert_pem.to_owned(),
        );
        self.write(move |conn, _| {
            let changed = conn.execute(
                "UPDATE signing_keys SET private_key = ?4, cert_pem = ?5
                 WHERE tenant_id = ?1 AND kid = ?2 AND private_key = ?3",
                params![
                    tenant.as_str(),
                    kid,
                    expected.as_str(),
                    private_key,
                    cert_pem
                ],
            )?;
            if changed > 0 {
                fold_out_clear_text(conn)?;
            }
            Ok(changed > 0)
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

/// After a key stored in clear is sealed: no copy of the old text is left in the files. VACUUM
/// rewrites the database without its free space (a database written before `secure_delete` was
/// on, or by another program, may hold stale copies in freed pages and cells), and a TRUNCATE
/// checkpoint folds the WAL into the database file and empties it. The checkpoint waits for
/// readers (the busy timeout) and reports whether it completed; an incomplete one is retried
/// for a bounded time, since until it completes the database file still holds the old page.
fn fold_out_clear_text(conn: &mut rusqlite::Connection) -> Result<(), StoreError> {
    conn.execute_batch("VACUUM")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
        if busy == 0 {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            tracing::warn!(
                "a sealed signing key's old text stays in the database file until the next \
                 checkpoint: readers held the write-ahead log for 10 s"
            );
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

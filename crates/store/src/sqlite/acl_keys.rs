use async_trait::async_trait;
use netacl_model::NetworkAclKeyId;
use rusqlite::{params, ErrorCode};

use super::tenants::bump_acl_version;
use super::SqliteStore;
use crate::acl_keys::key_from_row;
use crate::{NetworkAclKeyStore, StoreError, StoredNetworkAclKey, TenantId};

#[async_trait]
impl NetworkAclKeyStore for SqliteStore {
    async fn network_acl_keys(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<StoredNetworkAclKey>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, name, fingerprint, sealed_material, created_at, updated_at
                 FROM network_acl_keys WHERE tenant_id = ?1
                 ORDER BY created_at DESC, id DESC",
            )?;
            let rows = stmt.query_map([tenant.as_str()], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                out.push(key_from_row(&tenant, row?)?);
            }
            Ok(out)
        })
        .await
    }

    async fn create_network_acl_key(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        key: &StoredNetworkAclKey,
    ) -> Result<u64, StoreError> {
        let (tenant, key) = (tenant.clone(), key.clone());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let record = &key.record;
            tx.execute(
                "INSERT INTO network_acl_keys
                 (tenant_id, id, name, fingerprint, sealed_material, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    tenant.as_str(),
                    record.id.as_str(),
                    record.name,
                    record.fingerprint,
                    key.sealed_material,
                    record.created_at.unix_millis(),
                    record.updated_at.unix_millis(),
                ],
            )
            .map_err(|err| match &err {
                rusqlite::Error::SqliteFailure(e, Some(message))
                    if e.code == ErrorCode::ConstraintViolation
                        && message.contains("network_acl_keys.name") =>
                {
                    StoreError::NameTaken(format!("network ACL key name {}", record.name))
                }
                _ => StoreError::from(err),
            })?;
            tx.commit()?;
            Ok(version)
        })
        .await
    }

    async fn delete_network_acl_key(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        id: &NetworkAclKeyId,
    ) -> Result<u64, StoreError> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let changed = tx.execute(
                "DELETE FROM network_acl_keys WHERE tenant_id = ?1 AND id = ?2",
                params![tenant.as_str(), id.as_str()],
            )?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("network ACL key {id}")));
            }
            tx.commit()?;
            Ok(version)
        })
        .await
    }
}

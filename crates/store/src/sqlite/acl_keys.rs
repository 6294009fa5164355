use async_trait::async_trait;
use netacl_model::NetworkAclKeyId;
use rusqlite::{params, ErrorCode, OptionalExtension};

use super::history::record_version;
use super::tenants::bump_acl_version;
use super::SqliteStore;
use crate::acl_keys::key_from_row;
use crate::history::key_metadata;
use crate::{
    ChangeOp, NetworkAclKeyStore, RecordChange, RecordKind, StoreError, StoredNetworkAclKey,
    TenantId, WriteOrigin,
};

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
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let (tenant, key, origin) = (tenant.clone(), key.clone(), origin.clone());
        let retention = self.retention;
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
            let change = RecordChange {
                kind: RecordKind::NetworkAclKey,
                op: ChangeOp::Create,
                id: record.id.to_string(),
                before: None,
                after: Some(key_metadata(
                    record.id.as_str(),
                    &record.name,
                    record.created_at.unix_millis(),
                )),
            };
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
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
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let (tenant, id, origin) = (tenant.clone(), id.clone(), origin.clone());
        let retention = self.retention;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let (name, created_at): (String, i64) = tx
                .query_row(
                    "SELECT name, created_at FROM network_acl_keys
                     WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant.as_str(), id.as_str()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?
                .ok_or_else(|| StoreError::NotFound(format!("network ACL key {id}")))?;
            tx.execute(
                "DELETE FROM network_acl_keys WHERE tenant_id = ?1 AND id = ?2",
                params![tenant.as_str(), id.as_str()],
            )?;
            let change = RecordChange {
                kind: RecordKind::NetworkAclKey,
                op: ChangeOp::Delete,
                id: id.to_string(),
                before: Some(key_metadata(id.as_str(), &name, created_at)),
                after: None,
            };
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
            tx.commit()?;
            Ok(version)
        })
        .await
    }
}

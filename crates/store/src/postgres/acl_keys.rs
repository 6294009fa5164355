use async_trait::async_trait;
use netacl_model::NetworkAclKeyId;

use super::history::record_version;
use super::tenants::bump_acl_version;
use super::{unique_violation, PostgresStore};
use crate::acl_keys::key_from_row;
use crate::history::key_metadata;
use crate::{
    ChangeOp, NetworkAclKeyStore, RecordChange, RecordKind, StoreError, StoredNetworkAclKey,
    TenantId, WriteOrigin,
};

#[async_trait]
impl NetworkAclKeyStore for PostgresStore {
    async fn network_acl_keys(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<StoredNetworkAclKey>, StoreError> {
        self.call(|client| async move {
            let rows = client
                .query(
                    "SELECT id, name, fingerprint, sealed_material, created_at, updated_at
                     FROM network_acl_keys WHERE tenant_id = $1
                     ORDER BY created_at DESC, id DESC",
                    &[&tenant.as_str()],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    key_from_row(
                        tenant,
                        (
                            row.get(0),
                            row.get(1),
                            row.get(2),
                            row.get(3),
                            row.get(4),
                            row.get(5),
                        ),
                    )
                })
                .collect()
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
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let record = &key.record;
            tx.execute(
                "INSERT INTO network_acl_keys
                 (tenant_id, id, name, fingerprint, sealed_material, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &tenant.as_str(),
                    &record.id.as_str(),
                    &record.name,
                    &record.fingerprint,
                    &key.sealed_material,
                    &record.created_at.unix_millis(),
                    &record.updated_at.unix_millis(),
                ],
            )
            .await
            .map_err(|err| match unique_violation(&err) {
                Some("network_acl_keys_name_key") => {
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
            record_version(&*tx, tenant, version, origin, &[change], &retention).await?;
            tx.commit().await?;
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
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let row = tx
                .query_opt(
                    "DELETE FROM network_acl_keys WHERE tenant_id = $1 AND id = $2
                     RETURNING name, created_at",
                    &[&tenant.as_str(), &id.as_str()],
                )
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("network ACL key {id}")))?;
            let (name, created_at): (String, i64) = (row.get(0), row.get(1));
            let change = RecordChange {
                kind: RecordKind::NetworkAclKey,
                op: ChangeOp::Delete,
                id: id.to_string(),
                before: Some(key_metadata(id.as_str(), &name, created_at)),
                after: None,
            };
            record_version(&*tx, tenant, version, origin, &[change], &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }
}

use async_trait::async_trait;
use netacl_model::NetworkAclKeyId;

use super::tenants::bump_acl_version;
use super::{unique_violation, PostgresStore};
use crate::acl_keys::key_from_row;
use crate::{NetworkAclKeyStore, StoreError, StoredNetworkAclKey, TenantId};

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
    ) -> Result<u64, StoreError> {
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
    ) -> Result<u64, StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let changed = tx
                .execute(
                    "DELETE FROM network_acl_keys WHERE tenant_id = $1 AND id = $2",
                    &[&tenant.as_str(), &id.as_str()],
                )
                .await?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("network ACL key {id}")));
            }
            tx.commit().await?;
            Ok(version)
        })
        .await
    }
}

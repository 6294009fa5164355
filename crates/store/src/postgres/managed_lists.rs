use async_trait::async_trait;
use netacl_model::{ManagedList, ManagedListName, RuleSet};

use tokio_postgres::GenericClient;

use super::history::record_version;
use super::network_acls::query_acls;
use super::tenants::{acl_version, bump_acl_version};
use super::{from_version, read_snapshot, to_version, PostgresStore};
use crate::history::list_metadata;
use crate::managed::{items_text, name_of, parse_items};
use crate::{
    ChangeOp, ManagedListStore, RecordChange, RecordKind, StoreError, StoredManagedList, TenantId,
    TenantPolicy, WriteOrigin,
};

#[async_trait]
impl ManagedListStore for PostgresStore {
    async fn tenant_policy(
        &self,
        tenant: &TenantId,
        known: &[(ManagedListName, u64)],
    ) -> Result<TenantPolicy, StoreError> {
        let limits = self.limits;
        self.call(|mut client| async move {
            // One snapshot for the version, the records and the lists.
            let tx = read_snapshot(&mut client).await?;
            let version = acl_version(&*tx, tenant).await?;
            let acls = query_acls(
                &*tx,
                tenant,
                &limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = $1
                 ORDER BY priority, id",
                &[&tenant.as_str()],
            )
            .await?;
            let rows = tx
                .query(
                    "SELECT name, version, updated_at FROM managed_lists
                     WHERE tenant_id = $1 ORDER BY name",
                    &[&tenant.as_str()],
                )
                .await?;
            let mut managed_lists = Vec::with_capacity(rows.len());
            for row in rows {
                let name: String = row.get(0);
                let list_version = to_version(row.get(1));
                let parsed = name_of(&name, tenant)?;
                let list = if known.contains(&(parsed, list_version)) {
                    None
                } else {
                    let items = tx
                        .query_one(
                            "SELECT items FROM managed_lists WHERE tenant_id = $1 AND name = $2",
                            &[&tenant.as_str(), &name],
                        )
                        .await?;
                    let items: &str = items.get(0);
                    Some(parse_items(tenant, &name, items, limits.max_entries_per_set)?.1)
                };
                managed_lists.push(StoredManagedList {
                    name: parsed,
                    version: list_version,
                    updated_at_ms: row.get(2),
                    list,
                });
            }
            tx.commit().await?;
            Ok(TenantPolicy {
                rules: RuleSet { version, acls },
                managed_lists,
            })
        })
        .await
    }

    async fn put_managed_list(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        name: ManagedListName,
        list: &ManagedList,
        updated_at_ms: i64,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let items = items_text(list)?;
        let entries = list.len();
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let before = list_before(&*tx, tenant, name.as_str()).await?;
            tx.execute(
                "INSERT INTO managed_lists (tenant_id, name, items, version, updated_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant_id, name) DO UPDATE
                 SET items = excluded.items, version = excluded.version,
                     updated_at = excluded.updated_at",
                &[
                    &tenant.as_str(),
                    &name.as_str(),
                    &items,
                    &from_version(version)?,
                    &updated_at_ms,
                ],
            )
            .await?;
            let change = RecordChange {
                kind: RecordKind::ManagedList,
                op: if before.is_some() {
                    ChangeOp::Update
                } else {
                    ChangeOp::Create
                },
                id: name.to_string(),
                before,
                after: Some(list_metadata(
                    name.as_str(),
                    version,
                    updated_at_ms,
                    Some(entries),
                )),
            };
            record_version(&*tx, tenant, version, origin, &[change], &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }

    async fn delete_managed_list(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        name: ManagedListName,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let before = list_before(&*tx, tenant, name.as_str())
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("managed list {name}")))?;
            tx.execute(
                "DELETE FROM managed_lists WHERE tenant_id = $1 AND name = $2",
                &[&tenant.as_str(), &name.as_str()],
            )
            .await?;
            let change = RecordChange {
                kind: RecordKind::ManagedList,
                op: ChangeOp::Delete,
                id: name.to_string(),
                before: Some(before),
                after: None,
            };
            record_version(&*tx, tenant, version, origin, &[change], &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }

    async fn bump_version(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        origin: &WriteOrigin,
        change: &RecordChange,
    ) -> Result<u64, StoreError> {
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let changes = std::slice::from_ref(change);
            record_version(&*tx, tenant, version, origin, changes, &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }
}

/// A stored list's metadata (for its history entry), `None` when it has no stored content.
async fn list_before(
    tx: &impl GenericClient,
    tenant: &TenantId,
    name: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let row = tx
        .query_opt(
            "SELECT version, updated_at FROM managed_lists WHERE tenant_id = $1 AND name = $2",
            &[&tenant.as_str(), &name],
        )
        .await?;
    Ok(row.map(|row| list_metadata(name, to_version(row.get(0)), row.get(1), None)))
}

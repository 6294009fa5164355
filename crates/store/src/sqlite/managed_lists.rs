use async_trait::async_trait;
use netacl_model::{ManagedList, ManagedListName, RuleSet};
use rusqlite::{params, OptionalExtension, Transaction};

use super::history::record_version;
use super::network_acls::query_acls;
use super::tenants::{acl_version, bump_acl_version};
use super::{to_version, SqliteStore};
use crate::history::list_metadata;
use crate::managed::{items_text, name_of, parse_items};
use crate::{
    ChangeOp, ManagedListStore, RecordChange, RecordKind, StoreError, StoredManagedList, TenantId,
    TenantPolicy, WriteOrigin,
};

#[async_trait]
impl ManagedListStore for SqliteStore {
    async fn tenant_policy(
        &self,
        tenant: &TenantId,
        known: &[(ManagedListName, u64)],
    ) -> Result<TenantPolicy, StoreError> {
        let (tenant, known) = (tenant.clone(), known.to_vec());
        self.read(move |conn, limits| {
            let tx = conn.transaction()?;
            let version = acl_version(&tx, &tenant)?;
            let acls = query_acls(
                &tx,
                &tenant,
                limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = ?1 ORDER BY priority, id",
                params![tenant.as_str()],
            )?;
            let mut lists = Vec::new();
            {
                let mut stmt = tx.prepare_cached(
                    "SELECT name, version, updated_at FROM managed_lists
                     WHERE tenant_id = ?1 ORDER BY name",
                )?;
                let rows = stmt.query_map([tenant.as_str()], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })?;
                for row in rows {
                    let (name, list_version, updated_at_ms) = row?;
                    lists.push((name, to_version(list_version), updated_at_ms));
                }
            }
            let mut managed_lists = Vec::with_capacity(lists.len());
            for (name, list_version, updated_at_ms) in lists {
                let parsed = name_of(&name, &tenant)?;
                let list = if known.contains(&(parsed, list_version)) {
                    None
                } else {
                    let items: String = tx.query_row(
                        "SELECT items FROM managed_lists WHERE tenant_id = ?1 AND name = ?2",
                        params![tenant.as_str(), name],
                        |row| row.get(0),
                    )?;
                    Some(parse_items(&tenant, &name, &items, limits.max_entries_per_set)?.1)
                };
                managed_lists.push(StoredManagedList {
                    name: parsed,
                    version: list_version,
                    updated_at_ms,
                    list,
                });
            }
            tx.commit()?;
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
        let (tenant, items, origin) = (tenant.clone(), items_text(list)?, origin.clone());
        let entries = list.len();
        let retention = self.retention;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let stored = i64::try_from(version)
                .map_err(|_| StoreError::Unavailable("rule-set version overflow".into()))?;
            let before = list_before(&tx, &tenant, name.as_str())?;
            tx.execute(
                "INSERT INTO managed_lists (tenant_id, name, items, version, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant_id, name) DO UPDATE
                 SET items = excluded.items, version = excluded.version,
                     updated_at = excluded.updated_at",
                params![tenant.as_str(), name.as_str(), items, stored, updated_at_ms],
            )?;
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
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
            tx.commit()?;
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
        let (tenant, origin) = (tenant.clone(), origin.clone());
        let retention = self.retention;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let before = list_before(&tx, &tenant, name.as_str())?
                .ok_or_else(|| StoreError::NotFound(format!("managed list {name}")))?;
            tx.execute(
                "DELETE FROM managed_lists WHERE tenant_id = ?1 AND name = ?2",
                params![tenant.as_str(), name.as_str()],
            )?;
            let change = RecordChange {
                kind: RecordKind::ManagedList,
                op: ChangeOp::Delete,
                id: name.to_string(),
                before: Some(before),
                after: None,
            };
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
            tx.commit()?;
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
        let (tenant, origin, change) = (tenant.clone(), origin.clone(), change.clone());
        let retention = self.retention;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
            tx.commit()?;
            Ok(version)
        })
        .await
    }
}

/// A stored list's metadata (for its history entry), `None` when it has no stored content.
fn list_before(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    name: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let row = tx
        .prepare_cached(
            "SELECT version, updated_at FROM managed_lists WHERE tenant_id = ?1 AND name = ?2",
        )?
        .query_row(params![tenant.as_str(), name], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
        })
        .optional()?;
    Ok(row.map(|(version, updated_at)| list_metadata(name, to_version(version), updated_at, None)))
}

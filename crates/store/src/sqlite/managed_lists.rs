use async_trait::async_trait;
use netacl_model::{ManagedList, ManagedListName, RuleSet};
use rusqlite::params;

use super::network_acls::query_acls;
use super::tenants::{acl_version, bump_acl_version};
use super::{to_version, SqliteStore};
use crate::managed::{items_text, name_of, parse_items};
use crate::{ManagedListStore, StoreError, StoredManagedList, TenantId, TenantPolicy};

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
    ) -> Result<u64, StoreError> {
        let (tenant, items) = (tenant.clone(), items_text(list)?);
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let stored = i64::try_from(version)
                .map_err(|_| StoreError::Unavailable("rule-set version overflow".into()))?;
            tx.execute(
                "INSERT INTO managed_lists (tenant_id, name, items, version, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant_id, name) DO UPDATE
                 SET items = excluded.items, version = excluded.version,
                     updated_at = excluded.updated_at",
                params![tenant.as_str(), name.as_str(), items, stored, updated_at_ms],
            )?;
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
    ) -> Result<u64, StoreError> {
        let tenant = tenant.clone();
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let changed = tx.execute(
                "DELETE FROM managed_lists WHERE tenant_id = ?1 AND name = ?2",
                params![tenant.as_str(), name.as_str()],
            )?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("managed list {name}")));
            }
            tx.commit()?;
            Ok(version)
        })
        .await
    }

    async fn bump_version(
        &self,
        tenant: &TenantId,
        expected_version: u64,
    ) -> Result<u64, StoreError> {
        let tenant = tenant.clone();
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            tx.commit()?;
            Ok(version)
        })
        .await
    }
}

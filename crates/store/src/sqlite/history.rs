use async_trait::async_trait;
use netacl_model::{NetworkAcl, RuleSet};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::network_acls::{query_acls, Row};
use super::tenants::{acl_version, bump_acl_version};
use super::{now_ms, to_version, SqliteStore};
use crate::history::{changes_text, parse_changes, undo, Restore, PRUNE_BATCH};
use crate::{
    HistoryRetention, HistoryStore, RecordChange, StoreError, TenantId, VersionEntry, WriteOrigin,
};

/// Records the entry of `version` (just bumped in `tx`) and removes what retention no longer
/// keeps (at most [`PRUNE_BATCH`] of the oldest entries).
pub(super) fn record_version(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    version: u64,
    origin: &WriteOrigin,
    changes: &[RecordChange],
    retention: &HistoryRetention,
) -> Result<(), StoreError> {
    let now = now_ms();
    let stored = i64::try_from(version)
        .map_err(|_| StoreError::Unavailable("rule-set version overflow".into()))?;
    tx.prepare_cached(
        "INSERT INTO network_acl_history
         (tenant_id, version, created_at, client_id, request_id, changes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        tenant.as_str(),
        stored,
        now,
        origin.client_id,
        origin.request_id,
        changes_text(changes)?
    ])?;
    let oldest = {
        let mut statement = tx.prepare_cached(
            "SELECT version, created_at FROM network_acl_history
             WHERE tenant_id = ?1 ORDER BY version LIMIT ?2",
        )?;
        let rows = statement.query_map(params![tenant.as_str(), PRUNE_BATCH], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
        })?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    if let Some(last) = retention.last_removable(version, now, &oldest) {
        tx.prepare_cached(
            "DELETE FROM network_acl_history WHERE tenant_id = ?1 AND version <= ?2",
        )?
        .execute(params![tenant.as_str(), last])?;
    }
    Ok(())
}

/// Entries of `tenant` by a query returning `(version, created_at, client_id, request_id,
/// changes)`.
fn query_entries(
    conn: &Connection,
    tenant: &TenantId,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<VersionEntry>, StoreError> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, Option<String>>(2)?,
            row.get::<_, Option<String>>(3)?,
            row.get::<_, String>(4)?,
        ))
    })?;
    let mut entries = Vec::new();
    for row in rows {
        let (version, created_at_ms, client_id, request_id, changes) = row?;
        let version = to_version(version);
        entries.push(VersionEntry {
            version,
            created_at_ms,
            client_id,
            request_id,
            changes: parse_changes(tenant, version, &changes)?,
        });
    }
    Ok(entries)
}

const ENTRY_COLUMNS: &str = "SELECT version, created_at, client_id, request_id, changes
                             FROM network_acl_history";

#[async_trait]
impl HistoryStore for SqliteStore {
    async fn versions(
        &self,
        tenant: &TenantId,
        from: Option<u64>,
        limit: u32,
    ) -> Result<Vec<VersionEntry>, StoreError> {
        let tenant = tenant.clone();
        let from = from.map_or(i64::MAX, |v| i64::try_from(v).unwrap_or(i64::MAX));
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            acl_version(&tx, &tenant)?;
            let entries = query_entries(
                &tx,
                &tenant,
                &format!(
                    "{ENTRY_COLUMNS} WHERE tenant_id = ?1 AND version <= ?2
                     ORDER BY version DESC LIMIT ?3"
                ),
                params![tenant.as_str(), from, i64::from(limit)],
            )?;
            tx.commit()?;
            Ok(entries)
        })
        .await
    }

    async fn version_entry(
        &self,
        tenant: &TenantId,
        version: u64,
    ) -> Result<Option<VersionEntry>, StoreError> {
        let tenant = tenant.clone();
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        self.read(move |conn, _| {
            let mut entries = query_entries(
                conn,
                &tenant,
                &format!("{ENTRY_COLUMNS} WHERE tenant_id = ?1 AND version = ?2"),
                params![tenant.as_str(), version],
            )?;
            Ok(entries.pop())
        })
        .await
    }

    async fn network_acls_at(
        &self,
        tenant: &TenantId,
        version: u64,
    ) -> Result<Option<RuleSet>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, limits| {
            let tx = conn.transaction()?;
            let current = acl_version(&tx, &tenant)?;
            if version > current {
                return Ok(None);
            }
            let acls = query_acls(
                &tx,
                &tenant,
                limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = ?1 ORDER BY priority, id",
                params![tenant.as_str()],
            )?;
            if version == current {
                return Ok(Some(RuleSet { version, acls }));
            }
            // The entry of `version` itself must be kept (of version 1 for version 0: the
            // tenant's history starts at its creation).
            let anchor = i64::try_from(version.max(1)).unwrap_or(i64::MAX);
            let kept = tx
                .query_row(
                    "SELECT 1 FROM network_acl_history WHERE tenant_id = ?1 AND version = ?2",
                    params![tenant.as_str(), anchor],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
            if !kept {
                return Ok(None);
            }
            let later = query_entries(
                &tx,
                &tenant,
                &format!(
                    "{ENTRY_COLUMNS} WHERE tenant_id = ?1 AND version > ?2
                     ORDER BY version DESC"
                ),
                params![tenant.as_str(), i64::try_from(version).unwrap_or(i64::MAX)],
            )?;
            tx.commit()?;
            let later: Vec<_> = later.into_iter().map(|e| (e.version, e.changes)).collect();
            undo(&tenant, limits, version, current, acls, &later)
        })
        .await
    }

    async fn restore_network_acls(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        acls: &[NetworkAcl],
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let (tenant, target, origin) = (tenant.clone(), acls.to_vec(), origin.clone());
        let retention = self.retention;
        self.write(move |conn, limits| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let current = query_acls(
                &tx,
                &tenant,
                limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = ?1 ORDER BY priority, id",
                params![tenant.as_str()],
            )?;
            let plan = Restore::plan(&current, &target);
            for id in &plan.delete {
                tx.prepare_cached("DELETE FROM network_acls WHERE tenant_id = ?1 AND id = ?2")?
                    .execute(params![tenant.as_str(), id.as_str()])?;
            }
            for acl in &plan.insert {
                let row = Row::of(acl)?;
                row.insert(&tx, &tenant)?;
            }
            record_version(&tx, &tenant, version, &origin, &plan.changes, &retention)?;
            tx.commit()?;
            Ok(version)
        })
        .await
    }
}

use async_trait::async_trait;
use netacl_model::{NetworkAcl, RuleSet};
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

use super::network_acls::{query_acls, Row};
use super::tenants::{acl_version, bump_acl_version};
use super::{from_version, now_ms, read_snapshot, to_version, PostgresStore};
use crate::history::{changes_text, parse_changes, undo, Restore, PRUNE_BATCH};
use crate::{
    HistoryRetention, HistoryStore, RecordChange, StoreError, TenantId, VersionEntry, WriteOrigin,
};

/// Records the entry of `version` (just bumped in `tx`, which holds the tenant row's lock) and
/// removes what retention no longer keeps (at most [`PRUNE_BATCH`] of the oldest entries).
pub(super) async fn record_version(
    tx: &impl GenericClient,
    tenant: &TenantId,
    version: u64,
    origin: &WriteOrigin,
    changes: &[RecordChange],
    retention: &HistoryRetention,
) -> Result<(), StoreError> {
    let now = now_ms();
    tx.execute(
        "INSERT INTO network_acl_history
         (tenant_id, version, created_at, client_id, request_id, changes)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &tenant.as_str(),
            &from_version(version)?,
            &now,
            &origin.client_id,
            &origin.request_id,
            &changes_text(changes)?,
        ],
    )
    .await?;
    let oldest: Vec<(i64, i64)> = tx
        .query(
            "SELECT version, created_at FROM network_acl_history
             WHERE tenant_id = $1 ORDER BY version LIMIT $2",
            &[&tenant.as_str(), &PRUNE_BATCH],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    if let Some(last) = retention.last_removable(version, now, &oldest) {
        tx.execute(
            "DELETE FROM network_acl_history WHERE tenant_id = $1 AND version <= $2",
            &[&tenant.as_str(), &last],
        )
        .await?;
    }
    Ok(())
}

const ENTRY_COLUMNS: &str = "SELECT version, created_at, client_id, request_id, changes
                             FROM network_acl_history";

async fn query_entries(
    client: &impl GenericClient,
    tenant: &TenantId,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<VersionEntry>, StoreError> {
    let rows = client.query(sql, params).await?;
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        let version = to_version(row.get(0));
        let changes: &str = row.get(4);
        entries.push(VersionEntry {
            version,
            created_at_ms: row.get(1),
            client_id: row.get(2),
            request_id: row.get(3),
            changes: parse_changes(tenant, version, changes)?,
        });
    }
    Ok(entries)
}

#[async_trait]
impl HistoryStore for PostgresStore {
    async fn versions(
        &self,
        tenant: &TenantId,
        from: Option<u64>,
        limit: u32,
    ) -> Result<Vec<VersionEntry>, StoreError> {
        let from = from.map_or(i64::MAX, |v| i64::try_from(v).unwrap_or(i64::MAX));
        let limit = i64::from(limit);
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            acl_version(&*tx, tenant).await?;
            let entries = query_entries(
                &*tx,
                tenant,
                &format!(
                    "{ENTRY_COLUMNS} WHERE tenant_id = $1 AND version <= $2
                     ORDER BY version DESC LIMIT $3"
                ),
                &[&tenant.as_str(), &from, &limit],
            )
            .await?;
            tx.commit().await?;
            Ok(entries)
        })
        .await
    }

    async fn version_entry(
        &self,
        tenant: &TenantId,
        version: u64,
    ) -> Result<Option<VersionEntry>, StoreError> {
        let Ok(version) = i64::try_from(version) else {
            return Ok(None);
        };
        self.call(|client| async move {
            let mut entries = query_entries(
                &**client,
                tenant,
                &format!("{ENTRY_COLUMNS} WHERE tenant_id = $1 AND version = $2"),
                &[&tenant.as_str(), &version],
            )
            .await?;
            Ok(entries.pop())
        })
        .await
    }

    async fn network_acls_at(
        &self,
        tenant: &TenantId,
        version: u64,
    ) -> Result<Option<RuleSet>, StoreError> {
        let limits = self.limits;
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let current = acl_version(&*tx, tenant).await?;
            if version > current {
                return Ok(None);
            }
            let acls = query_acls(
                &*tx,
                tenant,
                &limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = $1
                 ORDER BY priority, id",
                &[&tenant.as_str()],
            )
            .await?;
            if version == current {
                return Ok(Some(RuleSet { version, acls }));
            }
            // The entry of `version` itself must be kept (of version 1 for version 0: the
            // tenant's history starts at its creation).
            let anchor = from_version(version.max(1))?;
            let kept = tx
                .query_opt(
                    "SELECT 1 FROM network_acl_history WHERE tenant_id = $1 AND version = $2",
                    &[&tenant.as_str(), &anchor],
                )
                .await?
                .is_some();
            if !kept {
                return Ok(None);
            }
            let later = query_entries(
                &*tx,
                tenant,
                &format!(
                    "{ENTRY_COLUMNS} WHERE tenant_id = $1 AND version > $2
                     ORDER BY version DESC"
                ),
                &[&tenant.as_str(), &from_version(version)?],
            )
            .await?;
            tx.commit().await?;
            let later: Vec<_> = later.into_iter().map(|e| (e.version, e.changes)).collect();
            undo(tenant, &limits, version, current, acls, &later)
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
        let (limits, retention) = (self.limits, self.retention);
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let current = query_acls(
                &*tx,
                tenant,
                &limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = $1
                 ORDER BY priority, id",
                &[&tenant.as_str()],
            )
            .await?;
            let plan = Restore::plan(&current, acls);
            for id in &plan.delete {
                tx.execute(
                    "DELETE FROM network_acls WHERE tenant_id = $1 AND id = $2",
                    &[&tenant.as_str(), &id.as_str()],
                )
                .await?;
            }
            for acl in &plan.insert {
                Row::of(acl)?.insert(&*tx, tenant).await?;
            }
            record_version(&*tx, tenant, version, origin, &plan.changes, &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }
}

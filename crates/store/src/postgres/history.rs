use std::collections::BTreeMap;

use async_trait::async_trait;
use netacl_model::{NetworkAcl, RuleSet};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

use super::network_acls::{query_acls, Row};
use super::tenants::{acl_version, bump_acl_version};
use super::{from_version, now_ms, read_snapshot, to_version, PostgresStore};
use crate::history::{
    change_rules, convert_entry, join_changes, missing, parse_changes, parse_manifest,
    plan_version, record_in_force, record_of, rule_set, without_records, ContentUse, Previous,
    Restore, PRUNE_BATCH,
};
use crate::{
    HistoryRetention, HistoryStore, RecordChange, StoreError, TenantId, VersionEntry, WriteOrigin,
};

/// Records the entry of `version` (just bumped in `tx`, which holds the tenant row's lock, the
/// records already written) and removes what retention no longer keeps (at most
/// [`PRUNE_BATCH`] versions).
pub(super) async fn record_version(
    tx: &impl GenericClient,
    tenant: &TenantId,
    version: u64,
    origin: &WriteOrigin,
    changes: &[RecordChange],
    retention: &HistoryRetention,
) -> Result<(), StoreError> {
    let now = now_ms();
    let previous = previous(tx, tenant, version).await?;
    let plan = plan_version(tenant, version, previous, changes)?;
    if plan.reset_live {
        tx.execute(
            "UPDATE network_acl_history_contents SET live = 0 WHERE tenant_id = $1 AND live <> 0",
            &[&tenant.as_str()],
        )
        .await?;
    }
    let mut added = 0;
    for content in &plan.uses {
        added += use_content(tx, tenant, version, content).await?;
    }
    let row_bytes = plan.row_bytes(origin);
    tx.execute(
        "INSERT INTO network_acl_history_versions
         (tenant_id, version, created_at, client_id, request_id, changes, manifest, bytes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &tenant.as_str(),
            &from_version(version)?,
            &now,
            &origin.client_id,
            &origin.request_id,
            &plan.changes,
            &plan.manifest,
            &row_bytes,
        ],
    )
    .await?;
    let bytes: i64 = tx
        .query_one(
            "UPDATE tenants SET history_bytes = history_bytes + $2 WHERE id = $1
             RETURNING history_bytes",
            &[&tenant.as_str(), &(added + row_bytes)],
        )
        .await?
        .get(0);
    prune(tx, tenant, version, now, bytes, retention).await
}

/// What the history knows of the version before `version` (see [`Previous`]).
async fn previous(
    tx: &impl GenericClient,
    tenant: &TenantId,
    version: u64,
) -> Result<Previous, StoreError> {
    if version <= 1 {
        return Ok(Previous::Empty);
    }
    let manifest: Option<String> = tx
        .query_opt(
            "SELECT manifest FROM network_acl_history_versions
             WHERE tenant_id = $1 AND version = $2",
            &[&tenant.as_str(), &from_version(version - 1)?],
        )
        .await?
        .map(|row| row.get(0));
    if let Some(hash) = manifest {
        let stubs = content_text(tx, tenant, &hash)
            .await?
            .ok_or_else(|| missing(tenant, version - 1))
            .and_then(|text| parse_manifest(tenant, version - 1, &text));
        match stubs {
            Ok(stubs) => return Ok(Previous::Manifest { hash, stubs }),
            // A damaged history never stops a write: the manifest is built afresh.
            Err(err) => tracing::warn!(tenant = %tenant, error = %err, "rule-set history"),
        }
    }
    let rows = tx
        .query(
            "SELECT record FROM network_acls WHERE tenant_id = $1 ORDER BY priority, id",
            &[&tenant.as_str()],
        )
        .await?;
    let mut records = Vec::with_capacity(rows.len());
    for row in rows {
        let text: &str = row.get(0);
        let record = record_in_force(tenant, text)?;
        records.push(record);
    }
    Ok(Previous::Unknown { records })
}

/// The text of a content, if it is stored.
async fn content_text(
    client: &impl GenericClient,
    tenant: &TenantId,
    hash: &str,
) -> Result<Option<String>, StoreError> {
    Ok(client
        .query_opt(
            "SELECT text FROM network_acl_history_texts WHERE tenant_id = $1 AND hash = $2",
            &[&tenant.as_str(), &hash],
        )
        .await?
        .map(|row| row.get(0)))
}

/// Inserts or counts one content use; returns the bytes it added (its text when inserted).
async fn use_content(
    tx: &impl GenericClient,
    tenant: &TenantId,
    version: u64,
    content: &ContentUse,
) -> Result<i64, StoreError> {
    let updated = tx
        .execute(
            "UPDATE network_acl_history_contents
             SET live = live + $3, last_version = GREATEST(last_version, $4)
             WHERE tenant_id = $1 AND hash = $2",
            &[
                &tenant.as_str(),
                &content.hash,
                &content.live,
                &content.last_version,
            ],
        )
        .await?;
    if updated > 0 {
        return Ok(0);
    }
    let Some(text) = content.text.as_deref() else {
        // A content to count down that is not there: nothing to count (reads of the versions
        // referring to it report it).
        tracing::warn!(tenant = %tenant, error = %missing(tenant, version), "rule-set history");
        return Ok(0);
    };
    let size = i64::try_from(text.len()).unwrap_or(i64::MAX);
    tx.execute(
        "INSERT INTO network_acl_history_contents (tenant_id, hash, size, live, last_version)
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &tenant.as_str(),
            &content.hash,
            &size,
            &content.live.max(0),
            &content.last_version,
        ],
    )
    .await?;
    tx.execute(
        "INSERT INTO network_acl_history_texts (tenant_id, hash, text) VALUES ($1, $2, $3)",
        &[&tenant.as_str(), &content.hash, &text],
    )
    .await?;
    Ok(size)
}

/// Removes the oldest versions retention lets go (never `version`, at most [`PRUNE_BATCH`]) and
/// the contents no kept version refers to any more.
async fn prune(
    tx: &impl GenericClient,
    tenant: &TenantId,
    version: u64,
    now: i64,
    mut bytes: i64,
    retention: &HistoryRetention,
) -> Result<(), StoreError> {
    let oldest: Vec<(i64, i64)> = tx
        .query(
            "SELECT version, created_at FROM network_acl_history_versions
             WHERE tenant_id = $1 ORDER BY version LIMIT $2",
            &[&tenant.as_str(), &PRUNE_BATCH],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let current = from_version(version)?;
    let by_count_or_age = retention.last_removable(version, now, &oldest);
    let mut removed = by_count_or_age;
    if let Some(last) = by_count_or_age {
        bytes -= remove_through(tx, tenant, last).await?;
    }
    for (candidate, _) in oldest
        .iter()
        .filter(|(v, _)| by_count_or_age.is_none_or(|r| *v > r))
    {
        if *candidate >= current || !retention.over_budget(bytes) {
            break;
        }
        bytes -= remove_through(tx, tenant, *candidate).await?;
        removed = Some(*candidate);
    }
    if removed.is_some() {
        tx.execute(
            "UPDATE tenants SET history_bytes = $2 WHERE id = $1",
            &[&tenant.as_str(), &bytes],
        )
        .await?;
    }
    Ok(())
}

/// Removes the versions up to `last` and the contents that only they referred to; returns the
/// bytes freed.
async fn remove_through(
    tx: &impl GenericClient,
    tenant: &TenantId,
    last: i64,
) -> Result<i64, StoreError> {
    let versions: i64 = tx
        .query_one(
            "WITH gone AS (
                 DELETE FROM network_acl_history_versions WHERE tenant_id = $1 AND version <= $2
                 RETURNING bytes)
             SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM gone",
            &[&tenant.as_str(), &last],
        )
        .await?
        .get(0);
    let contents: i64 = tx
        .query_one(
            "WITH gone AS (
                 DELETE FROM network_acl_history_contents
                 WHERE tenant_id = $1 AND live <= 0 AND last_version <= $2
                 RETURNING size)
             SELECT COALESCE(SUM(size), 0)::BIGINT FROM gone",
            &[&tenant.as_str(), &last],
        )
        .await?
        .get(0);
    Ok(versions + contents)
}

/// Converts the history written before schema 10 (whole records in each entry, table
/// `network_acl_history`) into the content-addressed form, tenant by tenant, from the newest
/// entry down (each entry's rule set is its successor's with its changes undone, as they were
/// rebuilt before). Entries that cannot be converted (a gap, an entry that is not the format,
/// a newest entry that is not the tenant's current version) stay in `network_acl_history`,
/// never read again, and are reported in the log.
pub(super) async fn convert_legacy(
    tx: &tokio_postgres::Transaction<'_>,
) -> Result<(), tokio_postgres::Error> {
    let tenants: Vec<(String, i64)> = tx
        .query(
            "SELECT t.id, t.acl_version FROM tenants AS t
             WHERE EXISTS (SELECT 1 FROM network_acl_history AS h WHERE h.tenant_id = t.id)
             ORDER BY t.id",
            &[],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    for (id, current) in tenants {
        convert_tenant(tx, &id, current).await?;
    }
    Ok(())
}

async fn convert_tenant(
    tx: &tokio_postgres::Transaction<'_>,
    id: &str,
    current: i64,
) -> Result<(), tokio_postgres::Error> {
    let tenant = TenantId::new(id).unwrap_or_else(TenantId::default_tenant);
    let newest: Option<i64> = tx
        .query_one(
            "SELECT MAX(version) FROM network_acl_history WHERE tenant_id = $1",
            &[&id],
        )
        .await?
        .get(0);
    let mut failure = None;
    let mut stubs = Vec::new();
    if newest != Some(current) {
        failure = Some(format!(
            "the newest entry is version {}, the rule set is at version {current}",
            newest.unwrap_or(0)
        ));
    } else {
        let rows = tx
            .query(
                "SELECT record FROM network_acls WHERE tenant_id = $1 ORDER BY priority, id",
                &[&id],
            )
            .await?;
        for row in rows {
            let split = serde_json::from_str::<Value>(row.get(0))
                .ok()
                .and_then(|record| crate::history::split(&record));
            let Some(split) = split else {
                failure = Some("a record in force is malformed".into());
                break;
            };
            insert_content(tx, id, &split.hash, &split.text, 1, current).await?;
            stubs.push(split.stub);
        }
    }
    let mut version = current;
    while failure.is_none() && version > 0 {
        let Some(row) = tx
            .query_opt(
                "SELECT created_at, client_id, request_id, changes FROM network_acl_history
                 WHERE tenant_id = $1 AND version = $2",
                &[&id, &version],
            )
            .await?
        else {
            break;
        };
        let (created_at, client_id, request_id): (i64, Option<String>, Option<String>) =
            (row.get(0), row.get(1), row.get(2));
        let converted = match convert_entry(&tenant, to_version(version), row.get(3), &mut stubs) {
            Ok(converted) => converted,
            Err(reason) => {
                failure = Some(reason);
                break;
            }
        };
        drop(row);
        let (manifest, manifest_text) = &converted.manifest;
        insert_content(
            tx,
            id,
            manifest,
            manifest_text,
            i64::from(version == current),
            version,
        )
        .await?;
        for (hash, text) in &converted.rules {
            insert_content(tx, id, hash, text, 0, version).await?;
        }
        let bytes = converted.changes.len()
            + client_id.as_ref().map_or(0, String::len)
            + request_id.as_ref().map_or(0, String::len);
        tx.execute(
            "INSERT INTO network_acl_history_versions
             (tenant_id, version, created_at, client_id, request_id, changes, manifest, bytes)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &id,
                &version,
                &created_at,
                &client_id,
                &request_id,
                &converted.changes,
                manifest,
                &i64::try_from(bytes).unwrap_or(i64::MAX),
            ],
        )
        .await?;
        tx.execute(
            "DELETE FROM network_acl_history WHERE tenant_id = $1 AND version = $2",
            &[&id, &version],
        )
        .await?;
        version -= 1;
    }
    let row = tx
        .query_one(
            "SELECT COUNT(*), MIN(version), MAX(version) FROM network_acl_history
             WHERE tenant_id = $1",
            &[&id],
        )
        .await?;
    let (left, low, high): (i64, Option<i64>, Option<i64>) = (row.get(0), row.get(1), row.get(2));
    if left > 0 {
        let reason = failure.unwrap_or_else(|| format!("version {version} has no entry"));
        tracing::warn!(
            tenant = id,
            entries = left,
            versions = %format!("{}..={}", low.unwrap_or(0), high.unwrap_or(0)),
            reason = %reason,
            "rule-set history entries could not be converted to the format of schema 10; \
             they stay in table network_acl_history and are no longer served"
        );
    }
    tx.execute(
        "UPDATE tenants SET history_bytes =
             (SELECT COALESCE(SUM(bytes), 0) FROM network_acl_history_versions WHERE tenant_id = $1)
           + (SELECT COALESCE(SUM(size), 0) FROM network_acl_history_contents WHERE tenant_id = $1)
         WHERE id = $1",
        &[&id],
    )
    .await?;
    Ok(())
}

/// Inserts a content met while converting (newest version first: the first meeting is the
/// newest version referring to it), or adds `live` to its count.
async fn insert_content(
    tx: &tokio_postgres::Transaction<'_>,
    tenant: &str,
    hash: &str,
    text: &str,
    live: i64,
    version: i64,
) -> Result<(), tokio_postgres::Error> {
    let updated = tx
        .execute(
            "UPDATE network_acl_history_contents SET live = live + $3
             WHERE tenant_id = $1 AND hash = $2",
            &[&tenant, &hash, &live],
        )
        .await?;
    if updated == 0 {
        let size = i64::try_from(text.len()).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT INTO network_acl_history_contents (tenant_id, hash, size, live, last_version)
             VALUES ($1, $2, $3, $4, $5)",
            &[&tenant, &hash, &size, &live, &version],
        )
        .await?;
        tx.execute(
            "INSERT INTO network_acl_history_texts (tenant_id, hash, text) VALUES ($1, $2, $3)",
            &[&tenant, &hash, &text],
        )
        .await?;
    }
    Ok(())
}

const ENTRY_COLUMNS: &str = "SELECT version, created_at, client_id, request_id, changes
                             FROM network_acl_history_versions";

/// Entries by a query returning `(version, created_at, client_id, request_id, changes)`;
/// network ACL records still as stubs.
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
            Ok(entries
                .into_iter()
                .map(|entry| VersionEntry {
                    changes: without_records(entry.changes),
                    ..entry
                })
                .collect())
        })
        .await
    }

    async fn version_entry(
        &self,
        tenant: &TenantId,
        version: u64,
    ) -> Result<Option<VersionEntry>, StoreError> {
        let Ok(stored) = i64::try_from(version) else {
            return Ok(None);
        };
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let Some(mut entry) = query_entries(
                &*tx,
                tenant,
                &format!("{ENTRY_COLUMNS} WHERE tenant_id = $1 AND version = $2"),
                &[&tenant.as_str(), &stored],
            )
            .await?
            .pop() else {
                return Ok(None);
            };
            let mut rules = BTreeMap::new();
            for hash in change_rules(&entry.changes) {
                let text = content_text(&*tx, tenant, &hash)
                    .await?
                    .ok_or_else(|| missing(tenant, version))?;
                let rule: Value =
                    serde_json::from_str(&text).map_err(|_| missing(tenant, version))?;
                rules.insert(hash, rule);
            }
            tx.commit().await?;
            join_changes(tenant, version, &mut entry.changes, &rules)?;
            Ok(Some(entry))
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
            if version == current {
                let acls = query_acls(
                    &*tx,
                    tenant,
                    &limits,
                    "SELECT id, record FROM network_acls WHERE tenant_id = $1
                     ORDER BY priority, id",
                    &[&tenant.as_str()],
                )
                .await?;
                return Ok(Some(RuleSet { version, acls }));
            }
            // The entry of `version` itself must be kept (of version 1 for version 0: the
            // tenant's history starts at its creation).
            let anchor = from_version(version.max(1))?;
            let manifest: Option<String> = tx
                .query_opt(
                    "SELECT manifest FROM network_acl_history_versions
                     WHERE tenant_id = $1 AND version = $2",
                    &[&tenant.as_str(), &anchor],
                )
                .await?
                .map(|row| row.get(0));
            let Some(manifest) = manifest else {
                return Ok(None);
            };
            if version == 0 {
                return Ok(Some(RuleSet::default()));
            }
            let text = content_text(&*tx, tenant, &manifest)
                .await?
                .ok_or_else(|| missing(tenant, version))?;
            let stubs = parse_manifest(tenant, version, &text)?;
            drop(text);
            let mut acls = Vec::with_capacity(stubs.len());
            for stub in &stubs {
                let hash = crate::history::stub_rule(stub).unwrap_or_default();
                let rule = content_text(&*tx, tenant, hash)
                    .await?
                    .ok_or_else(|| missing(tenant, version))?;
                acls.push(record_of(tenant, &limits, version, stub, &rule)?);
            }
            tx.commit().await?;
            Ok(Some(rule_set(version, acls)))
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

    async fn history_bytes(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        self.call(|client| async move {
            client
                .query_opt(
                    "SELECT history_bytes FROM tenants WHERE id = $1",
                    &[&tenant.as_str()],
                )
                .await?
                .map(|row| to_version(row.get(0)))
                .ok_or_else(|| StoreError::NotFound(format!("tenant {tenant}")))
        })
        .await
    }
}

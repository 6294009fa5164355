use std::collections::BTreeMap;

use async_trait::async_trait;
use netacl_model::{NetworkAcl, RuleSet};
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde_json::Value;

use super::network_acls::{query_acls, Row};
use super::tenants::{acl_version, bump_acl_version};
use super::{now_ms, to_version, SqliteStore};
use crate::history::{
    change_rules, convert_entry, join_changes, missing, parse_changes, parse_manifest,
    plan_version, record_in_force, record_of, rule_set, without_records, ContentUse, Previous,
    Restore, PRUNE_BATCH,
};
use crate::{
    HistoryRetention, HistoryStore, RecordChange, StoreError, TenantId, VersionEntry, WriteOrigin,
};

/// Records the entry of `version` (just bumped in `tx`, the records already written) and
/// removes what retention no longer keeps (at most [`PRUNE_BATCH`] versions).
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
    let previous = previous(tx, tenant, version)?;
    let plan = plan_version(tenant, version, previous, changes)?;
    if plan.reset_live {
        tx.execute(
            "UPDATE network_acl_history_contents SET live = 0 WHERE tenant_id = ?1 AND live <> 0",
            [tenant.as_str()],
        )?;
    }
    let mut added = 0;
    for content in &plan.uses {
        added += use_content(tx, tenant, version, content)?;
    }
    let row_bytes = plan.row_bytes(origin);
    tx.prepare_cached(
        "INSERT INTO network_acl_history_versions
         (tenant_id, version, created_at, client_id, request_id, changes, manifest, bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        tenant.as_str(),
        stored,
        now,
        origin.client_id,
        origin.request_id,
        plan.changes,
        plan.manifest,
        row_bytes
    ])?;
    let bytes: i64 = tx
        .prepare_cached(
            "UPDATE tenants SET history_bytes = history_bytes + ?2 WHERE id = ?1
             RETURNING history_bytes",
        )?
        .query_row(params![tenant.as_str(), added + row_bytes], |row| {
            row.get(0)
        })?;
    prune(tx, tenant, version, now, bytes, retention)
}

/// What the history knows of the version before `version` (see [`Previous`]).
fn previous(tx: &Transaction<'_>, tenant: &TenantId, version: u64) -> Result<Previous, StoreError> {
    if version <= 1 {
        return Ok(Previous::Empty);
    }
    let before = i64::try_from(version - 1).unwrap_or(i64::MAX);
    let manifest: Option<String> = tx
        .prepare_cached(
            "SELECT manifest FROM network_acl_history_versions
             WHERE tenant_id = ?1 AND version = ?2",
        )?
        .query_row(params![tenant.as_str(), before], |row| row.get(0))
        .optional()?;
    if let Some(hash) = manifest {
        let stubs = content_text(tx, tenant, &hash)?
            .ok_or_else(|| missing(tenant, version - 1))
            .and_then(|text| parse_manifest(tenant, version - 1, &text));
        match stubs {
            Ok(stubs) => return Ok(Previous::Manifest { hash, stubs }),
            // A damaged history never stops a write: the manifest is built afresh.
            Err(err) => tracing::warn!(tenant = %tenant, error = %err, "rule-set history"),
        }
    }
    let mut statement = tx.prepare_cached(
        "SELECT record FROM network_acls WHERE tenant_id = ?1 ORDER BY priority, id",
    )?;
    let rows = statement.query_map([tenant.as_str()], |row| row.get::<_, String>(0))?;
    let mut records = Vec::new();
    for text in rows {
        let record = record_in_force(tenant, &text?)?;
        records.push(record);
    }
    Ok(Previous::Unknown { records })
}

/// The text of a content, if it is stored.
fn content_text(
    conn: &Connection,
    tenant: &TenantId,
    hash: &str,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT text FROM network_acl_history_texts WHERE tenant_id = ?1 AND hash = ?2",
        )?
        .query_row(params![tenant.as_str(), hash], |row| row.get(0))
        .optional()?)
}

/// Inserts or counts one content use; returns the bytes it added (its text when inserted).
fn use_content(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    version: u64,
    content: &ContentUse,
) -> Result<i64, StoreError> {
    let updated = tx
        .prepare_cached(
            "UPDATE network_acl_history_contents
             SET live = live + ?3, last_version = MAX(last_version, ?4)
             WHERE tenant_id = ?1 AND hash = ?2",
        )?
        .execute(params![
            tenant.as_str(),
            content.hash,
            content.live,
            content.last_version
        ])?;
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
    tx.prepare_cached(
        "INSERT INTO network_acl_history_contents (tenant_id, hash, size, live, last_version)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        tenant.as_str(),
        content.hash,
        size,
        content.live.max(0),
        content.last_version
    ])?;
    tx.prepare_cached(
        "INSERT INTO network_acl_history_texts (tenant_id, hash, text) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![tenant.as_str(), content.hash, text])?;
    Ok(size)
}

/// Removes the oldest versions retention lets go (never `version`, at most [`PRUNE_BATCH`]) and
/// the contents no kept version refers to any more.
fn prune(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    version: u64,
    now: i64,
    mut bytes: i64,
    retention: &HistoryRetention,
) -> Result<(), StoreError> {
    let oldest = {
        let mut statement = tx.prepare_cached(
            "SELECT version, created_at FROM network_acl_history_versions
             WHERE tenant_id = ?1 ORDER BY version LIMIT ?2",
        )?;
        let rows = statement.query_map(params![tenant.as_str(), PRUNE_BATCH], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
        })?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    let current = i64::try_from(version).unwrap_or(i64::MAX);
    let by_count_or_age = retention.last_removable(version, now, &oldest);
    let mut removed = by_count_or_age;
    if let Some(last) = by_count_or_age {
        bytes -= remove_through(tx, tenant, last)?;
    }
    for (candidate, _) in oldest
        .iter()
        .filter(|(v, _)| by_count_or_age.is_none_or(|r| *v > r))
    {
        if *candidate >= current || !retention.over_budget(bytes) {
            break;
        }
        bytes -= remove_through(tx, tenant, *candidate)?;
        removed = Some(*candidate);
    }
    if removed.is_some() {
        tx.prepare_cached("UPDATE tenants SET history_bytes = ?2 WHERE id = ?1")?
            .execute(params![tenant.as_str(), bytes])?;
    }
    Ok(())
}

/// Removes the versions up to `last` and the contents that only they referred to; returns the
/// bytes freed.
fn remove_through(tx: &Transaction<'_>, tenant: &TenantId, last: i64) -> Result<i64, StoreError> {
    let sum = |sql: &str| -> Result<i64, StoreError> {
        let mut statement = tx.prepare_cached(sql)?;
        let rows =
            statement.query_map(params![tenant.as_str(), last], |row| row.get::<_, i64>(0))?;
        let mut total = 0;
        for row in rows {
            total += row?;
        }
        Ok(total)
    };
    let versions = sum(
        "DELETE FROM network_acl_history_versions WHERE tenant_id = ?1 AND version <= ?2
         RETURNING bytes",
    )?;
    let contents = sum("DELETE FROM network_acl_history_contents
         WHERE tenant_id = ?1 AND live <= 0 AND last_version <= ?2
         RETURNING size")?;
    Ok(versions + contents)
}

/// Converts the history written before schema 10 (whole records in each entry, table
/// `network_acl_history`) into the content-addressed form, tenant by tenant, from the newest
/// entry down (each entry's rule set is its successor's with its changes undone, as they were
/// rebuilt before). Entries that cannot be converted (a gap, an entry that is not the format,
/// a newest entry that is not the tenant's current version) stay in `network_acl_history`,
/// never read again, and are reported in the log.
pub(super) fn convert_legacy(tx: &Transaction<'_>) -> Result<(), rusqlite::Error> {
    let tenants: Vec<(String, i64)> = {
        let mut statement = tx.prepare(
            "SELECT t.id, t.acl_version FROM tenants AS t
             WHERE EXISTS (SELECT 1 FROM network_acl_history AS h WHERE h.tenant_id = t.id)
             ORDER BY t.id",
        )?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    for (id, current) in tenants {
        convert_tenant(tx, &id, current)?;
    }
    Ok(())
}

fn convert_tenant(tx: &Transaction<'_>, id: &str, current: i64) -> Result<(), rusqlite::Error> {
    let tenant = TenantId::new(id).unwrap_or_else(TenantId::default_tenant);
    let newest: Option<i64> = tx.query_row(
        "SELECT MAX(version) FROM network_acl_history WHERE tenant_id = ?1",
        [id],
        |row| row.get(0),
    )?;
    let mut failure = None;
    let mut stubs = Vec::new();
    if newest != Some(current) {
        failure = Some(format!(
            "the newest entry is version {}, the rule set is at version {current}",
            newest.unwrap_or(0)
        ));
    } else {
        let mut statement = tx.prepare(
            "SELECT record FROM network_acls WHERE tenant_id = ?1 ORDER BY priority, id",
        )?;
        let records: Vec<String> = statement
            .query_map([id], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        for text in records {
            let split = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|record| crate::history::split(&record));
            let Some(split) = split else {
                failure = Some("a record in force is malformed".into());
                break;
            };
            insert_content(tx, id, &split.hash, &split.text, 1, current)?;
            stubs.push(split.stub);
        }
    }
    let mut version = current;
    while failure.is_none() && version > 0 {
        let row: Option<(i64, Option<String>, Option<String>, String)> = tx
            .query_row(
                "SELECT created_at, client_id, request_id, changes FROM network_acl_history
                 WHERE tenant_id = ?1 AND version = ?2",
                params![id, version],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()?;
        let Some((created_at, client_id, request_id, text)) = row else {
            break;
        };
        let converted = match convert_entry(&tenant, to_version(version), &text, &mut stubs) {
            Ok(converted) => converted,
            Err(reason) => {
                failure = Some(reason);
                break;
            }
        };
        let (manifest, manifest_text) = &converted.manifest;
        insert_content(
            tx,
            id,
            manifest,
            manifest_text,
            i64::from(version == current),
            version,
        )?;
        for (hash, text) in &converted.rules {
            insert_content(tx, id, hash, text, 0, version)?;
        }
        let bytes = converted.changes.len()
            + client_id.as_ref().map_or(0, String::len)
            + request_id.as_ref().map_or(0, String::len);
        tx.execute(
            "INSERT INTO network_acl_history_versions
             (tenant_id, version, created_at, client_id, request_id, changes, manifest, bytes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                version,
                created_at,
                client_id,
                request_id,
                converted.changes,
                manifest,
                i64::try_from(bytes).unwrap_or(i64::MAX)
            ],
        )?;
        tx.execute(
            "DELETE FROM network_acl_history WHERE tenant_id = ?1 AND version = ?2",
            params![id, version],
        )?;
        version -= 1;
    }
    let (left, low, high): (i64, Option<i64>, Option<i64>) = tx.query_row(
        "SELECT COUNT(*), MIN(version), MAX(version) FROM network_acl_history WHERE tenant_id = ?1",
        [id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
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
             (SELECT COALESCE(SUM(bytes), 0) FROM network_acl_history_versions WHERE tenant_id = ?1)
           + (SELECT COALESCE(SUM(size), 0) FROM network_acl_history_contents WHERE tenant_id = ?1)
         WHERE id = ?1",
        [id],
    )?;
    Ok(())
}

/// Inserts a content met while converting (newest version first: the first meeting is the
/// newest version referring to it), or adds `live` to its count.
fn insert_content(
    tx: &Transaction<'_>,
    tenant: &str,
    hash: &str,
    text: &str,
    live: i64,
    version: i64,
) -> Result<(), rusqlite::Error> {
    let updated = tx.execute(
        "UPDATE network_acl_history_contents SET live = live + ?3
         WHERE tenant_id = ?1 AND hash = ?2",
        params![tenant, hash, live],
    )?;
    if updated == 0 {
        tx.execute(
            "INSERT INTO network_acl_history_contents (tenant_id, hash, size, live, last_version)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                tenant,
                hash,
                i64::try_from(text.len()).unwrap_or(i64::MAX),
                live,
                version
            ],
        )?;
        tx.execute(
            "INSERT INTO network_acl_history_texts (tenant_id, hash, text) VALUES (?1, ?2, ?3)",
            params![tenant, hash, text],
        )?;
    }
    Ok(())
}

/// Entries of `tenant` by a query returning `(version, created_at, client_id, request_id,
/// changes)`; network ACL records still as stubs.
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
                             FROM network_acl_history_versions";

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
        let tenant = tenant.clone();
        let Ok(stored) = i64::try_from(version) else {
            return Ok(None);
        };
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            let Some(mut entry) = query_entries(
                &tx,
                &tenant,
                &format!("{ENTRY_COLUMNS} WHERE tenant_id = ?1 AND version = ?2"),
                params![tenant.as_str(), stored],
            )?
            .pop() else {
                return Ok(None);
            };
            let mut rules = BTreeMap::new();
            for hash in change_rules(&entry.changes) {
                let text =
                    content_text(&tx, &tenant, &hash)?.ok_or_else(|| missing(&tenant, version))?;
                let rule: Value =
                    serde_json::from_str(&text).map_err(|_| missing(&tenant, version))?;
                rules.insert(hash, rule);
            }
            tx.commit()?;
            join_changes(&tenant, version, &mut entry.changes, &rules)?;
            Ok(Some(entry))
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
            if version == current {
                let acls = query_acls(
                    &tx,
                    &tenant,
                    limits,
                    "SELECT id, record FROM network_acls WHERE tenant_id = ?1
                     ORDER BY priority, id",
                    params![tenant.as_str()],
                )?;
                return Ok(Some(RuleSet { version, acls }));
            }
            // The entry of `version` itself must be kept (of version 1 for version 0: the
            // tenant's history starts at its creation).
            let anchor = i64::try_from(version.max(1)).unwrap_or(i64::MAX);
            let manifest: Option<String> = tx
                .query_row(
                    "SELECT manifest FROM network_acl_history_versions
                     WHERE tenant_id = ?1 AND version = ?2",
                    params![tenant.as_str(), anchor],
                    |row| row.get(0),
                )
                .optional()?;
            let Some(manifest) = manifest else {
                return Ok(None);
            };
            if version == 0 {
                return Ok(Some(RuleSet::default()));
            }
            let text =
                content_text(&tx, &tenant, &manifest)?.ok_or_else(|| missing(&tenant, version))?;
            let stubs = parse_manifest(&tenant, version, &text)?;
            drop(text);
            let mut acls = Vec::with_capacity(stubs.len());
            for stub in &stubs {
                let hash = crate::history::stub_rule(stub).unwrap_or_default();
                let rule =
                    content_text(&tx, &tenant, hash)?.ok_or_else(|| missing(&tenant, version))?;
                acls.push(record_of(&tenant, limits, version, stub, &rule)?);
            }
            tx.commit()?;
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

    async fn history_bytes(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let bytes: Option<i64> = conn
                .query_row(
                    "SELECT history_bytes FROM tenants WHERE id = ?1",
                    [tenant.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            bytes
                .map(to_version)
                .ok_or_else(|| StoreError::NotFound(format!("tenant {tenant}")))
        })
        .await
    }
}

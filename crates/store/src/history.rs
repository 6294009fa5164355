//! A tenant's rule-set history: one entry per version, written in the transaction that bumps the
//! version, and the rule set of a kept version rebuilt on demand.
//!
//! # Storage
//!
//! One row per version (`network_acl_history`: version, time, client id, request id, and the
//! JSON array of the changes). A network ACL change carries the record before and after it
//! (`null` for a create's before and a delete's after); a network ACL key or managed list
//! change carries only ids and metadata (a key's `id`, `name`, `created_at`; a list's `name`,
//! `version`, `updated_at`, `entries`), **never key material or list items**. So a version costs
//! what it changed, not the tenant's whole rule set: a 10,000-rule tenant writing one rule
//! stores two records.
//!
//! The rule set of version `V` is rebuilt from the current one by undoing the network ACL
//! changes of every later version, newest first ([`undo`]). That needs every later version, so
//! retention removes the oldest versions only, contiguously: version `V` is kept while it is one
//! of the newest [`HistoryRetention::versions`] **or** younger than
//! [`HistoryRetention::days`]; the first version that fails both (and every older one) is
//! removed by the next write, a bounded batch per write ([`PRUNE_BATCH`]).
use netacl_model::{AclId, Limits, NetworkAcl, RuleSet};
use serde_json::{json, Value};

use crate::{StoreError, TenantId};

/// How many of the oldest entries one write looks at for removal (so a write's cost stays
/// bounded however long retention was not applied, e.g. after lowering it).
pub(crate) const PRUNE_BATCH: i64 = 64;

/// Who made a write: recorded with the version it produces. Both are `None` for a change the
/// node made itself (a managed list file it reloaded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOrigin {
    /// The API client whose token authorised the write (`azp`).
    pub client_id: Option<String>,
    /// The request's id (`X-Request-Id`).
    pub request_id: Option<String>,
}

/// How long versions are kept (see the module docs): a version is kept while **either** holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryRetention {
    /// The newest `versions` versions are kept whatever their age (at least 1).
    pub versions: u64,
    /// Versions younger than `days` days are kept whatever their number.
    pub days: u64,
}

impl Default for HistoryRetention {
    /// 1,000 versions or 90 days.
    fn default() -> Self {
        Self {
            versions: 1_000,
            days: 90,
        }
    }
}

impl HistoryRetention {
    /// `(highest version that may be removed, oldest time kept in ms)` after a write that
    /// produced `version` at `now_ms`.
    pub(crate) fn bounds(&self, version: u64, now_ms: i64) -> (i64, i64) {
        let removable = version.saturating_sub(self.versions.max(1));
        let age_ms = i64::try_from(self.days.saturating_mul(86_400_000)).unwrap_or(i64::MAX);
        (
            i64::try_from(removable).unwrap_or(i64::MAX),
            now_ms.saturating_sub(age_ms),
        )
    }

    /// Among the oldest entries `(version, created_at)` in ascending order, the highest version
    /// to remove: the end of the leading run that is outside both bounds.
    pub(crate) fn last_removable(
        &self,
        version: u64,
        now_ms: i64,
        oldest: &[(i64, i64)],
    ) -> Option<i64> {
        let (max_version, min_time) = self.bounds(version, now_ms);
        oldest
            .iter()
            .take_while(|(v, at)| *v <= max_version && *at < min_time)
            .map(|(v, _)| *v)
            .last()
    }
}

/// What kind of record a change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordKind {
    /// A network ACL (before/after are whole records).
    NetworkAcl,
    /// A network ACL key (ids and metadata only).
    NetworkAclKey,
    /// A managed list (name and metadata only).
    ManagedList,
}

impl RecordKind {
    /// The name in answers: `network_acl`, `network_acl_key`, `managed_list`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::NetworkAcl => "network_acl",
            RecordKind::NetworkAclKey => "network_acl_key",
            RecordKind::ManagedList => "managed_list",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::NetworkAcl, Self::NetworkAclKey, Self::ManagedList]
            .into_iter()
            .find(|k| k.as_str() == text)
    }
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeOp {
    /// The record was created (`before` is `None`).
    Create,
    /// The record was replaced or updated (a managed list's content replaced).
    Update,
    /// The record was deleted (`after` is `None`).
    Delete,
    /// A managed list file of a node was (re)loaded: its content is in force from this version.
    Reload,
}

impl ChangeOp {
    /// The name in answers: `create`, `update`, `delete`, `reload`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeOp::Create => "create",
            ChangeOp::Update => "update",
            ChangeOp::Delete => "delete",
            ChangeOp::Reload => "reload",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Create, Self::Update, Self::Delete, Self::Reload]
            .into_iter()
            .find(|k| k.as_str() == text)
    }
}

/// One record changed by a version.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordChange {
    /// The kind of record.
    pub kind: RecordKind,
    /// What happened to it.
    pub op: ChangeOp,
    /// Its id (a managed list's name).
    pub id: String,
    /// A network ACL's record before the change; a key's or list's metadata.
    pub before: Option<Value>,
    /// A network ACL's record after the change; a key's or list's metadata.
    pub after: Option<Value>,
}

impl RecordChange {
    /// A network ACL change from its records before and after.
    pub fn network_acl(before: Option<&NetworkAcl>, after: Option<&NetworkAcl>) -> Self {
        let op = match (before, after) {
            (None, _) => ChangeOp::Create,
            (Some(_), None) => ChangeOp::Delete,
            (Some(_), Some(_)) => ChangeOp::Update,
        };
        let id = after
            .or(before)
            .map(|acl| acl.id.to_string())
            .unwrap_or_default();
        Self {
            kind: RecordKind::NetworkAcl,
            op,
            id,
            before: before.map(NetworkAcl::to_json),
            after: after.map(NetworkAcl::to_json),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "type": self.kind.as_str(),
            "op": self.op.as_str(),
            "id": self.id,
            "before": self.before,
            "after": self.after,
        })
    }

    fn from_json(value: &Value) -> Option<Self> {
        let field = |name: &str| value.get(name).filter(|v| !v.is_null()).cloned();
        Some(Self {
            kind: RecordKind::parse(value.get("type")?.as_str()?)?,
            op: ChangeOp::parse(value.get("op")?.as_str()?)?,
            id: value.get("id")?.as_str()?.to_owned(),
            before: field("before"),
            after: field("after"),
        })
    }
}

/// One version of a tenant's rule set: who wrote it, when, and what it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionEntry {
    /// The rule-set version this write produced.
    pub version: u64,
    /// When it was committed, in milliseconds since the UNIX epoch.
    pub created_at_ms: i64,
    /// The API client that wrote it (`None` for a node's own change).
    pub client_id: Option<String>,
    /// The request that wrote it.
    pub request_id: Option<String>,
    /// The records it changed, in the order they were written.
    pub changes: Vec<RecordChange>,
}

/// The JSON text stored for a version's changes.
pub(crate) fn changes_text(changes: &[RecordChange]) -> Result<String, StoreError> {
    let array: Vec<Value> = changes.iter().map(RecordChange::to_json).collect();
    serde_json::to_string(&array)
        .map_err(|err| StoreError::Unavailable(format!("cannot serialise history: {err}")))
}

/// A stored version's changes, parsed.
pub(crate) fn parse_changes(
    tenant: &TenantId,
    version: u64,
    text: &str,
) -> Result<Vec<RecordChange>, StoreError> {
    let corrupt = |reason: &str| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: format!("history version {version}"),
        reason: reason.to_owned(),
    };
    let value: Value = serde_json::from_str(text).map_err(|_| corrupt("not JSON"))?;
    value
        .as_array()
        .ok_or_else(|| corrupt("not an array"))?
        .iter()
        .map(|item| RecordChange::from_json(item).ok_or_else(|| corrupt("malformed change")))
        .collect()
}

/// The metadata a key change records (never the material).
pub(crate) fn key_metadata(id: &str, name: &str, created_at_ms: i64) -> Value {
    json!({
        "id": id,
        "name": name,
        "created_at": netacl_model::Timestamp::from_unix_millis(created_at_ms).to_string(),
    })
}

/// The metadata a managed list change records (never the items).
pub(crate) fn list_metadata(
    name: &str,
    version: u64,
    updated_at_ms: i64,
    entries: Option<usize>,
) -> Value {
    let mut value = json!({
        "name": name,
        "version": version,
        "updated_at": netacl_model::Timestamp::from_unix_millis(updated_at_ms).to_string(),
    });
    if let (Some(entries), Some(object)) = (entries, value.as_object_mut()) {
        object.insert("entries".into(), entries.into());
    }
    value
}

/// Rebuilds the network ACLs of version `target` from those of version `current` (`acls`) and
/// the changes of every version in `(target, current]`, given newest first: each network ACL
/// change is undone (its record put back as it was before). `None` when the versions given are
/// not exactly `current, current - 1, ..., target + 1` (a gap: the history does not reach back
/// to `target`). Every record put back is re-validated.
pub(crate) fn undo(
    tenant: &TenantId,
    limits: &Limits,
    target: u64,
    current: u64,
    mut acls: Vec<NetworkAcl>,
    newest_first: &[(u64, Vec<RecordChange>)],
) -> Result<Option<RuleSet>, StoreError> {
    let expected = current.saturating_sub(target);
    if target > current || newest_first.len() as u64 != expected {
        return Ok(None);
    }
    for (offset, (version, _)) in newest_first.iter().enumerate() {
        if *version != current - offset as u64 {
            return Ok(None);
        }
    }
    for (version, changes) in newest_first {
        for change in changes.iter().rev() {
            if change.kind != RecordKind::NetworkAcl {
                continue;
            }
            let id = AclId::parse(&change.id).ok_or_else(|| StoreError::Corrupt {
                tenant: tenant.to_string(),
                id: format!("history version {version}"),
                reason: format!("malformed id {}", change.id),
            })?;
            acls.retain(|acl| acl.id != id);
            if let Some(before) = &change.before {
                let acl =
                    NetworkAcl::from_json(before, limits).map_err(|err| StoreError::Corrupt {
                        tenant: tenant.to_string(),
                        id: format!("history version {version}"),
                        reason: err.to_string(),
                    })?;
                acls.push(acl);
            }
        }
    }
    acls.sort_by(|a, b| (a.spec.priority, a.id.as_str()).cmp(&(b.spec.priority, b.id.as_str())));
    Ok(Some(RuleSet {
        version: target,
        acls,
    }))
}

/// The changes that turn `current` into `target` (records compared whole), as the rows to
/// delete (ids) and the records to insert; a record present in both but different is deleted
/// and inserted (so unique priorities never clash midway).
pub(crate) struct Restore {
    pub(crate) delete: Vec<AclId>,
    pub(crate) insert: Vec<NetworkAcl>,
    pub(crate) changes: Vec<RecordChange>,
}

impl Restore {
    pub(crate) fn plan(current: &[NetworkAcl], target: &[NetworkAcl]) -> Self {
        let mut plan = Self {
            delete: Vec::new(),
            insert: Vec::new(),
            changes: Vec::new(),
        };
        for old in current {
            match target.iter().find(|t| t.id == old.id) {
                Some(new) if new == old => {}
                Some(new) => {
                    plan.delete.push(old.id.clone());
                    plan.insert.push(new.clone());
                    plan.changes
                        .push(RecordChange::network_acl(Some(old), Some(new)));
                }
                None => {
                    plan.delete.push(old.id.clone());
                    plan.changes
                        .push(RecordChange::network_acl(Some(old), None));
                }
            }
        }
        for new in target {
            if !current.iter().any(|c| c.id == new.id) {
                plan.insert.push(new.clone());
                plan.changes
                    .push(RecordChange::network_acl(None, Some(new)));
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_keeps_a_version_while_either_bound_holds() {
        let day = 86_400_000;
        let r = HistoryRetention {
            versions: 3,
            days: 1,
        };
        let now = 10 * day;
        // Version 10 just written: 8, 9, 10 kept by number; older ones by age only.
        let oldest = [(5, 0), (6, 0), (7, now - day / 2), (8, 0)];
        assert_eq!(r.last_removable(10, now, &oldest), Some(6));
        // Every old one young enough: nothing removed.
        assert_eq!(r.last_removable(10, now, &[(5, now), (6, 0)]), None);
        // Old enough but among the newest three: kept.
        assert_eq!(r.last_removable(10, now, &[(8, 0), (9, 0)]), None);
        assert_eq!(r.last_removable(2, now, &[(1, 0), (2, 0)]), None);
    }

    #[test]
    fn changes_round_trip_through_their_stored_text() {
        let changes = vec![
            RecordChange {
                kind: RecordKind::NetworkAclKey,
                op: ChangeOp::Delete,
                id: "nak_1".into(),
                before: Some(json!({"id": "nak_1", "name": "k"})),
                after: None,
            },
            RecordChange {
                kind: RecordKind::ManagedList,
                op: ChangeOp::Reload,
                id: "auth0.tor".into(),
                before: None,
                after: Some(json!({"name": "auth0.tor"})),
            },
        ];
        let text = changes_text(&changes).expect("text");
        let tenant = TenantId::default_tenant();
        assert_eq!(parse_changes(&tenant, 1, &text).expect("parse"), changes);
        assert!(parse_changes(&tenant, 1, r#"[{"type":"x","op":"create","id":"a"}]"#).is_err());
    }
}

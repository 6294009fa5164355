//! A tenant's rule-set history: one entry per version, written in the transaction that bumps the
//! version, and the rule set of a kept version rebuilt on demand.
//!
//! # Storage
//!
//! A network ACL's large part, its `rule` (up to hundreds of thousands of entries), is stored
//! once per tenant however many versions hold it: the history is **content-addressed**.
//!
//! - `network_acl_history_versions`: one row per version: time, client id, request id, the
//!   JSON array of its changes, and the content hash of its **manifest**. A network ACL change
//!   carries its records before and after as **stubs** (the record's JSON with `rule` replaced
//!   by the SHA-256 of the rule's JSON text, [`split`]); a key or managed list change carries
//!   only its metadata (a key's `id`, `name`, `created_at`; a list's `name`, `version`,
//!   `updated_at`, `entries`), **never key material, fingerprints or list items**.
//! - `network_acl_history_contents` and `network_acl_history_texts`: the contents, by hash: the
//!   text of each rule and of each manifest (the JSON array of the stubs of every record in force
//!   right after a version, in priority order). A content is written once and shared by every
//!   version that holds it; `contents` says how many of the records in force use it (`live`) and
//!   the newest version that refers to it (`last_version`), `texts` holds the text itself (never
//!   updated, so bookkeeping never rewrites a large row).
//!
//! Toggling `active` on a rule of 100,000 CIDRs therefore writes one manifest (a few hundred
//! bytes per record in force) and no rule text. Version `V` is rebuilt from its own manifest and
//! the rules it names ([`record_of`]): the cost of the rule set itself, whatever the version's
//! age. The records before and after a change are its stubs joined with their rules ([`join`]).
//!
//! # Retention
//!
//! After each write, the oldest versions are removed while the count is over
//! [`HistoryRetention::versions`], while the oldest is older than [`HistoryRetention::days`], or
//! while the tenant's history bytes are over [`HistoryRetention::bytes`] (the text it stores:
//! each version's changes, client id and request id, and each content's text). The version just
//! written is always kept; removal goes from the oldest up, so the kept versions stay contiguous.
//! A content goes with the last kept version that refers to it: when no record in force uses it
//! and its `last_version` is older than the oldest version kept. One write removes at most
//! [`PRUNE_BATCH`] versions, so it never pays for a long backlog at once, and each write removes
//! more than it adds until the history is within bounds again.
use std::collections::BTreeMap;

use netacl_model::{Limits, NetworkAcl, RuleSet};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::{StoreError, TenantId};

/// The most versions one write removes (so a write's cost stays bounded however long retention
/// was not applied, e.g. after lowering it).
pub(crate) const PRUNE_BATCH: i64 = 64;

/// The default of [`HistoryRetention::bytes`]: 64 MiB per tenant.
pub const DEFAULT_HISTORY_BYTES: u64 = 64 * 1024 * 1024;

/// Who made a write: recorded with the version it produces. Both are `None` for a change the
/// node made itself (a managed list file it reloaded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOrigin {
    /// The API client whose token authorised the write (`azp`).
    pub client_id: Option<String>,
    /// The request's id (`X-Request-Id`).
    pub request_id: Option<String>,
}

/// How much history a tenant keeps (see the module docs): a version is removed as soon as
/// **any** bound lets it go (the version just written is always kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryRetention {
    /// At most this many versions are kept (at least 1).
    pub versions: u64,
    /// Versions older than this many days are removed (0: no age limit).
    pub days: u64,
    /// The tenant's history holds at most this many bytes, as long as more than the current
    /// version is kept (0: no size limit).
    pub bytes: u64,
}

impl Default for HistoryRetention {
    /// 1,000 versions, 90 days, [`DEFAULT_HISTORY_BYTES`].
    fn default() -> Self {
        Self {
            versions: 1_000,
            days: 90,
            bytes: DEFAULT_HISTORY_BYTES,
        }
    }
}

impl HistoryRetention {
    /// Among the oldest entries `(version, created_at)` in ascending order, after a write that
    /// produced `version` at `now_ms`: the highest version that the count or the age removes
    /// (the end of the leading run of entries beyond either; never `version` itself).
    pub(crate) fn last_removable(
        &self,
        version: u64,
        now_ms: i64,
        oldest: &[(i64, i64)],
    ) -> Option<i64> {
        let current = i64::try_from(version).unwrap_or(i64::MAX);
        let beyond_count =
            i64::try_from(version.saturating_sub(self.versions.max(1))).unwrap_or(i64::MAX);
        let min_time = match self.days {
            0 => i64::MIN,
            days => {
                let age_ms = i64::try_from(days.saturating_mul(86_400_000)).unwrap_or(i64::MAX);
                now_ms.saturating_sub(age_ms)
            }
        };
        oldest
            .iter()
            .take_while(|(v, at)| *v < current && (*v <= beyond_count || *at < min_time))
            .map(|(v, _)| *v)
            .last()
    }

    /// Whether a history of `bytes` is over the size budget.
    pub(crate) fn over_budget(&self, bytes: i64) -> bool {
        self.bytes > 0 && u64::try_from(bytes).unwrap_or(0) > self.bytes
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

fn corrupt(tenant: &TenantId, version: u64, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: format!("history version {version}"),
        reason: reason.into(),
    }
}

/// The JSON text stored for changes.
/// A kept version refers to a content (rule or manifest text) that is not stored.
pub(crate) fn missing(tenant: &TenantId, version: u64) -> StoreError {
    StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: format!("history version {version}"),
        reason: "a content it refers to is missing".into(),
    }
}

/// A network ACL record in force, read from its stored JSON text.
pub(crate) fn record_in_force(tenant: &TenantId, text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|err| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: "network ACL".into(),
        reason: err.to_string(),
    })
}

fn changes_text(changes: &[RecordChange]) -> Result<String, StoreError> {
    let array: Vec<Value> = changes.iter().map(RecordChange::to_json).collect();
    serde_json::to_string(&array)
        .map_err(|err| StoreError::Unavailable(format!("cannot serialise history: {err}")))
}

/// A stored version's changes, parsed (network ACL records still as stubs; an entry of the
/// format before schema 10 has whole records there).
pub(crate) fn parse_changes(
    tenant: &TenantId,
    version: u64,
    text: &str,
) -> Result<Vec<RecordChange>, StoreError> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| corrupt(tenant, version, "not JSON"))?;
    value
        .as_array()
        .ok_or_else(|| corrupt(tenant, version, "not an array"))?
        .iter()
        .map(|item| {
            RecordChange::from_json(item)
                .ok_or_else(|| corrupt(tenant, version, "malformed change"))
        })
        .collect()
}

/// The changes as the versions list gives them: network ACL records left out (they are read
/// one version at a time, [`join`]); key and list metadata kept.
pub(crate) fn without_records(mut changes: Vec<RecordChange>) -> Vec<RecordChange> {
    for change in &mut changes {
        if change.kind == RecordKind::NetworkAcl {
            change.before = None;
            change.after = None;
        }
    }
    changes
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

// ---------------------------------------------------------------------------------------------
// Contents, stubs and manifests

/// The content address of a text: its SHA-256, 64 lowercase hex digits.
pub(crate) fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A network ACL record split into its stub (the record with `rule` replaced by the rule's
/// content hash) and its rule's text.
pub(crate) struct Split {
    pub(crate) stub: Value,
    pub(crate) hash: String,
    pub(crate) text: String,
}

/// Splits a network ACL record (`None` when it is not an object with an `id` string and a
/// `rule`). Members keep their order, so [`join`] gives back the same record.
pub(crate) fn split(record: &Value) -> Option<Split> {
    let object = record.as_object()?;
    object.get("id")?.as_str()?;
    let text = serde_json::to_string(object.get("rule")?).ok()?;
    let hash = content_hash(&text);
    let stub: Map<String, Value> = object
        .iter()
        .map(|(key, value)| {
            let value = if key == "rule" {
                Value::String(hash.clone())
            } else {
                value.clone()
            };
            (key.clone(), value)
        })
        .collect();
    Some(Split {
        stub: Value::Object(stub),
        hash,
        text,
    })
}

/// The content hash a stub names for its rule.
pub(crate) fn stub_rule(stub: &Value) -> Option<&str> {
    stub.get("rule")?.as_str()
}

fn stub_id(stub: &Value) -> Option<&str> {
    stub.get("id")?.as_str()
}

/// The record a stub stands for, its rule put back in place.
pub(crate) fn join(stub: &Value, rule: Value) -> Value {
    let mut rule = Some(rule);
    let mut record = Map::new();
    for (key, value) in stub.as_object().into_iter().flatten() {
        let value = match (key.as_str(), rule.take()) {
            ("rule", Some(rule)) => rule,
            (_, left) => {
                rule = left;
                value.clone()
            }
        };
        record.insert(key.clone(), value);
    }
    Value::Object(record)
}

/// Sorts stubs as a rule set is ordered: by priority, then id.
fn sort_stubs(stubs: &mut [Value]) {
    stubs.sort_by(|a, b| {
        let key = |s: &Value| {
            (
                s.get("priority").and_then(Value::as_u64).unwrap_or(0),
                stub_id(s).unwrap_or_default().to_owned(),
            )
        };
        key(a).cmp(&key(b))
    });
}

/// A manifest's text: the JSON array of the stubs in force, in priority order.
fn manifest_text(stubs: &[Value]) -> Result<String, StoreError> {
    serde_json::to_string(stubs)
        .map_err(|err| StoreError::Unavailable(format!("cannot serialise history: {err}")))
}

/// The stubs of a stored manifest.
pub(crate) fn parse_manifest(
    tenant: &TenantId,
    version: u64,
    text: &str,
) -> Result<Vec<Value>, StoreError> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| corrupt(tenant, version, "manifest is not JSON"))?;
    let Value::Array(stubs) = value else {
        return Err(corrupt(tenant, version, "manifest is not an array"));
    };
    if stubs
        .iter()
        .any(|stub| stub_id(stub).is_none() || stub_rule(stub).is_none())
    {
        return Err(corrupt(tenant, version, "malformed manifest entry"));
    }
    Ok(stubs)
}

/// The network ACL a stub stands for, given its rule's text, re-validated.
pub(crate) fn record_of(
    tenant: &TenantId,
    limits: &Limits,
    version: u64,
    stub: &Value,
    rule_text: &str,
) -> Result<NetworkAcl, StoreError> {
    let rule: Value = serde_json::from_str(rule_text)
        .map_err(|_| corrupt(tenant, version, "a rule is not JSON"))?;
    NetworkAcl::from_json(&join(stub, rule), limits)
        .map_err(|err| corrupt(tenant, version, err.to_string()))
}

/// Orders rebuilt records as a rule set is (priority, then id).
pub(crate) fn rule_set(version: u64, mut acls: Vec<NetworkAcl>) -> RuleSet {
    acls.sort_by(|a, b| (a.spec.priority, a.id.as_str()).cmp(&(b.spec.priority, b.id.as_str())));
    RuleSet { version, acls }
}

/// The distinct rule hashes the network ACL stubs of `changes` name.
pub(crate) fn change_rules(changes: &[RecordChange]) -> Vec<String> {
    let mut hashes: Vec<String> = changes
        .iter()
        .filter(|c| c.kind == RecordKind::NetworkAcl)
        .flat_map(|c| [&c.before, &c.after])
        .flatten()
        .filter_map(|stub| stub_rule(stub).map(str::to_owned))
        .collect();
    hashes.sort();
    hashes.dedup();
    hashes
}

/// Puts the rules (by hash, parsed) back into the network ACL stubs of `changes`.
pub(crate) fn join_changes(
    tenant: &TenantId,
    version: u64,
    changes: &mut [RecordChange],
    rules: &BTreeMap<String, Value>,
) -> Result<(), StoreError> {
    for change in changes
        .iter_mut()
        .filter(|c| c.kind == RecordKind::NetworkAcl)
    {
        for side in [&mut change.before, &mut change.after] {
            if let Some(stub) = side.as_ref() {
                let rule = stub_rule(stub)
                    .and_then(|hash| rules.get(hash))
                    .ok_or_else(|| corrupt(tenant, version, "a rule of a change is missing"))?;
                *side = Some(join(stub, rule.clone()));
            }
        }
    }
    Ok(())
}

/// One use of a content by the version being written: insert it when it is absent (from
/// `text`), add `live` to the number of records in force using it, and raise its last version
/// to `last_version`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContentUse {
    pub(crate) hash: String,
    pub(crate) text: Option<String>,
    pub(crate) live: i64,
    pub(crate) last_version: i64,
}

/// The contents a version uses, merged by hash.
#[derive(Default)]
struct Uses(BTreeMap<String, ContentUse>);

impl Uses {
    fn add(&mut self, hash: &str, text: Option<String>, live: i64, last_version: i64) {
        let entry = self.0.entry(hash.to_owned()).or_insert_with(|| ContentUse {
            hash: hash.to_owned(),
            text: None,
            live: 0,
            last_version,
        });
        entry.live += live;
        entry.last_version = entry.last_version.max(last_version);
        if entry.text.is_none() {
            entry.text = text;
        }
    }
}

/// What the history knows of the version before the one being written.
pub(crate) enum Previous {
    /// It is version 0: no records.
    Empty,
    /// Its manifest: hash and stubs.
    Manifest { hash: String, stubs: Vec<Value> },
    /// It has no entry (committed before the history, or not convertible): the records in
    /// force **after** the write, whole, from which the manifest is built afresh.
    Unknown { records: Vec<Value> },
}

/// What recording a version writes.
pub(crate) struct VersionPlan {
    /// The stored changes (network ACL records as stubs).
    pub(crate) changes: String,
    /// The hash of the manifest of the version.
    pub(crate) manifest: String,
    /// Contents to insert or count (the manifest, rules in force, rules of the changes).
    pub(crate) uses: Vec<ContentUse>,
    /// Whether every content's `live` count is reset first (the manifest is built afresh).
    pub(crate) reset_live: bool,
}

impl VersionPlan {
    /// The bytes the version's own row counts for: its changes, client id and request id.
    pub(crate) fn row_bytes(&self, origin: &crate::WriteOrigin) -> i64 {
        let len = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        i64::try_from(self.changes.len() + len(&origin.client_id) + len(&origin.request_id))
            .unwrap_or(i64::MAX)
    }
}

/// Plans the entry of `version` from the previous version's manifest and the changes of the
/// write (network ACL changes with whole records before and after).
pub(crate) fn plan_version(
    tenant: &TenantId,
    version: u64,
    previous: Previous,
    changes: &[RecordChange],
) -> Result<VersionPlan, StoreError> {
    let this = i64::try_from(version).unwrap_or(i64::MAX);
    let mut uses = Uses::default();
    let malformed = |id: &str| corrupt(tenant, version, format!("malformed record {id}"));
    let (mut stubs, previous_hash, known) = match previous {
        Previous::Empty => (Vec::new(), None, true),
        Previous::Manifest { hash, stubs } => (stubs, Some(hash), true),
        Previous::Unknown { records } => {
            let mut stubs = Vec::with_capacity(records.len());
            for record in &records {
                let split = split(record).ok_or_else(|| malformed("in force"))?;
                uses.add(&split.hash, Some(split.text), 1, this);
                stubs.push(split.stub);
            }
            (stubs, None, false)
        }
    };
    let mut stored = Vec::with_capacity(changes.len());
    for change in changes {
        if change.kind != RecordKind::NetworkAcl {
            stored.push(change.clone());
            continue;
        }
        let before = match &change.before {
            None => None,
            Some(record) => {
                let known_stub = stubs
                    .iter()
                    .find(|s| known && stub_id(s) == Some(change.id.as_str()))
                    .cloned();
                Some(match known_stub {
                    Some(stub) => {
                        let hash = stub_rule(&stub).unwrap_or_default().to_owned();
                        uses.add(&hash, None, -1, this);
                        stub
                    }
                    None => {
                        let split = split(record).ok_or_else(|| malformed(&change.id))?;
                        uses.add(&split.hash, Some(split.text), 0, this);
                        split.stub
                    }
                })
            }
        };
        let after = match &change.after {
            None => None,
            Some(record) => {
                let split = split(record).ok_or_else(|| malformed(&change.id))?;
                uses.add(&split.hash, Some(split.text), i64::from(known), this);
                Some(split.stub)
            }
        };
        if known {
            stubs.retain(|s| stub_id(s) != Some(change.id.as_str()));
            stubs.extend(after.clone());
        }
        stored.push(RecordChange {
            before,
            after,
            ..change.clone()
        });
    }
    sort_stubs(&mut stubs);
    let text = manifest_text(&stubs)?;
    let manifest = content_hash(&text);
    if previous_hash.as_deref() != Some(manifest.as_str()) {
        uses.add(&manifest, Some(text), 1, this);
        if let Some(previous) = &previous_hash {
            uses.add(previous, None, -1, this - 1);
        }
    }
    Ok(VersionPlan {
        changes: changes_text(&stored)?,
        manifest,
        uses: uses.0.into_values().collect(),
        reset_live: !known,
    })
}

// ---------------------------------------------------------------------------------------------
// Conversion of the format before schema 10

/// An entry of the format before schema 10 (whole records in its changes), converted.
pub(crate) struct Converted {
    /// The stored changes (records as stubs).
    pub(crate) changes: String,
    /// The manifest of the version: hash and text.
    pub(crate) manifest: (String, String),
    /// The rules its changes name: hash and text.
    pub(crate) rules: Vec<(String, String)>,
}

/// Converts the entry of `version` whose changes are `text` (format before schema 10), given
/// the stubs in force right after it (`stubs`, which become those in force right before it: its
/// network ACL changes undone, as the history before schema 10 rebuilt versions). `Err` with
/// the reason when the entry cannot be converted.
pub(crate) fn convert_entry(
    tenant: &TenantId,
    version: u64,
    text: &str,
    stubs: &mut Vec<Value>,
) -> Result<Converted, String> {
    let changes = parse_changes(tenant, version, text).map_err(|err| err.to_string())?;
    sort_stubs(stubs);
    let manifest = manifest_text(stubs).map_err(|err| err.to_string())?;
    let mut rules = Vec::new();
    let mut stored = Vec::with_capacity(changes.len());
    for change in &changes {
        if change.kind != RecordKind::NetworkAcl {
            stored.push(change.clone());
            continue;
        }
        let mut side = |record: &Option<Value>| -> Result<Option<Value>, String> {
            let Some(record) = record else {
                return Ok(None);
            };
            let split = split(record)
                .ok_or_else(|| format!("malformed record {} in version {version}", change.id))?;
            rules.push((split.hash, split.text));
            Ok(Some(split.stub))
        };
        let before = side(&change.before)?;
        let after = side(&change.after)?;
        stored.push(RecordChange {
            before,
            after,
            ..change.clone()
        });
    }
    for change in stored.iter().rev() {
        if change.kind == RecordKind::NetworkAcl {
            stubs.retain(|s| stub_id(s) != Some(change.id.as_str()));
            stubs.extend(change.before.clone());
        }
    }
    Ok(Converted {
        changes: changes_text(&stored).map_err(|err| err.to_string())?,
        manifest: (content_hash(&manifest), manifest),
        rules,
    })
}

// ---------------------------------------------------------------------------------------------
// Rollback

/// The changes that turn `current` into `target` (records compared whole), as the rows to
/// delete (ids) and the records to insert; a record present in both but different is deleted
/// and inserted (so unique priorities never clash midway).
pub(crate) struct Restore {
    pub(crate) delete: Vec<netacl_model::AclId>,
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

    const DAY: i64 = 86_400_000;

    #[test]
    fn retention_removes_a_version_as_soon_as_any_bound_lets_it_go() {
        let now = 10 * DAY;
        let r = HistoryRetention {
            versions: 3,
            days: 1,
            bytes: 0,
        };
        // Version 10 just written: the count keeps 8, 9, 10 whatever their age.
        let young = [(5, now), (6, now), (7, now), (8, now)];
        assert_eq!(r.last_removable(10, now, &young), Some(7));
        // Under the count, the age removes what is older than a day, from the oldest up.
        let aged = [(8, now - 2 * DAY), (9, now - 2 * DAY), (10, now - 2 * DAY)];
        let roomy = HistoryRetention { versions: 100, ..r };
        assert_eq!(roomy.last_removable(10, now, &aged), Some(9), "never 10");
        assert_eq!(roomy.last_removable(10, now, &[(8, now), (9, 0)]), None);
        // No age limit: the count alone.
        let counted = HistoryRetention { days: 0, ..roomy };
        assert_eq!(counted.last_removable(10, now, &aged), None);
        assert_eq!(r.last_removable(1, now, &[(1, 0)]), None);
    }

    #[test]
    fn the_byte_budget_applies_when_set() {
        let r = HistoryRetention {
            versions: 10,
            days: 0,
            bytes: 100,
        };
        assert!(!r.over_budget(100));
        assert!(r.over_budget(101));
        assert!(!HistoryRetention { bytes: 0, ..r }.over_budget(i64::MAX));
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

    fn record(id: &str, priority: u64, active: bool, cidrs: &[&str]) -> Value {
        json!({"id": id, "description": "d", "active": active, "priority": priority,
               "rule": {"action": {"block": true}, "scope": "tenant",
                        "match": {"ipv4_cidrs": cidrs}},
               "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"})
    }

    #[test]
    fn a_split_record_joins_back_member_for_member() {
        let whole = record("acl_a", 10, true, &["192.0.2.0/24"]);
        let split = split(&whole).expect("split");
        assert_eq!(split.text, whole["rule"].to_string());
        assert_eq!(stub_rule(&split.stub), Some(split.hash.as_str()));
        let joined = join(&split.stub, whole["rule"].clone());
        assert_eq!(joined, whole);
        assert_eq!(
            joined.to_string(),
            whole.to_string(),
            "members in their order"
        );
        assert!(super::split(&json!({"id": "acl_a"})).is_none());
        assert!(super::split(&json!([1])).is_none());
    }

    fn network_acl(before: Option<Value>, after: Option<Value>) -> RecordChange {
        let id = after.as_ref().or(before.as_ref()).expect("a record")["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let op = match (&before, &after) {
            (None, _) => ChangeOp::Create,
            (_, None) => ChangeOp::Delete,
            _ => ChangeOp::Update,
        };
        RecordChange {
            kind: RecordKind::NetworkAcl,
            op,
            id,
            before,
            after,
        }
    }

    fn uses(plan: &VersionPlan) -> Vec<(String, bool, i64, i64)> {
        plan.uses
            .iter()
            .map(|u| (u.hash.clone(), u.text.is_some(), u.live, u.last_version))
            .collect()
    }

    #[test]
    fn a_toggle_uses_a_new_manifest_and_no_new_rule() {
        let tenant = TenantId::default_tenant();
        let on = record("acl_a", 10, true, &["192.0.2.0/24", "198.51.100.0/24"]);
        let off = record("acl_a", 10, false, &["192.0.2.0/24", "198.51.100.0/24"]);
        let created = plan_version(
            &tenant,
            1,
            Previous::Empty,
            &[network_acl(None, Some(on.clone()))],
        )
        .expect("plan");
        let rule = split(&on).expect("split").hash;
        assert!(!created.reset_live);
        let mut want = vec![
            (rule.clone(), true, 1, 1),
            (created.manifest.clone(), true, 1, 1),
        ];
        want.sort();
        assert_eq!(uses(&created), want);

        let stubs = vec![split(&on).expect("split").stub];
        let toggled = plan_version(
            &tenant,
            2,
            Previous::Manifest {
                hash: created.manifest.clone(),
                stubs,
            },
            &[network_acl(Some(on.clone()), Some(off.clone()))],
        )
        .expect("plan");
        let mut want = vec![
            // The rule: one record stops using it, one starts: no new text to store.
            (rule.clone(), true, 0, 2),
            (toggled.manifest.clone(), true, 1, 2),
            // The manifest before is last used by version 1.
            (created.manifest.clone(), false, -1, 1),
        ];
        want.sort();
        assert_eq!(uses(&toggled), want);
        let stored = parse_changes(&tenant, 2, &toggled.changes).expect("changes");
        assert_eq!(stored[0].before, Some(split(&on).expect("s").stub));
        assert_eq!(stored[0].after, Some(split(&off).expect("s").stub));
        assert!(
            !toggled.changes.contains("192.0.2.0/24"),
            "no rule text in a version"
        );
    }

    #[test]
    fn a_version_without_a_predecessor_builds_its_manifest_from_the_records_in_force() {
        let tenant = TenantId::default_tenant();
        let a = record("acl_a", 20, true, &["192.0.2.0/24"]);
        let b = record("acl_b", 10, true, &["192.0.2.0/24"]);
        let old_b = record("acl_b", 10, true, &["203.0.113.0/24"]);
        let plan = plan_version(
            &tenant,
            7,
            Previous::Unknown {
                records: vec![a.clone(), b.clone()],
            },
            &[network_acl(Some(old_b.clone()), Some(b.clone()))],
        )
        .expect("plan");
        assert!(plan.reset_live);
        let shared = split(&a).expect("s").hash;
        let replaced = split(&old_b).expect("s").hash;
        let mut want = vec![
            // Both records in force use one rule.
            (shared, true, 2, 7),
            // The rule b had before: kept for version 7's change, in force nowhere.
            (replaced, true, 0, 7),
            (plan.manifest.clone(), true, 1, 7),
        ];
        want.sort();
        assert_eq!(uses(&plan), want);
    }

    #[test]
    fn an_old_entry_converts_and_its_predecessor_is_its_changes_undone() {
        let tenant = TenantId::default_tenant();
        let a1 = record("acl_a", 10, true, &["192.0.2.0/24"]);
        let a2 = record("acl_a", 10, false, &["192.0.2.0/24"]);
        let b = record("acl_b", 20, true, &["198.51.100.0/24"]);
        // Version 5 replaced a1 by a2 and deleted b; after it only a2 is in force.
        let text = changes_text(&[
            network_acl(Some(a1.clone()), Some(a2.clone())),
            network_acl(Some(b.clone()), None),
        ])
        .expect("text");
        let mut stubs = vec![split(&a2).expect("s").stub];
        let converted = convert_entry(&tenant, 5, &text, &mut stubs).expect("converted");
        sort_stubs(&mut stubs);
        assert_eq!(
            converted.manifest.1,
            serde_json::to_string(&[split(&a2).expect("s").stub]).expect("json")
        );
        assert_eq!(
            stubs,
            vec![split(&a1).expect("s").stub, split(&b).expect("s").stub],
            "version 4: a1 and b"
        );
        let mut changes = parse_changes(&tenant, 5, &converted.changes).expect("changes");
        let rules: BTreeMap<String, Value> = converted
            .rules
            .iter()
            .map(|(hash, text)| (hash.clone(), serde_json::from_str(text).expect("rule")))
            .collect();
        join_changes(&tenant, 5, &mut changes, &rules).expect("joined");
        assert_eq!(changes[0].before, Some(a1));
        assert_eq!(changes[0].after, Some(a2));
        assert_eq!(changes[1].before, Some(b));
        assert!(convert_entry(&tenant, 4, "not json", &mut stubs).is_err());
        assert!(convert_entry(
            &tenant,
            4,
            r#"[{"type":"network_acl","op":"delete","id":"x","before":{"id":"x"}}]"#,
            &mut stubs
        )
        .is_err());
    }
}

//! Helpers shared by the test modules.

use netacl_model::{Limits, RuleSet};
use serde_json::{json, Value};

pub const TS: &str = "2026-07-30T11:42:25.354Z";

/// An id from a short base58 tag (`acl_` + tag padded with `1` to 22 characters).
pub fn id(tag: &str) -> String {
    assert!(tag.len() <= 22);
    format!("acl_{tag}{}", "1".repeat(22 - tag.len()))
}

/// A stored record.
pub fn record(tag: &str, priority: u64, active: bool, rule: Value) -> Value {
    json!({
        "id": id(tag),
        "description": tag,
        "active": active,
        "priority": priority,
        "rule": rule,
        "created_at": TS,
        "updated_at": TS,
    })
}

/// A rule set from records, validated by the model.
pub fn rule_set(records: Vec<Value>, version: u64) -> RuleSet {
    RuleSet::from_json(&Value::Array(records), version, &Limits::default())
        .unwrap_or_else(|e| panic!("test rule set does not validate: {e}"))
}

use std::fmt;

use crate::{Limits, Rule, Timestamp, ValidationError};

const BASE58: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// A network ACL id: `acl_` followed by 22 base58 characters.
///
/// Held inline (26 bytes, no heap), so that copying one, as the edge does for every decision
/// it reports, never allocates. Ordered and compared as its text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclId([u8; ACL_ID_LEN]);

const ACL_ID_LEN: usize = 26;

impl AclId {
    /// Parses an id; `None` when it does not have the `acl_` + 22 base58 form.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix("acl_")?;
        if rest.len() != 22 || !rest.bytes().all(|c| BASE58.contains(&c)) {
            return None;
        }
        let mut text = [0u8; ACL_ID_LEN];
        text.copy_from_slice(s.as_bytes());
        Some(Self(text))
    }

    /// The id that 128 random bits spell (58^22 > 2^128, so every value has its own id).
    pub fn from_random(mut bits: u128) -> Self {
        let mut digits = [b'1'; 22];
        for digit in digits.iter_mut().rev() {
            *digit = BASE58[(bits % 58) as usize];
            bits /= 58;
        }
        let mut text = [0u8; ACL_ID_LEN];
        text[..4].copy_from_slice(b"acl_");
        text[4..].copy_from_slice(&digits);
        Self(text)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Always ASCII: built only by `parse` and `from_random`.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for AclId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for AclId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AclId").field(&self.as_str()).finish()
    }
}

/// Evaluation order, 1..=100; lower first. Defaults to 50.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Priority(u8);

impl Priority {
    /// The default priority, 50.
    pub const DEFAULT: Priority = Priority(50);

    /// A priority in 1..=100.
    pub fn new(value: u64) -> Option<Self> {
        (1..=100).contains(&value).then_some(Self(value as u8))
    }

    /// The number.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A validated create/replace body: `{description, active, priority, rule}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkAclSpec {
    /// At most 255 characters.
    pub description: String,
    /// An inactive rule is stored but never evaluated.
    pub active: bool,
    /// Evaluation order.
    pub priority: Priority,
    /// What to match and what to do.
    pub rule: Rule,
}

impl NetworkAclSpec {
    /// Validates a create/replace body.
    pub fn from_json(body: &serde_json::Value, limits: &Limits) -> Result<Self, ValidationError> {
        crate::validate::spec_from_json(body, "", limits)
    }

    /// The body as JSON, every value exactly as it was accepted.
    pub fn to_json(&self) -> serde_json::Value {
        crate::validate::spec_to_json(self)
    }

    /// How many entries the rule holds over `match` and `not_match`.
    pub fn entry_count(&self) -> usize {
        self.rule
            .match_criteria
            .as_ref()
            .map_or(0, |c| c.entry_count())
            + self.rule.not_match.as_ref().map_or(0, |c| c.entry_count())
    }
}

/// A validated partial-update (PATCH) body: any non-empty subset of the four fields. A `rule`
/// given here replaces the whole stored rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkAclPatch {
    /// New description.
    pub description: Option<String>,
    /// New `active` flag.
    pub active: Option<bool>,
    /// New priority.
    pub priority: Option<Priority>,
    /// New rule (replaces the whole rule).
    pub rule: Option<Rule>,
}

impl NetworkAclPatch {
    /// Validates a PATCH body.
    pub fn from_json(body: &serde_json::Value, limits: &Limits) -> Result<Self, ValidationError> {
        crate::validate::patch_from_json(body, limits)
    }

    /// The spec that results from applying the patch to `current`.
    pub fn apply(&self, current: &NetworkAclSpec) -> NetworkAclSpec {
        NetworkAclSpec {
            description: self
                .description
                .clone()
                .unwrap_or_else(|| current.description.clone()),
            active: self.active.unwrap_or(current.active),
            priority: self.priority.unwrap_or(current.priority),
            rule: self.rule.clone().unwrap_or_else(|| current.rule.clone()),
        }
    }
}

/// A stored network ACL: the spec plus the server-set `id`, `created_at` and `updated_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkAcl {
    /// `acl_...`.
    pub id: AclId,
    /// The validated body.
    pub spec: NetworkAclSpec,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
}

impl NetworkAcl {
    /// Validates a stored record (as the list and get endpoints return it).
    pub fn from_json(record: &serde_json::Value, limits: &Limits) -> Result<Self, ValidationError> {
        crate::validate::record_from_json(record, "", limits)
    }

    /// The record as the API returns it.
    pub fn to_json(&self) -> serde_json::Value {
        crate::validate::record_to_json(self)
    }
}

/// A tenant's whole rule set at one version: what the evaluator compiles.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleSet {
    /// The version of the rule set (the store bumps it on every change).
    pub version: u64,
    /// The records, in any order.
    pub acls: Vec<NetworkAcl>,
}

impl NetworkAcl {
    /// The network ACL key ids the **active** records of `acls` name in
    /// `http_message_signature` (in `match` or `not_match`), sorted, each once.
    pub fn message_signature_keys<'a>(
        acls: impl IntoIterator<Item = &'a NetworkAcl>,
    ) -> Vec<&'a crate::NetworkAclKeyId> {
        let mut ids: Vec<&crate::NetworkAclKeyId> = acls
            .into_iter()
            .filter(|acl| acl.spec.active)
            .flat_map(|acl| acl.spec.rule.criteria())
            .filter_map(|criteria| criteria.http_message_signature())
            .flatten()
            .collect();
        ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        ids.dedup_by(|a, b| a.as_str() == b.as_str());
        ids
    }
}

impl RuleSet {
    /// The network ACL key ids the **active** rules name in `http_message_signature` (in
    /// `match` or `not_match`), sorted, each once: the keys an edge needs to verify signatures
    /// for this rule set.
    pub fn message_signature_keys(&self) -> Vec<&crate::NetworkAclKeyId> {
        NetworkAcl::message_signature_keys(&self.acls)
    }

    /// Validates a rule file: a JSON array of stored records, or the list endpoint's
    /// `{"network_acls": [...]}` envelope. Errors name the record's index and id.
    pub fn from_json(
        value: &serde_json::Value,
        version: u64,
        limits: &Limits,
    ) -> Result<Self, ValidationError> {
        crate::validate::rule_set_from_json(value, version, limits)
    }

    /// How many entries the set holds over all its rules.
    pub fn entry_count(&self) -> usize {
        self.acls.iter().map(|acl| acl.spec.entry_count()).sum()
    }
}

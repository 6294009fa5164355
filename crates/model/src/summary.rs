//! The `acls_summary` report of an edge: one rule's counts over one interval.
use serde::{Deserialize, Serialize};

use crate::{AclId, RuleScope};

/// The actions a summary may name.
pub const SUMMARY_ACTIONS: [&str; 4] = ["block", "allow", "redirect", "log"];

/// The longest summary interval accepted, in seconds (one day).
pub const MAX_SUMMARY_INTERVAL_S: u64 = 86_400;

/// One rule's counts over one summary interval, as an edge reports them (in process, or to the
/// admin server it follows: `POST /_netacl/v1/edge/summaries`). Unknown members are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclSummary {
    /// The rule (`acl_...`).
    pub rule_id: String,
    /// Its action: `block`, `allow`, `redirect` or `log`.
    pub action: String,
    /// Its scope (`tenant`, `management`, ...).
    pub scope: String,
    /// The rule-set version the edge enforced at the end of the interval.
    pub policy_version: u64,
    /// The interval's length, in seconds (1 to [`MAX_SUMMARY_INTERVAL_S`]).
    pub interval_s: u64,
    /// Requests the rule was evaluated for during the interval.
    pub evaluated: u64,
    /// Requests it matched.
    pub matched: u64,
    /// Connections it refused before the TLS handshake.
    pub connections_refused: u64,
}

impl AclSummary {
    /// Checks the members a JSON type does not constrain; the error names the member
    /// (`rule_id: ...`).
    pub fn check(&self) -> Result<(), String> {
        if AclId::parse(&self.rule_id).is_none() {
            return Err("rule_id: not a network ACL id (acl_ and 22 base58 characters)".into());
        }
        if !SUMMARY_ACTIONS.contains(&self.action.as_str()) {
            return Err(format!(
                "action: must be one of {}",
                SUMMARY_ACTIONS.join(", ")
            ));
        }
        if RuleScope::parse(&self.scope).is_none() {
            return Err("scope: not a rule scope".into());
        }
        if !(1..=MAX_SUMMARY_INTERVAL_S).contains(&self.interval_s) {
            return Err(format!("interval_s: must be 1 to {MAX_SUMMARY_INTERVAL_S}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> AclSummary {
        AclSummary {
            rule_id: "acl_1111111111111111111111".into(),
            action: "block".into(),
            scope: "tenant".into(),
            policy_version: 3,
            interval_s: 600,
            evaluated: 10,
            matched: 4,
            connections_refused: 1,
        }
    }

    #[test]
    fn summaries_are_checked_member_by_member() {
        assert_eq!(summary().check(), Ok(()));
        let bad = [
            AclSummary {
                rule_id: "acl_0".into(),
                ..summary()
            },
            AclSummary {
                action: "deny".into(),
                ..summary()
            },
            AclSummary {
                scope: "everything".into(),
                ..summary()
            },
            AclSummary {
                interval_s: 0,
                ..summary()
            },
            AclSummary {
                interval_s: 86_401,
                ..summary()
            },
        ];
        for (s, member) in
            bad.iter()
                .zip(["rule_id", "action", "scope", "interval_s", "interval_s"])
        {
            let err = s.check().expect_err(member);
            assert!(err.starts_with(member), "{err}");
        }
        let unknown = serde_json::json!({"rule_id": "acl_1111111111111111111111", "action": "block",
            "scope": "tenant", "policy_version": 1, "interval_s": 1, "evaluated": 0, "matched": 0,
            "connections_refused": 0, "extra": 1});
        assert!(serde_json::from_value::<AclSummary>(unknown).is_err());
    }
}

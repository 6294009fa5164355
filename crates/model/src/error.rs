use std::fmt;

/// Why a body (or a rule file) was refused, with the property path it concerns.
///
/// Displays exactly as the admin API's `invalid_body` message:
/// `Payload validation error: 'Array items are not unique (indexes 0 and 1)' on property rule.match.asns.`
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    /// The dotted property path (`rule.match.ipv4_cidrs[3]`); empty for the body itself.
    pub path: String,
    /// What is wrong, without the path.
    pub reason: String,
    /// The `id` of the record that failed, when a rule set ([`crate::RuleSet::from_json`]) was
    /// being validated and that record has a string `id`; `None` for single bodies. Not part of
    /// the displayed message.
    pub rule_id: Option<String>,
}

impl ValidationError {
    /// An error about the property at `path`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
            rule_id: None,
        }
    }

    /// The same error, attributed to the rule set record whose id is `rule_id`.
    pub fn with_rule_id(mut self, rule_id: impl Into<String>) -> Self {
        self.rule_id = Some(rule_id.into());
        self
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "Payload validation error: '{}'.", self.reason)
        } else {
            write!(
                f,
                "Payload validation error: '{}' on property {}.",
                self.reason, self.path
            )
        }
    }
}

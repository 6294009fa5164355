/// Limits that protect the server; the public service's 10-to-20-entry caps are lifted.
///
/// The defaults are generous: a tenant can hold thousands of entries per rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Most entries in one criteria member (`rule.match.ipv4_cidrs`, ...). Default 100,000.
    pub max_entries_per_member: usize,
    /// Most entries in one rule, over all members of `match` and `not_match`. Default 200,000.
    pub max_entries_per_rule: usize,
    /// Most rules in one rule set. Default 10,000.
    pub max_rules_per_set: usize,
    /// Most entries in one rule set, over all its rules. Default 2,000,000.
    pub max_entries_per_set: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_entries_per_member: 100_000,
            max_entries_per_rule: 200_000,
            max_rules_per_set: 10_000,
            max_entries_per_set: 2_000_000,
        }
    }
}

impl Limits {
    /// Limits with every field given.
    pub fn new(
        max_entries_per_member: usize,
        max_entries_per_rule: usize,
        max_rules_per_set: usize,
        max_entries_per_set: usize,
    ) -> Self {
        Self {
            max_entries_per_member,
            max_entries_per_rule,
            max_rules_per_set,
            max_entries_per_set,
        }
    }
}

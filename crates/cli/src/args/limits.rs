//! The rule-set limits, as flags shared by the subcommands that validate rule sets.
use netacl_model::Limits;

/// Limits that protect the server and the evaluator (the public service's 10-to-20-entry caps
/// are lifted; these defaults are generous). Each flag is also an environment variable.
#[derive(clap::Args, Debug, Clone)]
pub struct LimitsArgs {
    /// Most entries in one criteria member (`rule.match.ipv4_cidrs`, ...).
    #[arg(long, env = "NETACL_MAX_ENTRIES_PER_MEMBER", default_value_t = Limits::default().max_entries_per_member)]
    max_entries_per_member: usize,
    /// Most entries in one rule, over all members of `match` and `not_match`.
    #[arg(long, env = "NETACL_MAX_ENTRIES_PER_RULE", default_value_t = Limits::default().max_entries_per_rule)]
    max_entries_per_rule: usize,
    /// Most rules in one rule set.
    #[arg(long, env = "NETACL_MAX_RULES", default_value_t = Limits::default().max_rules_per_set)]
    max_rules: usize,
    /// Most entries in one rule set, over all its rules.
    #[arg(long, env = "NETACL_MAX_ENTRIES", default_value_t = Limits::default().max_entries_per_set)]
    max_entries: usize,
}

impl LimitsArgs {
    /// The limits the flags give.
    pub fn limits(&self) -> Limits {
        Limits::new(
            self.max_entries_per_member,
            self.max_entries_per_rule,
            self.max_rules,
            self.max_entries,
        )
    }
}

//! Shared fixtures for the criterion benches: synthetic tenants of the sizes the benches use,
//! generated once per process from a fixed seed (see `netacl_eval::synthetic`).
use netacl_eval::synthetic::{self, SyntheticConfig};
use netacl_eval::{CompiledPolicy, RequestInput};
use netacl_model::RuleSet;

/// A generated tenant: its records, the validated rule set, the compiled policy, requests.
pub struct Tenant {
    /// What was generated.
    pub config: SyntheticConfig,
    /// The records as JSON (for the validation bench).
    pub records: serde_json::Value,
    /// The validated rule set.
    pub rules: RuleSet,
    /// The compiled policy.
    pub policy: CompiledPolicy,
    /// The request mix.
    pub requests: Vec<RequestInput>,
}

/// Generates, validates and compiles a tenant of `rules` rules holding `cidrs` CIDRs.
///
/// # Panics
///
/// When the generator produces an invalid rule set (a bug in the generator).
pub fn tenant(rules: usize, cidrs: usize, requests: usize) -> Tenant {
    let config = SyntheticConfig {
        rules,
        cidrs,
        requests,
        ..SyntheticConfig::default()
    };
    let generated = synthetic::generate(&config);
    let rule_set = generated
        .rule_set(&config)
        .expect("the synthetic rule set validates");
    let policy = CompiledPolicy::compile_with_limits(&rule_set, &synthetic::limits_for(&config))
        .expect("the synthetic rule set compiles");
    // The mix copied after compilation, as `netacl bench` lays it out: each request's strings
    // together, the requests in order (as a proxy's buffers hold them), not scattered among the
    // generator's other allocations.
    let requests = generated.requests.clone();
    Tenant {
        config,
        records: generated.records,
        rules: rule_set,
        policy,
        requests,
    }
}

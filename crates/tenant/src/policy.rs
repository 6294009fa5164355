//! The seam between the admin API and the evaluator (`netacl-eval`): compile a rule set, swap
//! it into the engine, dry-run a request, report stats. Everything the server needs from the
//! evaluator goes through here.
use std::sync::Arc;

use netacl_eval::{CompiledPolicy, Engine, ManagedIndex, RequestInput};
use netacl_model::{Limits, RuleSet};

/// A compiled rule set (immutable, shared with the engine).
pub struct Policy(Arc<CompiledPolicy>);

/// Why a rule set cannot be compiled.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct CompileFailure(#[from] netacl_eval::CompileError);

/// Why a dry-run request cannot be evaluated.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RequestFailure(String);

impl Policy {
    /// Compiles a rule set under `limits` against the managed lists of `managed` (CPU-bound:
    /// call it from a blocking thread).
    pub fn compile(
        rules: &RuleSet,
        limits: &Limits,
        managed: &Arc<ManagedIndex>,
    ) -> Result<Policy, CompileFailure> {
        Ok(Policy(Arc::new(CompiledPolicy::compile_with_lists(
            rules, limits, managed,
        )?)))
    }

    /// [`Policy::compile`], with the prepared HMAC keys of the network ACL keys its active
    /// rules name attached to the compiled policy (`netacl_secrets::MacKeys`), so that an edge
    /// sharing the engine gets rules and keys from one snapshot. Nothing is attached when no
    /// active rule names `http_message_signature`.
    pub fn compile_with_keys(
        rules: &RuleSet,
        limits: &Limits,
        managed: &Arc<ManagedIndex>,
        keys: &super::keys::KeysState,
    ) -> Result<Policy, CompileFailure> {
        let policy = CompiledPolicy::compile_with_lists(rules, limits, managed)?;
        let named = keys.mac_keys_for(rules);
        Ok(Policy(Arc::new(if named.is_empty() {
            policy
        } else {
            policy.with_attachment(Arc::new(named))
        })))
    }

    /// The compiled policy itself (the impact preview evaluates with it).
    pub fn compiled(&self) -> &CompiledPolicy {
        &self.0
    }

    /// The managed lists it was compiled against.
    pub fn managed_index(&self) -> &Arc<ManagedIndex> {
        self.0.managed_index()
    }

    /// Logs a warning naming the active rules that name a managed list without entries (they
    /// cannot match through it; in `not_match` the condition holds for every request), those
    /// that `previous` (the policy this one replaces) did not already have.
    pub fn warn_about_empty_lists(&self, previous: Option<&Policy>) {
        let stats = self.0.stats();
        let before = previous.map(|p| p.0.stats().rules_naming_empty_lists);
        for rule in &stats.rules_naming_empty_lists {
            if before.as_ref().is_some_and(|b| b.contains(rule)) {
                continue;
            }
            tracing::warn!(
                rule_id = %rule.rule_id,
                list = rule.list,
                configured = rule.configured,
                version = self.0.version(),
                "a live rule names a managed list that holds no entry (give its content with \
                 --managed-list or PUT /_netacl/v1/managed-lists/{{name}})"
            );
        }
    }

    /// The rule-set version it was compiled from.
    pub fn version(&self) -> u64 {
        self.0.version()
    }

    /// Evaluates one request given as the `RequestInput` JSON object; answers the Outcome JSON.
    pub fn dry_run(&self, input: &serde_json::Value) -> Result<serde_json::Value, RequestFailure> {
        let input = RequestInput::deserialize_value(input)?;
        let request = input
            .to_request()
            .map_err(|err| RequestFailure(err.to_string()))?;
        let decision = self.0.evaluate(&request);
        serde_json::to_value(self.0.outcome(&decision))
            .map_err(|err| RequestFailure(err.to_string()))
    }

    /// Version, rule count, compile time and index sizes.
    pub fn stats(&self) -> serde_json::Value {
        serde_json::to_value(self.0.stats()).unwrap_or_default()
    }
}

/// `RequestInput` from a JSON value, with the error as the request's.
trait DeserializeValue: Sized {
    fn deserialize_value(value: &serde_json::Value) -> Result<Self, RequestFailure>;
}

impl DeserializeValue for RequestInput {
    fn deserialize_value(value: &serde_json::Value) -> Result<Self, RequestFailure> {
        serde::Deserialize::deserialize(value).map_err(|err| RequestFailure(err.to_string()))
    }
}

/// Holds the live policy (`netacl_eval::Engine`: one atomic load per read, whole-policy swaps).
/// The engine is shared: an edge running in the same process evaluates against it directly.
pub struct PolicyEngine(Arc<Engine>);

impl Default for PolicyEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl PolicyEngine {
    /// An engine holding the empty policy (version 0).
    pub fn new() -> Self {
        Self(Arc::new(Engine::new()))
    }

    /// The engine itself, for evaluating in process (the in-process edge).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.0
    }

    /// Swaps in a compiled policy.
    pub fn install(&self, policy: Arc<Policy>) {
        self.0.install(Arc::clone(&policy.0));
    }

    /// The live policy.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::new(Policy(self.0.policy()))
    }
}

//! The engine: the policy in service, replaced whole and atomically.

use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use netacl_model::{AclId, Limits, RuleSet};

use crate::{CompileError, CompiledPolicy, Decision, ManagedIndex, Outcome, Request, Verdict};

/// Holds the policy in service. Readers never lock: each evaluation takes one snapshot (one
/// `load()`), so a decision never mixes two versions; [`Engine::publish`] compiles a new
/// policy aside and swaps it in. Share it behind an `Arc` (it is `Send + Sync`).
///
/// Publishing is last-writer-wins: callers that publish from several threads order their
/// publications themselves (the store's change feed does).
#[derive(Debug)]
pub struct Engine {
    current: ArcSwap<CompiledPolicy>,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    /// An engine serving the empty policy (version 0): every request gets [`Verdict::None`].
    pub fn new() -> Engine {
        Engine {
            current: ArcSwap::from_pointee(CompiledPolicy::empty()),
        }
    }

    /// Compiles `rules` against the managed lists of the policy in service (the lists stay as
    /// they are) and puts the result in service. On error the policy in service stays.
    pub fn publish(&self, rules: &RuleSet) -> Result<Arc<CompiledPolicy>, CompileError> {
        let managed = Arc::clone(self.current.load().managed_index());
        self.publish_with_lists(rules, &managed)
    }

    /// Compiles `rules` against the managed lists of `managed` and puts the result in service.
    /// On error the policy in service stays.
    pub fn publish_with_lists(
        &self,
        rules: &RuleSet,
        managed: &Arc<ManagedIndex>,
    ) -> Result<Arc<CompiledPolicy>, CompileError> {
        let policy = Arc::new(CompiledPolicy::compile_with_lists(
            rules,
            &Limits::default(),
            managed,
        )?);
        self.current.store(Arc::clone(&policy));
        Ok(policy)
    }

    /// Puts a precompiled policy in service.
    pub fn install(&self, policy: Arc<CompiledPolicy>) {
        self.current.store(policy);
    }

    /// Puts `new` in service if `current` is still the policy in service (compare and swap);
    /// `false` when another publication came first (nothing changed). For a policy derived
    /// from the one in service (the same rules with new geo intervals) that must not undo a
    /// publication made meanwhile.
    pub fn replace(&self, current: &Arc<CompiledPolicy>, new: Arc<CompiledPolicy>) -> bool {
        let previous = self.current.compare_and_swap(current, new);
        Arc::ptr_eq(&previous, current)
    }

    /// Starts loading the engine's own memory (where [`snapshot`](Self::snapshot) finds the
    /// policy in service) without waiting for it: for a caller about to take a snapshot after
    /// other work (the multi-tenant edge, once it has found a request's tenant). Only a hint.
    #[inline]
    pub fn prefetch(&self) {
        prefetch_index::prefetch_index(std::slice::from_ref(&self.current), 0);
    }

    /// The policy in service, borrowed for one decision: no reference count is touched (an
    /// `arc-swap` guard), so threads deciding at once share no written cache line.
    pub fn snapshot(&self) -> Guard<Arc<CompiledPolicy>> {
        self.current.load()
    }

    /// The policy in service.
    pub fn policy(&self) -> Arc<CompiledPolicy> {
        self.current.load_full()
    }

    /// Evaluates `request` against the policy in service (one snapshot).
    pub fn evaluate(&self, request: &Request<'_>) -> Evaluation {
        let policy = self.current.load();
        let decision = policy.evaluate(request);
        Evaluation { policy, decision }
    }
}

/// A decision together with the policy snapshot that made it, so that its rule indexes resolve
/// against the right rule set. Meant to be short-lived (it pins the snapshot).
pub struct Evaluation {
    policy: Guard<Arc<CompiledPolicy>>,
    decision: Decision,
}

impl std::fmt::Debug for Evaluation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluation")
            .field("version", &self.policy.version())
            .field("decision", &self.decision)
            .finish()
    }
}

impl Evaluation {
    /// The decision.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The policy that made it.
    pub fn policy(&self) -> &CompiledPolicy {
        &self.policy
    }

    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        self.decision.verdict()
    }

    /// The deciding rule's id.
    pub fn rule_id(&self) -> Option<&AclId> {
        self.decision.rule().map(|r| self.policy.rule_id(r))
    }

    /// The ids of the `log` rules that matched, in evaluation order.
    pub fn monitored_ids(&self) -> impl Iterator<Item = &AclId> + '_ {
        self.decision
            .monitored()
            .iter()
            .map(|&r| self.policy.rule_id(r))
    }

    /// The redirect target, for a redirect.
    pub fn redirect_uri(&self) -> Option<&str> {
        self.policy.redirect_uri(&self.decision)
    }

    /// The decision with ids resolved.
    pub fn outcome(&self) -> Outcome {
        self.policy.outcome(&self.decision)
    }

    /// The decision, letting go of the snapshot.
    pub fn into_decision(self) -> Decision {
        self.decision
    }
}

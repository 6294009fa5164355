//! One tenant at the edge ([`TenantPolicy`]): its engine, its connection-level rules, its
//! counters; and how its rules are compiled ([`TenantRules`]).
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use arc_swap::ArcSwap;
use netacl_eval::CompileError;
use netacl_eval::CompiledPolicy;
use netacl_eval::Engine;
use netacl_eval::ManagedIndex;
use netacl_model::Limits;
use netacl_model::RuleSet;

use super::counters::TenantCounters;
use crate::decision::connection_rules::ConnectionRules;
use crate::observe::tenant_counts::TenantRuleCounts;
use crate::signals::httpsig::SigningKeys;

/// One tenant at the edge: its id, its domains, the engine holding its live policy, the rules
/// that can refuse its connections before the handshake, and where its requests are counted.
pub struct TenantPolicy {
    pub(super) id: Arc<str>,
    pub(super) domains: Box<[Arc<str>]>,
    pub(super) engine: Arc<Engine>,
    /// Whether `engine` is fed by someone else ([`TenantRules::Follow`]); otherwise the router
    /// alone installs its policies.
    pub(super) followed: bool,
    pub(super) connection_rules: ArcSwap<ConnectionRules>,
    pub(super) counters: Arc<TenantCounters>,
    /// Compilations of this tenant's rules (a rule change in another tenant never adds one).
    pub(super) compiles: AtomicU64,
    /// Its per-rule counters and traffic sample key (kept while the tenant stays).
    pub(super) rule_counts: Arc<TenantRuleCounts>,
}

impl std::fmt::Debug for TenantPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantPolicy")
            .field("id", &self.id)
            .field("domains", &self.domains)
            .field("version", &self.engine.policy().version())
            .finish_non_exhaustive()
    }
}

impl TenantPolicy {
    /// The tenant's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its domains, lowercased.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.iter().map(|d| &**d)
    }

    /// The engine holding its live policy. Read it; change it only through
    /// [`TenantRouter::apply`] (a policy installed in it directly would not reach the router's
    /// host table, which serves a compiled tenant's requests), unless the tenant follows an
    /// engine its caller feeds ([`TenantRules::Follow`]).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Its requests by verdict (shared with every tenant without its own series).
    pub fn counters(&self) -> &Arc<TenantCounters> {
        &self.counters
    }

    /// Its per-rule counters, for its `acls_summary` reports, and the key of its requests in
    /// the edge's traffic sample.
    pub fn rule_counts(&self) -> &TenantRuleCounts {
        &self.rule_counts
    }

    /// How many times this tenant's rules were compiled at this edge.
    pub fn compiles(&self) -> u64 {
        self.compiles.load(Relaxed)
    }

    pub(crate) fn connection_rules(&self) -> arc_swap::Guard<Arc<ConnectionRules>> {
        self.connection_rules.load()
    }

    /// Compiles `rules` with `managed` lists (and the keys signed-proxy rules are verified
    /// with) and puts them in its engine. On error nothing changes. The router calls it and
    /// then puts the policy in its host table (see [`Routed`]).
    pub(crate) fn apply_rules(
        &self,
        rules: &RuleSet,
        managed: &Arc<ManagedIndex>,
        keys: Option<Arc<SigningKeys>>,
    ) -> Result<(), CompileError> {
        let (policy, connection) = compile(rules, managed, keys)?;
        self.compiles.fetch_add(1, Relaxed);
        self.rule_counts.install(rules);
        self.engine.install(policy);
        self.connection_rules.store(connection);
        Ok(())
    }

    /// For a tenant whose engine is fed by someone else (`netacl serve` in process): the rule
    /// set that engine now holds, so that connection-level refusal follows it.
    pub fn observe_rules(&self, rules: &RuleSet) -> Result<(), CompileError> {
        let live = self.engine.policy();
        let connection = connection_rules(rules, live.managed_index())?;
        self.connection_rules.store(connection);
        self.rule_counts.install(rules);
        Ok(())
    }
}

pub(super) fn connection_rules(
    rules: &RuleSet,
    managed: &Arc<ManagedIndex>,
) -> Result<Arc<ConnectionRules>, CompileError> {
    let built = ConnectionRules::build(rules, managed)?;
    Ok(if built.is_empty() {
        // Most tenants have no rule that can refuse a connection: share one empty value.
        empty_connection_rules(rules.version)
    } else {
        Arc::new(built)
    })
}

pub(super) fn empty_connection_rules(version: u64) -> Arc<ConnectionRules> {
    Arc::new(ConnectionRules::none(version))
}

pub(super) fn compile(
    rules: &RuleSet,
    managed: &Arc<ManagedIndex>,
    keys: Option<Arc<SigningKeys>>,
) -> Result<(Arc<CompiledPolicy>, Arc<ConnectionRules>), CompileError> {
    let connection = connection_rules(rules, managed)?;
    let mut policy = CompiledPolicy::compile_with_lists(rules, &Limits::default(), managed)?;
    if let Some(keys) = keys.filter(|k| !k.is_empty()) {
        policy = policy.with_attachment(keys);
    }
    Ok((Arc::new(policy), connection))
}

/// The rules of a tenant in a [`TenantChange::Put`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TenantRules {
    /// Compile these rules (with these managed lists and signing keys) into the tenant's own
    /// engine.
    Compile {
        /// The rule set.
        rules: RuleSet,
        /// The managed lists they may name.
        managed: Arc<ManagedIndex>,
        /// Keys for `http_message_signature` rules.
        keys: Option<Arc<SigningKeys>>,
    },
    /// Keep the rules in service (a change of domains only; a new tenant starts empty).
    Keep,
    /// Follow an engine fed by someone else (`netacl serve` in process); `rules` is what it
    /// holds, for the connection-level rules.
    Follow {
        /// The engine.
        engine: Arc<Engine>,
        /// The rule set it holds, when known.
        rules: Option<Arc<RuleSet>>,
    },
}

//! The rules that can refuse a connection before a request is read ([`ConnectionRules`]), built
//! from a rule set for each combination of the signals known at accept time
//! ([`ConnectionSignals`]). Used by the enforcer and kept per tenant by the tenant router.
use std::sync::Arc;

use netacl_eval::{CompileError, CompiledPolicy, GeoIntervals, ManagedIndex};
use netacl_model::{RuleScope, RuleSet, Signal};

/// Signals that are known when a connection is accepted, before any request is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionSignals {
    /// The peer is not a trusted proxy, so the client address (and its geo/ASN) is the peer's.
    pub(crate) direct: bool,
    /// The TLS ClientHello carried SNI (the hostname signal is the SNI).
    pub(crate) sni: bool,
}

impl ConnectionSignals {
    const ALL: [ConnectionSignals; 4] = [
        ConnectionSignals {
            direct: false,
            sni: false,
        },
        ConnectionSignals {
            direct: false,
            sni: true,
        },
        ConnectionSignals {
            direct: true,
            sni: false,
        },
        ConnectionSignals {
            direct: true,
            sni: true,
        },
    ];

    pub(crate) fn slot(self) -> usize {
        usize::from(self.direct) * 2 + usize::from(self.sni)
    }

    /// Whether `signal` has its final value when the connection is accepted. JA3 and JA4 are
    /// always final: a TLS connection's come from its ClientHello, a plain connection has none
    /// (and never will).
    pub(crate) fn knows(self, signal: Signal) -> bool {
        match signal {
            Signal::ConnectingIp | Signal::Ja3 | Signal::Ja4 => true,
            Signal::Hostname => self.sni,
            // Managed lists match the client address too (and JA3/JA4, always known).
            Signal::ClientIp
            | Signal::Asn
            | Signal::Country
            | Signal::Subdivision
            | Signal::Managed => self.direct,
            // A signature covers request components: known only once a request is read.
            Signal::UserAgent | Signal::MessageSignature => false,
        }
    }
}

/// The rules that can refuse a connection before a request is read, per set of known signals.
///
/// A connection is refused only when **every** request it could carry would be blocked. From
/// the active rules in evaluation order, a rule is *certain* when its scope is `tenant` (it
/// applies whatever the path) and every signal its `match` and `not_match` name is known at
/// accept time. The connection policy holds the certain `block`, `allow` and `redirect` rules
/// (`log` rules change no decision) up to the first uncertain `allow` or `redirect` rule, which
/// might let a request through and so ends the list; uncertain `block` rules are left out
/// (they can only add blocks, which the request-level check still enforces). The connection is
/// refused when this policy's decision is `block`.
pub(crate) struct ConnectionRules {
    pub(crate) version: u64,
    pub(crate) policies: [Option<Arc<CompiledPolicy>>; 4],
}

impl ConnectionRules {
    pub(crate) fn empty() -> Self {
        Self::none(0)
    }

    /// No rule refuses a connection (rule-set `version`).
    pub(crate) fn none(version: u64) -> Self {
        Self {
            version,
            policies: Default::default(),
        }
    }

    /// Whether no rule can refuse a connection.
    pub(crate) fn is_empty(&self) -> bool {
        self.policies.iter().all(Option::is_none)
    }

    pub(crate) fn build(
        rules: &RuleSet,
        managed: &Arc<ManagedIndex>,
    ) -> Result<Self, CompileError> {
        let mut ordered: Vec<_> = rules.acls.iter().filter(|a| a.spec.active).collect();
        ordered.sort_by(|a, b| {
            (a.spec.priority, a.id.as_str()).cmp(&(b.spec.priority, b.id.as_str()))
        });
        let mut policies: [Option<Arc<CompiledPolicy>>; 4] = Default::default();
        let mut built: Vec<(Vec<usize>, Arc<CompiledPolicy>)> = Vec::new();
        for known in ConnectionSignals::ALL {
            let mut chosen = Vec::new();
            for (i, acl) in ordered.iter().enumerate() {
                let rule = &acl.spec.rule;
                if !rule.action().is_terminal() {
                    continue;
                }
                let mut named = rule.criteria().flat_map(|c| c.signals());
                let certain = rule.scope() == RuleScope::Tenant && named.all(|s| known.knows(s));
                if certain {
                    chosen.push(i);
                } else if !matches!(rule.action(), netacl_model::Action::Block) {
                    break;
                }
            }
            // Only worth evaluating when some chosen rule blocks.
            if !chosen
                .iter()
                .any(|&i| matches!(ordered[i].spec.rule.action(), netacl_model::Action::Block))
            {
                continue;
            }
            let policy = match built.iter().find(|(set, _)| *set == chosen) {
                Some((_, policy)) => policy.clone(),
                None => {
                    let subset = RuleSet {
                        version: rules.version,
                        acls: chosen.iter().map(|&i| ordered[i].clone()).collect(),
                    };
                    let policy = Arc::new(CompiledPolicy::compile_with_lists(
                        &subset,
                        &netacl_model::Limits::default(),
                        managed,
                    )?);
                    built.push((chosen, policy.clone()));
                    policy
                }
            };
            policies[known.slot()] = Some(policy);
        }
        Ok(Self {
            version: rules.version,
            policies,
        })
    }

    /// The same rules with `geo` attached to each policy (the intervals of the full policy:
    /// its listed values include theirs).
    pub(crate) fn with_geo(&self, geo: Option<&Arc<GeoIntervals>>) -> Self {
        let Some(geo) = geo else {
            return Self {
                version: self.version,
                policies: self.policies.clone(),
            };
        };
        let mut built: Vec<(*const CompiledPolicy, Arc<CompiledPolicy>)> = Vec::new();
        let policies = self.policies.each_ref().map(|p| {
            p.as_ref().map(|p| {
                if let Some((_, done)) = built.iter().find(|(k, _)| *k == Arc::as_ptr(p)) {
                    return Arc::clone(done);
                }
                let enriched = Arc::new(CompiledPolicy::clone(p).with_geo(Arc::clone(geo)));
                built.push((Arc::as_ptr(p), Arc::clone(&enriched)));
                enriched
            })
        });
        Self {
            version: self.version,
            policies,
        }
    }
}

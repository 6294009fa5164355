//! The seam between the admin API and the evaluator: compile a rule set, swap it in, dry-run a
//! request, report stats. Everything the server needs from the evaluator goes through here.
//!
//! STAND-IN: until `netacl-eval` lands, this module evaluates linearly over the rule set with the
//! semantics of `network-acl-semantics.md`; it is replaced by a thin wrapper over
//! `netacl_eval::{Engine, CompiledPolicy, RequestInput}`.
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use netacl_model::{Action, Criteria, Limits, RequestScope, RuleSet};
use serde::Deserialize;

/// A rule set compiled for evaluation (immutable).
pub(crate) struct Policy {
    rules: RuleSet,
    compile_micros: u64,
}

/// Why a rule set cannot be compiled.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct CompileFailure(String);

/// Why a dry-run request cannot be evaluated.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RequestFailure(String);

impl Policy {
    /// Compiles a rule set (CPU-bound: call it from a blocking thread for big sets), refusing
    /// one over the set-wide `limits`.
    pub(crate) fn compile(rules: &RuleSet, limits: &Limits) -> Result<Policy, CompileFailure> {
        check_set_limits(rules, limits)?;
        let started = Instant::now();
        let mut rules = rules.clone();
        rules.acls.sort_by(|a, b| {
            (a.spec.priority, a.id.as_str()).cmp(&(b.spec.priority, b.id.as_str()))
        });
        Ok(Policy {
            rules,
            compile_micros: started.elapsed().as_micros() as u64,
        })
    }

    /// The rule-set version it was compiled from.
    pub(crate) fn version(&self) -> u64 {
        self.rules.version
    }

    /// Evaluates one request given as the `RequestInput` JSON object; answers the Outcome JSON.
    pub(crate) fn dry_run(
        &self,
        input: &serde_json::Value,
    ) -> Result<serde_json::Value, RequestFailure> {
        let input: Input =
            serde_json::from_value(input.clone()).map_err(|err| RequestFailure(err.to_string()))?;
        let scope = match (&input.scope, &input.path) {
            (Some(_), Some(_)) => {
                return Err(RequestFailure("give scope or path, not both".into()))
            }
            (Some(scope), None) => RequestScope::parse(scope)
                .ok_or_else(|| RequestFailure(format!("unknown scope {scope}")))?,
            (None, Some(path)) => RequestScope::from_path(path),
            (None, None) => RequestScope::default(),
        };
        let ip = |v: &Option<String>| -> Result<Option<IpAddr>, RequestFailure> {
            v.as_deref()
                .map(|s| {
                    s.parse::<IpAddr>()
                        .map(canonical)
                        .map_err(|e| RequestFailure(format!("{s}: {e}")))
                })
                .transpose()
        };
        let req = Req {
            client_ip: ip(&input.client_ip)?,
            connecting_ip: ip(&input.connecting_ip)?,
            input: &input,
        };
        let mut monitored = Vec::new();
        for acl in &self.rules.acls {
            if !acl.spec.active || !acl.spec.rule.scope().covers(scope) {
                continue;
            }
            let rule = &acl.spec.rule;
            let matched = rule.match_criteria().is_none_or(|c| req.all(c))
                && rule.not_match().is_none_or(|c| req.none(c));
            if !matched {
                continue;
            }
            match rule.action() {
                Action::Log => monitored.push(acl.id.to_string()),
                action => {
                    let mut out =
                        serde_json::json!({"action": action.name(), "rule_id": acl.id.as_str()});
                    if let Action::Redirect { redirect_uri } = action {
                        out["redirect_uri"] = redirect_uri.clone().into();
                    }
                    out["monitored"] = monitored.into();
                    return Ok(out);
                }
            }
        }
        Ok(serde_json::json!({"action": "none", "rule_id": null, "monitored": monitored}))
    }

    /// Size and timing figures of the compiled policy.
    pub(crate) fn stats(&self) -> serde_json::Value {
        serde_json::json!({
            "version": self.rules.version,
            "rules": self.rules.acls.len(),
            "active_rules": self.rules.acls.iter().filter(|a| a.spec.active).count(),
            "entries": self.rules.entry_count(),
            "compile_micros": self.compile_micros,
        })
    }
}

/// The set-wide limits: rules per set and entries per set.
fn check_set_limits(rules: &RuleSet, limits: &Limits) -> Result<(), CompileFailure> {
    if rules.acls.len() > limits.max_rules_per_set {
        return Err(CompileFailure(format!(
            "the rule set would hold {} rules, more than the limit of {}",
            rules.acls.len(),
            limits.max_rules_per_set
        )));
    }
    let entries = rules.entry_count();
    if entries > limits.max_entries_per_set {
        return Err(CompileFailure(format!(
            "the rule set would hold {entries} entries, more than the limit of {}",
            limits.max_entries_per_set
        )));
    }
    Ok(())
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    scope: Option<String>,
    path: Option<String>,
    client_ip: Option<String>,
    connecting_ip: Option<String>,
    asn: Option<u32>,
    country: Option<String>,
    subdivision: Option<String>,
    ja3: Option<String>,
    ja4: Option<String>,
    user_agent: Option<String>,
    hostname: Option<String>,
}

struct Req<'a> {
    client_ip: Option<IpAddr>,
    connecting_ip: Option<IpAddr>,
    input: &'a Input,
}

impl Req<'_> {
    /// Per named signal: `Some(true)` when the request's value is among the listed ones.
    fn signals(&self, c: &Criteria) -> Vec<bool> {
        let mut out = Vec::new();
        let ip_in =
            |ip: Option<IpAddr>,
             v4: Option<&[netacl_model::CidrEntry<ipnet::Ipv4Net>]>,
             v6: Option<&[netacl_model::CidrEntry<ipnet::Ipv6Net>]>| match ip {
                Some(IpAddr::V4(a)) => v4.is_some_and(|l| l.iter().any(|e| e.net().contains(&a))),
                Some(IpAddr::V6(a)) => v6.is_some_and(|l| l.iter().any(|e| e.net().contains(&a))),
                None => false,
            };
        if c.ipv4_cidrs().is_some() || c.ipv6_cidrs().is_some() {
            out.push(ip_in(self.client_ip, c.ipv4_cidrs(), c.ipv6_cidrs()));
        }
        if c.connecting_ipv4_cidrs().is_some() || c.connecting_ipv6_cidrs().is_some() {
            out.push(ip_in(
                self.connecting_ip,
                c.connecting_ipv4_cidrs(),
                c.connecting_ipv6_cidrs(),
            ));
        }
        let i = self.input;
        if let Some(l) = c.asns() {
            out.push(i.asn.is_some_and(|a| l.contains(&a)));
        }
        let ci = |v: &Option<String>, mut it: Box<dyn Iterator<Item = &str> + '_>| {
            v.as_deref()
                .is_some_and(|v| it.any(|t| t.eq_ignore_ascii_case(v)))
        };
        if let Some(l) = c.geo_country_codes() {
            out.push(ci(&i.country, Box::new(l.iter().map(|e| e.text()))));
        }
        if let Some(l) = c.geo_subdivision_codes() {
            out.push(ci(&i.subdivision, Box::new(l.iter().map(|e| e.text()))));
        }
        if let Some(l) = c.ja3_fingerprints() {
            out.push(ci(&i.ja3, Box::new(l.iter().map(|e| e.text()))));
        }
        if let Some(l) = c.ja4_fingerprints() {
            out.push(ci(&i.ja4, Box::new(l.iter().map(|e| e.text()))));
        }
        if let Some(l) = c.user_agents() {
            out.push(
                i.user_agent
                    .as_deref()
                    .is_some_and(|ua| l.iter().any(|p| p.matches(ua))),
            );
        }
        if let Some(l) = c.hostnames() {
            let host = i
                .hostname
                .as_deref()
                .map(|h| h.trim_end_matches('.').to_owned());
            out.push(ci(
                &host,
                Box::new(l.iter().map(|e| e.text().trim_end_matches('.'))),
            ));
        }
        out
    }

    fn all(&self, c: &Criteria) -> bool {
        self.signals(c).into_iter().all(|hit| hit)
    }

    fn none(&self, c: &Criteria) -> bool {
        self.signals(c).into_iter().all(|hit| !hit)
    }
}

/// Holds the live policy; readers take a snapshot, the write path swaps whole policies.
pub(crate) struct PolicyEngine {
    live: RwLock<Arc<Policy>>,
}

impl PolicyEngine {
    /// An engine holding the empty policy (version 0).
    pub(crate) fn new() -> Self {
        let empty = Policy {
            rules: RuleSet::default(),
            compile_micros: 0,
        };
        Self {
            live: RwLock::new(Arc::new(empty)),
        }
    }

    /// Swaps in a compiled policy.
    pub(crate) fn install(&self, policy: Arc<Policy>) {
        *self
            .live
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = policy;
    }

    /// The live policy.
    pub(crate) fn policy(&self) -> Arc<Policy> {
        Arc::clone(
            &self
                .live
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

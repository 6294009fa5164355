//! Rule-set analysis: rules that can never decide, rules whose removal changes nothing, and
//! pairs of rules whose order decides.
//!
//! ```
//! use netacl_analysis::{analyze, FindingKind};
//! use netacl_model::{Limits, RuleSet};
//!
//! let rule = |id: &str, priority: u64, action: serde_json::Value, cidr: &str| serde_json::json!({
//!     "id": id, "description": "", "active": true, "priority": priority,
//!     "rule": {"action": action, "scope": "tenant", "match": {"ipv4_cidrs": [cidr]}},
//!     "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
//! });
//! let rules = serde_json::json!([
//!     rule("acl_1111111111111111111111", 10, serde_json::json!({"block": true}), "10.0.0.0/8"),
//!     rule("acl_2222222222222222222222", 20, serde_json::json!({"allow": true}), "10.1.0.0/16"),
//! ]);
//! let rules = RuleSet::from_json(&rules, 1, &Limits::default()).unwrap();
//!
//! let analysis = analyze(&rules);
//! let kinds: Vec<_> = analysis.findings.iter().map(|f| (f.kind, f.rule_id.as_str())).collect();
//! assert_eq!(kinds, [
//!     (FindingKind::Shadowed, "acl_2222222222222222222222"),
//!     (FindingKind::Conflict, "acl_2222222222222222222222"),
//! ]);
//! assert_eq!(analysis.findings[0].by, ["acl_1111111111111111111111"]);
//! assert!(analysis.undecided.is_empty());
//! ```
//!
//! # The findings
//!
//! Over the **active** rules, in evaluation order (ascending priority, ties by id):
//!
//! - `shadowed`: the rule can never decide (a `log` rule: never be recorded), because earlier
//!   terminal rules, alone or together, decide every request it matches. `by` lists the earlier
//!   rules that decide at least one of those requests (a rule that matches none is `shadowed`
//!   with an empty `by`: "matches no request").
//! - `redundant`: removing the (terminal, not shadowed) rule changes no decision: every request
//!   it decides gets the same action and `redirect_uri` from a later rule, and no later `log`
//!   rule would be recorded in its place. `by` lists those later rules. A shadowed rule is also
//!   redundant; it is reported as `shadowed` only. A `log` rule that can be recorded is never
//!   redundant (removing it changes the monitored list).
//! - `conflict`: two terminal rules with different actions (or different redirect targets)
//!   match a common request that the earlier one decides: the order is what decides. `rule_id`
//!   is the later rule, `by` the earlier one; one finding per pair.
//!
//! # How: atoms, boxes, and what earlier rules leave
//!
//! Every signal is a dimension, independent of the others (a request may carry a subdivision
//! without a country, an address without an ASN). Each dimension is cut into the *atoms* the
//! rule set distinguishes: the values rules name, "any other value" and "missing" for value
//! sets; the elementary intervals of the rules' networks (IPv4, IPv6 without the IPv4-mapped
//! block, which requests never carry) and "missing" for addresses; the three request scopes.
//! A rule is then a box (one atom set per dimension: a `match` list is the atoms it lists, a
//! `not_match` list their complement, "missing" included, as the semantics say).
//!
//! Every question is one kind: *does this box hold a request that no terminal rule before
//! rule `k` decides?* Shadowed: rule `i`'s box, `k = i`. Conflict and the `by` of a shadowed
//! rule: the common box of rules `e` and `i`, `k = e` (a request there that no rule before
//! `e` decides is one `e` decides and `i` matches). Redundant: rule `i`'s box against the
//! later rules in order, with the boxes of the later rules that decide the same way taken out.
//! The earlier rules are split in two:
//!
//! - A rule that constrains **one signal** (besides the scope), as most do, decides whole
//!   slices: for each signal, scope and atom the analysis records the first such rule holding
//!   the atom. What such rules before `k` leave of a box is again a box (in each signal, the
//!   atoms whose first rule is `k` or later), and whether it is empty is one range-maximum
//!   query per signal. This is what keeps the analysis near linear in the rules plus a small
//!   cost per pair of rules that meet: the undecided region of thousands of independent
//!   one-signal rules is never built.
//! - The **other rules** (two signals or more: an ASN with a hostname, a list with a
//!   `not_match`) are looked at only when that box is not empty: first a *point* (in each
//!   signal the atom decided latest, moved out of the rule in the way, up to 8 times) that no
//!   such rule holds answers "yes" at once; else the box is cut by every such rule that differs
//!   from it in one signal only, and what is left is built as a reduced ordered binary decision
//!   diagram (each signal's atoms in binary, one representative atom for each run of atoms the
//!   remaining rules do not tell apart) from which those rules are subtracted: the exact
//!   answer. The diagrams are small (a box and the few rules that cut it), hand-written
//!   (`bdd.rs`: a shared unique table and an operation cache; why not a crate: see there), and
//!   dropped after each question.
//!
//! Each question is asked once per rule or per pair of rules that meet (found through an
//! index on each rule's narrowest signal, or a plain scan when the index would visit every
//! rule); the rules' questions run on every core (blocks of 64 rules in evaluation order,
//! taken by the threads in chunks; one diagram manager per thread, emptied for each rule),
//! and the findings come out in evaluation order.
//!
//! # Sound, and complete where the signals are sets
//!
//! A finding is reported only when it holds for every request. Where every signal involved is a
//! CIDR list or a value set, the analysis is exact: a rule is reported exactly when the finding
//! holds (tested against a brute-force oracle that enumerates small request spaces through the
//! reference evaluator). What the atoms cannot express makes a rule's box approximate (a box
//! it surely matches inside a box it may match): a user-agent pattern with a `*` (it matches some
//! of the user agents no rule names), a managed list (`auth0_managed`: its content is not
//! modelled). Each question is then asked twice, once to prove and once to refute; a question
//! neither settles puts the rule in `undecided` with the reason, never a guess. So does a
//! question whose decision diagram would pass 1,048,576 nodes (the bound on one question's
//! time and memory; "too many cases to analyse exactly"): the diagrams of the synthetic
//! tenants stay far below it.
//!
//! # Bounded work
//!
//! [`analyze`] runs to completion, however long that takes (`netacl lint`). Some rule sets
//! make the diagrams large and the questions many (rules whose CIDRs, ASNs and countries all
//! overlap: every question needs a diagram of every earlier rule, and the work grows with
//! about the third power of the rules; minutes at 1,000 rules). [`analyze_within`] bounds it
//! with a [`Budget`]:
//!
//! - **Work units**: one for each step of a decision diagram operation (a cache look-up,
//!   perhaps a node), for each earlier rule looked at when a question is set up or an index
//!   is read, for each point tried, and one for each question and each rule. They count what
//!   the analysis does, not how fast the machine is (about 10 to 20 million a second on one
//!   core of the README's 2-vCPU machine). Each rule starts with an empty diagram manager, so
//!   what a rule costs depends on that rule alone, not on the rules its thread answered
//!   before.
//! - **In order**: block by block of 64 rules (the first question of each rule, then all of
//!   its questions), the rules' answers are taken in evaluation order while the work they
//!   took fits the budget. The first rule that does not fit, and every rule after it, is
//!   undecided with the reason [`BUDGET_REASON`] (`budget`), and none of their findings is
//!   reported. So the answer under a budget is the same on any number of threads and on any
//!   machine, the rules before the cut are answered in full, and a budget at least what the
//!   whole analysis takes gives the whole answer. A rule is not started once the rules
//!   before it are known to have used the budget, and it stops once it has used what they
//!   are known to leave, so the work done past the budget is at most what the rules in
//!   progress on the other threads take.
//! - **A deadline and a cancellation flag** stop the analysis within a few thousand steps,
//!   wherever it is (checked every 1,024 diagram steps and before each question): the rules
//!   not finished are undecided for the `budget` too, with the findings they had proven.
//!   That answer depends on the machine's speed; the deadline is the backstop for a machine
//!   slower or busier than the budget assumes, the flag is for a client that went away.
//!
//! Every finding reported is proven, under any budget (tested against the unbounded analysis,
//! with budgets down to a few units).
//!
//! # Impact preview
//!
//! [`Comparison`] replays requests against the policy in service and a proposed one and counts
//! what changes ([`Preview`]: requests, changed, transitions, by rule, examples). A decision
//! changes when its action or its `redirect_uri` changes.
#![deny(missing_docs)]

mod analyze;
mod bdd;
mod budget;
mod cells;
mod domain;
#[cfg(test)]
mod legacy;
mod preview;
mod witness;

pub use budget::{Budget, Stopped, WorkDone};
pub use preview::{Comparison, Effect, Example, Preview, RuleImpact, Transition, MAX_EXAMPLES};

use serde::Serialize;

use netacl_model::RuleSet;

/// What a finding says about a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingKind {
    /// The rule can never decide (or, for a `log` rule, never be recorded).
    Shadowed,
    /// Removing the rule changes no decision.
    Redundant,
    /// The rule and an earlier one match common requests with different actions; the order
    /// decides.
    Conflict,
}

impl FindingKind {
    /// The wire name (`shadowed`, `redundant`, `conflict`).
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Shadowed => "shadowed",
            FindingKind::Redundant => "redundant",
            FindingKind::Conflict => "conflict",
        }
    }
}

/// One proven fact about a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// The rule it is about.
    pub rule_id: String,
    /// The rules that make it so (see the crate documentation, per kind).
    pub by: Vec<String>,
    /// A sentence for people.
    pub detail: String,
}

/// A rule about which some question could not be settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Undecided {
    /// The rule.
    pub rule_id: String,
    /// Which question and why.
    pub reason: String,
}

/// The result of [`analyze`]: `{"findings": [...], "undecided": [...]}` in JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Analysis {
    /// Proven findings, in the rules' evaluation order.
    pub findings: Vec<Finding>,
    /// Rules with a question the analysis could not settle, in evaluation order.
    pub undecided: Vec<Undecided>,
}

impl Analysis {
    /// The analysis as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The findings that concern the rule `id`: about it, or naming it in `by`.
    pub fn concerning<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Finding> + 'a {
        self.findings
            .iter()
            .filter(move |f| f.rule_id == id || f.by.iter().any(|b| b == id))
    }

    /// A one-line summary of the findings that concern rule `id`, for a response header:
    /// `shadowed by acl_a, acl_b; conflict with acl_c; shadows acl_d`. ASCII only, at most
    /// `max_len` bytes (cut at a finding, ending `; ...` when some are left out); `None` when
    /// no finding concerns the rule.
    pub fn summary_for(&self, id: &str, max_len: usize) -> Option<String> {
        let mut parts = Vec::new();
        for f in self.concerning(id) {
            let part = if f.rule_id == id {
                match f.kind {
                    FindingKind::Shadowed if f.by.is_empty() => "matches no request".to_owned(),
                    FindingKind::Shadowed => format!("shadowed by {}", f.by.join(", ")),
                    FindingKind::Redundant => format!("redundant with {}", f.by.join(", ")),
                    FindingKind::Conflict => format!("conflict with {}", f.by.join(", ")),
                }
            } else {
                match f.kind {
                    FindingKind::Shadowed => format!("shadows {}", f.rule_id),
                    FindingKind::Redundant => format!("makes {} redundant", f.rule_id),
                    FindingKind::Conflict => format!("conflict with {}", f.rule_id),
                }
            };
            parts.push(part);
        }
        if parts.is_empty() {
            return None;
        }
        let mut out = String::new();
        for (i, part) in parts.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            if out.len() + sep.len() + part.len() + "; ...".len() > max_len && i + 1 < parts.len()
                || out.len() + sep.len() + part.len() > max_len
            {
                if out.is_empty() {
                    out.push_str("...");
                } else {
                    out.push_str("; ...");
                }
                break;
            }
            out.push_str(sep);
            out.push_str(part);
        }
        // Ids and the words above are ASCII; keep it so whatever changes.
        out.retain(|c| c.is_ascii() && !c.is_ascii_control());
        Some(out)
    }
}

/// Analyses the active rules of `rules`: see the crate documentation. Runs to completion,
/// however long that takes ([`analyze_within`] bounds the work).
pub fn analyze(rules: &RuleSet) -> Analysis {
    analyze::analyze(rules)
}

/// [`analyze`] within `budget` (work units, a deadline, a cancellation flag): see the crate
/// documentation, "Bounded work". The rules whose questions the budget left open are in
/// `undecided` with the reason [`BUDGET_REASON`]; every finding reported is proven.
pub fn analyze_within(rules: &RuleSet, budget: &Budget) -> (Analysis, WorkDone) {
    analyze::analyze_within(rules, budget)
}

/// The `reason` of an undecided rule whose questions were left open because the analysis's
/// work ran out (its budget, its deadline, or a cancellation): `budget`.
pub const BUDGET_REASON: &str = analyze::BUDGET;

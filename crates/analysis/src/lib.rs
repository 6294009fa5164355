#![doc = include_str!("../README.md")]
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

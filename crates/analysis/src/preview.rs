//! Impact preview: the same requests decided by two policies, and what changed.

use std::collections::HashMap;

use netacl_eval::{CompiledPolicy, Request, Verdict};
use serde::Serialize;
use serde_json::Value;

/// How many changed requests a [`Preview`] shows at most.
pub const MAX_EXAMPLES: usize = 10;

/// A decision as far as the preview compares it: the action and the redirect target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Effect {
    /// `none`, `allow`, `block` or `redirect`.
    pub action: Verdict,
    /// The redirect target (redirect only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
}

/// How many requests went from one effect to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// The effect under the current rules.
    pub from: Effect,
    /// The effect under the proposed rules.
    pub to: Effect,
    /// How many requests.
    pub count: u64,
}

/// What one rule does to the changed decisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleImpact {
    /// The rule.
    pub rule_id: String,
    /// Changed requests this rule decides under the proposed rules.
    pub gained: u64,
    /// Changed requests this rule decided under the current rules.
    pub lost: u64,
}

/// A changed request, with its two decisions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    /// The request, with `netacl eval`'s keys.
    pub request: Value,
    /// The decision under the current rules (`netacl eval`'s outcome).
    pub from: Value,
    /// The decision under the proposed rules.
    pub to: Value,
}

/// The answer of an impact preview: `{requests, changed, transitions, by_rule, examples}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Preview {
    /// Requests replayed.
    pub requests: u64,
    /// Requests whose action or redirect target changed.
    pub changed: u64,
    /// The changes by (from, to), most frequent first.
    pub transitions: Vec<Transition>,
    /// The rules deciding the changed requests, before and after, busiest first.
    pub by_rule: Vec<RuleImpact>,
    /// Up to [`MAX_EXAMPLES`] changed requests, the first ones met.
    pub examples: Vec<Example>,
}

impl Preview {
    /// The preview as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Replays requests against the current and the proposed policy.
///
/// ```
/// use netacl_analysis::Comparison;
/// use netacl_eval::{CompiledPolicy, Request};
/// use netacl_model::{Limits, RequestScope, RuleSet};
///
/// let old = CompiledPolicy::compile(&RuleSet::default()).unwrap();
/// let rules = serde_json::json!([{
///     "id": "acl_1111111111111111111111", "description": "", "active": true, "priority": 1,
///     "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [7]}},
///     "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
/// }]);
/// let new = CompiledPolicy::compile(&RuleSet::from_json(&rules, 2, &Limits::default()).unwrap()).unwrap();
/// let mut comparison = Comparison::new(&old, &new);
/// for asn in [7, 8, 7] {
///     let request = Request::new(RequestScope::Authentication).with_asn(asn);
///     comparison.add(&request, || serde_json::json!({"asn": asn}));
/// }
/// let preview = comparison.finish();
/// assert_eq!((preview.requests, preview.changed), (3, 2));
/// assert_eq!(preview.by_rule[0].gained, 2);
/// ```
pub struct Comparison<'p> {
    old: &'p CompiledPolicy,
    new: &'p CompiledPolicy,
    preview: Preview,
    transitions: HashMap<(Effect, Effect), u64>,
    by_rule: HashMap<String, (u64, u64)>,
}

impl<'p> Comparison<'p> {
    /// A comparison of `old` (the rules in service) with `new` (the proposed rules).
    pub fn new(old: &'p CompiledPolicy, new: &'p CompiledPolicy) -> Self {
        Comparison {
            old,
            new,
            preview: Preview::default(),
            transitions: HashMap::new(),
            by_rule: HashMap::new(),
        }
    }

    /// Decides `request` under both policies; `describe` gives the request as JSON, called
    /// only for the changed requests shown as examples.
    pub fn add(&mut self, request: &Request<'_>, describe: impl FnOnce() -> Value) {
        self.preview.requests += 1;
        let before = self.old.evaluate(request);
        let after = self.new.evaluate(request);
        let effect = |policy: &CompiledPolicy, d: &netacl_eval::Decision| Effect {
            action: d.verdict(),
            redirect_uri: policy.redirect_uri(d).map(str::to_owned),
        };
        if before.verdict() == after.verdict()
            && self.old.redirect_uri(&before) == self.new.redirect_uri(&after)
        {
            return;
        }
        self.preview.changed += 1;
        let from = effect(self.old, &before);
        let to = effect(self.new, &after);
        *self.transitions.entry((from, to)).or_default() += 1;
        if let Some(rule) = before.rule() {
            self.by_rule
                .entry(self.old.rule_id(rule).to_string())
                .or_default()
                .1 += 1;
        }
        if let Some(rule) = after.rule() {
            self.by_rule
                .entry(self.new.rule_id(rule).to_string())
                .or_default()
                .0 += 1;
        }
        if self.preview.examples.len() < MAX_EXAMPLES {
            let outcome = |policy: &CompiledPolicy, d| {
                serde_json::to_value(policy.outcome(d)).unwrap_or_default()
            };
            self.preview.examples.push(Example {
                request: describe(),
                from: outcome(self.old, &before),
                to: outcome(self.new, &after),
            });
        }
    }

    /// The preview.
    pub fn finish(mut self) -> Preview {
        let mut transitions: Vec<Transition> = self
            .transitions
            .into_iter()
            .map(|((from, to), count)| Transition { from, to, count })
            .collect();
        let name = |e: &Effect| (e.action.as_str(), e.redirect_uri.clone());
        transitions.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| name(&a.from).cmp(&name(&b.from)))
                .then_with(|| name(&a.to).cmp(&name(&b.to)))
        });
        let mut by_rule: Vec<RuleImpact> = self
            .by_rule
            .into_iter()
            .map(|(rule_id, (gained, lost))| RuleImpact {
                rule_id,
                gained,
                lost,
            })
            .collect();
        by_rule.sort_by(|a, b| {
            (b.gained + b.lost)
                .cmp(&(a.gained + a.lost))
                .then_with(|| a.rule_id.cmp(&b.rule_id))
        });
        self.preview.transitions = transitions;
        self.preview.by_rule = by_rule;
        self.preview
    }
}

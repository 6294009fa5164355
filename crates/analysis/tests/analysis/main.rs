//! The analysis against a brute-force oracle: random small rule sets over small value domains,
//! every request of the domain enumerated and decided by the project's reference evaluator.
//! Findings must be true (always) and equal the oracle's truth (for every rule not undecided).
//! With only CIDRs and value sets, nothing may be undecided.

use std::collections::{BTreeMap, BTreeSet};

use netacl_analysis::{analyze, Analysis, FindingKind};
use netacl_eval::{reference, Outcome, Request, Verdict};
use netacl_model::{Limits, NetworkAcl, RequestScope, RuleSet};
use proptest::prelude::*;
use serde_json::{json, Value};

mod cases;

/// A small deterministic generator (the proptest input is its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    /// A non-empty subset of `pool`, in pool order.
    fn subset<T: Clone>(&mut self, pool: &[T]) -> Vec<T> {
        loop {
            let picked: Vec<T> = pool.iter().filter(|_| self.chance(40)).cloned().collect();
            if !picked.is_empty() {
                return picked;
            }
        }
    }
}

const IDS: [&str; 7] = [
    "acl_1111111111111111111111",
    "acl_2222222222222222222222",
    "acl_3333333333333333333333",
    "acl_4444444444444444444444",
    "acl_5555555555555555555555",
    "acl_6666666666666666666666",
    "acl_7777777777777777777777",
];

/// The signals the generator uses, with their pools of listed values and the request values
/// that cover every atom (each listed value, other values, missing).
struct SignalPool {
    members: &'static [(&'static str, &'static [&'static str])],
    /// Request values (`None`: missing).
    requests: &'static [Option<&'static str>],
}

const CLIENT: SignalPool = SignalPool {
    members: &[
        (
            "ipv4_cidrs",
            &[
                "10.0.0.0/30",
                "10.0.0.0/31",
                "10.0.0.2/31",
                "10.0.0.1",
                "10.0.0.3/32",
                "0.0.0.0/0",
                "10.0.0.5/30",
            ],
        ),
        (
            "ipv6_cidrs",
            &["2001:db8::/127", "2001:db8::1", "::/0", "::/1"],
        ),
    ],
    requests: &[
        Some("10.0.0.0"),
        Some("10.0.0.1"),
        Some("10.0.0.2"),
        Some("10.0.0.3"),
        Some("10.0.0.5"),
        Some("10.0.0.9"),
        Some("2001:db8::"),
        Some("2001:db8::1"),
        Some("2001:db8::5"),
        Some("8000::1"),
        Some("::ffff:10.0.0.2"),
        None,
    ],
};
const CONNECTING: SignalPool = SignalPool {
    members: &[("connecting_ipv4_cidrs", &["10.0.0.0/31", "10.0.0.4/30"])],
    requests: &[Some("10.0.0.0"), Some("10.0.0.5"), Some("10.0.0.9"), None],
};
const ASN: SignalPool = SignalPool {
    members: &[("asns", &["1", "2"])],
    requests: &[Some("1"), Some("2"), Some("3"), None],
};
const COUNTRY: SignalPool = SignalPool {
    members: &[("geo_country_codes", &["US", "fr"])],
    requests: &[Some("us"), Some("FR"), Some("DE"), None],
};
const SUBDIVISION: SignalPool = SignalPool {
    members: &[("geo_subdivision_codes", &["US-NY", "fr-IDF"])],
    requests: &[Some("US-NY"), Some("FR-idf"), Some("DE-BE"), None],
};
const HOSTNAME: SignalPool = SignalPool {
    members: &[("hostnames", &["x.example", "Y.example."])],
    requests: &[
        Some("X.example"),
        Some("y.example."),
        Some("z.example"),
        None,
    ],
};
const USER_AGENT: SignalPool = SignalPool {
    members: &[("user_agents", &["a", "ab", "b"])],
    requests: &[Some("a"), Some("ab"), Some("b"), Some("zz"), None],
};
const USER_AGENT_GLOB: SignalPool = SignalPool {
    members: &[("user_agents", &["a", "ab", "a*", "*", "*b"])],
    requests: &[
        Some("a"),
        Some("ab"),
        Some("abc"),
        Some("b"),
        Some("zz"),
        None,
    ],
};
const MANAGED: SignalPool = SignalPool {
    members: &[("auth0_managed", &["auth0.tor"])],
    requests: &[None],
};

const EXACT_POOLS: [&SignalPool; 7] = [
    &CLIENT,
    &CONNECTING,
    &ASN,
    &COUNTRY,
    &SUBDIVISION,
    &HOSTNAME,
    &USER_AGENT,
];

fn member_value(name: &str, items: Vec<&str>) -> Value {
    if name == "asns" {
        json!(items
            .iter()
            .map(|s| s.parse::<u32>().unwrap())
            .collect::<Vec<_>>())
    } else {
        json!(items)
    }
}

/// A random rule set over at most three signals (so the request space stays small).
fn generate(seed: u64, exact_only: bool) -> (RuleSet, Vec<&'static SignalPool>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut pools: Vec<&'static SignalPool> = Vec::new();
    let wanted = 1 + rng.below(3);
    while pools.len() < wanted {
        let pool: &'static SignalPool = if !exact_only && rng.chance(25) {
            if rng.chance(50) {
                &USER_AGENT_GLOB
            } else {
                &MANAGED
            }
        } else {
            EXACT_POOLS[rng.below(EXACT_POOLS.len())]
        };
        let same_dimension = |p: &SignalPool| {
            p.members[0].0 == pool.members[0].0
                || (p.members[0].0 == "user_agents" && pool.members[0].0 == "user_agents")
        };
        if !pools.iter().any(|p| same_dimension(p)) {
            pools.push(pool);
        }
    }
    let n = 2 + rng.below(5);
    let mut acls = Vec::new();
    for id in IDS.iter().take(n) {
        let action = match rng.below(6) {
            0 | 1 => json!({"block": true}),
            2 => json!({"allow": true}),
            3 => json!({"log": true}),
            4 => json!({"redirect": true, "redirect_uri": "https://a.example/"}),
            _ => json!({"redirect": true, "redirect_uri": "https://b.example/"}),
        };
        let scope = [
            "tenant",
            "tenant",
            "management",
            "authentication",
            "dynamic_client_registration",
        ][rng.below(5)];
        let mut rule = json!({"action": action, "scope": scope});
        if rng.chance(10) {
            rule["match_all"] = json!(true);
        } else {
            loop {
                let mut any = false;
                for key in ["match", "not_match"] {
                    let mut criteria = serde_json::Map::new();
                    for pool in &pools {
                        // A managed list in match or not_match, not both.
                        if pool.members[0].0 == "auth0_managed"
                            && key == "not_match"
                            && rule
                                .get("match")
                                .is_some_and(|m| m.get("auth0_managed").is_some())
                        {
                            continue;
                        }
                        let p = if key == "match" { 45 } else { 25 };
                        if rng.chance(p) {
                            for (name, values) in pool.members {
                                if pool.members.len() == 1 || rng.chance(60) {
                                    criteria.insert(
                                        (*name).to_owned(),
                                        member_value(name, rng.subset(values)),
                                    );
                                }
                            }
                        }
                    }
                    if !criteria.is_empty() {
                        rule[key] = Value::Object(criteria);
                        any = true;
                    }
                }
                if any {
                    break;
                }
            }
        }
        acls.push(json!({
            "id": id, "description": "", "active": !rng.chance(10),
            "priority": 1 + rng.below(4),
            "rule": rule,
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
        }));
    }
    let rules = RuleSet::from_json(&json!(acls), 1, &Limits::default())
        .unwrap_or_else(|e| panic!("generated rule set invalid: {e}\n{:#}", json!(acls)));
    (rules, pools)
}

/// Every request of the space the pools span (the other signals missing).
fn requests(pools: &[&SignalPool]) -> Vec<Request<'static>> {
    let mut out: Vec<Request<'static>> =
        RequestScope::ALL.iter().map(|&s| Request::new(s)).collect();
    for pool in pools {
        let mut next = Vec::new();
        for request in &out {
            for value in pool.requests {
                let mut r = *request;
                let Some(v) = *value else {
                    next.push(r);
                    continue;
                };
                match pool.members[0].0 {
                    "ipv4_cidrs" => r.set_client_ip(Some(v.parse().unwrap())),
                    "connecting_ipv4_cidrs" => r.set_connecting_ip(Some(v.parse().unwrap())),
                    "asns" => r.set_asn(Some(v.parse().unwrap())),
                    "geo_country_codes" => r.set_country(Some(v)),
                    "geo_subdivision_codes" => r.set_subdivision(Some(v)),
                    "hostnames" => r.set_hostname(Some(v)),
                    "user_agents" => r.set_user_agent(Some(v)),
                    other => unreachable!("{other}"),
                }
                next.push(r);
            }
        }
        out = next;
    }
    out
}

type Key = (Verdict, Option<String>, Vec<String>);

fn key(o: &Outcome) -> Key {
    (o.action, o.redirect_uri.clone(), o.monitored.clone())
}

/// The oracle's truth: findings as `(kind, rule_id) -> by`.
fn truth(
    rules: &RuleSet,
    requests: &[Request<'static>],
) -> BTreeMap<(FindingKind, String, String), BTreeSet<String>> {
    let active: Vec<&NetworkAcl> = rules.acls.iter().filter(|a| a.spec.active).collect();
    let full: Vec<Outcome> = requests
        .iter()
        .map(|r| reference::evaluate(rules, r))
        .collect();
    let mut out = BTreeMap::new();
    for acl in &active {
        let id = acl.id.to_string();
        let alone = RuleSet {
            version: 1,
            acls: vec![(*acl).clone()],
        };
        let matches: Vec<bool> = requests
            .iter()
            .map(|r| {
                let o = reference::evaluate(&alone, r);
                o.rule_id.is_some() || !o.monitored.is_empty()
            })
            .collect();
        let terminal = acl.spec.rule.action().is_terminal();
        let takes = |o: &Outcome| {
            if terminal {
                o.rule_id.as_deref() == Some(id.as_str())
            } else {
                o.monitored.contains(&id)
            }
        };
        let shadowed = !full.iter().any(takes);
        if shadowed {
            let by: BTreeSet<String> = full
                .iter()
                .zip(&matches)
                .filter(|(_, &m)| m)
                .filter_map(|(o, _)| o.rule_id.clone())
                .collect();
            out.insert((FindingKind::Shadowed, id.clone(), String::new()), by);
        }
        // A shadowed rule is also redundant; it is reported as shadowed only.
        if terminal && !shadowed {
            let without = RuleSet {
                version: 1,
                acls: rules
                    .acls
                    .iter()
                    .filter(|a| a.id != acl.id)
                    .cloned()
                    .collect(),
            };
            let mut redundant = true;
            let mut by = BTreeSet::new();
            for (r, o) in requests.iter().zip(&full) {
                let w = reference::evaluate(&without, r);
                if key(&w) != key(o) {
                    redundant = false;
                    break;
                }
                if takes(o) {
                    by.extend(w.rule_id.clone());
                }
            }
            if redundant {
                out.insert((FindingKind::Redundant, id.clone(), String::new()), by);
            }
        }
        if terminal {
            for (o, _) in full.iter().zip(&matches).filter(|(_, &m)| m) {
                let Some(decider) = &o.rule_id else { continue };
                if *decider == id {
                    continue;
                }
                let e = active.iter().find(|a| a.id.as_str() == decider).unwrap();
                if e.spec.rule.action() != acl.spec.rule.action() {
                    out.insert(
                        (FindingKind::Conflict, id.clone(), decider.clone()),
                        BTreeSet::new(),
                    );
                }
            }
        }
    }
    // A conflict is per pair: its `by` is the earlier rule.
    out.into_iter()
        .map(|((kind, id, other), by)| {
            if kind == FindingKind::Conflict {
                ((kind, id, other.clone()), BTreeSet::from([other]))
            } else {
                ((kind, id, other), by)
            }
        })
        .collect()
}

fn reported(analysis: &Analysis) -> BTreeMap<(FindingKind, String, String), BTreeSet<String>> {
    analysis
        .findings
        .iter()
        .map(|f| {
            let other = if f.kind == FindingKind::Conflict {
                f.by[0].clone()
            } else {
                String::new()
            };
            (
                (f.kind, f.rule_id.clone(), other),
                f.by.iter().cloned().collect(),
            )
        })
        .collect()
}

fn check(seed: u64, exact_only: bool) -> Result<(), TestCaseError> {
    let (rules, pools) = generate(seed, exact_only);
    let requests = requests(&pools);
    let analysis = analyze(&rules);
    let expected = truth(&rules, &requests);
    let got = reported(&analysis);
    let undecided: BTreeSet<&str> = analysis
        .undecided
        .iter()
        .map(|u| u.rule_id.as_str())
        .collect();
    let context = || {
        let records: Vec<Value> = rules.acls.iter().map(NetworkAcl::to_json).collect();
        format!(
            "seed {seed}\nanalysis {:#}\nexpected {expected:?}\nrules {:#}",
            analysis.to_json(),
            json!(records)
        )
    };
    // Sound: every finding is true. `by` is exact for exactly analysed rules.
    for (k, by) in &got {
        prop_assert!(
            expected.contains_key(k),
            "false finding {k:?}\n{}",
            context()
        );
        // `by` names every rule that decides in its stead; exactly those with exact signals
        // (with approximate ones, it may also name a rule that only possibly does).
        if exact_only {
            prop_assert_eq!(by, &expected[k], "by of {:?}\n{}", k, context());
        } else {
            prop_assert!(by.is_superset(&expected[k]), "by of {k:?}\n{}", context());
        }
    }
    // Complete where decided.
    for k in expected.keys() {
        if !undecided.contains(k.1.as_str()) {
            prop_assert!(got.contains_key(k), "missed {k:?}\n{}", context());
        }
    }
    if exact_only {
        prop_assert!(
            analysis.undecided.is_empty(),
            "undecided with exact signals\n{}",
            context()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn exact_signals_match_the_oracle_exactly(seed in any::<u64>()) {
        check(seed, true)?;
    }

    #[test]
    fn wildcards_and_managed_lists_stay_sound(seed in any::<u64>()) {
        check(seed, false)?;
    }
}

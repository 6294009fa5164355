//! The compiled evaluator against the reference evaluator on random rule sets and requests.
//!
//! Values come from small pools (nested and overlapping CIDRs, IPv6, mapped addresses, a few
//! ASNs, countries in mixed case, wildcard user agents, trailing-dot hostnames) so that hits are
//! frequent; priorities come from 1..=5 so that ties are common; rules are log rules, inactive
//! or of any scope often enough. A second property adds `match_all` rules and rules naming
//! managed lists, with random list content (some lists unconfigured, some empty).

use std::sync::Arc;

use netacl_eval::{reference, CompiledPolicy, ManagedIndex, RequestInput};
use netacl_model::{AclId, Limits, ManagedList, ManagedListName, ManagedLists, RuleSet};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use serde_json::{json, Map, Value};

const V4: &[&str] = &[
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.3",
    "10.200.1.1/8",
    "192.0.2.0/24",
    "192.0.2.128/25",
    "0.0.0.0/0",
    "198.51.100.7/32",
];
const V6: &[&str] = &[
    "2001:db8::/32",
    "2001:db8:1::/48",
    "::/0",
    "2001:db8:1::1",
    "fe80::/10",
    "2001:db8:1:2::77/64",
];
const ASNS: &[u32] = &[1, 2, 3, 64500];
const COUNTRIES: &[&str] = &["US", "fr", "De"];
const SUBDIVISIONS: &[&str] = &["US-NY", "us-ca", "FR-75C"];
const JA3: &[&str] = &[
    "e7d705a3286e19ea42f587b344ee6865",
    "771ce3c3a8d5c6d6cf71acf98cbb8b35",
];
const JA4: &[&str] = &[
    "t13d1516h2_8daaf6152771_b186095e22b6",
    "T13D1517H2_8DAAF6152771_B186095E22B6",
];
const USER_AGENTS: &[&str] = &[
    "bot/*", "*bot", "*bo*t*", "curl/8.0", "*", "a*b*c", "bot", "**",
];
const HOSTS: &[&str] = &["a.example.com", "B.Example.com.", "c.example.com"];
const LIST_NAMES: &[&str] = &[
    "auth0.tor",
    "auth0.vpn",
    "auth0.proxy",
    "auth0.low_reputation",
];
/// Entries of the random managed lists: nested networks, an address that requests use mapped
/// into IPv6, IPv6 networks and fingerprints in both cases.
const LIST_ENTRIES: &[&str] = &[
    "10.0.0.0/8",
    "10.1.2.0/24",
    "10.1.2.3",
    "192.0.2.128/25",
    "198.51.100.7",
    "2001:db8:1::/48",
    "2001:db8:1:2::1",
    "fe80::/10",
    "e7d705a3286e19ea42f587b344ee6865",
    "t13d1517h2_8daaf6152771_b186095e22b6",
    "T13D1516H2_8DAAF6152771_B186095E22B6",
];

const REQ_IPS: &[&str] = &[
    "10.1.2.3",
    "10.9.9.9",
    "::ffff:10.1.2.3",
    "192.0.2.200",
    "192.0.2.1",
    "2001:db8:1::1",
    "2001:db8:1:2::1",
    "2001:db8:2::1",
    "8.8.8.8",
    "::ffff:192.0.2.129",
    "fe80::1",
    "198.51.100.7",
];
const REQ_PATHS: &[&str] = &[
    "/api/v2/users",
    "/scim/v2/Users",
    "/oidc/register",
    "/authorize",
];
const REQ_COUNTRIES: &[&str] = &["US", "us", "FR", "De", "GB", "USA"];
const REQ_SUBDIVISIONS: &[&str] = &["US-NY", "us-ny", "FR-75c", "US-CA", "XX-1"];
const REQ_JA3: &[&str] = &[
    "e7d705a3286e19ea42f587b344ee6865",
    "771CE3C3A8D5C6D6CF71ACF98CBB8B35",
    "00000000000000000000000000000000",
    "nothex",
];
const REQ_JA4: &[&str] = &[
    "t13d1516h2_8daaf6152771_b186095e22b6",
    "t13d1517h2_8daaf6152771_b186095e22b6",
    "t13d1518h2_8daaf6152771_b186095e22b6",
];
const REQ_USER_AGENTS: &[&str] = &[
    "bot/1", "xbot", "bot", "curl/8.0", "Curl/8.0", "", "abc", "aXbYc", "bobot", "bot/", "b",
];
/// Network ACL key ids (`http_message_signature`); ids compare exactly.
const KEY_IDS: &[&str] = &["nak_A", "nak_B", "nak_C"];
const REQ_KEYS: &[&str] = &["nak_A", "nak_B", "nak_a", "nak_D"];

const REQ_HOSTS: &[&str] = &[
    "a.example.com",
    "A.EXAMPLE.COM.",
    "b.example.com",
    "d.example.com",
];

fn member<T: Clone + std::fmt::Debug + 'static>(
    pool: &'static [T],
) -> impl Strategy<Value = Option<Vec<T>>> {
    prop_oneof![
        3 => Just(None),
        1 => subsequence(pool, 1..=pool.len().min(3)).prop_map(Some),
    ]
}

/// A criteria object; with `lists`, it may also name managed lists and signing keys.
fn criteria_with(lists: bool) -> impl Strategy<Value = Map<String, Value>> {
    let managed = if lists {
        (member(LIST_NAMES), member(KEY_IDS)).boxed()
    } else {
        Just((None, None)).boxed()
    };
    (
        (member(V4), member(V6), member(V4), member(V6)),
        (member(ASNS), member(COUNTRIES), member(SUBDIVISIONS)),
        (member(JA3), member(JA4), member(USER_AGENTS), member(HOSTS)),
        managed,
    )
        .prop_map(
            |(
                (v4, v6, cv4, cv6),
                (asns, countries, subs),
                (ja3, ja4, uas, hosts),
                (managed, keys),
            )| {
                let mut out = Map::new();
                let mut put = |key: &str, v: Option<Vec<Value>>| {
                    if let Some(v) = v {
                        out.insert(key.to_owned(), Value::Array(v));
                    }
                };
                let strs =
                    |v: Option<Vec<&str>>| v.map(|v| v.into_iter().map(Value::from).collect());
                put("ipv4_cidrs", strs(v4));
                put("ipv6_cidrs", strs(v6));
                put("connecting_ipv4_cidrs", strs(cv4));
                put("connecting_ipv6_cidrs", strs(cv6));
                put(
                    "asns",
                    asns.map(|v| v.into_iter().map(Value::from).collect()),
                );
                put("geo_country_codes", strs(countries));
                put("geo_subdivision_codes", strs(subs));
                put("ja3_fingerprints", strs(ja3));
                put("ja4_fingerprints", strs(ja4));
                put("user_agents", strs(uas));
                put("hostnames", strs(hosts));
                put("auth0_managed", strs(managed));
                if let Some(keys) = keys {
                    let keys: Vec<Value> = keys.into_iter().map(|id| json!({"id": id})).collect();
                    out.insert("http_message_signature".into(), json!({"keys": keys}));
                }
                out
            },
        )
}

fn rule(index: usize) -> impl Strategy<Value = Value> {
    rule_with(index, false)
}

/// A random record; with `extended`, it may be a `match_all` rule or name managed lists.
fn rule_with(index: usize, extended: bool) -> impl Strategy<Value = Value> {
    (
        any::<u32>(),
        prop::bool::weighted(0.85),
        1u64..=5,
        select(
            &[
                "tenant",
                "management",
                "authentication",
                "dynamic_client_registration",
            ][..],
        ),
        select(&["block", "allow", "log", "log", "redirect"][..]),
        criteria_with(extended),
        prop::option::weighted(0.4, criteria_with(extended)),
        prop::bool::weighted(if extended { 0.15 } else { 0.0 }),
    )
        .prop_map(
            move |(high, active, priority, scope, action, matching, not_matching, match_all)| {
                let id = AclId::from_random((u128::from(high) << 32) | index as u128);
                let mut act = Map::new();
                act.insert(action.into(), Value::Bool(true));
                if action == "redirect" {
                    act.insert(
                        "redirect_uri".into(),
                        format!("https://example.com/r/{id}").into(),
                    );
                }
                let mut body = Map::new();
                body.insert("action".into(), Value::Object(act));
                body.insert("scope".into(), scope.into());
                let mut not_matching = not_matching;
                if matching.contains_key("auth0_managed") {
                    // A list may be named in match or in not_match, not both.
                    if let Some(nm) = &mut not_matching {
                        nm.remove("auth0_managed");
                    }
                }
                let has_not_match = not_matching.as_ref().is_some_and(|m| !m.is_empty());
                if match_all {
                    body.insert("match_all".into(), Value::Bool(true));
                } else if !matching.is_empty() || !has_not_match {
                    let mut matching = matching;
                    if matching.is_empty() {
                        matching.insert("asns".into(), json!([1]));
                    }
                    body.insert("match".into(), Value::Object(matching));
                }
                if let Some(nm) = not_matching.filter(|m| !m.is_empty() && !match_all) {
                    body.insert("not_match".into(), Value::Object(nm));
                }
                json!({
                    "id": id.as_str(),
                    "description": "random",
                    "active": active,
                    "priority": priority,
                    "rule": Value::Object(body),
                    "created_at": "2026-01-01T00:00:00.000Z",
                    "updated_at": "2026-01-01T00:00:00.000Z",
                })
            },
        )
}

fn rule_set() -> impl Strategy<Value = Vec<Value>> {
    (0usize..12).prop_flat_map(|n| (0..n).map(rule).collect::<Vec<_>>())
}

fn extended_rule_set() -> impl Strategy<Value = Vec<Value>> {
    (0usize..12).prop_flat_map(|n| (0..n).map(|i| rule_with(i, true)).collect::<Vec<_>>())
}

/// Random content for each managed list: unconfigured, empty, or some of [`LIST_ENTRIES`].
fn managed_lists() -> impl Strategy<Value = ManagedLists> {
    let one = prop_oneof![
        2 => Just(None),
        1 => Just(Some(Vec::new())),
        4 => subsequence(LIST_ENTRIES, 1..=4).prop_map(Some),
    ];
    prop::collection::vec(one, ManagedListName::ALL.len()).prop_map(|contents| {
        let mut lists = ManagedLists::new();
        for (name, content) in ManagedListName::ALL.into_iter().zip(contents) {
            if let Some(entries) = content {
                let text = entries.join("\n");
                let list = ManagedList::from_lines(&text, 100).expect("valid entries");
                lists.set(name, Some(Arc::new(list)));
            }
        }
        lists
    })
}

fn opt(pool: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    prop::option::weighted(0.8, select(pool).prop_map(str::to_owned))
}

fn request() -> impl Strategy<Value = RequestInput> {
    (
        prop::option::weighted(0.9, select(REQ_PATHS)),
        opt(REQ_IPS),
        opt(REQ_IPS),
        prop::option::weighted(0.8, select(&[1u32, 2, 3, 64500, 7][..])),
        (
            opt(REQ_COUNTRIES),
            opt(REQ_SUBDIVISIONS),
            opt(REQ_JA3),
            opt(REQ_JA4),
        ),
        (opt(REQ_USER_AGENTS), opt(REQ_HOSTS), opt(REQ_KEYS)),
    )
        .prop_map(
            |(
                path,
                client_ip,
                connecting_ip,
                asn,
                (country, subdivision, ja3, ja4),
                (ua, host, key),
            )| {
                RequestInput {
                    scope: None,
                    path: path.map(str::to_owned),
                    client_ip,
                    connecting_ip,
                    asn,
                    country,
                    subdivision,
                    ja3,
                    ja4,
                    user_agent: ua,
                    hostname: host,
                    http_message_signature: key,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn compiled_agrees_with_reference(records in rule_set(), requests in prop::collection::vec(request(), 1..8)) {
        let rules = RuleSet::from_json(&Value::Array(records), 3, &Limits::default())
            .map_err(|e| TestCaseError::fail(format!("generated rules do not validate: {e}")))?;
        let policy = CompiledPolicy::compile(&rules)
            .map_err(|e| TestCaseError::fail(format!("does not compile: {e}")))?;
        for input in &requests {
            let request = input.to_request()
                .map_err(|e| TestCaseError::fail(format!("bad request: {e}")))?;
            let expected = reference::evaluate(&rules, &request);
            let decision = policy.evaluate(&request);
            prop_assert_eq!(decision.version(), 3);
            prop_assert_eq!(policy.outcome(&decision), expected, "request {:?}", input);
        }
    }

    #[test]
    fn compiled_agrees_with_reference_with_match_all_and_managed_lists(
        records in extended_rule_set(),
        lists in managed_lists(),
        requests in prop::collection::vec(request(), 1..8),
    ) {
        let rules = RuleSet::from_json(&Value::Array(records), 4, &Limits::default())
            .map_err(|e| TestCaseError::fail(format!("generated rules do not validate: {e}")))?;
        let index = Arc::new(ManagedIndex::build(&lists));
        let policy = CompiledPolicy::compile_with_lists(&rules, &Limits::default(), &index)
            .map_err(|e| TestCaseError::fail(format!("does not compile: {e}")))?;
        for input in &requests {
            let request = input.to_request()
                .map_err(|e| TestCaseError::fail(format!("bad request: {e}")))?;
            let expected = reference::evaluate_with_lists(&rules, &lists, &request);
            let decision = policy.evaluate(&request);
            prop_assert_eq!(decision.version(), 4);
            prop_assert_eq!(policy.outcome(&decision), expected, "request {:?}", input);
        }
    }
}

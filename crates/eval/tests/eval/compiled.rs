//! Compiled-policy behaviour beyond single decisions: errors, stats, serialisation, and the
//! synthetic tenant against the reference evaluator.

use netacl_eval::synthetic::{self, SyntheticConfig};
use netacl_eval::{reference, CompileError, CompiledPolicy, IndexKind, Outcome, Request, Verdict};
use netacl_model::{Limits, RequestScope, Signal};
use serde_json::json;

use crate::support::{id, record, rule_set};

/// An anchor list stops at its first rule that decides alone: the rules after it are never
/// stored (here the country posting shrinks to one inline anchor), unless a `log` rule comes
/// first (it does not decide, so the list goes on to the deciding rule).
#[test]
fn anchor_lists_stop_at_the_first_rule_that_decides_alone() {
    let fr = |name: &str, priority: u64, action: serde_json::Value| {
        record(
            name,
            priority,
            true,
            json!({"action": action, "scope": "tenant",
                   "match": {"geo_country_codes": ["FR"]}}),
        )
    };
    let request = Request::new(RequestScope::Authentication).with_country("FR");

    let cut = rule_set(
        vec![
            fr("First", 1, json!({"block": true})),
            fr("Later", 2, json!({"allow": true})),
            fr("Watch", 3, json!({"log": true})),
        ],
        1,
    );
    let policy = CompiledPolicy::compile(&cut).expect("compiles");
    assert_eq!(
        policy.stats().postings,
        0,
        "only the first rule is kept, inline"
    );
    let outcome = policy.outcome(&policy.evaluate(&request));
    assert_eq!(outcome, reference::evaluate(&cut, &request));
    assert_eq!(outcome.rule_id.as_deref(), Some(id("First").as_str()));

    let log_first = rule_set(
        vec![
            fr("Watch", 1, json!({"log": true})),
            fr("First", 2, json!({"block": true})),
            fr("Later", 3, json!({"allow": true})),
        ],
        1,
    );
    let policy = CompiledPolicy::compile(&log_first).expect("compiles");
    assert_eq!(
        policy.stats().postings,
        1,
        "the log rule and the deciding one"
    );
    let outcome = policy.outcome(&policy.evaluate(&request));
    assert_eq!(outcome, reference::evaluate(&log_first, &request));
    assert_eq!(outcome.monitored, vec![id("Watch").to_string()]);
}

/// A terminal `match_all` rule ends every anchor list of its scopes: rules after it are never
/// stored for those scopes, and signals only they name are not probed there. A deny-all under
/// allow rules therefore costs what the allow rules cost.
#[test]
fn a_terminal_match_all_rule_cuts_its_scopes() {
    let rule = |name: &str,
                priority: u64,
                scope: &str,
                action: serde_json::Value,
                m: serde_json::Value| {
        let mut rule = json!({"action": action, "scope": scope});
        for (k, v) in m.as_object().expect("object") {
            rule[k] = v.clone();
        }
        record(name, priority, true, rule)
    };
    let rules = rule_set(
        vec![
            rule(
                "HQ",
                1,
                "tenant",
                json!({"allow": true}),
                json!({"match": {"ipv4_cidrs": ["203.0.113.0/24"]}}),
            ),
            rule(
                "DenyMgmt",
                2,
                "management",
                json!({"block": true}),
                json!({"match_all": true}),
            ),
            rule(
                "Later",
                3,
                "tenant",
                json!({"block": true}),
                json!({"match": {"geo_country_codes": ["FR"]}}),
            ),
            rule(
                "Later2",
                4,
                "tenant",
                json!({"block": true}),
                json!({"match": {"geo_country_codes": ["FR"], "asns": [7]}}),
            ),
        ],
        1,
    );
    let policy = CompiledPolicy::compile(&rules).expect("compiles");
    let management = Request::new(RequestScope::Management)
        .with_country("FR")
        .with_client_ip("192.0.2.1".parse().unwrap());
    let outcome = policy.outcome(&policy.evaluate(&management));
    assert_eq!(outcome, reference::evaluate(&rules, &management));
    assert_eq!(outcome.rule_id.as_deref(), Some(id("DenyMgmt").as_str()));
    // For other scopes the later rules still decide.
    let auth = management.with_client_ip("192.0.2.1".parse().unwrap());
    let mut auth = auth;
    auth.set_scope(RequestScope::Authentication);
    let outcome = policy.outcome(&policy.evaluate(&auth));
    assert_eq!(outcome.rule_id.as_deref(), Some(id("Later").as_str()));
    // The country posting holds `Later` (anchor for authentication and registration) and
    // `Later2` (a member): stored once; without the cut `Later` would also be a management
    // anchor. The management scope has no anchored signal but the client address.
    let stats = policy.stats();
    assert_eq!(stats.unanchored, [1, 0, 0]);
    let uncut = rule_set(
        vec![
            rule(
                "HQ",
                1,
                "tenant",
                json!({"allow": true}),
                json!({"match": {"ipv4_cidrs": ["203.0.113.0/24"]}}),
            ),
            rule(
                "Later",
                3,
                "tenant",
                json!({"block": true}),
                json!({"match": {"geo_country_codes": ["FR"]}}),
            ),
        ],
        1,
    );
    let cut = rule_set(
        vec![
            rule(
                "HQ",
                1,
                "tenant",
                json!({"allow": true}),
                json!({"match": {"ipv4_cidrs": ["203.0.113.0/24"]}}),
            ),
            rule(
                "DenyAny",
                2,
                "tenant",
                json!({"block": true}),
                json!({"match_all": true}),
            ),
            rule(
                "Later",
                3,
                "tenant",
                json!({"block": true}),
                json!({"match": {"geo_country_codes": ["FR"]}}),
            ),
        ],
        1,
    );
    // Without the deny-all, `Later` is an inline anchor; with it, no scope can reach `Later`,
    // so its country entry holds no anchor at all and nothing probes the country.
    let country = |policy: &CompiledPolicy| {
        policy
            .stats()
            .indexes
            .iter()
            .find(|i| i.name == "country")
            .map(|i| i.keys)
    };
    assert_eq!(
        country(&CompiledPolicy::compile(&uncut).expect("compiles")),
        Some(1)
    );
    let policy = CompiledPolicy::compile(&cut).expect("compiles");
    assert_eq!(country(&policy), Some(0), "no country entry is left");
    for scope in RequestScope::ALL {
        let request = Request::new(scope).with_country("FR");
        let outcome = policy.outcome(&policy.evaluate(&request));
        assert_eq!(outcome, reference::evaluate(&cut, &request));
        assert_eq!(outcome.rule_id.as_deref(), Some(id("DenyAny").as_str()));
    }
}

/// A managed list named by many rules is compiled once (the policy shares the index) and
/// every mask of lists gets one posting; rules naming a list without entries are reported.
#[test]
fn managed_lists_are_compiled_once_and_shared() {
    use std::sync::Arc;

    use netacl_eval::ManagedIndex;
    use netacl_model::{ManagedList, ManagedListName, ManagedLists};

    let mut lists = ManagedLists::new();
    let cidrs: String = (0..2000u32)
        .map(|i| format!("10.{}.{}.0/24\n", i / 256, i % 256))
        .collect();
    lists.set(
        ManagedListName::Tor,
        Some(Arc::new(
            ManagedList::from_lines(&cidrs, 10_000).expect("list"),
        )),
    );
    lists.set(ManagedListName::Proxy, Some(Arc::new(ManagedList::empty())));
    let index = Arc::new(ManagedIndex::build(&lists));
    let scopes = [
        "management",
        "authentication",
        "dynamic_client_registration",
        "tenant",
    ];
    let mut records: Vec<serde_json::Value> = (0..10u64)
        .map(|i| {
            record(
                &format!(
                    "Tor{}",
                    ["A", "B", "C", "D", "E", "F", "G", "H", "J", "K"][i as usize]
                ),
                10 + i,
                true,
                json!({"action": {"log": true}, "scope": scopes[i as usize % 4],
                       "match": {"auth0_managed": ["auth0.tor"]}}),
            )
        })
        .collect();
    records.push(record(
        "ProxyVpn",
        50,
        true,
        json!({"action": {"block": true}, "scope": "tenant",
               "match": {"auth0_managed": ["auth0.proxy", "auth0.vpn"]}}),
    ));
    let rules = rule_set(records, 1);
    let policy =
        CompiledPolicy::compile_with_lists(&rules, &Limits::default(), &index).expect("compiles");
    assert!(
        Arc::ptr_eq(policy.managed_index(), &index),
        "shared, not copied"
    );
    let stats = policy.stats();
    // One posting for the Tor mask (ten rules), however many CIDRs the list holds.
    assert_eq!(stats.postings, 1);
    let tor = &stats.managed_lists[ManagedListName::Tor.index()];
    assert_eq!((tor.list.ipv4, tor.rules), (2000, 10));
    assert!(stats.needed_signals.contains(Signal::Managed));
    let empty: Vec<(&str, bool)> = stats
        .rules_naming_empty_lists
        .iter()
        .map(|w| (w.list, w.configured))
        .collect();
    assert_eq!(empty, [("auth0.proxy", true), ("auth0.vpn", false)]);
    let request = Request::new(RequestScope::Authentication)
        .with_client_ip("::ffff:10.7.200.9".parse().unwrap());
    let outcome = policy.outcome(&policy.evaluate(&request));
    assert_eq!(
        outcome,
        reference::evaluate_with_lists(&rules, &lists, &request)
    );
    assert_eq!(
        outcome.monitored.len(),
        5,
        "the authentication and tenant rules"
    );
    // Recompiling after a rule change keeps the same index.
    let again =
        CompiledPolicy::compile_with_lists(&rules, &Limits::default(), policy.managed_index())
            .expect("compiles");
    assert!(Arc::ptr_eq(again.managed_index(), &index));
}

/// A tenant large enough for a client address index packed in lines (from 4,096 intervals;
/// here 160,000 CIDRs over 20 rules, so a few hundred distinct chains), end to end against the
/// reference: nested networks, spilled lines, prefetch.
#[test]
fn line_tables_agree_with_reference() {
    let config = SyntheticConfig {
        rules: 60,
        cidrs: 160_000,
        requests: 1_500,
        seed: 3,
    };
    let generated = synthetic::generate(&config);
    let rules = generated
        .rule_set(&config)
        .expect("synthetic rules validate");
    let policy = CompiledPolicy::compile_with_limits(&rules, &synthetic::limits_for(&config))
        .expect("compiles");
    let stats = policy.stats();
    let client = stats
        .indexes
        .iter()
        .find(|i| i.name == "client_ip_v4")
        .expect("the client index");
    assert_eq!(client.kind, IndexKind::IntervalLines, "{client:?}");
    // Lines, regions and chains: well under 20 bytes an interval.
    assert!(
        client.bytes < client.intervals.unwrap_or(0) * 20,
        "{client:?}"
    );
    let mut blocked_by_address = 0;
    for input in &generated.requests {
        let request = input.to_request().expect("synthetic requests are valid");
        let expected = reference::evaluate(&rules, &request);
        let got = policy.outcome(&policy.evaluate(&request));
        assert_eq!(got, expected, "request {input:?}");
        blocked_by_address += usize::from(got.action != Verdict::None);
        // The same request from the IPv4-mapped form of its client address.
        if let Some(std::net::IpAddr::V4(v4)) = request.client_ip() {
            let mapped = request.with_client_ip(v4.to_ipv6_mapped().into());
            assert_eq!(
                policy.outcome(&policy.evaluate(&mapped)),
                expected,
                "{v4} mapped"
            );
        }
    }
    assert!(blocked_by_address > 100, "{blocked_by_address} decided");

    // The edges of the listed networks: the first and last address of every 40th network and
    // the addresses on either side, as IPv4 and IPv4-mapped IPv6, in every scope.
    let mut cidrs = Vec::new();
    for record in generated.records.as_array().expect("records") {
        for part in ["match", "not_match"] {
            if let Some(list) = record["rule"][part]["ipv4_cidrs"].as_array() {
                cidrs.extend(list.iter().filter_map(|c| c.as_str()));
            }
        }
    }
    assert!(cidrs.len() > 100_000, "{} CIDRs", cidrs.len());
    let scopes = RequestScope::ALL;
    let mut edges = 0;
    for (n, cidr) in cidrs.iter().enumerate().step_by(40) {
        // A CIDR (host bits set mean its network) or a bare address.
        let (address, len) = cidr.split_once('/').unwrap_or((cidr, "32"));
        let address: u32 = address.parse::<std::net::Ipv4Addr>().expect("IPv4").into();
        let len: u32 = len.parse().expect("a prefix length");
        let first = address & u32::MAX.checked_shl(32 - len).unwrap_or(0);
        let last = first | u32::MAX.checked_shr(len).unwrap_or(0);
        for a in [first, last, first.wrapping_sub(1), last.wrapping_add(1)] {
            let v4 = std::net::Ipv4Addr::from(a);
            let request = Request::new(scopes[n % scopes.len()]).with_client_ip(v4.into());
            let expected = reference::evaluate(&rules, &request);
            assert_eq!(policy.outcome(&policy.evaluate(&request)), expected, "{v4}");
            let mapped = request.with_client_ip(v4.to_ipv6_mapped().into());
            assert_eq!(
                policy.outcome(&policy.evaluate(&mapped)),
                expected,
                "{v4} mapped"
            );
            edges += usize::from(expected.action != Verdict::None);
        }
    }
    assert!(edges > 1_000, "{edges} edge addresses decided");
}

/// 70,000 /24 networks, each listed by its own pair of 400 rules: more distinct postings than
/// a line's code names, so the client index keeps the half-line blocks (from 131,072
/// intervals); end to end against the reference. The same networks listed by the same two
/// rules share one posting and are packed in lines.
#[test]
fn block_tables_agree_with_reference() {
    const RULES: u32 = 400;
    const NETWORKS: u32 = 70_000;
    let mut pairs = Vec::with_capacity(NETWORKS as usize);
    'pairs: for a in 0..RULES {
        for b in a + 1..RULES {
            if pairs.len() == NETWORKS as usize {
                break 'pairs;
            }
            pairs.push((a, b));
        }
    }
    // A /24 every 512 addresses from 10.0.0.0 (a gap after each), in a scattered order.
    let network = |n: u32| 0x0a00_0000u32 + ((n.wrapping_mul(40_503) % NETWORKS) << 9);
    let text = |n: u32| format!("{}/24", std::net::Ipv4Addr::from(network(n)));
    let mut listed: Vec<Vec<String>> = vec![Vec::new(); RULES as usize];
    for (n, &(a, b)) in pairs.iter().enumerate() {
        listed[a as usize].push(text(n as u32));
        listed[b as usize].push(text(n as u32));
    }
    let records = |listed: &[Vec<String>]| -> Vec<serde_json::Value> {
        listed
            .iter()
            .enumerate()
            .filter(|(_, cidrs)| !cidrs.is_empty())
            .map(|(i, cidrs)| {
                // Log rules (a rule that decides alone would cut the ones after it from the
                // postings), the last five blocking.
                let action = if i + 5 >= RULES as usize {
                    json!({"block": true})
                } else {
                    json!({"log": true})
                };
                record(
                    // Base58 has no `0`.
                    &format!("R{i:04}").replace('0', "z"),
                    // Priorities go to 100; ties are ordered by id.
                    1 + (i as u64 % 100),
                    true,
                    json!({"action": action, "scope": "tenant", "match": {"ipv4_cidrs": cidrs}}),
                )
            })
            .collect()
    };
    let limits = Limits::new(200_000, 200_000, 1_000, 400_000);
    let build = |records: Vec<serde_json::Value>| {
        let rules =
            netacl_model::RuleSet::from_json(&serde_json::Value::Array(records), 1, &limits)
                .expect("valid rules");
        let policy = CompiledPolicy::compile_with_limits(&rules, &limits).expect("compiles");
        let kind = policy
            .stats()
            .indexes
            .iter()
            .find(|i| i.name == "client_ip_v4")
            .map(|i| i.kind);
        (rules, policy, kind)
    };
    let (rules, policy, kind) = build(records(&listed));
    assert_eq!(kind, Some(IndexKind::IntervalBlocks));
    let mut next = 0x2545_f491_4f6c_dd1du64;
    let mut decided = 0;
    for i in 0..3_000u32 {
        next ^= next << 13;
        next ^= next >> 7;
        next ^= next << 17;
        let address = if i % 2 == 0 {
            network((next % u64::from(NETWORKS)) as u32) | (next >> 40) as u32 & 0x1ff
        } else {
            next as u32
        };
        let request = Request::new(RequestScope::Authentication)
            .with_client_ip(std::net::Ipv4Addr::from(address).into());
        let expected = reference::evaluate(&rules, &request);
        let got = policy.outcome(&policy.evaluate(&request));
        assert_eq!(got, expected, "{}", std::net::Ipv4Addr::from(address));
        decided += usize::from(got.action != Verdict::None || !got.monitored.is_empty());
    }
    assert!(decided > 500, "{decided} requests matched");

    // Every network in the same two (log) rules: one posting, lines.
    let all: Vec<String> = (0..NETWORKS).map(text).collect();
    let same = vec![Vec::new(), all.clone(), all];
    let (_, policy, kind) = build(records(&same));
    assert_eq!(kind, Some(IndexKind::IntervalLines));
    assert_eq!(policy.stats().postings, 1);
}

#[test]
fn synthetic_tenant_agrees_with_reference() {
    let config = SyntheticConfig {
        rules: 400,
        cidrs: 6_000,
        requests: 3_000,
        seed: 11,
    };
    let generated = synthetic::generate(&config);
    let rules = generated
        .rule_set(&config)
        .expect("synthetic rules validate");
    let policy = CompiledPolicy::compile(&rules).expect("compiles");
    let mut decided = 0;
    let mut monitored = 0;
    for input in &generated.requests {
        let request = input.to_request().expect("synthetic requests are valid");
        let expected = reference::evaluate(&rules, &request);
        let got = policy.outcome(&policy.evaluate(&request));
        assert_eq!(got, expected, "request {input:?}");
        decided += usize::from(got.action != Verdict::None);
        monitored += usize::from(!got.monitored.is_empty());
    }
    // The mix has hits, misses and log matches.
    assert!(decided > 300, "decided {decided}");
    assert!(decided < 2_900, "decided {decided}");
    assert!(monitored > 30, "monitored {monitored}");
    let stats = policy.stats();
    assert_eq!(stats.rules, 400);
    assert!(stats.active_rules < 400);
    // Every signal but the managed lists and signed-proxy keys (the synthetic tenant has
    // none, so the benches built on it are unchanged; `differential.rs` covers them).
    for signal in Signal::ALL
        .into_iter()
        .filter(|s| !matches!(s, Signal::Managed | Signal::MessageSignature))
    {
        assert!(
            policy.needed_signals().contains(signal),
            "{signal:?} unused"
        );
    }
}

#[test]
fn outcome_json_has_the_documented_shape() {
    let rules = rule_set(
        vec![
            record(
                "Log",
                1,
                true,
                json!({"action": {"log": true}, "scope": "tenant", "match": {"asns": [1]}}),
            ),
            record(
                "Go",
                2,
                true,
                json!({"action": {"redirect": true, "redirect_uri": "https://example.com/a?b=\"c\""},
                       "scope": "tenant", "match": {"asns": [1]}}),
            ),
            record(
                "Deny",
                3,
                true,
                json!({"action": {"block": true}, "scope": "tenant", "match": {"asns": [2]}}),
            ),
        ],
        4,
    );
    let policy = CompiledPolicy::compile(&rules).expect("compiles");
    let redirect = policy.evaluate(&Request::new(RequestScope::Authentication).with_asn(1));
    let expected = format!(
        r#"{{"action":"redirect","rule_id":"{}","redirect_uri":"https://example.com/a?b=\"c\"","monitored":["{}"]}}"#,
        id("Go"),
        id("Log")
    );
    assert_eq!(
        serde_json::to_string(&policy.outcome(&redirect)).unwrap(),
        expected
    );
    assert_eq!(
        serde_json::to_string(&policy.outcome_ref(&redirect)).unwrap(),
        expected
    );

    let block = policy.evaluate(&Request::new(RequestScope::Authentication).with_asn(2));
    let expected = format!(
        r#"{{"action":"block","rule_id":"{}","monitored":[]}}"#,
        id("Deny")
    );
    assert_eq!(
        serde_json::to_string(&policy.outcome_ref(&block)).unwrap(),
        expected
    );

    let none = policy.evaluate(&Request::new(RequestScope::Authentication));
    assert_eq!(
        serde_json::to_string(&policy.outcome_ref(&none)).unwrap(),
        r#"{"action":"none","rule_id":null,"monitored":[]}"#
    );
    let parsed: Outcome =
        serde_json::from_str(r#"{"action":"none","rule_id":null,"monitored":[]}"#).unwrap();
    assert_eq!(parsed, policy.outcome(&none));
    assert_eq!(none.rule(), None);
    assert_eq!(none.verdict(), Verdict::None);
}

#[test]
fn compile_refuses_sets_beyond_the_limits_and_duplicate_ids() {
    let records: Vec<_> = ["Aa", "Bb", "Cc"]
        .iter()
        .map(|t| {
            record(
                t,
                1,
                true,
                json!({"action": {"block": true}, "scope": "tenant",
                                       "match": {"asns": [1, 2, 3]}}),
            )
        })
        .collect();
    let rules = rule_set(records, 1);
    let limits = Limits::new(100, 100, 2, 100);
    assert_eq!(
        CompiledPolicy::compile_with_limits(&rules, &limits).unwrap_err(),
        CompileError::TooManyRules { rules: 3, limit: 2 }
    );
    let limits = Limits::new(100, 2, 100, 100);
    assert!(matches!(
        CompiledPolicy::compile_with_limits(&rules, &limits).unwrap_err(),
        CompileError::RuleTooLarge {
            entries: 3,
            limit: 2,
            ..
        }
    ));
    let limits = Limits::new(100, 100, 100, 8);
    assert_eq!(
        CompiledPolicy::compile_with_limits(&rules, &limits).unwrap_err(),
        CompileError::TooManyEntries {
            entries: 9,
            limit: 8
        }
    );
    let mut duplicated = rules.clone();
    duplicated.acls.push(rules.acls[1].clone());
    assert_eq!(
        CompiledPolicy::compile(&duplicated).unwrap_err(),
        CompileError::DuplicateId {
            id: id("Bb"),
            first: 1,
            second: 3
        }
    );
}

#[test]
fn stats_describe_the_indexes() {
    let big: Vec<String> = (0..2_000)
        .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
        .collect();
    let rules = rule_set(
        vec![
            record(
                "Big",
                1,
                true,
                json!({"action": {"block": true}, "scope": "tenant",
                                           "match": {"ipv4_cidrs": big, "ipv6_cidrs": ["2001:db8::/32"]}}),
            ),
            record(
                "Ua",
                2,
                true,
                json!({"action": {"log": true}, "scope": "management",
                                          "match": {"user_agents": ["curl/*", "*bot*", "exact"]}}),
            ),
            record(
                "Dormant",
                3,
                false,
                json!({"action": {"log": true}, "scope": "tenant",
                                           "match": {"asns": [5]}}),
            ),
            record(
                "Nm",
                4,
                true,
                json!({"action": {"allow": true}, "scope": "authentication",
                                          "not_match": {"geo_country_codes": ["US"]}}),
            ),
        ],
        12,
    );
    let policy = CompiledPolicy::compile(&rules).expect("compiles");
    let stats = policy.stats();
    assert_eq!((stats.version, stats.rules, stats.active_rules), (12, 4, 3));
    assert_eq!(stats.entries, 2_000 + 1 + 3 + 1);
    assert_eq!(stats.unanchored, [0, 1, 0]);
    let kind = |name: &str| {
        stats
            .indexes
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.kind)
    };
    assert_eq!(kind("client_ip_v4"), Some(IndexKind::IntervalTableDirect));
    assert_eq!(kind("client_ip_v6"), Some(IndexKind::IntervalTable));
    assert_eq!(
        kind("asn"),
        Some(IndexKind::Unused),
        "inactive rules are not indexed"
    );
    assert_eq!(kind("country"), Some(IndexKind::DirectTable));
    assert_eq!(kind("user_agent"), Some(IndexKind::UserAgentMatcher));
    assert_eq!(stats.user_agents.exact, 1);
    assert_eq!(stats.user_agents.by_prefix, 1);
    assert_eq!(stats.user_agents.by_inner_literal, 1);
    assert!(stats.approx_bytes > 2_000 * 8);
    let needed = policy.needed_signals();
    assert!(needed.contains(Signal::ClientIp));
    assert!(needed.contains(Signal::UserAgent));
    assert!(needed.contains(Signal::Country));
    assert!(!needed.contains(Signal::Asn));
    let json = serde_json::to_value(&stats).expect("serialises");
    assert_eq!(
        json["needed_signals"],
        json!(["client_ip", "country", "user_agent"])
    );

    // The last and first addresses of the big table.
    let hit = policy.evaluate(
        &Request::new(RequestScope::Management).with_client_ip("10.7.207.255".parse().unwrap()),
    );
    assert_eq!(hit.verdict(), Verdict::Block);
    let miss = policy.evaluate(
        &Request::new(RequestScope::Management).with_client_ip("10.7.208.0".parse().unwrap()),
    );
    assert_eq!(miss.verdict(), Verdict::None);
}

#[test]
fn empty_policy_decides_nothing() {
    let policy = CompiledPolicy::empty();
    assert_eq!(policy.version(), 0);
    assert!(policy.needed_signals().is_empty());
    let d = policy.evaluate(&Request::new(RequestScope::Management).with_asn(1));
    assert_eq!(d.verdict(), Verdict::None);
    assert!(d.monitored().is_empty());
}

/// Signals that anchor no rule of the request's scope are looked up only when a candidate
/// needs them: the decisions must not change, whichever candidate probes them first, and a
/// lazily probed signal's lists must be walked from the start.
#[test]
fn signals_probed_on_demand_decide_like_the_reference() {
    let rules = rule_set(
        vec![
            // Management rules are anchored on the hostname; authentication rules never are.
            record(
                "mgmt",
                1,
                true,
                json!({"action": {"block": true}, "scope": "management",
                       "match": {"hostnames": ["admin.example.com"]}}),
            ),
            // Anchored on the ASN, hostname checked by membership.
            record(
                "member",
                2,
                true,
                json!({"action": {"allow": true}, "scope": "authentication",
                       "match": {"asns": [64500], "hostnames": ["other.example.com"]}}),
            ),
            // A log rule that needs the country (not an anchor in this scope) before the
            // rule that needs the hostname's excluded list.
            record(
                "watcher",
                3,
                true,
                json!({"action": {"log": true}, "scope": "authentication",
                       "match": {"asns": [64500, 64501]},
                       "not_match": {"geo_country_codes": ["US"]}}),
            ),
            record(
                "exempt",
                4,
                true,
                json!({"action": {"block": true}, "scope": "authentication",
                       "match": {"asns": [64500, 64501]},
                       "not_match": {"hostnames": ["login.example.com"], "geo_country_codes": ["CA"]}}),
            ),
            // Only `not_match`: a candidate of every management request.
            record(
                "shutdown",
                5,
                true,
                json!({"action": {"block": true}, "scope": "management",
                       "not_match": {"asns": [64999]}}),
            ),
        ],
        3,
    );
    let policy = CompiledPolicy::compile(&rules).expect("compiles");
    let mut verdicts = std::collections::HashSet::new();
    for scope in [RequestScope::Authentication, RequestScope::Management] {
        for asn in [None, Some(64500), Some(64501), Some(64999)] {
            for host in [
                None,
                Some("admin.example.com"),
                Some("other.example.com"),
                Some("LOGIN.example.com"),
            ] {
                for country in [None, Some("US"), Some("ca"), Some("FR")] {
                    let mut request = Request::new(scope);
                    if let Some(asn) = asn {
                        request = request.with_asn(asn);
                    }
                    if let Some(host) = host {
                        request = request.with_hostname(host);
                    }
                    if let Some(country) = country {
                        request = request.with_country(country);
                    }
                    let expected = reference::evaluate(&rules, &request);
                    let got = policy.outcome(&policy.evaluate(&request));
                    assert_eq!(got, expected, "{request:?}");
                    verdicts.insert((got.rule_id, got.monitored));
                }
            }
        }
    }
    // Every rule decides some request, and the log rule shows up with a later decision.
    for tag in ["mgmt", "member", "exempt", "shutdown"] {
        assert!(
            verdicts
                .iter()
                .any(|(rule, _)| rule.as_deref() == Some(id(tag).as_str())),
            "{tag} never decides"
        );
    }
    assert!(verdicts.iter().any(|(rule, monitored)| {
        rule.as_deref() == Some(id("exempt").as_str()) && monitored == &vec![id("watcher")]
    }));
}

/// A request that hits more postings than the evaluator keeps on the stack (25 nested networks
/// and 40 user-agent patterns), and more candidates than it sorts on the stack: it starts over
/// with a heap buffer and must decide exactly like the reference.
#[test]
fn requests_hitting_many_postings_decide_like_the_reference() {
    // Rule ids are base58: no 0.
    let tag = |prefix: &str, n: usize| {
        const DIGITS: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        format!(
            "{prefix}{}{}",
            char::from(DIGITS[n / 58]),
            char::from(DIGITS[n % 58])
        )
    };
    let ua = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut records = Vec::new();
    for i in 0..40usize {
        let literal = &ua[i..i + 3];
        let pattern = match i % 3 {
            0 => format!("*{literal}*"),
            1 => format!("{}*{literal}*", &ua[..2]),
            _ => format!("*{literal}*{}", &ua[ua.len() - 2..]),
        };
        records.push(record(
            &tag("ua", i),
            1 + i as u64,
            true,
            json!({"action": {"log": true}, "scope": "tenant",
                   "match": {"user_agents": [pattern]}}),
        ));
    }
    for len in 8..=32u32 {
        let network = format!("10.1.2.3/{len}");
        records.push(record(
            &tag("net", len as usize),
            50 + u64::from(len),
            true,
            json!({"action": {"log": true}, "scope": "tenant",
                   "match": {"ipv4_cidrs": [network]}}),
        ));
    }
    records.push(record(
        "decider",
        100,
        true,
        json!({"action": {"block": true}, "scope": "tenant",
               "match": {"ipv4_cidrs": ["10.0.0.0/8"], "user_agents": ["*xyz*"]}}),
    ));
    let rules = rule_set(records, 1);
    let policy = CompiledPolicy::compile(&rules).expect("compiles");
    for (address, agent) in [
        ("10.1.2.3", ua),
        ("10.1.2.4", ua),
        ("10.1.3.3", "xyz"),
        ("10.200.0.1", &ua[10..]),
        ("192.0.2.1", ua),
    ] {
        let request = Request::new(RequestScope::Authentication)
            .with_client_ip(address.parse().unwrap())
            .with_user_agent(agent);
        let expected = reference::evaluate(&rules, &request);
        assert_eq!(
            policy.outcome(&policy.evaluate(&request)),
            expected,
            "{address} {agent}"
        );
    }
    let request = Request::new(RequestScope::Authentication)
        .with_client_ip("10.1.2.3".parse().unwrap())
        .with_user_agent(ua);
    let decision = policy.evaluate(&request);
    assert_eq!(decision.verdict(), Verdict::Block);
    // Every log rule but `ab*bcd*` (its `bcd` would overlap the prefix).
    assert_eq!(decision.monitored().len(), 39 + 25);
}

//! Hand-written cases: each finding kind, and what must stay undecided.

use netacl_analysis::{analyze, Analysis, FindingKind};
use netacl_model::{Limits, RuleSet};
use serde_json::{json, Value};

fn id(n: u8) -> String {
    format!("acl_{}", (n as char).to_string().repeat(22))
}

/// Rules `(n, priority, action, rule body without action)`; `n` a base58 digit.
fn rules(items: &[(char, u64, Value, Value)]) -> RuleSet {
    let records: Vec<Value> = items
        .iter()
        .map(|(n, priority, action, body)| {
            let mut rule = body.clone();
            rule["action"] = action.clone();
            if rule.get("scope").is_none() {
                rule["scope"] = json!("tenant");
            }
            let active = rule.get("inactive").is_none();
            if let Some(o) = rule.as_object_mut() {
                o.remove("inactive");
            }
            json!({
                "id": id(*n as u8), "description": "", "active": active, "priority": priority,
                "rule": rule,
                "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
            })
        })
        .collect();
    RuleSet::from_json(&json!(records), 1, &Limits::default()).unwrap()
}

fn block() -> Value {
    json!({"block": true})
}
fn allow() -> Value {
    json!({"allow": true})
}
fn log() -> Value {
    json!({"log": true})
}

fn kinds(a: &Analysis) -> Vec<(FindingKind, String, Vec<String>)> {
    a.findings
        .iter()
        .map(|f| (f.kind, f.rule_id.clone(), f.by.clone()))
        .collect()
}

#[test]
fn shadowed_by_two_rules_together() {
    let a = analyze(&rules(&[
        (
            '1',
            1,
            block(),
            json!({"match": {"geo_country_codes": ["US"]}}),
        ),
        (
            '2',
            2,
            block(),
            json!({"not_match": {"geo_country_codes": ["us"]}}),
        ),
        ('3', 3, block(), json!({"match": {"asns": [64500]}})),
    ]));
    assert_eq!(
        kinds(&a),
        [(FindingKind::Shadowed, id(b'3'), vec![id(b'1'), id(b'2')])]
    );
    assert_eq!(
        a.findings[0].detail,
        format!(
            "never decides: {}, {} decide every request it matches",
            id(b'1'),
            id(b'2')
        )
    );
}

#[test]
fn a_subdivision_does_not_imply_its_country() {
    // A request may carry US-NY without a country: the second rule still decides it.
    let a = analyze(&rules(&[
        (
            '1',
            1,
            block(),
            json!({"match": {"geo_country_codes": ["US"]}}),
        ),
        (
            '2',
            2,
            block(),
            json!({"match": {"geo_subdivision_codes": ["US-NY"]}}),
        ),
    ]));
    assert_eq!(kinds(&a), []);
}

#[test]
fn a_narrower_rule_before_a_wider_one_of_the_same_action_is_redundant() {
    let a = analyze(&rules(&[
        (
            '1',
            1,
            block(),
            json!({"match": {"ipv4_cidrs": ["10.1.0.0/16"]}}),
        ),
        (
            '2',
            2,
            block(),
            json!({"match": {"ipv4_cidrs": ["10.0.0.0/8"]}}),
        ),
    ]));
    assert_eq!(
        kinds(&a),
        [(FindingKind::Redundant, id(b'1'), vec![id(b'2')])]
    );
}

#[test]
fn an_allow_with_nothing_after_it_is_not_redundant() {
    // Removing it turns `allow` into "no rule decided": a different decision.
    let a = analyze(&rules(&[(
        '1',
        1,
        allow(),
        json!({"match": {"asns": [1]}}),
    )]));
    assert_eq!(kinds(&a), []);
}

#[test]
fn a_log_rule_between_makes_a_rule_not_redundant() {
    let a = analyze(&rules(&[
        ('1', 1, block(), json!({"match": {"asns": [1]}})),
        ('2', 2, log(), json!({"match": {"asns": [1]}})),
        ('3', 3, block(), json!({"match_all": true})),
    ]));
    // Removing 1 would record 2: not redundant; 2 is never recorded.
    assert_eq!(
        kinds(&a),
        [(FindingKind::Shadowed, id(b'2'), vec![id(b'1')])]
    );
    assert!(a.findings[0].detail.starts_with("never recorded: "));
}

#[test]
fn conflicts_name_the_earlier_rule_and_only_where_it_decides() {
    let a = analyze(&rules(&[
        ('1', 1, allow(), json!({"match": {"asns": [1]}})),
        ('2', 2, block(), json!({"match": {"asns": [1, 2]}})),
        ('3', 3, allow(), json!({"match": {"asns": [2]}})),
    ]));
    assert_eq!(
        kinds(&a),
        [
            (FindingKind::Conflict, id(b'2'), vec![id(b'1')]),
            (FindingKind::Shadowed, id(b'3'), vec![id(b'2')]),
            (FindingKind::Conflict, id(b'3'), vec![id(b'2')]),
        ]
    );
}

#[test]
fn redirects_to_different_targets_conflict() {
    let to = |uri: &str| json!({"redirect": true, "redirect_uri": uri});
    let a = analyze(&rules(&[
        (
            '1',
            1,
            to("https://a.example/"),
            json!({"match": {"asns": [1]}}),
        ),
        (
            '2',
            2,
            to("https://b.example/"),
            json!({"match": {"asns": [1, 2]}}),
        ),
    ]));
    assert_eq!(
        kinds(&a),
        [(FindingKind::Conflict, id(b'2'), vec![id(b'1')])]
    );
}

#[test]
fn scopes_and_inactive_rules() {
    let inactive = json!({"match_all": true, "inactive": true});
    let a = analyze(&rules(&[
        ('1', 1, block(), inactive),
        (
            '2',
            2,
            block(),
            json!({"match_all": true, "scope": "management"}),
        ),
        ('3', 3, allow(), json!({"match": {"asns": [1]}})),
        (
            '4',
            4,
            allow(),
            json!({"match": {"asns": [1]}, "scope": "management"}),
        ),
    ]));
    assert_eq!(
        kinds(&a),
        [
            (FindingKind::Conflict, id(b'3'), vec![id(b'2')]),
            (FindingKind::Shadowed, id(b'4'), vec![id(b'2')]),
            (FindingKind::Conflict, id(b'4'), vec![id(b'2')]),
        ]
    );
}

#[test]
fn user_agent_wildcards_overlapping_are_undecided_and_a_lone_star_is_exact() {
    let a = analyze(&rules(&[
        ('1', 1, block(), json!({"match": {"user_agents": ["bot*"]}})),
        ('2', 2, block(), json!({"match": {"user_agents": ["*bot"]}})),
    ]));
    // Whether every `bot*` also matches `*bot` (1 redundant) and whether `*bot` is left only
    // what `bot*` takes (2 shadowed): neither is decided by the atoms ("bot" matches both).
    assert_eq!(kinds(&a), []);
    assert_eq!(a.undecided.len(), 2);
    assert_eq!(a.undecided[0].rule_id, id(b'1'));
    assert!(
        a.undecided[0]
            .reason
            .starts_with("whether it is redundant: ")
            && a.undecided[0].reason.contains("\"bot*\""),
        "{}",
        a.undecided[0].reason
    );
    assert_eq!(a.undecided[1].rule_id, id(b'2'));
    assert!(
        a.undecided[1].reason.contains("\"*bot\""),
        "{}",
        a.undecided[1].reason
    );

    let a = analyze(&rules(&[
        ('1', 1, block(), json!({"match": {"user_agents": ["*"]}})),
        (
            '2',
            2,
            block(),
            json!({"match": {"user_agents": ["curl/8.0", "bot*"]}}),
        ),
    ]));
    assert_eq!(
        kinds(&a),
        [(FindingKind::Shadowed, id(b'2'), vec![id(b'1')])]
    );
    assert!(a.undecided.is_empty());
}

#[test]
fn managed_lists_are_not_guessed() {
    let a = analyze(&rules(&[
        (
            '1',
            1,
            block(),
            json!({"match": {"auth0_managed": ["auth0.tor"]}}),
        ),
        ('2', 2, block(), json!({"match": {"asns": [1]}})),
    ]));
    // Whether the list holds anything (1 shadowed: an empty list matches nothing), whether it
    // holds every address of ASN 1 (2 shadowed): both depend on content not modelled.
    assert_eq!(kinds(&a), []);
    assert_eq!(a.undecided.len(), 2);
    assert!(
        a.undecided[0].reason.contains("auth0.tor"),
        "{:?}",
        a.undecided
    );
    assert_eq!(
        a.undecided[1].reason,
        format!(
            "whether it is shadowed: depends on {}, which names the managed list(s) auth0.tor, \
             whose content the analysis does not model",
            id(b'1')
        )
    );
}

#[test]
fn ipv4_mapped_addresses_are_not_ipv6_requests() {
    // ::/80 minus ::ffff:0:0/96, in 16 networks: it covers every IPv6 request of ::/80,
    // because a mapped address is matched as IPv4.
    let cover: Vec<String> = (0..16)
        .map(|k: u32| format!("::{:x}:0:0/{}", (0xffffu32 << (16 - k)) & 0xffff, 81 + k))
        .collect();
    let a = analyze(&rules(&[
        ('1', 1, block(), json!({"match": {"ipv6_cidrs": cover}})),
        ('2', 2, allow(), json!({"match": {"ipv6_cidrs": ["::/80"]}})),
    ]));
    assert_eq!(
        kinds(&a)[0],
        (FindingKind::Shadowed, id(b'2'), vec![id(b'1')])
    );
    // Without the last network, ::fffe:0:0/96 stays to the allow rule.
    let a = analyze(&rules(&[
        (
            '1',
            1,
            block(),
            json!({"match": {"ipv6_cidrs": cover[..15]}}),
        ),
        ('2', 2, allow(), json!({"match": {"ipv6_cidrs": ["::/80"]}})),
    ]));
    assert_eq!(
        kinds(&a),
        [(FindingKind::Conflict, id(b'2'), vec![id(b'1')])]
    );
}

#[test]
fn the_header_summary_is_short_and_ascii() {
    let a = analyze(&rules(&[
        (
            '1',
            1,
            block(),
            json!({"match": {"ipv4_cidrs": ["10.0.0.0/8"]}}),
        ),
        (
            '2',
            2,
            allow(),
            json!({"match": {"ipv4_cidrs": ["10.1.0.0/16"]}}),
        ),
    ]));
    assert_eq!(
        a.summary_for(&id(b'2'), 1000).unwrap(),
        format!("shadowed by {}; conflict with {}", id(b'1'), id(b'1'))
    );
    assert_eq!(
        a.summary_for(&id(b'1'), 1000).unwrap(),
        format!("shadows {}; conflict with {}", id(b'2'), id(b'2'))
    );
    let cut = a.summary_for(&id(b'2'), 50).unwrap();
    assert!(cut.len() <= 50, "{cut}");
    assert!(cut.ends_with("; ..."), "{cut}");
    assert_eq!(a.summary_for(&id(b'3'), 1000), None);
}

#[test]
fn a_common_part_decided_by_earlier_rules_together_is_no_conflict() {
    // 3 (allow ASNs 1 and 2) and 4 (block US with ASNs 1 to 3) meet in US with ASN 1 or 2,
    // which 1 and 2 decide before 3: no conflict between 3 and 4 (no point shows one; the
    // common box is swept). 3 conflicts with 1 and 2; 4 is neither shadowed (US with ASN 3)
    // nor redundant.
    let a = analyze(&rules(&[
        (
            '1',
            1,
            block(),
            json!({"match": {"geo_country_codes": ["US"], "asns": [1]}}),
        ),
        (
            '2',
            2,
            block(),
            json!({"match": {"geo_country_codes": ["US"], "asns": [2]}}),
        ),
        ('3', 3, allow(), json!({"match": {"asns": [1, 2]}})),
        (
            '4',
            4,
            block(),
            json!({"match": {"geo_country_codes": ["US"], "asns": [1, 2, 3]}}),
        ),
    ]));
    assert_eq!(
        kinds(&a),
        [
            (FindingKind::Conflict, id(b'3'), vec![id(b'1')]),
            (FindingKind::Conflict, id(b'3'), vec![id(b'2')]),
        ]
    );
    assert!(a.undecided.is_empty());
}

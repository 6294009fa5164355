//! Validation of network ACL bodies, records and rule sets: the data-driven cases in
//! `testdata/validation/`, round trips, limits and the id and scope helpers.
use std::path::PathBuf;

use netacl_model::{
    AclId, Action, BrandingPatch, Limits, ManagedList, NetworkAcl, NetworkAclPatch, NetworkAclSpec,
    OrganizationSpec, RequestScope, RuleScope, RuleSet, Signal, ValidationError,
};
use serde_json::{json, Map, Value};

fn testdata(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/validation")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let cases: Value = serde_json::from_str(&text).expect("case file is JSON");
    let cases = cases.as_array().expect("case file is an array").clone();
    assert!(!cases.is_empty(), "{file} holds no cases");
    cases
}

/// Runs every case of `file` through `validate`; for accepted bodies `expected_json` says what
/// serialising the validated value must give back (`None`: nothing to compare).
fn run_cases<T>(
    file: &str,
    validate: impl Fn(&Value) -> Result<T, ValidationError>,
    round_trip: impl Fn(&T, &Value) -> Option<(Value, Value)>,
) {
    let mut failures = Vec::new();
    let cases = testdata(file);
    for case in &cases {
        let name = case["name"].as_str().expect("case name");
        let body = &case["body"];
        let expected = case["error"].as_str();
        match (validate(body), expected) {
            (Ok(value), None) => {
                if let Some((got, want)) = round_trip(&value, body) {
                    // Text comparison: key order matters too.
                    let (got, want) = (got.to_string(), want.to_string());
                    if got != want {
                        failures.push(format!("{name}: round trip\n  got  {got}\n  want {want}"));
                    }
                }
            }
            (Ok(_), Some(want)) => failures.push(format!("{name}: accepted, want {want}")),
            (Err(e), None) => failures.push(format!("{name}: refused with {e}")),
            (Err(e), Some(want)) => {
                if e.to_string() != want {
                    failures.push(format!("{name}:\n  got  {e}\n  want {want}"));
                }
                assert_eq!(e.rule_id, None, "{name}: single bodies carry no rule id");
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases in {file} failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `body` with its keys in `order` and `defaults` filled in where absent.
fn reordered(body: &Value, order: &[&str], defaults: &[(&str, Value)]) -> Value {
    let mut out = Map::new();
    for key in order {
        if let Some(value) = body.get(*key) {
            out.insert((*key).to_owned(), value.clone());
        } else if let Some((_, value)) = defaults.iter().find(|(k, _)| k == key) {
            out.insert((*key).to_owned(), value.clone());
        }
    }
    Value::Object(out)
}

const SPEC_ORDER: [&str; 4] = ["description", "active", "priority", "rule"];
const RECORD_ORDER: [&str; 7] = [
    "id",
    "description",
    "active",
    "priority",
    "rule",
    "created_at",
    "updated_at",
];

#[test]
fn create_cases() {
    let limits = Limits::default();
    run_cases(
        "network_acl_create.json",
        |body| NetworkAclSpec::from_json(body, &limits),
        |spec, body| {
            let want = reordered(body, &SPEC_ORDER, &[("priority", json!(50))]);
            Some((spec.to_json(), want))
        },
    );
}

#[test]
fn patch_cases() {
    let limits = Limits::default();
    run_cases(
        "network_acl_patch.json",
        |body| NetworkAclPatch::from_json(body, &limits),
        |_, _| None,
    );
}

#[test]
fn record_cases() {
    let limits = Limits::default();
    let epoch = json!("1970-01-01T00:00:00.000Z");
    run_cases(
        "network_acl_record.json",
        |body| NetworkAcl::from_json(body, &limits),
        |acl, body| {
            let defaults = [
                ("priority", json!(50)),
                ("created_at", epoch.clone()),
                ("updated_at", epoch.clone()),
            ];
            Some((acl.to_json(), reordered(body, &RECORD_ORDER, &defaults)))
        },
    );
}

#[test]
fn branding_patch_cases() {
    run_cases(
        "branding_patch.json",
        BrandingPatch::from_json,
        |patch, body| Some((patch.to_json(), body.clone())),
    );
}

#[test]
fn organization_create_cases() {
    run_cases(
        "organization_create.json",
        OrganizationSpec::from_json,
        |_, _| None,
    );
}

#[test]
fn managed_list_cases() {
    let limits = Limits::default();
    run_cases(
        "managed_list.json",
        |body| ManagedList::from_json(body, limits.max_entries_per_set),
        |list, body| Some((json!({"items": list.items_json()}), body.clone())),
    );
}

fn spec(body: Value) -> NetworkAclSpec {
    NetworkAclSpec::from_json(&body, &Limits::default()).expect("valid body")
}

fn error(result: Result<impl std::fmt::Debug, ValidationError>) -> String {
    result.expect_err("must be refused").to_string()
}

#[test]
fn values_come_back_exactly_as_accepted() {
    let body = json!({
        "description": "Ünïcode and order",
        "active": false,
        "priority": 3,
        "rule": {
            "action": {"redirect": true, "redirect_uri": "https://example.com/why?x=1"},
            "scope": "authentication",
            "match": {
                "ipv4_cidrs": ["10.1.2.3/8", "192.0.2.1"],
                "ipv6_cidrs": ["2001:DB8::1/32"],
                "geo_country_codes": ["us", "De", "NZ"],
                "geo_subdivision_codes": ["us-ny", "GB-ENG"],
                "ja4_fingerprints": ["T13D1516H2_8DAAF6152771_B186095E22B6"],
                "hostnames": ["Login.Example.COM."]
            },
            "not_match": {"asns": [64500, 1, 4_294_967_295u32], "user_agents": ["z*", "a*"]}
        }
    });
    let spec = spec(body.clone());
    assert_eq!(spec.to_json().to_string(), body.to_string());

    // The domain values behind the texts.
    let rule = &spec.rule;
    assert_eq!(
        rule.action(),
        &Action::Redirect {
            redirect_uri: "https://example.com/why?x=1".into()
        }
    );
    assert_eq!(rule.scope(), RuleScope::Authentication);
    let m = rule.match_criteria().expect("match");
    let v4 = m.ipv4_cidrs().expect("ipv4");
    assert_eq!(v4[0].text(), "10.1.2.3/8");
    assert_eq!(v4[0].net().to_string(), "10.0.0.0/8");
    assert_eq!(v4[1].net().to_string(), "192.0.2.1/32");
    let v6 = m.ipv6_cidrs().expect("ipv6");
    assert_eq!(v6[0].text(), "2001:DB8::1/32");
    assert_eq!(v6[0].net().to_string(), "2001:db8::/32");
    assert_eq!(
        m.geo_country_codes().expect("countries")[0].canonical(),
        *b"US"
    );
    assert_eq!(
        m.geo_subdivision_codes().expect("subdivisions")[0].canonical(),
        "US-NY"
    );
    assert_eq!(
        m.ja4_fingerprints().expect("ja4")[0].canonical(),
        "t13d1516h2_8daaf6152771_b186095e22b6"
    );
    assert_eq!(
        m.hostnames().expect("hostnames")[0].canonical(),
        "login.example.com"
    );
    assert_eq!(
        m.signals().collect::<Vec<_>>(),
        [
            Signal::ClientIp,
            Signal::Country,
            Signal::Subdivision,
            Signal::Ja4,
            Signal::Hostname
        ]
    );
    let n = rule.not_match().expect("not_match");
    assert_eq!(n.asns(), Some(&[64500, 1, 4294967295][..]));
    assert_eq!(spec.entry_count(), 15);
}

#[test]
fn ja3_bytes_follow_the_hex() {
    let spec = spec(json!({
        "description": "", "active": true,
        "rule": {"action": {"log": true}, "scope": "tenant",
                 "match": {"ja3_fingerprints": ["00ff10a0000000000000000000000001"]}}
    }));
    let ja3 = &spec
        .rule
        .match_criteria()
        .expect("match")
        .ja3_fingerprints()
        .expect("ja3")[0];
    assert_eq!(&ja3.bytes()[..4], &[0x00, 0xff, 0x10, 0xa0]);
    assert_eq!(ja3.bytes()[15], 1);
    assert_eq!(spec.priority.get(), 50);
}

#[test]
fn records_round_trip() {
    let record = json!({
        "id": "acl_2ZbGfPu9TCHmbkDc8Qv3rL",
        "description": "d",
        "active": true,
        "priority": 50,
        "rule": {"action": {"allow": true}, "scope": "management",
                 "match": {"connecting_ipv6_cidrs": ["2001:db8::/32"]}},
        "created_at": "2026-07-30T11:42:25.354Z",
        "updated_at": "2026-08-01T00:00:00.001Z"
    });
    let acl = NetworkAcl::from_json(&record, &Limits::default()).expect("valid record");
    assert_eq!(acl.id.as_str(), "acl_2ZbGfPu9TCHmbkDc8Qv3rL");
    assert_eq!(
        acl.updated_at.unix_millis() - acl.created_at.unix_millis(),
        ((2 * 24 - 11) * 3600 - 42 * 60 - 25) * 1000 - 353
    );
    assert_eq!(acl.to_json().to_string(), record.to_string());
    // The spec alone serialises without the server-set fields.
    let spec_json = acl.spec.to_json();
    assert_eq!(
        spec_json
            .as_object()
            .expect("object")
            .keys()
            .collect::<Vec<_>>(),
        ["description", "active", "priority", "rule"]
    );
}

#[test]
fn patches_apply_over_the_current_spec() {
    let limits = Limits::default();
    let current = spec(json!({
        "description": "old", "active": true, "priority": 5,
        "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [1]}}
    }));
    let patch =
        NetworkAclPatch::from_json(&json!({"active": false, "priority": 6}), &limits).expect("ok");
    assert_eq!(patch.description, None);
    let next = patch.apply(&current);
    assert_eq!(next.description, "old");
    assert!(!next.active);
    assert_eq!(next.priority.get(), 6);
    assert_eq!(next.rule, current.rule);

    let patch = NetworkAclPatch::from_json(
        &json!({"rule": {"action": {"log": true}, "scope": "management", "not_match": {"asns": [2]}}}),
        &limits,
    )
    .expect("ok");
    let next = patch.apply(&current);
    // A rule in a patch replaces the whole rule: `match` is gone.
    assert_eq!(next.rule.match_criteria(), None);
    assert_eq!(next.rule.action(), &Action::Log);
    assert_eq!(next.rule.scope(), RuleScope::Management);
    assert_eq!(next.description, "old");
}

fn body_with(criteria: Value) -> Value {
    json!({"description": "", "active": true,
           "rule": {"action": {"block": true}, "scope": "tenant", "match": criteria}})
}

#[test]
fn entry_limits() {
    let limits = Limits::new(3, 4, 2, 6);
    let ok = body_with(json!({"asns": [1, 2, 3]}));
    assert!(NetworkAclSpec::from_json(&ok, &limits).is_ok());
    let per_member = body_with(json!({"asns": [1, 2, 3, 4]}));
    assert_eq!(
        error(NetworkAclSpec::from_json(&per_member, &limits)),
        "Payload validation error: 'Array is too long (4), maximum 3' on property rule.match.asns."
    );
    let mut per_rule = body_with(json!({"asns": [1, 2, 3]}));
    per_rule["rule"]["not_match"] = json!({"geo_country_codes": ["US", "DE"]});
    assert_eq!(
        error(NetworkAclSpec::from_json(&per_rule, &limits)),
        "Payload validation error: 'Too many entries in rule (5), maximum 4' on property rule."
    );
    let mut at_limit = body_with(json!({"asns": [1, 2, 3]}));
    at_limit["rule"]["not_match"] = json!({"geo_country_codes": ["US"]});
    assert!(NetworkAclSpec::from_json(&at_limit, &limits).is_ok());
}

fn record(id: &str, priority: u64, asns: Value) -> Value {
    json!({"id": id, "description": "", "active": true, "priority": priority,
           "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": asns}}})
}

const ID_A: &str = "acl_1111111111111111111111";
const ID_B: &str = "acl_2ZbGfPu9TCHmbkDc8Qv3rL";
const ID_C: &str = "acl_zzzzzzzzzzzzzzzzzzzzzz";

#[test]
fn rule_sets_from_arrays_and_envelopes() {
    let limits = Limits::default();
    let records = json!([
        record(ID_A, 10, json!([1])),
        record(ID_B, 10, json!([2, 3]))
    ]);
    let set = RuleSet::from_json(&records, 7, &limits).expect("valid set");
    assert_eq!(set.version, 7);
    assert_eq!(set.acls.len(), 2);
    assert_eq!(set.acls[1].id.as_str(), ID_B);
    assert_eq!(set.entry_count(), 3);

    let envelope = json!({"network_acls": records, "start": 0, "limit": 50, "total": 2});
    let from_envelope = RuleSet::from_json(&envelope, 7, &limits).expect("valid envelope");
    assert_eq!(from_envelope, set);

    assert_eq!(
        RuleSet::from_json(&json!([]), 1, &limits)
            .expect("empty")
            .acls,
        []
    );
    assert_eq!(
        error(RuleSet::from_json(
            &json!({"network_acls": [], "next": "x"}),
            1,
            &limits
        )),
        "Payload validation error: 'Additional properties not allowed: next'."
    );
    assert_eq!(
        error(RuleSet::from_json(&json!({"start": 0}), 1, &limits)),
        "Payload validation error: 'Missing required property: network_acls'."
    );
    assert_eq!(
        error(RuleSet::from_json(
            &json!({"network_acls": [], "total": -1}),
            1,
            &limits
        )),
        "Payload validation error: 'Value -1 is less than minimum 0' on property total."
    );
    assert_eq!(
        error(RuleSet::from_json(&json!("rules"), 1, &limits)),
        "Payload validation error: 'Expected type array,object but found type string'."
    );
}

#[test]
fn rule_set_errors_name_the_record() {
    let limits = Limits::default();
    let bad = json!([
        record(ID_A, 1, json!([1])),
        record(ID_B, 2, json!([1])),
        record(ID_C, 3, json!([4, 4]))
    ]);
    let e = RuleSet::from_json(&bad, 1, &limits).expect_err("duplicate asns");
    assert_eq!(e.path, "[2].rule.match.asns");
    assert_eq!(e.rule_id.as_deref(), Some(ID_C));
    assert_eq!(
        e.to_string(),
        "Payload validation error: 'Array items are not unique (indexes 0 and 1)' on property [2].rule.match.asns."
    );

    let envelope = json!({"network_acls": bad});
    let e = RuleSet::from_json(&envelope, 1, &limits).expect_err("duplicate asns");
    assert_eq!(e.path, "network_acls[2].rule.match.asns");
    assert_eq!(e.rule_id.as_deref(), Some(ID_C));

    // A record without a usable id: no rule id, the path still says which one.
    let e = RuleSet::from_json(&json!([{"description": ""}]), 1, &limits).expect_err("no id");
    assert_eq!(e.path, "[0]");
    assert_eq!(e.reason, "Missing required property: id");
    assert_eq!(e.rule_id, None);
    let e = RuleSet::from_json(&json!([record("acl_bad", 1, json!([1]))]), 1, &limits)
        .expect_err("bad id");
    assert_eq!(
        e.to_string(),
        "Payload validation error: 'Object didn't pass validation for format acl-id: acl_bad' on property [0].id."
    );
    assert_eq!(e.rule_id.as_deref(), Some("acl_bad"));
}

#[test]
fn rule_set_ids_are_unique_but_priorities_need_not_be() {
    let limits = Limits::default();
    let same_priority = json!([record(ID_A, 5, json!([1])), record(ID_B, 5, json!([2]))]);
    assert!(RuleSet::from_json(&same_priority, 1, &limits).is_ok());
    let same_id = json!([
        record(ID_A, 1, json!([1])),
        record(ID_B, 2, json!([2])),
        record(ID_A, 3, json!([3]))
    ]);
    let e = RuleSet::from_json(&same_id, 1, &limits).expect_err("duplicate id");
    assert_eq!(
        e.to_string(),
        format!(
            "Payload validation error: 'Duplicate id {ID_A} (also at index 0)' on property [2].id."
        )
    );
    assert_eq!(e.rule_id.as_deref(), Some(ID_A));
}

#[test]
fn rule_set_limits() {
    let limits = Limits::new(10, 10, 2, 4);
    let three = json!([
        record(ID_A, 1, json!([1])),
        record(ID_B, 2, json!([2])),
        record(ID_C, 3, json!([3]))
    ]);
    assert_eq!(
        error(RuleSet::from_json(&three, 1, &limits)),
        "Payload validation error: 'Array is too long (3), maximum 2'."
    );
    assert_eq!(
        error(RuleSet::from_json(
            &json!({"network_acls": three}),
            1,
            &limits
        )),
        "Payload validation error: 'Array is too long (3), maximum 2' on property network_acls."
    );
    let too_many_entries = json!([
        record(ID_A, 1, json!([1, 2, 3])),
        record(ID_B, 2, json!([4, 5]))
    ]);
    let e = RuleSet::from_json(&too_many_entries, 1, &limits).expect_err("entries");
    assert_eq!(
        e.to_string(),
        "Payload validation error: 'Too many entries in rule set (at least 5), maximum 4'."
    );
    assert_eq!(e.rule_id, None);
    let at_limit = json!([
        record(ID_A, 1, json!([1, 2])),
        record(ID_B, 2, json!([4, 5]))
    ]);
    assert_eq!(
        RuleSet::from_json(&at_limit, 1, &limits)
            .expect("at the limit")
            .entry_count(),
        4
    );
}

#[test]
fn acl_ids() {
    assert_eq!(AclId::from_random(0).as_str(), "acl_1111111111111111111111");
    assert_eq!(AclId::from_random(1).as_str(), "acl_1111111111111111111112");
    assert_eq!(
        AclId::from_random(58).as_str(),
        "acl_1111111111111111111121"
    );
    let max = AclId::from_random(u128::MAX);
    assert_eq!(AclId::parse(max.as_str()), Some(max.clone()));
    assert_ne!(AclId::from_random(u128::MAX - 1), max);
    for i in 0..200u128 {
        let bits = i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
        let id = AclId::from_random(bits);
        assert_eq!(AclId::parse(id.as_str()), Some(id.clone()), "{id}");
        assert_eq!(id.to_string().len(), 26);
    }
    for bad in [
        "",
        "acl_",
        "acl_111111111111111111111",   // 21
        "acl_11111111111111111111111", // 23
        "acl_111111111111111111111O",
        "acl_111111111111111111111I",
        "acl_111111111111111111111l",
        "acl_1111111111111111111110",
        "ACL_1111111111111111111111",
        "rul_1111111111111111111111",
        "acl_11111111111111111111é",
    ] {
        assert_eq!(AclId::parse(bad), None, "{bad}");
    }
}

#[test]
fn request_scopes_from_paths() {
    for (path, scope) in [
        ("/api/v2", RequestScope::Management),
        ("/api/v2/", RequestScope::Management),
        ("/api/v2/users?q=1", RequestScope::Management),
        ("/scim", RequestScope::Management),
        ("/scim/v2/Users", RequestScope::Management),
        ("/oidc/register", RequestScope::DynamicClientRegistration),
        ("/oidc/register/", RequestScope::DynamicClientRegistration),
        ("/oidc/register?x", RequestScope::DynamicClientRegistration),
        ("/oidc/registers", RequestScope::Authentication),
        ("/oidc/register/extra", RequestScope::Authentication),
        ("/api/v2x", RequestScope::Authentication),
        ("/api/v1/users", RequestScope::Authentication),
        ("/scimitar", RequestScope::Authentication),
        ("/authorize", RequestScope::Authentication),
        ("/", RequestScope::Authentication),
        ("", RequestScope::Authentication),
    ] {
        assert_eq!(RequestScope::from_path(path), scope, "{path}");
    }
    // How rule scopes cover request scopes.
    assert!(RuleScope::Tenant.covers(RequestScope::Management));
    assert!(RuleScope::Management.covers(RequestScope::Management));
    assert!(!RuleScope::Management.covers(RequestScope::Authentication));
    assert!(!RuleScope::Authentication.covers(RequestScope::DynamicClientRegistration));
    for scope in RuleScope::ALL {
        assert_eq!(RuleScope::parse(scope.as_str()), Some(scope));
    }
}

#[test]
fn large_members_validate() {
    // 20,000 distinct addresses in one member: uniqueness is checked in linear time.
    let addrs: Vec<Value> = (0..20_000u32)
        .map(|i| Value::from(std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string()))
        .collect();
    let spec = spec(body_with(json!({"ipv4_cidrs": addrs.clone()})));
    assert_eq!(spec.entry_count(), 20_000);
    let mut with_dup = addrs;
    with_dup.push(Value::from("10.0.78.31"));
    assert_eq!(
        error(NetworkAclSpec::from_json(&body_with(json!({"ipv4_cidrs": with_dup})), &Limits::default())),
        "Payload validation error: 'Array items are not unique (indexes 19999 and 20000)' on property rule.match.ipv4_cidrs."
    );
}

mod properties {
    //! Property tests: validation never panics, and whatever it accepts serialises back to a
    //! body it accepts again, unchanged.
    use super::*;
    use proptest::prelude::*;

    /// Keys a body might hold: every real one, plus near misses.
    const KEYS: &[&str] = &[
        "id",
        "description",
        "active",
        "priority",
        "rule",
        "created_at",
        "updated_at",
        "action",
        "scope",
        "match",
        "not_match",
        "block",
        "allow",
        "log",
        "redirect",
        "redirect_uri",
        "ipv4_cidrs",
        "ipv6_cidrs",
        "connecting_ipv4_cidrs",
        "connecting_ipv6_cidrs",
        "asns",
        "geo_country_codes",
        "geo_subdivision_codes",
        "ja3_fingerprints",
        "ja4_fingerprints",
        "user_agents",
        "hostnames",
        "network_acls",
        "total",
        "Match",
        "",
    ];

    /// Strings near the formats' edges.
    const STRINGS: &[&str] = &[
        "",
        "tenant",
        "management",
        "authentication",
        "dynamic_client_registration",
        "10.0.0.0/8",
        "10.1.2.3/8",
        "10.0.0.256",
        "192.0.2.1",
        "::1",
        "2001:db8::/32",
        "::ffff:10.0.0.1",
        "::ffff:0:0/96",
        "US",
        "us",
        "USA",
        "US-NY",
        "e7d705a3286e19ea42f587b344ee6865",
        "t13d1516h2_8daaf6152771_b186095e22b6",
        "curl/*",
        "a\u{0}b",
        "example.com.",
        "*.x",
        "https://example.com/",
        "acl_2ZbGfPu9TCHmbkDc8Qv3rL",
        "2026-07-30T11:42:25.354Z",
        "é",
    ];

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            prop_oneof![
                Just(0i64),
                Just(1),
                Just(50),
                Just(101),
                Just(-1),
                Just(4_294_967_296)
            ]
            .prop_map(Value::from),
            Just(json!(1.5)),
            prop::sample::select(STRINGS).prop_map(Value::from),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(
                    |members| {
                        Value::Object(
                            members
                                .into_iter()
                                .map(|(k, v)| (k.to_owned(), v))
                                .collect(),
                        )
                    }
                ),
            ]
        })
    }

    fn criteria() -> impl Strategy<Value = Value> {
        let list = |items: &'static [&'static str]| {
            prop::sample::subsequence(items, 1..=items.len()).prop_shuffle()
        };
        (
            prop::option::of(list(&[
                "10.1.2.3/8",
                "192.0.2.1",
                "0.0.0.0/0",
                "203.0.113.0/24",
            ])),
            prop::option::of(list(&["2001:db8::/32", "::1", "2001:DB8:0:1::/64"])),
            prop::option::of(prop::collection::hash_set(any::<u32>(), 1..4)),
            prop::option::of(list(&["US", "nz", "De"])),
            prop::option::of(list(&["curl/*", "*bot*", "Mozilla/5.0"])),
            prop::option::of(list(&["example.com", "Login.Example.COM.", "_x.example"])),
        )
            .prop_filter_map("at least one member", |(v4, v6, asns, cc, ua, hosts)| {
                let mut out = Map::new();
                let mut put = |key: &str, value: Option<Value>| {
                    if let Some(value) = value {
                        out.insert(key.to_owned(), value);
                    }
                };
                put("ipv4_cidrs", v4.map(|v| json!(v)));
                put("ipv6_cidrs", v6.map(|v| json!(v)));
                put(
                    "asns",
                    asns.map(|v| json!(v.into_iter().collect::<Vec<_>>())),
                );
                put("geo_country_codes", cc.map(|v| json!(v)));
                put("user_agents", ua.map(|v| json!(v)));
                put("hostnames", hosts.map(|v| json!(v)));
                (!out.is_empty()).then_some(Value::Object(out))
            })
    }

    fn valid_body() -> impl Strategy<Value = Value> {
        (
            ".{0,20}",
            any::<bool>(),
            1u8..=100,
            prop::sample::select(&["block", "allow", "log", "redirect"][..]),
            prop::sample::select(&RuleScope::ALL[..]),
            prop::option::of(criteria()),
            prop::option::of(criteria()),
        )
            .prop_filter_map(
                "match or not_match",
                |(description, active, priority, action, scope, m, n)| {
                    if m.is_none() && n.is_none() {
                        return None;
                    }
                    let action = if action == "redirect" {
                        json!({"redirect": true, "redirect_uri": "https://example.com/x"})
                    } else {
                        json!({ action: true })
                    };
                    let mut rule = json!({"action": action, "scope": scope.as_str()});
                    if let Some(m) = m {
                        rule["match"] = m;
                    }
                    if let Some(n) = n {
                        rule["not_match"] = n;
                    }
                    Some(json!({"description": description, "active": active,
                                "priority": priority, "rule": rule}))
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn arbitrary_json_never_panics_and_accepted_values_are_stable(value in json_value()) {
            let limits = Limits::default();
            if let Ok(spec) = NetworkAclSpec::from_json(&value, &limits) {
                let again = NetworkAclSpec::from_json(&spec.to_json(), &limits);
                prop_assert_eq!(again, Ok(spec));
            }
            if let Ok(acl) = NetworkAcl::from_json(&value, &limits) {
                let again = NetworkAcl::from_json(&acl.to_json(), &limits);
                prop_assert_eq!(again, Ok(acl));
            }
            let _ = NetworkAclPatch::from_json(&value, &limits);
            let _ = RuleSet::from_json(&value, 1, &limits);
        }

        #[test]
        fn valid_bodies_round_trip_exactly(body in valid_body()) {
            let spec = NetworkAclSpec::from_json(&body, &Limits::default());
            prop_assert!(spec.is_ok(), "{:?} refused: {:?}", body, spec);
            let spec = spec.expect("checked");
            prop_assert_eq!(spec.to_json().to_string(), body.to_string());
        }
    }
}

//! The compiled evaluator against the reference evaluator on small rule sets and requests
//! decoded from the input.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use arbitrary::{Result, Unstructured};
use netacl_eval::{reference, CompiledPolicy, ManagedIndex, RequestInput};
use netacl_model::{AclId, Limits, ManagedList, ManagedListName, ManagedLists, RuleSet};
use serde_json::{json, Map, Value};

/// Networks rules name: nested, overlapping, host bits set, whole address space.
const V4: &[&str] = &[
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.3",
    "10.9.9.9/8",
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
    "2001:db8:1:2::9/64",
];
const COUNTRIES: &[&str] = &["US", "fr", "De", "GB"];
const SUBDIVISIONS: &[&str] = &["US-NY", "us-ca", "FR-75C", "GB-ENG"];
const JA3: &[&str] = &[
    "e7d705a3286e19ea42f587b344ee6865",
    "771ce3c3a8d5c6d6cf71acf98cbb8b35",
];
const JA4: &[&str] = &[
    "t13d1516h2_8daaf6152771_b186095e22b6",
    "T13D1517H2_8DAAF6152771_B186095E22B6",
];
const HOSTS: &[&str] = &[
    "a.example.com",
    "B.Example.com.",
    "example.com",
    "c.example",
];
const LIST_ENTRIES: &[&str] = &[
    "10.0.0.0/8",
    "10.1.2.3",
    "192.0.2.0/25",
    "2001:db8::/32",
    "e7d705a3286e19ea42f587b344ee6865",
    "t13d1516h2_8daaf6152771_b186095e22b6",
];
const SCOPES: &[&str] = &[
    "tenant",
    "management",
    "authentication",
    "dynamic_client_registration",
];
const PATHS: &[&str] = &[
    "/api/v2/users",
    "/authorize",
    "/oauth/token",
    "/oidc/register",
    "/API/v2/x",
    "/u/login",
];
const REQUEST_COUNTRIES: &[&str] = &["US", "FR", "de", "GB", "JP"];
const REQUEST_SUBDIVISIONS: &[&str] = &["US-NY", "US-CA", "fr-75c", "GB-ENG", "GB-SCT"];
/// Network ACL key ids rules name in `http_message_signature`.
const KEY_IDS: &[&str] = &["key_a", "key_b", "proxy-1"];
/// Key ids a request may carry as verified: the rules' and one no rule names.
const REQUEST_KEY_IDS: &[&str] = &["key_a", "key_b", "proxy-1", "key_other"];

const REQUEST_HOSTS: &[&str] = &[
    "a.example.com",
    "example.com",
    "A.EXAMPLE.COM.",
    "b.example.com",
    "x.b.example.com",
    "c.example",
];

/// Arbitrary bytes as up to 8 rules (any action, scope, priority 1 to 5, active or not,
/// `match`/`not_match` over every signal, `match_all`, managed lists in `auth0_managed`, key ids
/// in `http_message_signature`), the
/// content of the managed lists (unconfigured, empty, or a few entries) and up to 6 requests:
/// [`CompiledPolicy`] (what the edge and the server run) must decide each request exactly as
/// the plain [`reference`] evaluator does, with the same deciding rule, redirect target and
/// monitoring rules.
///
/// Values come mostly from small pools (so that rules and requests meet), with addresses,
/// ASNs and user agents also taken from the input.
pub fn evaluator(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok((records, lists, requests)) = decode(&mut u) else {
        return;
    };
    let limits = Limits::default();
    let rules = RuleSet::from_json(&Value::Array(records), 9, &limits)
        .unwrap_or_else(|e| panic!("the decoder built an invalid rule set: {e}"));
    let index = Arc::new(ManagedIndex::build(&lists));
    let policy = CompiledPolicy::compile_with_lists(&rules, &limits, &index)
        .unwrap_or_else(|e| panic!("a valid rule set does not compile: {e}"));
    for input in &requests {
        let Ok(request) = input.to_request() else {
            continue;
        };
        let expected = reference::evaluate_with_lists(&rules, &lists, &request);
        let decision = policy.evaluate(&request);
        assert_eq!(decision.version(), 9);
        assert_eq!(
            policy.outcome(&decision),
            expected,
            "compiled and reference disagree on {input:?} under {rules:#?}"
        );
    }
}

type Decoded = (Vec<Value>, ManagedLists, Vec<RequestInput>);

fn decode(u: &mut Unstructured<'_>) -> Result<Decoded> {
    let rule_count = u.int_in_range(0..=8)?;
    let mut records = Vec::with_capacity(rule_count);
    for index in 0..rule_count {
        records.push(record(u, index)?);
    }
    let mut lists = ManagedLists::new();
    for name in ManagedListName::ALL {
        match u.int_in_range(0..=3)? {
            0 => {}
            1 => lists.set(name, Some(Arc::new(ManagedList::empty()))),
            _ => {
                let entries = subset(u, LIST_ENTRIES, 4)?;
                let list =
                    ManagedList::from_lines(&entries.join("\n"), 100).expect("valid list entries");
                lists.set(name, Some(Arc::new(list)));
            }
        }
    }
    let request_count = u.int_in_range(1..=6)?;
    let mut requests = Vec::with_capacity(request_count);
    for _ in 0..request_count {
        requests.push(request(u)?);
    }
    Ok((records, lists, requests))
}

/// A stored record around a spec's JSON (`id`, timestamps), as rule files and the store hold.
pub(crate) fn record_json(spec: &Value, index: u128) -> Value {
    let mut record = spec.clone();
    record["id"] = json!(AclId::from_random(index).as_str());
    record["created_at"] = json!("2026-01-01T00:00:00.000Z");
    record["updated_at"] = json!("2026-01-01T00:00:00.000Z");
    record
}

fn record(u: &mut Unstructured<'_>, index: usize) -> Result<Value> {
    let high: u32 = u.arbitrary()?;
    let id_bits = (u128::from(high) << 32) | index as u128;
    let action = *u.choose(&["block", "allow", "log", "log", "redirect"])?;
    let mut act = Map::new();
    act.insert(action.into(), Value::Bool(true));
    if action == "redirect" {
        act.insert(
            "redirect_uri".into(),
            format!("https://example.com/r/{index}").into(),
        );
    }
    let mut rule = Map::new();
    rule.insert("action".into(), Value::Object(act));
    rule.insert("scope".into(), (*u.choose(SCOPES)?).into());
    if u.ratio(1, 6)? {
        rule.insert("match_all".into(), Value::Bool(true));
    } else {
        let mut matching = criteria(u)?;
        let mut not_matching = if u.ratio(2, 5)? {
            criteria(u)?
        } else {
            Map::new()
        };
        if matching.contains_key("auth0_managed") {
            // A list is named in match or in not_match, not both.
            not_matching.remove("auth0_managed");
        }
        if matching.is_empty() && not_matching.is_empty() {
            matching.insert("asns".into(), json!([1]));
        }
        if !matching.is_empty() {
            rule.insert("match".into(), Value::Object(matching));
        }
        if !not_matching.is_empty() {
            rule.insert("not_match".into(), Value::Object(not_matching));
        }
    }
    let spec = json!({
        "description": "fuzz",
        "active": u.ratio(7, 8)?,
        "priority": u.int_in_range(1..=5u8)?,
        "rule": Value::Object(rule),
    });
    Ok(record_json(&spec, id_bits))
}

/// Up to `most` distinct items of `pool`, at least one.
fn subset(
    u: &mut Unstructured<'_>,
    pool: &[&'static str],
    most: usize,
) -> Result<Vec<&'static str>> {
    let count = u.int_in_range(1..=most.min(pool.len()))?;
    let mut out: Vec<&'static str> = Vec::with_capacity(count);
    for _ in 0..count {
        let item = *u.choose(pool)?;
        if !out.contains(&item) {
            out.push(item);
        }
    }
    Ok(out)
}

fn strings(items: Vec<String>) -> Value {
    let mut unique: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !unique.contains(&item) {
            unique.push(item);
        }
    }
    Value::Array(unique.into_iter().map(Value::from).collect())
}

fn pooled(u: &mut Unstructured<'_>, pool: &[&'static str], most: usize) -> Result<Value> {
    Ok(strings(
        subset(u, pool, most)?
            .into_iter()
            .map(str::to_owned)
            .collect(),
    ))
}

/// A CIDR or address of the input near the pools' networks.
fn decoded_v4(u: &mut Unstructured<'_>) -> Result<String> {
    let [a, b, c, d]: [u8; 4] = u.arbitrary()?;
    let first = *u.choose(&[10u8, 192, 198, a])?;
    let prefix = u.int_in_range(0..=32u8)?;
    Ok(format!("{}/{prefix}", Ipv4Addr::new(first, b, c, d)))
}

fn decoded_v6(u: &mut Unstructured<'_>) -> Result<String> {
    let tail: u64 = u.arbitrary()?;
    let prefix = u.int_in_range(0..=128u8)?;
    let address = Ipv6Addr::from((0x2001_0db8_u128 << 96) | u128::from(tail));
    Ok(format!("{address}/{prefix}"))
}

/// A user-agent pattern or value over a small alphabet, so that wildcards meet values.
fn user_agent(u: &mut Unstructured<'_>, wildcards: bool) -> Result<String> {
    let alphabet: &[u8] = if wildcards { b"ab/*B" } else { b"ab/B" };
    let len = u.int_in_range(if wildcards { 1..=6 } else { 0..=6 })?;
    let mut text = String::with_capacity(len);
    for _ in 0..len {
        text.push(char::from(*u.choose(alphabet)?));
    }
    Ok(text)
}

fn criteria(u: &mut Unstructured<'_>) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    // One presence bit per member.
    let present: u16 = u.arbitrary()?;
    let member = |bit: u16| present & (1 << bit) != 0;
    let (v4, v6, cv4, cv6) = (member(0), member(1), member(2), member(3));
    let (asns, countries, subdivisions) = (member(4), member(5), member(6));
    let (ja3, ja4, uas, hosts, lists) = (member(7), member(8), member(9), member(10), member(11));
    let signed = member(12);
    for (key, on) in [("ipv4_cidrs", v4), ("connecting_ipv4_cidrs", cv4)] {
        if on {
            let mut items: Vec<String> = subset(u, V4, 3)?.into_iter().map(str::to_owned).collect();
            if u.ratio(1, 3)? {
                items.push(decoded_v4(u)?);
            }
            out.insert(key.into(), strings(items));
        }
    }
    for (key, on) in [("ipv6_cidrs", v6), ("connecting_ipv6_cidrs", cv6)] {
        if on {
            let mut items: Vec<String> = subset(u, V6, 3)?.into_iter().map(str::to_owned).collect();
            if u.ratio(1, 3)? {
                items.push(decoded_v6(u)?);
            }
            out.insert(key.into(), strings(items));
        }
    }
    if asns {
        let mut items = vec![*u.choose(&[1u32, 2, 64500])?];
        if u.ratio(1, 3)? {
            let asn: u32 = u.arbitrary()?;
            if !items.contains(&asn) {
                items.push(asn);
            }
        }
        out.insert("asns".into(), json!(items));
    }
    if countries {
        out.insert("geo_country_codes".into(), pooled(u, COUNTRIES, 2)?);
    }
    if subdivisions {
        out.insert("geo_subdivision_codes".into(), pooled(u, SUBDIVISIONS, 2)?);
    }
    if ja3 {
        out.insert("ja3_fingerprints".into(), pooled(u, JA3, 2)?);
    }
    if ja4 {
        out.insert("ja4_fingerprints".into(), pooled(u, JA4, 2)?);
    }
    if uas {
        let count = u.int_in_range(1..=3)?;
        let items = (0..count)
            .map(|_| user_agent(u, true))
            .collect::<Result<Vec<_>>>()?;
        out.insert("user_agents".into(), strings(items));
    }
    if hosts {
        out.insert("hostnames".into(), pooled(u, HOSTS, 2)?);
    }
    if lists {
        let names: Vec<&'static str> = ManagedListName::ALL.map(ManagedListName::as_str).to_vec();
        out.insert("auth0_managed".into(), pooled(u, &names, 2)?);
    }
    if signed {
        let ids: Vec<Value> = subset(u, KEY_IDS, 2)?
            .into_iter()
            .map(|id| json!({ "id": id }))
            .collect();
        out.insert("http_message_signature".into(), json!({ "keys": ids }));
    }
    Ok(out)
}

fn address(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=5)? {
        0 => "10.1.2.3".to_owned(),
        1 => "192.0.2.200".to_owned(),
        2 => "2001:db8:1::1".to_owned(),
        3 => "::ffff:10.1.2.3".to_owned(),
        4 => {
            let [a, b, c, d]: [u8; 4] = u.arbitrary()?;
            let first = *u.choose(&[10u8, 192, a])?;
            IpAddr::from(Ipv4Addr::new(first, b, c, d)).to_string()
        }
        _ => {
            let tail: u64 = u.arbitrary()?;
            Ipv6Addr::from((0x2001_0db8_u128 << 96) | u128::from(tail)).to_string()
        }
    })
}

fn maybe<T>(
    u: &mut Unstructured<'_>,
    make: impl FnOnce(&mut Unstructured<'_>) -> Result<T>,
) -> Result<Option<T>> {
    if u.ratio(4, 5)? {
        make(u).map(Some)
    } else {
        Ok(None)
    }
}

fn pick(u: &mut Unstructured<'_>, pool: &[&str]) -> Result<String> {
    Ok((*u.choose(pool)?).to_owned())
}

fn request(u: &mut Unstructured<'_>) -> Result<RequestInput> {
    let path = maybe(u, |u| pick(u, PATHS))?;
    let scope = if path.is_none() {
        maybe(u, |u| pick(u, SCOPES))?
    } else {
        None
    };
    Ok(RequestInput {
        scope,
        path,
        client_ip: maybe(u, address)?,
        connecting_ip: maybe(u, address)?,
        asn: maybe(u, |u| {
            Ok(match u.int_in_range(0..=3)? {
                0 => 1,
                1 => 64500,
                2 => 7,
                _ => u.arbitrary()?,
            })
        })?,
        country: maybe(u, |u| pick(u, REQUEST_COUNTRIES))?,
        subdivision: maybe(u, |u| pick(u, REQUEST_SUBDIVISIONS))?,
        ja3: maybe(u, |u| pick(u, JA3))?,
        ja4: maybe(u, |u| pick(u, JA4))?,
        user_agent: maybe(u, |u| user_agent(u, false))?,
        hostname: maybe(u, |u| pick(u, REQUEST_HOSTS))?,
        http_message_signature: maybe(u, |u| pick(u, REQUEST_KEY_IDS))?,
    })
}

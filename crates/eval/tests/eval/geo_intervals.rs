//! Geo/ASN answers compiled into address intervals against "look the address up, then evaluate
//! with those values" (the reference evaluator with the values given explicitly).

use std::net::IpAddr;
use std::sync::Arc;

use netacl_eval::synthetic::{generate, limits_for, Rng, SyntheticConfig};
use netacl_eval::{reference, CompiledPolicy, GeoAnswer, GeoIntervalsBuilder, Request};
use netacl_model::{RequestScope, RuleSet};
use serde_json::json;

use crate::support::{record, rule_set};

/// Random disjoint ranges (IPv4 and IPv6) with random answers drawn from listed and unlisted
/// values, and the plain linear oracle over them.
struct Database {
    v4: Vec<(u32, u32, GeoAnswerText)>,
    v6: Vec<(u128, u128, GeoAnswerText)>,
}

#[derive(Clone, Copy, Debug)]
struct GeoAnswerText {
    country: Option<&'static str>,
    subdivision: Option<&'static str>,
    asn: Option<u32>,
}

const COUNTRIES: [&str; 8] = ["US", "GB", "FR", "DE", "JP", "XX", "QQ", "CN"];
const SUBDIVISIONS: [&str; 6] = ["US-NY", "US-CA", "GB-ENG", "FR-75C", "JP-13", "ZZ-ZZ"];

impl Database {
    fn random(rng: &mut Rng, asns: &[u32]) -> Database {
        let answer = |rng: &mut Rng| GeoAnswerText {
            country: rng.chance(85).then(|| *rng.pick(&COUNTRIES)),
            subdivision: rng.chance(50).then(|| *rng.pick(&SUBDIVISIONS)),
            asn: rng.chance(70).then(|| {
                if rng.chance(50) && !asns.is_empty() {
                    *rng.pick(asns)
                } else {
                    1 + rng.below(400_000) as u32
                }
            }),
        };
        // Walk the space in random steps: a range, then a gap or none (adjacent ranges, some
        // with equal answers, which the builder merges).
        let mut v4 = Vec::new();
        let mut at: u64 = 0;
        while at < 1 << 32 {
            let len = 1 + rng.below(1 << 22);
            let last = (at + len - 1).min(u64::from(u32::MAX));
            if rng.chance(70) {
                let a = answer(rng);
                v4.push((at as u32, last as u32, a));
                if rng.chance(30) {
                    // The same answer again right after.
                    let next = last + 1;
                    if next < 1 << 32 {
                        let end = (next + rng.below(1 << 16)).min(u64::from(u32::MAX));
                        v4.push((next as u32, end as u32, a));
                        at = end + 1;
                        continue;
                    }
                }
            }
            at = last + 1;
        }
        let mut v6 = Vec::new();
        for _ in 0..200 {
            let first = (0x2000u128 << 112) | (u128::from(rng.next_u64()) << 48);
            let first = first & !((1u128 << 80) - 1);
            v6.push((first, first | ((1u128 << 80) - 1), answer(rng)));
        }
        v6.sort_by_key(|r| r.0);
        v6.dedup_by_key(|r| r.0);
        Database { v4, v6 }
    }

    fn answer(&self, ip: IpAddr) -> Option<GeoAnswerText> {
        match ip {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                self.v4.iter().find(|r| r.0 <= a && a <= r.1).map(|r| r.2)
            }
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => self.answer(IpAddr::V4(v4)),
                None => {
                    let a = u128::from(a);
                    self.v6.iter().find(|r| r.0 <= a && a <= r.1).map(|r| r.2)
                }
            },
        }
    }

    fn intervals(&self, policy: &CompiledPolicy) -> netacl_eval::GeoIntervals {
        let mut builder = GeoIntervalsBuilder::new(policy.geo_values());
        let packed = |a: &GeoAnswerText| {
            GeoAnswer::new(
                a.country.map(|c| [c.as_bytes()[0], c.as_bytes()[1]]),
                a.subdivision,
                a.asn,
            )
        };
        for (first, last, a) in &self.v4 {
            builder.add_v4(*first, *last, packed(a));
        }
        for (first, last, a) in &self.v6 {
            builder.add_v6(*first, *last, packed(a));
        }
        builder.build()
    }
}

fn with_answer<'a>(request: Request<'a>, answer: Option<GeoAnswerText>) -> Request<'a> {
    let mut request = request;
    request.set_asn(None);
    request.set_country(None);
    request.set_subdivision(None);
    if let Some(a) = answer {
        request.set_asn(a.asn);
        request.set_country(a.country);
        request.set_subdivision(a.subdivision);
    }
    request
}

#[test]
fn compiled_answers_equal_lookup_then_evaluate_on_a_synthetic_tenant() {
    let config = SyntheticConfig {
        rules: 2_000,
        cidrs: 5_000,
        requests: 4_000,
        seed: 0x6765_6f31,
    };
    let synthetic = generate(&config);
    let rules = RuleSet::from_json(&synthetic.records, 3, &limits_for(&config)).unwrap();
    let policy = CompiledPolicy::compile(&rules).unwrap();
    let asns: Vec<u32> = synthetic.requests.iter().filter_map(|r| r.asn).collect();
    let mut rng = Rng::new(77);
    let database = Database::random(&mut rng, &asns);
    let intervals = Arc::new(database.intervals(&policy));
    assert!(intervals.stats().ranges > 100, "{:?}", intervals.stats());
    let enriched = policy.clone().with_geo(intervals);
    let mut decided = 0;
    for input in &synthetic.requests {
        let request = input.to_request().unwrap();
        // The request as the edge builds it: an address, no geo value.
        let bare = with_answer(request, None);
        let expected_answer = bare.client_ip().and_then(|ip| database.answer(ip));
        let explicit = with_answer(request, expected_answer);
        let expected = reference::evaluate(&rules, &explicit);
        let compiled = enriched.outcome(&enriched.evaluate(&bare));
        assert_eq!(compiled, expected, "{input:?} answer {expected_answer:?}");
        // The same policy without intervals, given the looked-up values, agrees too.
        assert_eq!(policy.outcome(&policy.evaluate(&explicit)), expected);
        decided += usize::from(expected.rule_id.is_some());
    }
    assert!(decided > 200, "only {decided} requests decided by a rule");
}

/// A policy with geo rules in `match` and `not_match`.
fn geo_rules() -> RuleSet {
    rule_set(
        vec![
            record(
                "a",
                1,
                true,
                json!({"action": {"block": true}, "scope": "tenant",
                       "match": {"geo_country_codes": ["FR"]}}),
            ),
            record(
                "b",
                2,
                true,
                json!({"action": {"redirect": true, "redirect_uri": "https://example.com/"},
                       "scope": "tenant", "not_match": {"asns": [64500]}}),
            ),
        ],
        1,
    )
}

#[test]
fn an_empty_database_makes_every_geo_value_missing() {
    let policy = CompiledPolicy::compile(&geo_rules()).unwrap();
    let empty = GeoIntervalsBuilder::new(policy.geo_values()).build();
    assert_eq!(empty.stats().ranges, 0);
    let enriched = policy.with_geo(Arc::new(empty));
    let request =
        Request::new(RequestScope::Authentication).with_client_ip("192.0.2.1".parse().unwrap());
    // `match` on a missing country fails; `not_match` on a missing ASN holds.
    let outcome = enriched.outcome(&enriched.evaluate(&request));
    assert_eq!(
        outcome.rule_id.as_deref(),
        Some(crate::support::id("b").as_str())
    );
}

#[test]
fn explicit_values_win_over_compiled_ones_all_three_together() {
    let policy = CompiledPolicy::compile(&geo_rules()).unwrap();
    let mut builder = GeoIntervalsBuilder::new(policy.geo_values());
    builder.add_v4(0, u32::MAX, GeoAnswer::new(Some(*b"FR"), None, Some(64500)));
    let enriched = policy.with_geo(Arc::new(builder.build()));
    let from = Request::new(RequestScope::Authentication)
        .with_client_ip("::ffff:192.0.2.1".parse().unwrap());
    let rule = |r: &Request<'_>| enriched.outcome(&enriched.evaluate(r)).rule_id;
    // Compiled: FR and AS64500: rule a.
    assert_eq!(rule(&from), Some(crate::support::id("a")));
    // The request carries an ASN only: its country is then missing, not the compiled FR, and
    // its ASN is not 64500: rule b.
    assert_eq!(rule(&from.with_asn(1)), Some(crate::support::id("b")));
    // Country given: US; the compiled ASN is not used (missing): rule b.
    assert_eq!(
        rule(&from.with_country("us")),
        Some(crate::support::id("b"))
    );
    // No client address: nothing compiled applies.
    let anonymous = Request::new(RequestScope::Authentication);
    assert_eq!(rule(&anonymous), Some(crate::support::id("b")));
}

//! Signed-proxy rules: the cost of verifying an RFC 9421 signature (HMAC-SHA256), and of a
//! decision with verification against a decision without it (the same rules, the signal given).
use aws_lc_rs::hmac;
use base64::Engine as _;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use http::{HeaderMap, HeaderValue};
use std::sync::Arc;

use http::Method;
use netacl_edge::httpsig::{signature_base, verify, SignedRequest, SigningKeys};
use netacl_edge::{AclVerdict, ClientAddrResolver, ConnectionInfo, Enforcer, TrafficSample};
use netacl_eval::{CompiledPolicy, Engine, ManagedIndex, Request};
use netacl_model::{Limits, RequestScope, RuleSet};
use serde_json::json;
use sfv::{Dictionary, ListEntry, Parser};

const NOW: i64 = 1_764_000_000;
const KEY: [u8; 32] = [0x42; 32];

fn signed_headers() -> HeaderMap {
    signed_headers_at(NOW)
}

fn signed_headers_at(now: i64) -> HeaderMap {
    let member = format!(
        "(\"@method\" \"@authority\" \"@path\" \"@query\");created={};expires={};keyid=\"nak_proxy\"",
        now - 10,
        now + 290
    );
    let dictionary: Dictionary = Parser::new(&format!("sig={member}"))
        .parse_dictionary()
        .expect("dictionary");
    let Some((_, ListEntry::InnerList(covered))) = dictionary.into_iter().next() else {
        panic!("inner list")
    };
    let mut headers = HeaderMap::new();
    headers.insert("host", HeaderValue::from_static("login.example.com"));
    let request = request(&headers);
    let base = signature_base(&request, &covered).expect("base");
    let mac = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &KEY), base.as_bytes());
    let mac = base64::engine::general_purpose::STANDARD.encode(mac.as_ref());
    headers.insert(
        "signature-input",
        HeaderValue::from_str(&format!("sig={member}")).expect("v"),
    );
    headers.insert(
        "signature",
        HeaderValue::from_str(&format!("sig=:{mac}:")).expect("v"),
    );
    headers
}

fn request(headers: &HeaderMap) -> SignedRequest<'_> {
    SignedRequest {
        method: "GET",
        scheme: "https",
        authority: "login.example.com",
        path: "/authorize",
        query: Some("client_id=abc&response_type=code"),
        headers,
    }
}

fn policy() -> CompiledPolicy {
    CompiledPolicy::compile(&rules(true)).expect("compiles")
}

/// The 50 network rules, with or without the signed-proxy rule.
fn rules(signed_proxy: bool) -> RuleSet {
    let mut rules = vec![json!({
        "id": "acl_BockUnsigned1111111111", "description": "only the proxy", "active": true,
        "priority": 90,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "not_match": {"http_message_signature": {"keys": [{"id": "nak_proxy"}]}}}
    })];
    for i in 0..50u32 {
        rules.push(json!({
            "id": netacl_model::AclId::from_random(u128::from(i) + 1).as_str(),
            "description": "a network", "active": true, "priority": 1 + i % 80,
            "rule": {"action": {"block": true}, "scope": "tenant",
                     "match": {"ipv4_cidrs": [format!("10.{i}.0.0/16")]}}
        }));
    }
    if !signed_proxy {
        rules.remove(0);
    }
    RuleSet::from_json(&serde_json::Value::Array(rules), 1, &Limits::default()).expect("rules")
}

/// An edge's enforcer holding `rules` and the key (attached to the policy, as the rule sources
/// install them).
fn enforcer(rules: &RuleSet) -> Enforcer {
    let enforcer = Enforcer::new(Arc::new(Engine::new()), ClientAddrResolver::default());
    let keys = Arc::new(SigningKeys::new([("nak_proxy", &KEY[..])]));
    enforcer
        .apply_rules_with_keys(rules, &ManagedIndex::empty(), Some(keys))
        .expect("installs");
    enforcer
}

fn bench(c: &mut Criterion) {
    let keys = SigningKeys::new([("nak_proxy", &KEY[..])]);
    let headers = signed_headers();
    assert_eq!(verify(&keys, &request(&headers), NOW), Ok("nak_proxy"));
    let policy = policy();
    let mut group = c.benchmark_group("httpsig");
    group.bench_function("verify", |b| {
        b.iter(|| verify(black_box(&keys), black_box(&request(&headers)), NOW))
    });
    group.bench_function("decide_with_verification", |b| {
        b.iter(|| {
            let signed = request(&headers);
            let key = verify(&keys, black_box(&signed), NOW).ok();
            let mut req = Request::new(RequestScope::Authentication)
                .with_client_ip("192.0.2.1".parse().expect("ip"));
            req.set_message_signature(key);
            policy.evaluate(black_box(&req))
        })
    });
    group.bench_function("decide_signal_given", |b| {
        b.iter(|| {
            let req = Request::new(RequestScope::Authentication)
                .with_client_ip("192.0.2.1".parse().expect("ip"))
                .with_message_signature("nak_proxy");
            policy.evaluate(black_box(&req))
        })
    });
    // The edge's whole per-request path (client address, path → scope, hostname, the
    // signature when a live rule names it, the decision, the counters), at the current time.
    let now_headers = signed_headers_at(now());
    let uri: http::Uri = "/authorize?client_id=abc&response_type=code"
        .parse()
        .expect("uri");
    let conn = ConnectionInfo::new("192.0.2.1:50000".parse().expect("peer"));
    let signed_rules = enforcer(&rules(true));
    let decision = signed_rules.decide_request(Some(&conn), &Method::GET, &uri, &now_headers);
    assert_eq!(decision.verdict, AclVerdict::None, "verified: not blocked");
    let unsigned = signed_rules.decide_request(Some(&conn), &Method::GET, &uri, &HeaderMap::new());
    assert_eq!(unsigned.verdict, AclVerdict::Block, "unsigned: blocked");
    group.bench_function("edge_decide_request_verified", |b| {
        b.iter(|| {
            signed_rules.decide_request(
                Some(&conn),
                &Method::GET,
                black_box(&uri),
                black_box(&now_headers),
            )
        })
    });
    let plain_rules = enforcer(&rules(false));
    group.bench_function("edge_decide_request_no_signature_rule", |b| {
        b.iter(|| {
            plain_rules.decide_request(
                Some(&conn),
                &Method::GET,
                black_box(&uri),
                black_box(&now_headers),
            )
        })
    });
    // The same with the traffic sample of the impact preview: one request in 16 (the default)
    // and every request (its worst case) copied into the ring.
    for every in [16, 1] {
        let sampled = Enforcer::new(Arc::new(Engine::new()), ClientAddrResolver::default())
            .with_sample(Arc::new(TrafficSample::new(10_000, every)));
        sampled.apply_rules(&rules(false)).expect("installs");
        group.bench_function(
            format!("edge_decide_request_no_signature_rule_sampled_1_in_{every}"),
            |b| {
                b.iter(|| {
                    sampled.decide_request(
                        Some(&conn),
                        &Method::GET,
                        black_box(&uri),
                        black_box(&now_headers),
                    )
                })
            },
        );
    }
    group.finish();
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .expect("clock")
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Signed-proxy rules: the cost of verifying an RFC 9421 signature (HMAC-SHA256), and of a
//! decision with verification against a decision without it (the same rules, the signal given).
use aws_lc_rs::hmac;
use base64::Engine;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use http::{HeaderMap, HeaderValue};
use netacl_edge::httpsig::{signature_base, verify, SignedRequest, SigningKeys};
use netacl_eval::{CompiledPolicy, Request};
use netacl_model::{Limits, RequestScope, RuleSet};
use serde_json::json;
use sfv::{Dictionary, ListEntry, Parser};

const NOW: i64 = 1_764_000_000;
const KEY: [u8; 32] = [0x42; 32];

fn signed_headers() -> HeaderMap {
    let member = format!(
        "(\"@method\" \"@authority\" \"@path\" \"@query\");created={};expires={};keyid=\"nak_proxy\"",
        NOW - 10,
        NOW + 290
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
    let rules =
        RuleSet::from_json(&serde_json::Value::Array(rules), 1, &Limits::default()).expect("rules");
    CompiledPolicy::compile(&rules).expect("compiles")
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
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! The door's reading of requests and its answers, without sockets (the real proxies drive it
//! in `crates/cli/tests/cli/proxy_doors.rs`).
use std::sync::Arc;

use http::{HeaderMap, Method, StatusCode, Uri};
use netacl_edge::{AclVerdict, ClientAddrResolver, Enforcer, ForwardedHeader, TrustedProxies};
use serde_json::{json, Value};

use super::*;

const BLOCK: &str = "acl_6dL8L5Vqc1TxxXRuLhzD7c";
const REDIRECT: &str = "acl_7eM9M6Wrd2UyyYSvMizE8d";
const LOG: &str = "acl_8fN3N7Xse3VzzZTwNjaF9e";
const BLOCK_HOST: &str = "acl_9gP1P8Ytf4WaaAUxQkbG2f";
const BLOCK_JA4: &str = "acl_2hP2P9Zug5XbbBVyPmcH1g";
const JA4: &str = "t13d1516h2_8daaf6152771_b186095e22b6";

fn record(id: &str, priority: u64, action: Value, criteria: Value) -> Value {
    json!({
        "id": id, "description": "t", "active": true, "priority": priority,
        "rule": {"action": action, "scope": "tenant", "match": criteria},
        "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
    })
}

/// Blocks 203.0.113.3, the host blocked.example and the JA4 [`JA4`]; redirects 203.0.113.4;
/// logs 203.0.113.5. The proxy is 10.0.0.1.
fn enforcer() -> Enforcer {
    let trusted = TrustedProxies::parse(["10.0.0.1"]).unwrap();
    let enforcer = Enforcer::new(
        Arc::new(netacl_eval::Engine::new()),
        ClientAddrResolver::new(trusted, ForwardedHeader::XForwardedFor),
    );
    let records = json!([
        record(
            BLOCK,
            1,
            json!({"block": true}),
            json!({"ipv4_cidrs": ["203.0.113.3/32"]})
        ),
        record(
            BLOCK_HOST,
            4,
            json!({"block": true}),
            json!({"hostnames": ["blocked.example"]})
        ),
        record(
            BLOCK_JA4,
            5,
            json!({"block": true}),
            json!({"ja4_fingerprints": [JA4]})
        ),
        record(
            REDIRECT,
            2,
            json!({"redirect": true, "redirect_uri": "https://example.com/go"}),
            json!({"ipv4_cidrs": ["203.0.113.4/32"]})
        ),
        record(
            LOG,
            3,
            json!({"log": true}),
            json!({"ipv4_cidrs": ["203.0.113.5/32"]})
        ),
    ]);
    let rules =
        netacl_model::RuleSet::from_json(&records, 1, &netacl_model::Limits::default()).unwrap();
    enforcer.apply_rules(&rules).unwrap();
    enforcer
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    map
}

const PROXY: &str = "10.0.0.1:40000";
const STRANGER: &str = "198.51.100.9:40000";

fn options() -> FactsOptions {
    FactsOptions {
        ja4_header: Some(http::HeaderName::from_static("x-ja4")),
        ..FactsOptions::default()
    }
}

type Answer = http::Response<http_body_util::Full<bytes::Bytes>>;

fn door() -> Door {
    Door {
        enforcer: Arc::new(enforcer()),
        facts: options(),
        counters: Arc::new(crate::DoorCounters::new(DOOR)),
    }
}

/// What `door` answers a request from `peer` with `pairs` as its headers.
fn ask(door: &Door, peer: &str, pairs: &[(&str, &str)]) -> Answer {
    let mut request = http::Request::new(());
    *request.uri_mut() = Uri::from_static("/_netacl");
    *request.headers_mut() = headers(pairs);
    door.answer(peer.parse().unwrap(), request.into_parts().0)
}

fn header<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    answer.headers().get(name).and_then(|v| v.to_str().ok())
}

/// What nginx sends for a client.
fn nginx(client: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-forwarded-method", "GET".to_owned()),
        ("x-forwarded-uri", "/login?next=/".to_owned()),
        ("x-forwarded-host", "app.example".to_owned()),
        ("x-forwarded-for", client.to_owned()),
    ]
}

fn pairs<'a>(owned: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    owned.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

#[test]
fn a_trusted_proxys_client_is_judged_and_a_strangers_claim_is_not() {
    let door = door();
    let blocked = nginx("203.0.113.3");
    let answer = ask(&door, PROXY, &pairs(&blocked));
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&answer, "x-netacl-decision"), Some("block"));
    assert_eq!(header(&answer, "x-netacl-rule"), Some(BLOCK));
    // The same claim from a peer that is not a trusted proxy: its own address is judged.
    let answer = ask(&door, STRANGER, &pairs(&blocked));
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(header(&answer, "x-netacl-decision"), Some("none"));
    assert_eq!(header(&answer, "x-netacl-rule"), None);
    // A blocked client cannot pose as another behind the proxy's own entry.
    let answer = ask(&door, PROXY, &pairs(&nginx("203.0.113.9, 203.0.113.3")));
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        door.counters
            .count(crate::DoorAnswer::Decided(AclVerdict::Block)),
        2
    );
}

#[test]
fn redirects_are_302_or_the_401_nginx_asks_for() {
    let door = door();
    let mut asked = nginx("203.0.113.4");
    let answer = ask(&door, PROXY, &pairs(&asked));
    assert_eq!(answer.status(), StatusCode::FOUND);
    assert_eq!(header(&answer, "location"), Some("https://example.com/go"));
    assert_eq!(header(&answer, "x-netacl-rule"), Some(REDIRECT));
    asked.push(("x-netacl-redirect-status", "401".to_owned()));
    let answer = ask(&door, PROXY, &pairs(&asked));
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(header(&answer, "location"), Some("https://example.com/go"));
}

#[test]
fn log_rules_are_named_and_let_the_request_pass() {
    let door = door();
    let answer = ask(&door, PROXY, &pairs(&nginx("203.0.113.5")));
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(header(&answer, "x-netacl-monitored"), Some(LOG));
    let stats = door.enforcer.metrics().rule_stats();
    let logged = stats.iter().find(|s| s.rule_id.as_str() == LOG).unwrap();
    assert_eq!(logged.matched, 1);
}

#[test]
fn the_host_asked_about_decides_not_the_doors_own() {
    let door = door();
    let mut asked = nginx("203.0.113.9");
    asked.push(("host", "127.0.0.1:9000".to_owned()));
    asked[2].1 = "Blocked.Example:443".to_owned();
    assert_eq!(
        ask(&door, PROXY, &pairs(&asked)).status(),
        StatusCode::FORBIDDEN
    );
    // Without X-Forwarded-Host, the Host header is the host asked about.
    let answer = ask(
        &door,
        PROXY,
        &[
            ("host", "blocked.example"),
            ("x-forwarded-for", "203.0.113.9"),
        ],
    );
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
}

#[test]
fn fingerprints_are_read_from_the_configured_header_of_a_trusted_proxy_only() {
    let door = door();
    let mut asked = nginx("203.0.113.9");
    asked.push(("x-ja4", JA4.to_owned()));
    assert_eq!(
        ask(&door, PROXY, &pairs(&asked)).status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        ask(&door, STRANGER, &pairs(&asked)).status(),
        StatusCode::OK
    );
    // A header name that is not configured is not read.
    let mut other = nginx("203.0.113.9");
    other.push(("x-ja3", "e7d705a3286e19ea42f587b344ee6865".to_owned()));
    assert_eq!(ask(&door, PROXY, &pairs(&other)).status(), StatusCode::OK);
}

#[test]
fn malformed_requests_get_400_never_an_allow() {
    let door = door();
    let cases: [&[(&str, &str)]; 8] = [
        &[("host", "a.example"), ("host", "b.example")],
        &[("x-forwarded-uri", "/a"), ("x-forwarded-uri", "/b")],
        &[
            ("x-forwarded-uri", "/a"),
            ("x-original-uri", "/b"),
            ("x-original-uri", "/c"),
        ],
        &[("x-forwarded-uri", "not a target")],
        &[("x-forwarded-uri", "*")],
        &[("x-forwarded-host", "user@a.example")],
        &[("x-forwarded-method", "GET POST")],
        &[("x-forwarded-for", "203.0.113.9"), ("x-ja4", "not a ja4!")],
    ];
    for case in cases {
        let answer = ask(&door, PROXY, case);
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{case:?}");
        assert_eq!(header(&answer, "x-netacl-decision"), None, "{case:?}");
    }
    assert_eq!(door.counters.count(crate::DoorAnswer::BadRequest), 8);
}

#[test]
fn facts_fall_back_to_the_original_headers_then_the_request() {
    let facts = read_facts(
        &Method::POST,
        &Uri::from_static("/own?q"),
        &headers(&[
            ("x-original-method", "DELETE"),
            ("x-original-uri", "http://app.example/x?y"),
        ]),
        &FactsOptions::default(),
        true,
    )
    .unwrap();
    assert_eq!(facts.method, Method::DELETE);
    assert_eq!(facts.uri, "/x?y");
    let facts = read_facts(
        &Method::POST,
        &Uri::from_static("/own?q"),
        &HeaderMap::new(),
        &FactsOptions::default(),
        true,
    )
    .unwrap();
    assert_eq!(facts.method, Method::POST);
    assert_eq!(facts.uri, "/own?q");
    assert!(facts.host.is_none());
}

#[test]
fn an_absolute_target_with_an_empty_path_is_the_root() {
    // The fuzz target found `http://app#example/…`: http keeps the path before the fragment
    // empty, and the facts' target had no path at all (a URI rules could not match as a path).
    for (given, read) in [
        ("http://app#example/a%2Fb?q", "/"),
        ("http://app.example?x=1", "/?x=1"),
        ("https://app.example?x=1#f", "/?x=1"),
        ("http://app.example/a%2Fb?q#f", "/a%2Fb?q"),
        ("http://app.example", "/"),
    ] {
        let facts = read_facts(
            &Method::GET,
            &Uri::from_static("/own"),
            &headers(&[("x-original-uri", given)]),
            &FactsOptions::default(),
            true,
        )
        .unwrap_or_else(|error| panic!("{given}: {error}"));
        assert_eq!(facts.uri, read, "{given}");
        assert_eq!(facts.uri.path().chars().next(), Some('/'), "{given}");
    }
}

#[test]
fn the_scheme_is_a_trusted_proxys_x_forwarded_proto() {
    let read = |pairs: &[(&str, &str)], trusted: bool| {
        read_facts(
            &Method::GET,
            &Uri::from_static("/_netacl"),
            &headers(pairs),
            &FactsOptions::default(),
            trusted,
        )
        .map(|f| f.scheme)
    };
    assert_eq!(
        read(&[("x-forwarded-proto", "https")], true),
        Ok(Some("https"))
    );
    assert_eq!(
        read(&[("x-forwarded-proto", "HTTP")], true),
        Ok(Some("http"))
    );
    assert_eq!(read(&[("x-forwarded-proto", "https")], false), Ok(None));
    assert_eq!(read(&[("x-forwarded-proto", "wss")], true), Ok(None));
    assert_eq!(read(&[], true), Ok(None));
    assert_eq!(
        read(
            &[
                ("x-forwarded-proto", "https"),
                ("x-forwarded-proto", "http")
            ],
            true
        ),
        Err(FactsError::Repeated("x-forwarded-proto"))
    );
}

/// A signature covering `@scheme` (RFC 9421) is verified with the scheme the trusted proxy
/// reports; a stranger's `X-Forwarded-Proto` is not believed.
#[test]
fn a_signature_over_the_scheme_uses_the_proxys_x_forwarded_proto() {
    use crate::signing_fixture::{enforcer, Signed, MATERIAL};
    let door = Door {
        enforcer: Arc::new(enforcer(&["10.0.0.1"])),
        facts: FactsOptions::default(),
        counters: Arc::new(crate::DoorCounters::new(DOOR)),
    };
    let (input, signature) = Signed {
        material: &MATERIAL,
        method: "GET",
        authority: "app.example",
        path: "/login",
        scheme: Some("https"),
    }
    .fields();
    let asked = |peer: &str, proto: Option<&str>| {
        let mut sent = nginx("203.0.113.9");
        sent.push(("signature-input", input.clone()));
        sent.push(("signature", signature.clone()));
        if let Some(proto) = proto {
            sent.push(("x-forwarded-proto", proto.to_owned()));
        }
        ask(&door, peer, &pairs(&sent)).status()
    };
    assert_eq!(asked(PROXY, Some("https")), StatusCode::OK);
    assert_eq!(asked(PROXY, Some("http")), StatusCode::FORBIDDEN);
    assert_eq!(asked(PROXY, None), StatusCode::FORBIDDEN);
    assert_eq!(asked(STRANGER, Some("https")), StatusCode::FORBIDDEN);
}

//! `Enforcer::decide` allocates nothing for the common request: no decision, or a decision by
//! one rule (block, allow, redirect), with no monitoring-mode rule matching, the path already
//! normal, the client address from a trusted proxy's header, geo and ASN from the intervals
//! compiled from the databases into the policy (multi-tenant: from the table of every tenant).
//!
//! Its own test binary: `allocation-counter` replaces the global allocator of the binary that
//! links it (counting per thread), which no other test should run under.
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;

use allocation_counter::measure;
use netacl_edge::geo::GeoEnricher;
use netacl_edge::{
    AclVerdict, ClientAddrResolver, ConnectionInfo, Enforcer, ForwardedHeader, TrustedProxies,
};
use netacl_eval::Engine;
use netacl_model::{AclId, Limits, RuleSet};
use serde_json::{json, Value};

fn record(n: u128, priority: u64, action: Value, scope: &str, criteria: Value) -> Value {
    let mut rule = json!({"action": action, "scope": scope});
    if let Value::Object(c) = criteria {
        for (k, v) in c {
            rule[k] = v;
        }
    }
    json!({
        "id": AclId::from_random(n).to_string(), "description": "r", "active": true,
        "priority": priority, "rule": rule,
        "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
    })
}

fn mmdb(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/mmdb")
        .join(name)
}

fn enforcer(header: ForwardedHeader) -> Enforcer {
    let rules = RuleSet::from_json(
        &json!([
            record(
                1,
                2,
                json!({"block": true}),
                "management",
                json!({"match": {"ipv4_cidrs": ["192.0.2.0/24"]}})
            ),
            record(
                2,
                1,
                json!({"allow": true}),
                "tenant",
                json!({"match": {"user_agents": ["trusted-monitor/*"]}})
            ),
            record(
                3,
                3,
                json!({"redirect": true, "redirect_uri": "https://example.com/denied"}),
                "authentication",
                json!({"match": {"ipv4_cidrs": ["198.51.100.0/24"]}})
            ),
            record(
                4,
                4,
                json!({"log": true}),
                "tenant",
                json!({"match": {"user_agents": ["curl/*"]}})
            ),
            record(
                5,
                5,
                json!({"block": true}),
                "tenant",
                json!({"match": {"geo_country_codes": ["US"]}, "not_match": {"asns": [64500]}})
            ),
        ]),
        1,
        &Limits::default(),
    )
    .expect("valid rules");
    let geo = GeoEnricher::open(
        Some(&mmdb("netacl-test-city.mmdb")),
        Some(&mmdb("netacl-test-asn.mmdb")),
    )
    .expect("fixture databases");
    let resolver =
        ClientAddrResolver::new(TrustedProxies::parse(["10.0.0.0/8"]).expect("cidr"), header);
    let enforcer = Enforcer::new(Arc::new(Engine::new()), resolver).with_geo(Arc::new(geo));
    enforcer.apply_rules(&rules).expect("compiles");
    // The enriched path: geo and ASN come from intervals compiled into the policy, not from
    // the databases.
    assert!(enforcer.engine().policy().geo().is_some());
    enforcer
}

struct Case {
    name: &'static str,
    path: &'static str,
    client: &'static str,
    user_agent: &'static str,
    verdict: AclVerdict,
}

const CASES: &[Case] = &[
    Case {
        name: "no decision",
        path: "/authorize",
        client: "203.0.113.9",
        user_agent: "Mozilla/5.0 (X11; Linux x86_64)",
        verdict: AclVerdict::None,
    },
    Case {
        name: "block",
        path: "/api/v2/users",
        client: "192.0.2.7",
        user_agent: "Mozilla/5.0 (X11; Linux x86_64)",
        verdict: AclVerdict::Block,
    },
    Case {
        name: "allow",
        path: "/api/v2/users",
        client: "192.0.2.7",
        user_agent: "trusted-monitor/2.1",
        verdict: AclVerdict::Allow,
    },
    Case {
        name: "redirect",
        path: "/login",
        client: "198.51.100.20",
        user_agent: "Mozilla/5.0 (X11; Linux x86_64)",
        verdict: AclVerdict::Redirect,
    },
    Case {
        name: "block by geo",
        path: "/authorize",
        client: "198.51.101.1",
        user_agent: "Mozilla/5.0 (X11; Linux x86_64)",
        verdict: AclVerdict::Block,
    },
];

/// Allocations of one decision (after a first one, which may fill per-thread memos and the
/// geo cache).
fn allocations(
    enforcer: &Enforcer,
    conn: &ConnectionInfo,
    headers: &http::HeaderMap,
    path: &str,
) -> (u64, AclVerdict) {
    let first = enforcer.decide(Some(conn), path, None, headers);
    let verdict = first.verdict;
    eprintln!(
        "{path} {:?} {:?} {:?}",
        first.verdict, first.rule_id, first.client_ip
    );
    let info = measure(|| {
        let decision = enforcer.decide(Some(conn), black_box(path), None, black_box(headers));
        black_box(&decision);
    });
    (info.count_total, verdict)
}

fn headers(header: ForwardedHeader, client: &str, user_agent: &str) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    h.insert("host", "login.example.com".parse().expect("host"));
    h.insert("user-agent", user_agent.parse().expect("ua"));
    match header {
        ForwardedHeader::XForwardedFor => {
            h.insert(
                "x-forwarded-for",
                format!("{client}, 10.1.1.1").parse().expect("xff"),
            );
        }
        _ => {
            h.insert(
                "forwarded",
                format!("for={client};proto=https, for=10.1.1.1")
                    .parse()
                    .expect("fwd"),
            );
        }
    }
    h
}

#[test]
fn the_common_request_is_decided_without_allocating() {
    let peer: SocketAddr = "10.0.0.2:40000".parse().expect("peer");
    let conn = ConnectionInfo::new(peer);
    let mut counts = Vec::new();
    for header in [ForwardedHeader::XForwardedFor, ForwardedHeader::Forwarded] {
        let enforcer = enforcer(header);
        for case in CASES {
            let h = headers(header, case.client, case.user_agent);
            let (n, verdict) = allocations(&enforcer, &conn, &h, case.path);
            assert_eq!(verdict, case.verdict, "{}", case.name);
            counts.push((format!("{header:?} {}", case.name), n));
        }
        // Not the common request (counted, reported, not asserted): a log rule matching, and a
        // path that is not normal.
        let h = headers(header, "203.0.113.9", "curl/8.5.0");
        let (n, _) = allocations(&enforcer, &conn, &h, "/authorize");
        eprintln!("{header:?} monitored: {n} allocations");
        assert_eq!(n, 1, "the monitored list, nothing else");
        let h = headers(header, "203.0.113.9", "Mozilla/5.0");
        let (n, _) = allocations(&enforcer, &conn, &h, "/x/../authorize");
        eprintln!("{header:?} path not normal: {n} allocations");
    }
    for (name, n) in &counts {
        eprintln!("{name}: {n} allocations");
    }
    assert!(counts.iter().all(|(_, n)| *n == 0), "{counts:?}");
}

/// With a traffic sample taking every request (the worst case: one in 16 by default), the
/// common request still allocates nothing: the signals are copied into a preallocated slot,
/// the geo values looked up for the sample without allocating.
#[test]
fn sampling_a_request_allocates_nothing() {
    use netacl_edge::TrafficSample;
    let peer: SocketAddr = "10.0.0.2:40000".parse().expect("peer");
    let conn = ConnectionInfo::new(peer);
    let sample = Arc::new(TrafficSample::new(64, 1));
    let enforcer = enforcer(ForwardedHeader::XForwardedFor).with_sample(Arc::clone(&sample));
    let mut counts = Vec::new();
    for case in CASES {
        let h = headers(ForwardedHeader::XForwardedFor, case.client, case.user_agent);
        let (n, verdict) = allocations(&enforcer, &conn, &h, case.path);
        assert_eq!(verdict, case.verdict, "{}", case.name);
        counts.push((case.name, n));
    }
    assert!(counts.iter().all(|(_, n)| *n == 0), "{counts:?}");
    // Two decisions per case, every one sampled, with the values the rules were decided on.
    assert_eq!(sample.sampled(), 2 * CASES.len() as u64);
    let kept = sample.requests();
    assert_eq!(kept.len(), 2 * CASES.len());
    let newest = &kept[0];
    assert_eq!(newest.client_ip.as_deref(), Some("198.51.101.1"));
    assert_eq!(newest.connecting_ip.as_deref(), Some("10.0.0.2"));
    assert_eq!(newest.country.as_deref(), Some("US"), "{newest:?}");
    assert_eq!(newest.hostname.as_deref(), Some("login.example.com"));
    assert_eq!(newest.scope.as_deref(), Some("authentication"));
}

/// Multi-tenant mode: selecting the tenant by host (any case, a port, a trailing dot), over
/// plain HTTP and over TLS with SNI, then deciding with its policy, counting the decision in
/// the tenant's own per-rule table and copying every request into the shared traffic sample
/// under the tenant's key, allocates nothing either; a host of no tenant (421) neither. Geo and
/// ASN come from the table of every tenant, read without a database walk. The counts and the
/// samples then show each tenant its own requests only.
#[test]
fn the_multi_tenant_path_is_decided_without_allocating() {
    use netacl_edge::{TenantChange, TenantRouter, TlsInfo, TrafficSample};
    let router = Arc::new(TenantRouter::with_counted_tenants(["login"]));
    let block_docs = RuleSet::from_json(
        &json!([record(
            9,
            1,
            json!({"block": true}),
            "tenant",
            json!({"match": {"ipv4_cidrs": ["203.0.113.0/24"]}})
        )]),
        1,
        &Limits::default(),
    )
    .expect("valid rules");
    let geo_rules = RuleSet::from_json(
        &json!([record(
            5,
            5,
            json!({"block": true}),
            "tenant",
            json!({"match": {"geo_country_codes": ["US"]}, "not_match": {"asns": [64500]}})
        )]),
        1,
        &Limits::default(),
    )
    .expect("valid rules");
    let mut changes = vec![
        TenantChange::put("docs", ["docs.example.com"], block_docs),
        TenantChange::put("geo", ["geo.example.com"], geo_rules),
    ];
    // Many other tenants, so that the table is not trivially small.
    for i in 0..1_000 {
        changes.push(TenantChange::put(
            &format!("t{i}"),
            [format!("t{i}.example.net")],
            RuleSet {
                version: 1,
                acls: vec![],
            },
        ));
    }
    let report = router.apply(changes);
    assert!(report.failed.is_empty());
    let report = router.apply(vec![TenantChange::put(
        "login",
        ["login.example.com"],
        RuleSet::from_json(
            &json!([
                record(
                    1,
                    2,
                    json!({"block": true}),
                    "management",
                    json!({"match": {"ipv4_cidrs": ["192.0.2.0/24"]}})
                ),
                record(
                    3,
                    3,
                    json!({"redirect": true, "redirect_uri": "https://example.com/denied"}),
                    "authentication",
                    json!({"match": {"ipv4_cidrs": ["198.51.100.0/24"]}})
                ),
            ]),
            1,
            &Limits::default(),
        )
        .expect("valid rules"),
    )]);
    assert!(report.failed.is_empty());
    let resolver = ClientAddrResolver::new(
        TrustedProxies::parse(["10.0.0.0/8"]).expect("cidr"),
        ForwardedHeader::XForwardedFor,
    );
    let geo = GeoEnricher::open(
        Some(&mmdb("netacl-test-city.mmdb")),
        Some(&mmdb("netacl-test-asn.mmdb")),
    )
    .expect("fixture databases");
    // Every request sampled (the worst case: one in 16 by default).
    let sample = Arc::new(TrafficSample::new(64, 1));
    let enforcer = Enforcer::new(Arc::new(Engine::new()), resolver)
        .with_geo(Arc::new(geo))
        .with_tenants(router.clone())
        .with_sample(Arc::clone(&sample));
    // The table path: the tenant's policy holds no intervals of its own.
    assert!(enforcer.geo_table().expect("a table").current().is_some());
    assert!(router
        .tenant("geo")
        .expect("tenant")
        .engine()
        .policy()
        .geo()
        .is_none());
    let peer: SocketAddr = "10.0.0.2:40000".parse().expect("peer");
    let plain = ConnectionInfo::new(peer);
    let tls = ConnectionInfo::new(peer).with_tls(TlsInfo::new(
        Some("login.example.com"),
        &"0".repeat(32),
        "t13d1516h2_8daaf6152771_b186095e22b6",
    ));
    let with_host = |host: &str, client: &str| {
        let mut h = headers(ForwardedHeader::XForwardedFor, client, "Mozilla/5.0");
        h.insert("host", host.parse().expect("host"));
        h
    };
    let cases: [(&str, &ConnectionInfo, http::HeaderMap, &str, AclVerdict); 10] = [
        (
            "block by geo (US, AS 64501)",
            &plain,
            with_host("geo.example.com", "198.51.101.1"),
            "/authorize",
            AclVerdict::Block,
        ),
        (
            "geo, not blocked (AS 64500)",
            &plain,
            with_host("geo.example.com", "198.51.100.7"),
            "/authorize",
            AclVerdict::None,
        ),
        (
            "geo, not blocked (GB, AS 64503)",
            &plain,
            with_host("geo.example.com", "203.0.113.9"),
            "/authorize",
            AclVerdict::None,
        ),
        (
            "block",
            &plain,
            with_host("login.example.com", "192.0.2.7"),
            "/api/v2/users",
            AclVerdict::Block,
        ),
        (
            "redirect, host in capitals with a port",
            &plain,
            with_host("LOGIN.Example.COM:8080", "198.51.100.20"),
            "/login",
            AclVerdict::Redirect,
        ),
        (
            "none, trailing dot",
            &plain,
            with_host("login.example.com.", "203.0.113.9"),
            "/authorize",
            AclVerdict::None,
        ),
        (
            "the other tenant's rule",
            &plain,
            with_host("docs.example.com", "203.0.113.9"),
            "/authorize",
            AclVerdict::Block,
        ),
        (
            "TLS, SNI and host agree",
            &tls,
            with_host("login.example.com", "192.0.2.7"),
            "/api/v2/users",
            AclVerdict::Block,
        ),
        (
            "unknown host",
            &plain,
            with_host("nobody.example.org", "192.0.2.7"),
            "/authorize",
            AclVerdict::Misdirected,
        ),
        (
            "TLS, host of another tenant",
            &tls,
            with_host("docs.example.com", "192.0.2.7"),
            "/authorize",
            AclVerdict::Misdirected,
        ),
    ];
    let walks = enforcer.geo().expect("geo").stats().tree_walks;
    let mut counts = Vec::new();
    for (name, conn, h, path, want) in &cases {
        let (n, verdict) = allocations(&enforcer, conn, h, path);
        assert_eq!(verdict, *want, "{name}");
        counts.push((*name, n));
    }
    for (name, n) in &counts {
        eprintln!("multi-tenant {name}: {n} allocations");
    }
    assert!(counts.iter().all(|(_, n)| *n == 0), "{counts:?}");
    assert_eq!(
        enforcer.geo().expect("geo").stats().tree_walks,
        walks,
        "no database walked per request"
    );
    assert_eq!(router.misdirected(), 4, "two cases, each decided twice");

    // Each tenant's per-rule counts: its own rules, its own requests (each case decided twice).
    let interval = std::time::Duration::from_secs(600);
    let tenant = |id: &str| router.tenant(id).expect("tenant");
    let summaries = |id: &str| {
        let mut s = tenant(id).rule_counts().take_summaries(interval);
        s.sort_by(|a, b| a.rule_id.cmp(&b.rule_id));
        s.into_iter()
            .map(|s| (s.rule_id, s.action, s.evaluated, s.matched))
            .collect::<Vec<_>>()
    };
    let id = |n: u128| AclId::from_random(n).to_string();
    // login: 4 management requests blocked by rule 1 (plain and TLS); 4 authentication
    // requests, 2 redirected by rule 3.
    let mut login = vec![
        (id(1), "block".to_owned(), 4, 4),
        (id(3), "redirect".to_owned(), 4, 2),
    ];
    login.sort();
    assert_eq!(summaries("login"), login);
    assert_eq!(summaries("docs"), [(id(9), "block".to_owned(), 2, 2)]);
    assert!(summaries("t7").is_empty());
    assert!(summaries("login").is_empty(), "reported once");

    // The sample: every decided request under its tenant's key, none of a 421.
    let of = |id: &str| sample.requests_of(tenant(id).rule_counts().sample_key());
    let login = of("login");
    assert_eq!(login.len(), 8);
    // As the requests named it (the evaluator ignores case and a trailing dot).
    assert!(
        login.iter().all(|r| r.hostname.as_deref().is_some_and(|h| h
            .trim_end_matches('.')
            .eq_ignore_ascii_case("login.example.com"))),
        "{login:?}"
    );
    let docs = of("docs");
    assert_eq!(docs.len(), 2);
    assert!(docs
        .iter()
        .all(|r| r.hostname.as_deref() == Some("docs.example.com")
            && r.client_ip.as_deref() == Some("203.0.113.9")));
    assert!(of("t7").is_empty());
    // The geo tenant's requests carry what the table says of their addresses (all three
    // values, read without a database walk, as checked above).
    let geo = of("geo");
    assert_eq!(geo.len(), 6);
    assert!(
        geo.iter()
            .any(|r| r.client_ip.as_deref() == Some("198.51.101.1")
                && r.country.as_deref() == Some("US")
                && r.asn == Some(64501)),
        "{geo:?}"
    );
    assert!(
        geo.iter()
            .filter(|r| r.client_ip.as_deref() == Some("203.0.113.9"))
            .all(|r| r.country.as_deref() == Some("GB")
                && r.subdivision.as_deref() == Some("GB-ENG")
                && r.asn == Some(64503)),
        "{geo:?}"
    );
    assert_eq!(sample.requests().len(), 16);
}

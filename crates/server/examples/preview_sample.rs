//! Measures the impact preview over an edge's traffic sample, through the API: a tenant with
//! 100 rules (CIDRs, countries, ASNs, user agents), an in-process edge source answering a
//! sample of N requests (default 100,000; issue 16's target: a preview over a 100,000-request
//! sample in at most 1 s), and `POST /_netacl/v1/network-acls/preview` without `requests`
//! proposing one new rule. Timed: the whole call (sample read and copied, the proposed rule set
//! compiled, every request replayed against both rule sets, the answer written).
//!
//! `cargo run --release -p netacl-server --example preview_sample [-- REQUESTS [ROUNDS]]`
//! (REQUESTS at most 1,000,000, ROUNDS at most 20).
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use netacl_eval::RequestInput;
use netacl_server::auth::TokenRequest;
use netacl_server::rate_limit::RateLimitConfig;
use netacl_server::{AdminService, BootstrapClient, ServerConfig};
use netacl_store::SqliteStore;
use serde_json::{json, Value};
use tower::ServiceExt;

const RULES: u64 = 100;
const COUNTRIES: [&str; 8] = ["US", "DE", "FR", "BR", "JP", "IN", "GB", "CA"];

fn rule(priority: u64) -> Value {
    let i = priority as usize;
    let (action, criteria) = match i % 4 {
        0 => (
            "block",
            json!({"ipv4_cidrs": [format!("10.{}.0.0/16", i), format!("172.16.{}.0/24", i)]}),
        ),
        1 => (
            "allow",
            json!({"geo_country_codes": [COUNTRIES[i % 8]], "asns": [64_500 + i]}),
        ),
        2 => ("log", json!({"user_agents": [format!("bot-{i}/*")]})),
        _ => ("block", json!({"asns": [65_000 + i as u32]})),
    };
    json!({
        "description": format!("rule {priority}"), "active": true, "priority": priority,
        "rule": {"action": {action: true}, "scope": "tenant", "match": criteria}
    })
}

/// A request as an edge samples it: addresses, geo values, fingerprints, user agent, host.
fn sampled(n: usize) -> RequestInput {
    RequestInput {
        scope: Some(["authentication", "management"][n % 2].to_owned()),
        client_ip: Some(format!("10.{}.{}.{}", n % 120, (n / 120) % 256, n % 251)),
        connecting_ip: Some("192.0.2.10".to_owned()),
        asn: Some(64_500 + (n % 150) as u32),
        country: Some(COUNTRIES[n % 8].to_owned()),
        ja4: Some("t13d1516h2_8daaf6152771_b186095e22b6".to_owned()),
        user_agent: Some(format!("bot-{}/1.{}", n % 110, n % 7)),
        hostname: Some("login.example.com".to_owned()),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let requests: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000)
        .clamp(1, 1_000_000);
    let rounds: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(5)
        .clamp(1, 20);
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path(), Default::default())?);
    let secret = "preview-sample-secret-0123456789abcdef";
    let bootstrap = BootstrapClient {
        client_id: Some("bench".into()),
        client_secret: Some(secret.into()),
    };
    let config = ServerConfig::new("bench.local").with_rate_limit(RateLimitConfig::disabled());
    let (service, _) = AdminService::start(store, config, bootstrap).await?;
    let token = service
        .authority()
        .issue_client_credentials(&TokenRequest::client_credentials(
            "bench",
            secret,
            "https://bench.local/api/v2/",
        ))?
        .access_token;
    let router = service.router();
    let call = |method: Method, uri: &str, body: Value| {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request");
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await.expect("infallible");
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            (
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
    for priority in 1..=RULES {
        let (status, body) = call(Method::POST, "/api/v2/network-acls", rule(priority)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let sample: Arc<Vec<RequestInput>> = Arc::new((0..requests).map(sampled).collect());
    let source = Arc::clone(&sample);
    service.set_edge_sample_source(Arc::new(move |_| Some(source.to_vec())));

    let change = json!({"changes": [{"op": "create", "network_acl": {
        "description": "proposed", "active": true, "priority": 5,
        "rule": {"action": {"block": true}, "scope": "management",
                 "match": {"geo_country_codes": ["DE", "FR"]}}}}]});
    let mut times = Vec::with_capacity(rounds);
    let mut answer = Value::Null;
    for _ in 0..rounds {
        let start = Instant::now();
        let (status, body) = call(
            Method::POST,
            "/_netacl/v1/network-acls/preview",
            change.clone(),
        )
        .await;
        times.push(start.elapsed());
        assert_eq!(status, StatusCode::OK, "{body}");
        answer = body;
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{}",
        json!({
            "rules": RULES,
            "sample_requests": requests,
            "rounds": rounds,
            "preview_ms_median": ms(times[times.len() / 2]),
            "preview_ms_worst": ms(times[times.len() - 1]),
            "changed": answer["changed"],
            "sample": answer["sample"],
        })
    );
    Ok(())
}

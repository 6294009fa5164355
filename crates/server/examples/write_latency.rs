//! Measures the write path end to end: from sending a create to the engine's changed decision,
//! with a tenant holding 100 rules and 100,000 CIDRs, durable commit included (a real SQLite
//! database in a temporary directory, WAL + synchronous=FULL).
//!
//! `cargo run --release -p netacl-server --example write_latency [-- ITERATIONS]`
//!
//! Each iteration deletes the rule at one priority (untimed), then times: POST the new rule
//! (1,000 CIDRs, one of them a probe address no other rule covers) → 201 → a dry run of the
//! probe through the API decides `block` by the new rule. Bounded: at most 1,000 iterations.
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::Router;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use netacl_server::auth::TokenRequest;
use netacl_server::rate_limit::RateLimitConfig;
use netacl_server::{AdminService, BootstrapClient, ServerConfig};
use netacl_store::SqliteStore;
use serde_json::{json, Value};
use tower::ServiceExt;

const RULES: u64 = 100;
const CIDRS_PER_RULE: u32 = 1_000;

fn rule(priority: u64, serial: u32, probe: Option<String>) -> Value {
    // 1,000 distinct /32s per rule, all under 10.0.0.0/8, distinct across serials.
    let mut cidrs: Vec<String> = (0..CIDRS_PER_RULE)
        .map(|i| {
            let n = serial * CIDRS_PER_RULE + i;
            format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
        })
        .collect();
    if let Some(probe) = probe {
        cidrs[0] = probe;
    }
    json!({
        "description": format!("rule {serial}"), "active": true, "priority": priority,
        "rule": {"action": {"block": true}, "scope": "tenant", "match": {"ipv4_cidrs": cidrs}}
    })
}

async fn call(
    router: &Router,
    token: &str,
    method: Method,
    uri: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"));
    let body = match body {
        Some(value) => {
            builder = builder.header("content-type", "application/json");
            Body::from(value.to_string())
        }
        None => Body::empty(),
    };
    let response = router
        .clone()
        .oneshot(builder.body(body).expect("request"))
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200)
        .clamp(1, 1_000);
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path(), Default::default())?);
    let secret = "write-latency-secret-0123456789abcdef";
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

    let setup = Instant::now();
    let mut ids = Vec::new();
    for priority in 1..=RULES {
        let (status, body) = call(
            &router,
            &token,
            Method::POST,
            "/api/v2/network-acls",
            Some(&rule(priority, priority as u32, None)),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        ids.push(body["id"].as_str().expect("id").to_owned());
    }
    let (_, status) = call(&router, &token, Method::GET, "/_netacl/v1/status", None).await;
    println!(
        "setup: {RULES} rules, {} entries, in {:.1?} (compile of the full set: {} µs)",
        status["policy"]["entries"],
        setup.elapsed(),
        status["policy"]["compile_micros"]
    );

    let mut to_decision = Vec::with_capacity(iterations);
    let mut create_only = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let slot = i % RULES as usize;
        let priority = slot as u64 + 1;
        let (status, _) = call(
            &router,
            &token,
            Method::DELETE,
            &format!("/api/v2/network-acls/{}", ids[slot]),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let probe = format!("100.64.{}.{}", (i >> 8) & 0xff, i & 0xff);
        let serial = RULES as u32 + 1 + i as u32;
        let body = rule(priority, serial, Some(probe.clone()));
        let dry = json!({"request": {"client_ip": probe}});

        let started = Instant::now();
        let (status, created) = call(
            &router,
            &token,
            Method::POST,
            "/api/v2/network-acls",
            Some(&body),
        )
        .await;
        let created_at = started.elapsed();
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().expect("id").to_owned();
        let mut tries = 0;
        loop {
            let (_, decided) = call(
                &router,
                &token,
                Method::POST,
                "/_netacl/v1/dry-run",
                Some(&dry),
            )
            .await;
            if decided["outcome"]["rule_id"] == json!(id) {
                break;
            }
            tries += 1;
            assert!(tries < 1_000, "the decision never changed");
        }
        to_decision.push(started.elapsed());
        create_only.push(created_at);
        ids[slot] = id;
    }
    to_decision.sort();
    create_only.sort();
    for (name, samples) in [
        ("create → 201", &create_only),
        ("create → changed decision", &to_decision),
    ] {
        println!(
            "{name}: n={} p50={:.2?} p90={:.2?} p99={:.2?} max={:.2?}",
            samples.len(),
            percentile(samples, 0.50),
            percentile(samples, 0.90),
            percentile(samples, 0.99),
            samples[samples.len() - 1]
        );
    }
    Ok(())
}

//! The latency of `Check` as Envoy sees it: one persistent HTTP/2 channel to a running
//! `netacl edge --ext-authz-listen ADDR`, the requests of a `synthetic_files` request mix sent
//! as Envoy fills `CheckRequest`, each timed from the call to the answer; prints JSON.
//!
//! ```text
//! cargo run --release -p netacl-doors --example ext_authz_latency -- \
//!     ADDR REQUESTS.jsonl [--checks 20000] [--concurrency 1]
//! ```
//!
//! `benches/proxies/run.py` runs it; the figures are in the book's "Inside your proxy"
//! performance section. A measurement, never an assertion.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::{address, Address, SocketAddress};
use envoy_types::pb::envoy::service::auth::v3::attribute_context::{HttpRequest, Peer, Request};
use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
use envoy_types::pb::envoy::service::auth::v3::{AttributeContext, CheckRequest};

fn check_of(line: &serde_json::Value) -> Option<CheckRequest> {
    let text = |k: &str| line.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let mut headers = HashMap::new();
    if let Some(ua) = text("user_agent") {
        headers.insert("user-agent".to_owned(), ua);
    }
    Some(CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(Peer {
                address: Some(Address {
                    address: Some(address::Address::SocketAddress(SocketAddress {
                        address: text("client_ip")?,
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            }),
            request: Some(Request {
                http: Some(HttpRequest {
                    method: "GET".into(),
                    path: text("path")?,
                    host: text("hostname").unwrap_or_else(|| "login.example.com".into()),
                    scheme: "http".into(),
                    headers,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    })
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(addr), Some(mix)) = (args.first(), args.get(1)) else {
        return Err(
            "usage: ext_authz_latency ADDR REQUESTS.jsonl [--checks N] [--concurrency C]".into(),
        );
    };
    let flag = |name: &str, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(args.get(i + 1).ok_or("a flag without its value")?.parse()?),
            None => Ok(default),
        }
    };
    let checks = flag("--checks", 20_000)?.max(1);
    let concurrency = flag("--concurrency", 1)?.clamp(1, 256);
    let requests: Vec<CheckRequest> = std::fs::read_to_string(mix)?
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter_map(|l| check_of(&l))
        .collect();
    if requests.is_empty() {
        return Err("no requests in the mix".into());
    }
    let client = AuthorizationClient::connect(format!("http://{addr}")).await?;
    // Warm the channel and the service.
    for request in requests.iter().cycle().take(1_000) {
        client.clone().check(request.clone()).await?;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let mut client = client.clone();
        let mine: Vec<CheckRequest> = requests
            .iter()
            .cycle()
            .skip(worker)
            .step_by(concurrency)
            .take(checks / concurrency)
            .cloned()
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::with_capacity(mine.len());
            for request in mine {
                let at = Instant::now();
                client.check(request).await?;
                took.push(at.elapsed());
            }
            Ok::<_, tonic::Status>(took)
        }));
    }
    let mut took = Vec::with_capacity(checks);
    for task in tasks {
        took.extend(task.await??);
    }
    let wall = started.elapsed();
    took.sort();
    let report = serde_json::json!({
        "checks": took.len(),
        "concurrency": concurrency,
        "checks_per_second": took.len() as f64 / wall.as_secs_f64(),
        "p50_us": percentile(&took, 0.50),
        "p90_us": percentile(&took, 0.90),
        "p99_us": percentile(&took, 0.99),
        "max_us": percentile(&took, 1.0),
    });
    println!("{report}");
    Ok(())
}

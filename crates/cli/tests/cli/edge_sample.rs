//! The edges' traffic sample and the impact preview without `requests`, through the real
//! binary: the in-process edge of `netacl serve --edge-*` (its sample read by the preview
//! directly) and a remote `netacl edge --rules-url` (its sample posted to the admin server every
//! summary interval). Loopback only; every wait is bounded.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster_support::{
    call, edge_address, free_port, http, spawn_edge, upstream, wait_for, BIN,
};
use crate::serve_support::{Server, CLIENT_ID, CLIENT_SECRET};
use serde_json::{json, Value};

const PREVIEW: &str = "/_netacl/v1/network-acls/preview";

/// A proposed rule blocking the user agents the test sends.
fn block_sampler() -> Value {
    json!({"changes": [{"op": "create", "network_acl": {
        "description": "block the sampler", "active": true, "priority": 5,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"user_agents": ["sampler/*"]}}}}]})
}

/// Sends `n` requests through the edge with user agent `sampler/1.0` (all let through).
fn send_through(edge: SocketAddr, n: usize) {
    for i in 0..n {
        let path = format!("/authorize?attempt={i}");
        let answer = http(edge, "GET", &path, &[("user-agent", "sampler/1.0")], "");
        assert_eq!(
            answer.map(|a| a.0),
            Some(200),
            "request {i} through the edge"
        );
    }
}

/// Checks a preview answer replaying the sample of one edge holding the `n` requests sent.
fn assert_sampled_preview(answer: &Value, n: u64) {
    assert_eq!(
        answer["sample"],
        json!({"edges": 1, "requests": n}),
        "{answer}"
    );
    assert_eq!(answer["requests"], n, "{answer}");
    assert_eq!(answer["changed"], n, "{answer}");
    assert_eq!(
        answer["transitions"],
        json!([{"from": {"action": "none"}, "to": {"action": "block"}, "count": n}])
    );
    let example = &answer["examples"][0]["request"];
    assert_eq!(example["user_agent"], "sampler/1.0", "{answer}");
    assert_eq!(example["client_ip"], "127.0.0.1", "{answer}");
    assert_eq!(example["connecting_ip"], "127.0.0.1", "{answer}");
    assert_eq!(example["scope"], "authentication", "{answer}");
    assert_eq!(example["hostname"], "127.0.0.1", "{answer}");
    // The signals only: no path (no query string), no other header.
    let mut members: Vec<&str> = example
        .as_object()
        .expect("request object")
        .keys()
        .map(String::as_str)
        .collect();
    members.sort_unstable();
    assert_eq!(
        members,
        [
            "client_ip",
            "connecting_ip",
            "hostname",
            "scope",
            "user_agent"
        ],
        "{answer}"
    );
}

#[test]
fn the_preview_replays_the_in_process_edges_sample() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = format!("http://{}", upstream());
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("address");
    let edge_listen = edge.to_string();
    let server = Server::start(
        data.path(),
        "127.0.0.1:0",
        "edge-sample.test",
        &[
            "--edge-upstream",
            &upstream,
            "--edge-listen",
            &edge_listen,
            "--edge-metrics-listen",
            "off",
            "--edge-sample-every",
            "1",
        ],
    );
    let token = server.token();

    // No traffic yet: no sample, a 400 that says so.
    let (status, answer) = call(server.addr, &token, "POST", PREVIEW, &block_sampler());
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["errorCode"], "no_traffic_sample", "{answer}");

    send_through(edge, 5);
    // Read at once: the in-process edge's sample is the preview's.
    let (status, answer) = call(server.addr, &token, "POST", PREVIEW, &block_sampler());
    assert_eq!(status, 200, "{answer}");
    assert_sampled_preview(&answer, 5);
}

#[test]
fn a_remote_edge_posts_its_sample_for_the_preview() {
    let data = tempfile::tempdir().expect("tempdir");
    let domain = format!("127.0.0.1:{}", free_port());
    let serve = Server::start(data.path(), &domain, &domain, &[]);
    let token = serve.token();
    let upstream = format!("http://{}", upstream());
    let rules_url = format!("http://{}", serve.addr);
    let (_edge, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(["--upstream", &upstream, "--rules-url", &rules_url])
            .args(["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET])
            .args(["--summary-interval", "1s", "--sample-every", "1"])
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let edge = edge_address(&line, "http=");
    send_through(edge, 4);
    // The edge posts its sample every summary interval (1 s here).
    let mut last = Value::Null;
    let took = wait_for(Duration::from_secs(20), Duration::from_millis(200), || {
        let (status, answer) = call(serve.addr, &token, "POST", PREVIEW, &block_sampler());
        last = answer;
        status == 200 && last["sample"]["requests"] == 4
    });
    assert!(
        took.is_some(),
        "the edge's sample reached the server: {last}"
    );
    assert_sampled_preview(&last, 4);
}

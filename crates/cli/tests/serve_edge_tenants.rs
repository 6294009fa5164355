//! `netacl serve --edge-upstream ... --edge-tenants`: the in-process edge enforces every tenant
//! the admin service serves, each request by its host's tenant. Tenants are created and deleted
//! with `netacl tenant` on the running server's data directory; the server picks them up within
//! its follow interval, the edge with it. Real binary, loopback only, every wait bounded.
mod cluster_support;
mod serve_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serve_support::{
    at_host, check_tenants_geo_rules, create_tenant, free_port, maxmind, tenant_cli, Server,
};

/// The longest the test waits for the server to pick a created or deleted tenant up (its follow
/// interval is at most 5 s).
const PICK_UP: Duration = Duration::from_secs(30);

/// Waits (bounded by [`PICK_UP`]) until `GET /` through the edge with `Host: host` answers
/// `status`; panics with the last answer otherwise.
fn wait_for_edge_status(edge: SocketAddr, host: &str, status: u16) {
    let start = Instant::now();
    loop {
        let answer = at_host(edge, host, "GET", "/", None, None);
        if answer.status == status {
            return;
        }
        assert!(
            start.elapsed() < PICK_UP,
            "host {host}: still {} {} after {PICK_UP:?}, expected {status}",
            answer.status,
            answer.text
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_in_process_edge_enforces_each_tenant_by_host_and_drops_a_deleted_one() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::upstream();
    let upstream_url = format!("http://{upstream}");
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
    let edge_listen = edge.to_string();
    let server = Server::start(
        data.path(),
        "127.0.0.1:0",
        "default.test",
        &[
            "--edge-upstream",
            upstream_url.as_str(),
            "--edge-listen",
            edge_listen.as_str(),
            "--edge-metrics-listen",
            "off",
            "--edge-tenants",
            "--edge-metrics-tenant",
            "alpha",
        ],
    );

    let (alpha_id, alpha_secret) = create_tenant(data.path(), "alpha", "alpha.test");
    create_tenant(data.path(), "beta", "beta.test");
    // Both picked up: no rule in either, so both reach the upstream.
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!(answer.text, "upstream");

    // A block rule in tenant alpha, written through alpha's host with alpha's own token.
    let token_body = serde_json::json!({
        "grant_type": "client_credentials",
        "client_id": alpha_id,
        "client_secret": alpha_secret,
        "audience": "https://alpha.test/api/v2/",
    });
    let answer = at_host(
        server.addr,
        "alpha.test",
        "POST",
        "/oauth/token",
        None,
        Some(&token_body),
    );
    assert_eq!(answer.status, 200, "{}", answer.text);
    let token = answer.json()["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned();
    let rule = cluster_support::block_rule(1, "127.0.0.1");
    let answer = at_host(
        server.addr,
        "alpha.test",
        "POST",
        "/api/v2/network-acls",
        Some(&token),
        Some(&rule),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);

    // Enforced for alpha's host as soon as the write is answered (the edge follows alpha's
    // engine), and for alpha only: beta and the default tenant's host pass.
    let answer = at_host(edge, "alpha.test", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
    assert_ne!(answer.text, "upstream");
    let answer = at_host(edge, "ALPHA.test:8080", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));
    let answer = at_host(edge, "default.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));

    // A host of no tenant: 421 with the fixed body.
    let answer = at_host(edge, "nobody.test", "GET", "/", None, None);
    assert_eq!(answer.status, 421, "{}", answer.text);
    assert_eq!(answer.text, netacl_edge::MISDIRECTED_BODY);

    // Tenant beta deleted: its host gets 421 at the edge once the server drops it; alpha's
    // rule still holds.
    tenant_cli(data.path(), &["delete", "beta"]);
    wait_for_edge_status(edge, "beta.test", 421);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!(answer.text, netacl_edge::MISDIRECTED_BODY);
    let answer = at_host(edge, "alpha.test", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
}

#[test]
fn the_in_process_edge_answers_each_tenants_geo_rules_from_the_databases() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::upstream();
    let upstream_url = format!("http://{upstream}");
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
    let edge_listen = edge.to_string();
    let (city, asn) = (
        maxmind("GeoIP2-City-Test.mmdb"),
        maxmind("GeoLite2-ASN-Test.mmdb"),
    );
    let server = Server::start(
        data.path(),
        "127.0.0.1:0",
        "default.test",
        &[
            "--edge-upstream",
            upstream_url.as_str(),
            "--edge-listen",
            edge_listen.as_str(),
            "--edge-metrics-listen",
            "off",
            "--edge-tenants",
            "--edge-trusted-proxy",
            "127.0.0.0/8",
            "--edge-geoip-city",
            city.to_str().expect("path"),
            "--edge-geoip-asn",
            asn.to_str().expect("path"),
        ],
    );
    let alpha = create_tenant(data.path(), "alpha", "alpha.test");
    let beta = create_tenant(data.path(), "beta", "beta.test");
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    check_tenants_geo_rules(server.addr, edge, &alpha, &beta);
}

//! `netacl edge --platform-url ... --operator-token-file ...`: a remote edge enforcing every
//! tenant of a `netacl serve`, through the operator's tenants watch. Two tenants created with
//! `netacl tenant create`, each host enforced with its own rules, a rule change in one reaching
//! the edge without shipping the other, a deleted tenant's host 421. Real binaries, loopback
//! only, every wait bounded.
mod cluster_support;
mod serve_support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serve_support::{
    at_host, check_tenants_geo_rules, create_tenant, maxmind, tenant_cli, Answer, Server,
};

/// The longest the test waits for a change to reach the edge (the server picks a tenant made
/// by the CLI up within its 1 s poll; the edge's long poll answers at once).
const PICK_UP: Duration = Duration::from_secs(30);

fn wait_for_edge_status(edge: SocketAddr, host: &str, status: u16) -> Duration {
    let start = Instant::now();
    loop {
        let answer = at_host(edge, host, "GET", "/", None, None);
        if answer.status == status {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < PICK_UP,
            "host {host}: still {} {} after {PICK_UP:?}, expected {status}",
            answer.status,
            answer.text
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The operator's tenants watch on the server, `since` the cursor given.
fn operator_watch(server: SocketAddr, operator: &str, query: &str) -> Answer {
    at_host(
        server,
        "any.test",
        "GET",
        &format!("/_netacl/v1/tenants/watch?{query}"),
        Some(operator),
        None,
    )
}

fn tenant_token(server: SocketAddr, host: &str, id: &str, secret: &str) -> String {
    let body = serde_json::json!({
        "grant_type": "client_credentials",
        "client_id": id,
        "client_secret": secret,
        "audience": format!("https://{host}/api/v2/"),
    });
    let answer = at_host(server, host, "POST", "/oauth/token", None, Some(&body));
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned()
}

#[test]
fn a_remote_edge_follows_every_tenant_of_the_platform() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::upstream();
    let server = Server::start(data.path(), "127.0.0.1:0", "default.test", &[]);
    let operator_file = data.path().join("operator-token");
    let operator = std::fs::read_to_string(&operator_file)
        .expect("operator token")
        .trim()
        .to_owned();

    let (alpha_id, alpha_secret) = create_tenant(data.path(), "alpha", "alpha.test");
    let (beta_id, beta_secret) = create_tenant(data.path(), "beta", "beta.test");

    let (_edge_process, line) = cluster_support::spawn_edge(
        Command::new(env!("CARGO_BIN_EXE_netacl"))
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(["--upstream", &format!("http://{upstream}")])
            .args(["--platform-url", &format!("http://{}", server.addr)])
            .arg("--operator-token-file")
            .arg(&operator_file)
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let edge = cluster_support::edge_address(&line, "http=");

    // Both tenants reach the edge (no rules: both pass); a host of no tenant is 421.
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!(answer.text, "upstream");
    let answer = at_host(edge, "nobody.test", "GET", "/", None, None);
    assert_eq!(answer.status, 421, "{}", answer.text);
    assert_eq!(answer.text, netacl_edge::MISDIRECTED_BODY);

    // Where the platform stands now, as the operator watch tells it.
    let now = operator_watch(server.addr, &operator, "timeout_ms=0");
    assert_eq!(now.status, 200, "{}", now.text);
    let cursor = now.json()["cursor"].as_str().expect("cursor").to_owned();

    // A block rule in alpha, through alpha's host with alpha's token: enforced at the edge for
    // alpha's host only.
    let alpha_token = tenant_token(server.addr, "alpha.test", &alpha_id, &alpha_secret);
    let rule = cluster_support::block_rule(1, "127.0.0.1");
    let answer = at_host(
        server.addr,
        "alpha.test",
        "POST",
        "/api/v2/network-acls",
        Some(&alpha_token),
        Some(&rule),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);
    wait_for_edge_status(edge, "alpha.test", 403);
    let answer = at_host(edge, "Alpha.Test:8080", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));
    let answer = at_host(edge, "default.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));
    // The change shipped alpha alone.
    let shipped = operator_watch(
        server.addr,
        &operator,
        &format!("since={cursor}&timeout_ms=0"),
    );
    assert_eq!(shipped.status, 200, "{}", shipped.text);
    let tenants: Vec<String> = shipped.json()["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| t["tenant"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(tenants, ["alpha"]);

    // beta's own rule blocks beta's host, and alpha's stays.
    let beta_token = tenant_token(server.addr, "beta.test", &beta_id, &beta_secret);
    let answer = at_host(
        server.addr,
        "beta.test",
        "POST",
        "/api/v2/network-acls",
        Some(&beta_token),
        Some(&cluster_support::block_rule(2, "127.0.0.0/8")),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);
    wait_for_edge_status(edge, "beta.test", 403);
    let answer = at_host(edge, "alpha.test", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
    let answer = at_host(edge, "default.test", "GET", "/", None, None);
    assert_eq!(answer.status, 200, "{}", answer.text);

    // Tenant beta deleted with the CLI: its host answers 421 at the edge; alpha unchanged.
    tenant_cli(data.path(), &["delete", "beta"]);
    wait_for_edge_status(edge, "beta.test", 421);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!(answer.text, netacl_edge::MISDIRECTED_BODY);
    let answer = at_host(edge, "alpha.test", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
    server.kill();
}

#[test]
fn a_remote_edge_answers_each_tenants_geo_rules_from_the_databases() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::upstream();
    let server = Server::start(data.path(), "127.0.0.1:0", "default.test", &[]);
    let operator_file = data.path().join("operator-token");
    let alpha = create_tenant(data.path(), "alpha", "alpha.test");
    let beta = create_tenant(data.path(), "beta", "beta.test");
    let (_edge_process, line) = cluster_support::spawn_edge(
        Command::new(env!("CARGO_BIN_EXE_netacl"))
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(["--upstream", &format!("http://{upstream}")])
            .args(["--platform-url", &format!("http://{}", server.addr)])
            .arg("--operator-token-file")
            .arg(&operator_file)
            .args(["--trusted-proxy", "127.0.0.0/8"])
            .arg("--geoip-city")
            .arg(maxmind("GeoIP2-City-Test.mmdb"))
            .arg("--geoip-asn")
            .arg(maxmind("GeoLite2-ASN-Test.mmdb"))
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let edge = cluster_support::edge_address(&line, "http=");
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    check_tenants_geo_rules(server.addr, edge, &alpha, &beta);
    server.kill();
}

#[test]
fn the_operator_token_is_never_sent_in_clear_off_loopback() {
    let data = tempfile::tempdir().expect("tempdir");
    let token_file = data.path().join("operator-token");
    std::fs::write(&token_file, "x".repeat(43)).expect("token file");
    let output = Command::new(env!("CARGO_BIN_EXE_netacl"))
        .arg("edge")
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
        .args(["--upstream", "http://127.0.0.1:9"])
        .args(["--platform-url", "http://192.0.2.10:8080"])
        .arg("--operator-token-file")
        .arg(&token_file)
        .output()
        .expect("run netacl edge");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to send the operator token in clear"),
        "{stderr}"
    );
    assert!(!stderr.contains(&"x".repeat(43)), "{stderr}");
}

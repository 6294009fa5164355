//! `netacl edge --rules-url https://...` against a real `netacl serve --tls-cert` (a test CA):
//! the admin server's certificate is verified (`--rules-ca`, or the system's roots, which do
//! not know the test CA), and a client secret is never sent to a plain-HTTP rules URL off
//! loopback unless `--allow-insecure-rules-url` says so. Loopback only; every wait is bounded.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster_support::{
    block_rule, edge_address, edge_status, http, spawn_edge, upstream, wait_for, Proc, BIN,
};
use crate::serve_support::{free_port, Server, CLIENT_ID, CLIENT_SECRET};
use crate::tls_support::{create_over_https, https_token, TestCa};

const POLL: Duration = Duration::from_millis(50);

/// `netacl serve` over HTTPS for `localhost:PORT`, and the CA that issued its certificate.
fn tls_serve(dir: &std::path::Path) -> (Server, TestCa) {
    let ca = TestCa::new(dir, "admin");
    let issued = ca.issue(dir, "admin", &["localhost"]);
    let port = free_port();
    let server = Server::start(
        &dir.join("data"),
        &format!("127.0.0.1:{port}"),
        &format!("localhost:{port}"),
        &[
            "--tls-cert",
            issued.cert.to_str().expect("utf-8"),
            "--tls-key",
            issued.key.to_str().expect("utf-8"),
        ],
    );
    (server, ca)
}

/// Creates, over HTTPS, a rule blocking loopback clients everywhere.
fn block_loopback(server: &Server, ca: &TestCa) {
    let config = ca.client_config(&[]);
    let token = https_token(server.addr, "localhost", &config, &server.domain);
    create_over_https(
        server.addr,
        "localhost",
        &config,
        &token,
        &block_rule(1, "127.0.0.0/8"),
    );
}

/// `netacl edge` following `rules_url` (with `extra`), in front of a test upstream; returns it
/// with its plain-HTTP and metrics addresses.
fn follow(rules_url: &str, extra: &[&str]) -> (Proc, SocketAddr, SocketAddr) {
    let upstream = format!("http://{}", upstream());
    let (child, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(["--upstream", &upstream, "--rules-url", rules_url])
            .args(["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stderr(Stdio::null()),
    );
    (
        child,
        edge_address(&line, "http="),
        edge_address(&line, "metrics="),
    )
}

#[test]
fn the_edge_follows_rules_over_https_trusting_the_rules_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, ca) = tls_serve(dir.path());
    let rules_url = format!("https://{}", server.domain);
    let (_edge, edge, _) = follow(&rules_url, &["--rules-ca", ca.pem.to_str().expect("utf-8")]);
    assert_eq!(edge_status(edge, "/login"), Some(200));

    block_loopback(&server, &ca);
    assert!(
        wait_for(Duration::from_secs(20), POLL, || edge_status(
            edge, "/login"
        ) == Some(403))
        .is_some(),
        "the rule written over HTTPS is enforced by the edge"
    );
}

#[test]
fn an_edge_that_does_not_trust_the_admin_certificate_gets_no_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, ca) = tls_serve(dir.path());
    // A rule the edge would enforce if it could read it.
    block_loopback(&server, &ca);

    // The system's roots do not include the test CA: every attempt fails verification (the
    // edge starts after its initial wait, with no rules), and the secret is never sent.
    let rules_url = format!("https://{}", server.domain);
    let (_edge, edge, metrics) = follow(&rules_url, &[]);
    let failing = wait_for(Duration::from_secs(20), POLL, || {
        http(metrics, "GET", "/metrics", &[], "").is_some_and(|(_, text)| {
            text.contains("netacl_edge_rule_source_errors_total ")
                && !text.contains("netacl_edge_rule_source_errors_total 0\n")
        })
    });
    assert!(
        failing.is_some(),
        "the untrusted admin server counts as a rule-source error"
    );
    assert_eq!(edge_status(edge, "/login"), Some(200));
}

#[test]
fn a_client_secret_is_not_sent_in_clear_off_loopback_unless_allowed() {
    let secret = "a-secret-that-must-not-be-printed-0123456789";
    let output = Command::new(BIN)
        .arg("edge")
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
        .args(["--upstream", "http://127.0.0.1:9"])
        .args(["--rules-url", "http://192.0.2.10:8080"])
        .args(["--client-id", "edge", "--client-secret", secret])
        .output()
        .expect("run netacl edge");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to send the client secret in clear to http://192.0.2.10:8080"),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-insecure-rules-url"), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");

    // Allowed explicitly: the edge starts (and warns).
    let (mut child, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(["--upstream", "http://127.0.0.1:9"])
            .args([
                "--rules-url",
                "http://192.0.2.10:8080",
                "--allow-insecure-rules-url",
            ])
            .args(["--client-id", "edge", "--client-secret", secret])
            .env("RUST_LOG", "warn")
            .stderr(Stdio::piped()),
    );
    assert!(line.contains("http=127.0.0.1:"), "{line}");
    let _ = child.0.kill();
    let stderr = child.0.stderr.take().map(|mut pipe| {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
        text
    });
    let stderr = stderr.unwrap_or_default();
    assert!(stderr.contains("in clear"), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");
}

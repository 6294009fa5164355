//! `netacl edge` as a process: rule files (reload, bad file keeps the old rules), `--acl off`,
//! and rules followed from a separate `netacl serve` process (and kept while it is down).
//! Loopback only; every wait is bounded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster_support::{
    edge_address, edge_status as status, free_port, http, spawn_edge, upstream, wait_for, Proc, BIN,
};
use crate::serve_support::{Server, CLIENT_ID, CLIENT_SECRET};

/// How often the tests poll while they wait.
const POLL: Duration = Duration::from_millis(50);

/// Starts `netacl edge` with `args` and returns it with its plain-HTTP and metrics addresses.
fn start_edge(args: &[&str]) -> (Proc, SocketAddr, SocketAddr) {
    let (child, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "info")
            .stderr(Stdio::null()),
    );
    (
        child,
        edge_address(&line, "http="),
        edge_address(&line, "metrics="),
    )
}

fn record(id: &str, priority: u64, action: &str, scope: &str, criteria: &str) -> String {
    format!(
        r#"{{"id":"{id}","description":"t","active":true,"priority":{priority},
            "rule":{{"action":{{"{action}":true}},"scope":"{scope}","match":{criteria}}},
            "created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z"}}"#
    )
}

const ID1: &str = "acl_6dL8L5Vqc1TxxXRuLhzD7c";
const ID2: &str = "acl_7eM9M6Wrd2UyyYSvMizE8d";

fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

#[test]
fn rule_file_is_enforced_reloaded_and_a_bad_file_keeps_the_old_rules() {
    let upstream = upstream();
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.json");
    let loopback = r#"{"ipv4_cidrs":["127.0.0.0/8"]}"#;
    write_atomically(
        &rules,
        &format!("[{}]", record(ID1, 1, "block", "management", loopback)),
    );
    let upstream_url = format!("http://{upstream}");
    let rules_arg = rules.to_str().expect("utf-8 path");
    let (_edge, addr, metrics) =
        start_edge(&["--upstream", &upstream_url, "--rules-file", rules_arg]);

    assert_eq!(status(addr, "/api/v2/users"), Some(403));
    assert_eq!(status(addr, "//%61pi/v2/users"), Some(403));
    assert_eq!(
        http(addr, "GET", "/login", &[], ""),
        Some((200, "upstream".to_owned()))
    );

    // The admin-only metrics listener.
    let (code, text) = http(metrics, "GET", "/metrics", &[], "").expect("metrics");
    assert_eq!(code, 200);
    assert!(
        text.contains("netacl_edge_requests_total{verdict=\"block\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("netacl_edge_requests_total{verdict=\"none\"} 1"),
        "{text}"
    );
    let rule_line = format!(
        "netacl_edge_rule_matched_total{{rule_id=\"{ID1}\",action=\"block\",scope=\"management\"}} 2"
    );
    assert!(text.contains(&rule_line), "{text}");
    assert_eq!(status(metrics, "/"), Some(404));

    // A new file: the tenant is blocked everywhere.
    write_atomically(
        &rules,
        &format!("[{}]", record(ID2, 2, "block", "tenant", loopback)),
    );
    assert!(
        wait_for(Duration::from_secs(20), POLL, || status(addr, "/login")
            == Some(403))
        .is_some()
    );

    // A broken file is refused; the last good rules stay in force.
    let source_errors = |n: u32| {
        move || {
            http(metrics, "GET", "/metrics", &[], "").is_some_and(|(_, text)| {
                text.contains(&format!("netacl_edge_rule_source_errors_total {n}\n"))
            })
        }
    };
    write_atomically(&rules, "[{\"id\": ");
    assert!(wait_for(Duration::from_secs(20), POLL, source_errors(1)).is_some());
    assert_eq!(status(addr, "/login"), Some(403));
    // An invalid rule (bad CIDR) too.
    write_atomically(
        &rules,
        &format!(
            "[{}]",
            record(
                ID1,
                1,
                "block",
                "tenant",
                r#"{"ipv4_cidrs":["300.0.0.0/8"]}"#
            )
        ),
    );
    assert!(wait_for(Duration::from_secs(20), POLL, source_errors(2)).is_some());
    assert_eq!(status(addr, "/login"), Some(403));

    // Fixed again: allowed.
    write_atomically(&rules, "[]");
    assert!(
        wait_for(Duration::from_secs(20), POLL, || status(addr, "/login")
            == Some(200))
        .is_some()
    );
}

#[test]
fn acl_off_passes_everything() {
    let upstream = upstream();
    let upstream_url = format!("http://{upstream}");
    let (_edge, addr, _) = start_edge(&["--upstream", &upstream_url, "--acl", "off"]);
    assert_eq!(
        http(addr, "GET", "/api/v2/users", &[], ""),
        Some((200, "upstream".to_owned()))
    );
}

#[test]
fn startup_errors_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.json");
    std::fs::write(&rules, "not json").expect("write");
    for args in [
        vec![
            "--upstream",
            "http://127.0.0.1:9",
            "--rules-file",
            rules.to_str().expect("path"),
        ],
        vec!["--upstream", "ftp://127.0.0.1:9", "--acl", "off"],
        vec!["--upstream", "http://127.0.0.1:9"],
        vec![
            "--upstream",
            "http://127.0.0.1:9",
            "--acl",
            "off",
            "--trusted-proxy",
            "10.0.0.0/33",
        ],
    ] {
        let output = Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(&args)
            .output()
            .expect("run");
        assert!(!output.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("netacl:"), "{args:?}: {stderr}");
    }
}

// ---------------------------------------------------------------------------------------------
// A separate `netacl serve`.

#[test]
fn rules_from_a_separate_serve_process_are_enforced_and_outlive_it() {
    let upstream = upstream();
    let data = tempfile::tempdir().expect("tempdir");
    let domain = format!("127.0.0.1:{}", free_port());
    let serve = Server::start(data.path(), &domain, &domain, &[]);
    let serve_addr = serve.addr;
    let token = serve.token();

    let upstream_url = format!("http://{upstream}");
    let rules_url = format!("http://{serve_addr}");
    let (_edge, edge, metrics) = start_edge(&[
        "--upstream",
        &upstream_url,
        "--rules-url",
        &rules_url,
        "--client-id",
        CLIENT_ID,
        "--client-secret",
        CLIENT_SECRET,
    ]);
    assert_eq!(status(edge, "/login"), Some(200));
    // Give the edge its first long poll (it starts with the empty policy).
    std::thread::sleep(Duration::from_millis(500));

    let body = r#"{"description":"block loopback","active":true,"priority":5,
        "rule":{"action":{"block":true},"scope":"tenant","match":{"ipv4_cidrs":["127.0.0.0/8"]}}}"#;
    let auth = format!("Bearer {token}");
    let created = http(
        serve_addr,
        "POST",
        "/api/v2/network-acls",
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        body,
    );
    assert_eq!(created.as_ref().map(|c| c.0), Some(201), "{created:?}");
    let took = wait_for(Duration::from_secs(20), POLL, || {
        status(edge, "/login") == Some(403)
    })
    .expect("the edge enforces the new rule");
    eprintln!("rule created on serve enforced by the edge after {took:?}");

    // The admin server goes away: the edge keeps enforcing the last rules.
    drop(serve);
    // Wait until the edge has noticed (a failed poll counts as a rule-source error).
    let noticed = wait_for(Duration::from_secs(30), POLL, || {
        http(metrics, "GET", "/metrics", &[], "").is_some_and(|(_, text)| {
            !text.contains("netacl_edge_rule_source_errors_total 0\n")
                && text.contains("netacl_edge_rule_source_errors_total ")
        })
    });
    assert!(noticed.is_some(), "the edge saw the admin server go away");
    assert_eq!(status(edge, "/login"), Some(403));
    assert_eq!(status(edge, "/api/v2/users"), Some(403));
}

// ---------------------------------------------------------------------------------------------
// TLS through the binary: --listen-tls with a self-signed certificate; a JA4 rule refuses the
// client before the handshake completes, a rule naming another fingerprint lets it through.

struct Pki {
    dir: tempfile::TempDir,
    cert_der: rustls::pki_types::CertificateDer<'static>,
}

fn pki() -> Pki {
    let certified =
        rcgen::generate_simple_self_signed(vec!["edge.test".to_owned()]).expect("rcgen");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("cert.pem"), certified.cert.pem()).expect("cert");
    std::fs::write(
        dir.path().join("key.pem"),
        certified.key_pair.serialize_pem(),
    )
    .expect("key");
    Pki {
        dir,
        cert_der: certified.cert.der().clone(),
    }
}

fn tls_client(pki: &Pki) -> std::sync::Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.cert_der.clone()).expect("root");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

fn server_name() -> rustls::pki_types::ServerName<'static> {
    rustls::pki_types::ServerName::try_from("edge.test").expect("name")
}

/// The JA4 of the ClientHello this client writes (from the bytes rustls produces).
fn client_ja4(config: &std::sync::Arc<rustls::ClientConfig>) -> String {
    let mut conn = rustls::ClientConnection::new(config.clone(), server_name()).expect("client");
    let mut bytes = Vec::new();
    conn.write_tls(&mut bytes).expect("hello");
    let hello = netacl_edge::fingerprint::ClientHello::parse(&bytes).expect("parse");
    netacl_edge::fingerprint::ja4(&hello)
}

/// One HTTPS GET; `Err` names the stage that failed.
fn https_get(
    addr: SocketAddr,
    config: &std::sync::Arc<rustls::ClientConfig>,
) -> Result<String, String> {
    let mut tcp =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut conn =
        rustls::ClientConnection::new(config.clone(), server_name()).map_err(|e| e.to_string())?;
    for _ in 0..100 {
        if !conn.is_handshaking() {
            break;
        }
        conn.complete_io(&mut tcp)
            .map_err(|e| format!("handshake: {e}"))?;
    }
    if conn.is_handshaking() {
        return Err("handshake: did not complete".into());
    }
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    tls.write_all(b"GET /x HTTP/1.1\r\nhost: edge.test\r\nconnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response);
    Ok(String::from_utf8_lossy(&response).into_owned())
}

fn start_tls_edge(upstream: SocketAddr, rules: &Path, pki: &Pki) -> (Proc, SocketAddr) {
    let (child, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--upstream", &format!("http://{upstream}")])
            .args(["--listen-tls", "127.0.0.1:0", "--metrics-listen", "off"])
            .args([
                "--tls-cert",
                pki.dir.path().join("cert.pem").to_str().expect("path"),
            ])
            .args([
                "--tls-key",
                pki.dir.path().join("key.pem").to_str().expect("path"),
            ])
            .args(["--rules-file", rules.to_str().expect("path")])
            .stderr(Stdio::null()),
    );
    (child, edge_address(&line, "tls="))
}

#[test]
fn tls_clients_are_refused_by_ja4_before_the_handshake() {
    let upstream = upstream();
    let pki = pki();
    let config = tls_client(&pki);
    let ja4 = client_ja4(&config);
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.json");

    let ours = format!(r#"{{"ja4_fingerprints":["{ja4}"]}}"#);
    write_atomically(
        &rules,
        &format!("[{}]", record(ID1, 1, "block", "tenant", &ours)),
    );
    let (edge, addr) = start_tls_edge(upstream, &rules, &pki);
    let err = https_get(addr, &config).expect_err("refused");
    assert!(err.starts_with("handshake"), "{err}");
    drop(edge);

    let other = r#"{"ja4_fingerprints":["t13d1516h2_8daaf6152771_b186095e22b6"]}"#;
    write_atomically(
        &rules,
        &format!("[{}]", record(ID1, 1, "block", "tenant", other)),
    );
    let (_edge, addr) = start_tls_edge(upstream, &rules, &pki);
    let response = https_get(addr, &config).expect("allowed");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("upstream"), "{response}");
}

// ---------------------------------------------------------------------------------------------
// Managed lists at the edge: from the server the edge follows, and from its own files.

const TOR_BLOCK: &str = r#"{"description":"block Tor","active":true,"priority":5,
    "rule":{"action":{"block":true},"scope":"tenant","match":{"auth0_managed":["auth0.tor"]}}}"#;

fn put_list(serve: SocketAddr, token: &str, name: &str, items: &str) -> (u16, String) {
    let auth = format!("Bearer {token}");
    http(
        serve,
        "PUT",
        &format!("/_netacl/v1/managed-lists/{name}"),
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        &format!(r#"{{"items": {items}}}"#),
    )
    .expect("PUT answered")
}

#[test]
fn managed_lists_written_on_the_server_change_decisions_at_a_remote_edge() {
    let upstream = upstream();
    let data = tempfile::tempdir().expect("tempdir");
    let domain = format!("127.0.0.1:{}", free_port());
    let serve = Server::start(data.path(), &domain, &domain, &[]);
    let token = serve.token();
    let auth = format!("Bearer {token}");
    let created = http(
        serve.addr,
        "POST",
        "/api/v2/network-acls",
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        TOR_BLOCK,
    );
    assert_eq!(created.as_ref().map(|c| c.0), Some(201), "{created:?}");
    let upstream_url = format!("http://{upstream}");
    let rules_url = format!("http://{}", serve.addr);
    let (_edge, edge, _) = start_edge(&[
        "--upstream",
        &upstream_url,
        "--rules-url",
        &rules_url,
        "--client-id",
        CLIENT_ID,
        "--client-secret",
        CLIENT_SECRET,
    ]);
    // The rule names a list with no content yet: it matches nothing.
    assert_eq!(status(edge, "/login"), Some(200));
    let (code, body) = put_list(serve.addr, &token, "auth0.tor", r#"["127.0.0.0/8"]"#);
    assert_eq!(code, 200, "{body}");
    let took = wait_for(Duration::from_secs(20), POLL, || {
        status(edge, "/login") == Some(403)
    })
    .expect("the list reaches the edge");
    eprintln!("list written on serve enforced by the edge after {took:?}");
    let (code, body) = put_list(serve.addr, &token, "auth0.tor", r#"["10.0.0.0/8"]"#);
    assert_eq!(code, 200, "{body}");
    assert!(
        wait_for(Duration::from_secs(20), POLL, || status(edge, "/login")
            == Some(200))
        .is_some(),
        "the changed list reaches the edge"
    );
}

#[test]
fn an_edges_own_list_file_is_enforced_reloaded_and_a_bad_file_keeps_the_last() {
    let upstream = upstream();
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.json");
    write_atomically(
        &rules,
        &format!(
            "[{}]",
            record(
                ID1,
                1,
                "block",
                "tenant",
                r#"{"auth0_managed":["auth0.tor"]}"#
            )
        ),
    );
    let tor = dir.path().join("tor.txt");
    write_atomically(&tor, "# Tor exits\n127.0.0.1 # loopback, for the test\n");
    let upstream_url = format!("http://{upstream}");
    let list_flag = format!("auth0.tor={}", tor.display());
    let (_edge, addr, _) = start_edge(&[
        "--upstream",
        &upstream_url,
        "--rules-file",
        rules.to_str().expect("utf-8 path"),
        "--managed-list",
        &list_flag,
    ]);
    assert_eq!(status(addr, "/login"), Some(403), "listed from the start");

    write_atomically(&tor, "10.9.9.9\n");
    let took = wait_for(Duration::from_secs(20), POLL, || {
        status(addr, "/login") == Some(200)
    })
    .expect("the reloaded list is in force");
    assert!(
        took < Duration::from_secs(5),
        "reloaded within 5 s ({took:?})"
    );

    // A malformed file is refused; the last good list stays in force.
    write_atomically(&tor, "127.0.0.1\n127.0.0.300\n");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(status(addr, "/login"), Some(200));
    write_atomically(&tor, "127.0.0.0/8\n");
    assert!(
        wait_for(Duration::from_secs(20), POLL, || status(addr, "/login")
            == Some(403))
        .is_some(),
        "a good file after a bad one is in force"
    );

    // At start, a malformed file is an error naming the line.
    write_atomically(&tor, "127.0.0.1\n\nnot-an-entry\n");
    let output = Command::new(BIN)
        .args(["edge", "--listen", "127.0.0.1:0", "--metrics-listen", "off"])
        .args(["--upstream", &upstream_url, "--rules-file"])
        .arg(&rules)
        .args(["--managed-list", &list_flag])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("auth0.tor") && stderr.contains("line 3"),
        "{stderr}"
    );
}

//! `netacl serve --tls-cert --tls-key`: the admin API over HTTPS on the real binary (a test CA,
//! rustls clients): HTTP/1.1 and HTTP/2 by ALPN, certificates replaced by rename served without
//! a restart, a broken pair refused with the old one kept, and plain HTTP only on loopback
//! unless `--allow-insecure-http`. Loopback only; every wait is bounded.

use std::fs::File;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster_support::upstream;
use crate::serve_support::{request, token_at, wait_with_output, Server};
use crate::tls_support::{create_over_https, https_request, https_token, served_leaf, TestCa};

const DOMAIN: &str = "localhost";

/// Starts `netacl serve` over HTTPS with `cert`/`key` and `extra`, logging to `log`.
fn serve_tls(
    data: &std::path::Path,
    cert: &std::path::Path,
    key: &std::path::Path,
    extra: &[&str],
    log: Option<&std::path::Path>,
) -> Server {
    let cert = cert.to_str().expect("utf-8 path");
    let key = key.to_str().expect("utf-8 path");
    let mut args = vec!["--tls-cert", cert, "--tls-key", key];
    args.extend_from_slice(extra);
    let stderr = match log {
        Some(path) => Stdio::from(File::create(path).expect("log file")),
        None => Stdio::inherit(),
    };
    Server::start_logging(data, "127.0.0.1:0", DOMAIN, &args, stderr)
}

/// Polls `f` every 50 ms for at most 20 s.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// `GET /api/v2/network-acls` over HTTP/2 (ALPN `h2` only): the status and the version the
/// response came back with.
fn list_over_h2(addr: SocketAddr, ca: &TestCa, token: &str) -> (u16, http::Version) {
    let config = ca.client_config(&[b"h2"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from(DOMAIN).expect("name");
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .expect("handshake");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tls),
        )
        .await
        .expect("HTTP/2 handshake");
        tokio::spawn(connection);
        let request = http::Request::get(format!("https://{DOMAIN}/api/v2/network-acls"))
            .header("authorization", format!("Bearer {token}"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let response = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
            .await
            .expect("in time")
            .expect("response");
        (response.status().as_u16(), response.version())
    })
}

#[test]
fn the_admin_api_is_served_over_https_with_http2_and_http1_by_alpn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(dir.path(), "main");
    let issued = ca.issue(dir.path(), "admin", &["localhost", "127.0.0.1"]);
    let server = serve_tls(
        &dir.path().join("data"),
        &issued.cert,
        &issued.key,
        &[],
        None,
    );

    // HTTP/1.1 (ALPN http/1.1): a token, then the list.
    let h1 = ca.client_config(&[b"http/1.1"]);
    let token = https_token(server.addr, DOMAIN, &h1, DOMAIN);
    let list = https_request(
        server.addr,
        DOMAIN,
        &h1,
        "GET",
        "/api/v2/network-acls",
        Some(&token),
        None,
    )
    .expect("list over HTTP/1.1");
    assert_eq!(list.status, 200, "{}", list.text);
    assert!(list.json().is_array(), "{}", list.text);
    // The certificate served is the one given.
    assert_eq!(
        served_leaf(server.addr, DOMAIN, &h1).expect("leaf"),
        issued.der
    );

    // HTTP/2 (ALPN h2).
    assert_eq!(
        list_over_h2(server.addr, &ca, &token),
        (200, http::Version::HTTP_2)
    );

    // A client that trusts another CA does not get through the handshake.
    let stranger = TestCa::new(dir.path(), "stranger").client_config(&[]);
    assert!(served_leaf(server.addr, DOMAIN, &stranger).is_err());
    // Plain HTTP on the HTTPS port gets no HTTP answer.
    assert!(request(server.addr, "GET", "/api/v2/network-acls", None, None).is_err());
}

#[test]
fn certificates_replaced_by_rename_are_served_and_a_broken_pair_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(dir.path(), "main");
    let live = ca.issue(dir.path(), "live", &["localhost"]);
    let log = dir.path().join("serve.log");
    let server = serve_tls(
        &dir.path().join("data"),
        &live.cert,
        &live.key,
        &["--tls-reload-interval", "100ms"],
        Some(&log),
    );
    let config = ca.client_config(&[]);
    let leaf = || served_leaf(server.addr, DOMAIN, &config).expect("handshake");
    assert_eq!(leaf(), live.der);

    // A renewal, as certificate tools write it: new files renamed over the old ones.
    let renewed = ca.issue(dir.path(), "renewed", &["localhost"]);
    std::fs::rename(&renewed.key, &live.key).expect("rename key");
    std::fs::rename(&renewed.cert, &live.cert).expect("rename certificate");
    assert!(
        eventually(|| leaf() == renewed.der),
        "the renewed certificate is not served"
    );

    // A broken pair: a certificate whose key is not the one in place. Refused and logged; the
    // renewed pair stays in service and the API keeps answering.
    let broken = ca.issue(dir.path(), "broken", &["localhost"]);
    std::fs::rename(&broken.cert, &live.cert).expect("rename certificate");
    let refused = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("new TLS certificate refused")
    };
    assert!(eventually(refused), "the broken pair was not reported");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.contains("does not belong to the certificate"),
        "{logged}"
    );
    assert_eq!(leaf(), renewed.der);
    let token = https_token(server.addr, DOMAIN, &config, DOMAIN);
    assert!(!token.is_empty());

    // Its key arrives: the pair is whole and served.
    std::fs::rename(&broken.key, &live.key).expect("rename key");
    assert!(
        eventually(|| leaf() == broken.der),
        "the repaired pair is not served"
    );
}

/// Runs `netacl serve ARGS` expecting it to refuse to start; returns its standard error.
fn refused_start(data: &std::path::Path, args: &[&str]) -> String {
    let child = Command::new(env!("CARGO_BIN_EXE_netacl"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn netacl serve");
    let (status, _, stderr) = wait_with_output(child, Duration::from_secs(60), "netacl serve");
    assert!(!status.success(), "netacl serve {args:?} started");
    stderr
}

/// [`refused_start`] with `--listen 127.0.0.1:0 --tls-cert CERT --tls-key KEY EXTRA...`.
fn refused_tls_start(data: &std::path::Path, cert: &str, key: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert,
        "--tls-key",
        key,
    ];
    args.extend_from_slice(extra);
    refused_start(data, &args)
}

#[test]
fn plain_http_is_served_on_loopback_only_unless_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(dir.path(), "main");
    let issued = ca.issue(dir.path(), "admin", &["localhost"]);
    let cert = issued.cert.to_str().expect("utf-8");
    let key = issued.key.to_str().expect("utf-8");

    // Plain HTTP on every interface: refused, with the way out named.
    let err = refused_start(&dir.path().join("a"), &["--listen", "0.0.0.0:0"]);
    assert!(
        err.contains("refusing to serve the admin API over plain HTTP on 0.0.0.0:"),
        "{err}"
    );
    assert!(
        err.contains("--tls-cert") && err.contains("--allow-insecure-http"),
        "{err}"
    );
    // An extra plain listener next to HTTPS: the same rule.
    let err = refused_tls_start(
        &dir.path().join("b"),
        cert,
        key,
        &["--listen-http", "0.0.0.0:0"],
    );
    assert!(
        err.contains("(--listen-http), which is not a loopback address"),
        "{err}"
    );
    // --listen-http without TLS makes no sense.
    let err = refused_start(&dir.path().join("c"), &["--listen-http", "127.0.0.1:0"]);
    assert!(err.contains("--tls-cert"), "{err}");

    // Allowed explicitly: it starts (and says so on stderr).
    let log = dir.path().join("insecure.log");
    let insecure = Server::start_logging(
        &dir.path().join("d"),
        "0.0.0.0:0",
        DOMAIN,
        &["--allow-insecure-http"],
        Stdio::from(File::create(&log).expect("log")),
    );
    let loopback = SocketAddr::from(([127, 0, 0, 1], insecure.addr.port()));
    assert_eq!(
        request(loopback, "GET", "/.well-known/jwks.json", None, None)
            .expect("jwks")
            .status,
        200
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("--allow-insecure-http"), "{logged}");
    insecure.kill();

    // HTTPS on --listen plus plain HTTP on loopback: both serve the same API.
    let server = serve_tls(
        &dir.path().join("e"),
        &issued.cert,
        &issued.key,
        &["--listen-http", "127.0.0.1:0"],
        None,
    );
    let line = server
        .output
        .recv_timeout(Duration::from_secs(10))
        .expect("the plain listener's line");
    let plain: SocketAddr = line
        .strip_prefix("netacl admin API also listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("unexpected line {line:?}"));
    let token = token_at(plain, DOMAIN);
    let config = ca.client_config(&[]);
    let list = https_request(
        server.addr,
        DOMAIN,
        &config,
        "GET",
        "/api/v2/network-acls",
        Some(&token),
        None,
    )
    .expect("list over HTTPS");
    assert_eq!(list.status, 200, "{}", list.text);
}

#[test]
fn a_certificate_that_does_not_load_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(dir.path(), "main");
    let one = ca.issue(dir.path(), "one", &["localhost"]);
    let two = ca.issue(dir.path(), "two", &["localhost"]);
    let cert = one.cert.to_str().expect("utf-8");
    let wrong_key = two.key.to_str().expect("utf-8");
    let err = refused_tls_start(&dir.path().join("a"), cert, wrong_key, &[]);
    assert!(
        err.contains("two.key: the private key does not belong to the certificate in"),
        "{err}"
    );
    // The key's contents are never quoted.
    let key_pem = std::fs::read_to_string(&two.key).expect("key");
    let body_line = key_pem.lines().nth(1).expect("a base64 line");
    assert!(!err.contains(body_line), "{err}");

    let missing = dir.path().join("missing.key");
    let err = refused_tls_start(
        &dir.path().join("b"),
        cert,
        missing.to_str().expect("utf-8"),
        &[],
    );
    assert!(err.contains("missing.key: cannot read"), "{err}");
    // One without the other.
    let err = refused_start(&dir.path().join("c"), &["--tls-cert", cert]);
    assert!(err.contains("--tls-key"), "{err}");
}

#[test]
fn the_in_process_edge_runs_beside_the_https_admin_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(dir.path(), "main");
    let admin = ca.issue(dir.path(), "admin", &["localhost"]);
    let edge_cert = ca.issue(dir.path(), "edge", &["edge.test"]);
    let upstream = format!("http://{}", upstream());
    let edge_plain = SocketAddr::from(([127, 0, 0, 1], crate::serve_support::free_port()));
    let edge_tls = SocketAddr::from(([127, 0, 0, 1], crate::serve_support::free_port()));
    let (plain_arg, tls_arg) = (edge_plain.to_string(), edge_tls.to_string());
    let server = serve_tls(
        &dir.path().join("data"),
        &admin.cert,
        &admin.key,
        &[
            "--edge-upstream",
            &upstream,
            "--edge-listen",
            &plain_arg,
            "--edge-listen-tls",
            &tls_arg,
            "--edge-tls-cert",
            edge_cert.cert.to_str().expect("utf-8"),
            "--edge-tls-key",
            edge_cert.key.to_str().expect("utf-8"),
            "--edge-metrics-listen",
            "off",
        ],
        None,
    );
    let config = ca.client_config(&[]);
    // The edge's TLS listener serves its own certificate, the admin API its own.
    assert_eq!(
        served_leaf(edge_tls, "edge.test", &config).expect("edge leaf"),
        edge_cert.der
    );
    assert_eq!(
        served_leaf(server.addr, DOMAIN, &config).expect("admin leaf"),
        admin.der
    );
    let through = https_request(edge_tls, "edge.test", &config, "GET", "/login", None, None)
        .expect("through the edge");
    assert_eq!((through.status, through.text.as_str()), (200, "upstream"));

    // A rule written over HTTPS is enforced at once on both edge listeners.
    let token = https_token(server.addr, DOMAIN, &config, DOMAIN);
    let rule = serde_json::json!({"description": "no sign-in from here", "active": true,
        "priority": 1, "rule": {"action": {"block": true}, "scope": "authentication",
        "match": {"ipv4_cidrs": ["127.0.0.0/8"]}}});
    create_over_https(server.addr, DOMAIN, &config, &token, &rule);
    let blocked = https_request(edge_tls, "edge.test", &config, "GET", "/login", None, None)
        .expect("through the edge");
    assert_eq!(blocked.status, 403, "{}", blocked.text);
    assert_eq!(
        request(edge_plain, "GET", "/login", None, None)
            .expect("plain")
            .status,
        403
    );
}

//! Many tenants behind one running edge, through real sockets: each tenant's certificate chosen
//! by SNI in real TLS handshakes, each tenant's rules deciding its requests, 421 for hosts of
//! no tenant and for SNI and `Host` naming different tenants, a removed tenant's host 421 at
//! once.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use netacl_edge::{
    start_edge, EdgeConfig, RunningEdge, SniCertificates, TenantChange, TenantRouter,
    MISDIRECTED_BODY,
};
use netacl_eval::Engine;
use netacl_model::{AclId, Limits, RuleSet};
use netacl_tls::test_ca::TestCa;
use netacl_tls::TlsFiles;
use rustls::pki_types::ServerName;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A plain upstream answering 200 `upstream` to everything.
async fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|_req: Request<Incoming>| async {
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                        bytes::Bytes::from_static(b"upstream"),
                    )))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

/// Tenant `b` blocks loopback clients on authentication paths (a `tenant`-scope rule would
/// refuse their TLS connections before the handshake); tenant `a` has no rule.
fn block_loopback() -> RuleSet {
    RuleSet::from_json(
        &json!([{
            "id": AclId::from_random(7).to_string(), "description": "b", "active": true,
            "priority": 1,
            "rule": {"action": {"block": true}, "scope": "authentication",
                     "match": {"ipv4_cidrs": ["127.0.0.0/8"]}},
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
        }]),
        1,
        &Limits::default(),
    )
    .expect("rules")
}

fn empty() -> RuleSet {
    RuleSet {
        version: 1,
        acls: vec![],
    }
}

struct Platform {
    _dir: tempfile::TempDir,
    ca: TestCa,
    router: Arc<TenantRouter>,
    edge: RunningEdge,
    cert_a: Vec<u8>,
    cert_b: Vec<u8>,
    default_cert: Option<Vec<u8>>,
}

/// Tenants `a` (a.test, www.a.test: no rules), `b` (b.test: blocks loopback) and `c` (c.test:
/// no rules, no certificate of its own); certificates for a.test and b.test in the directory,
/// and a default pair when `default` is set.
async fn platform(default: bool) -> Platform {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).expect("mkdir");
    let ca = TestCa::new("tenants");
    let a = ca.issue(&["a.test", "www.a.test"]);
    a.write(&certs, "a.test");
    let b = ca.issue(&["b.test"]);
    b.write(&certs, "b.test");
    let default_pair = default.then(|| ca.issue(&["default.test", "nobody.test", "127.0.0.1"]));
    let default_files = default_pair
        .as_ref()
        .map(|p| p.write(dir.path(), "default"));

    let router = Arc::new(TenantRouter::with_counted_tenants(["b"]));
    let report = router.apply(vec![
        TenantChange::put("a", ["a.test", "www.a.test"], empty()),
        TenantChange::put("b", ["B.test"], block_loopback()),
        TenantChange::put("c", ["c.test"], empty()),
    ]);
    assert!(report.failed.is_empty(), "{:?}", report.failed);

    let upstream = upstream().await;
    let mut config = EdgeConfig::new(format!("http://{upstream}").parse().expect("uri"));
    config.listen = Some("127.0.0.1:0".parse().expect("addr"));
    config.listen_tls = Some("127.0.0.1:0".parse().expect("addr"));
    config.tls_cert_dir = Some(certs);
    config.tls = default_files;
    config.tenants = Some(router.clone());
    config.metrics_listen = Some("127.0.0.1:0".parse().expect("addr"));
    let edge = start_edge(Arc::new(Engine::new()), config)
        .await
        .expect("edge starts");
    Platform {
        _dir: dir,
        ca,
        router,
        edge,
        cert_a: a.der,
        cert_b: b.der,
        default_cert: default_pair.map(|p| p.der),
    }
}

/// Status line's code and body of one HTTP/1.x exchange over `stream`.
async fn exchange<S>(mut stream: S, host: Option<&str>) -> (u16, String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let request = match host {
        Some(host) => {
            format!("GET /authorize HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        }
        None => "GET /authorize HTTP/1.0\r\n\r\n".to_owned(),
    };
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

async fn send_raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

async fn plain(addr: SocketAddr, host: Option<&str>) -> (u16, String) {
    exchange(TcpStream::connect(addr).await.expect("connect"), host).await
}

/// A TLS exchange: `sni` (`None`: connect by IP address, which sends no SNI); the certificate
/// the edge presented, or the handshake's error.
async fn tls(
    p: &Platform,
    sni: Option<&str>,
    host: Option<&str>,
) -> Result<(Vec<u8>, u16, String), String> {
    let addr = p.edge.tls_addr().expect("tls");
    let config = p.ca.client_config(&[b"http/1.1"]);
    let connector = tokio_rustls::TlsConnector::from(config);
    let name = match sni {
        Some(sni) => ServerName::try_from(sni.to_owned()).expect("name"),
        None => ServerName::IpAddress(addr.ip().into()),
    };
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let stream = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let presented = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec())
        .unwrap_or_default();
    let (status, body) = exchange(stream, host).await;
    Ok((presented, status, body))
}

#[tokio::test]
async fn each_tenant_gets_its_certificate_and_its_rules_and_fronting_is_refused() {
    let p = platform(false).await;
    // Each tenant's own certificate, its own rules.
    let (cert, status, body) = tls(&p, Some("a.test"), Some("a.test")).await.expect("a");
    assert_eq!(cert, p.cert_a);
    assert_eq!((status, body.as_str()), (200, "upstream"));
    let (cert, status, _) = tls(&p, Some("b.test"), Some("B.TEST:443"))
        .await
        .expect("b");
    assert_eq!(cert, p.cert_b);
    assert_eq!(status, 403, "tenant b blocks loopback");
    // Another domain of the same tenant in Host: fine.
    let (cert, status, _) = tls(&p, Some("a.test"), Some("www.a.test"))
        .await
        .expect("www.a");
    assert_eq!(cert, p.cert_a);
    assert_eq!(status, 200);
    // SNI of tenant a, Host of tenant b (domain fronting): 421, fixed body.
    let (cert, status, body) = tls(&p, Some("a.test"), Some("b.test"))
        .await
        .expect("front");
    assert_eq!(cert, p.cert_a);
    assert_eq!((status, body.as_str()), (421, MISDIRECTED_BODY));
    // HTTP/1.0 without Host over TLS: the SNI decides.
    let (_, status, _) = tls(&p, Some("b.test"), None).await.expect("1.0");
    assert_eq!(status, 403);
    // An SNI with no certificate and no default pair: the handshake fails.
    assert!(tls(&p, Some("c.test"), Some("c.test")).await.is_err());
    let refused = tls(&p, Some("nobody.test"), Some("a.test"))
        .await
        .unwrap_err();
    assert!(refused.contains("AccessDenied"), "{refused}");
    // The file name is the SNI a pair is served for: www.a.test has no pair of its own.
    assert!(tls(&p, Some("www.a.test"), Some("www.a.test"))
        .await
        .is_err());

    // Plain HTTP: the Host decides.
    let http = p.edge.http_addr().expect("http");
    assert_eq!(plain(http, Some("a.test")).await.0, 200);
    assert_eq!(plain(http, Some("c.test:8080")).await.0, 200);
    assert_eq!(plain(http, Some("b.test")).await.0, 403);
    let (status, body) = plain(http, Some("nobody.test")).await;
    assert_eq!((status, body.as_str()), (421, MISDIRECTED_BODY));
    assert_eq!(plain(http, None).await.0, 421, "HTTP/1.0 without Host");
    // Two Host headers, or one with bytes that are not visible ASCII: 421, over TLS too.
    let (status, body) = send_raw(
        http,
        b"GET /authorize HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!((status, body.as_str()), (421, MISDIRECTED_BODY));
    let (status, _) = send_raw(
        http,
        b"GET /authorize HTTP/1.1\r\nHost: a.test\xff\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 421);
    let (_, status, _) = tls(&p, Some("a.test"), Some("a.test\r\nHost: a.test"))
        .await
        .expect("two hosts over TLS");
    assert_eq!(status, 421);

    // Tenant b removed: its host names no tenant at once.
    let report = p.router.apply(vec![TenantChange::remove("b")]);
    assert_eq!(report.removed, 1);
    assert_eq!(plain(http, Some("b.test")).await.0, 421);
    let (_, status, _) = tls(&p, Some("b.test"), Some("b.test"))
        .await
        .expect("b gone");
    assert_eq!(status, 421);

    // Metrics: tenant b had its own series, the others are counted together.
    let text = metrics_text(p.edge.metrics_addr().expect("metrics")).await;
    assert!(
        text.contains("netacl_edge_tenant_requests_total{tenant=\"_other\",verdict=\"none\"} 4"),
        "{text}"
    );
    assert!(
        text.contains("netacl_edge_requests_total{verdict=\"misdirected\"} 8"),
        "{text}"
    );
    assert!(
        text.contains("netacl_edge_misdirected_requests_total 8"),
        "{text}"
    );
    assert!(text.contains("netacl_edge_tenants 2"), "{text}");
    assert!(!text.contains("tenant=\"a\""), "{text}");
}

async fn metrics_text(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await;
    String::from_utf8_lossy(&raw).into_owned()
}

#[tokio::test]
async fn with_a_default_certificate_unknown_sni_gets_it_and_then_421() {
    let p = platform(true).await;
    let default = p.default_cert.clone().expect("default");
    // Unknown SNI: the default certificate, then 421 whatever the Host.
    let (cert, status, _) = tls(&p, Some("nobody.test"), Some("nobody.test"))
        .await
        .expect("default served");
    assert_eq!(cert, default);
    assert_eq!(status, 421);
    // c.test has no certificate of its own: its SNI gets the default pair (the client checks
    // the name, so it refuses the handshake: the default names default.test only)…
    assert!(tls(&p, Some("c.test"), Some("c.test")).await.is_err());
    // …and without SNI the Host decides for a host without a certificate of its own,
    let (cert, status, body) = tls(&p, None, Some("c.test")).await.expect("no SNI, c");
    assert_eq!(cert, default);
    assert_eq!((status, body.as_str()), (200, "upstream"));
    // but not for a host with one (its clients send SNI; one that does not is misdirected).
    let (_, status, _) = tls(&p, None, Some("a.test")).await.expect("no SNI, a");
    assert_eq!(status, 421);
    let (_, status, _) = tls(&p, None, Some("nobody.test"))
        .await
        .expect("no SNI, nobody");
    assert_eq!(status, 421);
    // Tenants with their own certificate still get theirs.
    let (cert, status, _) = tls(&p, Some("a.test"), Some("a.test")).await.expect("a");
    assert_eq!(cert, p.cert_a);
    assert_eq!(status, 200);
}

#[test]
fn the_certificate_directory_is_read_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("rescan");
    let first = ca.issue(&["a.test"]);
    first.write(dir.path(), "a.test");
    let certs = SniCertificates::load(dir.path(), None).expect("loads");
    assert_eq!(certs.hosts(), ["a.test"]);
    assert!(certs.has_own_certificate("A.Test"));
    assert!(!certs.has_own_certificate("b.test"));
    let fingerprint = |der: &[u8]| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(der))
    };
    assert_eq!(
        certs.fingerprint_for("a.test"),
        Some(fingerprint(&first.der))
    );

    // A new pair, a replaced pair (by rename), and a broken one: the broken one is refused.
    let b = ca.issue(&["b.test"]);
    b.write(dir.path(), "b.test");
    let renewed = ca.issue(&["a.test"]);
    let staged = dir.path().join("staging");
    std::fs::create_dir(&staged).expect("mkdir");
    let files: TlsFiles = renewed.write(&staged, "a.test");
    std::fs::rename(&files.key, dir.path().join("a.test.key")).expect("rename");
    std::fs::rename(&files.cert, dir.path().join("a.test.crt")).expect("rename");
    std::fs::write(dir.path().join("broken.test.crt"), "not PEM").expect("write");
    std::fs::write(dir.path().join("broken.test.key"), "not PEM").expect("write");
    certs.rescan();
    assert_eq!(certs.hosts(), ["a.test", "b.test"]);
    assert_eq!(
        certs.fingerprint_for("a.test"),
        Some(fingerprint(&renewed.der))
    );
    assert_eq!(certs.fingerprint_for("b.test"), Some(fingerprint(&b.der)));
    assert_eq!(certs.fingerprint_for("broken.test"), None);

    // A pair removed: no longer served.
    std::fs::remove_file(dir.path().join("b.test.crt")).expect("rm");
    certs.rescan();
    assert_eq!(certs.hosts(), ["a.test"]);

    // At start, a pair that does not load is an error naming its file.
    let err = SniCertificates::load(dir.path(), None)
        .expect_err("broken pair")
        .to_string();
    assert!(err.contains("broken.test"), "{err}");
}

/// An upstream answering with the host and forwarding headers it received, one `name: value`
/// line each (several lines of a name in the order received).
async fn echo_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let mut seen = String::new();
                    for name in ["host", "x-forwarded-host", "forwarded", "x-forwarded-for"] {
                        for value in req.headers().get_all(name) {
                            seen.push_str(&format!(
                                "{name}: {}\n",
                                String::from_utf8_lossy(value.as_bytes())
                            ));
                        }
                    }
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(bytes::Bytes::from(
                        seen,
                    ))))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

/// Issue 28: the upstream gets the host the edge judged, and no other. Tenant beta blocks every
/// request; a request judged as acme's (`Host: acme.test`) cannot reach the upstream as beta's:
/// `Connection: host` does not drop its `Host`, and a client's `X-Forwarded-Host` or
/// `Forwarded: host=` naming beta never reaches the upstream, which gets `X-Forwarded-Host:
/// acme.test`. Over HTTP/2, an `:authority` and a `host` of different tenants are 421.
#[tokio::test]
async fn the_upstream_gets_the_host_the_edge_judged() {
    let router = Arc::new(TenantRouter::new());
    let deny_all = RuleSet::from_json(
        &json!([{
            "id": AclId::from_random(9).to_string(), "description": "deny all", "active": true,
            "priority": 1,
            "rule": {"action": {"block": true}, "scope": "tenant",
                     "match": {"ipv4_cidrs": ["0.0.0.0/0"]}},
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
        }]),
        1,
        &Limits::default(),
    )
    .expect("rules");
    let report = router.apply(vec![
        TenantChange::put("acme", ["acme.test"], empty()),
        TenantChange::put("beta", ["beta.test"], deny_all),
    ]);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let upstream = echo_upstream().await;
    let mut config = EdgeConfig::new(format!("http://{upstream}").parse().expect("uri"));
    config.listen = Some("127.0.0.1:0".parse().expect("addr"));
    config.tenants = Some(router.clone());
    config.metrics_listen = None;
    let edge = start_edge(Arc::new(Engine::new()), config)
        .await
        .expect("edge starts");
    let http = edge.http_addr().expect("http");

    // Beta's own requests are blocked.
    assert_eq!(plain(http, Some("beta.test")).await.0, 403);

    // `Connection: host`: the upstream still gets acme's host, and as X-Forwarded-Host.
    let (status, seen) = send_raw(
        http,
        b"GET / HTTP/1.1\r\nHost: acme.test\r\nConnection: host, close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200, "{seen}");
    assert!(seen.contains("host: acme.test\n"), "{seen}");
    assert!(seen.contains("x-forwarded-host: acme.test\n"), "{seen}");

    // A forged X-Forwarded-Host and Forwarded host= naming beta: dropped, acme's host forwarded.
    let (status, seen) = send_raw(
        http,
        b"GET / HTTP/1.1\r\nHost: acme.test\r\nX-Forwarded-Host: beta.test\r\n\
          Forwarded: for=192.0.2.1;host=beta.test;proto=https\r\n\
          Connection: x-forwarded-host, close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200, "{seen}");
    assert!(!seen.contains("beta"), "{seen}");
    assert_eq!(
        seen.lines()
            .filter(|l| l.starts_with("host:") || l.starts_with("x-forwarded-host:"))
            .collect::<Vec<_>>(),
        ["host: acme.test", "x-forwarded-host: acme.test"],
        "{seen}"
    );
    assert!(
        seen.contains("forwarded: for=192.0.2.1;proto=https\n"),
        "{seen}"
    );

    // HTTP/2 (prior knowledge): :authority of acme with a host header of beta is 421; the two
    // agreeing pass, and the upstream gets that one host.
    let h2 = |authority: &'static str, host: &'static str| async move {
        let tcp = TcpStream::connect(http).await.expect("connect");
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .expect("h2 handshake");
        tokio::spawn(connection);
        let request = Request::get(format!("http://{authority}/"))
            .header("host", host)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let response = sender.send_request(request).await.expect("answer");
        let status = response.status().as_u16();
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("body")
            .to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    let (status, body) = h2("acme.test", "beta.test").await;
    assert_eq!((status, body.as_str()), (421, MISDIRECTED_BODY));
    let (status, body) = h2("beta.test", "acme.test").await;
    assert_eq!((status, body.as_str()), (421, MISDIRECTED_BODY));
    let (status, seen) = h2("acme.test", "acme.test").await;
    assert_eq!(status, 200, "{seen}");
    assert!(seen.contains("host: acme.test\n"), "{seen}");
    assert!(seen.contains("x-forwarded-host: acme.test\n"), "{seen}");
}

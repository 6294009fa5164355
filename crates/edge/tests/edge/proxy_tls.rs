//! The proxy's links over TLS, on loopback with real handshakes (certificates from a test CA):
//! `https://` upstreams (SNI, verification of chain and name, `--upstream-ca`, HTTP/2 when the
//! upstream selects it by ALPN, pooled connections) and WebSocket upgrades passed through the
//! plain and TLS listeners to plain and TLS upstreams, with the ACL applied to the upgrade
//! request.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use netacl_edge::{start_edge, ClientTrust, EdgeConfig, RulesSource, RunningEdge};
use netacl_eval::Engine;
use netacl_model::{Limits, RuleSet};
use netacl_tls::test_ca::TestCa;
use netacl_tls::{ServerCertificate, TlsFiles};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::{self, Message};

/// A CA, a directory for the files, and the CA's certificate written there.
struct Pki {
    dir: tempfile::TempDir,
    ca: TestCa,
    ca_file: PathBuf,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("proxy");
    let ca_file = dir.path().join("ca.pem");
    ca.write_pem(&ca_file);
    Pki { dir, ca, ca_file }
}

impl Pki {
    fn files(&self, stem: &str, names: &[&str]) -> TlsFiles {
        self.ca.issue(names).write(self.dir.path(), stem)
    }

    fn acceptor(&self, stem: &str, names: &[&str], alpn: &[&[u8]]) -> tokio_rustls::TlsAcceptor {
        let certificate = ServerCertificate::load(self.files(stem, names)).expect("certificate");
        let mut config = certificate.server_config().expect("server config");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

/// What an upstream saw of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    sni: Option<String>,
    version: http::Version,
    /// The request's authority (HTTP/2) or `Host` header (HTTP/1.1).
    host: Option<String>,
    /// Whether an HTTP/2 request also carried a `Host` header.
    host_header_in_h2: bool,
    forwarded_proto: Option<String>,
    /// The `Upgrade` header it got, if any.
    upgrade: Option<String>,
}

struct HttpsUpstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
}

/// An HTTPS upstream with a certificate for `localhost`, offering `alpn`.
async fn https_upstream(pki: &Pki, alpn: &[&[u8]]) -> HttpsUpstream {
    let acceptor = pki.acceptor("upstream", &["localhost"], alpn);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(AtomicUsize::new(0));
    let (record, count) = (seen.clone(), connections.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let Ok(tls) = acceptor.accept(tcp).await else {
                continue;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let sni = tls.get_ref().1.server_name().map(str::to_owned);
            let record = record.clone();
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let h2 = request.version() == http::Version::HTTP_2;
                let header = |name: &str| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                let host = if h2 {
                    request.uri().authority().map(|a| a.to_string())
                } else {
                    header("host")
                };
                record.lock().expect("lock").push(Seen {
                    sni: sni.clone(),
                    version: request.version(),
                    host,
                    host_header_in_h2: h2 && request.headers().contains_key("host"),
                    forwarded_proto: header("x-forwarded-proto"),
                    upgrade: header("upgrade"),
                });
                async {
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(
                        "upstream",
                    ))))
                }
            });
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    HttpsUpstream {
        addr,
        seen,
        connections,
    }
}

/// An edge configuration: `upstream` trusted by `trust`, a plain listener, no metrics.
fn edge_config(upstream: &str, trust: ClientTrust) -> EdgeConfig {
    let mut config = EdgeConfig::new(upstream.parse().expect("upstream URL"));
    config.upstream_trust = trust;
    config.listen = Some("127.0.0.1:0".parse().expect("addr"));
    config.metrics_listen = None;
    config
}

async fn edge(upstream: &str, trust: ClientTrust, tls: Option<TlsFiles>) -> RunningEdge {
    let mut config = edge_config(upstream, trust);
    if tls.is_some() {
        config.listen_tls = Some("127.0.0.1:0".parse().expect("addr"));
        config.tls = tls;
    }
    config.rules = RulesSource::Engine;
    start_edge(Arc::new(Engine::new()), config)
        .await
        .expect("edge starts")
}

/// `GET /` with `Host: app.example` on a plain connection: status and body.
async fn get(addr: SocketAddr) -> (u16, String) {
    send(
        addr,
        b"GET / HTTP/1.1\r\nHost: app.example\r\nConnection: close\r\n\r\n",
    )
    .await
}

/// Sends `request` on a new plain connection and reads the answer to its end: status and body.
async fn send(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(request).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut raw))
        .await
        .expect("answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

#[tokio::test]
async fn https_upstreams_get_sni_verification_and_http2_when_they_offer_it() {
    let pki = pki();
    let trusted = ClientTrust::CaFile(pki.ca_file.clone());

    // An upstream offering HTTP/2: one multiplexed connection, the client's host as the
    // :authority (and no Host header beside it), the certificate's name as SNI.
    let h2 = https_upstream(&pki, &[b"h2", b"http/1.1"]).await;
    let edge_h2 = edge(
        &format!("https://localhost:{}", h2.addr.port()),
        trusted.clone(),
        None,
    )
    .await;
    let addr = edge_h2.http_addr().expect("http addr");
    assert_eq!(get(addr).await, (200, "upstream".to_owned()));
    assert_eq!(get(addr).await, (200, "upstream".to_owned()));
    let expected = Seen {
        sni: Some("localhost".to_owned()),
        version: http::Version::HTTP_2,
        host: Some("app.example".to_owned()),
        host_header_in_h2: false,
        forwarded_proto: Some("http".to_owned()),
        upgrade: None,
    };
    assert_eq!(
        *h2.seen.lock().expect("lock"),
        vec![expected.clone(), expected]
    );
    assert_eq!(
        h2.connections.load(Ordering::SeqCst),
        1,
        "one shared HTTP/2 connection"
    );
    edge_h2.shutdown();

    // An upstream offering only HTTP/1.1: HTTP/1.1 with the client's Host header, the
    // connection reused.
    let h1 = https_upstream(&pki, &[b"http/1.1"]).await;
    let edge_h1 = edge(
        &format!("https://localhost:{}", h1.addr.port()),
        trusted.clone(),
        None,
    )
    .await;
    let addr = edge_h1.http_addr().expect("http addr");
    assert_eq!(get(addr).await, (200, "upstream".to_owned()));
    assert_eq!(get(addr).await, (200, "upstream".to_owned()));
    let seen = h1.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.version == http::Version::HTTP_11
        && s.host.as_deref() == Some("app.example")
        && s.sni.as_deref() == Some("localhost")));
    assert_eq!(
        h1.connections.load(Ordering::SeqCst),
        1,
        "the HTTP/1.1 connection is reused"
    );
    edge_h1.shutdown();

    // Not trusted: the system's roots do not know the test CA; 502, nothing reaches the
    // upstream.
    let before = h2.seen.lock().expect("lock").len();
    let untrusted = edge(
        &format!("https://localhost:{}", h2.addr.port()),
        ClientTrust::SystemRoots,
        None,
    )
    .await;
    let (status, body) = get(untrusted.http_addr().expect("addr")).await;
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("bad_gateway"), "{body}");
    untrusted.shutdown();

    // Trusted CA but the wrong name: the certificate names localhost, not 127.0.0.1.
    let wrong_name = edge(
        &format!("https://127.0.0.1:{}", h2.addr.port()),
        trusted,
        None,
    )
    .await;
    assert_eq!(get(wrong_name.http_addr().expect("addr")).await.0, 502);
    wrong_name.shutdown();
    assert_eq!(h2.seen.lock().expect("lock").len(), before);
}

#[tokio::test]
async fn an_https_upstream_needs_trust_anchors_that_load() {
    let missing_ca = ClientTrust::CaFile("/nonexistent/ca.pem".into());
    let config = edge_config("https://localhost:1", missing_ca);
    let err = start_edge(Arc::new(Engine::new()), config)
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.contains("upstream TLS") && message.contains("/nonexistent/ca.pem"),
        "{message}"
    );

    let config = edge_config("ftp://localhost:1", ClientTrust::SystemRoots);
    let err = start_edge(Arc::new(Engine::new()), config)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("https://HOST[:PORT]"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// WebSocket upgrades.

#[tokio::test]
async fn an_h2c_upgrade_goes_on_as_an_ordinary_request() {
    // After an upgrade the edge copies bytes: an h2c upgrade would carry later requests past
    // the ACL. It is not passed through; the request itself is.
    let pki = pki();
    let upstream = https_upstream(&pki, &[b"http/1.1"]).await;
    let trusted = ClientTrust::CaFile(pki.ca_file.clone());
    let edge = edge(
        &format!("https://localhost:{}", upstream.addr.port()),
        trusted,
        None,
    )
    .await;
    let request =
        b"GET / HTTP/1.1\r\nHost: app.example\r\nConnection: Upgrade, HTTP2-Settings, close\r\n\
        Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
    let (status, body) = send(edge.http_addr().expect("addr"), request).await;
    assert_eq!((status, body.as_str()), (200, "upstream"));
    let seen = upstream.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].upgrade, None);
    edge.shutdown();
}

struct EchoUpstream {
    addr: SocketAddr,
    upgrades: Arc<AtomicUsize>,
}

/// A WebSocket echo server (tokio-tungstenite), plain or behind TLS (offering h2 too, so that
/// an upgrade through an h2 connection would fail).
async fn echo_upstream(tls: Option<tokio_rustls::TlsAcceptor>) -> EchoUpstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let upgrades = Arc::new(AtomicUsize::new(0));
    let count = upgrades.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let count = count.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                async fn echo<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
                    stream: S,
                    count: Arc<AtomicUsize>,
                ) {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    count.fetch_add(1, Ordering::SeqCst);
                    while let Some(Ok(message)) = ws.next().await {
                        if (message.is_text() || message.is_binary())
                            && ws.send(message).await.is_err()
                        {
                            return;
                        }
                    }
                }
                match tls {
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(tcp).await {
                            echo(stream, count).await;
                        }
                    }
                    None => echo(tcp, count).await,
                }
            });
        }
    });
    EchoUpstream { addr, upgrades }
}

/// Opens a WebSocket to `url` over `stream` and checks two echoes.
async fn echoes<S>(url: &str, stream: S) -> Result<(), tungstenite::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut ws, response) = tokio_tungstenite::client_async(url, stream).await?;
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    for text in ["hello", "through the edge"] {
        ws.send(Message::text(text)).await?;
        let echoed = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("echo in time")
            .expect("a message")?;
        assert_eq!(echoed, Message::text(text));
    }
    ws.close(None).await?;
    Ok(())
}

async fn tls_stream(addr: SocketAddr, pki: &Pki) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("edge.test").expect("name");
    tokio_rustls::TlsConnector::from(pki.ca.client_config(&[b"http/1.1"]))
        .connect(name, tcp)
        .await
        .expect("handshake with the edge")
}

/// A rule blocking the authentication scope (where `/ws` is) for loopback clients: decided
/// per request, so a TLS connection is not refused before its handshake.
fn block_loopback() -> RuleSet {
    RuleSet::from_json(
        &json!([{
            "id": "acl_6dL8L5Vqc1TxxXRuLhzD7c", "description": "no sockets from here",
            "active": true, "priority": 1,
            "rule": {"action": {"block": true}, "scope": "authentication",
                     "match": {"ipv4_cidrs": ["127.0.0.0/8"]}},
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
        }]),
        1,
        &Limits::default(),
    )
    .expect("rules")
}

#[tokio::test]
async fn websocket_upgrades_pass_through_both_listeners_unless_the_acl_blocks_them() {
    let pki = pki();
    let edge_files = pki.files("edge", &["edge.test"]);
    let plain_echo = echo_upstream(None).await;
    let tls_echo = echo_upstream(Some(pki.acceptor(
        "echo",
        &["localhost"],
        &[b"h2", b"http/1.1"],
    )))
    .await;
    let trusted = ClientTrust::CaFile(pki.ca_file.clone());

    for (upstream, echo) in [
        (format!("http://{}", plain_echo.addr), &plain_echo),
        (
            format!("https://localhost:{}", tls_echo.addr.port()),
            &tls_echo,
        ),
    ] {
        let edge = edge(&upstream, trusted.clone(), Some(edge_files.clone())).await;
        let http = edge.http_addr().expect("http addr");
        let tls = edge.tls_addr().expect("tls addr");

        // Through the plain and the TLS listener: upgraded, and the echo comes back.
        let plain = TcpStream::connect(http).await.expect("connect");
        echoes("ws://edge.test/ws", plain)
            .await
            .expect("ws through the plain listener");
        echoes("wss://edge.test/ws", tls_stream(tls, &pki).await)
            .await
            .expect("wss through the TLS listener");
        assert_eq!(echo.upgrades.load(Ordering::SeqCst), 2, "{upstream}");

        // Blocked: the upgrade request gets the edge's 403 and the upstream never sees it.
        edge.enforcer()
            .apply_rules(&block_loopback())
            .expect("compiles");
        for result in [
            echoes(
                "ws://edge.test/ws",
                TcpStream::connect(http).await.expect("connect"),
            )
            .await,
            echoes("wss://edge.test/ws", tls_stream(tls, &pki).await).await,
        ] {
            match result {
                Err(tungstenite::Error::Http(response)) => {
                    assert_eq!(response.status(), StatusCode::FORBIDDEN);
                    let body = response.body().as_deref().unwrap_or_default();
                    assert!(String::from_utf8_lossy(body).contains("blocked"));
                }
                other => panic!("expected a 403, got {other:?}"),
            }
        }
        assert_eq!(echo.upgrades.load(Ordering::SeqCst), 2, "{upstream}");
        edge.shutdown();
        echo.upgrades.store(0, Ordering::SeqCst);
    }
}

//! TLS: the JA3 and JA4 a request is decided with are those `netacl_edge::fingerprint` (what
//! `netacl fingerprint` runs) gives for the ClientHello the client sent, captured on its way by
//! a relay; a garbage ClientHello is refused and the process keeps answering.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use netacl_edge::fingerprint::{ja3, ja4, ClientHello};
use netacl_tls::test_ca::TestCa;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;

use crate::support::{
    exchange, metric, record, rules, start, wait_version_after, write_rules, Upstream, ID1,
};

/// JA3 and JA4 of the ClientHello a relay saw.
struct Seen {
    ja3: String,
    ja4: String,
}

/// A relay to `target` for one connection: the bytes pass both ways; the client's first
/// flight is parsed as it passes and its fingerprints sent back.
async fn relay(target: SocketAddr) -> (SocketAddr, tokio::sync::oneshot::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut client, _)) = listener.accept().await else {
            return;
        };
        let Ok(mut server) = TcpStream::connect(target).await else {
            return;
        };
        let mut first = Vec::new();
        let mut buf = [0u8; 4096];
        let hello = loop {
            let Ok(n) = client.read(&mut buf).await else {
                return;
            };
            if n == 0 || server.write_all(&buf[..n]).await.is_err() {
                return;
            }
            first.extend_from_slice(&buf[..n]);
            if let Ok(hello) = ClientHello::parse(&first) {
                break hello;
            }
            if first.len() > 65536 {
                return;
            }
        };
        let _ = tx.send(Seen {
            ja3: ja3(&hello).hash,
            ja4: ja4(&hello),
        });
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    });
    (addr, rx)
}

/// A TLS connection to `proxy` through a fresh relay; its fingerprints as the relay saw them.
async fn connect(
    proxy: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
) -> (TlsStream<TcpStream>, Seen) {
    let (addr, seen) = relay(proxy).await;
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(config));
    let tcp = TcpStream::connect(addr).await.expect("connect relay");
    let name = rustls::pki_types::ServerName::try_from("app.test").expect("name");
    let tls = tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp))
        .await
        .expect("handshake in time")
        .expect("handshake");
    (tls, seen.await.expect("the relay saw a ClientHello"))
}

fn redirect(id: &str, to: &str, criteria: &str) -> String {
    record(
        id,
        1,
        &format!(r#"{{"redirect":true,"redirect_uri":"https://example.com/{to}"}}"#),
        criteria,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ja3_and_ja4_over_tls_are_those_of_the_clienthello() {
    let ca = TestCa::new("pingora");
    let dir = tempfile::tempdir().expect("tempdir");
    let files = ca.issue(&["app.test"]).write(dir.path(), "site");
    // HTTP/1.1 by ALPN, so that the test speaks it by hand.
    let config = ca.client_config(&[b"http/1.1"]);
    let upstream = Upstream::start().await;
    let proxy = start(upstream.addr, "[]", Some(&files), &[]);
    let tls_addr = proxy.tls.expect("a TLS listener");
    let version = metric(proxy.metrics, "netacl_edge_policy_version").await;

    // A connection, allowed with no rule; then a rule naming its JA3 (rustls shuffles its
    // extensions, so the JA3 is this connection's alone): its next request is redirected.
    let (mut conn, seen) = connect(tls_addr, &config).await;
    let answer = exchange(&mut conn, "/", "app.test", &[], false).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "upstream"));
    let ja3_rule = format!(r#"{{"ja3_fingerprints":["{}"]}}"#, seen.ja3);
    write_rules(&proxy.rules, &rules(&[redirect(ID1, "ja3", &ja3_rule)]));
    let version = wait_version_after(proxy.metrics, version).await;
    let answer = exchange(&mut conn, "/", "app.test", &[], true).await;
    assert_eq!(
        answer.status, 302,
        "the JA3 of the ClientHello: {}",
        seen.ja3
    );
    assert_eq!(answer.header("location"), Some("https://example.com/ja3"));

    // JA4 (it sorts the extensions): a rule naming the JA4 of a new connection.
    let (mut conn, seen) = connect(tls_addr, &config).await;
    let ja4_rule = format!(r#"{{"ja4_fingerprints":["{}"]}}"#, seen.ja4);
    write_rules(&proxy.rules, &rules(&[redirect(ID1, "ja4", &ja4_rule)]));
    wait_version_after(proxy.metrics, version).await;
    let answer = exchange(&mut conn, "/", "app.test", &[], true).await;
    assert_eq!(
        answer.status, 302,
        "the JA4 of the ClientHello: {}",
        seen.ja4
    );
    assert_eq!(answer.header("location"), Some("https://example.com/ja4"));
    // Another client shape (other ALPN offers: another JA4) passes.
    let other = ca.client_config(&[b"http/1.1", b"h2-not-spoken"]);
    let (mut conn, seen_other) = connect(tls_addr, &other).await;
    assert_ne!(seen_other.ja4, seen.ja4);
    let answer = exchange(&mut conn, "/", "app.test", &[], true).await;
    assert_eq!(answer.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_clienthello_is_refused_and_the_process_keeps_answering() {
    let ca = TestCa::new("pingora");
    let dir = tempfile::tempdir().expect("tempdir");
    let files = ca.issue(&["app.test"]).write(dir.path(), "site");
    let config = ca.client_config(&[b"http/1.1"]);
    let upstream = Upstream::start().await;
    let mut proxy = start(upstream.addr, "[]", Some(&files), &[]);
    let tls_addr = proxy.tls.expect("a TLS listener");
    for garbage in [
        &b"GET / HTTP/1.1\r\nhost: app.test\r\n\r\n"[..],
        // A handshake record announcing more than a ClientHello may hold.
        b"\x16\x03\x01\xff\xff\x01\xff\xff\xff",
        // A ClientHello cut short, then the connection half-closed.
        b"\x16\x03\x01\x00\x30\x01\x00\x00\x2c\x03\x03",
        // A record of another type.
        b"\x17\x03\x03\x00\x05hello",
    ] {
        let mut stream = TcpStream::connect(tls_addr).await.expect("connect");
        stream.write_all(garbage).await.expect("write");
        let _ = stream.shutdown().await;
        let mut out = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut out)).await;
        assert!(read.is_ok(), "closed in time");
        assert!(
            !String::from_utf8_lossy(&out).contains("HTTP/1.1 200"),
            "{garbage:?}: {out:?}"
        );
    }
    assert!(metric(proxy.metrics, "netacl_edge_tls_handshake_failures_total").await >= 1);
    assert!(proxy.proc.running());
    let (mut conn, _) = connect(tls_addr, &config).await;
    let answer = exchange(&mut conn, "/", "app.test", &[], true).await;
    assert_eq!(answer.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http2_the_request_is_decided_with_its_connections_ja4() {
    use http_body_util::Empty;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let ca = TestCa::new("pingora");
    let dir = tempfile::tempdir().expect("tempdir");
    let files = ca.issue(&["app.test"]).write(dir.path(), "site");
    let config = ca.client_config(&[b"h2"]);
    let upstream = Upstream::start().await;
    let proxy = start(upstream.addr, "[]", Some(&files), &[]);
    let tls_addr = proxy.tls.expect("a TLS listener");
    let version = metric(proxy.metrics, "netacl_edge_policy_version").await;

    let (conn, seen) = connect(tls_addr, &config).await;
    assert_eq!(conn.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(conn))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let get = || {
        http::Request::get("https://app.test/")
            .body(Empty::<bytes::Bytes>::new())
            .expect("request")
    };
    let answer = sender.send_request(get()).await.expect("an answer");
    assert_eq!(answer.status(), 200);
    let ja4_rule = format!(r#"{{"ja4_fingerprints":["{}"]}}"#, seen.ja4);
    write_rules(&proxy.rules, &rules(&[redirect(ID1, "ja4", &ja4_rule)]));
    wait_version_after(proxy.metrics, version).await;
    let answer = sender.send_request(get()).await.expect("an answer");
    assert_eq!(
        answer.status(),
        302,
        "the JA4 of the ClientHello: {}",
        seen.ja4
    );
    assert_eq!(
        answer
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok()),
        Some("https://example.com/ja4")
    );
}

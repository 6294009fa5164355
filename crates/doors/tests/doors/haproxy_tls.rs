//! JA3 through HAProxy: the shipped configuration with a TLS bind, a client (rustls) whose
//! ClientHello is captured on its way to HAProxy, and a rule naming that ClientHello's JA3 as
//! `netacl fingerprint` computes it from the bytes, installed after the handshake and before the
//! request: the agent's JA3, computed from HAProxy's `ssl_fc_*` fetches, must be the same value
//! for the rule to block. (rustls shuffles its extensions per connection, so each connection has
//! its own JA3; JA4 sorts them.)
//!
//! HAProxy 2.6's capture skips the ClientHello's last extension when its body is empty (its
//! parser loops `while (msg + 4 < extensions_end)` in `ssl_sock_parse_clienthello`), so for
//! such a hello the fetches lack that extension and no agent can recover it: the block case
//! takes a connection whose last extension has a body (the book's HAProxy chapter says this).
use std::net::SocketAddr;

use std::sync::Arc;
use std::time::Duration;

use netacl_doors::spoe::{start_spoe, SpoeConfig};
use netacl_edge::fingerprint::{ja3, ClientHello};
use netacl_listener::ConnectionLimits;
use netacl_model::{Limits, RuleSet};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::haproxy::{haproxy_binaries, start_haproxy, upstream, HaproxyBinary};
use crate::rule;

fn client_config(cert: rustls::pki_types::CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Every connection sends the same ClientHello shape (no session to resume).
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// What the relay saw of one connection's ClientHello.
struct Hello {
    /// Its JA3 hash, as `netacl fingerprint` computes it.
    ja3: String,
    /// Whether its last extension has an empty body (which HAProxy 2.6's capture drops).
    last_extension_empty: bool,
}

/// A relay to `target` for one connection: the bytes pass both ways; the client's first flight
/// is parsed as it passes, and what it shows of the ClientHello is sent back.
async fn relay(target: SocketAddr) -> (SocketAddr, tokio::sync::oneshot::Receiver<Hello>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut client, _) = listener.accept().await.unwrap();
        let mut server = tokio::net::TcpStream::connect(target).await.unwrap();
        let mut first = Vec::new();
        let mut buf = [0u8; 4096];
        let hello = loop {
            let n = client.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client closed before its ClientHello");
            server.write_all(&buf[..n]).await.unwrap();
            first.extend_from_slice(&buf[..n]);
            if let Ok(hello) = ClientHello::parse(&first) {
                break hello;
            }
        };
        let _ = tx.send(Hello {
            ja3: ja3(&hello).hash,
            last_extension_empty: hello
                .extensions()
                .last()
                .is_some_and(|e| e.data().is_empty()),
        });
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    });
    (addr, rx)
}

/// One HTTPS request through a fresh relay to `proxy`; `before_request` runs with what the
/// relay saw of the ClientHello, after the handshake and before the request is written. The
/// status.
async fn https_status(
    proxy: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    before_request: impl FnOnce(&Hello),
) -> u16 {
    let (addr, ja3) = relay(proxy).await;
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("app.example.test").unwrap();
    let mut tls = tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp))
        .await
        .unwrap()
        .unwrap();
    before_request(&ja3.await.unwrap());
    tls.write_all(
        b"GET /authorize HTTP/1.1\r\nHost: app.example.test\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_over_tls_gives_the_agent_the_clients_ja3() {
    for binary in haproxy_binaries() {
        eprintln!("HAProxy {}", binary.version);
        gives_the_agent_the_clients_ja3(&binary).await;
    }
}

async fn gives_the_agent_the_clients_ja3(binary: &HaproxyBinary) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["app.example.test".to_owned()]).unwrap();
    let config = client_config(certified.cert.der().clone());

    let enforcer = Arc::new(crate::enforcer());
    let agent = start_spoe(
        Arc::clone(&enforcer),
        SpoeConfig::new("127.0.0.1:0".parse().unwrap(), ConnectionLimits::default()),
    )
    .await
    .unwrap();
    let agent_addr = agent.local_addr();
    let (upstream_addr, seen) = upstream().await;

    let dir = std::env::temp_dir().join(format!(
        "netacl-haproxy-tls-{}-{}",
        std::process::id(),
        binary.version
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("haproxy")).unwrap();
    let pem = dir.join("haproxy/site.pem");
    std::fs::write(
        &pem,
        format!(
            "{}{}",
            certified.cert.pem(),
            certified.key_pair.serialize_pem()
        ),
    )
    .unwrap();
    let (_haproxy, proxy) =
        start_haproxy(binary, &dir, agent_addr, upstream_addr, Some(&pem)).await;

    let block = |ja3: &str| {
        RuleSet::from_json(
            &Value::Array(vec![rule(
                1,
                1,
                json!({"block": true}),
                json!({"match": {"ja3_fingerprints": [ja3]}}),
            )]),
            1,
            &Limits::default(),
        )
        .unwrap()
    };
    // Another JA3 named: the client passes.
    let other = "0".repeat(32);
    let status = https_status(proxy, &config, |_| {
        enforcer.apply_rules(&block(&other)).unwrap();
    })
    .await;
    assert_eq!(status, 200);
    assert_eq!(seen.lock().unwrap().len(), 1);
    // The connection's own JA3 named: blocked, so the agent computed exactly that value. A
    // connection whose last extension is empty (about one in nine with rustls's shuffle) names
    // another JA3, passes, and the next connection is tried.
    let mut allowed = 1;
    for attempt in 1.. {
        assert!(
            attempt <= 30,
            "30 connections all ended on an empty extension"
        );
        let mut judged = false;
        let status = https_status(proxy, &config, |hello| {
            judged = !hello.last_extension_empty;
            let named = if judged { &hello.ja3 } else { &other };
            enforcer.apply_rules(&block(named)).unwrap();
        })
        .await;
        if judged {
            assert_eq!(
                status, 403,
                "the agent's JA3 is not the ClientHello's (HAProxy {})",
                binary.version
            );
            break;
        }
        assert_eq!(status, 200);
        allowed += 1;
    }
    assert_eq!(seen.lock().unwrap().len(), allowed);
    let _ = std::fs::remove_dir_all(&dir);
}

//! JA3/JA4 against FoxIO's captures (reference data), the project's own vectors
//! (`testdata/tls/own-vectors.jsonl`, expected values from an independent Python oracle), a real
//! rustls client, and the socket path (`read_client_hello` + `Rewind` + a TLS handshake).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use netacl_edge::fingerprint::{
    ja3, ja4, read_client_hello, ClientHello, ClientHelloReader, ParseError, Progress,
    ReadHelloError, Rewind,
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Vector {
    label: String,
    record: Vec<u8>,
    ja3_string: String,
    ja3: String,
    ja4: String,
    sni: Option<Option<String>>,
}

fn load_vectors(path: PathBuf) -> Vec<Vector> {
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = |key: &str| row[key].as_str().unwrap().to_owned();
            Vector {
                label: format!(
                    "{}:{} {}",
                    path.file_name().unwrap().to_string_lossy(),
                    i + 1,
                    row.get("name").or(row.get("source")).unwrap()
                ),
                record: hex::decode(text("record_hex")).unwrap(),
                ja3_string: text("ja3_string"),
                ja3: text("ja3"),
                ja4: text("ja4"),
                sni: row.get("sni").map(|v| v.as_str().map(str::to_owned)),
            }
        })
        .collect()
}

fn check(vector: &Vector, hello: &ClientHello) {
    let fingerprint = ja3(hello);
    assert_eq!(fingerprint.string, vector.ja3_string, "{}", vector.label);
    assert_eq!(fingerprint.hash, vector.ja3, "{}", vector.label);
    assert_eq!(ja4(hello), vector.ja4, "{}", vector.label);
    if let Some(sni) = &vector.sni {
        assert_eq!(hello.server_name(), sni.as_deref(), "{}", vector.label);
    }
}

/// Feeds `bytes` to a reader in segments of the given sizes (cycled).
fn read_in_segments(bytes: &[u8], sizes: &[usize]) -> ClientHello {
    let mut reader = ClientHelloReader::new();
    let mut rest = bytes;
    for &size in sizes.iter().cycle() {
        let (segment, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        match reader.push(segment) {
            Progress::NeedMore => assert!(!rest.is_empty(), "input ended with NeedMore"),
            Progress::Done(hello) => {
                assert_eq!(reader.buffered(), &bytes[..bytes.len() - rest.len()]);
                return hello;
            }
            Progress::Failed(e) => panic!("reader failed: {e}"),
            _ => panic!("unexpected progress"),
        }
    }
    unreachable!()
}

#[test]
fn reference_vectors_from_foxio_captures() {
    let vectors =
        load_vectors(repo_root().join("../shared/reference-data/tls/clienthello-vectors.jsonl"));
    assert!(vectors.len() >= 70, "expected the full vector file");
    for vector in &vectors {
        let hello =
            ClientHello::parse(&vector.record).unwrap_or_else(|e| panic!("{}: {e}", vector.label));
        check(vector, &hello);
        check(vector, &read_in_segments(&vector.record, &[1, 7, 300, 2]));
    }
}

#[test]
fn own_vectors_hand_built() {
    let vectors = load_vectors(repo_root().join("testdata/tls/own-vectors.jsonl"));
    assert!(vectors.len() >= 15);
    for vector in &vectors {
        let hello =
            ClientHello::parse(&vector.record).unwrap_or_else(|e| panic!("{}: {e}", vector.label));
        check(vector, &hello);
        check(vector, &read_in_segments(&vector.record, &[3]));
    }
}

#[test]
fn published_single_values() {
    // JA3's published example string and hash.
    let vectors = load_vectors(repo_root().join("testdata/tls/own-vectors.jsonl"));
    let published = vectors
        .iter()
        .find(|v| v.label.ends_with("\"published_ja3\""))
        .unwrap();
    let fingerprint = ja3(&ClientHello::parse(&published.record).unwrap());
    assert_eq!(
        fingerprint.string,
        "769,47-53-5-10-49161-49162-49171-49172-50-56-19-4,0-10-11,23-24-25,0"
    );
    assert_eq!(fingerprint.hash, "ada70206e40642a3e4461f35503241d5");
    // The JA4 specification's example client is among FoxIO's captures.
    let reference =
        load_vectors(repo_root().join("../shared/reference-data/tls/clienthello-vectors.jsonl"));
    assert!(reference
        .iter()
        .any(|v| ja4(&ClientHello::parse(&v.record).unwrap())
            == "t13d1516h2_8daaf6152771_e5627efa2ab1"));
}

#[test]
fn grease_does_not_change_fingerprints() {
    let vectors = load_vectors(repo_root().join("testdata/tls/own-vectors.jsonl"));
    let by_name = |name: &str| {
        let v = vectors
            .iter()
            .find(|v| v.label.ends_with(&format!("\"{name}\"")))
            .unwrap();
        ClientHello::parse(&v.record).unwrap()
    };
    let with = by_name("tls13_grease");
    let without = by_name("tls13_no_grease");
    assert_ne!(with.cipher_suites(), without.cipher_suites());
    assert_eq!(ja3(&with), ja3(&without));
    assert_eq!(ja4(&with), ja4(&without));
    assert_eq!(with.highest_version(), 0x0304);
}

fn rustls_client_config(alpn: &[&[u8]]) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

fn rustls_client_hello(server_name: &str, alpn: &[&[u8]]) -> Vec<u8> {
    let config = Arc::new(rustls_client_config(alpn));
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned()).unwrap();
    let mut conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    out
}

#[test]
fn rustls_client_hello_matches_its_configuration() {
    let bytes = rustls_client_hello("rustls.example", &[b"h2", b"http/1.1"]);
    let hello = ClientHello::parse(&bytes).unwrap();
    let provider = rustls::crypto::ring::default_provider();
    let expected_suites: Vec<u16> = provider
        .cipher_suites
        .iter()
        .map(|s| u16::from(s.suite()))
        .collect();
    assert_eq!(hello.server_name(), Some("rustls.example"));
    assert_eq!(
        hello.alpn_protocols(),
        &[b"h2".to_vec(), b"http/1.1".to_vec()]
    );
    // rustls adds the renegotiation SCSV to its suites.
    let offered: Vec<u16> = hello
        .cipher_suites()
        .iter()
        .copied()
        .filter(|&s| s != 0x00ff)
        .collect();
    assert_eq!(offered, expected_suites);
    assert!(hello.supported_versions().contains(&0x0304));
    assert!(hello.supported_versions().contains(&0x0303));
    assert!(!hello.signature_algorithms().is_empty());

    let fingerprint = ja4(&hello);
    let count = hello.cipher_suites().len();
    assert!(
        fingerprint.starts_with(&format!("t13d{count:02}{:02}h2_", hello.extensions().len())),
        "{fingerprint}"
    );
    let mut sorted = hello.cipher_suites().to_vec();
    sorted.sort_unstable();
    let list: Vec<String> = sorted.iter().map(|s| format!("{s:04x}")).collect();
    let digest = hex::encode(Sha256::digest(list.join(",").as_bytes()));
    assert_eq!(&fingerprint[11..23], &digest[..12]);
    // The same client to an IP address: no SNI, so `i`, and the same hashes.
    let by_ip = ClientHello::parse(&rustls_client_hello("192.0.2.1", &[b"h2"])).unwrap();
    assert_eq!(by_ip.server_name(), None);
    assert_eq!(&ja4(&by_ip)[3..4], "i");
    assert_eq!(&ja4(&by_ip)[10..], &fingerprint[10..]);
}

#[test]
fn rejects_what_is_not_a_client_hello() {
    let ok = rustls_client_hello("a.example", &[]);
    // Truncated anywhere: incomplete, never a panic.
    for cut in [0, 1, 4, 5, 9, ok.len() / 2, ok.len() - 1] {
        assert_eq!(
            ClientHello::parse(&ok[..cut]),
            Err(ParseError::Incomplete),
            "cut {cut}"
        );
    }
    // Application data record.
    let mut other = ok.clone();
    other[0] = 23;
    assert!(matches!(
        ClientHello::parse(&other),
        Err(ParseError::NotHandshake { content_type: 23 })
    ));
    // A ServerHello (handshake type 2).
    let mut other = ok.clone();
    other[5] = 2;
    assert!(matches!(
        ClientHello::parse(&other),
        Err(ParseError::NotClientHello { handshake_type: 2 })
    ));
    // A handshake length beyond the cap.
    let mut other = ok.clone();
    other[6] = 0x7f;
    assert!(matches!(
        ClientHello::parse(&other),
        Err(ParseError::HandshakeTooLong { .. })
    ));
    // A record length beyond 2^14.
    let mut other = ok.clone();
    other[3] = 0x48;
    assert!(matches!(
        ClientHello::parse(&other),
        Err(ParseError::RecordTooLong { .. })
    ));
    // Plain HTTP fails on the first byte.
    let mut reader = ClientHelloReader::new();
    assert!(matches!(reader.push(b"G"), Progress::Failed(_)));
    // A byte after the extension block (lengths of the record and message adjusted).
    let mut other = ok.clone();
    let total = other.len();
    other[3..5].copy_from_slice(&u16::try_from(total - 5 + 1).unwrap().to_be_bytes());
    other[6..9].copy_from_slice(&{
        let len = u32::try_from(total - 9 + 1).unwrap().to_be_bytes();
        [len[1], len[2], len[3]]
    });
    other.push(0);
    assert!(matches!(
        ClientHello::parse(&other),
        Err(ParseError::Malformed { .. })
    ));
}

#[test]
fn reader_keeps_bytes_after_the_hello_and_caps_input() {
    let hello = rustls_client_hello("a.example", &[b"h2"]);
    let mut bytes = hello.clone();
    bytes.extend_from_slice(&[20, 3, 3, 0, 1, 1]); // a change_cipher_spec record after it
    let mut reader = ClientHelloReader::new();
    assert!(matches!(reader.push(&bytes), Progress::Done(_)));
    assert_eq!(reader.buffered(), &bytes[..]);

    let mut small = ClientHelloReader::with_max_bytes(hello.len() - 1);
    assert!(matches!(
        small.push(&hello),
        Progress::Failed(ParseError::TooManyBytes { .. })
    ));
}

#[tokio::test]
async fn read_client_hello_over_loopback_then_replay() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hello = rustls_client_hello("socket.example", &[b"h2"]);
    let mut sent = hello.clone();
    sent.extend_from_slice(b"after the hello");
    let client_bytes = sent.clone();
    let client = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        // Send in three segments with pauses, as a slow client would.
        for chunk in client_bytes.chunks(client_bytes.len() / 3 + 1) {
            stream.write_all(chunk).await.unwrap();
            stream.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stream.shutdown().await.unwrap();
    });
    let (mut stream, _) = listener.accept().await.unwrap();
    let (parsed, consumed) = read_client_hello(&mut stream, 64 * 1024, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(parsed.server_name(), Some("socket.example"));
    assert!(consumed.len() >= hello.len());
    assert_eq!(&consumed[..], &sent[..consumed.len()]);
    let mut replay = Rewind::new(consumed, stream);
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), replay.read_to_end(&mut all))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(all, sent);
    client.await.unwrap();
}

#[tokio::test]
async fn read_client_hello_reports_timeout_close_and_garbage() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hello = rustls_client_hello("slow.example", &[]);
    let half = hello[..hello.len() / 2].to_vec();

    // A client that sends half and then waits: the time cap ends it.
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    let partial = half.clone();
    let client = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(&partial).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
    });
    let (mut stream, _) = listener.accept().await.unwrap();
    let failure = read_client_hello(&mut stream, 64 * 1024, Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(
        matches!(failure.error, ReadHelloError::Timeout(_)),
        "{failure}"
    );
    assert_eq!(failure.consumed, half);
    let _ = release.send(());
    client.await.unwrap();

    // A client that sends half and closes.
    let partial = half.clone();
    let client = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(&partial).await.unwrap();
        stream.shutdown().await.unwrap();
    });
    let (mut stream, _) = listener.accept().await.unwrap();
    let failure = read_client_hello(&mut stream, 64 * 1024, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(matches!(failure.error, ReadHelloError::Closed), "{failure}");
    client.await.unwrap();

    // A plain-HTTP client.
    let client = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut sink)).await;
    });
    let (mut stream, _) = listener.accept().await.unwrap();
    let failure = read_client_hello(&mut stream, 64 * 1024, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        matches!(
            failure.error,
            ReadHelloError::Parse(ParseError::NotHandshake { .. })
        ),
        "{failure}"
    );
    assert!(failure.consumed.starts_with(b"G"));
    drop(stream);
    client.await.unwrap();
}

#[tokio::test]
async fn tls_handshake_completes_after_the_hello_was_read() {
    let certified = rcgen::generate_simple_self_signed(vec!["tls.example".to_owned()]).unwrap();
    let cert_der = certified.cert.der().clone();
    let key_der =
        rustls::pki_types::PrivateKeyDer::Pkcs8(certified.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key_der)
        .unwrap();
    server_config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let mut client_config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client_config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("tls.example").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(b"ping").await.unwrap();
        let mut reply = [0u8; 4];
        tls.read_exact(&mut reply).await.unwrap();
        reply
    });
    let (tcp, _) = listener.accept().await.unwrap();
    let mut tcp = tcp;
    let (hello, consumed) = read_client_hello(&mut tcp, 64 * 1024, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(hello.server_name(), Some("tls.example"));
    assert!(ja4(&hello).starts_with("t13d"));
    let mut tls = tokio::time::timeout(
        Duration::from_secs(10),
        acceptor.accept(Rewind::new(consumed, tcp)),
    )
    .await
    .unwrap()
    .unwrap();
    let mut ping = [0u8; 4];
    tls.read_exact(&mut ping).await.unwrap();
    assert_eq!(&ping, b"ping");
    tls.write_all(b"pong").await.unwrap();
    tls.flush().await.unwrap();
    assert_eq!(&client.await.unwrap(), b"pong");
}

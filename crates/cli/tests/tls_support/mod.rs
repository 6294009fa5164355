//! A test certificate authority (rcgen), certificates it issues, and blocking HTTPS requests
//! (rustls) against the real binaries on loopback.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

use crate::serve_support::{parse, Answer};

/// A certificate authority made for one test.
pub struct TestCa {
    /// Its certificate, PEM (what clients trust: `--rules-ca`, `NODE_EXTRA_CA_CERTS`).
    pub pem: PathBuf,
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

/// A certificate and key issued by a [`TestCa`], PEM files.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The leaf certificate, DER.
    pub der: Vec<u8>,
}

impl TestCa {
    /// A new CA whose certificate is written to `dir/NAME-ca.pem`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("netacl test CA {name}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let cert = params.self_signed(&key).expect("CA certificate");
        let pem = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&pem, cert.pem()).expect("write CA");
        TestCa { pem, cert, key }
    }

    /// A server certificate for `names` (DNS names or IP addresses), written to
    /// `dir/STEM.crt` and `dir/STEM.key`.
    pub fn issue(&self, dir: &Path, stem: &str, names: &[&str]) -> Issued {
        let key = rcgen::KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(names).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, stem.to_owned());
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("certificate");
        let issued = Issued {
            cert: dir.join(format!("{stem}.crt")),
            key: dir.join(format!("{stem}.key")),
            der: cert.der().to_vec(),
        };
        std::fs::write(&issued.cert, cert.pem()).expect("write certificate");
        std::fs::write(&issued.key, key.serialize_pem()).expect("write key");
        issued
    }

    /// A client configuration trusting only this CA, offering `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.der().clone()).expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// A TLS connection to `addr` for `name`, handshake completed (10 s timeouts).
pub fn connect(
    addr: SocketAddr,
    name: &str,
    config: &Arc<rustls::ClientConfig>,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from(name.to_owned()).map_err(std::io::Error::other)?;
    let connection =
        rustls::ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

/// The leaf certificate (DER) `addr` presents for `name`.
pub fn served_leaf(
    addr: SocketAddr,
    name: &str,
    config: &Arc<rustls::ClientConfig>,
) -> std::io::Result<Vec<u8>> {
    let stream = connect(addr, name, config)?;
    let leaf = stream
        .conn
        .peer_certificates()
        .and_then(|certs| certs.first())
        .map(|leaf| leaf.to_vec())
        .ok_or_else(|| std::io::Error::other("no certificate"))?;
    Ok(leaf)
}

/// One HTTP/1.1 request over TLS on a fresh connection (`Connection: close`).
pub fn https_request(
    addr: SocketAddr,
    name: &str,
    config: &Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&serde_json::Value>,
) -> std::io::Result<Answer> {
    let mut stream = connect(addr, name, config)?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw).ok_or_else(|| std::io::Error::other("malformed or truncated HTTP answer"))
}

/// A token for `client_id` from `addr` over TLS.
pub fn https_token(
    addr: SocketAddr,
    name: &str,
    config: &Arc<rustls::ClientConfig>,
    client_id: &str,
    secret: &str,
    domain: &str,
) -> String {
    let body = serde_json::json!({
        "grant_type": "client_credentials",
        "client_id": client_id,
        "client_secret": secret,
        "audience": format!("https://{domain}/api/v2/"),
    });
    let answer = https_request(
        addr,
        name,
        config,
        "POST",
        "/oauth/token",
        None,
        Some(&body),
    )
    .expect("token");
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned()
}

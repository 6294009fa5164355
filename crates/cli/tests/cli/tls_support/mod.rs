//! A test certificate authority (`netacl_tls::test_ca`), certificates it issues, and blocking HTTPS requests
//! (rustls) against the real binaries on loopback.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

use crate::serve_support::{exchange, Answer, CLIENT_ID, CLIENT_SECRET};

/// A certificate authority made for one test (`netacl_tls::test_ca`), its certificate written
/// to a file.
pub struct TestCa {
    /// Its certificate, PEM (what clients trust: `--rules-ca`, `NODE_EXTRA_CA_CERTS`).
    pub pem: PathBuf,
    ca: netacl_tls::test_ca::TestCa,
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
        let ca = netacl_tls::test_ca::TestCa::new(name);
        let pem = dir.join(format!("{name}-ca.pem"));
        ca.write_pem(&pem);
        TestCa { pem, ca }
    }

    /// A server certificate for `names` (DNS names or IP addresses), written to
    /// `dir/STEM.crt` and `dir/STEM.key`.
    pub fn issue(&self, dir: &Path, stem: &str, names: &[&str]) -> Issued {
        let issued = self.ca.issue(names);
        let files = issued.write(dir, stem);
        Issued {
            cert: files.cert,
            key: files.key,
            der: issued.der,
        }
    }

    /// A client configuration trusting only this CA, offering `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        self.ca.client_config(alpn)
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
    exchange(&mut stream, name, method, path, token, body)
}

/// Creates a network ACL over TLS with the bootstrap client's `token`; asserts the 201.
pub fn create_over_https(
    addr: SocketAddr,
    name: &str,
    config: &Arc<rustls::ClientConfig>,
    token: &str,
    body: &serde_json::Value,
) {
    let created = https_request(
        addr,
        name,
        config,
        "POST",
        "/api/v2/network-acls",
        Some(token),
        Some(body),
    )
    .expect("create over HTTPS");
    assert_eq!(created.status, 201, "{}", created.text);
}

/// A token for the bootstrap client from `addr` over TLS (audience of tenant `domain`).
pub fn https_token(
    addr: SocketAddr,
    name: &str,
    config: &Arc<rustls::ClientConfig>,
    domain: &str,
) -> String {
    let body = serde_json::json!({
        "grant_type": "client_credentials",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
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

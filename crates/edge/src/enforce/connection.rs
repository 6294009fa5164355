//! What the edge knows about a connection before it reads a request: the peer, and under TLS
//! the SNI and the client's fingerprints.
use std::net::SocketAddr;
use std::sync::Arc;

use crate::signals::fingerprint::{ja3, ja4, ClientHello};

/// A request extension describing the connection the request arrived on. The proxy inserts it
/// into every request; an application that serves [`AclLayer`](crate::AclLayer) itself
/// (axum, hyper) inserts it in its accept loop. A request without it is evaluated with no
/// address and no TLS signals (missing signals: see the crate docs), and a warning is logged.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The TCP peer (the connecting address).
    pub peer: SocketAddr,
    /// Present when the connection is TLS terminated by this process.
    pub tls: Option<Arc<TlsInfo>>,
}

impl ConnectionInfo {
    /// A plain-TCP connection from `peer`.
    pub fn new(peer: SocketAddr) -> Self {
        Self { peer, tls: None }
    }

    /// The same connection, carrying TLS signals.
    pub fn with_tls(mut self, tls: TlsInfo) -> Self {
        self.tls = Some(Arc::new(tls));
        self
    }
}

/// The TLS signals of a connection, taken from its ClientHello.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsInfo {
    /// The server name the client asked for (SNI), lowercased, without a trailing dot.
    pub sni: Option<String>,
    /// The JA3 hash (32 lowercase hex digits).
    pub ja3: String,
    /// The JA4 fingerprint.
    pub ja4: String,
}

impl TlsInfo {
    /// Signals given directly.
    pub fn new(sni: Option<&str>, ja3: &str, ja4: &str) -> Self {
        Self {
            sni: sni.map(canonical_host),
            ja3: ja3.to_ascii_lowercase(),
            ja4: ja4.to_ascii_lowercase(),
        }
    }

    /// The signals of a parsed ClientHello.
    pub fn from_client_hello(hello: &ClientHello) -> Self {
        Self {
            sni: hello.server_name().map(canonical_host),
            ja3: ja3(hello).hash,
            ja4: ja4(hello),
        }
    }
}

fn canonical_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

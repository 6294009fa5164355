//! The connection handed to Pingora: a TCP stream, or a rustls stream over one whose
//! ClientHello the edge's reader took first, carrying the connection's [`ConnectionInfo`].
//!
//! Pingora reads a connection through its `IO` trait; the only per-connection slot a stream
//! made outside `pingora-core` can fill is the digest's `proxy_digest.user_data`
//! (`SslDigestExtension` is set by `pingora-core` alone). [`NetaclStream`] puts its
//! [`ConnectionInfo`] there, with the connection's request tracker of its gate, and
//! [`connection_info`] reads it back in the `ProxyHttp`, over HTTP/1.1 and HTTP/2 alike (an
//! HTTP/2 session shares its connection's digest).
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use async_trait::async_trait;
use netacl_edge::fingerprint::Rewind;
use netacl_edge::ConnectionInfo;
use netacl_listener::{RequestGuard, RequestTracker};
use pingora::http::ResponseHeader;
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::tls::SslDigest;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use pingora::proxy::Session;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The TLS stream of a connection: rustls over the TCP stream, its ClientHello replayed.
pub(crate) type TlsStream = tokio_rustls::server::TlsStream<Rewind<TcpStream>>;

enum Inner {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

/// One accepted connection as Pingora sees it (see the module docs).
pub struct NetaclStream {
    inner: Inner,
    id: UniqueIDType,
    socket: Arc<SocketDigest>,
    info: Option<Arc<ProxyDigest>>,
    ssl: Option<Arc<SslDigest>>,
    alpn: Option<ALPN>,
    established: SystemTime,
}

impl fmt::Debug for NetaclStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetaclStream")
            .field("id", &self.id)
            .field("tls", &self.ssl.is_some())
            .finish_non_exhaustive()
    }
}

/// What a [`NetaclStream`] carries to the `ProxyHttp`.
struct Carried {
    info: ConnectionInfo,
    requests: RequestTracker,
}

/// What a stream needs besides its bytes: its descriptor's digest with the peer filled in, and
/// the [`ConnectionInfo`] and request tracker in the proxy digest.
fn digests(
    stream: &TcpStream,
    info: ConnectionInfo,
    requests: RequestTracker,
) -> (UniqueIDType, Arc<SocketDigest>, Option<Arc<ProxyDigest>>) {
    let fd = stream.as_raw_fd();
    let socket = SocketDigest::from_raw_fd(fd);
    let _ = socket.peer_addr.set(Some(info.peer.into()));
    // The response header is required by the type and unused.
    let carrier = ResponseHeader::build(http::StatusCode::OK, Some(0))
        .ok()
        .map(|header| {
            let carried = Carried { info, requests };
            Arc::new(ProxyDigest::new(Box::new(header), Some(Box::new(carried))))
        });
    (fd, Arc::new(socket), carrier)
}

impl NetaclStream {
    /// A plain-HTTP connection.
    pub(crate) fn plain(stream: TcpStream, info: ConnectionInfo, requests: RequestTracker) -> Self {
        let (id, socket, info) = digests(&stream, info, requests);
        Self {
            inner: Inner::Plain(stream),
            id,
            socket,
            info,
            ssl: None,
            alpn: None,
            established: SystemTime::now(),
        }
    }

    /// A TLS connection after its handshake.
    pub(crate) fn tls(stream: TlsStream, info: ConnectionInfo, requests: RequestTracker) -> Self {
        let (id, socket, info) = digests(stream.get_ref().0.get_ref(), info, requests);
        let connection = stream.get_ref().1;
        let cipher = connection
            .negotiated_cipher_suite()
            .map(|s| format!("{:?}", s.suite()))
            .unwrap_or_default();
        let version = connection
            .protocol_version()
            .map(|v| format!("{v:?}"))
            .unwrap_or_default();
        let alpn = match connection.alpn_protocol() {
            Some(b"h2") => Some(ALPN::H2),
            Some(b"http/1.1") => Some(ALPN::H1),
            _ => None,
        };
        let ssl = SslDigest::new(cipher, version, None, None, Vec::new());
        Self {
            inner: Inner::Tls(Box::new(stream)),
            id,
            socket,
            info,
            ssl: Some(Arc::new(ssl)),
            alpn,
            established: SystemTime::now(),
        }
    }
}

/// The connection facts of a Pingora session: those its [`NetaclStream`] carries, else (a
/// stream of Pingora's own listeners) the peer alone; `None` without a peer address (a Unix
/// socket).
pub fn connection_info(session: &Session) -> Option<ConnectionFacts<'_>> {
    match carried(session) {
        Some(carried) => Some(ConnectionFacts::Carried(&carried.info)),
        None => session
            .client_addr()
            .and_then(|addr| addr.as_inet())
            .map(|peer| ConnectionFacts::Peer(ConnectionInfo::new(*peer))),
    }
}

/// What the session's [`NetaclStream`] carries, if it is one.
fn carried(session: &Session) -> Option<&Carried> {
    session
        .as_downstream()
        .digest()
        .and_then(|d| d.proxy_digest.as_deref())
        .and_then(|p| p.user_data.as_deref())
        .and_then(|data| data.downcast_ref::<Carried>())
}

/// Marks the session's request in flight on its connection until the guard is dropped (keep it
/// in the `ProxyHttp`'s per-request context), so that the listener's caps never close the
/// connection to make room while it serves the request; `None` for a stream of Pingora's own
/// listeners.
pub fn begin_request(session: &Session) -> Option<RequestGuard> {
    let h2 = session.as_downstream().is_http2();
    carried(session).map(|c| c.requests.begin(h2))
}

/// The facts of one connection: borrowed from its stream, or made for this request.
#[derive(Debug)]
pub enum ConnectionFacts<'a> {
    /// Carried by a [`NetaclStream`] (with the TLS signals of a TLS connection).
    Carried(&'a ConnectionInfo),
    /// The peer of a stream that carries nothing.
    Peer(ConnectionInfo),
}

impl ConnectionFacts<'_> {
    /// The facts.
    pub fn get(&self) -> &ConnectionInfo {
        match self {
            Self::Carried(info) => info,
            Self::Peer(info) => info,
        }
    }
}

impl AsyncRead for NetaclStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for NetaclStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.inner {
            Inner::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Plain(s) => Pin::new(s).poll_flush(cx),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.inner {
            Inner::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.inner {
            Inner::Plain(s) => s.is_write_vectored(),
            Inner::Tls(s) => s.is_write_vectored(),
        }
    }
}

#[async_trait]
impl Shutdown for NetaclStream {
    async fn shutdown(&mut self) {
        let _ = AsyncWriteExt::shutdown(self).await;
    }
}

impl UniqueID for NetaclStream {
    fn id(&self) -> UniqueIDType {
        self.id
    }
}

impl Ssl for NetaclStream {
    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.ssl.clone()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.alpn.clone()
    }
}

impl GetTimingDigest for NetaclStream {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        vec![Some(TimingDigest {
            established_ts: self.established,
            ..TimingDigest::default()
        })]
    }
}

impl GetProxyDigest for NetaclStream {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.info.clone()
    }
}

impl GetSocketDigest for NetaclStream {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        Some(Arc::clone(&self.socket))
    }
}

#[async_trait]
impl Peek for NetaclStream {}

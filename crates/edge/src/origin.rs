//! An HTTP client for one origin (`http://` or `https://` HOST:PORT): the proxy's upstream and
//! the remote rule source's admin server.
//!
//! - `https://`: TLS with SNI set to the origin's host, the certificate verified (chain and host
//!   name) against a [`ClientTrust`] (the system's roots or one CA file), and HTTP/2 offered by
//!   ALPN when the caller wants it: an origin that selects `h2` gets one multiplexed HTTP/2
//!   connection, shared by every request; otherwise HTTP/1.1.
//! - HTTP/1.1 connections are kept for reuse (at most [`MAX_IDLE`], each for at most
//!   [`IDLE_TIMEOUT`]); a request that a reused connection could not even start is sent again on
//!   another one (the origin closed it while idle).
//! - The request's host: callers give an origin-form request (path and query) and, if they
//!   want one, a `Host` header. Over HTTP/1.1 that header is sent as is (the origin's authority
//!   when there is none); over HTTP/2 it becomes the `:authority` (RFC 9113 §8.3.1), so an
//!   HTTP/2 origin sees the same host an HTTP/1.1 one would.
//! - Upgrades (WebSocket) always get a fresh HTTP/1.1 connection (ALPN `http/1.1` only), never
//!   pooled: after a `101` it belongs to the upgraded stream.
//!
//! hyper-util's pooled client keys its connections and the HTTP/2 `:authority` on the same URI,
//! so it cannot forward a client's host to an HTTP/2 upstream without opening a connection per
//! host a client names; a client for one origin needs neither.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{header, HeaderValue, Request, Response, Uri, Version};
use hyper::body::{Body, Incoming};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use netacl_tls::{client_config, ClientTrust, TlsError};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Idle HTTP/1.1 connections kept per origin.
pub(crate) const MAX_IDLE: usize = 256;
/// How long an idle HTTP/1.1 connection is kept.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Why a request to the origin failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OriginError {
    /// TCP connection (or name resolution) failed or timed out.
    #[error("cannot connect to {origin}: {reason}")]
    Connect { origin: String, reason: String },
    /// The TLS handshake failed (certificate not trusted, wrong name, ...).
    #[error("TLS with {origin}: {reason}")]
    Tls { origin: String, reason: String },
    /// The HTTP exchange failed.
    #[error("{origin}: {source}")]
    Http {
        origin: String,
        #[source]
        source: hyper::Error,
    },
    /// The request could not be addressed to the origin.
    #[error("{origin}: invalid request URI")]
    InvalidUri { origin: String },
}

/// Why an origin URL is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OriginUrlError {
    /// Not `http://HOST[:PORT]` or `https://HOST[:PORT]` (with at most a `/` path).
    #[error("expected http://HOST[:PORT] or https://HOST[:PORT]")]
    Shape,
    /// The client TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Any byte stream a connection runs on (plain TCP or TLS).
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

struct Tls {
    /// ALPN `h2`, `http/1.1` (or `http/1.1` alone when HTTP/2 is not wanted).
    connector: TlsConnector,
    /// ALPN `http/1.1` alone, for upgrades.
    http1_connector: TlsConnector,
    server_name: ServerName<'static>,
}

struct Idle<B> {
    since: Instant,
    sender: http1::SendRequest<B>,
}

struct Inner<B> {
    scheme: Scheme,
    authority: Authority,
    host: String,
    port: u16,
    tls: Option<Tls>,
    connect_timeout: Duration,
    idle: Mutex<Vec<Idle<B>>>,
    shared_h2: Mutex<Option<http2::SendRequest<B>>>,
}

/// A client for one origin. Cheap to clone (shared connections).
pub(crate) struct OriginClient<B> {
    inner: Arc<Inner<B>>,
}

impl<B> Clone for OriginClient<B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

enum Sender<B> {
    H1(http1::SendRequest<B>),
    H2(http2::SendRequest<B>),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<B> OriginClient<B>
where
    B: Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// A client for `url` (`http://HOST[:PORT]` or `https://HOST[:PORT]`, no path); over TLS it
    /// trusts `trust` and offers HTTP/2 when `http2`.
    pub(crate) fn new(
        url: &Uri,
        trust: &ClientTrust,
        http2: bool,
        connect_timeout: Duration,
    ) -> Result<Self, OriginUrlError> {
        let scheme = url.scheme().cloned().ok_or(OriginUrlError::Shape)?;
        let authority = url.authority().cloned().ok_or(OriginUrlError::Shape)?;
        if !matches!(url.path(), "" | "/")
            || url.query().is_some()
            || authority.as_str().contains('@')
        {
            return Err(OriginUrlError::Shape);
        }
        let tls = match scheme.as_str() {
            "http" => None,
            "https" => {
                let alpn: &[&[u8]] = if http2 {
                    &[b"h2", b"http/1.1"]
                } else {
                    &[b"http/1.1"]
                };
                let config = Arc::new(client_config(trust, alpn)?);
                let http1_config = Arc::new(client_config(trust, &[b"http/1.1"])?);
                let name = authority
                    .host()
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let server_name =
                    ServerName::try_from(name.to_owned()).map_err(|_| OriginUrlError::Shape)?;
                Some(Tls {
                    connector: TlsConnector::from(config),
                    http1_connector: TlsConnector::from(http1_config),
                    server_name,
                })
            }
            _ => return Err(OriginUrlError::Shape),
        };
        let port = authority
            .port_u16()
            .unwrap_or(if tls.is_some() { 443 } else { 80 });
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Self {
            inner: Arc::new(Inner {
                scheme,
                authority,
                host,
                port,
                tls,
                connect_timeout,
                idle: Mutex::new(Vec::new()),
                shared_h2: Mutex::new(None),
            }),
        })
    }

    /// `scheme://authority` of the origin.
    pub(crate) fn origin(&self) -> String {
        format!("{}://{}", self.inner.scheme, self.inner.authority)
    }

    /// Whether the origin is reached over TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.inner.tls.is_some()
    }

    fn connect_error(&self, reason: impl std::fmt::Display) -> OriginError {
        OriginError::Connect {
            origin: self.origin(),
            reason: reason.to_string(),
        }
    }

    /// A new connection: TCP (no Nagle), then TLS when the origin is `https://`.
    async fn dial(&self, upgrade: bool) -> Result<Sender<B>, OriginError> {
        let inner = &self.inner;
        let connect = async {
            let tcp = TcpStream::connect((inner.host.as_str(), inner.port))
                .await
                .map_err(|e| self.connect_error(e))?;
            let _ = tcp.set_nodelay(true);
            let Some(tls) = &inner.tls else {
                return Ok((Box::new(tcp) as Box<dyn Stream>, false));
            };
            let connector = if upgrade {
                &tls.http1_connector
            } else {
                &tls.connector
            };
            let stream = connector
                .connect(tls.server_name.clone(), tcp)
                .await
                .map_err(|e| OriginError::Tls {
                    origin: self.origin(),
                    reason: e.to_string(),
                })?;
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            Ok((Box::new(stream) as Box<dyn Stream>, h2))
        };
        let (stream, h2) = tokio::time::timeout(inner.connect_timeout, connect)
            .await
            .map_err(|_| {
                self.connect_error(format!("no connection within {:?}", inner.connect_timeout))
            })??;
        let io = TokioIo::new(stream);
        let http_error = |source| OriginError::Http {
            origin: self.origin(),
            source,
        };
        if h2 {
            let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await
                .map_err(http_error)?;
            tokio::spawn(async move {
                if let Err(err) = connection.await {
                    tracing::debug!(error = %err, "origin HTTP/2 connection ended");
                }
            });
            Ok(Sender::H2(sender))
        } else {
            let (sender, connection) = http1::handshake(io).await.map_err(http_error)?;
            tokio::spawn(async move {
                if let Err(err) = connection.with_upgrades().await {
                    tracing::debug!(error = %err, "origin HTTP/1.1 connection ended");
                }
            });
            Ok(Sender::H1(sender))
        }
    }

    /// Addresses `request` (origin-form: path and query) for the protocol of the connection.
    fn address(&self, request: &mut Request<B>, h2: bool) -> Result<(), OriginError> {
        let path = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let invalid = || OriginError::InvalidUri {
            origin: self.origin(),
        };
        if h2 {
            let authority = match request.headers_mut().remove(header::HOST) {
                Some(host) => Authority::try_from(host.as_bytes()).map_err(|_| invalid())?,
                None => self.inner.authority.clone(),
            };
            *request.uri_mut() = Uri::builder()
                .scheme(self.inner.scheme.clone())
                .authority(authority)
                .path_and_query(path)
                .build()
                .map_err(|_| invalid())?;
            *request.version_mut() = Version::HTTP_2;
        } else {
            if !request.headers().contains_key(header::HOST) {
                // An absolute URI (a request first addressed for HTTP/2) keeps its authority.
                let authority = request
                    .uri()
                    .authority()
                    .unwrap_or(&self.inner.authority)
                    .as_str();
                let host = HeaderValue::from_str(authority).map_err(|_| invalid())?;
                request.headers_mut().insert(header::HOST, host);
            }
            *request.uri_mut() = Uri::from(path);
            *request.version_mut() = Version::HTTP_11;
        }
        Ok(())
    }

    fn take_shared_h2(&self) -> Option<http2::SendRequest<B>> {
        let mut shared = lock(&self.inner.shared_h2);
        match shared.as_ref() {
            Some(sender) if !sender.is_closed() => Some(sender.clone()),
            Some(_) => {
                *shared = None;
                None
            }
            None => None,
        }
    }

    fn take_idle(&self) -> Option<http1::SendRequest<B>> {
        let mut idle = lock(&self.inner.idle);
        while let Some(entry) = idle.pop() {
            if entry.since.elapsed() < IDLE_TIMEOUT && entry.sender.is_ready() {
                return Some(entry.sender);
            }
        }
        None
    }

    /// Returns an HTTP/1.1 connection to the idle list once its exchange is over (the
    /// response body read to its end); a connection that closes instead is dropped.
    fn recycle(&self, mut sender: http1::SendRequest<B>) {
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            if sender.ready().await.is_err() {
                return;
            }
            let Some(inner) = inner.upgrade() else { return };
            let mut idle = lock(&inner.idle);
            idle.retain(|entry| entry.since.elapsed() < IDLE_TIMEOUT && !entry.sender.is_closed());
            if idle.len() < MAX_IDLE {
                idle.push(Idle {
                    since: Instant::now(),
                    sender,
                });
            }
        });
    }

    /// Sends `request` (origin-form) on a pooled connection, or a new one.
    pub(crate) async fn send(
        &self,
        mut request: Request<B>,
    ) -> Result<Response<Incoming>, OriginError> {
        // A request a reused connection could not start is tried again: on another reused
        // connection, or a new one, which is the last try (being new, it cannot have been
        // closed while idle). The bound only guards against a pool that keeps handing out
        // connections that cannot start anything.
        for _ in 0..MAX_IDLE + 2 {
            let (sender, reused) = match self.take_shared_h2() {
                Some(h2) => (Sender::H2(h2), true),
                None => match self.take_idle() {
                    Some(h1) => (Sender::H1(h1), true),
                    None => (self.dial(false).await?, false),
                },
            };
            let was_h2 = matches!(sender, Sender::H2(_));
            let result = match sender {
                Sender::H2(mut h2) => {
                    if !reused {
                        *lock(&self.inner.shared_h2) = Some(h2.clone());
                    }
                    self.address(&mut request, true)?;
                    h2.try_send_request(request).await
                }
                Sender::H1(mut h1) => {
                    self.address(&mut request, false)?;
                    let sent = h1.try_send_request(request).await;
                    if sent.is_ok() {
                        self.recycle(h1);
                    }
                    sent
                }
            };
            match result {
                Ok(response) => return Ok(response),
                Err(mut err) => match err.take_message() {
                    Some(unsent) if reused => {
                        // A shared HTTP/2 connection that cannot start a stream is going away
                        // (GOAWAY): the next request dials.
                        if was_h2 {
                            *lock(&self.inner.shared_h2) = None;
                        }
                        request = unsent;
                    }
                    _ => {
                        return Err(OriginError::Http {
                            origin: self.origin(),
                            source: err.into_error(),
                        })
                    }
                },
            }
        }
        Err(self.connect_error("no connection could start the request"))
    }

    /// Sends an upgrade request (origin-form, with its `Connection: upgrade` and `Upgrade`
    /// headers) on a new HTTP/1.1 connection that is never pooled.
    pub(crate) async fn send_upgrade(
        &self,
        mut request: Request<B>,
    ) -> Result<Response<Incoming>, OriginError> {
        let Sender::H1(mut sender) = self.dial(true).await? else {
            // The upgrade connector offers only http/1.1; a server cannot select h2.
            return Err(self.connect_error("the origin selected HTTP/2 for an upgrade"));
        };
        self.address(&mut request, false)?;
        sender
            .send_request(request)
            .await
            .map_err(|source| OriginError::Http {
                origin: self.origin(),
                source,
            })
    }
}

/// Whether `url`'s host is a loopback address (`localhost`, `127.0.0.0/8`, `::1`): where a
/// secret sent in clear does not leave the machine.
pub(crate) fn is_loopback_url(url: &Uri) -> bool {
    let Some(host) = url.host() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    type Client = OriginClient<Full<bytes::Bytes>>;

    fn client(url: &str) -> Result<Client, OriginUrlError> {
        Client::new(
            &url.parse().unwrap(),
            &ClientTrust::SystemRoots,
            true,
            Duration::from_secs(1),
        )
    }

    #[test]
    fn origin_urls() {
        assert!(client("http://127.0.0.1:8080").is_ok());
        assert!(client("http://127.0.0.1:8080/").is_ok());
        assert!(matches!(
            client("http://127.0.0.1:8080/prefix"),
            Err(OriginUrlError::Shape)
        ));
        assert!(matches!(
            client("ftp://127.0.0.1"),
            Err(OriginUrlError::Shape)
        ));
        assert!(matches!(
            client("http://user:pw@127.0.0.1"),
            Err(OriginUrlError::Shape)
        ));
        let plain = client("http://[::1]").unwrap();
        assert_eq!(plain.inner.port, 80);
        assert_eq!(plain.inner.host, "::1");
        assert!(!plain.is_tls());
    }

    #[test]
    fn loopback_urls() {
        for url in [
            "http://localhost:8080",
            "http://LOCALHOST",
            "http://127.0.0.1:1",
            "http://127.9.9.9",
            "http://[::1]:8080",
            "http://[::ffff:127.0.0.1]",
        ] {
            assert!(is_loopback_url(&url.parse().unwrap()), "{url}");
        }
        for url in [
            "http://10.0.0.1",
            "http://admin.internal:8080",
            "http://localhost.example.com",
            "http://[::2]",
            "http://0.0.0.0",
        ] {
            assert!(!is_loopback_url(&url.parse().unwrap()), "{url}");
        }
    }
}

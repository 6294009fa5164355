//! [`serve`]: netacl's own accept loop in front of Pingora's HTTP proxy. Every connection is
//! admitted by a [`netacl_listener`] gate (the caps of `netacl edge`); a TLS connection's
//! ClientHello is read by the edge's reader before rustls sees it (JA3, JA4, SNI, the
//! connection-level rules), then replayed into the handshake; the stream is handed to
//! Pingora's `HttpProxy` (HTTP/1.1, or HTTP/2 by ALPN) carrying its
//! [`ConnectionInfo`](netacl_edge::ConnectionInfo).
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use netacl_edge::fingerprint::{read_client_hello, Rewind, DEFAULT_MAX_HELLO_BYTES};
use netacl_edge::{ConnectionInfo, ConnectionVerdict, Enforcer, TlsFiles, TlsInfo};
use netacl_listener::{Admitted, ConnectionGate, ConnectionLimits, ListenerStats};
use netacl_tls::{ServerCertificate, TlsError};
use pingora::apps::ServerApp;
use pingora::proxy::{HttpProxy, ProxyHttp};
use pingora::server::configuration::ServerConf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::stream::NetaclStream;

/// Why [`serve`] could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Neither a plain nor a TLS listener was asked for.
    #[error("nothing to listen on: give --listen and/or --listen-tls")]
    NoListener,
    /// A TLS listener without its certificate and key.
    #[error("--listen-tls needs --tls-cert and --tls-key")]
    MissingTlsFiles,
    /// The certificate or key could not be read or used (the error names the file).
    #[error("TLS listener: {0}")]
    Tls(#[source] TlsError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// Where and how [`serve`] listens. Build with [`ServeConfig::new`] and set the fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeConfig {
    /// Plain-HTTP listener.
    pub listen: Option<SocketAddr>,
    /// TLS listener (needs `tls`).
    pub listen_tls: Option<SocketAddr>,
    /// Certificate chain and key of the TLS listener (PEM).
    pub tls: Option<TlsFiles>,
    /// How often the certificate and key files are checked for replacement (a pair that does
    /// not load is refused, the old one stays).
    pub tls_reload_interval: Duration,
    /// Time a client has to send its ClientHello and complete the handshake.
    pub handshake_timeout: Duration,
    /// Connection caps (global, per client; the enforcer's trusted proxies exempt). The
    /// header-read timeout is also the downstream session's read timeout, the idle timeout its
    /// keep-alive timeout (set by [`NetaclProxy::with_timeouts`](crate::NetaclProxy::with_timeouts)).
    pub limits: ConnectionLimits,
}

impl ServeConfig {
    /// No listener yet, certificate files checked every 10 s, a 10 s handshake timeout, the
    /// listener caps of `netacl edge`
    /// ([`DEFAULT_PROXY_MAX_CONNECTIONS`](netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS) connections,
    /// [`DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT`](netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT)
    /// per client).
    pub fn new() -> Self {
        let mut limits = ConnectionLimits::default();
        limits.max_connections = netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS;
        limits.max_connections_per_client = netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT;
        Self {
            listen: None,
            listen_tls: None,
            tls: None,
            tls_reload_interval: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            limits,
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// The listeners of [`serve`], bound and serving in background tasks (stopped when dropped).
#[derive(Debug)]
pub struct RunningPingora {
    http_addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    gate: ConnectionGate,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl RunningPingora {
    /// The bound plain-HTTP address.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The bound TLS address.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The listeners' counters (refused and evicted connections, timeouts).
    pub fn listener_stats(&self) -> ListenerStats {
        self.gate.stats()
    }

    /// Stops accepting; Pingora ends keep-alive after the request in flight, and every
    /// connection still open is closed.
    pub fn close(&self) {
        let _ = self.shutdown.send(true);
        self.gate.close();
    }

    /// Waits until every connection is closed (after [`close`](Self::close); bound it with a
    /// timeout).
    pub async fn drained(&self) {
        self.gate.drained().await;
    }
}

impl Drop for RunningPingora {
    fn drop(&mut self) {
        self.close();
        self.tasks.abort_all();
    }
}

/// What every connection task shares.
struct Shared<SV: ProxyHttp> {
    app: Arc<HttpProxy<SV>>,
    enforcer: Arc<Enforcer>,
    acceptor: Option<TlsAcceptor>,
    handshake_timeout: Duration,
    shutdown: watch::Receiver<bool>,
}

/// Serves `proxy` (a `ProxyHttp`, e.g. [`NetaclProxy`](crate::NetaclProxy)) on the listeners
/// of `config` with netacl's accept loop (see the module docs). The listeners' counters are
/// added to the enforcer's metrics (`/metrics` of the edge's metrics listener, listener
/// `pingora`).
pub async fn serve<SV>(
    enforcer: Arc<Enforcer>,
    proxy: SV,
    config: ServeConfig,
) -> Result<RunningPingora, ServeError>
where
    SV: ProxyHttp + Send + Sync + 'static,
    SV::CTX: Send + Sync,
{
    if config.listen.is_none() && config.listen_tls.is_none() {
        return Err(ServeError::NoListener);
    }
    let mut tasks = JoinSet::new();
    let acceptor = match config.listen_tls {
        Some(_) => {
            let files = config.tls.clone().ok_or(ServeError::MissingTlsFiles)?;
            let certificate = ServerCertificate::load(files).map_err(ServeError::Tls)?;
            let acceptor = certificate.acceptor().map_err(ServeError::Tls)?;
            let watcher = certificate.watch(config.tls_reload_interval);
            tasks.spawn(async move {
                let _ = watcher.await;
            });
            Some(acceptor)
        }
        None => None,
    };
    let mut limits = config.limits.clone();
    // One meaning for --trusted-proxy: the proxies whose forwarding header is believed are not
    // counted per client.
    limits.trusted_proxies = enforcer.addrs().trusted().clone();
    let gate = ConnectionGate::new(limits);
    {
        let gate = gate.clone();
        enforcer
            .metrics()
            .add_listener(crate::DOOR, move || gate.stats());
    }
    let conf = Arc::new(ServerConf::default());
    let app = Arc::new(pingora::proxy::http_proxy(&conf, proxy));
    let (shutdown, watch) = watch::channel(false);
    let plain = Arc::new(Shared {
        app: Arc::clone(&app),
        enforcer: Arc::clone(&enforcer),
        acceptor: None,
        handshake_timeout: config.handshake_timeout,
        shutdown: watch.clone(),
    });
    let mut http_addr = None;
    if let Some(addr) = config.listen {
        let listener = bind(addr).await?;
        http_addr = Some(local(&listener, addr)?);
        tasks.spawn(accept_loop(listener, gate.clone(), plain));
    }
    let mut tls_addr = None;
    if let (Some(addr), Some(acceptor)) = (config.listen_tls, acceptor) {
        let listener = bind(addr).await?;
        tls_addr = Some(local(&listener, addr)?);
        let shared = Arc::new(Shared {
            app,
            enforcer,
            acceptor: Some(acceptor),
            handshake_timeout: config.handshake_timeout,
            shutdown: watch,
        });
        tasks.spawn(accept_loop(listener, gate.clone(), shared));
    }
    Ok(RunningPingora {
        http_addr,
        tls_addr,
        gate,
        shutdown,
        tasks,
    })
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

fn local(listener: &TcpListener, addr: SocketAddr) -> Result<SocketAddr, ServeError> {
    listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Accepts the connections the gate admits (the others are closed at once) until it closes.
async fn accept_loop<SV>(listener: TcpListener, gate: ConnectionGate, shared: Arc<Shared<SV>>)
where
    SV: ProxyHttp + Send + Sync + 'static,
    SV::CTX: Send + Sync,
{
    while let Some((stream, peer, admitted)) = gate.accept(&listener).await {
        let shared = Arc::clone(&shared);
        // On Pingora's no-steal runtime a thread of its pool (as Pingora's own listeners
        // spread connections), else the current runtime.
        pingora_runtime::current_handle()
            .spawn(async move { connection(stream, peer, admitted, shared).await });
    }
}

/// One connection: its TLS handshake (the ClientHello read first), then Pingora, until the
/// connection ends, is evicted, or the gate closes.
async fn connection<SV>(
    stream: TcpStream,
    peer: SocketAddr,
    admitted: Admitted,
    shared: Arc<Shared<SV>>,
) where
    SV: ProxyHttp + Send + Sync + 'static,
    SV::CTX: Send + Sync,
{
    let _ = stream.set_nodelay(true);
    let stream = match &shared.acceptor {
        None => {
            shared.enforcer.metrics().record_connection(true);
            NetaclStream::plain(stream, ConnectionInfo::new(peer), admitted.requests())
        }
        Some(acceptor) => {
            let Some(tls) = handshake(stream, peer, &admitted, acceptor, &shared).await else {
                return;
            };
            tls
        }
    };
    // Evicted, or the gate closing: the connection is dropped.
    let _ = admitted
        .handshake(shared.app.process_new(Box::new(stream), &shared.shutdown))
        .await;
}

/// Reads the ClientHello (the fingerprints, the connection-level rules), then runs the rustls
/// handshake on the stream with the hello replayed; `None` when the connection is dropped.
async fn handshake<SV: ProxyHttp>(
    mut stream: TcpStream,
    peer: SocketAddr,
    admitted: &Admitted,
    acceptor: &TlsAcceptor,
    shared: &Shared<SV>,
) -> Option<NetaclStream> {
    let metrics = shared.enforcer.metrics();
    let read = admitted
        .handshake(read_client_hello(
            &mut stream,
            DEFAULT_MAX_HELLO_BYTES,
            shared.handshake_timeout,
        ))
        .await?;
    let (hello, consumed) = match read {
        Ok(read) => read,
        Err(failure) => {
            metrics.record_handshake_failure();
            tracing::debug!(peer = %peer, error = %failure, "no ClientHello");
            return None;
        }
    };
    let tls_info = TlsInfo::from_client_hello(&hello);
    if let ConnectionVerdict::Refuse { rule_id } =
        shared.enforcer.check_connection(peer.ip(), Some(&tls_info))
    {
        tracing::info!(
            target: "netacl_edge::access",
            door = crate::DOOR,
            peer = %peer,
            rule_id = %rule_id,
            ja4 = %tls_info.ja4,
            "connection refused before the TLS handshake"
        );
        return None;
    }
    let accepted = tokio::time::timeout(
        shared.handshake_timeout,
        acceptor.accept(Rewind::new(consumed, stream)),
    );
    match admitted.handshake(accepted).await? {
        Ok(Ok(tls)) => Some(NetaclStream::tls(
            tls,
            ConnectionInfo::new(peer).with_tls(tls_info),
            admitted.requests(),
        )),
        Ok(Err(err)) => {
            metrics.record_handshake_failure();
            tracing::debug!(peer = %peer, error = %err, "TLS handshake failed");
            None
        }
        Err(_) => {
            metrics.record_handshake_failure();
            tracing::debug!(peer = %peer, "TLS handshake timed out");
            None
        }
    }
}

//! `run_edge`: the reverse proxy (hyper 1 + rustls) with the ACL in front of it.
//!
//! What the proxy does with a request that passes: HTTP/1.1 and HTTP/2 (ALPN `h2`) from
//! clients; to the upstream, `http://` (HTTP/1.1) or `https://` (TLS with SNI, the certificate
//! verified against [`EdgeConfig::upstream_trust`], HTTP/2 when the upstream selects it by
//! ALPN, else HTTP/1.1), over pooled connections (see [`crate::origin`]). The client's host is
//! passed through (the `Host` header over HTTP/1.1, the `:authority` over HTTP/2; an HTTP/2
//! client's authority counts as its `Host`); hop-by-hop headers (and those named in
//! `Connection`, but never `Host`, `Content-Length` or a forwarding header) are dropped both
//! ways; the upstream gets exactly one `Host`, the one the decision read, and
//! `X-Forwarded-Host` set to it (a client's own `X-Forwarded-Host` and `Forwarded` `host=` are
//! dropped unless it is a trusted proxy); the peer address is appended to `X-Forwarded-For`,
//! `X-Forwarded-Proto` is set, and with [`ForwardedHeader::Forwarded`] an element of the edge's
//! own is appended to `Forwarded` (see `forwarding.rs`). WebSocket upgrades from HTTP/1.1 clients are passed through after
//! the ACL has let the upgrade request pass: the upstream gets the request on a connection of
//! its own, and after its `101` the two streams are joined byte for byte. Other upgrades (`h2c`
//! above all, which would carry later requests past the ACL) are not: such a request goes on as
//! an ordinary one without its `Upgrade` header. Not supported: upgrades over HTTP/2 (extended
//! CONNECT), a path prefix on the upstream. An
//! unreachable upstream, or one whose certificate is not trusted, is a `502` with a JSON body.
//!
//! Every connection is admitted and served through [`netacl_listener`] under
//! [`EdgeConfig::limits`]: connection caps (global, per client, the trusted proxies exempt),
//! header, idle and body timeouts (a late body is a `408` with a JSON body), and a graceful stop
//! ([`RunningEdge::close`], [`RunningEdge::drained`]).
pub(crate) mod forwarding;
pub(crate) mod layer;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use netacl_eval::Engine;
use netacl_listener::{
    Admitted, BodyError, ConnectionGate, ConnectionLimits, ListenerStats, RequestBody,
};
use netacl_model::{ManagedLists, RuleSet};
use netacl_tls::{ClientTrust, ServerCertificate, TlsError, TlsFiles};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::{Layer, Service, ServiceExt};

use crate::enforce::client_addr::{ClientAddrResolver, ForwardedHeader, TrustedProxies};
use crate::enforce::connection::{ConnectionInfo, TlsInfo};
use crate::enforce::{ConnectionVerdict, Enforcer};
use crate::observe::metrics::EdgeMetrics;
use crate::observe::sample::TrafficSample;
use crate::observe::tenant_counts::TenantSummarySink;
use crate::origin::{OriginClient, OriginUrlError};
use crate::proxy::forwarding::{judged_host, strip_hop_by_hop, Forwarding};
use crate::proxy::layer::AclLayer;
use crate::signals::fingerprint::{read_client_hello, Rewind, DEFAULT_MAX_HELLO_BYTES};
use crate::signals::geo::GeoEnricher;
use crate::sources::policy_sources::PolicySources;
use crate::sources::source::{
    spawn_file_source_with, spawn_remote_source_with, RemoteRules, SourceError,
};
use crate::sources::tenant_source::RemoteTenants;
use crate::tenants::sni::SniCertificates;
use crate::tenants::TenantRouter;

/// Why the edge could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EdgeError {
    /// `--upstream` is not an absolute `http://` or `https://` URL without a path.
    #[error("invalid upstream {0:?}: expected http://HOST[:PORT] or https://HOST[:PORT]")]
    InvalidUpstream(String),
    /// The trust anchors for an `https://` upstream could not be loaded.
    #[error("upstream TLS: {0}")]
    UpstreamTls(#[source] TlsError),
    /// Neither `--listen` nor `--listen-tls` was given (and no other front door serves the
    /// enforcer: [`EdgeConfig::front_doors`]).
    #[error("nothing to listen on: give --listen and/or --listen-tls")]
    NoListener,
    /// `--listen-tls` without a certificate and key.
    #[error("--listen-tls needs --tls-cert and --tls-key")]
    MissingTlsFiles,
    /// The listener's certificate or key could not be read or used (the error names the file).
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
    /// The GeoIP databases could not be opened.
    #[error("GeoIP databases: {0}")]
    Geo(#[from] crate::signals::geo::GeoError),
    /// The rules could not be loaded at start.
    #[error(transparent)]
    Rules(#[from] SourceError),
    /// A listener stopped.
    #[error("listener stopped: {0}")]
    Stopped(String),
}

/// Where the edge's rules come from.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum RulesSource {
    /// The engine given to [`run_edge`] is fed by its owner (`netacl serve` running the edge in
    /// process). Send each new rule set on [`EdgeConfig::rule_updates`] so that the
    /// connection-level check and the per-rule counters follow it.
    #[default]
    Engine,
    /// A rule file (a JSON array of records, or the list endpoint's envelope), polled every
    /// `interval` (mtime and length) and reloaded when it changes.
    File {
        /// The file.
        path: PathBuf,
        /// How often to look at it.
        interval: Duration,
    },
    /// A remote `netacl serve`, followed through its watch long-poll.
    Remote(RemoteRules),
}

/// Configuration of [`run_edge`]. Build with [`EdgeConfig::new`] and set the fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EdgeConfig {
    /// The upstream, `http://HOST:PORT` or `https://HOST:PORT` (a path prefix is not
    /// supported).
    pub upstream: Uri,
    /// Whom an `https://` upstream's certificate must chain to: the system's roots (default)
    /// or one CA file (`--upstream-ca`).
    pub upstream_trust: ClientTrust,
    /// Plain HTTP listener.
    pub listen: Option<SocketAddr>,
    /// TLS listener (needs `tls`).
    pub listen_tls: Option<SocketAddr>,
    /// Certificate and key for the TLS listener.
    pub tls: Option<TlsFiles>,
    /// How often the certificate and key files are checked for replacement (reloaded when
    /// they change; a pair that does not load is refused, the old one stays).
    pub tls_reload_interval: Duration,
    /// A directory of certificates chosen by SNI (`HOST.crt` + `HOST.key`, see
    /// [`SniCertificates`]); `tls` is then the default pair (optional).
    pub tls_cert_dir: Option<PathBuf>,
    /// Multi-tenant mode: the tenants, each request decided by its host's tenant (the engine
    /// given to [`start_edge`] is then not used). See the crate docs, "Many tenants".
    pub tenants: Option<Arc<TenantRouter>>,
    /// Peers whose forwarding header is believed.
    pub trusted_proxies: TrustedProxies,
    /// Which forwarding header they write.
    pub forwarded_header: ForwardedHeader,
    /// MaxMind City (or Country) database.
    pub geoip_city: Option<PathBuf>,
    /// MaxMind ASN database.
    pub geoip_asn: Option<PathBuf>,
    /// How often the GeoIP files are checked for changes.
    pub geoip_reload_interval: Duration,
    /// The admin-only metrics listener (`/metrics`); `None` for none.
    pub metrics_listen: Option<SocketAddr>,
    /// How often the per-rule `acls_summary` events are emitted.
    pub summary_interval: Duration,
    /// Where the per-rule summaries also go (the admin service in the same process). `None`:
    /// with [`RulesSource::Remote`] they are posted to that admin server
    /// (`/_netacl/v1/edge/summaries`), otherwise only logged.
    pub summary_sink: Option<crate::observe::metrics::SummarySink>,
    /// Multi-tenant mode: where each interval's per-rule summaries of every tenant go (the
    /// admin service in the same process). `None`: with [`platform`](Self::platform) they are
    /// posted to it (`/_netacl/v1/tenants/edge/summaries`), otherwise only logged.
    pub tenant_summary_sink: Option<TenantSummarySink>,
    /// Multi-tenant mode: the platform this edge follows (`netacl edge --platform-url`, see
    /// [`spawn_tenant_source`](crate::spawn_tenant_source)), to which it posts every tenant's
    /// summaries and its traffic sample, grouped by tenant, every `summary_interval`, with the
    /// operator token.
    pub platform: Option<RemoteTenants>,
    /// Multi-tenant mode: this edge's name in its reports to the [`platform`](Self::platform)
    /// (`netacl edge --edge-name`; at most 64 of `A-Za-z0-9._:-`, as the operator API takes
    /// it). A stable name lets a restarted edge replace its own sample and counts' source at
    /// the server instead of appearing as another edge. `None`: `edge-` and 16 random
    /// hexadecimal digits drawn at start.
    pub edge_name: Option<String>,
    /// Slots of the traffic sample kept for the impact preview (see [`TrafficSample`]); 0 keeps
    /// none. In multi-tenant mode one ring holds every tenant's requests, each slot keyed by its
    /// tenant. With [`RulesSource::Remote`] (or [`platform`](Self::platform)) the sample is
    /// posted to the admin server every `summary_interval` (`/_netacl/v1/edge/sample`, or
    /// `/_netacl/v1/tenants/edge/sample`); in process it is read through
    /// [`RunningEdge::sample`].
    pub sample_size: usize,
    /// One request in this many (per deciding thread) goes into the sample.
    pub sample_every: u32,
    /// `false` turns the ACL off (`--acl off`, for measuring its cost).
    pub acl_enabled: bool,
    /// Time allowed for a client to send its ClientHello and complete the handshake.
    pub handshake_timeout: Duration,
    /// Caps and timeouts of the proxy's listeners (`listen` and `listen_tls` share one
    /// [`ConnectionGate`]; its `trusted_proxies` are replaced by [`trusted_proxies`](Self::trusted_proxies)). The metrics
    /// listener takes the same timeouts and at most [`METRICS_MAX_CONNECTIONS`] connections.
    pub limits: ConnectionLimits,
    /// Where the rules come from.
    pub rules: RulesSource,
    /// With [`RulesSource::Engine`]: the rule sets installed in the engine, as they change.
    pub rule_updates: Option<watch::Receiver<Arc<RuleSet>>>,
    /// Managed lists from this edge's files (`--managed-list`), in force from the start and
    /// winning over the lists a remote admin server sends; follow the files with
    /// [`crate::list_files::follow_in_edge`]. Not used with [`RulesSource::Engine`] (the engine's
    /// owner compiles its own lists).
    pub managed_lists: ManagedLists,
    /// Another front door serves this edge's [`Enforcer`] (`netacl edge
    /// --forward-auth-listen`, crate `netacl-doors`): the edge may then start without
    /// `listen` and `listen_tls`, and without them `upstream` is not used (nor checked).
    pub front_doors: bool,
}

impl EdgeConfig {
    /// Defaults for everything but the upstream: the system's roots for an `https://`
    /// upstream, no listener yet, certificate files checked every 10 s, no trusted proxies,
    /// `X-Forwarded-For`, no GeoIP, metrics on `127.0.0.1:9464`, a summary every 10 minutes,
    /// ACL on, 10 s handshake timeout, the listener limits' defaults with
    /// [`DEFAULT_PROXY_MAX_CONNECTIONS`] connections, [`DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT`] per
    /// client, rules from the engine's owner.
    pub fn new(upstream: Uri) -> Self {
        Self {
            upstream,
            upstream_trust: ClientTrust::SystemRoots,
            listen: None,
            listen_tls: None,
            tls: None,
            tls_reload_interval: Duration::from_secs(10),
            tls_cert_dir: None,
            tenants: None,
            trusted_proxies: TrustedProxies::none(),
            forwarded_header: ForwardedHeader::default(),
            geoip_city: None,
            geoip_asn: None,
            geoip_reload_interval: Duration::from_secs(60),
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            summary_interval: Duration::from_secs(600),
            summary_sink: None,
            tenant_summary_sink: None,
            platform: None,
            edge_name: None,
            sample_size: crate::observe::sample::DEFAULT_SAMPLE_SIZE,
            sample_every: crate::observe::sample::DEFAULT_SAMPLE_EVERY,
            acl_enabled: true,
            handshake_timeout: Duration::from_secs(10),
            limits: default_limits(),
            rules: RulesSource::Engine,
            rule_updates: None,
            managed_lists: ManagedLists::new(),
            front_doors: false,
        }
    }
}

/// Default cap on the proxy's open connections (see [`EdgeConfig::limits`]): each may hold an
/// upstream connection too, so it counts two descriptors.
pub const DEFAULT_PROXY_MAX_CONNECTIONS: usize = 16_384;

/// Default cap on the proxy's open connections from one client address (IPv6: one /64).
pub const DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT: usize = 256;

/// Connections the metrics listener takes at once (from any client: it is an admin listener).
pub const METRICS_MAX_CONNECTIONS: usize = 64;

fn default_limits() -> ConnectionLimits {
    let mut limits = ConnectionLimits::default();
    limits.max_connections = DEFAULT_PROXY_MAX_CONNECTIONS;
    limits.max_connections_per_client = DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT;
    limits
}

/// A started edge: its listeners are bound and serving.
pub struct RunningEdge {
    enforcer: Arc<Enforcer>,
    sources: Option<Arc<PolicySources>>,
    http_addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    /// The proxy listeners' gate, then the metrics listener's.
    gates: Vec<ConnectionGate>,
    tasks: JoinSet<Result<(), EdgeError>>,
}

impl std::fmt::Debug for RunningEdge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningEdge")
            .field("http_addr", &self.http_addr)
            .field("tls_addr", &self.tls_addr)
            .field("metrics_addr", &self.metrics_addr)
            .finish_non_exhaustive()
    }
}

impl RunningEdge {
    /// The bound plain-HTTP address.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The bound TLS address.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The bound metrics address.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The traffic sample of this edge's requests ([`EdgeConfig::sample_size`] above 0; in
    /// multi-tenant mode every tenant's, read one tenant at a time with
    /// [`TrafficSample::requests_of`] and the tenant's
    /// [`sample_key`](crate::TenantRuleCounts::sample_key)).
    pub fn sample(&self) -> Option<&Arc<TrafficSample>> {
        self.enforcer.sample()
    }

    /// The enforcing core (counters, engine).
    pub fn enforcer(&self) -> &Arc<Enforcer> {
        &self.enforcer
    }

    /// What the policy is compiled from (rules, the server's lists, this edge's list files);
    /// `None` for an edge whose engine is fed by its owner ([`RulesSource::Engine`]).
    pub fn policy_sources(&self) -> Option<Arc<PolicySources>> {
        self.sources.clone()
    }

    /// The counters of the proxy's listeners (refused, evicted and timed-out connections).
    pub fn listener_stats(&self) -> ListenerStats {
        self.gates
            .first()
            .map(ConnectionGate::stats)
            .unwrap_or_default()
    }

    /// Serves until a listener fails (or, after [`close`](Self::close), until the listeners
    /// and background tasks have stopped).
    pub async fn wait(&mut self) -> Result<(), EdgeError> {
        while let Some(joined) = self.tasks.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(err),
                Err(err) if err.is_cancelled() => {}
                Err(err) => return Err(EdgeError::Stopped(err.to_string())),
            }
        }
        Ok(())
    }

    /// Starts a graceful stop: the listeners stop accepting, connections with nothing in flight
    /// close, those serving a request finish it (see [`ConnectionGate::close`]).
    pub fn close(&self) {
        for gate in &self.gates {
            gate.close();
        }
    }

    /// Waits until every connection of the listeners is closed (after [`close`](Self::close);
    /// bound it with a timeout, the grace period).
    pub async fn drained(&self) {
        for gate in &self.gates {
            gate.drained().await;
        }
    }

    /// Stops every listener, connection and background task at once.
    pub fn shutdown(mut self) {
        self.close();
        self.tasks.abort_all();
    }
}

/// Runs the edge until a listener fails: binds, then serves. See [`start_edge`].
pub async fn run_edge(engine: Arc<Engine>, config: EdgeConfig) -> Result<(), EdgeError> {
    start_edge(engine, config).await?.wait().await
}

/// Binds the listeners, loads the rules (a bad rule file or an unreachable admin server at
/// start is an error only for the file; the remote source keeps retrying with the empty
/// policy installed) and starts serving in background tasks.
pub async fn start_edge(engine: Arc<Engine>, config: EdgeConfig) -> Result<RunningEdge, EdgeError> {
    let proxying = config.listen.is_some() || config.listen_tls.is_some();
    if !proxying && !config.front_doors {
        return Err(EdgeError::NoListener);
    }
    // Only front doors (no proxy listener): no upstream to reach.
    let upstream = match proxying {
        true => Some(upstream_client(&config)?),
        false => None,
    };
    let mut tasks = JoinSet::new();
    let (acceptor, certificates) = tls_acceptor(&config, &mut tasks)?;
    let metrics = Arc::new(EdgeMetrics::new());
    let enforcer = build_enforcer(engine, &config, &metrics, certificates)?;
    if enforcer.geo().is_some() {
        // Reloads rebuild the enriched policy: the enforcer watches the files.
        let watcher = enforcer.spawn_geo_watcher(config.geoip_reload_interval);
        tasks.spawn(async move {
            let _ = watcher.await;
            Ok(())
        });
    }
    let sources = follow_rules(&enforcer, &config, &mut tasks).await?;
    report_counts(&enforcer, &metrics, &config, &mut tasks);
    let forwarding = Arc::new(Forwarding::new(
        config.trusted_proxies.clone(),
        config.forwarded_header,
    ));
    let service = upstream.map(|upstream| {
        AclLayer::new(enforcer.clone()).layer(ProxyService {
            upstream,
            forwarding,
        })
    });
    let bound = listen(&config, &enforcer, service, acceptor, metrics, &mut tasks).await?;
    // Only a proxy listener has an upstream; front doors alone name none.
    let upstream = proxying.then(|| config.upstream.to_string());
    tracing::info!(
        http = ?bound.http_addr,
        tls = ?bound.tls_addr,
        metrics = ?bound.metrics_addr,
        upstream = upstream.as_deref(),
        "netacl edge listening"
    );
    Ok(RunningEdge {
        enforcer,
        sources,
        http_addr: bound.http_addr,
        tls_addr: bound.tls_addr,
        metrics_addr: bound.metrics_addr,
        gates: bound.gates,
        tasks,
    })
}

/// The background tasks of a running edge (watchers, sources, reporters, accept loops).
type Tasks = JoinSet<Result<(), EdgeError>>;

/// Runs `task` among the edge's tasks until it ends (its own outcome is not an edge error).
fn keep<T: Send + 'static>(tasks: &mut Tasks, task: tokio::task::JoinHandle<T>) {
    tasks.spawn(async move {
        let _ = task.await;
        Ok(())
    });
}

/// Step 1: the client of the upstream the proxy forwards to.
fn upstream_client(config: &EdgeConfig) -> Result<OriginClient<RequestBody>, EdgeError> {
    OriginClient::new(
        &config.upstream,
        &config.upstream_trust,
        true,
        UPSTREAM_CONNECT_TIMEOUT,
    )
    .map_err(|err| match err {
        OriginUrlError::Shape => EdgeError::InvalidUpstream(config.upstream.to_string()),
        OriginUrlError::Tls(err) => EdgeError::UpstreamTls(err),
    })
}

/// Step 2: the TLS listener's acceptor (one certificate, or one per SNI from a directory), its
/// reload watcher started; the certificates by SNI, if any, for the enforcer.
fn tls_acceptor(
    config: &EdgeConfig,
    tasks: &mut Tasks,
) -> Result<(Option<TlsAcceptor>, Option<Arc<SniCertificates>>), EdgeError> {
    match (config.listen_tls, &config.tls_cert_dir) {
        (Some(_), Some(dir)) => {
            let by_sni = SniCertificates::load(dir, config.tls.clone()).map_err(EdgeError::Tls)?;
            let acceptor = by_sni.acceptor().map_err(EdgeError::Tls)?;
            keep(tasks, by_sni.watch(config.tls_reload_interval));
            Ok((Some(acceptor), Some(by_sni)))
        }
        (Some(_), None) => {
            let files = config.tls.as_ref().ok_or(EdgeError::MissingTlsFiles)?;
            let certificate = ServerCertificate::load(files.clone()).map_err(EdgeError::Tls)?;
            let acceptor = certificate.acceptor().map_err(EdgeError::Tls)?;
            keep(tasks, certificate.watch(config.tls_reload_interval));
            Ok((Some(acceptor), None))
        }
        (None, _) => Ok((None, None)),
    }
}

/// Step 3: the enforcer: the client-address resolver, GeoIP databases, the tenants (with the
/// certificates by SNI), the traffic sample, or the ACL turned off.
fn build_enforcer(
    engine: Arc<Engine>,
    config: &EdgeConfig,
    metrics: &Arc<EdgeMetrics>,
    certificates: Option<Arc<SniCertificates>>,
) -> Result<Arc<Enforcer>, EdgeError> {
    let resolver = ClientAddrResolver::new(config.trusted_proxies.clone(), config.forwarded_header);
    let mut enforcer = Enforcer::new(engine, resolver).with_metrics(metrics.clone());
    if config.geoip_city.is_some() || config.geoip_asn.is_some() {
        let geo = Arc::new(GeoEnricher::open(
            config.geoip_city.as_deref(),
            config.geoip_asn.as_deref(),
        )?);
        enforcer = enforcer.with_geo(geo);
    }
    if let Some(tenants) = &config.tenants {
        enforcer = enforcer.with_tenants(tenants.clone());
        if let Some(certificates) = certificates {
            enforcer = enforcer.with_certificates(certificates);
        }
    }
    if config.sample_size > 0 && config.acl_enabled {
        enforcer = enforcer.with_sample(Arc::new(TrafficSample::new(
            config.sample_size,
            config.sample_every,
        )));
    }
    if !config.acl_enabled {
        enforcer = enforcer.disabled();
        tracing::warn!("the network ACL is OFF (--acl off): every request passes unchecked");
    }
    Ok(Arc::new(enforcer))
}

/// Step 4: where the rules come from: the engine `netacl serve` feeds (its rule sets followed
/// for the connection-level rules), a rule file, or a remote admin server (waited for a
/// bounded time). The policy's inputs, when the edge compiles its own policy.
async fn follow_rules(
    enforcer: &Arc<Enforcer>,
    config: &EdgeConfig,
    tasks: &mut Tasks,
) -> Result<Option<Arc<PolicySources>>, EdgeError> {
    match &config.rules {
        RulesSource::Engine => {
            // Multi-tenant mode decides with the tenants' engines: the enforcer's own engine,
            // its connection rules and its per-rule table (Prometheus series) stay unused.
            let updates = config
                .rule_updates
                .clone()
                .filter(|_| config.tenants.is_none());
            if let Some(mut updates) = updates {
                let enforcer = enforcer.clone();
                tasks.spawn(async move {
                    loop {
                        let rules = updates.borrow_and_update().clone();
                        let observer = enforcer.clone();
                        let result =
                            tokio::task::spawn_blocking(move || observer.observe_rules(&rules))
                                .await;
                        if let Ok(Err(err)) = result {
                            tracing::error!(error = %err, "connection-level rules not updated");
                        }
                        if updates.changed().await.is_err() {
                            return Ok(());
                        }
                    }
                });
            }
            Ok(None)
        }
        RulesSource::File { path, interval } => {
            let inputs = Arc::new(PolicySources::new(
                enforcer.clone(),
                config.managed_lists.clone(),
            ));
            let task = spawn_file_source_with(Arc::clone(&inputs), path.clone(), *interval).await?;
            keep(tasks, task);
            Ok(Some(inputs))
        }
        RulesSource::Remote(remote) => {
            let inputs = Arc::new(PolicySources::new(
                enforcer.clone(),
                config.managed_lists.clone(),
            ));
            let (task, mut installed) =
                spawn_remote_source_with(Arc::clone(&inputs), remote.clone())?;
            // Serving before the first rule set arrives would enforce nothing: wait a bounded
            // time for it, then serve regardless (the source keeps retrying).
            let first = tokio::time::timeout(
                remote.initial_wait,
                installed.wait_for(|version| version.is_some()),
            )
            .await;
            if !matches!(first, Ok(Ok(_))) {
                tracing::error!(
                    url = %remote.url,
                    waited = ?remote.initial_wait,
                    "no rules from the admin server yet: serving with NO rules until they arrive"
                );
            }
            keep(tasks, task);
            Ok(Some(inputs))
        }
    }
}

/// Step 5: the per-rule summaries and the traffic sample, reported to the admin server the edge
/// follows (single tenant) or to the platform, each tenant's to its own log (many tenants).
fn report_counts(
    enforcer: &Arc<Enforcer>,
    metrics: &Arc<EdgeMetrics>,
    config: &EdgeConfig,
    tasks: &mut Tasks,
) {
    let sink = match (&config.summary_sink, &config.rules) {
        (Some(sink), _) => Some(sink.clone()),
        (None, RulesSource::Remote(remote)) => crate::sources::summaries::remote_sink(remote),
        (None, _) => None,
    };
    if let (RulesSource::Remote(remote), Some(sample)) = (&config.rules, enforcer.sample()) {
        if let Some(poster) = crate::sources::summaries::spawn_sample_poster(
            remote,
            Arc::clone(sample),
            config.summary_interval,
        ) {
            keep(tasks, poster);
        }
    }
    match &config.tenants {
        // Multi-tenant: each tenant's rules are counted in its own table and reported to its
        // own log; the enforcer's own table counts nothing.
        Some(router) => {
            // This edge's name in its reports to the platform.
            let edge_id = config.edge_name.clone().unwrap_or_else(edge_name);
            let sink = match (&config.tenant_summary_sink, &config.platform) {
                (Some(sink), _) => Some(sink.clone()),
                (None, Some(platform)) => {
                    crate::sources::summaries::platform_sink(platform, edge_id.clone())
                }
                (None, None) => None,
            };
            keep(
                tasks,
                crate::sources::summaries::spawn_tenant_summaries(
                    Arc::clone(router),
                    config.summary_interval,
                    sink,
                ),
            );
            if let (Some(platform), Some(sample)) = (&config.platform, enforcer.sample()) {
                if let Some(poster) = crate::sources::summaries::spawn_platform_sample_poster(
                    platform,
                    edge_id.clone(),
                    Arc::clone(router),
                    Arc::clone(sample),
                    config.summary_interval,
                ) {
                    keep(tasks, poster);
                }
            }
            if config.platform.is_some() {
                tracing::info!(edge = %edge_id, "reporting each tenant's counts and sample to the platform");
            }
        }
        None => keep(
            tasks,
            metrics
                .clone()
                .spawn_summary_to(config.summary_interval, sink),
        ),
    }
}

/// The listeners bound by [`listen`].
struct Bound {
    http_addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    gates: Vec<ConnectionGate>,
}

/// Step 6: binds the plain-HTTP, TLS and metrics listeners and starts their accept loops, each
/// behind its connection gate.
async fn listen(
    config: &EdgeConfig,
    enforcer: &Arc<Enforcer>,
    service: Option<EdgeService>,
    acceptor: Option<TlsAcceptor>,
    metrics: Arc<EdgeMetrics>,
    tasks: &mut Tasks,
) -> Result<Bound, EdgeError> {
    // One meaning for --trusted-proxy: the peers whose forwarding headers are believed are the
    // peers whose connections are not counted per client.
    let mut limits = config.limits.clone();
    limits.trusted_proxies = config.trusted_proxies.clone();
    let proxy_gate = ConnectionGate::new(limits.clone());
    let mut gates = vec![proxy_gate.clone()];

    let mut http_addr = None;
    if let (Some(addr), Some(service)) = (config.listen, &service) {
        let listener = bind(addr).await?;
        http_addr = Some(
            listener
                .local_addr()
                .map_err(|source| EdgeError::Bind { addr, source })?,
        );
        let ctx = Accept {
            enforcer: enforcer.clone(),
            service: service.clone(),
            acceptor: None,
            handshake_timeout: config.handshake_timeout,
            gate: proxy_gate.clone(),
        };
        tasks.spawn(accept_loop(listener, ctx));
    }
    let mut tls_addr = None;
    if let (Some(addr), Some(acceptor), Some(service)) = (config.listen_tls, acceptor, &service) {
        let listener = bind(addr).await?;
        tls_addr = Some(
            listener
                .local_addr()
                .map_err(|source| EdgeError::Bind { addr, source })?,
        );
        let ctx = Accept {
            enforcer: enforcer.clone(),
            service: service.clone(),
            acceptor: Some(acceptor),
            handshake_timeout: config.handshake_timeout,
            gate: proxy_gate.clone(),
        };
        tasks.spawn(accept_loop(listener, ctx));
    }
    let mut metrics_addr = None;
    if let Some(addr) = config.metrics_listen {
        let listener = bind(addr).await?;
        metrics_addr = Some(
            listener
                .local_addr()
                .map_err(|source| EdgeError::Bind { addr, source })?,
        );
        let mut metrics_limits = limits;
        metrics_limits.max_connections = METRICS_MAX_CONNECTIONS;
        metrics_limits.max_connections_per_client = METRICS_MAX_CONNECTIONS;
        let metrics_gate = ConnectionGate::new(metrics_limits);
        gates.push(metrics_gate.clone());
        let listeners = Listeners {
            proxy: proxy_gate.clone(),
            metrics: metrics_gate,
        };
        tasks.spawn(metrics_loop(
            listener,
            listeners,
            metrics,
            config.tenants.clone(),
        ));
    }
    Ok(Bound {
        http_addr,
        tls_addr,
        metrics_addr,
        gates,
    })
}

/// A name for this edge process in its reports to a platform: `edge-` and 16 random
/// hexadecimal digits.
fn edge_name() -> String {
    let mut bytes = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        // No randomness: the time still tells this process from its predecessors.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        bytes = nanos.to_be_bytes();
    }
    format!("edge-{}", hex::encode(bytes))
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, EdgeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| EdgeError::Bind { addr, source })
}

type EdgeService = crate::proxy::layer::AclService<ProxyService>;

#[derive(Clone)]
struct Accept {
    enforcer: Arc<Enforcer>,
    service: EdgeService,
    acceptor: Option<TlsAcceptor>,
    handshake_timeout: Duration,
    gate: ConnectionGate,
}

/// Accepts the connections its gate admits (the others are closed at once) until the gate
/// closes.
async fn accept_loop(listener: TcpListener, ctx: Accept) -> Result<(), EdgeError> {
    while let Some((stream, peer, admitted)) = ctx.gate.accept(&listener).await {
        let ctx = ctx.clone();
        tokio::spawn(async move { serve_connection(stream, peer, admitted, ctx).await });
    }
    Ok(())
}

async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    admitted: Admitted,
    ctx: Accept,
) {
    let Some(acceptor) = ctx.acceptor.clone() else {
        // Plain HTTP: no connection-level refusal; a blocked request gets its 403, which costs
        // about as much as closing and tells the client what happened.
        ctx.enforcer.metrics().record_connection(true);
        serve_http(stream, admitted, ConnectionInfo::new(peer), ctx.service).await;
        return;
    };
    // Evicted, or the edge stopping, before the handshake completes: just close.
    let read = admitted
        .handshake(read_client_hello(
            &mut stream,
            DEFAULT_MAX_HELLO_BYTES,
            ctx.handshake_timeout,
        ))
        .await;
    let Some(read) = read else { return };
    let (hello, consumed) = match read {
        Ok(read) => read,
        Err(failure) => {
            ctx.enforcer.metrics().record_handshake_failure();
            tracing::debug!(peer = %peer, error = %failure, "no ClientHello");
            return;
        }
    };
    let tls_info = TlsInfo::from_client_hello(&hello);
    if let ConnectionVerdict::Refuse { rule_id } =
        ctx.enforcer.check_connection(peer.ip(), Some(&tls_info))
    {
        tracing::info!(
            target: "netacl_edge::access",
            peer = %peer,
            rule_id = %rule_id,
            ja4 = %tls_info.ja4,
            "connection refused before the TLS handshake"
        );
        return;
    }
    let handshake = acceptor.accept(Rewind::new(consumed, stream));
    let handshake = tokio::time::timeout(ctx.handshake_timeout, handshake);
    let Some(handshake) = admitted.handshake(handshake).await else {
        return;
    };
    let tls = match handshake {
        Ok(Ok(tls)) => tls,
        Ok(Err(err)) => {
            ctx.enforcer.metrics().record_handshake_failure();
            tracing::debug!(peer = %peer, error = %err, "TLS handshake failed");
            return;
        }
        Err(_) => {
            ctx.enforcer.metrics().record_handshake_failure();
            tracing::debug!(peer = %peer, "TLS handshake timed out");
            return;
        }
    };
    let info = ConnectionInfo::new(peer).with_tls(tls_info);
    serve_http(tls, admitted, info, ctx.service).await;
}

/// Serves HTTP/1.1 and HTTP/2 on an admitted connection, under its gate's timeouts (see
/// [`netacl_listener`]); every request carries the connection's [`ConnectionInfo`].
async fn serve_http<I>(io: I, admitted: Admitted, info: ConnectionInfo, service: EdgeService)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |mut request: Request<RequestBody>| {
        request.extensions_mut().insert(info.clone());
        service.clone().oneshot(request)
    });
    admitted.serve(io, svc).await;
}

/// The body of the proxy's responses: the upstream's, or its own (502).
type ProxyBody = Either<Incoming, Full<Bytes>>;

/// Time allowed to connect to the upstream (TCP and TLS handshake).
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Forwards requests to the upstream.
#[derive(Clone)]
struct ProxyService {
    upstream: OriginClient<RequestBody>,
    /// The host, client and scheme told to the upstream.
    forwarding: Arc<Forwarding>,
}

const BAD_GATEWAY_BODY: &str = r#"{"statusCode":502,"error":"Bad Gateway","message":"Upstream unavailable","errorCode":"bad_gateway"}"#;

/// The answer to a request whose body missed its deadline (see [`EdgeConfig::limits`]).
const REQUEST_TIMEOUT_BODY: &str = r#"{"statusCode":408,"error":"Request Timeout","message":"The request body did not arrive in time","errorCode":"request_timeout"}"#;

/// Whether an `Upgrade` value names WebSocket and nothing else (`websocket`, any case, with or
/// without a version).
fn is_websocket(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|v| {
        v.split(',').all(|protocol| {
            let name = protocol.trim().split('/').next().unwrap_or_default();
            name.eq_ignore_ascii_case("websocket")
        })
    })
}

/// Whether an HTTP/1.1 request asks to switch to WebSocket (`Connection: upgrade` and
/// `Upgrade: websocket`): the upgrade, if the upstream accepts it, is passed through.
///
/// Other protocols are not: after an upgrade the edge only copies bytes, so an upgrade to
/// `h2c` (or anything that carries HTTP requests) would let every later request on that
/// connection reach the upstream unchecked by the ACL. Such a request goes on as an ordinary
/// request, its `Upgrade` header dropped with the other hop-by-hop headers.
fn upgrade_requested(parts: &http::request::Parts) -> Option<HeaderValue> {
    if parts.version != http::Version::HTTP_11 {
        return None;
    }
    let upgrade = parts
        .headers
        .get(header::UPGRADE)
        .filter(|v| is_websocket(v))?;
    let asks = parts
        .headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    asks.then(|| upgrade.clone())
}

/// Puts back the two headers of an upgrade that [`strip_hop_by_hop`] removed.
fn set_upgrade_headers(headers: &mut http::HeaderMap, upgrade: HeaderValue) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, upgrade);
}

/// Joins the client's upgraded connection and the upstream's, byte for byte, until either
/// side closes.
fn join_upgraded(client: hyper::upgrade::OnUpgrade, upstream: hyper::upgrade::OnUpgrade) {
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(both) => both,
            Err(err) => {
                tracing::debug!(error = %err, "upgrade not completed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        if let Err(err) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(error = %err, "upgraded connection ended with an error");
        }
    });
}

impl Service<Request<RequestBody>> for ProxyService {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let upstream = self.upstream.clone();
        let forwarding = Arc::clone(&self.forwarding);
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            let peer = parts.extensions.get::<ConnectionInfo>().map(|c| c.peer);
            let tls = parts
                .extensions
                .get::<ConnectionInfo>()
                .is_some_and(|c| c.tls.is_some());
            let upgrade = upgrade_requested(&parts);
            let client_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
            let path_and_query = parts
                .uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
            // The host the decision read (HTTP/2 requests carry it in the URI, not a Host
            // header): the one Host the upstream gets, and its X-Forwarded-Host.
            let host = judged_host(&parts.headers, parts.uri.authority());
            parts.uri = Uri::from(path_and_query);
            parts.extensions = http::Extensions::new();
            strip_hop_by_hop(&mut parts.headers);
            if let Some(upgrade) = &upgrade {
                set_upgrade_headers(&mut parts.headers, upgrade.clone());
            }
            forwarding.apply(&mut parts.headers, host, peer, tls);
            let forwarded = Request::from_parts(parts, body);
            let answered = match upgrade {
                Some(_) => upstream.send_upgrade(forwarded).await,
                None => upstream.send(forwarded).await,
            };
            match answered {
                Ok(mut response) => {
                    let switched = response.status() == StatusCode::SWITCHING_PROTOCOLS;
                    let accepted = response
                        .headers()
                        .get(header::UPGRADE)
                        .filter(|v| is_websocket(v))
                        .cloned();
                    let upstream_upgrade = switched
                        .then(|| {
                            response
                                .extensions_mut()
                                .remove::<hyper::upgrade::OnUpgrade>()
                        })
                        .flatten();
                    let (mut parts, body) = response.into_parts();
                    strip_hop_by_hop(&mut parts.headers);
                    parts.version = http::Version::HTTP_11;
                    match (client_upgrade, upstream_upgrade, accepted) {
                        (Some(client), Some(upstream), Some(accepted)) => {
                            set_upgrade_headers(&mut parts.headers, accepted);
                            join_upgraded(client, upstream);
                        }
                        // A 101 that cannot be joined (no upgrade asked for, or not to
                        // WebSocket) must not reach the client.
                        _ if switched => {
                            tracing::warn!(
                                "upstream switched protocols without an upgrade to join"
                            );
                            return Ok(own(StatusCode::BAD_GATEWAY, BAD_GATEWAY_BODY));
                        }
                        _ => {}
                    }
                    Ok(Response::from_parts(parts, Either::Left(body)))
                }
                // The client's body was late: not the upstream's failure.
                Err(err) if BodyError::is_timeout(&err) => {
                    tracing::debug!(error = %err, "request body timed out");
                    Ok(own(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT_BODY))
                }
                Err(err) => {
                    tracing::warn!(error = %err, "upstream request failed");
                    Ok(own(StatusCode::BAD_GATEWAY, BAD_GATEWAY_BODY))
                }
            }
        })
    }
}

fn own(status: StatusCode, body: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from_static(
        body.as_bytes(),
    ))));
    *response.status_mut() = status;
    if !body.is_empty() {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    response
}

/// The gates whose counters the metrics listener shows.
struct Listeners {
    proxy: ConnectionGate,
    metrics: ConnectionGate,
}

async fn metrics_loop(
    listener: TcpListener,
    listeners: Listeners,
    metrics: Arc<EdgeMetrics>,
    tenants: Option<Arc<TenantRouter>>,
) -> Result<(), EdgeError> {
    let listeners = Arc::new(listeners);
    let gate = listeners.metrics.clone();
    while let Some((stream, _, admitted)) = gate.accept(&listener).await {
        let metrics = metrics.clone();
        let tenants = tenants.clone();
        let listeners = listeners.clone();
        let svc = hyper::service::service_fn(move |request: Request<RequestBody>| {
            let response = if request.uri().path() == "/metrics" {
                let mut text = metrics.render_prometheus();
                if let Some(tenants) = &tenants {
                    text.push_str(&tenants.render_prometheus());
                }
                let mut all = vec![
                    ("proxy", listeners.proxy.stats()),
                    ("metrics", listeners.metrics.stats()),
                ];
                all.extend(metrics.extra_listeners());
                text.push_str(&crate::observe::metrics::render_listeners(&all));
                let mut r = Response::new(Full::new(Bytes::from(text)));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; version=0.0.4"),
                );
                r
            } else {
                let mut r = Response::new(Full::new(Bytes::new()));
                *r.status_mut() = StatusCode::NOT_FOUND;
                r
            };
            std::future::ready(Ok::<_, Infallible>(response))
        });
        tokio::spawn(admitted.serve(stream, svc));
    }
    Ok(())
}

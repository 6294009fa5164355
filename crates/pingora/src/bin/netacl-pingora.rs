//! `netacl-pingora`: the reference Pingora proxy with the netacl engine in its request filter.
//!
//! Every flag is also an environment variable (`NETACL_PINGORA_...`). On start it prints one
//! line to stdout with the bound addresses (`netacl-pingora listening: http=... tls=...
//! metrics=...`); logs go to stderr (`RUST_LOG` filters them, `info` by default).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Parser;
use netacl_edge::list_files::{self, ListFile};
use netacl_edge::{
    spawn_tenant_source, start_edge, EdgeConfig, ForwardedHeader, RemoteRules, RemoteTenants,
    RulesSource, TenantRouter, TlsFiles, TrustedProxies,
};
use netacl_listener::parse_duration;
use netacl_pingora::{NetaclProxy, ServeConfig};

/// The netacl engine inside a Pingora proxy.
#[derive(Parser)]
#[command(name = "netacl-pingora", version)]
struct Args {
    /// The upstream, `HOST:PORT` (plain HTTP/1.1), resolved once at start.
    #[arg(long, env = "NETACL_PINGORA_UPSTREAM")]
    upstream: String,
    /// Plain-HTTP listen address.
    #[arg(long, env = "NETACL_PINGORA_LISTEN")]
    listen: Option<SocketAddr>,
    /// TLS listen address (needs --tls-cert and --tls-key); HTTP/1.1 and HTTP/2 by ALPN.
    #[arg(long, env = "NETACL_PINGORA_LISTEN_TLS")]
    listen_tls: Option<SocketAddr>,
    /// Certificate chain, PEM.
    #[arg(long, env = "NETACL_PINGORA_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// Private key, PEM.
    #[arg(long, env = "NETACL_PINGORA_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// How often the certificate and key are checked for replacement.
    #[arg(long, env = "NETACL_PINGORA_TLS_RELOAD_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    tls_reload_interval: Duration,
    /// A CIDR (or address) of a reverse proxy in front whose forwarding header is believed.
    /// Repeatable; comma-separated in the environment variable.
    #[arg(
        long = "trusted-proxy",
        env = "NETACL_PINGORA_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    trusted_proxy: Vec<String>,
    /// The forwarding header the trusted proxies write: `x-forwarded-for` or `forwarded`.
    #[arg(
        long,
        env = "NETACL_PINGORA_FORWARDED_HEADER",
        default_value = "x-forwarded-for"
    )]
    forwarded_header: String,
    /// MaxMind City or Country database (country and subdivision), compiled into the policy.
    #[arg(long, env = "NETACL_PINGORA_GEOIP_CITY")]
    geoip_city: Option<PathBuf>,
    /// MaxMind ASN database, compiled into the policy.
    #[arg(long, env = "NETACL_PINGORA_GEOIP_ASN")]
    geoip_asn: Option<PathBuf>,
    /// How often the GeoIP files are checked for changes (e.g. `60s`).
    #[arg(long, env = "NETACL_PINGORA_GEOIP_RELOAD_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    geoip_reload_interval: Duration,
    /// The content of a managed list (`auth0_managed`) from a file: NAME=PATH, one entry a
    /// line; repeatable (comma-separated in the variable). Wins over the list the admin server
    /// of --rules-url sends. Checked every second; a malformed file is logged and the last good
    /// content stays. Not with --platform-url (each tenant's lists come from the platform).
    #[arg(
        long = "managed-list",
        value_name = "NAME=PATH",
        env = "NETACL_PINGORA_MANAGED_LISTS",
        value_delimiter = ',',
        value_parser = netacl_edge::list_files::parse_flag,
        conflicts_with = "platform_url"
    )]
    managed_list: Vec<(netacl_model::ManagedListName, PathBuf)>,
    /// Load the rules from a file (JSON array of records, or `{"network_acls": [...]}`),
    /// reloaded when it changes; a file that does not load is refused, the last good rules stay.
    #[arg(long, env = "NETACL_PINGORA_RULES_FILE", conflicts_with_all = ["rules_url", "platform_url"])]
    rules_file: Option<PathBuf>,
    /// How often the rule file is checked for changes.
    #[arg(long, env = "NETACL_PINGORA_RULES_FILE_INTERVAL", default_value = "250ms", value_parser = parse_duration)]
    rules_file_interval: Duration,
    /// Follow the rules of a remote `netacl serve`, `https://HOST:PORT` (`http://` on loopback).
    #[arg(
        long,
        env = "NETACL_PINGORA_RULES_URL",
        conflicts_with = "platform_url"
    )]
    rules_url: Option<String>,
    /// Client id for --rules-url (needs the read:network_acls scope).
    #[arg(long, env = "NETACL_PINGORA_CLIENT_ID", requires = "rules_url")]
    client_id: Option<String>,
    /// Client secret for --rules-url.
    #[arg(
        long,
        env = "NETACL_PINGORA_CLIENT_SECRET",
        hide_env_values = true,
        requires = "rules_url"
    )]
    client_secret: Option<String>,
    /// Token audience for --rules-url (default `https://HOST:PORT/api/v2/` of the URL).
    #[arg(long, env = "NETACL_PINGORA_AUDIENCE", requires = "rules_url")]
    audience: Option<String>,
    /// Enforce every tenant of a platform (`netacl serve` with many tenants): each request
    /// decided by its host's tenant (TLS: the SNI); a host of no tenant gets 421.
    #[arg(
        long,
        env = "NETACL_PINGORA_PLATFORM_URL",
        requires = "operator_token_file"
    )]
    platform_url: Option<String>,
    /// With --platform-url: the file holding the platform's operator token.
    #[arg(
        long,
        env = "NETACL_PINGORA_OPERATOR_TOKEN_FILE",
        value_name = "PATH",
        requires = "platform_url"
    )]
    operator_token_file: Option<PathBuf>,
    /// Admin-only Prometheus listener (`/metrics`), or `off`.
    #[arg(
        long,
        env = "NETACL_PINGORA_METRICS_LISTEN",
        default_value = "127.0.0.1:9464"
    )]
    metrics_listen: String,
    /// Interval of the per-rule `acls_summary` log events.
    #[arg(long, env = "NETACL_PINGORA_SUMMARY_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    summary_interval: Duration,
    /// Requests kept in the traffic sample for the impact preview (0: none).
    #[arg(long, env = "NETACL_PINGORA_SAMPLE_SIZE", default_value_t = netacl_edge::DEFAULT_SAMPLE_SIZE)]
    sample_size: usize,
    /// One request in this many (per thread) goes into the traffic sample.
    #[arg(long, env = "NETACL_PINGORA_SAMPLE_EVERY", default_value_t = netacl_edge::DEFAULT_SAMPLE_EVERY, value_parser = clap::value_parser!(u32).range(1..))]
    sample_every: u32,
    /// `on`, or `off` to proxy without evaluating anything (to measure the ACL's cost).
    #[arg(long, env = "NETACL_PINGORA_ACL", default_value = "on", value_parser = ["on", "off"])]
    acl: String,
    /// Log format on stderr: `text` or `json`.
    #[arg(long, env = "NETACL_PINGORA_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Time a client has to send its ClientHello and complete the TLS handshake.
    #[arg(long, env = "NETACL_PINGORA_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    handshake_timeout: Duration,
    /// Pingora's timeout for each read of a request (head and body).
    #[arg(long, env = "NETACL_PINGORA_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    header_read_timeout: Duration,
    /// Time a connection may wait for its next request (whole seconds).
    #[arg(long, env = "NETACL_PINGORA_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Connections open at once (default 16384, lowered to fit the descriptor limit at two
    /// descriptors each); over it the longest-idle one is closed to admit a new one.
    #[arg(long, env = "NETACL_PINGORA_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Connections open at once from one client address (IPv6: one /64; the trusted proxies
    /// are not counted).
    #[arg(long, env = "NETACL_PINGORA_MAX_CONNECTIONS_PER_CLIENT", default_value_t = netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT)]
    max_connections_per_client: usize,
}

/// The edge's policy sources, counters and metrics listener, without its listeners (Pingora
/// serves): `netacl edge`'s configuration with `front_doors` set, and the managed list files
/// to follow.
fn edge_config(args: &Args) -> anyhow::Result<(EdgeConfig, Option<RemoteTenants>, Vec<ListFile>)> {
    let mut config = EdgeConfig::new(http::Uri::default());
    config.front_doors = true;
    config.geoip_city = args.geoip_city.clone();
    config.geoip_asn = args.geoip_asn.clone();
    config.geoip_reload_interval = args.geoip_reload_interval;
    let (lists, files) = list_files::load_all(
        &args.managed_list,
        netacl_model::Limits::default().max_entries_per_set,
    )
    .map_err(anyhow::Error::msg)?;
    config.managed_lists = lists;
    config.trusted_proxies = TrustedProxies::parse(&args.trusted_proxy)?;
    config.forwarded_header =
        ForwardedHeader::parse(&args.forwarded_header).with_context(|| {
            format!(
                "invalid forwarded header {:?}: expected x-forwarded-for or forwarded",
                args.forwarded_header
            )
        })?;
    config.metrics_listen = if args.metrics_listen.eq_ignore_ascii_case("off") {
        None
    } else {
        Some(
            args.metrics_listen
                .parse()
                .with_context(|| format!("invalid metrics address {:?}", args.metrics_listen))?,
        )
    };
    config.summary_interval = args.summary_interval;
    config.sample_size = args.sample_size;
    config.sample_every = args.sample_every;
    config.acl_enabled = args.acl == "on";
    if let Some(url) = &args.platform_url {
        let url: http::Uri = url
            .parse()
            .with_context(|| format!("invalid --platform-url {url:?}"))?;
        let Some(path) = &args.operator_token_file else {
            bail!("--platform-url needs --operator-token-file");
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the operator token file {}", path.display()))?;
        let remote = RemoteTenants::new(url, text.trim().to_owned());
        config.tenants = Some(Arc::new(TenantRouter::new()));
        config.platform = Some(remote.clone());
        return Ok((config, Some(remote), files));
    }
    config.rules = match (&args.rules_url, &args.rules_file) {
        (Some(url), _) => {
            let url: http::Uri = url
                .parse()
                .with_context(|| format!("invalid --rules-url {url:?}"))?;
            let (Some(id), Some(secret)) = (&args.client_id, &args.client_secret) else {
                bail!("--rules-url needs --client-id and --client-secret");
            };
            let mut remote = RemoteRules::new(url, id.clone(), secret.clone());
            remote.audience = args.audience.clone();
            RulesSource::Remote(remote)
        }
        (None, Some(path)) => RulesSource::File {
            path: path.clone(),
            interval: args.rules_file_interval,
        },
        (None, None) if !config.acl_enabled => RulesSource::Engine,
        (None, None) => bail!("give --rules-file, --rules-url or --platform-url (or --acl off)"),
    };
    Ok((config, None, files))
}

/// The connection cap lowered, when needed, to what the descriptor limit (raised to its hard
/// limit first) leaves for connections at two descriptors each (the client's and the
/// upstream's), as `netacl edge` does.
fn fit_to_descriptors(given: Option<usize>) -> usize {
    let max_connections = given.unwrap_or(netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS);
    let descriptors = netacl_listener::raise_descriptor_limit().unwrap_or_else(|err| {
        tracing::warn!(error = %err, "cannot read or raise the descriptor limit; assuming 1024");
        1024
    });
    let fitted = (netacl_listener::connection_budget(descriptors) / 2).max(1);
    if max_connections <= fitted {
        return max_connections;
    }
    match given {
        Some(given) => tracing::warn!(
            given,
            fitted,
            descriptors,
            "--max-connections lowered to fit the descriptor limit"
        ),
        None => tracing::info!(
            fitted,
            descriptors,
            "default --max-connections lowered to fit the descriptor limit"
        ),
    }
    fitted
}

/// How long connections may take to finish after SIGTERM or SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// SIGTERM or SIGINT.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// The upstream's address (`HOST:PORT`, the first address the name resolves to).
async fn upstream(value: &str) -> anyhow::Result<SocketAddr> {
    let mut addrs = tokio::net::lookup_host(value)
        .await
        .with_context(|| format!("invalid --upstream {value:?}: expected HOST:PORT"))?;
    addrs
        .next()
        .with_context(|| format!("--upstream {value:?} resolves to no address"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if args.log_format == "json" {
        builder.json().try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
    match run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("netacl-pingora: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (edge_config, platform, files) = edge_config(&args)?;
    // Pingora's no-steal runtime: one current-thread runtime per CPU, each connection served
    // on one of them.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = pingora_runtime::Runtime::new_no_steal(threads, "netacl-pingora");
    let served = runtime.get_handle().block_on(async move {
        let upstream = upstream(&args.upstream).await?;
        // --platform-url: the tenants are followed into the router before the proxy listens.
        let _platform = match (platform, &edge_config.tenants) {
            (Some(remote), Some(router)) => {
                let wait = remote.initial_wait;
                let (task, mut applied) = spawn_tenant_source(Arc::clone(router), remote)?;
                let first = tokio::time::timeout(wait, applied.wait_for(|n| *n > 0)).await;
                if !matches!(first, Ok(Ok(_))) {
                    tracing::error!(waited = ?wait, "no tenants from the platform yet: every host gets 421 until they arrive");
                }
                Some(task)
            }
            _ => None,
        };
        let acl = edge_config.acl_enabled;
        let engine = Arc::new(netacl_eval::Engine::new());
        let edge = start_edge(engine, edge_config).await?;
        let enforcer = Arc::clone(edge.enforcer());
        let _list_reloader = match (edge.policy_sources(), files.is_empty()) {
            (Some(sources), false) => Some(list_files::follow_in_edge(files, sources)),
            _ => None,
        };
        let mut proxy = NetaclProxy::new(Arc::clone(&enforcer), upstream)
            .with_timeouts(args.header_read_timeout, args.idle_timeout);
        if !acl {
            proxy = proxy.without_acl();
        }
        let mut serve = ServeConfig::new();
        serve.listen = args.listen;
        serve.listen_tls = args.listen_tls;
        serve.tls = match (args.tls_cert, args.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (None, None) => None,
            _ => bail!("--tls-cert and --tls-key go together"),
        };
        serve.tls_reload_interval = args.tls_reload_interval;
        serve.handshake_timeout = args.handshake_timeout;
        serve.limits.header_read_timeout = args.header_read_timeout;
        serve.limits.idle_timeout = args.idle_timeout;
        serve.limits.max_connections = fit_to_descriptors(args.max_connections);
        serve.limits.max_connections_per_client = args.max_connections_per_client;
        let running = netacl_pingora::serve(enforcer, proxy, serve).await?;
        let show = |a: Option<SocketAddr>| a.map_or_else(|| "off".to_owned(), |a| a.to_string());
        println!(
            "netacl-pingora listening: http={} tls={} metrics={} upstream={upstream}",
            show(running.http_addr()),
            show(running.tls_addr()),
            show(edge.metrics_addr()),
        );
        let mut edge = edge;
        tokio::select! {
            stopped = edge.wait() => {
                // The edge's tasks (sources, metrics) ended: an error stops the proxy, an end
                // without one leaves it serving until a signal.
                stopped?;
                shutdown_signal().await;
            }
            () = shutdown_signal() => {}
        }
        // Stop accepting; Pingora ends keep-alive after the request in flight; what is still
        // open after the grace is cut.
        running.close();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, running.drained()).await;
        Ok(ExitCode::SUCCESS)
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    served
}

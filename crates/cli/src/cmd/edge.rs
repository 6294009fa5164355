//! `netacl edge`: the enforcing reverse proxy.
//!
//! Every flag is also an environment variable (`NETACL_EDGE_UPSTREAM`, ...). On start it prints
//! one line to stdout with the bound addresses (`netacl edge listening: http=... tls=...
//! metrics=...`); logs go to stderr (`RUST_LOG` filters them, `info` by default).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use netacl_edge::{
    spawn_tenant_source, start_edge, EdgeConfig, ForwardedHeader, RemoteRules, RemoteTenants,
    RulesSource, TlsFiles, TrustedProxies,
};

use crate::args::duration::parse_duration;

/// Arguments of `netacl edge`.
#[derive(clap::Args)]
pub struct Args {
    /// The upstream to proxy to, `http://HOST:PORT` or `https://HOST:PORT` (needed by --listen
    /// and --listen-tls; without it the edge serves only its front doors).
    #[arg(long, env = "NETACL_EDGE_UPSTREAM")]
    upstream: Option<String>,
    /// The forward-auth front door for nginx `auth_request`, Caddy `forward_auth`, Traefik
    /// ForwardAuth and Envoy's HTTP ext_authz mode (HTTP/1.1 keep-alive and h2c), under the
    /// same caps and timeouts as --listen.
    #[arg(long, env = "NETACL_EDGE_FORWARD_AUTH_LISTEN")]
    forward_auth_listen: Option<SocketAddr>,
    /// The request header in which the proxy in front gives the client's JA3 hash to the
    /// forward-auth door (read from a --trusted-proxy peer only; none by default).
    #[arg(
        long,
        env = "NETACL_EDGE_FORWARD_AUTH_JA3_HEADER",
        value_name = "NAME",
        requires = "forward_auth_listen"
    )]
    forward_auth_ja3_header: Option<http::HeaderName>,
    /// The request header in which the proxy in front gives the client's JA4 fingerprint to the
    /// forward-auth door (read from a --trusted-proxy peer only; none by default).
    #[arg(
        long,
        env = "NETACL_EDGE_FORWARD_AUTH_JA4_HEADER",
        value_name = "NAME",
        requires = "forward_auth_listen"
    )]
    forward_auth_ja4_header: Option<http::HeaderName>,
    /// The HAProxy SPOE agent (SPOP 2.0): HAProxy's `filter spoe` sends each request's facts
    /// here and acts on `txn.netacl.action` (see deploy/haproxy); the same caps and timeouts as
    /// --listen.
    #[arg(long, env = "NETACL_EDGE_SPOE_LISTEN")]
    spoe_listen: Option<SocketAddr>,
    /// The largest SPOP frame the agent accepts and announces (HAProxy's smaller offer wins).
    #[arg(
        long,
        env = "NETACL_EDGE_SPOE_MAX_FRAME_SIZE",
        default_value_t = netacl_doors::spoe::DEFAULT_MAX_FRAME_SIZE,
        value_parser = clap::value_parser!(u32).range(256..=1_048_576),
        requires = "spoe_listen"
    )]
    spoe_max_frame_size: u32,
    /// Envoy's external authorization over gRPC (`envoy.service.auth.v3.Authorization/Check`,
    /// HTTP/2 cleartext); the same caps and timeouts as --listen.
    #[arg(long, env = "NETACL_EDGE_EXT_AUTHZ_LISTEN")]
    ext_authz_listen: Option<SocketAddr>,
    /// Plain-HTTP listen address.
    #[arg(long, env = "NETACL_EDGE_LISTEN")]
    listen: Option<SocketAddr>,
    /// TLS listen address (needs --tls-cert and --tls-key).
    #[arg(long, env = "NETACL_EDGE_LISTEN_TLS")]
    listen_tls: Option<SocketAddr>,
    /// Certificate chain, PEM.
    #[arg(long, env = "NETACL_EDGE_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// Private key, PEM.
    #[arg(long, env = "NETACL_EDGE_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// A CIDR (or address) of a reverse proxy in front of the edge whose forwarding header is
    /// believed. Repeatable; comma-separated in the environment variable.
    #[arg(
        long = "trusted-proxy",
        env = "NETACL_EDGE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    trusted_proxy: Vec<String>,
    /// The forwarding header the trusted proxies write: `x-forwarded-for` or `forwarded`. Only
    /// that header is read.
    #[arg(
        long,
        env = "NETACL_EDGE_FORWARDED_HEADER",
        default_value = "x-forwarded-for"
    )]
    forwarded_header: String,
    /// MaxMind City or Country database (country and subdivision).
    #[arg(long, env = "NETACL_EDGE_GEOIP_CITY")]
    geoip_city: Option<PathBuf>,
    /// MaxMind ASN database.
    #[arg(long, env = "NETACL_EDGE_GEOIP_ASN")]
    geoip_asn: Option<PathBuf>,
    /// How often the GeoIP files are checked for changes (e.g. `60s`).
    #[arg(long, env = "NETACL_EDGE_GEOIP_RELOAD_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    geoip_reload_interval: Duration,
    /// Follow the rules of a remote `netacl serve`, `https://HOST:PORT` (`http://` on
    /// loopback, or with --allow-insecure-rules-url).
    #[arg(long, env = "NETACL_EDGE_RULES_URL", conflicts_with = "rules_file")]
    rules_url: Option<String>,
    /// Client id for --rules-url (needs the read:network_acls scope).
    #[arg(long, env = "NETACL_EDGE_CLIENT_ID")]
    client_id: Option<String>,
    /// Client secret for --rules-url.
    #[arg(long, env = "NETACL_EDGE_CLIENT_SECRET", hide_env_values = true)]
    client_secret: Option<String>,
    /// Token audience for --rules-url (default `https://HOST:PORT/api/v2/` of the URL).
    #[arg(long, env = "NETACL_EDGE_AUDIENCE")]
    audience: Option<String>,
    /// Enforce every tenant of a platform (`netacl serve` with many tenants), `https://HOST:PORT`
    /// (`http://` on loopback only): the edge follows its operator tenants watch, each request
    /// decided by its host's tenant (TLS: the SNI); a host of no tenant gets 421.
    #[arg(
        long,
        env = "NETACL_EDGE_PLATFORM_URL",
        conflicts_with_all = ["rules_url", "rules_file"],
        requires = "operator_token_file"
    )]
    platform_url: Option<String>,
    /// With --platform-url: the file holding the platform's operator token (`netacl serve
    /// --operator-token-file`).
    #[arg(
        long,
        env = "NETACL_EDGE_OPERATOR_TOKEN_FILE",
        value_name = "PATH",
        requires = "platform_url"
    )]
    operator_token_file: Option<PathBuf>,
    /// With --platform-url: a directory of certificates chosen by SNI, `HOST.crt` + `HOST.key`
    /// (--tls-cert/--tls-key are then the optional default pair).
    #[arg(
        long = "tls-cert-dir",
        env = "NETACL_EDGE_TLS_CERT_DIR",
        value_name = "DIR",
        requires = "platform_url"
    )]
    tls_cert_dir: Option<PathBuf>,
    /// With --platform-url: a tenant id counted in its own metric series (repeatable;
    /// comma-separated in the variable); every other tenant is counted as `_other`.
    #[arg(
        long = "metrics-tenant",
        env = "NETACL_EDGE_METRICS_TENANTS",
        value_name = "NAME",
        value_delimiter = ',',
        requires = "platform_url"
    )]
    metrics_tenant: Vec<String>,
    /// With --platform-url: this edge's name in its reports to the platform (at most 64 of
    /// `A-Za-z0-9._:-`), so that a restarted edge replaces its own traffic sample there instead
    /// of appearing as another edge. Default: `edge-` and 16 random hexadecimal digits.
    #[arg(
        long = "edge-name",
        env = "NETACL_EDGE_NAME",
        value_name = "NAME",
        value_parser = parse_edge_name,
        requires = "platform_url"
    )]
    edge_name: Option<String>,
    /// Load the rules from a file (JSON array of records, or `{"network_acls": [...]}`),
    /// reloaded when it changes.
    #[arg(long, env = "NETACL_EDGE_RULES_FILE")]
    rules_file: Option<PathBuf>,
    /// The content of a managed list (`auth0_managed`) from a file of this edge: NAME=PATH,
    /// one entry a line; repeatable (comma-separated in the variable). Wins over the list the
    /// admin server of --rules-url sends. Checked every second; a malformed file is logged and
    /// the last good content stays.
    #[arg(
        long = "managed-list",
        value_name = "NAME=PATH",
        env = "NETACL_EDGE_MANAGED_LISTS",
        value_delimiter = ',',
        value_parser = netacl_edge::list_files::parse_flag
    )]
    managed_list: Vec<(netacl_model::ManagedListName, PathBuf)>,
    /// How often the rule file is checked for changes.
    #[arg(long, env = "NETACL_EDGE_RULES_FILE_INTERVAL", default_value = "250ms", value_parser = parse_duration)]
    rules_file_interval: Duration,
    /// Admin-only Prometheus listener (`/metrics`), or `off`.
    #[arg(
        long,
        env = "NETACL_EDGE_METRICS_LISTEN",
        default_value = "127.0.0.1:9464"
    )]
    metrics_listen: String,
    /// Interval of the per-rule `acls_summary` log events (e.g. `10m`, `30s`).
    #[arg(long, env = "NETACL_EDGE_SUMMARY_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    summary_interval: Duration,
    /// Requests kept in the traffic sample for the impact preview (0: none); with
    /// `--rules-url` (or `--platform-url`: one ring for every tenant, posted per tenant) posted to
    /// the admin server every summary interval.
    #[arg(long, env = "NETACL_EDGE_SAMPLE_SIZE", default_value_t = netacl_edge::DEFAULT_SAMPLE_SIZE)]
    sample_size: usize,
    /// One request in this many (per thread) goes into the traffic sample.
    #[arg(long, env = "NETACL_EDGE_SAMPLE_EVERY", default_value_t = netacl_edge::DEFAULT_SAMPLE_EVERY, value_parser = clap::value_parser!(u32).range(1..))]
    sample_every: u32,
    /// `on`, or `off` to proxy without evaluating anything (to measure the ACL's cost).
    #[arg(long, env = "NETACL_EDGE_ACL", default_value = "on", value_parser = ["on", "off"])]
    acl: String,
    /// Log format on stderr: `text` or `json` (one JSON object a line).
    #[arg(long, env = "NETACL_EDGE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Time a client has to send its ClientHello and complete the TLS handshake.
    #[arg(long, env = "NETACL_EDGE_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    handshake_timeout: Duration,
    /// Trust for https:// upstreams and rule sources, certificate reloads.
    #[command(flatten)]
    tls: crate::args::tls::EdgeTlsArgs,
    /// The listener limits (caps and timeouts).
    #[command(flatten)]
    listener: crate::args::listener::EdgeListenerArgs,
    /// `--shutdown-grace`.
    #[command(flatten)]
    shutdown: crate::args::listener::EdgeShutdownArgs,
}

/// What `netacl edge` runs: the edge, its list files, and with --platform-url the platform
/// followed into the edge's tenant router.
struct Plan {
    config: EdgeConfig,
    /// The front doors (their listener limits are the edge's, set when they start).
    doors: Doors,
    list_files: Vec<netacl_edge::list_files::ListFile>,
    platform: Option<(Arc<netacl_edge::TenantRouter>, RemoteTenants)>,
}

/// The operator token in `path` (surrounding whitespace removed).
fn read_operator_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the operator token file {}", path.display()))?;
    let token = text.trim();
    if token.len() < 32 || token.contains(char::is_whitespace) {
        bail!(
            "{} does not hold an operator token (one line of at least 32 characters)",
            path.display()
        );
    }
    Ok(token.to_owned())
}

/// The front doors asked for: each listens beside (or instead of) the proxy, with the edge's
/// enforcer and listener limits.
struct Doors {
    forward_auth: Option<(SocketAddr, netacl_doors::forward_auth::FactsOptions)>,
    spoe: Option<(SocketAddr, u32)>,
    ext_authz: Option<SocketAddr>,
}

impl Doors {
    fn any(&self) -> bool {
        self.forward_auth.is_some() || self.spoe.is_some() || self.ext_authz.is_some()
    }

    /// Starts each door on `enforcer` under `limits`.
    async fn start(
        self,
        enforcer: &Arc<netacl_edge::Enforcer>,
        limits: &netacl_listener::ConnectionLimits,
    ) -> anyhow::Result<Vec<(&'static str, netacl_doors::RunningDoor)>> {
        let mut running = Vec::new();
        if let Some((listen, facts)) = self.forward_auth {
            let mut door =
                netacl_doors::forward_auth::ForwardAuthConfig::new(listen, limits.clone());
            door.facts = facts;
            let door =
                netacl_doors::forward_auth::start_forward_auth(Arc::clone(enforcer), door).await?;
            running.push((netacl_doors::forward_auth::DOOR, door));
        }
        if let Some((listen, max_frame_size)) = self.spoe {
            let mut agent = netacl_doors::spoe::SpoeConfig::new(listen, limits.clone());
            agent.max_frame_size = max_frame_size;
            let door = netacl_doors::spoe::start_spoe(Arc::clone(enforcer), agent).await?;
            running.push((netacl_doors::spoe::DOOR, door));
        }
        if let Some(listen) = self.ext_authz {
            let door = netacl_doors::ext_authz::start_ext_authz(
                Arc::clone(enforcer),
                listen,
                limits.clone(),
            )
            .await?;
            running.push((netacl_doors::ext_authz::DOOR, door));
        }
        Ok(running)
    }
}

fn config(args: Args) -> anyhow::Result<Plan> {
    let doors = Doors {
        forward_auth: args.forward_auth_listen.map(|listen| {
            let mut facts = netacl_doors::forward_auth::FactsOptions::default();
            facts.ja3_header = args.forward_auth_ja3_header.clone();
            facts.ja4_header = args.forward_auth_ja4_header.clone();
            (listen, facts)
        }),
        spoe: args
            .spoe_listen
            .map(|listen| (listen, args.spoe_max_frame_size)),
        ext_authz: args.ext_authz_listen,
    };
    let upstream = match (&args.upstream, doors.any()) {
        (Some(upstream), _) => parse_upstream(upstream)?,
        (None, true) if args.listen.is_none() && args.listen_tls.is_none() => {
            http::Uri::default()
        }
        (None, true) => bail!("--listen and --listen-tls need --upstream"),
        (None, false) => bail!(
            "give --upstream (the proxy) and/or a front door (--forward-auth-listen, --spoe-listen, --ext-authz-listen)"
        ),
    };
    let mut config = EdgeConfig::new(upstream);
    config.front_doors = doors.any();
    args.tls.apply(&mut config);
    args.listener.apply(&mut config.limits);
    let (lists, files) = netacl_edge::list_files::load_all(
        &args.managed_list,
        netacl_model::Limits::default().max_entries_per_set,
    )
    .map_err(anyhow::Error::msg)?;
    config.managed_lists = lists;
    apply_common(
        &mut config,
        Common {
            listen: args.listen,
            listen_tls: args.listen_tls,
            tls_cert: args.tls_cert,
            tls_key: args.tls_key,
            trusted_proxy: &args.trusted_proxy,
            forwarded_header: &args.forwarded_header,
            geoip_city: args.geoip_city,
            geoip_asn: args.geoip_asn,
            metrics_listen: &args.metrics_listen,
            summary_interval: args.summary_interval,
            sample: (args.sample_size, args.sample_every),
        },
    )?;
    config.geoip_reload_interval = args.geoip_reload_interval;
    config.acl_enabled = args.acl == "on";
    config.handshake_timeout = args.handshake_timeout;
    if let Some(url) = &args.platform_url {
        let url: http::Uri = url
            .parse()
            .with_context(|| format!("invalid --platform-url {url:?}"))?;
        let Some(token_file) = &args.operator_token_file else {
            bail!("--platform-url needs --operator-token-file");
        };
        if !files.is_empty() {
            bail!("--managed-list is not available with --platform-url (each tenant's lists come from the platform)");
        }
        let mut remote = RemoteTenants::new(url, read_operator_token(token_file)?);
        remote.trust = args.tls.platform_trust();
        let router = Arc::new(netacl_edge::TenantRouter::with_counted_tenants(
            args.metrics_tenant.iter().cloned(),
        ));
        config.tenants = Some(Arc::clone(&router));
        config.tls_cert_dir = args.tls_cert_dir.clone();
        config.rules = RulesSource::Engine;
        // Each tenant's counts and sample are reported to the platform, with the operator token.
        config.platform = Some(remote.clone());
        config.edge_name = args.edge_name.clone();
        return Ok(Plan {
            config,
            doors,
            list_files: files,
            platform: Some((router, remote)),
        });
    }
    config.rules = match (args.rules_url, args.rules_file) {
        (Some(url), None) => {
            let url: http::Uri = url
                .parse()
                .with_context(|| format!("invalid --rules-url {url:?}"))?;
            let (Some(id), Some(secret)) = (args.client_id, args.client_secret) else {
                bail!("--rules-url needs --client-id and --client-secret");
            };
            let mut remote = RemoteRules::new(url, id, secret);
            remote.audience = args.audience;
            args.tls.apply_remote(&mut remote);
            RulesSource::Remote(remote)
        }
        (None, Some(path)) => RulesSource::File {
            path,
            interval: args.rules_file_interval,
        },
        (None, None) if !config.acl_enabled => RulesSource::Engine,
        (None, None) => bail!("give --rules-file, --rules-url or --platform-url (or --acl off)"),
        (Some(_), Some(_)) => bail!("--rules-url and --rules-file exclude each other"),
    };
    Ok(Plan {
        config,
        doors,
        list_files: files,
        platform: None,
    })
}

/// The flags `netacl serve` takes to run the edge in process, next to the admin API, sharing
/// its engine (every one prefixed `--edge-`; the environment variables are `netacl edge`'s).
/// Flatten into `serve`'s arguments and call [`ServeEdgeArgs::config`]; `None` when
/// `--edge-upstream` is not given (no edge).
///
/// How rules reach the in-process edge: there is one [`netacl_eval::Engine`]. The admin
/// service's write path compiles each new rule set and installs it in that engine before it
/// answers `201`/`204`; with `--database-url`, the store follower installs the rule sets other
/// nodes committed into the same engine. The edge evaluates every request against it, so a
/// change is enforced at the edge as soon as it is answered, with no copy, poll or second
/// compile. The only other input is the service's channel of installed rule sets (the one
/// that wakes the watch long poll, `AdminService::rule_sets`), given as `rule_updates`: from
/// it the edge derives its connection-level refusal rules and its per-rule counters, which
/// are used only while the engine holds the version they were derived from.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeEdgeArgs {
    /// Also run the enforcing proxy in front of this upstream (`http://HOST:PORT` or
    /// `https://HOST:PORT`).
    #[arg(long = "edge-upstream", env = "NETACL_EDGE_UPSTREAM")]
    edge_upstream: Option<String>,
    /// The edge's plain-HTTP listen address.
    #[arg(long = "edge-listen", env = "NETACL_EDGE_LISTEN")]
    edge_listen: Option<SocketAddr>,
    /// The edge's TLS listen address.
    #[arg(long = "edge-listen-tls", env = "NETACL_EDGE_LISTEN_TLS")]
    edge_listen_tls: Option<SocketAddr>,
    /// The edge's certificate chain, PEM.
    #[arg(long = "edge-tls-cert", env = "NETACL_EDGE_TLS_CERT")]
    edge_tls_cert: Option<PathBuf>,
    /// The edge's private key, PEM.
    #[arg(long = "edge-tls-key", env = "NETACL_EDGE_TLS_KEY")]
    edge_tls_key: Option<PathBuf>,
    /// Trusted reverse proxy CIDR in front of the edge (repeatable).
    #[arg(
        long = "edge-trusted-proxy",
        env = "NETACL_EDGE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    edge_trusted_proxy: Vec<String>,
    /// `x-forwarded-for` or `forwarded`.
    #[arg(
        long = "edge-forwarded-header",
        env = "NETACL_EDGE_FORWARDED_HEADER",
        default_value = "x-forwarded-for"
    )]
    edge_forwarded_header: String,
    /// MaxMind City or Country database.
    #[arg(long = "edge-geoip-city", env = "NETACL_EDGE_GEOIP_CITY")]
    edge_geoip_city: Option<PathBuf>,
    /// MaxMind ASN database.
    #[arg(long = "edge-geoip-asn", env = "NETACL_EDGE_GEOIP_ASN")]
    edge_geoip_asn: Option<PathBuf>,
    /// The edge's admin-only Prometheus listener, or `off`.
    #[arg(
        long = "edge-metrics-listen",
        env = "NETACL_EDGE_METRICS_LISTEN",
        default_value = "127.0.0.1:9464"
    )]
    edge_metrics_listen: String,
    /// Interval of the per-rule `acls_summary` events.
    #[arg(long = "edge-summary-interval", env = "NETACL_EDGE_SUMMARY_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    edge_summary_interval: Duration,
    /// Requests kept in the edge's traffic sample, read by the impact preview (0: none).
    #[arg(long = "edge-sample-size", env = "NETACL_EDGE_SAMPLE_SIZE", default_value_t = netacl_edge::DEFAULT_SAMPLE_SIZE)]
    edge_sample_size: usize,
    /// One request in this many (per thread) goes into the edge's traffic sample.
    #[arg(long = "edge-sample-every", env = "NETACL_EDGE_SAMPLE_EVERY", default_value_t = netacl_edge::DEFAULT_SAMPLE_EVERY, value_parser = clap::value_parser!(u32).range(1..))]
    edge_sample_every: u32,
    /// Enforce every tenant the admin service serves, each request by its host's tenant (TLS:
    /// the SNI); a host of no tenant gets 421, even while the default tenant is the only one.
    /// Without it or --edge-default-tenant-only: by host when the store holds more than the
    /// default tenant at start, else the default tenant's rules for every host until another
    /// tenant is created (then the process stops: see the README, "Many tenants").
    #[arg(
        long = "edge-tenants",
        env = "NETACL_EDGE_TENANTS",
        requires = "edge_upstream"
    )]
    edge_tenants: bool,
    /// Enforce the default tenant's rules for every host, whatever tenants the store holds:
    /// other tenants' traffic is not told apart (their own rules are not enforced here).
    #[arg(
        long = "edge-default-tenant-only",
        env = "NETACL_EDGE_DEFAULT_TENANT_ONLY",
        requires = "edge_upstream",
        conflicts_with = "edge_tenants"
    )]
    edge_default_tenant_only: bool,
    /// With --edge-tenants: a directory of certificates chosen by SNI, `HOST.crt` + `HOST.key`
    /// (--edge-tls-cert/--edge-tls-key are then the optional default pair).
    #[arg(
        long = "edge-tls-cert-dir",
        env = "NETACL_EDGE_TLS_CERT_DIR",
        value_name = "DIR",
        requires = "edge_tenants"
    )]
    edge_tls_cert_dir: Option<PathBuf>,
    /// With --edge-tenants: a tenant id counted in its own metric series (repeatable;
    /// comma-separated in the variable); every other tenant is counted as `_other`.
    #[arg(
        long = "edge-metrics-tenant",
        env = "NETACL_EDGE_METRICS_TENANTS",
        value_name = "NAME",
        value_delimiter = ',',
        requires = "edge_tenants"
    )]
    edge_metrics_tenant: Vec<String>,
    /// Trust for an https:// upstream.
    #[command(flatten)]
    edge_tls: crate::args::tls::ServeEdgeTlsArgs,
    /// The edge's listener limits (`--edge-max-connections`, ...).
    #[command(flatten)]
    edge_listener: crate::args::listener::ServeEdgeListenerArgs,
}

/// Which tenants' rules the in-process edge enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeEdgeMode {
    /// Each request by its host's tenant (`--edge-tenants`, or no choice made and the store
    /// holding more than the default tenant at start).
    ByHost,
    /// The default tenant's rules for every host: chosen (`--edge-default-tenant-only`), or
    /// not (`implicit`: the default tenant was the only tenant at start; another tenant
    /// appearing stops the process, since this edge cannot tell it apart).
    DefaultTenant {
        /// No flag chose it.
        implicit: bool,
    },
}

impl ServeEdgeArgs {
    /// The in-process edge's listener limits (before they are fitted to the descriptor
    /// limit); `None` without `--edge-upstream`.
    pub fn listener_limits(&self) -> Option<netacl_listener::ConnectionLimits> {
        self.edge_upstream.as_ref()?;
        let mut limits = netacl_listener::ConnectionLimits::default();
        self.edge_listener.apply(&mut limits);
        Some(limits)
    }

    /// Whether `--edge-max-connections` was given.
    pub fn max_connections_given(&self) -> bool {
        self.edge_listener.max_connections_given()
    }

    /// The edge configuration, following the rule sets sent on `rule_updates` (send every
    /// rule set the serve command installs in the engine), and its mode given the number of
    /// tenants the store holds at start; `None` without `--edge-upstream`.
    pub fn config(
        &self,
        rule_updates: tokio::sync::watch::Receiver<Arc<netacl_model::RuleSet>>,
        tenants_at_start: usize,
    ) -> anyhow::Result<Option<(EdgeConfig, ServeEdgeMode)>> {
        let Some(upstream) = &self.edge_upstream else {
            return Ok(None);
        };
        let mode = if self.edge_tenants || (!self.edge_default_tenant_only && tenants_at_start > 1)
        {
            ServeEdgeMode::ByHost
        } else {
            ServeEdgeMode::DefaultTenant {
                implicit: !self.edge_default_tenant_only,
            }
        };
        let mut config = EdgeConfig::new(parse_upstream(upstream)?);
        self.edge_tls.apply(&mut config);
        self.edge_listener.apply(&mut config.limits);
        apply_common(
            &mut config,
            Common {
                listen: self.edge_listen,
                listen_tls: self.edge_listen_tls,
                tls_cert: self.edge_tls_cert.clone(),
                tls_key: self.edge_tls_key.clone(),
                trusted_proxy: &self.edge_trusted_proxy,
                forwarded_header: &self.edge_forwarded_header,
                geoip_city: self.edge_geoip_city.clone(),
                geoip_asn: self.edge_geoip_asn.clone(),
                metrics_listen: &self.edge_metrics_listen,
                summary_interval: self.edge_summary_interval,
                sample: (self.edge_sample_size, self.edge_sample_every),
            },
        )?;
        config.rules = RulesSource::Engine;
        config.rule_updates = Some(rule_updates);
        if mode == ServeEdgeMode::ByHost {
            config.tls_cert_dir = self.edge_tls_cert_dir.clone();
            config.tenants = Some(Arc::new(netacl_edge::TenantRouter::with_counted_tenants(
                self.edge_metrics_tenant.iter().cloned(),
            )));
        }
        Ok(Some((config, mode)))
    }
}

/// The flags `netacl edge` and `netacl serve --edge-*` share.
struct Common<'a> {
    listen: Option<SocketAddr>,
    listen_tls: Option<SocketAddr>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    trusted_proxy: &'a [String],
    forwarded_header: &'a str,
    geoip_city: Option<PathBuf>,
    geoip_asn: Option<PathBuf>,
    metrics_listen: &'a str,
    summary_interval: Duration,
    /// `--sample-size`, `--sample-every`.
    sample: (usize, u32),
}

fn parse_upstream(upstream: &str) -> anyhow::Result<http::Uri> {
    upstream
        .parse()
        .with_context(|| format!("invalid upstream URL {upstream:?}"))
}

fn apply_common(config: &mut EdgeConfig, flags: Common<'_>) -> anyhow::Result<()> {
    config.listen = flags.listen;
    config.listen_tls = flags.listen_tls;
    config.tls = match (flags.tls_cert, flags.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None) => None,
        _ => bail!("the TLS certificate and key go together"),
    };
    config.trusted_proxies = TrustedProxies::parse(flags.trusted_proxy)?;
    config.forwarded_header =
        ForwardedHeader::parse(flags.forwarded_header).with_context(|| {
            format!(
                "invalid forwarded header {:?}: expected x-forwarded-for or forwarded",
                flags.forwarded_header
            )
        })?;
    config.geoip_city = flags.geoip_city;
    config.geoip_asn = flags.geoip_asn;
    config.metrics_listen = if flags.metrics_listen.eq_ignore_ascii_case("off") {
        None
    } else {
        Some(
            flags
                .metrics_listen
                .parse()
                .with_context(|| format!("invalid metrics address {:?}", flags.metrics_listen))?,
        )
    };
    config.summary_interval = flags.summary_interval;
    (config.sample_size, config.sample_every) = flags.sample;
    Ok(())
}

/// Runs `netacl edge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second subscriber (when another command set one up) is not an error.
    let _ = if args.log_format == "json" {
        builder.json().try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
    let grace = args.shutdown.shutdown_grace;
    let cap_given = args.listener.max_connections_given();
    let Plan {
        mut config,
        doors,
        list_files,
        platform,
    } = config(args)?;
    crate::args::listener::fit_to_descriptors(&mut [crate::args::listener::Cap {
        flag: "--max-connections",
        value: &mut config.limits.max_connections,
        weight: 2,
        given: cap_given,
    }]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let served = runtime.block_on(async move {
        let engine = Arc::new(netacl_eval::Engine::new());
        // --platform-url: the tenants are followed into the router before the edge listens
        // (a bounded wait for the first complete snapshot; the source keeps trying after it).
        let _platform = match platform {
            Some((router, remote)) => {
                let wait = remote.initial_wait;
                let url = remote.url.clone();
                let (task, mut applied) = spawn_tenant_source(router, remote)?;
                let first = tokio::time::timeout(wait, applied.wait_for(|n| *n > 0)).await;
                if !matches!(first, Ok(Ok(_))) {
                    tracing::error!(%url, waited = ?wait, "no tenants from the platform yet: every host gets 421 until they arrive");
                }
                Some(task)
            }
            None => None,
        };
        let limits = config.limits.clone();
        let edge = start_edge(engine, config).await?;
        let doors = doors.start(edge.enforcer(), &limits).await?;
        let door_addr = |name: &str| {
            doors
                .iter()
                .find(|(door, _)| *door == name)
                .map(|(_, d)| d.local_addr())
        };
        let _list_reloader = match (edge.policy_sources(), list_files.is_empty()) {
            (Some(sources), false) => {
                Some(netacl_edge::list_files::follow_in_edge(list_files, sources))
            }
            _ => None,
        };
        let show = |a: Option<SocketAddr>| a.map_or_else(|| "off".to_owned(), |a| a.to_string());
        println!(
            "netacl edge listening: http={} tls={} metrics={} forward_auth={} spoe={} ext_authz={}",
            show(edge.http_addr()),
            show(edge.tls_addr()),
            show(edge.metrics_addr()),
            show(door_addr(netacl_doors::forward_auth::DOOR)),
            show(door_addr(netacl_doors::spoe::DOOR)),
            show(door_addr(netacl_doors::ext_authz::DOOR)),
        );
        let mut edge = edge;
        tokio::select! {
            stopped = edge.wait() => {
                stopped?;
                return Ok(ExitCode::SUCCESS);
            }
            () = crate::args::listener::shutdown_signal() => {}
        }
        // Stop accepting; connections with nothing in flight close, requests in flight get
        // the grace period.
        edge.close();
        for (_, door) in &doors {
            door.close();
        }
        let drained = async {
            edge.drained().await;
            for (_, door) in &doors {
                door.drained().await;
            }
        };
        if tokio::time::timeout(grace, drained).await.is_err() {
            tracing::warn!(
                open = edge.listener_stats().open,
                grace = ?grace,
                "requests still in flight after the shutdown grace: they are cut"
            );
        }
        Ok(ExitCode::SUCCESS)
    });
    // Dropping the runtime would wait for every blocking task to finish.
    runtime.shutdown_timeout(crate::args::listener::RUNTIME_SHUTDOWN_TIMEOUT);
    served
}

/// `--edge-name`: what the platform's operator API takes as an edge's name.
fn parse_edge_name(value: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if (1..=64).contains(&value.len()) && value.chars().all(allowed) {
        Ok(value.to_owned())
    } else {
        Err("an edge name is 1 to 64 of the characters A-Z a-z 0-9 . _ : -".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_edge_name;

    #[test]
    fn edge_names_are_what_the_operator_api_takes() {
        for good in ["eu-west-1a", "edge.fra_2:8443", "a", &"x".repeat(64)] {
            assert_eq!(parse_edge_name(good).as_deref(), Ok(good));
        }
        for bad in ["", "two words", "é", "a/b", &"x".repeat(65), "edge\n"] {
            assert!(parse_edge_name(bad).is_err(), "{bad:?}");
        }
    }
}

//! `netacl serve`: the admin API with its embedded database, in one process; with
//! `--edge-upstream`, also the enforcing edge, sharing the admin API's engine (see
//! [`ServeEdgeArgs`](crate::cmd::edge::ServeEdgeArgs)).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use netacl_server::rate_limit::RateLimitConfig;
use netacl_server::{AdminService, BootstrapClient, ServerConfig, DEFAULT_BODY_LIMIT};
use netacl_store::{PostgresStore, SqliteStore, Store};

use crate::cmd::edge::ServeEdgeMode;

/// Arguments of `netacl serve`. Every flag can also be given as the environment variable named
/// in its help.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, env = "NETACL_LISTEN", default_value = "127.0.0.1:8080")]
    listen: String,
    /// Directory of the embedded database (created if missing, mode 0700; its files are 0600,
    /// and looser modes found there are tightened, logged).
    #[arg(long, env = "NETACL_DATA_DIR", default_value = "./netacl-data")]
    data_dir: PathBuf,
    /// The tenant's host: the token issuer is https://HOST/ and the management audience
    /// https://HOST/api/v2/. Default: localhost:PORT, with the port of --listen.
    #[arg(long, env = "NETACL_TENANT_DOMAIN")]
    tenant_domain: Option<String>,
    /// Id of the bootstrap client (holding every management scope). Default: generated on
    /// first start.
    #[arg(long, env = "NETACL_BOOTSTRAP_CLIENT_ID")]
    bootstrap_client_id: Option<String>,
    /// Secret of the bootstrap client: creates the client or replaces its secret. Default: a
    /// generated secret, printed once, when the client is created.
    #[arg(long, env = "NETACL_BOOTSTRAP_CLIENT_SECRET", hide_env_values = true)]
    bootstrap_client_secret: Option<String>,
    /// Requests a client may send at once (0 disables rate limiting).
    #[arg(long, env = "NETACL_RATE_LIMIT_BURST", default_value_t = 100)]
    rate_limit_burst: u32,
    /// Requests per second a client's allowance refills by.
    #[arg(long, env = "NETACL_RATE_LIMIT_PER_SECOND", default_value_t = 50.0)]
    rate_limit_per_second: f64,
    /// Largest request body in bytes (413 above).
    #[arg(long, env = "NETACL_BODY_LIMIT", default_value_t = DEFAULT_BODY_LIMIT)]
    body_limit: usize,
    /// Lifetime of issued access tokens, in seconds.
    #[arg(long, env = "NETACL_TOKEN_LIFETIME", default_value_t = 86_400)]
    token_lifetime: u64,
    /// A PostgreSQL database shared by several nodes (postgres://USER:PASSWORD@HOST:PORT/DB);
    /// replaces the embedded database of --data-dir. Nodes on one database converge on every
    /// change (notification, plus a version check every --sync-interval-ms).
    #[arg(long, env = "NETACL_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The key-encryption key sealing secrets at rest (the tenant's signing keys): a file of one
    /// line `netacl-kek-v1:` + 43 base64url characters, mode 0600 (`netacl secrets-key new
    /// PATH` writes one). Default: DATA_DIR/secrets.key, generated on first start. Required
    /// with --database-url (the key must not live in the database it protects); every node
    /// sharing a database needs the same file.
    #[arg(long, env = "NETACL_SECRETS_KEY_FILE", value_name = "PATH")]
    secrets_key_file: Option<PathBuf>,
    /// An RSA private key (PEM, PKCS#8 or PKCS#1, 2048 to 8192 bits) to sign the tenant's
    /// tokens with: it becomes the current signing key at start (the first key, or a rotation
    /// when another key is current; nothing when it is current already). Stored sealed.
    #[arg(long, env = "NETACL_SIGNING_KEY_FILE", value_name = "PEM")]
    signing_key_file: Option<PathBuf>,
    /// The operator token guarding the operator API (`/_netacl/v1/tenants`): a file holding
    /// one token of at least 32 characters, mode 0600 (a file readable by group or others is
    /// refused). Default: DATA_DIR/operator-token, generated (256 random bits, base64url) on
    /// first start when absent. A file given here must exist.
    #[arg(long, env = "NETACL_OPERATOR_TOKEN_FILE", value_name = "PATH")]
    operator_token_file: Option<PathBuf>,
    /// With --database-url: how often the node checks the database for other nodes' changes,
    /// in milliseconds (the longest a lost notification can delay convergence).
    #[arg(long, env = "NETACL_SYNC_INTERVAL_MS", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    sync_interval_ms: u64,
    /// Tenant logs (`GET /api/v2/logs`): the most events kept per tenant (the oldest go
    /// first); 0 keeps any number.
    #[arg(long, env = "NETACL_LOG_RETENTION_EVENTS", value_name = "N",
          default_value_t = netacl_server::DEFAULT_LOG_RETENTION_EVENTS)]
    log_retention_events: u64,
    /// Tenant logs: the days an event is kept; 0 keeps events of any age.
    #[arg(long, env = "NETACL_LOG_RETENTION_DAYS", value_name = "DAYS",
          default_value_t = netacl_server::DEFAULT_LOG_RETENTION_DAYS,
          value_parser = clap::value_parser!(u64).range(0..=36_500))]
    log_retention_days: u64,
    /// Rule-set history: at most N versions of each tenant are kept (at least 1; the oldest
    /// go first).
    #[arg(long, env = "NETACL_HISTORY_VERSIONS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    history_versions: u64,
    /// Rule-set history: versions older than D days are removed (0: no age limit). The
    /// current version is always kept.
    #[arg(long, env = "NETACL_HISTORY_DAYS", default_value_t = 90,
          value_parser = clap::value_parser!(u64).range(0..=36_500))]
    history_days: u64,
    /// Rule-set history: the most bytes each tenant's history holds (its versions' changes
    /// and the rule and manifest texts they refer to, each stored once); the oldest versions
    /// go first, the current one is always kept. 0: no size limit.
    #[arg(long, env = "NETACL_HISTORY_BYTES", value_name = "BYTES",
          default_value_t = netacl_store::DEFAULT_HISTORY_BYTES)]
    history_bytes: u64,
    /// Rule-set limits (entries per member and per rule, rules and entries per set).
    #[command(flatten)]
    limits: crate::args::limits::LimitsArgs,
    /// Rule analysis through the API (`POST /_netacl/v1/network-acls/analyze`): the most work
    /// units one analysis does (deterministic; what is left unproven is `undecided` with the
    /// reason `budget`). The synthetic tenant of 1,000 rules takes 0.8 to 21 million.
    #[arg(long, env = "NETACL_ANALYSIS_WORK", value_name = "UNITS",
          default_value_t = netacl_server::DEFAULT_ANALYSIS_WORK,
          value_parser = clap::value_parser!(u64).range(1..))]
    analysis_work: u64,
    /// Rule analysis through the API: the longest one analysis runs (250ms, 10s, 1m), whatever
    /// work units it has left (the backstop of a slow or busy machine).
    #[arg(long, env = "NETACL_ANALYSIS_DEADLINE", value_name = "DURATION", default_value = "10s",
          value_parser = crate::args::duration::parse_duration)]
    analysis_deadline: std::time::Duration,
    /// Expensive requests (analysis, impact preview, dry run, managed-list upload, directory
    /// import) one tenant may run at once; more: 429 with Retry-After.
    #[arg(long, env = "NETACL_EXPENSIVE_REQUESTS_PER_TENANT", value_name = "N",
          default_value_t = netacl_server::DEFAULT_EXPENSIVE_PER_TENANT as u64,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    expensive_requests_per_tenant: u64,
    /// Expensive requests every tenant together may run at once. Default: the number of cores
    /// (at least 2).
    #[arg(long, env = "NETACL_EXPENSIVE_REQUESTS", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    expensive_requests: Option<u64>,
    /// The console's session bounds and its HTTPS behind a proxy.
    #[command(flatten)]
    console: crate::args::console::ConsoleArgs,
    /// The content of a managed list (`auth0_managed`) from a file of this node: NAME=PATH
    /// (auth0.tor=/etc/netacl/tor.txt), one entry a line; repeatable (comma-separated in the
    /// variable). The file wins over the list stored through the API, which is then read-only
    /// here (409). Checked every second; a changed file is put in force (bumping the rule-set
    /// version), a malformed one is logged and the last good content stays.
    #[arg(
        long = "managed-list",
        value_name = "NAME=PATH",
        env = "NETACL_MANAGED_LISTS",
        value_delimiter = ',',
        value_parser = netacl_edge::list_files::parse_flag
    )]
    managed_list: Vec<(netacl_model::ManagedListName, PathBuf)>,
    /// The edge run in process (`--edge-*`; boxed: the flags are many).
    #[command(flatten)]
    edge: Box<crate::cmd::edge::ServeEdgeArgs>,
    /// HTTPS (`--tls-cert`, `--tls-key`), plain HTTP (`--listen-http`,
    /// `--allow-insecure-http`); boxed like the edge's.
    #[command(flatten)]
    tls: Box<crate::args::tls::ServeTlsArgs>,
    /// The admin API's listener limits (caps, timeouts, shutdown grace; the proxies not counted
    /// per client are the console's `--trusted-proxy`).
    #[command(flatten)]
    listener: Box<crate::args::listener::ServeListenerArgs>,
}

/// The key-encryption key of `--secrets-key-file`, or the data directory's (generated on first
/// start); none without either (a `--database-url` node must be given one). `netacl tenant`
/// resolves it the same way, so the tenants it creates are sealed with the key `serve` uses.
pub(crate) fn resolve_secrets_key(
    secrets_key_file: Option<&std::path::Path>,
    database_url: Option<&str>,
    data_dir: &std::path::Path,
) -> anyhow::Result<netacl_secrets::Kek> {
    let data_dir = match (secrets_key_file, database_url) {
        (None, None) => {
            netacl_store::prepare_data_dir(data_dir).with_context(|| {
                format!("cannot create the data directory {}", data_dir.display())
            })?;
            Some(data_dir)
        }
        _ => None,
    };
    netacl_secrets::Kek::resolve(secrets_key_file, data_dir)
        .context("cannot load the key-encryption key (--secrets-key-file)")
}

/// Name of the operator token file in the data directory.
const OPERATOR_TOKEN_FILE: &str = "operator-token";

/// The operator token of `--operator-token-file`, or the data directory's (generated with mode
/// 0600 on first start). A file readable by group or others is refused; the token is never
/// printed.
fn load_operator_token(
    args: &Args,
) -> anyhow::Result<(netacl_server::OperatorToken, std::path::PathBuf)> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let (path, generate) = match &args.operator_token_file {
        Some(path) => (path.clone(), false),
        None => (args.data_dir.join(OPERATOR_TOKEN_FILE), true),
    };
    if generate && !path.exists() {
        netacl_store::prepare_data_dir(&args.data_dir).with_context(|| {
            format!(
                "cannot create the data directory {}",
                args.data_dir.display()
            )
        })?;
        let token = netacl_server::OperatorToken::generate();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create the operator token file {}", path.display()))?;
        writeln!(file, "{}", token.expose())
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", path.display()))?;
        return Ok((token, path));
    }
    let metadata = std::fs::metadata(&path)
        .with_context(|| format!("cannot read the operator token file {}", path.display()))?;
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "the operator token file {} has mode {mode:o}: it must be readable by its owner only \
             (chmod 600)",
            path.display()
        );
    }
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read the operator token file {}", path.display()))?,
    );
    let token = netacl_server::OperatorToken::new(text.trim().to_owned()).with_context(|| {
        format!(
            "the operator token file {} must hold one token of at least 32 characters",
            path.display()
        )
    })?;
    Ok((token, path))
}

/// Largest `--signing-key-file` read (an 8192-bit PKCS#1 key is about 6.5 KB of PEM).
const MAX_SIGNING_KEY_FILE: u64 = 64 * 1024;

/// The RSA key of `--signing-key-file`. Errors name the file, never its contents.
fn load_signing_key(
    path: &std::path::Path,
) -> anyhow::Result<Arc<netacl_server::auth::SigningKey>> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read --signing-key-file {}", path.display()))?;
    let mut pem = zeroize::Zeroizing::new(String::new());
    file.take(MAX_SIGNING_KEY_FILE + 1)
        .read_to_string(&mut pem)
        .with_context(|| format!("cannot read --signing-key-file {}", path.display()))?;
    if pem.len() as u64 > MAX_SIGNING_KEY_FILE {
        anyhow::bail!(
            "--signing-key-file {}: larger than {MAX_SIGNING_KEY_FILE} bytes",
            path.display()
        );
    }
    let key = netacl_server::auth::SigningKey::from_pem(&pem)
        .with_context(|| format!("--signing-key-file {}", path.display()))?;
    Ok(Arc::new(key))
}

/// Runs `netacl serve` until SIGINT or SIGTERM; then the listeners stop accepting, requests in
/// flight get `--shutdown-grace`, and blocking work still running (an analysis) gets
/// [`RUNTIME_SHUTDOWN_TIMEOUT`](crate::args::listener::RUNTIME_SHUTDOWN_TIMEOUT) before the
/// process exits without it. Writes commit durably before they are answered (SQLite WAL with
/// `synchronous=FULL`, PostgreSQL's commit), so a write cut short was never acknowledged.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init()
        .ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(serve(args));
    // Dropping the runtime would wait for every blocking task to finish.
    runtime.shutdown_timeout(crate::args::listener::RUNTIME_SHUTDOWN_TIMEOUT);
    served?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: Args) -> anyhow::Result<()> {
    // The caps are fitted to the descriptor limit (raised to the hard limit) before anything
    // is opened: the admin API's connections take one descriptor, the edge's two.
    let mut admin_limits = args.listener.limits(args.console.trusted_proxies()?);
    let mut edge_limits = args.edge.listener_limits();
    {
        let mut caps = vec![crate::args::listener::Cap {
            flag: "--max-connections",
            value: &mut admin_limits.max_connections,
            weight: 1,
            given: args.listener.max_connections_given(),
        }];
        if let Some(edge) = edge_limits.as_mut() {
            caps.push(crate::args::listener::Cap {
                flag: "--edge-max-connections",
                value: &mut edge.max_connections,
                weight: 2,
                given: args.edge.max_connections_given(),
            });
        }
        crate::args::listener::fit_to_descriptors(&mut caps);
    }
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr().context("no local address")?;
    let transport = args.tls.transport(local).await?;
    let tenant_domain = args
        .tenant_domain
        .clone()
        .unwrap_or_else(|| format!("localhost:{}", local.port()));
    let rate_limit = if args.rate_limit_burst == 0 {
        RateLimitConfig::disabled()
    } else {
        RateLimitConfig {
            burst: args.rate_limit_burst,
            per_second: args.rate_limit_per_second,
        }
    };
    let max_list_entries = args.limits.limits().max_entries_per_set;
    let (file_lists, list_files) =
        netacl_edge::list_files::load_all(&args.managed_list, max_list_entries)
            .map_err(anyhow::Error::msg)?;
    let secrets_key = Arc::new(resolve_secrets_key(
        args.secrets_key_file.as_deref(),
        args.database_url.as_deref(),
        &args.data_dir,
    )?);
    let (operator_token, operator_token_path) = load_operator_token(&args)?;
    let mut config = ServerConfig::new(tenant_domain.clone())
        .with_secrets_key(secrets_key)
        .with_rate_limit(rate_limit)
        .with_body_limit(args.body_limit)
        .with_log_retention(netacl_store::LogRetention {
            max_events: (args.log_retention_events > 0).then_some(args.log_retention_events),
            max_age_ms: (args.log_retention_days > 0)
                .then(|| netacl_server::days_ms(args.log_retention_days)),
        })
        .with_token_lifetime_secs(args.token_lifetime)
        .with_limits(args.limits.limits())
        .with_work_limits(
            netacl_server::WorkLimits::new()
                .with_analysis(args.analysis_work, args.analysis_deadline)
                .with_concurrency(
                    args.expensive_requests_per_tenant as usize,
                    args.expensive_requests
                        .map_or_else(netacl_server::default_per_process, |n| n as usize),
                ),
        )
        .with_managed_list_files(file_lists)
        .with_operator_token(operator_token);
    config = args.console.apply(config)?;
    if let Some(path) = &args.signing_key_file {
        config = config.with_signing_key(load_signing_key(path)?);
    }

    let limits = config.limits;
    let retention = netacl_store::HistoryRetention {
        versions: args.history_versions,
        days: args.history_days,
        bytes: args.history_bytes,
    };
    let (store, changes, location): (Arc<dyn Store>, _, _) = match &args.database_url {
        Some(url) => {
            let store = PostgresStore::connect(url, limits)
                .await
                .context("cannot use the database of --database-url")?
                .with_history_retention(retention);
            let changes = store.listen();
            (
                Arc::new(store),
                Some(changes),
                "database PostgreSQL".to_owned(),
            )
        }
        None => {
            let data_dir = args.data_dir.clone();
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(&data_dir, limits))
                .await
                .context("store task failed")?
                .with_context(|| {
                    format!("cannot open the database in {}", args.data_dir.display())
                })?
                .with_history_retention(retention);
            let location = format!("data {}", args.data_dir.display());
            (Arc::new(store), None, location)
        }
    };
    let bootstrap = BootstrapClient {
        client_id: args.bootstrap_client_id.clone(),
        client_secret: args.bootstrap_client_secret.clone(),
    };
    let (service, report) = AdminService::start(store, config, bootstrap)
        .await
        .context("cannot start the admin service")?;
    let _follower = changes.map(|changes| {
        let interval = std::time::Duration::from_millis(args.sync_interval_ms);
        service.follow_store(Some(changes), interval)
    });
    let _list_reloader = (!list_files.is_empty()).then(|| {
        let service = service.clone();
        netacl_edge::list_files::spawn_reloader(list_files, max_list_entries, move |name, list| {
            let service = service.clone();
            async move {
                service
                    .load_file_list(name, list)
                    .await
                    .map(|_| ())
                    .map_err(|err| err.message().to_owned())
            }
        })
    });
    // The edge shares the service's engine: what the write path (or the store follower)
    // installs is what the edge enforces, from the moment it is installed.
    let tenants_at_start = service.tenants().borrow().tenants.len();
    let edge = match args
        .edge
        .config(service.rule_sets(), tenants_at_start)
        .context("invalid --edge-* settings")?
    {
        Some((mut edge_config, mode)) => {
            if let Some(limits) = &edge_limits {
                edge_config.limits = limits.clone();
            }
            match mode {
                ServeEdgeMode::ByHost => tracing::info!(
                    tenants = tenants_at_start,
                    "the edge enforces each tenant by host"
                ),
                ServeEdgeMode::DefaultTenant { implicit: false } if tenants_at_start > 1 => {
                    tracing::warn!(
                        tenants = tenants_at_start,
                        "--edge-default-tenant-only: the edge enforces the default tenant's \
                         rules for every host; the other tenants' rules are NOT enforced here"
                    )
                }
                ServeEdgeMode::DefaultTenant { .. } => {}
            }
            edge_config.tls_reload_interval = args.tls.reload_interval();
            // The edge's per-rule summaries go into the default tenant's logs.
            let summaries = service.clone();
            edge_config.summary_sink = Some(netacl_edge::SummarySink::new(move |batch| {
                let service = summaries.clone();
                tokio::spawn(async move { service.record_acl_summaries(&batch).await });
            }));
            // --edge-tenants: each tenant's per-rule summaries go into that tenant's logs.
            let summaries = service.clone();
            edge_config.tenant_summary_sink =
                Some(netacl_edge::TenantSummarySink::new(move |reports| {
                    let service = summaries.clone();
                    tokio::spawn(async move {
                        for report in reports {
                            service
                                .record_tenant_acl_summaries(&report.tenant, &report.summaries)
                                .await;
                        }
                    });
                }));
            // --edge-tenants: every tenant of the service, its table filled before the edge
            // listens and kept in step with the service's tenants.
            let router = edge_config.tenants.clone();
            let _tenants_follower = router
                .clone()
                .map(|router| crate::cmd::serve_tenants::follow(router, service.tenants()));
            let edge = netacl_edge::start_edge(Arc::clone(service.engine()), edge_config)
                .await
                .context("cannot start the edge")?;
            // The impact preview reads the edge's traffic sample: the default tenant's, or with
            // --edge-tenants each tenant's requests in the shared ring.
            if let Some(sample) = edge.sample().cloned() {
                service.set_edge_sample_source(match router {
                    Some(router) => Arc::new(move |tenant: &str| {
                        router
                            .tenant(tenant)
                            .map(|t| sample.requests_of(t.rule_counts().sample_key()))
                    }),
                    None => Arc::new(move |tenant: &str| {
                        (tenant == netacl_store::TenantId::DEFAULT).then(|| sample.requests())
                    }),
                });
            }
            let show =
                |a: Option<SocketAddr>| a.map_or_else(|| "off".to_owned(), |a| a.to_string());
            println!(
                "netacl edge listening: http={} tls={} metrics={}",
                show(edge.http_addr()),
                show(edge.tls_addr()),
                show(edge.metrics_addr())
            );
            println!(
                "netacl edge enforces {}",
                match mode {
                    ServeEdgeMode::ByHost => "each tenant by host",
                    ServeEdgeMode::DefaultTenant { .. } =>
                        "the default tenant's rules for every host",
                }
            );
            Some((edge, mode))
        }
        None => None,
    };

    println!(
        "netacl admin API listening on {}://{local} (tenant {tenant_domain}, {location}, \
         rule-set version {}, {} network ACLs)",
        transport.scheme(),
        report.version,
        report.network_acls
    );
    if let Some(plain) = transport.plain_addr() {
        println!("netacl admin API also listening on http://{plain} (plain HTTP)");
    }
    let base_url = transport.base_url(local, &tenant_domain);
    println!(
        "{} tenant(s) served; operator API /_netacl/v1/tenants, token in {}",
        service.tenants().borrow().tenants.len(),
        operator_token_path.display()
    );
    if report.signing_key_created {
        println!(
            "created the tenant's RS256 signing key (kid {})",
            report.kid
        );
    }
    if report.signing_keys_sealed > 0 {
        println!(
            "sealed {} signing key(s) stored in clear with the key-encryption key",
            report.signing_keys_sealed
        );
    }
    match (&report.bootstrap_client_id, &report.generated_secret) {
        (Some(client_id), Some(secret)) => {
            println!(
                "bootstrap client created; its secret is shown only now (stored as a hash):\n  \
                 client_id={client_id}\n  client_secret={secret}"
            );
            print_curl(&base_url, &tenant_domain, client_id, secret);
        }
        (Some(client_id), None) => {
            println!("bootstrap client: {client_id}");
            if let Some(secret) = &args.bootstrap_client_secret {
                print_curl(&base_url, &tenant_domain, client_id, secret);
            }
        }
        _ => {}
    }

    let gate = netacl_listener::ConnectionGate::new(admin_limits);
    let _stats_log = crate::args::listener::spawn_stats_log("admin API", gate.clone());
    let admin = transport.serve(listener, service.router(), gate.clone());
    tokio::pin!(admin);
    let mut edge = edge;
    match edge.as_mut() {
        None => tokio::select! {
            served = &mut admin => served.context("server failed")?,
            () = crate::args::listener::shutdown_signal() => {}
        },
        // A failed edge listener ends the process (as it does `netacl edge`): serving the admin
        // API alone would leave the upstream unprotected without anyone noticing. So does a
        // tenant created while an edge that no flag told to ignore other tenants runs.
        Some((running, mode)) => tokio::select! {
            served = &mut admin => served.context("server failed")?,
            stopped = running.wait() => {
                stopped.context("the edge stopped")?;
                anyhow::bail!("the edge stopped");
            }
            tenant = another_tenant(*mode, service.tenants()) => {
                anyhow::bail!(
                    "tenant {tenant} was created while the in-process edge enforced the default \
                     tenant's rules for every host (the store held no other tenant at start, and \
                     neither --edge-tenants nor --edge-default-tenant-only was given): that edge \
                     cannot enforce tenant {tenant}'s rules, so it stops. Started again, the edge \
                     enforces each tenant by host (give --edge-tenants to say so, or \
                     --edge-default-tenant-only to keep the default tenant's rules for every host)"
                );
            }
            () = crate::args::listener::shutdown_signal() => {}
        },
    }
    // Stop accepting; connections with nothing in flight close, requests in flight get the
    // grace period.
    gate.close();
    if let Some((running, _)) = &edge {
        running.close();
    }
    let drained = async {
        gate.drained().await;
        if let Some((running, _)) = &edge {
            running.drained().await;
        }
    };
    let grace = args.listener.shutdown_grace();
    if tokio::time::timeout(grace, drained).await.is_err() {
        tracing::warn!(
            open = gate.stats().open,
            grace = ?grace,
            "requests still in flight after the shutdown grace: they are cut"
        );
    }
    Ok(())
}

/// Resolves, with a tenant's id, once the service serves a tenant other than the default one
/// while `mode` is the default tenant's rules for every host chosen by no flag; never otherwise.
async fn another_tenant(
    mode: ServeEdgeMode,
    mut tenants: tokio::sync::watch::Receiver<Arc<netacl_server::TenantDirectory>>,
) -> String {
    if mode == (ServeEdgeMode::DefaultTenant { implicit: true }) {
        loop {
            let other = tenants
                .borrow_and_update()
                .tenants
                .iter()
                .find(|t| t.id.as_str() != netacl_store::TenantId::DEFAULT)
                .map(|t| t.id.to_string());
            if let Some(id) = other {
                return id;
            }
            if tenants.changed().await.is_err() {
                break;
            }
        }
    }
    std::future::pending().await
}

fn print_curl(base_url: &str, tenant_domain: &str, client_id: &str, secret: &str) {
    let body = serde_json::json!({
        "grant_type": "client_credentials",
        "client_id": client_id,
        "client_secret": secret,
        "audience": format!("https://{tenant_domain}/api/v2/"),
    });
    println!(
        "get a token:\n  curl -s {base_url}/oauth/token -H 'content-type: application/json' \
         -d '{body}'"
    );
}

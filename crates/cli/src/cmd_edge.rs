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
    start_edge, EdgeConfig, ForwardedHeader, RemoteRules, RulesSource, TlsFiles, TrustedProxies,
};

/// Arguments of `netacl edge`.
#[derive(clap::Args)]
pub struct Args {
    /// The upstream to proxy to, `http://HOST:PORT`.
    #[arg(long, env = "NETACL_EDGE_UPSTREAM")]
    upstream: String,
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
    /// Follow the rules of a remote `netacl serve`, `http://HOST:PORT`.
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
    /// Load the rules from a file (JSON array of records, or `{"network_acls": [...]}`),
    /// reloaded when it changes.
    #[arg(long, env = "NETACL_EDGE_RULES_FILE")]
    rules_file: Option<PathBuf>,
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
    /// `on`, or `off` to proxy without evaluating anything (to measure the ACL's cost).
    #[arg(long, env = "NETACL_EDGE_ACL", default_value = "on", value_parser = ["on", "off"])]
    acl: String,
    /// Log format on stderr: `text` or `json` (one JSON object a line).
    #[arg(long, env = "NETACL_EDGE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Time a client has to send its ClientHello and complete the TLS handshake.
    #[arg(long, env = "NETACL_EDGE_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    handshake_timeout: Duration,
}

/// Parses `250ms`, `10s`, `10m`, `1h`, or a bare number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 250ms, 10s, 10m, 1h"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("invalid duration unit in {s:?}: use ms, s, m or h")),
    };
    if d.is_zero() {
        return Err(format!("duration {s:?} must be positive"));
    }
    Ok(d)
}

fn config(args: Args) -> anyhow::Result<EdgeConfig> {
    let upstream: http::Uri = args
        .upstream
        .parse()
        .with_context(|| format!("invalid --upstream {:?}", args.upstream))?;
    let mut config = EdgeConfig::new(upstream);
    config.listen = args.listen;
    config.listen_tls = args.listen_tls;
    config.tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None) => None,
        _ => bail!("--tls-cert and --tls-key go together"),
    };
    config.trusted_proxies = TrustedProxies::parse(&args.trusted_proxy)?;
    config.forwarded_header =
        ForwardedHeader::parse(&args.forwarded_header).with_context(|| {
            format!(
                "invalid --forwarded-header {:?}: expected x-forwarded-for or forwarded",
                args.forwarded_header
            )
        })?;
    config.geoip_city = args.geoip_city;
    config.geoip_asn = args.geoip_asn;
    config.geoip_reload_interval = args.geoip_reload_interval;
    config.metrics_listen = if args.metrics_listen.eq_ignore_ascii_case("off") {
        None
    } else {
        Some(
            args.metrics_listen
                .parse()
                .with_context(|| format!("invalid --metrics-listen {:?}", args.metrics_listen))?,
        )
    };
    config.summary_interval = args.summary_interval;
    config.acl_enabled = args.acl == "on";
    config.handshake_timeout = args.handshake_timeout;
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
            RulesSource::Remote(remote)
        }
        (None, Some(path)) => RulesSource::File {
            path,
            interval: args.rules_file_interval,
        },
        (None, None) if !config.acl_enabled => RulesSource::Engine,
        (None, None) => bail!("give --rules-file or --rules-url (or --acl off)"),
        (Some(_), Some(_)) => bail!("--rules-url and --rules-file exclude each other"),
    };
    Ok(config)
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
    let config = config(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let engine = Arc::new(netacl_eval::Engine::new());
        let edge = start_edge(engine, config).await?;
        let show = |a: Option<SocketAddr>| a.map_or_else(|| "off".to_owned(), |a| a.to_string());
        println!(
            "netacl edge listening: http={} tls={} metrics={}",
            show(edge.http_addr()),
            show(edge.tls_addr()),
            show(edge.metrics_addr())
        );
        edge.wait().await?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("ms").is_err());
    }
}

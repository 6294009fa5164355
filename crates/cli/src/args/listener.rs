//! The listener limits as flags (`netacl serve`, `netacl edge`, and the in-process edge's
//! `--edge-*`), the descriptor limit the caps are fitted to, and the shutdown grace.
use std::time::Duration;

use netacl_listener::{ConnectionGate, ConnectionLimits, ListenerStats};
use netacl_model::TrustedProxies;

use crate::args::duration::parse_duration;

/// Default `--shutdown-grace`: how long requests in flight may run after SIGTERM or SIGINT.
/// With the second the runtime is given after it, the process is gone within 10 s.
pub const DEFAULT_SHUTDOWN_GRACE: &str = "5s";

/// Longest `--shutdown-grace`: the process must be gone within 10 s of the signal.
const MAX_SHUTDOWN_GRACE: Duration = Duration::from_secs(8);

/// How long the runtime waits for blocking tasks (a rule analysis, a database call) once the
/// grace is over, before the process exits without them.
pub const RUNTIME_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// `--shutdown-grace`: a duration of at most 8 s.
fn parse_grace(s: &str) -> Result<Duration, String> {
    let grace = parse_duration(s)?;
    if grace > MAX_SHUTDOWN_GRACE {
        return Err(format!(
            "the shutdown grace is at most {}s (the process must stop within 10 s)",
            MAX_SHUTDOWN_GRACE.as_secs()
        ));
    }
    Ok(grace)
}

/// A positive count.
fn parse_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a positive whole number")),
    }
}

/// The admin API's listener limits (`netacl serve`; `--listen` and `--listen-http` share them;
/// the reverse proxies not counted per client are the console's `--trusted-proxy`, see
/// [`ConsoleArgs::trusted_proxies`](crate::args::console::ConsoleArgs::trusted_proxies)).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeListenerArgs {
    /// Time for a request head to arrive in full (from the connection's start, after TLS, for
    /// its first request; from its first byte for later ones); the connection is closed over it.
    #[arg(long, env = "NETACL_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    header_read_timeout: Duration,
    /// Time a connection may stay open with no request in flight (keep-alive; HTTP/2 with no
    /// stream). A request in flight, such as the watch long poll, is not idle.
    #[arg(long, env = "NETACL_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Time for a request body to arrive after its head, plus one second per --min-body-rate
    /// bytes received; over it the body fails (400).
    #[arg(long, env = "NETACL_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    body_timeout: Duration,
    /// Bytes of request body that buy one more second past --body-timeout (0: none).
    #[arg(long, env = "NETACL_MIN_BODY_RATE", value_name = "BYTES_PER_SECOND",
          default_value_t = netacl_listener::DEFAULT_MIN_BODY_RATE)]
    min_body_rate: u64,
    /// Connections open at once (default 4096, lowered to fit the descriptor limit); over it
    /// the longest-idle connection is closed to admit a new one, else the new one is closed.
    #[arg(long, env = "NETACL_MAX_CONNECTIONS", value_parser = parse_count)]
    max_connections: Option<usize>,
    /// Connections open at once from one client address (IPv6: one /64); over it the client's
    /// own longest-idle connection is closed to admit a new one, else the new one is closed.
    #[arg(long, env = "NETACL_MAX_CONNECTIONS_PER_CLIENT", value_parser = parse_count,
          default_value_t = netacl_listener::DEFAULT_MAX_CONNECTIONS_PER_CLIENT)]
    max_connections_per_client: usize,
    /// How long requests in flight may run after SIGTERM or SIGINT (at most 8s); the process
    /// then exits (within 10 s of the signal).
    #[arg(long, env = "NETACL_SHUTDOWN_GRACE", default_value = DEFAULT_SHUTDOWN_GRACE, value_parser = parse_grace)]
    shutdown_grace: Duration,
}

impl ServeListenerArgs {
    /// The admin API's limits (the cap before it is fitted to the descriptor limit), the
    /// connections of `trusted_proxies` (serve's `--trusted-proxy`) not counted per client.
    pub fn limits(&self, trusted_proxies: TrustedProxies) -> ConnectionLimits {
        let mut limits = ConnectionLimits::default();
        limits.header_read_timeout = self.header_read_timeout;
        limits.idle_timeout = self.idle_timeout;
        limits.body_timeout = self.body_timeout;
        limits.min_body_rate = self.min_body_rate;
        limits.max_connections = self
            .max_connections
            .unwrap_or(netacl_listener::DEFAULT_MAX_CONNECTIONS);
        limits.max_connections_per_client = self.max_connections_per_client;
        limits.trusted_proxies = trusted_proxies;
        limits
    }

    /// Whether `--max-connections` was given.
    pub fn max_connections_given(&self) -> bool {
        self.max_connections.is_some()
    }

    /// `--shutdown-grace`.
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace
    }
}

/// Declares the proxy's listener flags: `netacl edge`'s, and the in-process edge's with the
/// `edge-` prefix (the environment variables are `netacl edge`'s in both).
macro_rules! proxy_listener_args {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(clap::Args, Debug, Clone)]
        pub struct $name {
            /// Time for a request head to arrive in full (from the connection's start, after
            /// TLS, for its first request; from its first byte for later ones).
            #[arg(id = concat!($prefix, "header-read-timeout"), long = concat!($prefix, "header-read-timeout"), env = "NETACL_EDGE_HEADER_READ_TIMEOUT",
                  default_value = "10s", value_parser = parse_duration)]
            header_read_timeout: Duration,
            /// Time a connection may stay open with no request in flight.
            #[arg(id = concat!($prefix, "idle-timeout"), long = concat!($prefix, "idle-timeout"), env = "NETACL_EDGE_IDLE_TIMEOUT",
                  default_value = "60s", value_parser = parse_duration)]
            idle_timeout: Duration,
            /// Time for a request body to arrive after its head, plus one second per
            /// min-body-rate bytes received; over it the request is answered 408.
            #[arg(id = concat!($prefix, "body-timeout"), long = concat!($prefix, "body-timeout"), env = "NETACL_EDGE_BODY_TIMEOUT",
                  default_value = "30s", value_parser = parse_duration)]
            body_timeout: Duration,
            /// Bytes of request body that buy one more second past the body timeout (0: none).
            #[arg(id = concat!($prefix, "min-body-rate"), long = concat!($prefix, "min-body-rate"), env = "NETACL_EDGE_MIN_BODY_RATE",
                  value_name = "BYTES_PER_SECOND", default_value_t = netacl_listener::DEFAULT_MIN_BODY_RATE)]
            min_body_rate: u64,
            /// Connections open at once (default 16384, lowered to fit the descriptor limit at
            /// two descriptors each); over it the longest-idle one is closed to admit a new one.
            #[arg(id = concat!($prefix, "max-connections"), long = concat!($prefix, "max-connections"), env = "NETACL_EDGE_MAX_CONNECTIONS",
                  value_parser = parse_count)]
            max_connections: Option<usize>,
            /// Connections open at once from one client address (IPv6: one /64; the trusted
            /// proxies are not counted).
            #[arg(id = concat!($prefix, "max-connections-per-client"), long = concat!($prefix, "max-connections-per-client"), env = "NETACL_EDGE_MAX_CONNECTIONS_PER_CLIENT",
                  value_parser = parse_count, default_value_t = netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT)]
            max_connections_per_client: usize,
        }

        impl $name {
            /// Sets the edge's listener limits (the trusted proxies are added by the edge).
            pub fn apply(&self, limits: &mut ConnectionLimits) {
                limits.header_read_timeout = self.header_read_timeout;
                limits.idle_timeout = self.idle_timeout;
                limits.body_timeout = self.body_timeout;
                limits.min_body_rate = self.min_body_rate;
                limits.max_connections = self
                    .max_connections
                    .unwrap_or(netacl_edge::DEFAULT_PROXY_MAX_CONNECTIONS);
                limits.max_connections_per_client = self.max_connections_per_client;
            }

            /// Whether the cap was given.
            pub fn max_connections_given(&self) -> bool {
                self.max_connections.is_some()
            }
        }
    };
}

proxy_listener_args!(
    /// The edge proxy's listener limits (`netacl edge`).
    EdgeListenerArgs,
    ""
);

proxy_listener_args!(
    /// The in-process edge's listener limits (`netacl serve --edge-*`).
    ServeEdgeListenerArgs,
    "edge-"
);

/// `--shutdown-grace` of `netacl edge`.
#[derive(clap::Args, Debug, Clone)]
pub struct EdgeShutdownArgs {
    /// How long requests in flight may run after SIGTERM or SIGINT (at most 8s); the process
    /// then exits (within 10 s of the signal).
    #[arg(long, env = "NETACL_EDGE_SHUTDOWN_GRACE", default_value = DEFAULT_SHUTDOWN_GRACE, value_parser = parse_grace)]
    pub shutdown_grace: Duration,
}

/// A connection cap to fit into the process's descriptors.
pub struct Cap<'a> {
    /// The flag that sets it (for the log line).
    pub flag: &'static str,
    /// The cap.
    pub value: &'a mut usize,
    /// Descriptors each connection may take (2 for a proxy: its upstream connection).
    pub weight: usize,
    /// Given by the operator (a lowered cap is then a warning).
    pub given: bool,
}

/// Raises the soft descriptor limit to the hard one, then lowers the caps together (in
/// proportion) when they would not fit in what connections may use of it
/// ([`netacl_listener::connection_budget`]).
pub fn fit_to_descriptors(caps: &mut [Cap<'_>]) {
    let descriptors = match netacl_listener::raise_descriptor_limit() {
        Ok(limit) => limit,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read or raise the descriptor limit; assuming 1024");
            1024
        }
    };
    let budget = netacl_listener::connection_budget(descriptors);
    let needed: usize = caps
        .iter()
        .map(|cap| cap.value.saturating_mul(cap.weight))
        .fold(0, usize::saturating_add);
    if needed <= budget {
        tracing::debug!(
            descriptors,
            budget,
            needed,
            "connection caps fit the descriptor limit"
        );
        return;
    }
    for cap in caps.iter_mut() {
        let fitted = ((*cap.value as u128 * budget as u128) / needed as u128).max(1) as usize;
        if cap.given {
            tracing::warn!(
                flag = cap.flag,
                given = *cap.value,
                fitted,
                descriptors,
                "connection cap lowered to fit the descriptor limit"
            );
        } else {
            tracing::info!(
                flag = cap.flag,
                fitted,
                descriptors,
                "default connection cap lowered to fit the descriptor limit"
            );
        }
        *cap.value = fitted;
    }
}

/// Logs a gate's counters every minute at `info` when it refused or evicted connections since
/// the last line (at `debug` when only timeouts changed); never a line per connection.
pub fn spawn_stats_log(name: &'static str, gate: ConnectionGate) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = ListenerStats::default();
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = gate.stats();
            let pushed_back = now.refused_max_connections
                + now.refused_per_client
                + now.evicted_max_connections
                + now.evicted_per_client
                != last.refused_max_connections
                    + last.refused_per_client
                    + last.evicted_max_connections
                    + last.evicted_per_client;
            macro_rules! line {
                ($level:ident) => {
                    tracing::$level!(
                        listener = name,
                        open = now.open,
                        accepted = now.accepted,
                        refused_max_connections = now.refused_max_connections,
                        refused_per_client = now.refused_per_client,
                        evicted_max_connections = now.evicted_max_connections,
                        evicted_per_client = now.evicted_per_client,
                        header_timeouts = now.header_timeouts,
                        idle_timeouts = now.idle_timeouts,
                        body_timeouts = now.body_timeouts,
                        send_timeouts = now.send_timeouts,
                        accept_errors = now.accept_errors,
                        "listener counters (since start)"
                    )
                };
            }
            if pushed_back || now.accept_errors != last.accept_errors {
                line!(info);
            } else if now != last {
                line!(debug);
            }
            last = now;
        }
    })
}

/// Completes on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_keeps_the_stop_within_ten_seconds() {
        assert_eq!(parse_grace("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_grace("8s"), Ok(Duration::from_secs(8)));
        assert!(parse_grace("9s").is_err());
        assert!(parse_grace("0s").is_err());
    }

    #[test]
    fn counts_are_positive() {
        assert_eq!(parse_count("12"), Ok(12));
        assert!(parse_count("0").is_err());
        assert!(parse_count("-1").is_err());
    }
}

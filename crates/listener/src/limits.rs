//! What a listener allows: [`ConnectionLimits`], and the descriptor limit the caps must fit in.
use std::net::IpAddr;
use std::time::Duration;

use netacl_model::TrustedProxies;

/// The limits of one listener (or of several sharing a [`ConnectionGate`](crate::ConnectionGate)).
///
/// Start from [`ConnectionLimits::default`] and set the fields. Every duration must be
/// positive; a cap of 0 admits nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// Time for a request head to arrive in full: counted from the start of the connection
    /// (after a TLS handshake) for its first request, and on an HTTP/1.1 kept-alive connection
    /// from the first byte of each later request. Over it the connection is closed.
    pub header_read_timeout: Duration,
    /// Time a connection may stay open with no request in flight and none begun (HTTP/1.1
    /// keep-alive; HTTP/2 with no open stream). A request in flight (a long poll waiting for
    /// its answer) is not idle.
    pub idle_timeout: Duration,
    /// The body deadline: a request body must arrive in full within this time after its head,
    /// plus one second for every [`min_body_rate`](Self::min_body_rate) bytes received. Over
    /// it the body fails with [`BodyError::TimedOut`](crate::BodyError::TimedOut).
    pub body_timeout: Duration,
    /// Bytes per second of body that buy one more second past [`body_timeout`](Self::body_timeout)
    /// (0: the body must arrive within `body_timeout` whatever its size).
    pub min_body_rate: u64,
    /// Connections open at once. Over it, the longest-idle connection is closed to admit the
    /// new one (see the crate docs); with none idle, the new one is closed at once.
    pub max_connections: usize,
    /// Connections open at once from one client address (IPv4 by address, IPv6 by /64,
    /// IPv4-mapped IPv6 as IPv4). Over it, that client's own longest-idle connection is closed
    /// to admit the new one; with none idle, the new one is closed at once.
    pub max_connections_per_client: usize,
    /// The reverse proxies in front (the `--trusted-proxy` networks, whose forwarding headers
    /// are believed): behind one every client shares its address, so its connections are
    /// exempt from [`max_connections_per_client`](Self::max_connections_per_client).
    pub trusted_proxies: TrustedProxies,
    /// Streams one HTTP/2 connection may have open at once.
    pub h2_max_concurrent_streams: u32,
}

/// Default [`ConnectionLimits::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`ConnectionLimits::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`ConnectionLimits::body_timeout`].
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`ConnectionLimits::min_body_rate`] (bytes per second).
pub const DEFAULT_MIN_BODY_RATE: u64 = 1024;
/// Default [`ConnectionLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default [`ConnectionLimits::max_connections_per_client`].
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 64;
/// Default [`ConnectionLimits::h2_max_concurrent_streams`].
pub const DEFAULT_H2_MAX_CONCURRENT_STREAMS: u32 = 100;

impl Default for ConnectionLimits {
    /// Header 10 s, idle 60 s, body 30 s plus 1 s per KiB, 4,096 connections, 64 per client,
    /// no exempt peer, 100 HTTP/2 streams per connection.
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            min_body_rate: DEFAULT_MIN_BODY_RATE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            trusted_proxies: TrustedProxies::none(),
            h2_max_concurrent_streams: DEFAULT_H2_MAX_CONCURRENT_STREAMS,
        }
    }
}

impl ConnectionLimits {
    /// Whether `ip` is one of the [`trusted_proxies`](Self::trusted_proxies) (an IPv4-mapped
    /// address or network counts as IPv4), not counted per client.
    pub fn is_exempt(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.contains(ip)
    }

    /// The shortest of the timeouts the connection watchdog enforces: how often it looks at a
    /// connection with a request in flight.
    pub(crate) fn watch_period(&self) -> Duration {
        self.header_read_timeout
            .min(self.idle_timeout)
            .max(Duration::from_millis(10))
    }
}

/// Raises the process's soft limit of open descriptors (`RLIMIT_NOFILE`) to its hard limit and
/// returns the soft limit now in force.
pub fn raise_descriptor_limit() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

/// How many descriptors connections may use in a process allowed `descriptors` open files: the
/// limit less a reserve (a quarter of it, at least 32 and at most 1,024) for the listeners,
/// the database, log and data files, and the outgoing connections a process keeps of its own.
/// A proxy, which may hold an upstream connection for each client connection, counts two
/// descriptors per connection against it.
pub fn connection_budget(descriptors: u64) -> usize {
    let reserve = (descriptors / 4).clamp(32, 1024);
    usize::try_from(descriptors.saturating_sub(reserve)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_proxies_match_mapped_addresses_and_networks() {
        let limits = ConnectionLimits {
            trusted_proxies: TrustedProxies::parse([
                "10.0.0.0/8",
                "::ffff:192.0.2.0/120",
                "2001:db8::/32",
            ])
            .unwrap(),
            ..ConnectionLimits::default()
        };
        for yes in ["10.1.2.3", "::ffff:10.1.2.3", "192.0.2.9", "2001:db8::1"] {
            assert!(limits.is_exempt(yes.parse().unwrap()), "{yes}");
        }
        for no in ["11.0.0.1", "192.0.3.1", "2001:db9::1", "::1"] {
            assert!(!limits.is_exempt(no.parse().unwrap()), "{no}");
        }
    }

    #[test]
    fn the_budget_keeps_a_reserve() {
        assert_eq!(connection_budget(256), 192);
        assert_eq!(connection_budget(100), 68);
        assert_eq!(connection_budget(20_000), 18_976);
        assert_eq!(connection_budget(1 << 20), (1 << 20) - 1024);
        assert_eq!(connection_budget(10), 0);
    }
}

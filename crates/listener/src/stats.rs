//! What a gate counts: [`ListenerStats`].
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The counters of a [`ConnectionGate`](crate::ConnectionGate) since it was made (every
/// field but `open` only grows). Read with [`ConnectionGate::stats`](crate::ConnectionGate::stats);
/// the edge exposes them as Prometheus series, the admin service logs them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListenerStats {
    /// Connections open now (admitted and not yet closed).
    pub open: u64,
    /// Connections admitted.
    pub accepted: u64,
    /// New connections closed at once: the global cap was reached and none was idle.
    pub refused_max_connections: u64,
    /// New connections closed at once: their client's cap was reached and none of its
    /// connections was idle.
    pub refused_per_client: u64,
    /// Idle connections closed to admit a new one under the global cap.
    pub evicted_max_connections: u64,
    /// Idle connections closed to admit a new one of the same client under its cap.
    pub evicted_per_client: u64,
    /// Connections closed because a request head did not arrive in time.
    pub header_timeouts: u64,
    /// Connections closed after the idle timeout.
    pub idle_timeouts: u64,
    /// Request bodies failed for missing their deadline.
    pub body_timeouts: u64,
    /// Connections closed because the client read nothing of an answer for the idle timeout.
    pub send_timeouts: u64,
    /// Failed `accept` calls (out of descriptors and the like).
    pub accept_errors: u64,
}

/// The gate's counters, shared with its connections.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) accepted: AtomicU64,
    pub(crate) refused_max_connections: AtomicU64,
    pub(crate) refused_per_client: AtomicU64,
    pub(crate) evicted_max_connections: AtomicU64,
    pub(crate) evicted_per_client: AtomicU64,
    pub(crate) header_timeouts: AtomicU64,
    pub(crate) idle_timeouts: AtomicU64,
    pub(crate) body_timeouts: AtomicU64,
    pub(crate) send_timeouts: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
}

/// Adds one to a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self, open: u64) -> ListenerStats {
        ListenerStats {
            open,
            accepted: self.accepted.load(Relaxed),
            refused_max_connections: self.refused_max_connections.load(Relaxed),
            refused_per_client: self.refused_per_client.load(Relaxed),
            evicted_max_connections: self.evicted_max_connections.load(Relaxed),
            evicted_per_client: self.evicted_per_client.load(Relaxed),
            header_timeouts: self.header_timeouts.load(Relaxed),
            idle_timeouts: self.idle_timeouts.load(Relaxed),
            body_timeouts: self.body_timeouts.load(Relaxed),
            send_timeouts: self.send_timeouts.load(Relaxed),
            accept_errors: self.accept_errors.load(Relaxed),
        }
    }
}

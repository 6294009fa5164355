//! The state one admitted connection shares between its serving task, its requests and the
//! gate's registry: whether a request is in flight, since when it is idle, whether a request
//! head has begun, whether it was chosen for eviction.
//!
//! Times are milliseconds since the gate's epoch, in atomics, so that the registry can rank
//! connections of every task without a lock of theirs, and a request costs a few atomic
//! operations on its own connection's state.
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::limits::ConnectionLimits;
use crate::stats::Counters;

/// Whose connection it is, for the per-client cap: an IPv4 address, or an IPv6 /64
/// (IPv4-mapped addresses count as IPv4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClientKey {
    V4(u32),
    V6(u64),
}

impl ClientKey {
    pub(crate) fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => ClientKey::V4(u32::from(v4)),
            IpAddr::V6(v6) => ClientKey::V6((u128::from(v6) >> 64) as u64),
        }
    }
}

/// The body deadline's two numbers, copied from the limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub(crate) timeout: Duration,
    pub(crate) min_rate: u64,
}

/// The shared state of one connection.
#[derive(Debug)]
pub(crate) struct ConnState {
    pub(crate) client: ClientKey,
    epoch: Instant,
    /// When serving began (admission, then the end of the handshake).
    started_ms: AtomicU64,
    /// Requests whose response is not finished (an upgraded connection holds one forever).
    in_flight: AtomicU32,
    /// Requests dispatched so far.
    requests: AtomicU64,
    /// When the last request in flight finished.
    idle_since_ms: AtomicU64,
    /// One more than when the first byte of the next HTTP/1 request head arrived; 0 for none.
    head_started_ms: AtomicU64,
    /// One more than when a write to the client found its socket full; 0 when the last write
    /// went through.
    write_stalled_ms: AtomicU64,
    /// When the last write with nothing in flight went through: the tail of an answer whose
    /// body hyper has taken whole is still being sent.
    last_write_ms: AtomicU64,
    /// The connection speaks HTTP/2.
    h2: AtomicBool,
    /// The byte stream has not been dropped (an upgrade keeps it past the HTTP connection).
    io_open: AtomicBool,
    /// Chosen for eviction (written under the registry's lock).
    pub(crate) marked: AtomicBool,
    /// Wakes the serving task when the connection is chosen for eviction.
    pub(crate) evict: Notify,
    pub(crate) counters: Arc<Counters>,
    pub(crate) body: BodyLimits,
}

/// A request in flight: made when the request is dispatched, dropped when its response body
/// is finished (or dropped).
#[derive(Debug)]
pub(crate) struct InFlight {
    state: Arc<ConnState>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.state.in_flight.fetch_sub(1, Relaxed) == 1 {
            self.state.idle_since_ms.store(self.state.now_ms(), Relaxed);
            self.state.head_started_ms.store(0, Relaxed);
        }
    }
}

/// Which timeout closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    Header,
    Idle,
    /// The client read nothing of an answer for the idle timeout.
    Send,
}

/// What the watchdog finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watch {
    /// A request is in flight and its answer is not stuck: look again later.
    Busy,
    /// Nothing in flight: the connection is closed at this time (ms since the epoch).
    Until(u64, Expiry),
}

/// How eager a connection is to be evicted: lower goes first. Connections that have not yet
/// finished a request head (fresh or half-sent) go before kept-alive ones, the oldest first.
pub(crate) type Rank = (u8, u64);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl ConnState {
    pub(crate) fn new(
        client: ClientKey,
        epoch: Instant,
        counters: Arc<Counters>,
        limits: &ConnectionLimits,
    ) -> Self {
        let state = Self {
            client,
            epoch,
            started_ms: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            requests: AtomicU64::new(0),
            idle_since_ms: AtomicU64::new(0),
            head_started_ms: AtomicU64::new(0),
            write_stalled_ms: AtomicU64::new(0),
            last_write_ms: AtomicU64::new(0),
            h2: AtomicBool::new(false),
            io_open: AtomicBool::new(true),
            marked: AtomicBool::new(false),
            evict: Notify::new(),
            counters,
            body: BodyLimits {
                timeout: limits.body_timeout,
                min_rate: limits.min_body_rate,
            },
        };
        state.start();
        state
    }

    pub(crate) fn now_ms(&self) -> u64 {
        millis(Instant::now().saturating_duration_since(self.epoch))
    }

    /// The instant `ms` after the epoch.
    pub(crate) fn instant(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }

    /// Serving (re)starts now: the first request head is due from here.
    pub(crate) fn start(&self) {
        self.started_ms.store(self.now_ms(), Relaxed);
    }

    /// A request was dispatched.
    pub(crate) fn begin(self: &Arc<Self>, h2: bool) -> InFlight {
        if h2 {
            self.h2.store(true, Relaxed);
        }
        self.requests.fetch_add(1, Relaxed);
        self.in_flight.fetch_add(1, Relaxed);
        self.head_started_ms.store(0, Relaxed);
        InFlight {
            state: Arc::clone(self),
        }
    }

    /// Bytes arrived from the client.
    pub(crate) fn on_read(&self) {
        if self.in_flight.load(Relaxed) == 0
            && self.head_started_ms.load(Relaxed) == 0
            && self.requests.load(Relaxed) > 0
            && !self.h2.load(Relaxed)
        {
            self.head_started_ms.store(self.now_ms() + 1, Relaxed);
        }
    }

    /// A write to the client found the socket full (`true`) or went through.
    pub(crate) fn on_write(&self, stalled: bool) {
        let since = self.write_stalled_ms.load(Relaxed);
        if stalled {
            if since == 0 {
                self.write_stalled_ms.store(self.now_ms() + 1, Relaxed);
            }
            return;
        }
        if since != 0 {
            self.write_stalled_ms.store(0, Relaxed);
        }
        if self.in_flight.load(Relaxed) == 0 {
            self.last_write_ms.store(self.now_ms(), Relaxed);
        }
    }

    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Relaxed)
    }

    pub(crate) fn is_h2(&self) -> bool {
        self.h2.load(Relaxed)
    }

    pub(crate) fn is_marked(&self) -> bool {
        self.marked.load(Relaxed)
    }

    /// The byte stream was dropped.
    pub(crate) fn close_io(&self) {
        self.io_open.store(false, Relaxed);
    }

    /// The HTTP connection ended but its byte stream lives on (an upgrade, WebSocket): it is
    /// busy until the stream is dropped, never idle, never evicted.
    pub(crate) fn hold_if_upgraded(&self) {
        if self.io_open.load(Relaxed) {
            self.in_flight.fetch_add(1, Relaxed);
        }
    }

    /// Where the connection stands against the header and idle timeouts.
    pub(crate) fn watch(&self, limits: &ConnectionLimits) -> Watch {
        if self.in_flight.load(Relaxed) > 0 {
            // A client that reads nothing of its answer (its socket stays full) for the idle
            // timeout holds the connection for nothing.
            return match self.write_stalled_ms.load(Relaxed) {
                0 => Watch::Busy,
                since => Watch::Until(
                    (since - 1).saturating_add(millis(limits.idle_timeout)),
                    Expiry::Send,
                ),
            };
        }
        let header = millis(limits.header_read_timeout);
        if self.requests.load(Relaxed) == 0 {
            return Watch::Until(
                self.started_ms.load(Relaxed).saturating_add(header),
                Expiry::Header,
            );
        }
        let head = self.head_started_ms.load(Relaxed);
        if head > 0 {
            return Watch::Until((head - 1).saturating_add(header), Expiry::Header);
        }
        // Idle from the end of the last answer: its last byte written, not its body handed over.
        let idle_since = self
            .idle_since_ms
            .load(Relaxed)
            .max(self.last_write_ms.load(Relaxed));
        let idle = millis(limits.idle_timeout);
        match self.write_stalled_ms.load(Relaxed) {
            0 => Watch::Until(idle_since.saturating_add(idle), Expiry::Idle),
            since => Watch::Until(
                (since - 1).max(idle_since).saturating_add(idle),
                Expiry::Send,
            ),
        }
    }

    /// The connection's eviction rank, `None` when it may not be evicted (a request in
    /// flight, or already chosen).
    pub(crate) fn rank(&self) -> Option<Rank> {
        if self.in_flight.load(Relaxed) > 0 || self.marked.load(Relaxed) {
            return None;
        }
        if self.requests.load(Relaxed) == 0 {
            Some((0, self.started_ms.load(Relaxed)))
        } else {
            let head = self.head_started_ms.load(Relaxed);
            if head > 0 {
                Some((0, head - 1))
            } else {
                Some((1, self.idle_since_ms.load(Relaxed)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> Arc<ConnState> {
        Arc::new(ConnState::new(
            ClientKey::V4(1),
            Instant::now(),
            Arc::default(),
            &ConnectionLimits::default(),
        ))
    }

    #[test]
    fn client_keys() {
        let key = |s: &str| ClientKey::of(s.parse().unwrap());
        assert_eq!(key("192.0.2.1"), key("::ffff:192.0.2.1"));
        assert_ne!(key("192.0.2.1"), key("192.0.2.2"));
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
    }

    #[test]
    fn a_connection_with_a_request_in_flight_is_never_ranked_for_eviction() {
        let limits = ConnectionLimits::default();
        let conn = state();
        assert_eq!(conn.rank().map(|r| r.0), Some(0), "fresh");
        assert!(matches!(
            conn.watch(&limits),
            Watch::Until(_, Expiry::Header)
        ));
        let request = conn.begin(false);
        assert_eq!(conn.rank(), None);
        assert_eq!(conn.watch(&limits), Watch::Busy);
        conn.on_read();
        assert_eq!(conn.rank(), None, "body bytes of the request in flight");
        drop(request);
        assert_eq!(conn.rank().map(|r| r.0), Some(1), "kept alive");
        assert!(matches!(conn.watch(&limits), Watch::Until(_, Expiry::Idle)));
        conn.on_read();
        assert_eq!(conn.rank().map(|r| r.0), Some(0), "next head begun");
        assert!(matches!(
            conn.watch(&limits),
            Watch::Until(_, Expiry::Header)
        ));
        conn.marked.store(true, Relaxed);
        assert_eq!(conn.rank(), None, "already chosen");
    }

    #[test]
    fn an_answer_the_client_does_not_read_is_watched() {
        let limits = ConnectionLimits::default();
        let conn = state();
        let _request = conn.begin(false);
        assert_eq!(conn.watch(&limits), Watch::Busy);
        conn.on_write(true);
        assert!(matches!(conn.watch(&limits), Watch::Until(_, Expiry::Send)));
        conn.on_write(false);
        assert_eq!(conn.watch(&limits), Watch::Busy);
        // The body handed over whole, its tail still stuck in the socket.
        conn.on_write(true);
        drop(_request);
        assert!(matches!(conn.watch(&limits), Watch::Until(_, Expiry::Send)));
        conn.on_write(false);
        assert!(matches!(conn.watch(&limits), Watch::Until(_, Expiry::Idle)));
    }

    #[test]
    fn http2_bytes_do_not_start_a_head() {
        let limits = ConnectionLimits::default();
        let conn = state();
        drop(conn.begin(true));
        conn.on_read();
        assert!(matches!(conn.watch(&limits), Watch::Until(_, Expiry::Idle)));
    }

    #[test]
    fn an_upgraded_connection_stays_busy() {
        let conn = state();
        drop(conn.begin(false));
        conn.hold_if_upgraded();
        assert_eq!(conn.rank(), None);
        let closed = state();
        closed.close_io();
        closed.hold_if_upgraded();
        assert!(closed.rank().is_some());
    }
}

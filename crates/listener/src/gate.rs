//! Admission: [`ConnectionGate`] counts the open connections of its listeners, refuses or makes
//! room for a new one, and stops them all on shutdown.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::connection::{ClientKey, ConnState, InFlight, Rank};
use crate::limits::ConnectionLimits;
use crate::stats::{bump, Counters, ListenerStats};

/// Most idle connections closed at once to make room under the global cap: one scan of the
/// open connections frees room for the next few new ones too (nginx closes up to 32).
const MAX_EVICTED_AT_ONCE: usize = 16;

/// After a scan found no idle connection to close, new connections over the global cap are
/// refused without scanning again for this long.
const NO_VICTIM_BACKOFF_MS: u64 = 20;

/// How long a failed `accept` (out of descriptors) pauses the accept loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// A failed `accept` is logged at most this often.
const ACCEPT_ERROR_LOG_INTERVAL_MS: u64 = 60_000;

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The global cap was reached and no connection was idle.
    #[error("too many connections")]
    MaxConnections,
    /// The client's cap was reached and none of its connections was idle.
    #[error("too many connections from this client")]
    PerClient,
    /// The gate is shutting down.
    #[error("shutting down")]
    Closing,
}

/// The admission of one service's listeners, shared by all of them (the admin API's `--listen`
/// and `--listen-http` share one; the edge's plain and TLS listeners another): the caps of its
/// [`ConnectionLimits`], the open connections, the counters, the shutdown.
///
/// Cheap to clone (one shared state).
#[derive(Clone)]
pub struct ConnectionGate {
    pub(crate) inner: Arc<GateInner>,
}

impl std::fmt::Debug for ConnectionGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionGate")
            .field("limits", &self.inner.limits)
            .field("stats", &self.stats())
            .finish()
    }
}

pub(crate) struct GateInner {
    pub(crate) limits: ConnectionLimits,
    pub(crate) builder: auto::Builder<TokioExecutor>,
    epoch: Instant,
    registry: Mutex<Registry>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) closing: watch::Sender<bool>,
    drained: Notify,
    last_accept_error_log_ms: AtomicU64,
}

/// The open connections, by client.
#[derive(Default)]
struct Registry {
    /// Admitted and not chosen for eviction: what the global cap counts.
    live: usize,
    /// Admitted and not yet closed.
    open: usize,
    clients: HashMap<ClientKey, Client>,
    /// Until when a global scan is known to find nothing idle.
    no_victim_until_ms: u64,
}

#[derive(Default)]
struct Client {
    /// What the per-client cap counts.
    live: usize,
    conns: Vec<Arc<ConnState>>,
}

fn lock(registry: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    registry
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps the `N` lowest-ranked connections seen (a fixed array: no allocation).
struct Lowest<'a, const N: usize> {
    picked: [Option<(Rank, &'a Arc<ConnState>)>; N],
    wanted: usize,
}

impl<'a, const N: usize> Lowest<'a, N> {
    fn new(wanted: usize) -> Self {
        Self {
            picked: [None; N],
            wanted: wanted.clamp(1, N),
        }
    }

    fn offer(&mut self, conn: &'a Arc<ConnState>) {
        let Some(rank) = conn.rank() else { return };
        let slots = &mut self.picked[..self.wanted];
        if let Some(empty) = slots.iter_mut().find(|slot| slot.is_none()) {
            *empty = Some((rank, conn));
            return;
        }
        let worst = slots
            .iter_mut()
            .max_by_key(|slot| slot.as_ref().map(|(rank, _)| *rank));
        if let Some(slot) = worst {
            if slot.as_ref().is_some_and(|(worst, _)| rank < *worst) {
                *slot = Some((rank, conn));
            }
        }
    }

    fn into_iter(self) -> impl Iterator<Item = &'a Arc<ConnState>> {
        self.picked.into_iter().flatten().map(|(_, conn)| conn)
    }
}

impl Registry {
    /// Chooses `conn` for eviction: it stops counting against the caps now and closes soon.
    fn mark(&mut self, conn: &Arc<ConnState>) {
        conn.marked.store(true, Relaxed);
        conn.evict.notify_one();
        self.live -= 1;
        if let Some(client) = self.clients.get_mut(&conn.client) {
            client.live -= 1;
        }
    }

    /// Evicts the longest-idle connection of `key`; whether there was one.
    fn evict_from_client(&mut self, key: ClientKey) -> bool {
        let victim = self.clients.get(&key).and_then(|client| {
            let mut lowest = Lowest::<'_, 1>::new(1);
            client.conns.iter().for_each(|conn| lowest.offer(conn));
            lowest.into_iter().next().cloned()
        });
        match victim {
            Some(conn) => {
                self.mark(&conn);
                true
            }
            None => false,
        }
    }

    /// Evicts up to `wanted` of the longest-idle connections of any client; how many.
    fn evict_any(&mut self, wanted: usize) -> usize {
        let mut lowest = Lowest::<'_, MAX_EVICTED_AT_ONCE>::new(wanted);
        for client in self.clients.values() {
            client.conns.iter().for_each(|conn| lowest.offer(conn));
        }
        let victims: [Option<Arc<ConnState>>; MAX_EVICTED_AT_ONCE] = {
            let mut out: [Option<Arc<ConnState>>; MAX_EVICTED_AT_ONCE] = Default::default();
            for (slot, conn) in out.iter_mut().zip(lowest.into_iter()) {
                *slot = Some(Arc::clone(conn));
            }
            out
        };
        let mut evicted = 0;
        for conn in victims.iter().flatten() {
            self.mark(conn);
            evicted += 1;
        }
        evicted
    }
}

impl ConnectionGate {
    /// A gate enforcing `limits`, with no connection yet.
    pub fn new(limits: ConnectionLimits) -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            // The watchdog enforces the header-read timeout: hyper's own also runs while an
            // HTTP/1.1 connection waits for its next request, which would cut kept-alive
            // connections at the header timeout (tests/listener.rs shows it).
            .header_read_timeout(None);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.h2_max_concurrent_streams)
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(20));
        let (closing, _) = watch::channel(false);
        Self {
            inner: Arc::new(GateInner {
                limits,
                builder,
                epoch: Instant::now(),
                registry: Mutex::new(Registry::default()),
                counters: Arc::default(),
                closing,
                drained: Notify::new(),
                last_accept_error_log_ms: AtomicU64::new(0),
            }),
        }
    }

    /// The limits it enforces.
    pub fn limits(&self) -> &ConnectionLimits {
        &self.inner.limits
    }

    /// Its counters.
    pub fn stats(&self) -> ListenerStats {
        let open = lock(&self.inner.registry).open as u64;
        self.inner.counters.snapshot(open)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(
            Instant::now()
                .saturating_duration_since(self.inner.epoch)
                .as_millis(),
        )
        .unwrap_or(u64::MAX)
    }

    /// Admits a connection from `peer`, or says why not (counted). Cheap when it refuses: a
    /// lock, a table lookup, no allocation. Under the global cap it closes the longest-idle
    /// connections (those that have not finished a request head first) to make room; under
    /// the client's cap, that client's own longest-idle connection.
    pub fn admit(&self, peer: SocketAddr) -> Result<Admitted, Refused> {
        let inner = &self.inner;
        let limits = &inner.limits;
        let key = ClientKey::of(peer.ip());
        let now = self.now_ms();
        let mut registry = lock(&inner.registry);
        if *inner.closing.borrow() {
            return Err(Refused::Closing);
        }
        let exempt = limits.is_exempt(peer.ip());
        let client_live = registry.clients.get(&key).map_or(0, |c| c.live);
        if !exempt && client_live >= limits.max_connections_per_client {
            if limits.max_connections_per_client > 0 && registry.evict_from_client(key) {
                bump(&inner.counters.evicted_per_client);
            } else {
                bump(&inner.counters.refused_per_client);
                return Err(Refused::PerClient);
            }
        }
        if registry.live >= limits.max_connections {
            let evicted = if limits.max_connections == 0 || now < registry.no_victim_until_ms {
                0
            } else {
                registry.evict_any(limits.max_connections / 256)
            };
            if evicted == 0 {
                registry.no_victim_until_ms = now + NO_VICTIM_BACKOFF_MS;
                bump(&inner.counters.refused_max_connections);
                return Err(Refused::MaxConnections);
            }
            inner
                .counters
                .evicted_max_connections
                .fetch_add(evicted as u64, Relaxed);
        }
        let state = Arc::new(ConnState::new(
            key,
            inner.epoch,
            Arc::clone(&inner.counters),
            limits,
        ));
        registry.live += 1;
        registry.open += 1;
        let client = registry.clients.entry(key).or_default();
        client.live += 1;
        client.conns.push(Arc::clone(&state));
        drop(registry);
        bump(&inner.counters.accepted);
        Ok(Admitted {
            slot: Slot {
                gate: Arc::clone(inner),
                state,
            },
        })
    }

    /// Waits for the next connection on `listener` that is admitted, and returns it with its
    /// peer (`TCP_NODELAY` set); refused ones are closed here. `None` once the gate is
    /// [closing](Self::close): the listener should then be dropped. A failed `accept` (out of
    /// descriptors) pauses the loop briefly and is counted, and logged at most once a minute.
    pub async fn accept(
        &self,
        listener: &TcpListener,
    ) -> Option<(TcpStream, SocketAddr, Admitted)> {
        let mut closing = self.inner.closing.subscribe();
        loop {
            if *closing.borrow_and_update() {
                return None;
            }
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = closing.changed() => continue,
            };
            match accepted {
                Ok((stream, peer)) => match self.admit(peer) {
                    Ok(admitted) => {
                        let _ = stream.set_nodelay(true);
                        return Some((stream, peer, admitted));
                    }
                    Err(_) => drop(stream),
                },
                Err(err) => {
                    bump(&self.inner.counters.accept_errors);
                    let now = self.now_ms();
                    let last = self.inner.last_accept_error_log_ms.load(Relaxed);
                    if last == 0 || now.saturating_sub(last) >= ACCEPT_ERROR_LOG_INTERVAL_MS {
                        self.inner
                            .last_accept_error_log_ms
                            .store(now.max(1), Relaxed);
                        tracing::warn!(error = %err, "accept failed (counted; logged at most once a minute)");
                    }
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            }
        }
    }

    /// Starts the shutdown: [`accept`](Self::accept) returns `None`, new connections are
    /// refused, connections with nothing in flight close at once, those serving a request
    /// finish it and close (HTTP/2: `GOAWAY`, the open streams finish).
    pub fn close(&self) {
        self.inner.closing.send_replace(true);
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closing(&self) -> bool {
        *self.inner.closing.borrow()
    }

    /// Waits until every connection is closed (after [`close`](Self::close); use a timeout to
    /// bound the grace period).
    pub async fn drained(&self) {
        loop {
            let notified = self.inner.drained.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if lock(&self.inner.registry).open == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// The place an admitted connection holds in its gate; dropping it frees the place.
pub(crate) struct Slot {
    pub(crate) gate: Arc<GateInner>,
    pub(crate) state: Arc<ConnState>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut registry = lock(&self.gate.registry);
        let marked = self.state.is_marked();
        if !marked {
            registry.live -= 1;
        }
        registry.open -= 1;
        let key = self.state.client;
        if let Some(client) = registry.clients.get_mut(&key) {
            if !marked {
                client.live -= 1;
            }
            if let Some(i) = client
                .conns
                .iter()
                .position(|c| Arc::ptr_eq(c, &self.state))
            {
                client.conns.swap_remove(i);
            }
            if client.conns.is_empty() {
                registry.clients.remove(&key);
            }
        }
        let drained = registry.open == 0;
        drop(registry);
        if drained {
            self.gate.drained.notify_waiters();
        }
    }
}

/// An admitted connection: its place in the gate, held until the connection closes. Run its
/// handshake (TLS) with [`handshake`](Self::handshake), then [`serve`](Self::serve) it;
/// dropping it instead closes the place.
pub struct Admitted {
    pub(crate) slot: Slot,
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitted")
            .field("client", &self.slot.state.client)
            .finish_non_exhaustive()
    }
}

/// The requests of one admitted connection, for a server that is not [`Admitted::serve`]'s (a
/// Pingora proxy): a request marked with [`begin`](Self::begin) keeps the connection busy, so
/// the caps never close it to make room while the guard lives.
#[derive(Debug, Clone)]
pub struct RequestTracker {
    state: Arc<ConnState>,
}

/// A request in flight on a tracked connection ([`RequestTracker::begin`]); dropping it ends
/// the request.
#[derive(Debug)]
pub struct RequestGuard {
    _in_flight: InFlight,
}

impl RequestTracker {
    /// A request was dispatched on the connection (`h2`: over HTTP/2, where several may be in
    /// flight at once); it stays in flight until the guard is dropped.
    pub fn begin(&self, h2: bool) -> RequestGuard {
        RequestGuard {
            _in_flight: self.state.begin(h2),
        }
    }
}

impl Admitted {
    /// The connection's request tracker (see [`RequestTracker`]).
    pub fn requests(&self) -> RequestTracker {
        RequestTracker {
            state: Arc::clone(&self.slot.state),
        }
    }

    /// Runs `step` (a TLS handshake, reading a ClientHello: whatever comes before HTTP) unless
    /// the connection is evicted or the gate closes first (`None`: drop the connection). Give
    /// the step its own timeout.
    pub async fn handshake<F: std::future::Future>(&self, step: F) -> Option<F::Output> {
        let state = &self.slot.state;
        let mut closing = self.slot.gate.closing.subscribe();
        tokio::pin!(step);
        loop {
            if state.is_marked() || *closing.borrow_and_update() {
                return None;
            }
            // The eviction and the shutdown first: when the gate closes while the step also
            // has work (a frame arrived at the same moment), the step is not polled again, so
            // nothing is answered after `close`.
            tokio::select! {
                biased;
                _ = state.evict.notified() => {}
                _ = closing.changed() => {}
                out = &mut step => return Some(out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(max: usize, per_client: usize) -> ConnectionGate {
        ConnectionGate::new(ConnectionLimits {
            max_connections: max,
            max_connections_per_client: per_client,
            trusted_proxies: netacl_model::TrustedProxies::parse(["10.9.0.0/16"]).unwrap(),
            ..ConnectionLimits::default()
        })
    }

    fn peer(s: &str) -> SocketAddr {
        SocketAddr::new(s.parse().unwrap(), 40000)
    }

    #[tokio::test]
    async fn a_step_with_work_is_not_polled_again_once_the_gate_closes() {
        use std::future::Future;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::task::{Context, Poll, Waker};
        // Twenty times: an unordered choice between the step and the shutdown would poll the
        // step after `close` about half the time.
        for _ in 0..20 {
            let gate = gate(10, 10);
            let admitted = gate.admit(peer("127.0.0.1")).unwrap();
            let polls = AtomicUsize::new(0);
            // A step that always has work: every poll counts and asks to be polled again.
            let step = std::future::poll_fn(|cx: &mut Context<'_>| {
                polls.fetch_add(1, Ordering::Relaxed);
                cx.waker().wake_by_ref();
                Poll::<()>::Pending
            });
            let handshake = admitted.handshake(step);
            tokio::pin!(handshake);
            let mut cx = Context::from_waker(Waker::noop());
            assert!(handshake.as_mut().poll(&mut cx).is_pending());
            assert_eq!(polls.load(Ordering::Relaxed), 1);
            gate.close();
            assert_eq!(handshake.as_mut().poll(&mut cx), Poll::Ready(None));
            assert_eq!(polls.load(Ordering::Relaxed), 1, "the step ran after close");
        }
    }

    #[tokio::test]
    async fn the_client_cap_evicts_its_own_idle_connection_else_refuses() {
        let gate = gate(100, 2);
        let a = gate.admit(peer("192.0.2.1")).unwrap();
        let b = gate.admit(peer("192.0.2.1")).unwrap();
        let _busy_a = a.slot.state.begin(false);
        let _busy_b = b.slot.state.begin(false);
        assert_eq!(
            gate.admit(peer("192.0.2.1")).unwrap_err(),
            Refused::PerClient
        );
        assert_eq!(
            gate.admit(peer("::ffff:192.0.2.1")).unwrap_err(),
            Refused::PerClient,
            "an IPv4-mapped address is the same client"
        );
        let _other = gate.admit(peer("192.0.2.2")).unwrap();
        drop(_busy_b);
        let c = gate.admit(peer("192.0.2.1")).unwrap();
        assert!(
            b.slot.state.is_marked(),
            "its own idle connection made room"
        );
        assert!(!a.slot.state.is_marked());
        assert!(!c.slot.state.is_marked());
        let stats = gate.stats();
        assert_eq!(stats.refused_per_client, 2);
        assert_eq!(stats.evicted_per_client, 1);
        assert_eq!(stats.open, 4);
        drop(b);
        assert_eq!(gate.stats().open, 3);
    }

    #[tokio::test]
    async fn a_tracked_request_keeps_its_connection_from_eviction() {
        let gate = gate(100, 1);
        let a = gate.admit(peer("192.0.2.1")).unwrap();
        let busy = a.requests().begin(false);
        assert_eq!(
            gate.admit(peer("192.0.2.1")).unwrap_err(),
            Refused::PerClient,
            "a connection with a tracked request in flight is not closed to make room"
        );
        assert!(!a.slot.state.is_marked());
        drop(busy);
        let _b = gate.admit(peer("192.0.2.1")).unwrap();
        assert!(a.slot.state.is_marked(), "idle again, it makes room");
    }

    #[tokio::test]
    async fn ipv6_clients_are_counted_by_64() {
        let gate = gate(100, 1);
        let _a = gate.admit(peer("2001:db8:0:1::1")).unwrap();
        let a2 = gate.admit(peer("2001:db8:0:1::2")).unwrap();
        assert!(a2.slot.state.client == _a.slot.state.client);
        assert!(
            _a.slot.state.is_marked(),
            "the same /64 replaced its idle connection"
        );
        let _b = gate.admit(peer("2001:db8:0:2::1")).unwrap();
        assert_eq!(gate.stats().evicted_per_client, 1);
    }

    #[tokio::test]
    async fn trusted_proxies_are_not_capped_per_client() {
        let gate = gate(100, 1);
        let held: Vec<_> = (0..5)
            .map(|_| {
                let a = gate.admit(peer("10.9.1.1")).unwrap();
                let busy = a.slot.state.begin(false);
                (a, busy)
            })
            .collect();
        assert_eq!(held.len(), 5);
        assert_eq!(gate.stats().refused_per_client, 0);
    }

    #[tokio::test]
    async fn the_global_cap_evicts_fresh_connections_before_kept_alive_ones_and_never_a_busy_one() {
        let gate = gate(3, 10);
        let kept_alive = gate.admit(peer("192.0.2.1")).unwrap();
        drop(kept_alive.slot.state.begin(false));
        let busy = gate.admit(peer("192.0.2.2")).unwrap();
        let _request = busy.slot.state.begin(false);
        let fresh = gate.admit(peer("192.0.2.3")).unwrap();
        let d = gate.admit(peer("192.0.2.4")).unwrap();
        assert!(
            fresh.slot.state.is_marked(),
            "a connection without a request goes first"
        );
        assert!(!kept_alive.slot.state.is_marked());
        let e = gate.admit(peer("192.0.2.5")).unwrap();
        let _e_request = e.slot.state.begin(false);
        assert!(
            d.slot.state.is_marked(),
            "then the other one without a request: by class first, then age"
        );
        let _f = gate.admit(peer("192.0.2.6")).unwrap();
        assert!(kept_alive.slot.state.is_marked(), "then the kept-alive one");
        assert!(
            !busy.slot.state.is_marked(),
            "never the one serving a request"
        );
        assert_eq!(gate.stats().evicted_max_connections, 3);
    }

    #[tokio::test]
    async fn over_the_global_cap_with_nothing_idle_a_new_connection_is_refused() {
        let gate = gate(2, 10);
        let a = gate.admit(peer("192.0.2.1")).unwrap();
        let b = gate.admit(peer("192.0.2.2")).unwrap();
        let _ra = a.slot.state.begin(false);
        let _rb = b.slot.state.begin(false);
        assert_eq!(
            gate.admit(peer("192.0.2.3")).unwrap_err(),
            Refused::MaxConnections
        );
        assert_eq!(gate.stats().refused_max_connections, 1);
        drop(a);
        drop(_ra);
        assert!(
            gate.admit(peer("192.0.2.3")).is_ok(),
            "a closed connection freed its place"
        );
    }

    #[tokio::test]
    async fn a_closing_gate_admits_nothing_and_drains() {
        let gate = gate(10, 10);
        let a = gate.admit(peer("192.0.2.1")).unwrap();
        gate.close();
        assert_eq!(gate.admit(peer("192.0.2.2")).unwrap_err(), Refused::Closing);
        let drained = tokio::spawn({
            let gate = gate.clone();
            async move { gate.drained().await }
        });
        tokio::task::yield_now().await;
        assert!(!drained.is_finished());
        drop(a);
        tokio::time::timeout(Duration::from_secs(5), drained)
            .await
            .expect("drained once the last connection closed")
            .unwrap();
    }
}

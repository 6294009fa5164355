//! What every door shares: binding its listener under the edge's limits, its counters and
//! listener statistics on the edge's `/metrics`, the running door's handle, and the access
//! events of its decisions.
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{Method, Uri};
use netacl_edge::{
    canonical_ip, AclDecision, AclVerdict, Enforcer, HeaderLookup, RequestAddrs, RequestFacts,
    RequestHost,
};
use netacl_listener::{ConnectionGate, ConnectionLimits, ListenerStats};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::metrics::DoorCounters;

/// What `http::HeaderValue::from_str` accepts: no control character but tab. A door refuses a
/// request whose host, user agent or signature field is not such a value.
pub(crate) fn valid_header_value(value: &str) -> bool {
    value.bytes().all(|b| (b >= 32 && b != 127) || b == b'\t')
}

/// What `http::HeaderValue::to_str` accepts: visible ASCII and tab. The edge reads a `Host` or
/// `User-Agent` field only when it is.
pub(crate) fn visible_ascii(value: &str) -> bool {
    value.bytes().all(|b| b == b'\t' || (32..127).contains(&b))
}

/// The scheme a proxy reports for the client's request (`X-Forwarded-Proto`, Envoy's `scheme`):
/// `http` or `https`, in any case; anything else (`ws`, a list, garbage) is not taken, and the
/// decision falls back to the TLS facts.
pub(crate) fn reported_scheme(value: &[u8]) -> Option<&'static str> {
    if value.eq_ignore_ascii_case(b"https") {
        Some("https")
    } else if value.eq_ignore_ascii_case(b"http") {
        Some("http")
    } else {
        None
    }
}

/// The facts of a request whose client the proxy in front has already resolved (HAProxy's
/// `src`, Envoy's source address: no forwarding header is walked), with its host and user agent
/// read as the edge reads those headers: a host that is not visible ASCII is unclear, a user
/// agent that is not is absent. The caller adds the scheme and the TLS facts it has.
pub(crate) fn resolved_client_facts<'a>(
    client: IpAddr,
    method: &'a Method,
    uri: &'a Uri,
    host: Option<&'a str>,
    user_agent: Option<&'a str>,
    headers: &'a dyn HeaderLookup,
) -> RequestFacts<'a> {
    let client = canonical_ip(client);
    let readable = host.filter(|h| visible_ascii(h));
    RequestFacts::new(uri.path(), headers)
        .with_addrs(RequestAddrs {
            connecting: client,
            client: Some(client),
        })
        .with_host(
            RequestHost::new(readable, None).with_unclear(host.is_some() && readable.is_none()),
        )
        .with_method(method.as_str())
        .with_query(uri.query())
        .with_user_agent(user_agent.filter(|v| visible_ascii(v)))
}

/// Why a door could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DoorError {
    /// The listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A started door (forward auth, SPOE or ext_authz): its address, counters and listener; the
/// accept loop stops when the handle is dropped.
#[derive(Debug)]
pub struct RunningDoor {
    addr: SocketAddr,
    gate: ConnectionGate,
    counters: Arc<DoorCounters>,
    task: JoinHandle<()>,
}

impl RunningDoor {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The answers given so far.
    pub fn counters(&self) -> &Arc<DoorCounters> {
        &self.counters
    }

    /// The listener's counters.
    pub fn listener_stats(&self) -> ListenerStats {
        self.gate.stats()
    }

    /// Starts a graceful stop (see [`ConnectionGate::close`]).
    pub fn close(&self) {
        self.gate.close();
    }

    /// Waits until every connection is closed (after [`close`](Self::close); bound it with a
    /// timeout).
    pub async fn drained(&self) {
        self.gate.drained().await;
    }
}

impl Drop for RunningDoor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A door's listener bound, its gate made and its counters registered, not yet serving.
pub(crate) struct Bound {
    pub(crate) listener: TcpListener,
    pub(crate) addr: SocketAddr,
    pub(crate) gate: ConnectionGate,
    pub(crate) counters: Arc<DoorCounters>,
}

impl Bound {
    /// Binds `listen` for the door named `door` under `limits` (the edge's; its trusted proxies
    /// are the enforcer's, not counted per client), and registers the door's answer counters
    /// and listener counters with the enforcer's metrics.
    pub(crate) async fn new(
        enforcer: &Enforcer,
        door: &'static str,
        listen: SocketAddr,
        mut limits: ConnectionLimits,
    ) -> Result<Self, DoorError> {
        let bind_error = |source| DoorError::Bind {
            addr: listen,
            source,
        };
        let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        // One meaning for --trusted-proxy: the proxies asking are not counted per client.
        limits.trusted_proxies = enforcer.addrs().trusted().clone();
        let gate = ConnectionGate::new(limits);
        let counters = Arc::new(DoorCounters::new(door));
        counters.register(enforcer.metrics());
        {
            let gate = gate.clone();
            enforcer.metrics().add_listener(door, move || gate.stats());
        }
        Ok(Self {
            listener,
            addr,
            gate,
            counters,
        })
    }
}

impl RunningDoor {
    /// The running door of `gate` and `counters`, once `task` serves its listener.
    pub(crate) fn new(
        addr: SocketAddr,
        gate: ConnectionGate,
        counters: Arc<DoorCounters>,
        task: JoinHandle<()>,
    ) -> Self {
        Self {
            addr,
            gate,
            counters,
            task,
        }
    }
}

/// The access event of one decision (as the edge's own: target `netacl_edge::access`, info for
/// refusals, debug otherwise; `netacl_edge::monitor` when `log` rules matched).
pub(crate) fn log_decision(
    door: &'static str,
    method: &http::Method,
    path: &str,
    decision: &AclDecision,
    status: u16,
) {
    if !decision.monitored.is_empty() {
        let monitored: Vec<&str> = decision.monitored.iter().map(|id| id.as_str()).collect();
        tracing::warn!(
            target: "netacl_edge::monitor",
            door,
            monitored = ?monitored,
            verdict = decision.verdict.as_str(),
            client_ip = ?decision.client_ip,
            policy_version = decision.version,
            "network ACL matched in monitoring mode"
        );
    }
    let rule_id = decision.rule_id.as_ref().map(|id| id.as_str());
    macro_rules! access {
        ($level:ident) => {
            tracing::$level!(
                target: "netacl_edge::access",
                door,
                method = %method,
                path,
                status,
                verdict = decision.verdict.as_str(),
                rule_id,
                monitored = decision.monitored.len(),
                scope = decision.scope.as_str(),
                client_ip = ?decision.client_ip,
                policy_version = decision.version,
                "request"
            )
        };
    }
    match decision.verdict {
        AclVerdict::None | AclVerdict::Allow => access!(debug),
        _ => access!(info),
    }
}

/// The HTTP status a proxy answers `decision` with under the shipped configurations (for the
/// access events of doors whose answer is not an HTTP response of their own).
pub(crate) fn status_of(decision: &AclDecision) -> u16 {
    decision.refusal().map_or(200, |refusal| refusal.status)
}

//! The forward-auth door: an HTTP/1.1 (keep-alive) and HTTP/2 (h2c) listener answering the
//! sub-requests of nginx `auth_request`, Caddy `forward_auth`, Traefik ForwardAuth and Envoy's
//! HTTP `ext_authz` mode with the edge's decision about the request they describe.
//!
//! - **Facts** ([`read_facts`]): method from `X-Forwarded-Method`, else `X-Original-Method`,
//!   else the request's; path and query from `X-Forwarded-Uri`, else `X-Original-URI`, else the
//!   request's; host from `X-Forwarded-Host`, else `Host`; the client address from the
//!   forwarding header walked over `--trusted-proxy` exactly as the edge walks it (a peer that
//!   is not a trusted proxy is judged by its own address, its header ignored); user agent and
//!   signature headers as sent; JA3 and JA4 only from the headers named by
//!   [`FactsOptions`], and only from a trusted proxy. The request body is never read.
//! - **Answers**: no decision or `allow` → 200; `block` → 403 in the error shape; `redirect` →
//!   302 with `Location` (401 with `Location` when the proxy sends `X-Netacl-Redirect-Status:
//!   401`, for nginx); a refused path → 400; multi-tenant mode, a host of no tenant → 421; a
//!   malformed request (a fact given twice, a URI, host, method or fingerprint that is not
//!   one) → 400 `invalid_forward_auth_request`, never an allow. Every answer carries
//!   `X-Netacl-Decision`, and `X-Netacl-Rule` and `X-Netacl-Monitored` when there are ids.
//! - **Counted** like the edge's own requests (the decision goes through its
//!   [`Enforcer`]: verdicts, per-rule counts, traffic sample, access events), and by answer in
//!   `netacl_edge_door_requests_total{door="forward_auth",answer}`; the listener's connections
//!   in `netacl_edge_listener_*{listener="forward_auth"}`.
mod answer;
mod facts;
#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use netacl_edge::{AclDecision, AclVerdict, Enforcer};
use netacl_listener::{ConnectionGate, ConnectionLimits, ListenerStats, RequestBody};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use answer::{X_NETACL_DECISION, X_NETACL_MONITORED, X_NETACL_RULE};
pub use facts::{
    read_facts, FactsError, FactsOptions, ForwardAuthFacts, RedirectStatus, MAX_JA4,
    X_FORWARDED_HOST, X_FORWARDED_METHOD, X_FORWARDED_URI, X_NETACL_REDIRECT_STATUS,
    X_ORIGINAL_METHOD, X_ORIGINAL_URI,
};

use crate::metrics::{DoorAnswer, DoorCounters};

/// The `door` and `listener` label of this door.
pub const DOOR: &str = "forward_auth";

/// Configuration of [`start_forward_auth`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ForwardAuthConfig {
    /// Where to listen (`--forward-auth-listen`).
    pub listen: SocketAddr,
    /// Caps and timeouts: the edge's (`--max-connections`, `--header-read-timeout`, ...), its
    /// trusted proxies not counted per client.
    pub limits: ConnectionLimits,
    /// Which headers carry the fingerprints.
    pub facts: FactsOptions,
}

impl ForwardAuthConfig {
    /// A door on `listen` under `limits`, reading no fingerprint header.
    pub fn new(listen: SocketAddr, limits: ConnectionLimits) -> Self {
        Self {
            listen,
            limits,
            facts: FactsOptions::default(),
        }
    }
}

/// Why the door could not start.
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

/// A started forward-auth door.
#[derive(Debug)]
pub struct RunningForwardAuth {
    addr: SocketAddr,
    gate: ConnectionGate,
    counters: Arc<DoorCounters>,
    task: JoinHandle<()>,
}

impl RunningForwardAuth {
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

impl Drop for RunningForwardAuth {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What each connection's requests are answered with.
struct Door {
    enforcer: Arc<Enforcer>,
    facts: FactsOptions,
    counters: Arc<DoorCounters>,
}

impl Door {
    /// The answer to one forward-auth request from `peer`, from its head (the body is never
    /// read: the facts are in the head).
    fn answer(&self, peer: SocketAddr, parts: http::request::Parts) -> Response<Full<Bytes>> {
        let trusted = self.enforcer.addrs().trusts(peer.ip());
        let facts = match read_facts(
            &parts.method,
            &parts.uri,
            &parts.headers,
            &self.facts,
            trusted,
        ) {
            Ok(facts) => facts,
            Err(error) => {
                self.counters.record(DoorAnswer::BadRequest);
                tracing::info!(
                    target: "netacl_edge::access",
                    door = DOOR,
                    peer = %peer,
                    status = 400u16,
                    error = %error,
                    "forward-auth request refused"
                );
                return answer::bad_request(&error);
            }
        };
        let conn = facts.connection(peer);
        let headers = facts.decision_headers(parts.headers);
        let decision =
            self.enforcer
                .decide_request(Some(&conn), &facts.method, &facts.uri, &headers);
        let response = answer::answer(&decision, facts.redirect);
        self.counters.record(DoorAnswer::Decided(decision.verdict));
        log_decision(&decision, &facts, response.status().as_u16());
        response
    }
}

/// The access event of one decision (as the edge's own: target `netacl_edge::access`, info for
/// refusals, debug otherwise; `netacl_edge::monitor` when `log` rules matched).
fn log_decision(decision: &AclDecision, facts: &ForwardAuthFacts, status: u16) {
    if !decision.monitored.is_empty() {
        let monitored: Vec<&str> = decision.monitored.iter().map(|id| id.as_str()).collect();
        tracing::warn!(
            target: "netacl_edge::monitor",
            door = DOOR,
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
                door = DOOR,
                method = %facts.method,
                path = facts.uri.path(),
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

/// Binds the door and serves it in a background task: every connection admitted by a gate
/// under `config.limits`, HTTP/1.1 and HTTP/2 (prior knowledge), each request decided by
/// `enforcer`. Registers the door's answer counters and listener counters with the enforcer's
/// [`EdgeMetrics`](netacl_edge::EdgeMetrics), so that the edge's `/metrics` shows them.
///
/// # Errors
///
/// [`DoorError::Bind`] when the address cannot be bound.
pub async fn start_forward_auth(
    enforcer: Arc<Enforcer>,
    config: ForwardAuthConfig,
) -> Result<RunningForwardAuth, DoorError> {
    let bind_error = |source| DoorError::Bind {
        addr: config.listen,
        source,
    };
    let listener = TcpListener::bind(config.listen).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let mut limits = config.limits;
    // One meaning for --trusted-proxy: the proxies asking are not counted per client.
    limits.trusted_proxies = enforcer.addrs().trusted().clone();
    let gate = ConnectionGate::new(limits);
    let counters = Arc::new(DoorCounters::new(DOOR));
    {
        let counters = Arc::clone(&counters);
        enforcer
            .metrics()
            .add_section(move |out| counters.render(out));
        let gate = gate.clone();
        enforcer.metrics().add_listener(DOOR, move || gate.stats());
    }
    let door = Arc::new(Door {
        enforcer,
        facts: config.facts,
        counters: Arc::clone(&counters),
    });
    let accepting = gate.clone();
    let task = tokio::spawn(async move {
        while let Some((stream, peer, admitted)) = accepting.accept(&listener).await {
            let door = Arc::clone(&door);
            let service = hyper::service::service_fn(move |request: Request<RequestBody>| {
                let (head, _body) = request.into_parts();
                std::future::ready(Ok::<_, Infallible>(door.answer(peer, head)))
            });
            tokio::spawn(admitted.serve(stream, service));
        }
    });
    tracing::info!(door = DOOR, %addr, "netacl forward-auth door listening");
    Ok(RunningForwardAuth {
        addr,
        gate,
        counters,
        task,
    })
}

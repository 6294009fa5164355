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
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use netacl_edge::Enforcer;
use netacl_listener::{ConnectionLimits, RequestBody};

pub use answer::{X_NETACL_DECISION, X_NETACL_MONITORED, X_NETACL_RULE};
pub use facts::{
    read_facts, FactsError, FactsOptions, ForwardAuthFacts, RedirectStatus, MAX_JA4,
    X_FORWARDED_HOST, X_FORWARDED_METHOD, X_FORWARDED_PROTO, X_FORWARDED_URI,
    X_NETACL_REDIRECT_STATUS, X_ORIGINAL_METHOD, X_ORIGINAL_URI,
};

use crate::door::{log_decision, Bound, DoorError, RunningDoor};
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

/// A started forward-auth door.
pub type RunningForwardAuth = RunningDoor;

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
        let started = Instant::now();
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
                self.counters.observe_check(started.elapsed());
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
        let decision = self.enforcer.decide_facts(
            &self
                .enforcer
                .request_facts(Some(&conn), &facts.method, &facts.uri, &headers)
                .with_scheme(facts.scheme),
        );
        let response = answer::answer(&decision, facts.redirect);
        self.counters.record(DoorAnswer::Decided(decision.verdict));
        // The access event is written after the clock stops: its cost is the log's.
        self.counters.observe_check(started.elapsed());
        log_decision(
            DOOR,
            &facts.method,
            facts.uri.path(),
            &decision,
            response.status().as_u16(),
        );
        response
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
    let bound = Bound::new(&enforcer, DOOR, config.listen, config.limits).await?;
    let door = Arc::new(Door {
        enforcer,
        facts: config.facts,
        counters: Arc::clone(&bound.counters),
    });
    let Bound {
        listener,
        addr,
        gate,
        counters,
    } = bound;
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
    Ok(RunningDoor::new(addr, gate, counters, task))
}

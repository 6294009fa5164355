//! The decision inside Pingora: [`NetaclFilter`] (for any `ProxyHttp`) and [`NetaclProxy`]
//! (the reference `ProxyHttp`: the filter, then one upstream).
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use netacl_edge::{judged_host, AclDecision, AclVerdict, Enforcer, Forwarding};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::{ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;

use crate::stream::connection_info;

/// The name of this enforcement point in access events (`door` field).
pub const DOOR: &str = "pingora";

/// The forwarding headers [`Forwarding`] writes, rewritten in Pingora's request header.
static FORWARDING_HEADERS: [HeaderName; 5] = [
    header::HOST,
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-proto"),
    HeaderName::from_static("forwarded"),
];

/// What [`NetaclFilter::request_filter`] did with a request.
#[derive(Debug)]
#[non_exhaustive]
pub enum Filtered {
    /// The filter answered (block `403`, redirect `302`, refused path `400`, misdirected
    /// `421`): return `Ok(true)` from `request_filter`, the upstream is not reached.
    Answered(AclDecision),
    /// The request goes on to the upstream (allowed, no rule, or only `log` rules matched).
    Passed(AclDecision),
}

/// The netacl decision for a Pingora `ProxyHttp`: call [`request_filter`](Self::request_filter)
/// from your `request_filter`, and [`forward`](Self::forward) from your
/// `upstream_request_filter`.
///
/// The client address is the TCP peer, or with a peer inside the enforcer's trusted proxies the
/// forwarding header walked as `netacl edge` walks it. JA3, JA4 and the SNI are known on
/// connections accepted by [`serve`](crate::serve) (the ClientHello is read before rustls);
/// on a stream of Pingora's own listeners the request is decided without those TLS signals.
#[derive(Debug, Clone)]
pub struct NetaclFilter {
    enforcer: Arc<Enforcer>,
    forwarding: Arc<Forwarding>,
}

impl NetaclFilter {
    /// A filter deciding with `enforcer` (its trusted proxies and forwarding header are also
    /// the ones [`forward`](Self::forward) believes).
    pub fn new(enforcer: Arc<Enforcer>) -> Self {
        let forwarding = Forwarding::new(
            enforcer.addrs().trusted().clone(),
            enforcer.addrs().header(),
        );
        Self {
            enforcer,
            forwarding: Arc::new(forwarding),
        }
    }

    /// The enforcer (counters, policy, sample).
    pub fn enforcer(&self) -> &Arc<Enforcer> {
        &self.enforcer
    }

    /// Decides about the session's request (counted, sampled), without answering it.
    pub fn decide(&self, session: &Session) -> AclDecision {
        let conn = connection_info(session);
        let request = session.req_header();
        self.enforcer.decide_request(
            conn.as_ref().map(|c| c.get()),
            &request.method,
            &request.uri,
            &request.headers,
        )
    }

    /// Decides about the session's request and answers a refusal itself, as every enforcement
    /// point of the edge answers it ([`AclDecision::refusal`]): block → `403` with
    /// [`BLOCKED_BODY`](netacl_edge::BLOCKED_BODY); redirect → `302` with `Location` (a target
    /// that cannot be sent blocks instead); a refused path → `400`; a host of no tenant →
    /// `421`. Every decision gets its access event (target
    /// `netacl_edge::access`, `INFO` for refusals) and matched `log` rules a `WARN` event
    /// (target `netacl_edge::monitor`).
    pub async fn request_filter(&self, session: &mut Session) -> pingora::Result<Filtered> {
        let decision = self.decide(session);
        let Some(refusal) = decision.refusal() else {
            return Ok(Filtered::Passed(decision));
        };
        let request = session.req_header();
        log_decision(
            &decision,
            request.method.as_str(),
            request.uri.path(),
            refusal.status,
        );
        let mut answer = ResponseHeader::build(refusal.status, Some(4))?;
        if !refusal.body.is_empty() {
            answer.insert_header(header::CONTENT_TYPE, "application/json")?;
        }
        answer.insert_header(header::CONTENT_LENGTH, refusal.body.len())?;
        answer.insert_header(header::CACHE_CONTROL, "no-store")?;
        if let Some(location) = refusal.location {
            answer.insert_header(header::LOCATION, location)?;
        }
        session
            .write_response_header(Box::new(answer), refusal.body.is_empty())
            .await?;
        if !refusal.body.is_empty() {
            session
                .write_response_body(Some(Bytes::from_static(refusal.body.as_bytes())), true)
                .await?;
        }
        Ok(Filtered::Answered(decision))
    }

    /// Tells the upstream what `netacl edge` tells it: the one `Host` the decision read,
    /// `X-Forwarded-Host`, the peer appended to `X-Forwarded-For`, `X-Forwarded-Proto`, and with
    /// `--forwarded-header forwarded` an element of `Forwarded` (see [`Forwarding`]).
    pub fn forward(
        &self,
        session: &Session,
        upstream_request: &mut RequestHeader,
    ) -> pingora::Result<()> {
        let conn = connection_info(session);
        let conn = conn.as_ref().map(|c| c.get());
        let tls = conn.is_some_and(|c| c.tls.is_some())
            || session
                .as_downstream()
                .digest()
                .is_some_and(|d| d.ssl_digest.is_some());
        let downstream = session.req_header();
        let host = judged_host(&downstream.headers, downstream.uri.authority());
        // The forwarding headers alone, rewritten by the edge's own rules, then put back
        // through Pingora's header API (which keeps its header-case map in step).
        let mut scratch = HeaderMap::new();
        for name in &FORWARDING_HEADERS {
            for value in upstream_request.headers.get_all(name) {
                scratch.append(name.clone(), value.clone());
            }
        }
        self.forwarding
            .apply(&mut scratch, host, conn.map(|c| c.peer), tls);
        for name in &FORWARDING_HEADERS {
            upstream_request.remove_header(name);
            for value in scratch.get_all(name) {
                upstream_request.append_header(name.clone(), value.clone())?;
            }
        }
        Ok(())
    }
}

/// The access event of one decision, as the edge's and the front doors' (target
/// `netacl_edge::access`, `INFO` for refusals, `DEBUG` otherwise; `netacl_edge::monitor` at
/// `WARN` when `log` rules matched).
fn log_decision(decision: &AclDecision, method: &str, path: &str, status: u16) {
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
                method,
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

/// The per-request state of [`NetaclProxy`]: a passed request's decision, kept for its access
/// event only when that event is written (`DEBUG` on, or `log` rules matched).
#[derive(Debug, Default)]
pub struct RequestCtx {
    passed: Option<AclDecision>,
    /// The request in flight on its connection (see [`begin_request`](crate::begin_request)).
    _in_flight: Option<netacl_listener::RequestGuard>,
}

/// The reference `ProxyHttp`: [`NetaclFilter`] in `request_filter`, then one plain-HTTP
/// upstream, told what [`NetaclFilter::forward`] tells it. With the ACL off
/// ([`NetaclProxy::without_acl`]) it is the same proxy without the decision (to measure the
/// ACL's cost).
#[derive(Debug, Clone)]
pub struct NetaclProxy {
    filter: NetaclFilter,
    upstream: SocketAddr,
    acl: bool,
    timeouts: Option<Timeouts>,
}

/// Pingora's per-read timeouts set on each downstream session.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    read: Duration,
    idle_secs: u64,
}

impl NetaclProxy {
    /// Decides with `enforcer`, passes to `upstream` (`http://`).
    pub fn new(enforcer: Arc<Enforcer>, upstream: SocketAddr) -> Self {
        Self {
            filter: NetaclFilter::new(enforcer),
            upstream,
            acl: true,
            timeouts: None,
        }
    }

    /// The same proxy without the decision: every request passes unchecked (the forwarding
    /// headers are still written).
    pub fn without_acl(mut self) -> Self {
        self.acl = false;
        self
    }

    /// Sets Pingora's timeouts on every downstream session: `read` for each read of a request
    /// (head and body), `idle` between two requests of a connection (whole seconds, at least 1).
    pub fn with_timeouts(mut self, read: Duration, idle: Duration) -> Self {
        self.timeouts = Some(Timeouts {
            read,
            idle_secs: idle.as_secs().max(1),
        });
        self
    }

    /// The filter.
    pub fn filter(&self) -> &NetaclFilter {
        &self.filter
    }
}

#[async_trait]
impl ProxyHttp for NetaclProxy {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> Self::CTX {
        RequestCtx::default()
    }

    async fn early_request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        ctx._in_flight = crate::stream::begin_request(session);
        if let Some(timeouts) = self.timeouts {
            let downstream = session.as_downstream_mut();
            downstream.set_read_timeout(Some(timeouts.read));
            downstream.set_keepalive(Some(timeouts.idle_secs));
        }
        Ok(())
    }

    async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<bool> {
        if !self.acl {
            return Ok(false);
        }
        match self.filter.request_filter(session).await? {
            Filtered::Answered(_) => Ok(true),
            Filtered::Passed(decision) => {
                let logged = !decision.monitored.is_empty()
                    || tracing::enabled!(target: "netacl_edge::access", tracing::Level::DEBUG);
                if logged {
                    ctx.passed = Some(decision);
                }
                Ok(false)
            }
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut Self::CTX,
    ) -> pingora::Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.upstream, false, String::new())))
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        _ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        self.filter.forward(session, upstream_request)
    }

    async fn logging(
        &self,
        session: &mut Session,
        _error: Option<&pingora::Error>,
        ctx: &mut Self::CTX,
    ) {
        if let Some(decision) = ctx.passed.take() {
            let status = session.response_written().map_or(0, |r| r.status.as_u16());
            let request = session.req_header();
            log_decision(
                &decision,
                request.method.as_str(),
                request.uri.path(),
                status,
            );
        }
    }
}

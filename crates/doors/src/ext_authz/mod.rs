//! Envoy's external authorization over gRPC (`envoy.service.auth.v3.Authorization/Check`):
//! `netacl edge --ext-authz-listen ADDR`.
//!
//! The request's facts come from the `CheckRequest` Envoy sends: the client is
//! `attributes.source.address` (Envoy has resolved it with its own trusted hops; a forwarding
//! header inside the request is never read), the method, path (with its query), host and
//! headers from `attributes.request.http`, the SNI from `attributes.tls_session`. The answer:
//! allow → `ok_response` carrying `x-netacl-decision`, `x-netacl-rule` and
//! `x-netacl-monitored` for the upstream; block → `denied_response` 403 with the edge's error
//! body; redirect → `denied_response` 302 with `location`; a refused path → 400, an unknown
//! host (many tenants) → 421. A `CheckRequest` without a client address, method or path, or
//! with one that does not parse, is answered with gRPC `INVALID_ARGUMENT` (Envoy then denies
//! with its `status_on_error`, 403 by default).
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use envoy_types::ext_authz::v3::pb::{
    Address, Authorization, AuthorizationServer, CheckRequest, CheckResponse, DeniedHttpResponse,
    HttpStatusCode,
};
use envoy_types::ext_authz::v3::{
    CheckResponseExt, DeniedHttpResponseBuilder, OkHttpResponseBuilder,
};
use http::header::{HeaderName, HeaderValue, HOST, USER_AGENT};
use http::{HeaderMap, Method, Uri};
use netacl_edge::{AclDecision, ConnectionInfo, Enforcer, TlsInfo};
use netacl_listener::ConnectionLimits;

use crate::door::{log_decision, status_of, Bound, DoorError, RunningDoor};
use crate::metrics::{DoorAnswer, DoorCounters};

/// The headers of a `CheckRequest` the decision reads, besides the host: the user agent and an
/// RFC 9421 signature's two fields.
const READ_HEADERS: [&str; 3] = ["user-agent", "signature", "signature-input"];

/// Why a `CheckRequest` cannot be decided (answered with gRPC `INVALID_ARGUMENT`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// A field the decision needs is absent.
    #[error("the CheckRequest has no {0}")]
    Missing(&'static str),
    /// A field does not parse.
    #[error("the CheckRequest's {field} is not valid: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// One request as the edge's decision takes it, read from a `CheckRequest`.
#[derive(Debug)]
pub struct CheckFacts {
    /// The client (Envoy's `source.address`), with the SNI when Envoy reports a TLS session.
    pub conn: ConnectionInfo,
    /// The request method.
    pub method: Method,
    /// The path and query.
    pub uri: Uri,
    /// Host, User-Agent, Signature and Signature-Input, as sent.
    pub headers: HeaderMap,
}

impl CheckFacts {
    /// Reads `request`. Header names in Envoy's map are lowercase; `:authority` stands for the
    /// host when `host` is empty.
    pub fn from_check(request: &CheckRequest) -> Result<Self, CheckError> {
        let attributes = request
            .attributes
            .as_ref()
            .ok_or(CheckError::Missing("attributes"))?;
        let address = attributes
            .source
            .as_ref()
            .and_then(|peer| peer.address.as_ref())
            .and_then(|address| address.address.as_ref())
            .ok_or(CheckError::Missing("source address"))?;
        let Address::SocketAddress(socket) = address else {
            return Err(CheckError::Invalid {
                field: "source address",
                reason: "not a socket address",
            });
        };
        let ip: IpAddr = socket.address.parse().map_err(|_| CheckError::Invalid {
            field: "source address",
            reason: "not an IP address",
        })?;
        let http = attributes
            .request
            .as_ref()
            .and_then(|r| r.http.as_ref())
            .ok_or(CheckError::Missing("request.http"))?;
        let method =
            Method::from_bytes(http.method.as_bytes()).map_err(|_| CheckError::Invalid {
                field: "method",
                reason: "not an HTTP method token",
            })?;
        if !http.path.starts_with('/') {
            return Err(CheckError::Invalid {
                field: "path",
                reason: "not an origin-form path (it must start with /)",
            });
        }
        let uri = Uri::try_from(http.path.as_str()).map_err(|_| CheckError::Invalid {
            field: "path",
            reason: "not a valid request target",
        })?;
        let mut headers = HeaderMap::new();
        let host = if http.host.is_empty() {
            http.headers.get(":authority").map_or("", String::as_str)
        } else {
            http.host.as_str()
        };
        if !host.is_empty() {
            headers.insert(HOST, header_value("host", host)?);
        }
        for name in READ_HEADERS {
            if let Some(value) = http.headers.get(name) {
                let header = if name == "user-agent" {
                    USER_AGENT
                } else {
                    HeaderName::from_static(name)
                };
                headers.insert(header, header_value("header", value)?);
            }
        }
        let mut conn = ConnectionInfo::new(SocketAddr::new(ip, 0));
        if let Some(sni) = attributes
            .tls_session
            .as_ref()
            .map(|t| t.sni.as_str())
            .filter(|s| !s.is_empty())
        {
            conn = conn.with_tls(TlsInfo::new(Some(sni), "", ""));
        }
        Ok(Self {
            conn,
            method,
            uri,
            headers,
        })
    }
}

fn header_value(field: &'static str, value: &str) -> Result<HeaderValue, CheckError> {
    HeaderValue::from_str(value).map_err(|_| CheckError::Invalid {
        field,
        reason: "not a valid header value",
    })
}

/// The `Authorization` service: every `Check` decided by the edge's [`Enforcer`] (the same
/// policy, metrics, counts and sample as the edge's own proxy).
#[derive(Debug, Clone)]
pub struct ExtAuthz {
    enforcer: Arc<Enforcer>,
    counters: Option<Arc<DoorCounters>>,
}

impl ExtAuthz {
    /// The service over `enforcer` (uncounted: [`start_ext_authz`] counts its answers).
    pub fn new(enforcer: Arc<Enforcer>) -> Self {
        Self {
            enforcer,
            counters: None,
        }
    }

    /// The answer to one `CheckRequest`.
    pub fn decide(&self, request: &CheckRequest) -> Result<CheckResponse, CheckError> {
        let started = Instant::now();
        let facts = match CheckFacts::from_check(request) {
            Ok(facts) => facts,
            Err(e) => {
                if let Some(counters) = &self.counters {
                    counters.record(DoorAnswer::BadRequest);
                    counters.observe_check(started.elapsed());
                }
                return Err(e);
            }
        };
        let decision = self.enforcer.decide_request(
            Some(&facts.conn),
            &facts.method,
            &facts.uri,
            &facts.headers,
        );
        let response = response(&decision);
        if let Some(counters) = &self.counters {
            counters.record(DoorAnswer::Decided(decision.verdict));
            // The access event is written after the clock stops: its cost is the log's.
            counters.observe_check(started.elapsed());
        }
        log_decision(
            DOOR,
            &facts.method,
            facts.uri.path(),
            &decision,
            status_of(&decision),
        );
        Ok(response)
    }
}

#[tonic::async_trait]
impl Authorization for ExtAuthz {
    async fn check(
        &self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<tonic::Response<CheckResponse>, tonic::Status> {
        self.decide(request.get_ref())
            .map(tonic::Response::new)
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))
    }
}

/// Allow and no decision: `ok_response` with the decision headers; a decision that stops the
/// request: `denied_response` as the edge answers it ([`AclDecision::refusal`]).
fn response(decision: &AclDecision) -> CheckResponse {
    let Some(refusal) = decision.refusal() else {
        let mut ok = OkHttpResponseBuilder::new();
        ok.add_header("x-netacl-decision", decision.verdict.as_str(), None, false);
        match &decision.rule_id {
            Some(rule) => ok.add_header("x-netacl-rule", rule.to_string(), None, false),
            None => ok.remove_header("x-netacl-rule"),
        };
        if decision.monitored.is_empty() {
            ok.remove_header("x-netacl-monitored");
        } else {
            let ids: Vec<String> = decision.monitored.iter().map(|id| id.to_string()).collect();
            ok.add_header("x-netacl-monitored", ids.join(","), None, false);
        }
        let mut response = CheckResponse::with_status(tonic::Status::ok(""));
        response.set_http_response(ok.build());
        return response;
    };
    let status =
        HttpStatusCode::try_from(i32::from(refusal.status)).unwrap_or(HttpStatusCode::Forbidden);
    let body = refusal.body;
    let mut denied = DeniedHttpResponseBuilder::new();
    denied.set_http_status(status);
    if !body.is_empty() {
        denied.add_header("content-type", "application/json", None, false);
        denied.set_body(body);
    }
    if let Some(location) = refusal.location {
        denied.add_header("location", location, None, false);
    }
    denied.add_header("cache-control", "no-store", None, false);
    if let Some(rule) = &decision.rule_id {
        denied.add_header("x-netacl-rule", rule.to_string(), None, false);
    }
    let denied: DeniedHttpResponse = denied.build();
    let mut response = CheckResponse::with_status(tonic::Status::permission_denied(""));
    response.set_http_response(denied);
    response
}

/// The `door` and `listener` label of the ext_authz service.
pub const DOOR: &str = "ext_authz";

/// Binds the ext_authz service on `listen` and serves it in a background task: gRPC over
/// HTTP/2 (cleartext), every connection admitted by a gate under `limits` (the edge's), every
/// `Check` decided by `enforcer`. Registers the door's answer counters and listener counters
/// with the enforcer's metrics (`door="ext_authz"`).
///
/// # Errors
///
/// [`DoorError::Bind`] when the address cannot be bound.
pub async fn start_ext_authz(
    enforcer: Arc<Enforcer>,
    listen: SocketAddr,
    limits: ConnectionLimits,
) -> Result<RunningDoor, DoorError> {
    let Bound {
        listener,
        addr,
        gate,
        counters,
    } = Bound::new(&enforcer, DOOR, listen, limits).await?;
    let service =
        hyper_util::service::TowerToHyperService::new(AuthorizationServer::new(ExtAuthz {
            enforcer,
            counters: Some(Arc::clone(&counters)),
        }));
    let accepting = gate.clone();
    let task = tokio::spawn(async move {
        while let Some((stream, _peer, admitted)) = accepting.accept(&listener).await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(admitted.serve(stream, service.clone()));
        }
    });
    tracing::info!(door = DOOR, %addr, "netacl ext_authz service listening");
    Ok(RunningDoor::new(addr, gate, counters, task))
}

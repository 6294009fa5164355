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
use std::collections::HashMap;

use http::{Method, Uri};
use netacl_edge::{AclDecision, Enforcer, HeaderLookup, RequestFacts, TlsFacts};
use netacl_listener::ConnectionLimits;

use crate::door::{
    log_decision, reported_scheme, resolved_client_facts, status_of, valid_header_value,
    visible_ascii, Bound, DoorError, RunningDoor,
};
use crate::metrics::{DoorAnswer, DoorCounters};

/// The headers of a `CheckRequest` that must be valid header values when sent (Envoy's map
/// carries them as strings): the user agent and an RFC 9421 signature's two fields.
const CHECKED_HEADERS: [&str; 3] = ["user-agent", "signature", "signature-input"];

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

/// Envoy's map of the request's headers (names in lowercase) as the edge's header lookup: an
/// RFC 9421 signature may cover any of them.
#[derive(Debug, Clone, Copy)]
pub struct EnvoyHeaders<'a>(pub &'a HashMap<String, String>);

impl HeaderLookup for EnvoyHeaders<'_> {
    fn each_value(&self, name: &str, value: &mut dyn FnMut(&[u8])) {
        if let Some(v) = self.0.get(name) {
            value(v.as_bytes());
        }
    }
}

/// One request as the edge's decision takes it, read from a `CheckRequest` and borrowing from
/// it (nothing is copied but the request target, parsed once).
#[derive(Debug)]
pub struct CheckFacts<'a> {
    /// The client: Envoy's `source.address` (a forwarding header in the request is never read).
    pub client: IpAddr,
    /// The request method.
    pub method: Method,
    /// The path and query.
    pub uri: Uri,
    /// The host (`host`, else the `:authority` header), when given.
    pub host: Option<&'a str>,
    /// The SNI, when Envoy reports a TLS session.
    pub sni: Option<&'a str>,
    /// The scheme Envoy reports (`http` or `https`; another value is not taken).
    pub scheme: Option<&'static str>,
    /// The request's headers as Envoy sent them.
    pub headers: EnvoyHeaders<'a>,
}

impl<'a> CheckFacts<'a> {
    /// Reads `request`. Header names in Envoy's map are lowercase; `:authority` stands for the
    /// host when `host` is empty. The host, user agent and signature fields must be valid
    /// header values (no control characters).
    pub fn from_check(request: &'a CheckRequest) -> Result<Self, CheckError> {
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
        let client: IpAddr = socket.address.parse().map_err(|_| CheckError::Invalid {
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
        let host = if http.host.is_empty() {
            http.headers.get(":authority").map_or("", String::as_str)
        } else {
            http.host.as_str()
        };
        if !valid_header_value(host) {
            return Err(CheckError::Invalid {
                field: "host",
                reason: "not a valid header value",
            });
        }
        for name in CHECKED_HEADERS {
            if http
                .headers
                .get(name)
                .is_some_and(|v| !valid_header_value(v))
            {
                return Err(CheckError::Invalid {
                    field: "header",
                    reason: "not a valid header value",
                });
            }
        }
        let sni = attributes
            .tls_session
            .as_ref()
            .map(|t| t.sni.as_str())
            .filter(|s| !s.is_empty());
        Ok(Self {
            client,
            method,
            uri,
            host: Some(host).filter(|h| !h.is_empty()),
            sni,
            scheme: reported_scheme(http.scheme.as_bytes()),
            headers: EnvoyHeaders(&http.headers),
        })
    }

    /// The user agent, when it is visible ASCII (as the edge reads a `User-Agent` header).
    pub fn user_agent(&self) -> Option<&'a str> {
        self.headers
            .0
            .get("user-agent")
            .map(String::as_str)
            .filter(|v| visible_ascii(v))
    }

    /// The facts the edge decides with: the client as given (no forwarding walk), the host
    /// (unclear when it is not visible ASCII, as the edge reads a `Host` header), the SNI.
    pub fn request_facts(&self) -> RequestFacts<'_> {
        let mut facts = resolved_client_facts(
            self.client,
            &self.method,
            &self.uri,
            self.host,
            self.user_agent(),
            &self.headers,
        )
        .with_scheme(self.scheme);
        if self.sni.is_some() {
            facts = facts.with_tls(TlsFacts::new(self.sni, "", ""));
        }
        facts
    }
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
        let decision = self.enforcer.decide_facts(&facts.request_facts());
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

//! The tower [`Layer`] that enforces the live policy in front of any hyper 1.x / axum service.
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{Either, Full};
use tower::{Layer, Service};

use crate::enforce::connection::ConnectionInfo;
use crate::enforce::{AclDecision, AclVerdict, Enforcer};

/// The response body of [`AclService`]: the inner service's, or the edge's own.
pub type AclBody<B> = Either<B, Full<Bytes>>;

/// Enforces the live policy of an [`Enforcer`] on every request:
///
/// - a request the decision stops gets the edge's own answer ([`AclDecision::refusal`]: `403`
///   for `block`, `302` with `Location` for `redirect`, `400` for a refused path, `421` for a
///   host of no tenant); the inner service is not called;
/// - `allow` or no decision → the inner service;
/// - monitoring-mode (`log`) matches → a `tracing` event (target `netacl_edge::monitor`, `WARN`)
///   with the rule ids, whatever the verdict.
///
/// Every request gets one access event (target `netacl_edge::access`, `INFO` for blocks and
/// redirects, `DEBUG` otherwise) carrying the decision, and the [`AclDecision`] is inserted into
/// the request's extensions (for the inner service) and the response's (for outer layers).
///
/// The connection is described by a [`ConnectionInfo`] request extension.
#[derive(Clone, Debug)]
pub struct AclLayer {
    enforcer: Arc<Enforcer>,
}

impl AclLayer {
    /// A layer enforcing `enforcer`'s policy.
    pub fn new(enforcer: Arc<Enforcer>) -> Self {
        Self { enforcer }
    }
}

impl<S> Layer<S> for AclLayer {
    type Service = AclService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AclService {
            inner,
            enforcer: self.enforcer.clone(),
        }
    }
}

/// The service [`AclLayer`] wraps around `S`.
#[derive(Clone, Debug)]
pub struct AclService<S> {
    inner: S,
    enforcer: Arc<Enforcer>,
}

/// Builds the edge's own response for a request it stops ([`AclDecision::refusal`]).
fn own_response<B>(decision: &AclDecision) -> Option<Response<AclBody<B>>> {
    let mut response = decision
        .refusal()?
        .response(|body| Either::Right(Full::new(body)));
    response.extensions_mut().insert(decision.clone());
    Some(response)
}

fn log_decision(decision: &AclDecision, method: &http::Method, path: &str, status: u16) {
    if !decision.monitored.is_empty() {
        let monitored: Vec<&str> = decision.monitored.iter().map(|id| id.as_str()).collect();
        tracing::warn!(
            target: "netacl_edge::monitor",
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
        AclVerdict::Block
        | AclVerdict::Redirect
        | AclVerdict::InvalidPath
        | AclVerdict::Misdirected => access!(info),
        AclVerdict::None | AclVerdict::Allow => access!(debug),
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for AclService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqB: Send + 'static,
    ResB: Send + 'static,
{
    type Response = Response<AclBody<ResB>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        let conn = request.extensions().get::<ConnectionInfo>();
        if conn.is_none() && self.enforcer.is_enabled() {
            tracing::warn!(
                target: "netacl_edge::access",
                "request without ConnectionInfo: evaluated with no address and no TLS signals"
            );
        }
        let decision =
            self.enforcer
                .decide_request(conn, request.method(), request.uri(), request.headers());
        if let Some(response) = own_response::<ResB>(&decision) {
            log_decision(
                &decision,
                request.method(),
                request.uri().path(),
                response.status().as_u16(),
            );
            return Box::pin(async move { Ok(response) });
        }
        // The service that was polled ready serves this request; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        // Passing requests are logged at DEBUG: copy what the event needs only when it is on.
        let access = tracing::enabled!(target: "netacl_edge::access", tracing::Level::DEBUG)
            || !decision.monitored.is_empty();
        let logged = access.then(|| (request.method().clone(), request.uri().path().to_owned()));
        request.extensions_mut().insert(decision.clone());
        Box::pin(async move {
            let response = inner.call(request).await?;
            if let Some((method, path)) = logged {
                log_decision(&decision, &method, &path, response.status().as_u16());
            }
            let mut response = response.map(Either::Left);
            response.extensions_mut().insert(decision);
            Ok(response)
        })
    }
}

//! The forward-auth answer to a decision: 200 with the decision headers, 403, a redirect, a
//! refusal.
use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;
use netacl_edge::AclDecision;

use super::facts::{FactsError, RedirectStatus};

/// `X-Netacl-Decision`: `none`, `allow`, `block`, `redirect`, `invalid_path` or `misdirected`.
pub static X_NETACL_DECISION: HeaderName = HeaderName::from_static("x-netacl-decision");
/// `X-Netacl-Rule`: the deciding rule's id (absent when no rule decided).
pub static X_NETACL_RULE: HeaderName = HeaderName::from_static("x-netacl-rule");
/// `X-Netacl-Monitored`: the ids of the `log` rules that matched, comma-separated (absent when
/// none did).
pub static X_NETACL_MONITORED: HeaderName = HeaderName::from_static("x-netacl-monitored");

/// The body of the 400 a malformed forward-auth request gets (the message says which fact).
fn bad_request_body(error: &FactsError) -> Bytes {
    let message = error.to_string();
    let body = format!(
        r#"{{"statusCode":400,"error":"Bad Request","message":"{}","errorCode":"invalid_forward_auth_request"}}"#,
        message.replace(['"', '\\'], "")
    );
    Bytes::from(body)
}

fn json(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The 400 of a request whose facts are malformed.
pub(crate) fn bad_request(error: &FactsError) -> Response<Full<Bytes>> {
    json(StatusCode::BAD_REQUEST, bad_request_body(error))
}

/// The answer to `decision`: allow and no decision 200; a decision that stops the request
/// answered as the edge answers it ([`AclDecision::refusal`]: block 403 in the error shape,
/// redirect 302 (or 401, see [`RedirectStatus`]) with `Location`, a refused path 400, a host of
/// no tenant 421). Every answer carries `X-Netacl-Decision`, and `X-Netacl-Rule` /
/// `X-Netacl-Monitored` when there are ids to give.
pub(crate) fn answer(decision: &AclDecision, redirect: RedirectStatus) -> Response<Full<Bytes>> {
    let (mut response, verdict) = match decision.refusal() {
        None => (Response::new(Full::new(Bytes::new())), decision.verdict),
        Some(refusal) => {
            let mut r = refusal.response(Full::new);
            if let (Some(_), RedirectStatus::Unauthorized) = (refusal.location, redirect) {
                *r.status_mut() = StatusCode::UNAUTHORIZED;
            }
            (r, refusal.verdict)
        }
    };
    let headers = response.headers_mut();
    headers.insert(
        X_NETACL_DECISION.clone(),
        HeaderValue::from_static(verdict.as_str()),
    );
    if let Some(rule) = decision
        .rule_id
        .as_ref()
        .and_then(|id| HeaderValue::from_str(id.as_str()).ok())
    {
        headers.insert(X_NETACL_RULE.clone(), rule);
    }
    if !decision.monitored.is_empty() {
        let ids: Vec<&str> = decision.monitored.iter().map(|id| id.as_str()).collect();
        if let Ok(value) = HeaderValue::from_str(&ids.join(",")) {
            headers.insert(X_NETACL_MONITORED.clone(), value);
        }
    }
    response
}

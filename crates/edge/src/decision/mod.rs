//! The decision the edge acted on, as it is logged, counted and attached to requests.
//!
//! `connection_rules`: the part of a rule set that can decide before a request is read.
pub(crate) mod connection_rules;

use std::net::IpAddr;
use std::sync::Arc;

use netacl_model::{AclId, RequestScope};

/// What the edge did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AclVerdict {
    /// No rule decided; the request passed.
    None,
    /// An `allow` rule decided; the request passed.
    Allow,
    /// A `block` rule decided; the edge answered 403.
    Block,
    /// A `redirect` rule decided; the edge answered 302.
    Redirect,
    /// The request path is refused before any rule (a malformed percent-escape, a backslash, or
    /// a path servers would route to different scopes: see
    /// [`scope_of_path`](crate::scope_of_path)); the edge answered 400.
    InvalidPath,
    /// Multi-tenant mode: the request's host is no tenant's, or its TLS SNI and its HTTP host
    /// name different tenants; the edge answered 421.
    Misdirected,
}

impl AclVerdict {
    /// `none`, `allow`, `block`, `redirect`, `invalid_path` or `misdirected`.
    pub fn as_str(self) -> &'static str {
        match self {
            AclVerdict::None => "none",
            AclVerdict::Allow => "allow",
            AclVerdict::Block => "block",
            AclVerdict::Redirect => "redirect",
            AclVerdict::InvalidPath => "invalid_path",
            AclVerdict::Misdirected => "misdirected",
        }
    }
}

/// The body of a blocked request: the shape of the admin API's errors, revealing no rule id,
/// address or anything else internal.
pub const BLOCKED_BODY: &str =
    r#"{"statusCode":403,"error":"Forbidden","message":"Request blocked","errorCode":"blocked"}"#;

/// The body of a request whose path is refused (see [`scope_of_path`](crate::scope_of_path)):
/// the shape of the admin API's errors.
pub const INVALID_PATH_BODY: &str = r#"{"statusCode":400,"error":"Bad Request","message":"Invalid request path","errorCode":"invalid_path"}"#;

/// The body of the `421` for a request whose host is no tenant's, or whose TLS SNI and HTTP host
/// name different tenants (multi-tenant mode): fixed, so that it tells nothing of the tenants.
pub const MISDIRECTED_BODY: &str = r#"{"statusCode":421,"error":"Misdirected Request","message":"Misdirected Request","errorCode":"unknown_host"}"#;

/// How a proxy answers a decision that stops the request: the one mapping that the edge's
/// proxy, its tower layer, every front door and the Pingora filter answer with.
///
/// - `block` → 403 with [`BLOCKED_BODY`];
/// - `redirect` → 302 with `Location` and no body; a `redirect_uri` that cannot be sent as a
///   header value (not visible ASCII) → 403 with [`BLOCKED_BODY`] instead (the rule meant to
///   keep the request away);
/// - a refused path → 400 with [`INVALID_PATH_BODY`];
/// - a misdirected request (multi-tenant mode) → 421 with [`MISDIRECTED_BODY`].
///
/// Bodies are JSON in the admin API's error shape (`application/json`); every refusal is sent
/// with `Cache-Control: no-store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal<'a> {
    /// What the answer carries out: the decision's verdict, or `block` for a redirect whose
    /// target cannot be sent.
    pub verdict: AclVerdict,
    /// The HTTP status.
    pub status: u16,
    /// The JSON body; empty for a redirect.
    pub body: &'static str,
    /// A redirect's target.
    pub location: Option<&'a str>,
}

/// The decision about one request, as the edge acted on it. Inserted into the request's
/// extensions (for the service behind the layer) and the response's (for access logs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AclDecision {
    /// What was done.
    pub verdict: AclVerdict,
    /// The deciding rule.
    pub rule_id: Option<AclId>,
    /// Monitoring-mode (`log`) rules that matched, in evaluation order.
    pub monitored: Vec<AclId>,
    /// Where a redirect sends the client (shared with the policy that decided).
    pub redirect_uri: Option<Arc<str>>,
    /// The rule-set version the decision was made against.
    pub version: u64,
    /// The request's scope (from its path, see [`scope_of_path`](crate::scope_of_path));
    /// `authentication` for a refused path.
    pub scope: RequestScope,
    /// The client address used (absent when the request carried no
    /// [`ConnectionInfo`](crate::ConnectionInfo)).
    pub client_ip: Option<IpAddr>,
}

impl Refusal<'_> {
    /// The answer as HTTP: the status, the body (`body` wraps its bytes in the response's body
    /// type) with `Content-Type: application/json` when there is one, `Location` for a
    /// redirect, and `Cache-Control: no-store`. What the tower layer and the forward-auth door
    /// send.
    pub fn response<B>(&self, body: impl FnOnce(bytes::Bytes) -> B) -> http::Response<B> {
        use http::header::{self, HeaderValue};
        let mut response =
            http::Response::new(body(bytes::Bytes::from_static(self.body.as_bytes())));
        *response.status_mut() =
            http::StatusCode::from_u16(self.status).unwrap_or(http::StatusCode::FORBIDDEN);
        let headers = response.headers_mut();
        if !self.body.is_empty() {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        // `refusal` gives a location only when it is a valid header value.
        if let Some(location) = self.location.and_then(|l| HeaderValue::from_str(l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

impl AclDecision {
    /// The answer that stops this request, or `None` when it passes (`none`, `allow`, and a
    /// `log` rule's match, which is `none`). See [`Refusal`].
    pub fn refusal(&self) -> Option<Refusal<'_>> {
        let blocked = (AclVerdict::Block, 403, BLOCKED_BODY, None);
        let (verdict, status, body, location) = match self.verdict {
            AclVerdict::None | AclVerdict::Allow => return None,
            AclVerdict::Redirect => match self
                .redirect_uri
                .as_deref()
                .filter(|uri| uri.bytes().all(|b| b == b'\t' || (32..127).contains(&b)))
            {
                Some(location) => (AclVerdict::Redirect, 302, "", Some(location)),
                None => blocked,
            },
            AclVerdict::InvalidPath => (AclVerdict::InvalidPath, 400, INVALID_PATH_BODY, None),
            AclVerdict::Misdirected => (AclVerdict::Misdirected, 421, MISDIRECTED_BODY, None),
            AclVerdict::Block => blocked,
        };
        Some(Refusal {
            verdict,
            status,
            body,
            location,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(verdict: AclVerdict, redirect_uri: Option<&str>) -> AclDecision {
        AclDecision {
            verdict,
            rule_id: None,
            monitored: Vec::new(),
            redirect_uri: redirect_uri.map(Arc::from),
            version: 1,
            scope: RequestScope::Authentication,
            client_ip: None,
        }
    }

    #[test]
    fn each_stopping_verdict_has_its_answer_and_passing_ones_none() {
        let answer = |verdict, uri| {
            decision(verdict, uri)
                .refusal()
                .map(|r| (r.verdict, r.status, r.body, r.location.map(str::to_owned)))
        };
        assert_eq!(answer(AclVerdict::None, None), None);
        assert_eq!(answer(AclVerdict::Allow, None), None);
        assert_eq!(
            answer(AclVerdict::Block, None),
            Some((AclVerdict::Block, 403, BLOCKED_BODY, None))
        );
        assert_eq!(
            answer(AclVerdict::Redirect, Some("https://example.test/why")),
            Some((
                AclVerdict::Redirect,
                302,
                "",
                Some("https://example.test/why".to_owned())
            ))
        );
        assert_eq!(
            answer(AclVerdict::InvalidPath, None),
            Some((AclVerdict::InvalidPath, 400, INVALID_PATH_BODY, None))
        );
        assert_eq!(
            answer(AclVerdict::Misdirected, None),
            Some((AclVerdict::Misdirected, 421, MISDIRECTED_BODY, None))
        );
    }

    #[test]
    fn a_redirect_that_cannot_be_sent_is_a_block() {
        for uri in [
            None,
            Some("https://example.test/\nSet-Cookie: x"),
            Some("https://é.test/"),
        ] {
            let redirect = decision(AclVerdict::Redirect, uri);
            let refusal = redirect.refusal().unwrap();
            assert_eq!(
                (
                    refusal.verdict,
                    refusal.status,
                    refusal.body,
                    refusal.location
                ),
                (AclVerdict::Block, 403, BLOCKED_BODY, None),
                "{uri:?}"
            );
        }
    }

    #[test]
    fn a_refusal_as_http_carries_its_status_body_type_location_and_no_store() {
        let blocked = decision(AclVerdict::Block, None);
        let response = blocked.refusal().expect("stops").response(|b| b);
        assert_eq!(response.status(), 403);
        assert_eq!(response.body().as_ref(), BLOCKED_BODY.as_bytes());
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.headers()["cache-control"], "no-store");
        assert!(response.headers().get("location").is_none());
        let redirected = decision(AclVerdict::Redirect, Some("https://example.com/r"));
        let response = redirected.refusal().expect("stops").response(|b| b);
        assert_eq!(response.status(), 302);
        assert!(response.body().is_empty());
        assert!(response.headers().get("content-type").is_none());
        assert_eq!(response.headers()["location"], "https://example.com/r");
        assert_eq!(response.headers()["cache-control"], "no-store");
    }
}

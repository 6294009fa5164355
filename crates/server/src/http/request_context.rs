//! Per-request facts other parts of the server record: the request's id and, once the bearer
//! token is verified, the calling client.
//!
//! The outermost middleware ([`assign`]) gives every request a [`RequestContext`] in its
//! extensions and answers every response with `X-Request-Id`. An inbound `X-Request-Id` is kept
//! when it is 1 to 64 visible ASCII characters (`!` to `~`, no space) and the only one; otherwise
//! the server makes one (32 lowercase hex digits, 128 random bits). The guard fills in
//! [`RequestContext::client_id`] when it verifies the token, and puts the filled context into
//! the response's extensions too, so a layer outside the guard (an audit log) sees the client.
use axum::extract::{FromRequestParts, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::request::Parts;
use http::HeaderValue;
use netacl_store::WriteOrigin;

/// The request-id header, read and written.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest inbound request id kept.
pub const MAX_REQUEST_ID_LEN: usize = 64;

/// Who is asking and under which request id: in the request's extensions for every request
/// (and, once the guard verified a token, in the response's extensions as well).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestContext {
    /// The request's id: the inbound `X-Request-Id` when acceptable, else generated. Sent back
    /// in `X-Request-Id` on every answer and recorded with every write it makes.
    pub request_id: String,
    /// The client whose bearer token the guard verified (`azp`); `None` before the guard and on
    /// routes without a token.
    pub client_id: Option<String>,
}

impl RequestContext {
    /// A context with a fresh request id and no client yet.
    pub fn generate() -> Self {
        Self {
            request_id: format!("{:032x}", rand::random::<u128>()),
            client_id: None,
        }
    }

    /// The context for an inbound `X-Request-Id` (kept when acceptable, see the module docs).
    pub fn from_inbound(values: &http::HeaderMap) -> Self {
        let mut all = values.get_all(REQUEST_ID_HEADER).iter();
        match (all.next(), all.next()) {
            (Some(value), None) if acceptable(value.as_bytes()) => Self {
                request_id: String::from_utf8_lossy(value.as_bytes()).into_owned(),
                client_id: None,
            },
            _ => Self::generate(),
        }
    }

    /// What a write made under this request records in the history.
    pub fn origin(&self) -> WriteOrigin {
        WriteOrigin {
            client_id: self.client_id.clone(),
            request_id: Some(self.request_id.clone()),
        }
    }
}

/// 1 to [`MAX_REQUEST_ID_LEN`] visible ASCII characters.
fn acceptable(value: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID_LEN).contains(&value.len()) && value.iter().all(|b| b.is_ascii_graphic())
}

/// The middleware (see the module docs).
pub(crate) async fn assign(mut request: Request, next: Next) -> Response {
    let context = RequestContext::from_inbound(request.headers());
    let header = HeaderValue::from_str(&context.request_id).ok();
    request.extensions_mut().insert(context);
    let mut response = next.run(request).await;
    if let Some(header) = header {
        response.headers_mut().insert(REQUEST_ID_HEADER, header);
    }
    response
}

impl<S: Send + Sync> FromRequestParts<S> for RequestContext {
    type Rejection = std::convert::Infallible;

    /// The context [`assign`] put in; a fresh one for a router built without it.
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<RequestContext>()
            .cloned()
            .unwrap_or_else(RequestContext::generate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbound(values: &[&[u8]]) -> RequestContext {
        let mut headers = http::HeaderMap::new();
        for value in values {
            headers.append(
                REQUEST_ID_HEADER,
                HeaderValue::from_bytes(value).expect("header value"),
            );
        }
        RequestContext::from_inbound(&headers)
    }

    #[test]
    fn short_visible_inbound_ids_are_kept_and_others_replaced() {
        assert_eq!(inbound(&[b"abc-123"]).request_id, "abc-123");
        let longest = "x".repeat(MAX_REQUEST_ID_LEN);
        assert_eq!(inbound(&[longest.as_bytes()]).request_id, longest);
        let generated = |id: &str| {
            id.len() == 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        };
        for refused in [
            "x".repeat(MAX_REQUEST_ID_LEN + 1).into_bytes(),
            b"has space".to_vec(),
            b"tab\there".to_vec(),
            b"caf\xc3\xa9".to_vec(),
            Vec::new(),
        ] {
            let id = inbound(&[&refused]).request_id;
            assert!(generated(&id), "{refused:?} gave {id}");
        }
        assert!(generated(&inbound(&[b"a", b"b"]).request_id), "two values");
        assert!(generated(&inbound(&[]).request_id));
        assert_ne!(inbound(&[]).request_id, inbound(&[]).request_id);
    }
}

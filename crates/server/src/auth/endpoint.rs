//! The HTTP side of the authority: `POST /oauth/token` and `GET /.well-known/jwks.json`.

use super::authority::{OAuthError, TenantAuthority, TokenRequest};
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, PRAGMA, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::sync::Arc;

/// Largest token request body read, in bytes. Real requests are a few hundred bytes.
pub const MAX_TOKEN_BODY_BYTES: usize = 16 * 1024;

const JSON_UTF8: &str = "application/json; charset=utf-8";

/// The token routes, ready to merge into the server's router at the host root:
///
/// - `POST /oauth/token` and `POST /oauth/token/` → [`token_endpoint`]
/// - `GET /.well-known/jwks.json` → [`jwks_endpoint`]
///
/// ```no_run
/// # fn app(authority: std::sync::Arc<netacl_server::auth::TenantAuthority>, management_routes: axum::Router) -> axum::Router {
/// axum::Router::new()
///     .nest("/api/v2", management_routes)
///     .merge(netacl_server::auth::token_router(authority))
/// # }
/// ```
///
/// These routes are not rate limited here; `AdminService::router` mounts the same handlers with
/// its per-peer limiter in front of `POST /oauth/token`.
pub fn token_router<S>(authority: Arc<TenantAuthority>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/oauth/token", post(token_endpoint))
        .route("/oauth/token/", post(token_endpoint))
        .route("/.well-known/jwks.json", get(jwks_endpoint))
        .with_state(authority)
}

/// `POST /oauth/token`: the client-credentials grant.
///
/// The body is `application/json` or `application/x-www-form-urlencoded` (any other or no
/// content type is a 400 `invalid_request`) with `grant_type`, `client_id`,
/// `client_secret`, `audience`, optional `scope` and `organization` (string or JSON null,
/// ignored). The client may instead authenticate with HTTP Basic (`client_secret_basic`,
/// RFC 6749 §2.3.1); using Basic and a body secret together is a 400. Every answer carries
/// `Cache-Control: no-store`; a failed Basic authentication also carries
/// `WWW-Authenticate: Basic`.
pub async fn token_endpoint(
    State(authority): State<Arc<TenantAuthority>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let basic_used = basic_credentials_present(&headers);
    let result = match read_request(&headers, body).await {
        Ok(request) => authority.issue_client_credentials(&request),
        Err(error) => Err(error),
    };
    match result {
        Ok(token) => json_response(
            StatusCode::OK,
            serde_json::to_value(&token).unwrap_or_default(),
        ),
        Err(error) => {
            let mut response = json_response(error.status(), error.body());
            if basic_used && error == OAuthError::AccessDenied {
                let realm = format!("Basic realm=\"{}\"", authority.issuer());
                if let Ok(value) = HeaderValue::from_str(&realm) {
                    response.headers_mut().insert(WWW_AUTHENTICATE, value);
                }
            }
            response
        }
    }
}

/// `GET /.well-known/jwks.json`: the public signing key, so that other services (and the
/// edge) can verify the tenant's tokens themselves.
pub async fn jwks_endpoint(State(authority): State<Arc<TenantAuthority>>) -> Response {
    let mut response = json_response(StatusCode::OK, authority.jwks());
    response.headers_mut().insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

async fn read_request(headers: &HeaderMap, body: Body) -> Result<TokenRequest, OAuthError> {
    let bytes = axum::body::to_bytes(body, MAX_TOKEN_BODY_BYTES)
        .await
        .map_err(|err| {
            match err
                .into_inner()
                .downcast::<http_body_util::LengthLimitError>()
            {
                Ok(_) => OAuthError::BodyTooLarge,
                // The client went away, or its body missed the listener's deadline.
                Err(_) => OAuthError::InvalidRequest("The request body could not be read"),
            }
        })?;
    let mut request = parse_body(headers, &bytes)?;
    if let Some((id, secret)) = basic_credentials(headers)? {
        if request.client_secret.is_some() {
            return Err(OAuthError::InvalidRequest(
                "Only one client authentication method may be used",
            ));
        }
        if request
            .client_id
            .as_ref()
            .is_some_and(|body_id| *body_id != id)
        {
            return Err(OAuthError::InvalidRequest(
                "The client_id parameter does not match the authenticated client",
            ));
        }
        request.client_id = Some(id);
        request.client_secret = Some(secret);
    }
    Ok(request)
}

fn parse_body(headers: &HeaderMap, bytes: &[u8]) -> Result<TokenRequest, OAuthError> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    match content_type.as_deref() {
        Some("application/json") => {
            let malformed =
                || OAuthError::InvalidRequest("The request body is not a valid JSON token request");
            // A JSON object only: the derived reader of `TokenRequest` would also take an
            // array, by position (`["client_credentials", "id", "secret", "aud"]`). JSON text
            // whose first character is `{` is an object (or not JSON at all).
            if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
                return Err(malformed());
            }
            serde_json::from_slice(bytes).map_err(|_| malformed())
        }
        Some("application/x-www-form-urlencoded") => {
            serde_urlencoded::from_bytes(bytes).map_err(|_| {
                OAuthError::InvalidRequest("The request body is not a valid form token request")
            })
        }
        _ => Err(OAuthError::InvalidRequest(
            "Content-Type must be application/json or application/x-www-form-urlencoded",
        )),
    }
}

fn basic_credentials_present(headers: &HeaderMap) -> bool {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
}

/// `Authorization: Basic base64(urlencode(id) ":" urlencode(secret))`, or `None` when the
/// request does not use Basic. A malformed Basic header is an authentication failure.
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, OAuthError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if !basic_credentials_present(headers) {
        return Ok(None);
    }
    if values.next().is_some() {
        return Err(OAuthError::InvalidRequest(
            "Only one Authorization header may be sent",
        ));
    }
    let encoded = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .map(|(_, rest)| rest.trim())
        .ok_or(OAuthError::AccessDenied)?;
    let decoded = STANDARD
        .decode(encoded)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or(OAuthError::AccessDenied)?;
    let (id, secret) = decoded.split_once(':').ok_or(OAuthError::AccessDenied)?;
    let decode = |part: &str| -> Result<String, OAuthError> {
        let spaced = part.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| OAuthError::AccessDenied)
    };
    Ok(Some((decode(id)?, decode(secret)?)))
}

//! The operators' web console at `/console` (README, "The console").
//!
//! Every asset is compiled into the binary ([`assets`]); the pages hold no inline script or
//! style and are served with a strict `Content-Security-Policy`. The console speaks to the same
//! API as every client, through a same-origin proxy:
//!
//! - **Sign-in** (`POST /console/session`, JSON `{client_id, client_secret}`): the credentials
//!   go through the tenant's own `POST /oauth/token` (its rate limit, its errors); the access
//!   token it answers stays on the server, in a [`Sessions`] entry bound to the tenant. The
//!   browser gets an opaque session id in an `HttpOnly`, `SameSite=Strict` cookie scoped to
//!   `/console`, and a CSRF token in the answer's body, which it keeps in memory only. The cookie
//!   is `Secure` whenever the console is reached over HTTPS: TLS to this process, a `https://`
//!   public URL ([`ConsoleSettings::public_url`]), or `X-Forwarded-Proto: https` from a trusted
//!   proxy ([`ConsoleSettings::trusted_proxies`]; from any other peer the header is ignored).
//! - **Every API call** goes to `/console/api/<path>` (`<path>` under `api/v2/` or
//!   `_netacl/v1/`): the session's token is added as `Authorization: Bearer` and the request is
//!   answered by the API router itself, so scopes are enforced exactly as for any client (a
//!   read-only client gets a read-only console: its writes are 403). The request must carry the
//!   session's CSRF token in `X-CSRF-Token` (whatever the method), and a browser's
//!   `Sec-Fetch-Site`, when sent, must be `same-origin`.
//! - A session lives as long as its token (`--token-lifetime`, at most [`MAX_SESSION`]), is
//!   kept in this process's memory (a restart or another node asks to sign in again), bounded
//!   per client, per tenant and in all (see [`sessions`]), dropped with its tenant, and ends
//!   with `DELETE /console/session`.

mod assets;
mod sessions;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use serde::Deserialize;
use serde_json::json;
use tower::ServiceExt;

use crate::http::error::{json_response, ApiError};
use crate::{AppState, TlsTransport};

pub use sessions::{
    ConsoleSessionLimits, ConsoleSessionLimitsError, DEFAULT_CONSOLE_SESSIONS,
    DEFAULT_CONSOLE_SESSIONS_PER_CLIENT, DEFAULT_CONSOLE_SESSIONS_PER_TENANT,
};
pub(crate) use sessions::{Owner, Sessions};
use sessions::{Session, SessionError};

/// The console's settings ([`ServerConfig::console`](crate::ServerConfig::console)).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ConsoleSettings {
    /// How its sessions are bounded (`--console-sessions-per-client`, `-per-tenant`,
    /// `--console-sessions`).
    pub sessions: ConsoleSessionLimits,
    /// The URL clients reach the service at, when a proxy is in front (`--public-url`): with
    /// `https`, the session cookie is `Secure` whatever the transport to this process.
    pub public_url: Option<http::Uri>,
    /// Peers whose `X-Forwarded-Proto` is believed (`--trusted-proxy`): a request from one of
    /// them saying `https` gets a `Secure` session cookie. The header is ignored from any other
    /// peer.
    pub trusted_proxies: netacl_model::TrustedProxies,
}

impl ConsoleSettings {
    /// Whether the URL clients reach the service at is `https://`.
    fn public_https(&self) -> bool {
        self.public_url
            .as_ref()
            .and_then(|u| u.scheme())
            .is_some_and(|s| *s == http::uri::Scheme::HTTPS)
    }
}

/// The longest a console session lives, whatever the token lifetime.
pub const MAX_SESSION: std::time::Duration = std::time::Duration::from_secs(8 * 3600);

/// The name of the session cookie.
const COOKIE: &str = "netacl_console";

/// The policy every console answer carries: scripts, styles and images from the console's own
/// origin only, no inline code, no framing, no form posting elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

#[derive(Clone)]
struct Console {
    sessions: Arc<Sessions>,
    api: Router,
}

/// The console's routes, answering API calls with `api` (the tenant router, below the tenant
/// selection, which must run before these routes).
pub(crate) fn router(api: Router, sessions: Arc<Sessions>) -> Router {
    let console = Console { sessions, api };
    Router::new()
        .route("/console", get(page))
        .route("/console/", get(page))
        .route("/console/assets/{file}", get(asset))
        .route(
            "/console/session",
            get(session_info).post(sign_in).delete(sign_out),
        )
        .route("/console/api/{*path}", any(proxy))
        .route("/console/{*rest}", any(not_found))
        .with_state(console)
        .layer(axum::middleware::map_response(security_headers))
}

/// The headers of every console answer.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn page() -> Response {
    assets::respond("index.html").unwrap_or_else(not_found_response)
}

async fn asset(Path(file): Path<String>) -> Response {
    assets::respond(&file).unwrap_or_else(not_found_response)
}

async fn not_found() -> Response {
    not_found_response()
}

fn not_found_response() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, None, "Not Found").into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    client_id: String,
    client_secret: String,
}

/// `POST /console/session`: the client's credentials exchanged, through the tenant's token
/// endpoint, for a session.
async fn sign_in(State(console): State<Console>, request: Request) -> Response {
    if let Err(err) = same_origin(request.headers()) {
        return err.into_response();
    }
    let (parts, body) = request.into_parts();
    let Some(state) = parts.extensions.get::<AppState>().cloned() else {
        return ApiError::internal().into_response();
    };
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        return ApiError::unsupported_media_type("").into_response();
    }
    let Ok(bytes) = axum::body::to_bytes(body, 16 * 1024).await else {
        return ApiError::body_too_large(16 * 1024).into_response();
    };
    let credentials: SignIn = match serde_json::from_slice(&bytes) {
        Ok(c) => c,
        Err(err) => return ApiError::malformed_body(err).into_response(),
    };
    let authority = &state.inner.authority;
    let token_body = json!({
        "grant_type": "client_credentials",
        "client_id": credentials.client_id,
        "client_secret": credentials.client_secret,
        "audience": authority.management_audience(),
    });
    let mut inner = Request::builder()
        .method(Method::POST)
        .uri("/oauth/token")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(token_body.to_string()))
        .unwrap_or_default();
    copy_context(&parts, &mut inner);
    let answer = match console.api.clone().oneshot(inner).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    if answer.status() != StatusCode::OK {
        // The token endpoint's own error (401 access_denied, 429, ...), passed on as it is.
        return answer;
    }
    let Ok(bytes) = axum::body::to_bytes(answer.into_body(), 1024 * 1024).await else {
        return ApiError::internal().into_response();
    };
    let Ok(token) = serde_json::from_slice::<TokenAnswer>(&bytes) else {
        return ApiError::internal().into_response();
    };
    let lifetime = std::time::Duration::from_secs(token.expires_in).min(MAX_SESSION);
    let session = Session::new(
        owner_of(&state),
        credentials.client_id,
        token
            .scope
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        token.access_token,
        lifetime,
    );
    let info = session.info();
    let id = console.sessions.insert(session);
    let secure = reached_over_https(&parts, &state.inner.config.console);
    let mut response = json_response(StatusCode::CREATED, &info);
    if let Ok(cookie) = HeaderValue::from_str(&cookie_value(&id, lifetime.as_secs(), secure)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: u64,
    #[serde(default)]
    scope: String,
}

fn cookie_value(id: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// Whether the browser reached the console over HTTPS: TLS to this process, a `https://`
/// public URL, or `X-Forwarded-Proto: https` written by a trusted proxy (the last value of the
/// header, the one the nearest proxy wrote; ignored from any other peer).
fn reached_over_https(parts: &http::request::Parts, settings: &ConsoleSettings) -> bool {
    if parts.extensions.get::<TlsTransport>().is_some() || settings.public_https() {
        return true;
    }
    let trusted = &settings.trusted_proxies;
    let from_trusted = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .is_some_and(|peer| !trusted.is_empty() && trusted.contains(peer.0.ip()));
    from_trusted
        && parts
            .headers
            .get_all("x-forwarded-proto")
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// The served tenant instance of the request's state, as sessions are bound to it.
fn owner_of(state: &AppState) -> Owner {
    Owner::new(state.inner.tenant.id.clone(), &state.inner)
}

/// `GET /console/session`: who is signed in (client id, scopes, CSRF token, expiry), or 401.
async fn session_info(State(console): State<Console>, request: Request) -> Response {
    match session_of(&console, &request) {
        Ok(session) => json_response(StatusCode::OK, &session.info()),
        Err(err) => session_error(err),
    }
}

/// `DELETE /console/session`: ends the session (CSRF token required) and clears the cookie.
async fn sign_out(State(console): State<Console>, request: Request) -> Response {
    let session = match session_of(&console, &request).and_then(|s| {
        s.check_csrf(request.headers())?;
        Ok(s)
    }) {
        Ok(session) => session,
        Err(err) => return session_error(err),
    };
    console.sessions.remove(session.id());
    let (parts, _) = request.into_parts();
    let secure = parts
        .extensions
        .get::<AppState>()
        .is_some_and(|state| reached_over_https(&parts, &state.inner.config.console));
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(cookie) = HeaderValue::from_str(&cookie_value("", 0, secure)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// `/console/api/<path>`: the API call, with the session's token.
async fn proxy(
    State(console): State<Console>,
    Path(path): Path<String>,
    request: Request,
) -> Response {
    let session = match session_of(&console, &request).and_then(|s| {
        s.check_csrf(request.headers())?;
        Ok(s)
    }) {
        Ok(session) => session,
        Err(err) => return session_error(err),
    };
    if !(path.starts_with("api/v2/") || path.starts_with("_netacl/v1/")) || path.contains("..") {
        return not_found_response();
    }
    let (parts, body) = request.into_parts();
    let uri = match parts.uri.query() {
        Some(query) => format!("/{path}?{query}"),
        None => format!("/{path}"),
    };
    let mut inner = Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(body)
        .unwrap_or_default();
    for name in [header::CONTENT_TYPE, header::ACCEPT, header::USER_AGENT] {
        if let Some(value) = parts.headers.get(&name) {
            inner.headers_mut().insert(name, value.clone());
        }
    }
    if let Ok(bearer) = HeaderValue::from_str(&format!("Bearer {}", session.token())) {
        inner.headers_mut().insert(header::AUTHORIZATION, bearer);
    }
    copy_context(&parts, &mut inner);
    match console.api.clone().oneshot(inner).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    }
}

/// What the API router needs from the outer request: the tenant, the request's context (its
/// id, which the answer carries, and the client the token guard fills in: a write's history
/// entry records both), the peer address, TLS.
fn copy_context(parts: &http::request::Parts, inner: &mut Request) {
    if let Some(state) = parts.extensions.get::<AppState>() {
        inner.extensions_mut().insert(state.clone());
    }
    if let Some(context) = parts.extensions.get::<crate::RequestContext>() {
        inner.extensions_mut().insert(context.clone());
    }
    if let Some(peer) = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
    {
        inner.extensions_mut().insert(*peer);
    }
    if let Some(tls) = parts.extensions.get::<TlsTransport>() {
        inner.extensions_mut().insert(*tls);
    }
    if let Some(host) = parts.headers.get(header::HOST) {
        inner.headers_mut().insert(header::HOST, host.clone());
    }
}

/// The request's session, checked against the tenant the host selected.
fn session_of(console: &Console, request: &Request) -> Result<Arc<Session>, SessionError> {
    same_origin(request.headers()).map_err(|_| SessionError::CrossSite)?;
    let id = cookie(request.headers()).ok_or(SessionError::Missing)?;
    let state = request
        .extensions()
        .get::<AppState>()
        .ok_or(SessionError::Missing)?;
    console.sessions.get(id, &owner_of(state))
}

/// The session id in the request's `Cookie` header(s).
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

/// A browser's request from another site (`Sec-Fetch-Site` other than `same-origin` or
/// `none`) is refused.
fn same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        None | Some(b"same-origin") | Some(b"none") => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            Some("cross_site"),
            "Cross-site requests to the console are refused.",
        )),
    }
}

fn session_error(err: SessionError) -> Response {
    let (status, code) = match err {
        SessionError::Missing | SessionError::Expired => (StatusCode::UNAUTHORIZED, "no_session"),
        SessionError::Csrf => (StatusCode::FORBIDDEN, "csrf"),
        SessionError::CrossSite => (StatusCode::FORBIDDEN, "cross_site"),
    };
    ApiError::new(status, Some(code), err.to_string()).into_response()
}

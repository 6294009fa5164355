//! The auth building blocks through a real axum `Router`, mounted the way the server
//! mounts them: `token_router` at the root, and a guard in front of `/api/v2` that verifies
//! the bearer token, rate-limits per client and checks the operation's scope.

use crate::support::key_pem;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use netacl_server::auth::{
    hash_client_secret, AuthError, AuthorityConfig, ClientRecord, Principal, SigningKey,
    TenantAuthority, MANAGEMENT_SCOPES,
};
use netacl_server::rate_limit::{ManualClock, RateLimitConfig, RateLimiter};
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DOMAIN: &str = "localhost:8080";
const ISSUER: &str = "https://localhost:8080/";
const AUDIENCE: &str = "https://localhost:8080/api/v2/";
const CLIENT_ID: &str = "TestClient0123456789abcdefABCDEF";
const CLIENT_SECRET: &str = "correct-horse-battery-staple-secret";

// ---------------------------------------------------------------------------------------
// Fixtures: one key pair per binary (2048-bit generation is slow), cheap per-test authority.

fn other_rsa_key() -> &'static SigningKey {
    static KEY: OnceLock<SigningKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::generate().expect("keygen"))
}

fn our_rsa_key() -> SigningKey {
    SigningKey::from_pem(key_pem()).expect("parse our key")
}

/// Our public key as SPKI PEM (`-----BEGIN PUBLIC KEY-----`), what an attacker can derive
/// from the JWKS, for the HMAC key-confusion cases.
fn our_public_key_pem() -> String {
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::KeyPair as _;
    use rustls_pki_types::pem::PemObject;
    let der = rustls_pki_types::PrivatePkcs8KeyDer::from_pem_slice(key_pem().as_bytes())
        .expect("pkcs8 pem");
    let pair = aws_lc_rs::rsa::KeyPair::from_pkcs8(der.secret_pkcs8_der()).expect("key");
    let spki = pair.public_key().as_der().expect("spki");
    let body = STANDARD.encode(spki.as_ref());
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|line| std::str::from_utf8(line).expect("ascii"))
        .collect();
    format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        lines.join("\n")
    )
}

fn authority() -> Arc<TenantAuthority> {
    let key = SigningKey::from_pem(key_pem()).expect("load key");
    let authority = TenantAuthority::new(AuthorityConfig::new(DOMAIN), key, []).expect("authority");
    let client = authority.management_client(
        CLIENT_ID,
        hash_client_secret(CLIENT_SECRET),
        ["read:network_acls", "create:network_acls"],
    );
    authority.upsert_client(client).expect("client");
    Arc::new(authority)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

// ---------------------------------------------------------------------------------------
// The app: what the server does in front of /api/v2, reduced to one resource.

#[derive(Clone)]
struct AppState {
    authority: Arc<TenantAuthority>,
    limiter: Arc<RateLimiter>,
}

fn error_response(status: StatusCode, message: &str, code: Option<&str>) -> Response {
    let mut body = json!({
        "statusCode": status.as_u16(),
        "error": status.canonical_reason().unwrap_or(""),
        "message": message,
    });
    if let Some(code) = code {
        body["errorCode"] = json!(code);
    }
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

fn auth_error_response(error: &AuthError) -> Response {
    let mut response = error_response(error.status(), &error.message(), error.error_code());
    if error.status() == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, error.www_authenticate());
    }
    response
}

async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let principal = match state.authority.verify_headers(request.headers()) {
        Ok(principal) => principal,
        // The server keys unauthenticated requests by peer address; one bucket here.
        Err(error) => {
            let decision = state.limiter.check("peer:127.0.0.1");
            let mut response = auth_error_response(&error);
            decision.apply_headers(response.headers_mut());
            return response;
        }
    };
    let decision = state.limiter.check(principal.client_id());
    let mut response = if decision.allowed {
        request.extensions_mut().insert(principal);
        next.run(request).await
    } else {
        error_response(
            StatusCode::TOO_MANY_REQUESTS,
            "Global limit has been reached",
            Some("too_many_requests"),
        )
    };
    decision.apply_headers(response.headers_mut());
    response
}

async fn list_acls(Extension(principal): Extension<Principal>) -> Response {
    match principal.require_any(&["read:network_acls"]) {
        Ok(()) => axum::Json(json!([])).into_response(),
        Err(error) => auth_error_response(&error),
    }
}

async fn create_acl(Extension(principal): Extension<Principal>) -> Response {
    match principal.require_any(&["create:network_acls"]) {
        Ok(()) => (StatusCode::CREATED, axum::Json(json!({"id": "acl_1"}))).into_response(),
        Err(error) => auth_error_response(&error),
    }
}

fn app_with(authority: Arc<TenantAuthority>, limiter: RateLimiter) -> Router {
    let state = AppState {
        authority: authority.clone(),
        limiter: Arc::new(limiter),
    };
    let api = Router::new()
        .route("/network-acls", get(list_acls).post(create_acl))
        .layer(middleware::from_fn_with_state(state.clone(), guard));
    Router::new()
        .nest("/api/v2", api)
        .merge(netacl_server::auth::token_router(authority))
}

fn app(authority: Arc<TenantAuthority>) -> Router {
    app_with(
        authority,
        RateLimiter::new(RateLimitConfig::default()).expect("limiter"),
    )
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

/// The answer of `app`; a body that is not JSON is kept as text.
async fn send(app: &Router, request: Request<Body>) -> Answer {
    let answer = crate::support::oneshot(app, request).await;
    let body = match serde_json::from_slice::<Value>(&answer.raw) {
        Err(_) if !answer.raw.is_empty() => {
            Value::String(String::from_utf8_lossy(&answer.raw).into_owned())
        }
        _ => answer.body,
    };
    Answer {
        status: answer.status,
        headers: answer.headers,
        body,
    }
}

fn api_get(authorization: Option<&str>) -> Request<Body> {
    let mut builder = Request::builder()
        .method(Method::GET)
        .uri("/api/v2/network-acls");
    if let Some(value) = authorization {
        builder = builder.header(header::AUTHORIZATION, value);
    }
    builder.body(Body::empty()).expect("request")
}

fn api_post(authorization: &str) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri("/api/v2/network-acls")
        .header(header::AUTHORIZATION, authorization)
        .body(Body::empty())
        .expect("request")
}

fn token_request(content_type: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut builder = Request::builder().method(Method::POST).uri("/oauth/token");
    if let Some(content_type) = content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    builder.body(body.into()).expect("request")
}

// ---------------------------------------------------------------------------------------
// Token crafting.

fn valid_claims() -> Value {
    let now = now();
    json!({
        "iss": ISSUER,
        "sub": format!("{CLIENT_ID}@clients"),
        "aud": AUDIENCE,
        "azp": CLIENT_ID,
        "iat": now,
        "exp": now + 3600,
        "scope": "read:network_acls create:network_acls",
        "gty": "client-credentials",
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    if let Some(map) = claims.as_object_mut() {
        map.remove(key);
    }
    claims
}

fn rs256_header(kid: Option<&str>) -> Value {
    let mut header = json!({"typ": "JWT", "alg": "RS256"});
    if let Some(kid) = kid {
        header["kid"] = json!(kid);
    }
    header
}

fn sign_with(key: &SigningKey, header: &Value, claims: &Value) -> String {
    sign_text(key, &header.to_string(), &claims.to_string())
}

/// A token whose header and claims are exactly `header` and `claims` (any JSON text, even
/// text `serde_json::Value` cannot hold, such as `1e400`), signed RS256 by `key`.
fn sign_text(key: &SigningKey, header: &str, claims: &str) -> String {
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let signature = key.sign_rs256(message.as_bytes()).expect("sign");
    format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature))
}

fn our_kid() -> String {
    SigningKey::from_pem(key_pem())
        .expect("load")
        .kid()
        .to_owned()
}

fn sign(claims: &Value) -> String {
    sign_with(&our_rsa_key(), &rs256_header(Some(&our_kid())), claims)
}

fn raw_token(header: &Value, claims: &Value, signature: &str) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        signature
    )
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

// ---------------------------------------------------------------------------------------
// The token table.

#[tokio::test]
async fn bearer_token_table() {
    let app = app(authority());
    let now = now();
    let kid = our_kid();
    let public_pem = our_public_key_pem();
    let hs256_with_public_key = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.clone());
        jsonwebtoken::encode(
            &header,
            &valid_claims(),
            &EncodingKey::from_secret(public_pem.as_bytes()),
        )
        .expect("hs256")
    };
    let valid = sign(&valid_claims());
    let valid_signature = valid.rsplit('.').next().unwrap_or_default().to_owned();

    let cases: Vec<(&str, Option<String>, StatusCode)> = vec![
        ("valid token", Some(bearer(&valid)), StatusCode::OK),
        (
            "scheme is case-insensitive",
            Some(format!("bEaReR {valid}")),
            StatusCode::OK,
        ),
        (
            "no kid in the header",
            Some(bearer(&sign_with(
                &our_rsa_key(),
                &rs256_header(None),
                &valid_claims(),
            ))),
            StatusCode::UNAUTHORIZED,
        ),
        ("no Authorization header", None, StatusCode::UNAUTHORIZED),
        (
            "Basic scheme",
            Some(format!("Basic {}", STANDARD.encode("user:pass"))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "Bearer without token",
            Some("Bearer ".into()),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "bare token without scheme",
            Some(valid.clone()),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "malformed token",
            Some(bearer("not-a-jwt")),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "four segments",
            Some(bearer(&format!("{valid}.AAAA"))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "garbage header segment",
            Some(bearer(&format!(
                "eyJhbGciOi.{}",
                valid.split_once('.').map_or("", |p| p.1)
            ))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "alg none, empty signature",
            Some(bearer(&raw_token(
                &json!({"alg": "none", "typ": "JWT"}),
                &valid_claims(),
                "",
            ))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "alg none with a signature",
            Some(bearer(&raw_token(
                &json!({"alg": "none", "typ": "JWT"}),
                &valid_claims(),
                &valid_signature,
            ))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "HS256 signed with the public key PEM as the secret",
            Some(bearer(&hs256_with_public_key)),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "signed by another RSA key with our kid",
            Some(bearer(&sign_with(
                other_rsa_key(),
                &rs256_header(Some(&kid)),
                &valid_claims(),
            ))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "our key, unknown kid",
            Some(bearer(&sign_with(
                &our_rsa_key(),
                &rs256_header(Some("other")),
                &valid_claims(),
            ))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "crit header",
            Some(bearer(&raw_token(
                &json!({"alg": "RS256", "kid": kid, "crit": ["exp"]}),
                &valid_claims(),
                &valid_signature,
            ))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "claims altered after signing",
            Some(bearer(&{
                let mut parts: Vec<String> = valid.split('.').map(str::to_owned).collect();
                parts[1] = URL_SAFE_NO_PAD.encode(
                    with(
                        valid_claims(),
                        "scope",
                        json!("create:network_acls read:network_acls update:network_acls"),
                    )
                    .to_string(),
                );
                parts.join(".")
            })),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "expired",
            Some(bearer(&sign(&with(
                valid_claims(),
                "exp",
                json!(now - 3600),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "expired within the leeway",
            Some(bearer(&sign(&with(valid_claims(), "exp", json!(now - 5))))),
            StatusCode::OK,
        ),
        (
            "not yet valid (nbf beyond the leeway)",
            Some(bearer(&sign(&with(
                valid_claims(),
                "nbf",
                json!(now + 600),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "nbf within the leeway",
            Some(bearer(&sign(&with(valid_claims(), "nbf", json!(now + 5))))),
            StatusCode::OK,
        ),
        (
            "issued in the future",
            Some(bearer(&sign(&with(
                valid_claims(),
                "iat",
                json!(now + 600),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "wrong issuer",
            Some(bearer(&sign(&with(
                valid_claims(),
                "iss",
                json!("https://evil.example/"),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "issuer without the trailing slash",
            Some(bearer(&sign(&with(
                valid_claims(),
                "iss",
                json!("https://localhost:8080"),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "issuer as an array containing ours",
            Some(bearer(&sign(&with(valid_claims(), "iss", json!([ISSUER]))))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "wrong audience",
            Some(bearer(&sign(&with(
                valid_claims(),
                "aud",
                json!("https://localhost:8080/api/v1/"),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "audience array containing ours",
            Some(bearer(&sign(&with(
                valid_claims(),
                "aud",
                json!(["https://localhost:8080/userinfo", AUDIENCE]),
            )))),
            StatusCode::OK,
        ),
        (
            "audience array without ours",
            Some(bearer(&sign(&with(
                valid_claims(),
                "aud",
                json!(["https://localhost:8080/userinfo"]),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "missing exp",
            Some(bearer(&sign(&without(valid_claims(), "exp")))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "exp as a string",
            Some(bearer(&sign(&with(
                valid_claims(),
                "exp",
                json!((now + 3600).to_string()),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "missing iss",
            Some(bearer(&sign(&without(valid_claims(), "iss")))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "missing aud",
            Some(bearer(&sign(&without(valid_claims(), "aud")))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "no azp, client from sub",
            Some(bearer(&sign(&without(valid_claims(), "azp")))),
            StatusCode::OK,
        ),
        (
            "missing scope",
            Some(bearer(&sign(&without(valid_claims(), "scope")))),
            StatusCode::FORBIDDEN,
        ),
        (
            "scope lacks read:network_acls",
            Some(bearer(&sign(&with(
                valid_claims(),
                "scope",
                json!("create:network_acls"),
            )))),
            StatusCode::FORBIDDEN,
        ),
        (
            "scope only starts with the needed one",
            Some(bearer(&sign(&with(
                valid_claims(),
                "scope",
                json!("read:network_aclsX"),
            )))),
            StatusCode::FORBIDDEN,
        ),
        (
            "scope as an array",
            Some(bearer(&sign(&with(
                valid_claims(),
                "scope",
                json!(["read:network_acls"]),
            )))),
            StatusCode::UNAUTHORIZED,
        ),
    ];

    let mut failures = Vec::new();
    for (name, authorization, expected) in &cases {
        let answer = send(&app, api_get(authorization.as_deref())).await;
        if answer.status != *expected {
            failures.push(format!("{name}: got {}, want {expected}", answer.status));
            continue;
        }
        match answer.status {
            StatusCode::OK => assert_eq!(answer.body, json!([]), "{name}"),
            StatusCode::UNAUTHORIZED => {
                let www = answer
                    .headers
                    .get(header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                assert!(
                    www.starts_with("Bearer"),
                    "{name}: WWW-Authenticate {www:?}"
                );
                assert_eq!(answer.body["statusCode"], 401, "{name}");
                assert_eq!(answer.body["error"], "Unauthorized", "{name}");
                let message = answer.body["message"].as_str().unwrap_or_default();
                assert!(
                    [
                        "Missing authentication",
                        "Bad HTTP authentication header format",
                        "Invalid token",
                        "Expired token"
                    ]
                    .contains(&message),
                    "{name}: message {message:?}"
                );
            }
            StatusCode::FORBIDDEN => {
                assert_eq!(answer.body["errorCode"], "insufficient_scope", "{name}");
                assert_eq!(
                    answer.body["message"],
                    "Insufficient scope, expected any of: read:network_acls",
                    "{name}"
                );
                assert!(
                    !answer.headers.contains_key(header::WWW_AUTHENTICATE),
                    "{name}"
                );
            }
            other => panic!("{name}: unexpected {other}"),
        }
    }
    assert!(
        failures.is_empty(),
        "failed cases:\n{}",
        failures.join("\n")
    );
}

#[tokio::test]
async fn messages_say_what_kind_of_failure_without_detail() {
    let app = app(authority());
    let missing = send(&app, api_get(None)).await;
    assert_eq!(missing.body["message"], "Missing authentication");
    assert_eq!(missing.headers[header::WWW_AUTHENTICATE], "Bearer");
    let expired = send(
        &app,
        api_get(Some(&bearer(&sign(&with(
            valid_claims(),
            "exp",
            json!(now() - 3600),
        ))))),
    )
    .await;
    assert_eq!(expired.body["message"], "Expired token");
    let forged = send(
        &app,
        api_get(Some(&bearer(&sign_with(
            other_rsa_key(),
            &rs256_header(Some(&our_kid())),
            &valid_claims(),
        )))),
    )
    .await;
    assert_eq!(forged.body["message"], "Invalid token");
    assert!(forged.headers[header::WWW_AUTHENTICATE]
        .to_str()
        .is_ok_and(|v| v.contains(r#"error="invalid_token""#)));
}

#[tokio::test]
async fn several_authorization_headers_are_refused() {
    let app = app(authority());
    let token = bearer(&sign(&valid_claims()));
    let request = Request::builder()
        .uri("/api/v2/network-acls")
        .header(header::AUTHORIZATION, &token)
        .header(header::AUTHORIZATION, &token)
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, request).await.status, StatusCode::UNAUTHORIZED);
}

// ---------------------------------------------------------------------------------------
// The token endpoint.

fn json_token_body(secret: &str, audience: &str) -> String {
    json!({
        "grant_type": "client_credentials",
        "client_id": CLIENT_ID,
        "client_secret": secret,
        "audience": audience,
    })
    .to_string()
}

fn decode_segment(token: &str, index: usize) -> Value {
    let segment = token.split('.').nth(index).expect("segment");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(segment).expect("base64url")).expect("json")
}

fn assert_oauth_error(answer: &Answer, status: StatusCode, code: &str) {
    assert_eq!(answer.status, status, "body {}", answer.body);
    assert_eq!(answer.body["error"], code, "body {}", answer.body);
    assert!(answer.body["error_description"].is_string());
    assert_eq!(answer.headers[header::CACHE_CONTROL], "no-store");
}

#[tokio::test]
async fn json_body_issues_a_token_the_api_accepts() {
    let authority = authority();
    let app = app(authority.clone());
    let answer = send(
        &app,
        token_request(
            Some("application/json"),
            json_token_body(CLIENT_SECRET, AUDIENCE),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.headers[header::CACHE_CONTROL], "no-store");
    assert_eq!(answer.body["token_type"], "Bearer");
    assert_eq!(answer.body["expires_in"], 86_400);
    assert_eq!(
        answer.body["scope"],
        "read:network_acls create:network_acls"
    );
    let token = answer.body["access_token"]
        .as_str()
        .expect("token")
        .to_owned();

    let header = decode_segment(&token, 0);
    assert_eq!(header["alg"], "RS256");
    assert_eq!(header["kid"], authority.signing_key().kid());
    let claims = decode_segment(&token, 1);
    assert_eq!(claims["iss"], ISSUER);
    assert_eq!(claims["sub"], format!("{CLIENT_ID}@clients"));
    assert_eq!(claims["aud"], AUDIENCE);
    assert_eq!(claims["azp"], CLIENT_ID);
    assert_eq!(claims["gty"], "client-credentials");
    assert_eq!(claims["scope"], "read:network_acls create:network_acls");
    let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
    assert_eq!(exp.zip(iat).map(|(e, i)| e - i), Some(86_400));

    assert_eq!(
        send(&app, api_get(Some(&bearer(&token)))).await.status,
        StatusCode::OK
    );
    assert_eq!(
        send(&app, api_post(&bearer(&token))).await.status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn form_body_null_organization_and_trailing_slash_path() {
    let app = app(authority());
    let form = serde_urlencoded::to_string([
        ("grant_type", "client_credentials"),
        ("client_id", CLIENT_ID),
        ("client_secret", CLIENT_SECRET),
        ("audience", AUDIENCE),
    ])
    .expect("form");
    let answer = send(
        &app,
        token_request(
            Some("application/x-www-form-urlencoded; charset=UTF-8"),
            form.clone(),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert!(answer.body["access_token"].is_string());

    let with_null_org = json!({
        "grant_type": "client_credentials",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "audience": AUDIENCE,
        "organization": null,
    });
    let answer = send(
        &app,
        token_request(Some("application/json"), with_null_org.to_string()),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);

    let mut with_org = with_null_org.clone();
    with_org["organization"] = json!("org_abcdefghijklmnop");
    let answer = send(
        &app,
        token_request(Some("application/json"), with_org.to_string()),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);

    let mut request = token_request(Some("application/x-www-form-urlencoded"), form);
    *request.uri_mut() = "/oauth/token/".parse().expect("uri");
    assert_eq!(send(&app, request).await.status, StatusCode::OK);
}

fn basic(id: &str, secret: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{id}:{secret}")))
}

#[tokio::test]
async fn basic_client_authentication() {
    let app = app(authority());
    let form =
        "grant_type=client_credentials&audience=https%3A%2F%2Flocalhost%3A8080%2Fapi%2Fv2%2F";
    let mut request = token_request(Some("application/x-www-form-urlencoded"), form);
    request.headers_mut().insert(
        header::AUTHORIZATION,
        basic(CLIENT_ID, CLIENT_SECRET).parse().expect("value"),
    );
    let answer = send(&app, request).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let token = answer.body["access_token"].as_str().expect("token");
    assert_eq!(decode_segment(token, 1)["azp"], CLIENT_ID);

    // Wrong secret over Basic: 401 with a Basic challenge.
    let mut request = token_request(Some("application/x-www-form-urlencoded"), form);
    request.headers_mut().insert(
        header::AUTHORIZATION,
        basic(CLIENT_ID, "wrong").parse().expect("value"),
    );
    let answer = send(&app, request).await;
    assert_oauth_error(&answer, StatusCode::UNAUTHORIZED, "access_denied");
    assert!(answer.headers[header::WWW_AUTHENTICATE]
        .to_str()
        .is_ok_and(|v| v.starts_with("Basic realm=")));

    // Basic and a body secret at once: 400.
    let body = json_token_body(CLIENT_SECRET, AUDIENCE);
    let mut request = token_request(Some("application/json"), body);
    request.headers_mut().insert(
        header::AUTHORIZATION,
        basic(CLIENT_ID, CLIENT_SECRET).parse().expect("value"),
    );
    assert_oauth_error(
        &send(&app, request).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );

    // Undecodable Basic credentials: 401.
    let mut request = token_request(Some("application/x-www-form-urlencoded"), form);
    request
        .headers_mut()
        .insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!!"));
    assert_oauth_error(
        &send(&app, request).await,
        StatusCode::UNAUTHORIZED,
        "access_denied",
    );
}

#[tokio::test]
async fn refused_token_requests() {
    let authority = authority();
    // A client registered for no audience at all.
    authority
        .upsert_client(ClientRecord {
            client_id: "NoAudienceClient".into(),
            secret_hash: hash_client_secret("s3cret-value"),
            scopes: vec!["read:network_acls".into()],
            allowed_audiences: vec![],
        })
        .expect("client");
    let app = app(authority);
    let json_ct = Some("application/json");

    let wrong_secret = send(
        &app,
        token_request(json_ct, json_token_body("wrong", AUDIENCE)),
    )
    .await;
    assert_oauth_error(&wrong_secret, StatusCode::UNAUTHORIZED, "access_denied");

    let unknown = json!({
        "grant_type": "client_credentials",
        "client_id": "nobody",
        "client_secret": CLIENT_SECRET,
        "audience": AUDIENCE,
    });
    let unknown = send(&app, token_request(json_ct, unknown.to_string())).await;
    assert_oauth_error(&unknown, StatusCode::UNAUTHORIZED, "access_denied");
    // Unknown client and wrong secret are indistinguishable.
    assert_eq!(unknown.body, wrong_secret.body);

    for audience in [
        "https://localhost:8080/api/v2",
        "https://evil.example/api/v2/",
        "https://localhost:8080/userinfo",
    ] {
        let answer = send(
            &app,
            token_request(json_ct, json_token_body(CLIENT_SECRET, audience)),
        )
        .await;
        assert_oauth_error(&answer, StatusCode::FORBIDDEN, "unauthorized_client");
    }
    let no_audience_client = json!({
        "grant_type": "client_credentials",
        "client_id": "NoAudienceClient",
        "client_secret": "s3cret-value",
        "audience": AUDIENCE,
    });
    let answer = send(&app, token_request(json_ct, no_audience_client.to_string())).await;
    assert_oauth_error(&answer, StatusCode::FORBIDDEN, "unauthorized_client");

    let mut password_grant: Value =
        serde_json::from_str(&json_token_body(CLIENT_SECRET, AUDIENCE)).expect("json");
    password_grant["grant_type"] = json!("password");
    let answer = send(&app, token_request(json_ct, password_grant.to_string())).await;
    assert_oauth_error(&answer, StatusCode::BAD_REQUEST, "unsupported_grant_type");

    let malformed: Vec<(Option<&str>, String)> = vec![
        (json_ct, "{not json".into()),
        (json_ct, "[]".into()),
        (json_ct, json!({"grant_type": "client_credentials", "client_id": 42}).to_string()),
        (json_ct, json!({"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_id": CLIENT_ID}).to_string()),
        (json_ct, r#"{"grant_type":"client_credentials","client_id":"a","client_id":"b","client_secret":"x","audience":"y"}"#.into()),
        (json_ct, json!({"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "audience": AUDIENCE}).to_string()),
        (json_ct, json!({"grant_type": "client_credentials", "client_id": CLIENT_ID, "audience": AUDIENCE}).to_string()),
        (json_ct, json!({"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}).to_string()),
        (json_ct, json!({"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "audience": AUDIENCE, "organization": 7}).to_string()),
        (Some("application/x-www-form-urlencoded"), "grant_type=client_credentials&grant_type=client_credentials".into()),
        (Some("text/plain"), json_token_body(CLIENT_SECRET, AUDIENCE)),
        (None, json_token_body(CLIENT_SECRET, AUDIENCE)),
    ];
    for (content_type, body) in malformed {
        let answer = send(&app, token_request(content_type, body.clone())).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{content_type:?} {body}: {}",
            answer.body
        );
        assert_oauth_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }

    let huge = "x".repeat(netacl_server::auth::MAX_TOKEN_BODY_BYTES + 1);
    let answer = send(&app, token_request(json_ct, huge)).await;
    assert_oauth_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "invalid_request");
}

#[tokio::test]
async fn requested_scopes_must_be_granted() {
    let app = app(authority());
    let mut body: Value =
        serde_json::from_str(&json_token_body(CLIENT_SECRET, AUDIENCE)).expect("json");
    body["scope"] = json!("read:network_acls");
    let answer = send(
        &app,
        token_request(Some("application/json"), body.to_string()),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["scope"], "read:network_acls");
    let token = answer.body["access_token"]
        .as_str()
        .expect("token")
        .to_owned();
    // The narrowed token cannot create.
    let create = send(&app, api_post(&bearer(&token))).await;
    assert_eq!(create.status, StatusCode::FORBIDDEN);
    assert_eq!(
        create.body["message"],
        "Insufficient scope, expected any of: create:network_acls"
    );

    body["scope"] = json!("read:network_acls delete:network_acls");
    let answer = send(
        &app,
        token_request(Some("application/json"), body.to_string()),
    )
    .await;
    assert_oauth_error(&answer, StatusCode::FORBIDDEN, "access_denied");
}

#[tokio::test]
async fn clients_added_at_run_time_and_the_bootstrap_scopes() {
    let authority = authority();
    let app = app(authority.clone());
    let id = netacl_server::auth::generate_client_id();
    let secret = netacl_server::auth::generate_client_secret();
    let body = json!({"grant_type": "client_credentials", "client_id": id, "client_secret": secret, "audience": AUDIENCE});
    let before = send(
        &app,
        token_request(Some("application/json"), body.to_string()),
    )
    .await;
    assert_oauth_error(&before, StatusCode::UNAUTHORIZED, "access_denied");

    let record = authority.management_client(
        &id,
        hash_client_secret(&secret),
        MANAGEMENT_SCOPES.iter().copied(),
    );
    assert!(authority.upsert_client(record).expect("client").is_none());
    let after = send(
        &app,
        token_request(Some("application/json"), body.to_string()),
    )
    .await;
    assert_eq!(after.status, StatusCode::OK, "{}", after.body);
    let scope = after.body["scope"].as_str().expect("scope");
    assert_eq!(scope.split(' ').count(), MANAGEMENT_SCOPES.len());
    let token = after.body["access_token"].as_str().expect("token");
    let principal = authority
        .verify_bearer(Some(&bearer(token)))
        .expect("valid");
    assert_eq!(principal.client_id(), id);
    assert!(principal.has_scope("update:branding"));

    assert!(authority.remove_client(&id).is_some());
    let removed = send(
        &app,
        token_request(Some("application/json"), body.to_string()),
    )
    .await;
    assert_oauth_error(&removed, StatusCode::UNAUTHORIZED, "access_denied");
}

#[tokio::test]
async fn jwks_verifies_issued_tokens() {
    let authority = authority();
    let app = app(authority.clone());
    let request = Request::builder()
        .uri("/.well-known/jwks.json")
        .body(Body::empty())
        .expect("request");
    let answer = send(&app, request).await;
    assert_eq!(answer.status, StatusCode::OK);
    let set: jsonwebtoken::jwk::JwkSet = serde_json::from_value(answer.body).expect("JWKS");
    let jwk = set.find(authority.signing_key().kid()).expect("our kid");
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).expect("RSA JWK");

    let token = authority
        .issue_client_credentials(&netacl_server::auth::TokenRequest::client_credentials(
            CLIENT_ID,
            CLIENT_SECRET,
            AUDIENCE,
        ))
        .expect("issued");
    let mut validation = jsonwebtoken::Validation::new(Algorithm::RS256);
    validation.set_audience(&[AUDIENCE]);
    validation.set_issuer(&[ISSUER]);
    let data =
        jsonwebtoken::decode::<Value>(&token.access_token, &key, &validation).expect("verifies");
    assert_eq!(data.claims["azp"], CLIENT_ID);
}

// ---------------------------------------------------------------------------------------
// Rate limits through the router.

#[tokio::test]
async fn rate_limit_headers_and_refusal_through_the_router() {
    let authority = authority();
    let clock = ManualClock::new(Duration::from_secs(1_800_000_000));
    let limiter = RateLimiter::with_clock(
        RateLimitConfig {
            burst: 3,
            per_second: 1.0,
        },
        1_024,
        Arc::new(clock.clone()),
    )
    .expect("limiter");
    let app = app_with(authority, limiter);
    let token = bearer(&sign(&valid_claims()));

    for expected_remaining in [2u32, 1, 0] {
        let answer = send(&app, api_get(Some(&token))).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.headers["x-ratelimit-limit"], "3");
        assert_eq!(
            answer.headers["x-ratelimit-remaining"],
            expected_remaining.to_string().as_str()
        );
        let reset: u64 = answer.headers["x-ratelimit-reset"]
            .to_str()
            .expect("ascii")
            .parse()
            .expect("integer");
        assert_eq!(reset, 1_800_000_000 + u64::from(3 - expected_remaining));
        assert!(!answer.headers.contains_key(header::RETRY_AFTER));
    }
    let refused = send(&app, api_get(Some(&token))).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.body["statusCode"], 429);
    assert_eq!(refused.body["errorCode"], "too_many_requests");
    assert_eq!(refused.headers["x-ratelimit-remaining"], "0");
    let retry: u64 = refused.headers[header::RETRY_AFTER]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("integer");
    assert!(retry >= 1);

    // Another client has its own bucket; the limit follows the token, not a header.
    let other = bearer(&sign(&with(valid_claims(), "azp", json!("AnotherClient"))));
    let answer = send(&app, api_get(Some(&other))).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["x-ratelimit-remaining"], "2");

    clock.advance(Duration::from_secs(retry));
    let answer = send(&app, api_get(Some(&token))).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["x-ratelimit-remaining"], "0");
}

#[test]
fn exactly_the_burst_passes_then_refill() {
    let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
    let limiter = RateLimiter::with_clock(
        RateLimitConfig {
            burst: 100,
            per_second: 50.0,
        },
        1_024,
        Arc::new(clock.clone()),
    )
    .expect("limiter");
    for i in 0..100u32 {
        let decision = limiter.check("client");
        assert!(decision.allowed, "request {i}");
        assert_eq!(decision.limit, 100);
        assert_eq!(decision.remaining, 99 - i);
        let mut headers = HeaderMap::new();
        decision.apply_headers(&mut headers);
        assert_eq!(
            headers["x-ratelimit-remaining"],
            (99 - i).to_string().as_str()
        );
        assert_eq!(headers["x-ratelimit-limit"], "100");
        assert_eq!(
            headers["x-ratelimit-reset"],
            decision.reset_unix_secs.to_string().as_str()
        );
        assert!(!headers.contains_key(header::RETRY_AFTER));
    }
    let refused = limiter.check("client");
    assert!(!refused.allowed);
    assert_eq!(refused.remaining, 0);
    assert!(refused.retry_after_secs >= 1);
    // Empty bucket refills in 100 / 50 = 2 seconds.
    assert_eq!(refused.reset_unix_secs, 1_700_000_002);
    let mut headers = HeaderMap::new();
    refused.apply_headers(&mut headers);
    assert_eq!(
        headers[header::RETRY_AFTER],
        refused.retry_after_secs.to_string().as_str()
    );

    // 100 ms later, five requests' worth has refilled.
    clock.advance(Duration::from_millis(100));
    let passed = (0..10).filter(|_| limiter.check("client").allowed).count();
    assert_eq!(passed, 5);
    // After a long pause the bucket is full again, not more.
    clock.advance(Duration::from_secs(3_600));
    let passed = (0..200).filter(|_| limiter.check("client").allowed).count();
    assert_eq!(passed, 100);
}

/// The same attacks, checked at the verifier for the exact reason, so that a token is
/// refused for the intended check and not by accident of another one.
#[test]
fn verifier_refuses_each_attack_for_its_own_reason() {
    let authority = authority();
    let now = now();
    let kid = our_kid();
    let public_pem = our_public_key_pem();
    let mut hs256 = Header::new(Algorithm::HS256);
    hs256.kid = Some(kid.clone());
    let hs256_token = jsonwebtoken::encode(
        &hs256,
        &valid_claims(),
        &EncodingKey::from_secret(public_pem.as_bytes()),
    )
    .expect("hs256");
    let valid = sign(&valid_claims());
    let signature = valid.rsplit('.').next().unwrap_or_default().to_owned();

    let cases: Vec<(&str, String, AuthError)> = vec![
        (
            "alg none",
            raw_token(&json!({"alg": "none"}), &valid_claims(), &signature),
            AuthError::UnsupportedAlgorithm,
        ),
        (
            "alg None (case games)",
            raw_token(&json!({"alg": "None"}), &valid_claims(), &signature),
            AuthError::UnsupportedAlgorithm,
        ),
        (
            "HS256 with the public key",
            hs256_token,
            AuthError::UnsupportedAlgorithm,
        ),
        (
            "RS256 by another key",
            sign_with(other_rsa_key(), &rs256_header(Some(&kid)), &valid_claims()),
            AuthError::BadSignature,
        ),
        (
            "foreign kid",
            sign_with(&our_rsa_key(), &rs256_header(Some("x")), &valid_claims()),
            AuthError::UnknownKey,
        ),
        (
            "typ not a JWT",
            raw_token(
                &json!({"alg": "RS256", "typ": "JWE"}),
                &valid_claims(),
                &signature,
            ),
            AuthError::UnsupportedAlgorithm,
        ),
        (
            "expired",
            sign(&with(valid_claims(), "exp", json!(now - 3600))),
            AuthError::Expired,
        ),
        (
            "nbf in the future",
            sign(&with(valid_claims(), "nbf", json!(now + 600))),
            AuthError::NotYetValid,
        ),
        (
            "iat in the future",
            sign(&with(valid_claims(), "iat", json!(now + 600))),
            AuthError::NotYetValid,
        ),
        (
            "wrong issuer",
            sign(&with(
                valid_claims(),
                "iss",
                json!("https://localhost:8081/"),
            )),
            AuthError::WrongIssuer,
        ),
        (
            "wrong audience",
            sign(&with(
                valid_claims(),
                "aud",
                json!("https://localhost:8080/"),
            )),
            AuthError::WrongAudience,
        ),
        (
            "missing exp",
            sign(&without(valid_claims(), "exp")),
            AuthError::MissingClaim,
        ),
        (
            "missing iss",
            sign(&without(valid_claims(), "iss")),
            AuthError::MissingClaim,
        ),
        (
            "missing aud",
            sign(&without(valid_claims(), "aud")),
            AuthError::MissingClaim,
        ),
        (
            "no azp and no sub",
            sign(&without(without(valid_claims(), "azp"), "sub")),
            AuthError::MissingClaim,
        ),
        (
            "exp as a string",
            sign(&with(
                valid_claims(),
                "exp",
                json!((now + 3600).to_string()),
            )),
            AuthError::MalformedToken,
        ),
        (
            "nbf null",
            sign(&with(valid_claims(), "nbf", Value::Null)),
            AuthError::MalformedToken,
        ),
        (
            "iat as an array",
            sign(&with(valid_claims(), "iat", json!([now]))),
            AuthError::MalformedToken,
        ),
        (
            "exp overflowing a double",
            sign_text(
                &our_rsa_key(),
                &rs256_header(Some(&kid)).to_string(),
                // A marker replaced in the text: `valid_claims` reads the clock itself, so
                // the exp it wrote need not be this test's `now + 3600`.
                &with(valid_claims(), "exp", json!("EXP"))
                    .to_string()
                    .replace(r#""exp":"EXP""#, r#""exp":1e400"#),
            ),
            AuthError::MalformedToken,
        ),
        (
            "missing iat",
            sign(&without(valid_claims(), "iat")),
            AuthError::MissingClaim,
        ),
        (
            "missing sub",
            sign(&without(valid_claims(), "sub")),
            AuthError::MissingClaim,
        ),
        (
            "no kid",
            sign_with(&our_rsa_key(), &rs256_header(None), &valid_claims()),
            AuthError::UnknownKey,
        ),
        (
            "padding in a segment",
            format!("{valid}="),
            AuthError::MalformedToken,
        ),
        (
            "oversized",
            format!("{valid}{}", "A".repeat(40_000)),
            AuthError::MalformedToken,
        ),
    ];
    for (name, token, expected) in cases {
        assert_eq!(
            authority.verify_token(&token).expect_err(name),
            expected,
            "{name}"
        );
    }
    let principal = authority.verify_token(&valid).expect("valid");
    assert_eq!(principal.client_id(), CLIENT_ID);
    assert_eq!(
        principal.scopes().collect::<Vec<_>>(),
        ["read:network_acls", "create:network_acls"]
    );
}

/// A token with every management scope on a long tenant domain is well over 8 KiB; it must
/// still be issued and accepted.
#[tokio::test]
async fn all_scopes_token_on_a_long_domain_is_accepted() {
    let domain = "a-rather-long-tenant-name-for-testing.eu.identity-provider.example.com";
    let key = SigningKey::from_pem(key_pem()).expect("load key");
    let authority =
        Arc::new(TenantAuthority::new(AuthorityConfig::new(domain), key, []).expect("authority"));
    let record = authority.management_client(
        CLIENT_ID,
        hash_client_secret(CLIENT_SECRET),
        MANAGEMENT_SCOPES.iter().copied(),
    );
    authority.upsert_client(record).expect("client");
    let audience = format!("https://{domain}/api/v2/");
    let app = app(authority);
    let answer = send(
        &app,
        token_request(
            Some("application/json"),
            json_token_body(CLIENT_SECRET, &audience),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let token = answer.body["access_token"].as_str().expect("token");
    assert!(token.len() > 8 * 1024, "token is {} bytes", token.len());
    let list = send(&app, api_get(Some(&bearer(token)))).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
}

// ---------------------------------------------------------------------------------------
// Typed claims through the admin API itself (the service's router, its token cache included):
// tokens signed with the tenant's real key, each carrying one malformed claim or header.

#[tokio::test]
async fn malformed_claims_signed_by_the_tenant_key_are_refused_by_the_admin_api() {
    let api = crate::support::api().await;
    let key = SigningKey::from_pem(key_pem()).expect("the tenant's key");
    let kid = key.kid().to_owned();
    let now = now();
    let exp = now + 3600;
    // Claims as JSON text, so that members `serde_json::Value` cannot hold (1e400) or would
    // merge (a repeated member) can be written. `{EXP}`, `{IAT}`, `{NBF}` are the time members.
    let claims = |exp: &str, iat: &str, nbf: &str| -> String {
        let mut members = vec![
            r#""iss":"https://tenant.test/""#.to_owned(),
            format!(r#""sub":"{}@clients""#, crate::support::CLIENT),
            format!(r#""aud":"{}""#, crate::support::AUDIENCE),
            format!(r#""azp":"{}""#, crate::support::CLIENT),
            r#""scope":"read:network_acls""#.to_owned(),
        ];
        for (name, value) in [("exp", exp), ("iat", iat), ("nbf", nbf)] {
            if !value.is_empty() {
                members.push(format!(r#""{name}":{value}"#));
            }
        }
        format!("{{{}}}", members.join(","))
    };
    let (exp_s, iat_s, nbf_s) = (exp.to_string(), now.to_string(), (now - 10).to_string());
    let good_claims = claims(&exp_s, &iat_s, &nbf_s);
    let header = |extra: &str| format!(r#"{{"alg":"RS256","typ":"JWT","kid":"{kid}"{extra}}}"#);
    let good_header = header("");
    let drop_member = |text: &str, name: &str| -> String {
        let value: Value = serde_json::from_str(text).expect("json");
        without(value, name).to_string()
    };

    let mut cases: Vec<(String, String, StatusCode)> = vec![
        (
            "valid".into(),
            sign_text(&key, &good_header, &good_claims),
            StatusCode::OK,
        ),
        (
            "fractional times (RFC 7519 NumericDate)".into(),
            sign_text(
                &key,
                &good_header,
                &claims(&format!("{exp}.5"), &format!("{}.25", now - 1), ""),
            ),
            StatusCode::OK,
        ),
        (
            "no nbf".into(),
            sign_text(&key, &good_header, &claims(&exp_s, &iat_s, "")),
            StatusCode::OK,
        ),
        (
            "typ at+jwt".into(),
            sign_text(
                &key,
                &format!(r#"{{"alg":"RS256","typ":"at+jwt","kid":"{kid}"}}"#),
                &good_claims,
            ),
            StatusCode::OK,
        ),
        (
            "no typ".into(),
            sign_text(
                &key,
                &format!(r#"{{"alg":"RS256","kid":"{kid}"}}"#),
                &good_claims,
            ),
            StatusCode::OK,
        ),
    ];
    // Every time claim must be a JSON number.
    for bad in [
        r#""1767225600""#,
        "null",
        "1e400",
        "-1e400",
        "[1767225600]",
        r#"{"t":1}"#,
        "true",
    ] {
        for (name, claims) in [
            ("exp", claims(bad, &iat_s, &nbf_s)),
            ("iat", claims(&exp_s, bad, &nbf_s)),
            ("nbf", claims(&exp_s, &iat_s, bad)),
        ] {
            cases.push((
                format!("{name} = {bad}"),
                sign_text(&key, &good_header, &claims),
                StatusCode::UNAUTHORIZED,
            ));
        }
    }
    // A repeated member, the second one malformed.
    cases.push((
        "exp twice".into(),
        sign_text(
            &key,
            &good_header,
            &good_claims.replace("\"iat\"", "\"exp\":\"later\",\"iat\""),
        ),
        StatusCode::UNAUTHORIZED,
    ));
    // Required claims.
    for name in ["exp", "iat", "iss", "aud", "sub"] {
        cases.push((
            format!("no {name}"),
            sign_text(&key, &good_header, &drop_member(&good_claims, name)),
            StatusCode::UNAUTHORIZED,
        ));
    }
    for (name, value) in [
        ("iss", "null"),
        ("aud", "null"),
        ("sub", "null"),
        ("sub", "7"),
    ] {
        let text = good_claims.replace(
            &format!(
                r#""{name}":{}"#,
                serde_json::to_string(
                    &serde_json::from_str::<Value>(&good_claims).expect("json")[name]
                )
                .expect("json")
            ),
            &format!(r#""{name}":{value}"#),
        );
        assert_ne!(text, good_claims, "{name}");
        cases.push((
            format!("{name} = {value}"),
            sign_text(&key, &good_header, &text),
            StatusCode::UNAUTHORIZED,
        ));
    }
    // The header: kid naming a key of the tenant, RS256 only, typ JWT or at+jwt.
    for (name, text) in [
        ("no kid", r#"{"alg":"RS256","typ":"JWT"}"#.to_owned()),
        (
            "kid null",
            r#"{"alg":"RS256","typ":"JWT","kid":null}"#.to_owned(),
        ),
        (
            "kid empty",
            r#"{"alg":"RS256","typ":"JWT","kid":""}"#.to_owned(),
        ),
        (
            "kid of another key",
            format!(
                r#"{{"alg":"RS256","typ":"JWT","kid":"{}"}}"#,
                other_rsa_key().kid()
            ),
        ),
        (
            "kid a number",
            r#"{"alg":"RS256","typ":"JWT","kid":1}"#.to_owned(),
        ),
        ("alg RS384", format!(r#"{{"alg":"RS384","kid":"{kid}"}}"#)),
        ("alg PS256", format!(r#"{{"alg":"PS256","kid":"{kid}"}}"#)),
        ("alg rs256", format!(r#"{{"alg":"rs256","kid":"{kid}"}}"#)),
        ("alg none", format!(r#"{{"alg":"none","kid":"{kid}"}}"#)),
        ("no alg", format!(r#"{{"typ":"JWT","kid":"{kid}"}}"#)),
        ("typ JWE", header("").replace("\"JWT\"", "\"JWE\"")),
        ("typ empty", header("").replace("\"JWT\"", "\"\"")),
        ("typ null", header("").replace("\"JWT\"", "null")),
        ("typ a number", header("").replace("\"JWT\"", "1")),
        ("crit", header(r#","crit":["exp"]"#)),
        ("crit null", header(r#","crit":null"#)),
    ] {
        cases.push((
            name.to_owned(),
            sign_text(&key, &text, &good_claims),
            StatusCode::UNAUTHORIZED,
        ));
    }
    // Signed by another key that names itself, and HMAC with our public key as the secret.
    let other = other_rsa_key();
    cases.push((
        "another key, its own kid".into(),
        sign_text(
            other,
            &format!(r#"{{"alg":"RS256","typ":"JWT","kid":"{}"}}"#, other.kid()),
            &good_claims,
        ),
        StatusCode::UNAUTHORIZED,
    ));
    let mut hs256 = Header::new(Algorithm::HS256);
    hs256.kid = Some(kid.clone());
    let claims_value: Value = serde_json::from_str(&good_claims).expect("json");
    cases.push((
        "HS256 keyed with our public key".into(),
        jsonwebtoken::encode(
            &hs256,
            &claims_value,
            &EncodingKey::from_secret(our_public_key_pem().as_bytes()),
        )
        .expect("hs256"),
        StatusCode::UNAUTHORIZED,
    ));

    let mut failures = Vec::new();
    for (name, token, expected) in &cases {
        let answer = api
            .send_as(token, Method::GET, "/api/v2/network-acls", None)
            .await;
        if answer.status != *expected {
            failures.push(format!("{name}: got {}, want {expected}", answer.status));
            continue;
        }
        if *expected == StatusCode::UNAUTHORIZED {
            assert_eq!(answer.body["statusCode"], 401, "{name}");
            assert_eq!(answer.body["message"], "Invalid token", "{name}");
            assert!(
                answer.headers[header::WWW_AUTHENTICATE]
                    .to_str()
                    .is_ok_and(|v| v.contains(r#"error="invalid_token""#)),
                "{name}"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// A database written before the move from the `rsa` crate to AWS-LC holds its key as the
/// `rsa` crate wrote it (PKCS#8 PEM, `testdata/keys/legacy-pkcs8.pem`): the service starts on
/// it, serves the same JWKS as before, and issues tokens that verify.
#[tokio::test]
async fn a_key_stored_by_an_earlier_version_still_serves() {
    use netacl_store::{CredentialStore, SqliteStore, StoredSigningKey, TenantId, TenantStore};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/keys");
    let legacy_pem = std::fs::read_to_string(root.join("legacy-pkcs8.pem")).expect("fixture");
    let legacy_jwks: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("legacy-jwks.json")).expect("fixture"),
    )
    .expect("json");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = crate::support::config();
    {
        let store = SqliteStore::open(dir.path(), config.limits).expect("store");
        let tenant = TenantId::default_tenant();
        store
            .ensure_tenant(&tenant, crate::support::DOMAIN)
            .await
            .expect("tenant");
        let stored = StoredSigningKey::new(
            legacy_jwks["keys"][0]["kid"].as_str().expect("kid"),
            legacy_pem,
            0,
        );
        store
            .add_signing_key(&tenant, &stored)
            .await
            .expect("add key");
    }
    let (service, token) = crate::support::start_in(dir.path(), config).await;
    let api = crate::support::Api::new(service, token);
    let jwks = api
        .call(
            Request::builder()
                .uri("/.well-known/jwks.json")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(jwks.status, StatusCode::OK);
    assert_eq!(jwks.body, legacy_jwks);
    let header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(api.token.split('.').next().unwrap_or_default())
            .expect("base64"),
    )
    .expect("header");
    assert_eq!(header["kid"], legacy_jwks["keys"][0]["kid"]);
    let answer = api.send(Method::GET, "/api/v2/network-acls", None).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

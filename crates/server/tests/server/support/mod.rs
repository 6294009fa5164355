//! Shared set-up of the server's integration tests: a service on a temporary SQLite store with a
//! bootstrap client, tokens for it, and requests through its router (`oneshot`, no socket).
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::Router;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use netacl_server::auth::{hash_client_secret, SigningKey, TokenRequest};
use netacl_server::rate_limit::RateLimitConfig;
use netacl_server::{AdminService, BootstrapClient, ServerConfig};
use netacl_store::{CredentialStore, SqliteStore, StoredSigningKey, TenantId, TenantStore};
use serde_json::Value;
use tower::ServiceExt;

pub const DOMAIN: &str = "tenant.test";
pub const AUDIENCE: &str = "https://tenant.test/api/v2/";
pub const CLIENT: &str = "test-admin";
pub const SECRET: &str = "test-admin-secret-with-enough-length";

/// One RSA key for the whole test binary (key generation is slow).
pub fn key_pem() -> &'static str {
    static PEM: OnceLock<String> = OnceLock::new();
    PEM.get_or_init(|| {
        SigningKey::generate()
            .expect("keygen")
            .to_pem()
            .expect("pem")
            .to_string()
    })
}

/// The test configuration: [`DOMAIN`], no rate limits.
pub fn config() -> ServerConfig {
    ServerConfig::new(DOMAIN)
        .with_rate_limit(RateLimitConfig::disabled())
        .with_secrets_key(test_kek())
}

/// The key-encryption key of the tests (one value, so a restarted service opens its keys).
pub fn test_kek() -> Arc<netacl_secrets::Kek> {
    Arc::new(netacl_secrets::Kek::from_bytes(&[0x5a; 32]).expect("kek"))
}

/// Starts the service on the SQLite store in `dir` (the binary's key installed first unless the
/// store already has one) and returns it with a token of the bootstrap client.
pub async fn start_in(dir: &Path, config: ServerConfig) -> (AdminService, String) {
    let store = Arc::new(SqliteStore::open(dir, config.limits).expect("store"));
    let tenant = TenantId::default_tenant();
    store.ensure_tenant(&tenant, DOMAIN).await.expect("tenant");
    if store.signing_keys(&tenant).await.expect("keys").is_empty() {
        let key = SigningKey::from_pem(key_pem()).expect("key");
        // In clear, as versions before schema 5 stored it: sealed by the start.
        let stored = StoredSigningKey::new(key.kid(), key_pem(), 0);
        store
            .add_signing_key(&tenant, &stored)
            .await
            .expect("add key");
    }
    let bootstrap = BootstrapClient {
        client_id: Some(CLIENT.into()),
        client_secret: Some(SECRET.into()),
    };
    let (service, report) = AdminService::start(store, config, bootstrap)
        .await
        .expect("start");
    assert!(!report.signing_key_created);
    let token = token_for(&service, CLIENT, SECRET);
    (service, token)
}

/// A client-credentials token of `client`.
pub fn token_for(service: &AdminService, client: &str, secret: &str) -> String {
    service
        .authority()
        .issue_client_credentials(&TokenRequest::client_credentials(client, secret, AUDIENCE))
        .expect("token")
        .access_token
}

/// A token of a client granted exactly `scopes`.
pub fn scoped_token(service: &AdminService, name: &str, scopes: &[&str]) -> String {
    let authority = service.authority();
    let secret = format!("{name}-secret-long-enough-for-tests");
    authority
        .upsert_client(authority.management_client(
            name,
            hash_client_secret(&secret),
            scopes.iter().copied(),
        ))
        .expect("client");
    token_for(service, name, &secret)
}

/// A running service, its router and a token of the bootstrap client.
pub struct Api {
    /// The data directory when the `Api` owns it.
    pub dir: Option<tempfile::TempDir>,
    pub service: AdminService,
    pub router: Router,
    pub token: String,
}

/// A service with [`config`] on a fresh data directory.
pub async fn api() -> Api {
    api_with(config()).await
}

/// A service with `config` on a fresh data directory.
pub async fn api_with(config: ServerConfig) -> Api {
    let dir = tempfile::tempdir().expect("tempdir");
    let (service, token) = start_in(dir.path(), config).await;
    Api {
        dir: Some(dir),
        ..Api::new(service, token)
    }
}

/// One answer: status, headers, the raw body and the body as JSON (`Null` when empty or not JSON).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub content_type: Option<String>,
    pub body: Value,
    pub raw: Vec<u8>,
}

impl Answer {
    /// The answer carries the three `x-ratelimit-*` headers.
    pub fn assert_rate_limit_headers(&self) {
        for header in [
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ] {
            assert!(
                self.headers.contains_key(header),
                "{header} missing on {}",
                self.status
            );
        }
    }
}

/// Sends `request` through `router` and collects the whole answer.
pub async fn oneshot(router: &Router, request: Request<Body>) -> Answer {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let raw = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    let body = if raw.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&raw).unwrap_or(Value::Null)
    };
    Answer {
        status,
        headers,
        content_type,
        body,
        raw,
    }
}

impl Api {
    /// An `Api` on a started service; the caller keeps the data directory.
    pub fn new(service: AdminService, token: String) -> Api {
        Api {
            dir: None,
            router: service.router(),
            service,
            token,
        }
    }

    /// The data directory this `Api` owns.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("owned data directory").path()
    }

    pub async fn call(&self, request: Request<Body>) -> Answer {
        oneshot(&self.router, request).await
    }

    /// `method uri` with the bootstrap client's token and `body` as JSON.
    pub async fn send(&self, method: Method, uri: &str, body: Option<Value>) -> Answer {
        self.send_as(&self.token.clone(), method, uri, body).await
    }

    /// `method uri` with `token` and `body` as JSON.
    pub async fn send_as(
        &self,
        token: &str,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> Answer {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {token}"));
        let body = match body {
            Some(value) => {
                builder = builder.header("content-type", "application/json");
                Body::from(value.to_string())
            }
            None => Body::empty(),
        };
        self.call(builder.body(body).expect("request")).await
    }

    /// `method uri` with the bootstrap client's token and `body` as is.
    pub async fn raw(
        &self,
        method: Method,
        uri: &str,
        content_type: Option<&str>,
        body: &str,
    ) -> Answer {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {}", self.token));
        if let Some(content_type) = content_type {
            builder = builder.header("content-type", content_type);
        }
        self.call(builder.body(Body::from(body.to_owned())).expect("request"))
            .await
    }

    /// `method uri` with an url-encoded form.
    pub async fn form(&self, method: Method, uri: &str, form: &str) -> Answer {
        self.raw(method, uri, Some("application/x-www-form-urlencoded"), form)
            .await
    }

    /// `GET uri`, which must answer 200; its body.
    pub async fn get_ok(&self, uri: &str) -> Value {
        let answer = self.send(Method::GET, uri, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
        answer.body
    }
}

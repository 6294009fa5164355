//! The admin API: the network-ACL part of the tenant management API v2 (drop-in for its
//! clients), its client-credentials token endpoint, and netacl's own operations under
//! `/_netacl/v1` (dry runs, status, the watch long poll, the OpenAPI document).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use netacl_server::{AdminService, BootstrapClient, ServerConfig};
//! use netacl_store::SqliteStore;
//! use tower::ServiceExt;
//!
//! let dir = tempfile::tempdir()?;
//! let store = Arc::new(SqliteStore::open(dir.path(), Default::default())?);
//! let bootstrap = BootstrapClient {
//!     client_id: Some("ops".into()),
//!     client_secret: Some("a-long-secret-for-the-example".into()),
//! };
//! let (service, report) =
//!     AdminService::start(store, ServerConfig::new("localhost:8080"), bootstrap).await?;
//! assert!(report.signing_key_created);
//!
//! // Without a token: 401 with the error body.
//! let response = service
//!     .router()
//!     .oneshot(http::Request::get("/api/v2/network-acls").body(axum::body::Body::empty())?)
//!     .await?;
//! assert_eq!(response.status(), 401);
//! assert!(response.headers().contains_key("x-ratelimit-limit"));
//! # Ok(())
//! # }
//! ```
//!
//! # Shape
//!
//! - Every tenant of the store is served, selected by the request's host (`tenancy`): a
//!   middleware, outermost after the panic guard, resolves the host to the tenant's state and
//!   puts it in the request's extensions; handlers take it from there. `/_netacl/v1/tenants` (the
//!   operator API, its own token) is above tenants.
//! - One route table (`routes`) builds both the router and the OpenAPI document.
//! - A guard in front of every authenticated route verifies the bearer token, applies the
//!   per-client rate limit (per peer address without a valid token: IPv4 by address, IPv6 by
//!   /64) and stamps the rate-limit headers; each handler's `Authorized<Scope>` extractor
//!   checks the operation's scope. `POST /oauth/token` has a bucket of its own per peer
//!   address, same limits, refused with an OAuth-shaped `429 too_many_requests`.
//! - [`AdminService::engine`] and [`AdminService::rule_sets`] expose the live engine and the
//!   installed rule sets, for an edge running in the same process.
//! - Handlers are infallible in shape: every failure is an [`ApiError`], one status and body per
//!   cause.
//! - Reads are served from the tenant's committed snapshot (records rendered to JSON once);
//!   writes go through the tenant's write path: compile → durable commit → engine swap → answer.
//! - Managed lists (`/_netacl/v1/managed-lists/{name}`, and files of this node given in
//!   [`ServerConfig::managed_list_files`] and reloaded through [`AdminService::load_file_list`])
//!   take the same path: a list change bumps the tenant's version like a rule change, and the
//!   watch long poll carries the lists to the edges that ask for them.
//! - Verified bearer tokens are remembered (bounded, until `exp` plus the leeway, at most five
//!   minutes), so a client reusing its token costs a lookup, not an RSA verification.
//!
//! # Bodies
//!
//! JSON, or forms where the public API takes them: the book's "Bodies and forms" chapter
//! (`docs/src/api/bodies.md`) is the one statement of the rules.
//!
//! # Several nodes
//!
//! Nodes sharing one PostgreSQL database converge through [`AdminService::follow_store`]
//! (change notifications plus a periodic version check; see [`StoreFollower`]). Rate limits are
//! per node: behind a load balancer over N nodes a client may get up to N times the configured
//! limit.
#![deny(missing_docs)]

pub mod auth;
pub mod rate_limit;

mod acl_keys;
mod analysis;

mod body;
mod branding;
mod clients;
mod config;
mod connections;
mod console;
mod cursor;
mod directory;
mod error;
mod forms;
mod groups;
mod guard;
mod history;
mod integral_numbers;
mod internal;
mod key_material;
mod logs;
mod managed_lists;
mod network_acls;
mod openapi;
mod operator;
mod operator_edge;
mod organization_connections;
mod organization_schemas;
mod organizations;
mod paging;
pub mod provisioning;
mod query;
mod request_context;
mod routes;
mod rule_counts;
mod service;
mod sessions;
mod signing_keys;
mod sync;
mod tenancy;
mod tenant;
mod tenant_schemas;
mod work;

use std::sync::Arc;

pub use auth::operator_token::OperatorToken;
pub use config::{
    ServerConfig, DEFAULT_BODY_LIMIT, DEFAULT_WATCH_TIMEOUT_MS, MAX_WATCH_TIMEOUT_MS,
};
pub use console::{
    ConsoleSessionLimits, ConsoleSessionLimitsError, ConsoleSettings, DEFAULT_CONSOLE_SESSIONS,
    DEFAULT_CONSOLE_SESSIONS_PER_CLIENT, DEFAULT_CONSOLE_SESSIONS_PER_TENANT,
};
pub use error::ApiError;
pub use forms::{form_body_to_json, FormResource};
pub use logs::sample::EdgeSampleSource;
pub use logs::{
    days_ms, default_log_retention, DEFAULT_LOG_RETENTION_DAYS, DEFAULT_LOG_RETENTION_EVENTS,
};
pub use request_context::{RequestContext, MAX_REQUEST_ID_LEN, REQUEST_ID_HEADER};
pub use service::{AdminService, BootstrapClient, StartError, StartReport};
pub use signing_keys::{
    KeysError, KEY_REFRESH_INTERVAL, SIGNING_KEY_PURPOSE, UNKNOWN_KID_RELOAD_INTERVAL,
};
pub use sync::{StoreFollower, CLIENT_REFRESH_INTERVAL, DEFAULT_SYNC_INTERVAL};
pub use tenancy::{ServedTenantInfo, TenantDirectory, TENANTS_POLL_INTERVAL};
pub use tenant::LoadError;
pub use work::{
    default_per_process, WorkLimits, DEFAULT_ANALYSIS_DEADLINE, DEFAULT_ANALYSIS_WORK,
    DEFAULT_EXPENSIVE_PER_TENANT, EXPENSIVE_RETRY_AFTER_SECS, FINDINGS_HEADER_WORK,
};

/// Marks a request that arrived over TLS (a request extension). Whoever serves the router over
/// TLS inserts it (`netacl serve` does); the watch sends network ACL key material, sealed to the
/// edge, only to requests that carry it or come from a loopback address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsTransport;

pub use auth::KEY_MATERIAL_SCOPE;

/// Shared by every handler.
#[derive(Clone)]
pub(crate) struct AppState {
    inner: Arc<Shared>,
}

pub(crate) struct Shared {
    config: ServerConfig,
    authority: Arc<auth::TenantAuthority>,
    limiter: rate_limit::RateLimiter,
    tenant: Arc<tenant::TenantRuntime>,
    verified: guard::VerifiedTokens,
    signing_keys: Arc<signing_keys::SigningKeys>,
}

impl AppState {
    /// A permit for one expensive request of this tenant (see `work`), or the 429 that
    /// refuses it: taken before the request's body is read.
    pub(crate) fn expensive(&self) -> Result<work::WorkPermit, ApiError> {
        let config = &self.inner.config;
        config
            .work_gate
            .acquire(&self.inner.tenant.id, &config.work)
    }
}

/// The OpenAPI 3.1 document for a tenant domain and the default limits (what
/// `GET /_netacl/v1/openapi.json` serves, with the limits the server was started with).
pub fn openapi_document(tenant_domain: &str) -> serde_json::Value {
    openapi::document(
        tenant_domain,
        &netacl_model::Limits::default(),
        &routes::described(),
    )
}

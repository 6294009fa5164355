#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod auth;
mod config;
mod console;
mod http;
mod netacl_v1;
mod openapi;
mod operator;
pub mod provisioning;
mod resources;
mod routes;
mod service;
mod tenancy;
// The tenant runtime (crate `netacl-tenant`), under the name the modules use.
use netacl_tenant as tenant;

use std::sync::Arc;

pub use auth::operator_token::OperatorToken;
pub use config::{
    ServerConfig, DEFAULT_BODY_LIMIT, DEFAULT_WATCH_TIMEOUT_MS, MAX_WATCH_TIMEOUT_MS,
};
pub use console::{
    ConsoleSessionLimits, ConsoleSessionLimitsError, ConsoleSettings, DEFAULT_CONSOLE_SESSIONS,
    DEFAULT_CONSOLE_SESSIONS_PER_CLIENT, DEFAULT_CONSOLE_SESSIONS_PER_TENANT,
};
pub use http::error::ApiError;
pub use http::rate_limit;
pub use http::request_context::{RequestContext, MAX_REQUEST_ID_LEN, REQUEST_ID_HEADER};
pub use http::work::{
    default_per_process, WorkLimits, DEFAULT_ANALYSIS_DEADLINE, DEFAULT_ANALYSIS_WORK,
    DEFAULT_EXPENSIVE_PER_TENANT, EXPENSIVE_RETRY_AFTER_SECS, FINDINGS_HEADER_WORK,
};
pub use resources::logs::sample::EdgeSampleSource;
pub use resources::logs::{
    days_ms, default_log_retention, DEFAULT_LOG_RETENTION_DAYS, DEFAULT_LOG_RETENTION_EVENTS,
};
pub use resources::signing_keys::{
    KeysError, KEY_REFRESH_INTERVAL, SIGNING_KEY_PURPOSE, UNKNOWN_KID_RELOAD_INTERVAL,
};
pub use resources::{form_body_to_json, FormResource};
pub use service::{AdminService, BootstrapClient, StartError, StartReport};
pub use tenancy::sync::{StoreFollower, CLIENT_REFRESH_INTERVAL, DEFAULT_SYNC_INTERVAL};
pub use tenancy::{ServedTenantInfo, TenantDirectory, TENANTS_POLL_INTERVAL};
pub use tenant::LoadError;

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
    limiter: http::rate_limit::RateLimiter,
    tenant: Arc<tenant::TenantRuntime>,
    verified: http::guard::VerifiedTokens,
    signing_keys: Arc<resources::signing_keys::SigningKeys>,
}

impl AppState {
    /// A permit for one expensive request of this tenant (see `work`), or the 429 that
    /// refuses it: taken before the request's body is read.
    pub(crate) fn expensive(&self) -> Result<http::work::WorkPermit, ApiError> {
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

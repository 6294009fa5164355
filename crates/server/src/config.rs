//! The server's settings.
use std::sync::Arc;

use netacl_model::{Limits, ManagedLists};
use netacl_secrets::Kek;

use crate::auth::{SigningKey, DEFAULT_TOKEN_LIFETIME_SECS};
use crate::http::rate_limit::RateLimitConfig;

/// Default body limit: 10 MiB, room for a rule with some 400,000 CIDRs.
pub const DEFAULT_BODY_LIMIT: usize = 10 * 1024 * 1024;
/// Default wait of the watch long poll, in milliseconds.
pub const DEFAULT_WATCH_TIMEOUT_MS: u64 = 25_000;
/// Longest wait of the watch long poll, in milliseconds.
pub const MAX_WATCH_TIMEOUT_MS: u64 = 60_000;

/// How the admin service runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The host the tenant's API is served on (`localhost:8080`): the issuer is
    /// `https://HOST/`, the management audience `https://HOST/api/v2/`.
    pub tenant_domain: String,
    /// Largest request body, in bytes (413 above).
    pub body_limit: usize,
    /// Per-client rate limit of the authenticated routes.
    pub rate_limit: RateLimitConfig,
    /// Lifetime of issued access tokens, in seconds.
    pub token_lifetime_secs: u64,
    /// Limits on rule sets (entries per member, per rule, per set).
    pub limits: Limits,
    /// Managed lists given by files of this node (`--managed-list`): in force from the start,
    /// winning over the stored list of the same name, read-only through the API. Reloads go
    /// through [`AdminService::load_file_list`](crate::AdminService::load_file_list).
    pub managed_list_files: ManagedLists,
    /// The key-encryption key that seals secrets at rest (signing keys). `netacl serve` loads it
    /// from `--secrets-key-file` or the data directory. `None` (the default of
    /// [`ServerConfig::new`]): [`AdminService::start`](crate::AdminService::start) generates one
    /// held in memory only, which suits tests and nothing that must restart: keys sealed with
    /// it do not open after a restart (the start then fails naming the key-encryption key).
    pub secrets_key: Option<Arc<Kek>>,
    /// An RSA key the operator brings (`--signing-key-file`): made the tenant's current signing
    /// key at start (the first key, or a rotation; nothing when it is current already).
    pub signing_key: Option<Arc<SigningKey>>,
    /// The operator token guarding `/_netacl/v1/tenants` (`--operator-token-file`). `None`: the
    /// operator API refuses every request (401).
    pub operator_token: Option<crate::auth::operator_token::OperatorToken>,
    /// How much of each tenant's log is kept (`GET /api/v2/logs`): by default
    /// [`DEFAULT_LOG_RETENTION_EVENTS`](crate::DEFAULT_LOG_RETENTION_EVENTS) events and
    /// [`DEFAULT_LOG_RETENTION_DAYS`](crate::DEFAULT_LOG_RETENTION_DAYS) days.
    pub log_retention: netacl_store::LogRetention,
    /// The console's settings: its session bounds, and how it knows a browser came over HTTPS
    /// through a proxy.
    pub console: crate::console::ConsoleSettings,
    /// Where the impact preview reads the in-process edge's traffic sample (shared by every
    /// tenant's copy of the configuration; set through
    /// [`AdminService::set_edge_sample_source`](crate::AdminService::set_edge_sample_source)).
    pub(crate) local_samples: crate::resources::logs::sample::LocalSamples,
    /// The analysis's budget and deadline, and how many expensive requests run at once
    /// (`crate::http::work`).
    pub work: crate::http::work::WorkLimits,
    /// The expensive requests running (shared by every tenant's copy of the configuration).
    pub(crate) work_gate: Arc<crate::http::work::WorkGate>,
}

impl ServerConfig {
    /// Defaults for a tenant domain.
    pub fn new(tenant_domain: impl Into<String>) -> Self {
        Self {
            tenant_domain: tenant_domain.into(),
            body_limit: DEFAULT_BODY_LIMIT,
            rate_limit: RateLimitConfig::default(),
            token_lifetime_secs: DEFAULT_TOKEN_LIFETIME_SECS,
            limits: Limits::default(),
            managed_list_files: ManagedLists::new(),
            secrets_key: None,
            signing_key: None,
            operator_token: None,
            log_retention: crate::resources::logs::default_log_retention(),
            console: Default::default(),
            local_samples: Default::default(),
            work: crate::http::work::WorkLimits::new(),
            work_gate: Arc::default(),
        }
    }

    /// With other bounds on the expensive endpoints (the analysis's budget and deadline, the
    /// expensive requests at once per tenant and per process).
    pub fn with_work_limits(mut self, limits: crate::http::work::WorkLimits) -> Self {
        self.work = limits;
        self
    }

    /// With another log retention.
    pub fn with_log_retention(mut self, retention: netacl_store::LogRetention) -> Self {
        self.log_retention = retention;
        self
    }

    /// With other bounds on the console's sessions.
    pub fn with_console_sessions(mut self, limits: crate::ConsoleSessionLimits) -> Self {
        self.console.sessions = limits;
        self
    }

    /// With the URL clients reach this service at (a proxy in front).
    pub fn with_public_url(mut self, url: http::Uri) -> Self {
        self.console.public_url = Some(url);
        self
    }

    /// With the peers whose `X-Forwarded-Proto` is believed.
    pub fn with_trusted_proxies(mut self, trusted: netacl_model::TrustedProxies) -> Self {
        self.console.trusted_proxies = trusted;
        self
    }

    /// With the key-encryption key of secrets at rest.
    pub fn with_secrets_key(mut self, kek: Arc<Kek>) -> Self {
        self.secrets_key = Some(kek);
        self
    }

    /// With the operator token of `/_netacl/v1/tenants`.
    pub fn with_operator_token(
        mut self,
        token: crate::auth::operator_token::OperatorToken,
    ) -> Self {
        self.operator_token = Some(token);
        self
    }

    /// With a signing key to make current at start.
    pub fn with_signing_key(mut self, key: Arc<SigningKey>) -> Self {
        self.signing_key = Some(key);
        self
    }

    /// With another body limit.
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// With another rate limit.
    pub fn with_rate_limit(mut self, rate_limit: RateLimitConfig) -> Self {
        self.rate_limit = rate_limit;
        self
    }

    /// With another token lifetime.
    pub fn with_token_lifetime_secs(mut self, secs: u64) -> Self {
        self.token_lifetime_secs = secs;
        self
    }

    /// With other rule-set limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// With managed lists given by files of this node.
    pub fn with_managed_list_files(mut self, lists: ManagedLists) -> Self {
        self.managed_list_files = lists;
        self
    }
}

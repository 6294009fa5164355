//! The server's settings.
use std::sync::Arc;

use netacl_model::{Limits, ManagedLists};
use netacl_secrets::Kek;

use crate::auth::{SigningKey, DEFAULT_TOKEN_LIFETIME_SECS};
use crate::rate_limit::RateLimitConfig;

/// Default body limit: 10 MiB, room for a rule with some 400,000 CIDRs.
pub const DEFAULT_BODY_LIMIT: usize = 10 * 1024 * 1024;
/// Default wait of the watch long poll, in milliseconds.
pub const DEFAULT_WATCH_TIMEOUT_MS: u64 = 25_000;
/// Longest wait of the watch long poll, in milliseconds.
pub const MAX_WATCH_TIMEOUT_MS: u64 = 60_000;

/// How the console's sessions are bounded (README, "The console"): each client of a tenant
/// holds at most `per_client` (its oldest replaced by its new one), each tenant at most
/// `per_tenant` (the tenant's oldest replaced), the process at most `total`, which is above
/// `per_tenant` so that no tenant fills it alone (a sign-in that finds it full replaces the
/// oldest session of the tenant holding the most). A sign-in is never refused for want of room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsoleSessionLimits {
    /// Live sessions of one client of a tenant.
    pub per_client: usize,
    /// Live sessions of one tenant.
    pub per_tenant: usize,
    /// Live sessions of the process (a memory bound).
    pub total: usize,
}

/// Default of [`ConsoleSessionLimits::per_client`].
pub const DEFAULT_CONSOLE_SESSIONS_PER_CLIENT: usize = 10;
/// Default of [`ConsoleSessionLimits::per_tenant`].
pub const DEFAULT_CONSOLE_SESSIONS_PER_TENANT: usize = 1_000;
/// Default of [`ConsoleSessionLimits::total`].
pub const DEFAULT_CONSOLE_SESSIONS: usize = 10_000;

/// Console session limits that do not fit together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleSessionLimitsError {
    /// A limit is 0.
    #[error("console session limits must be at least 1")]
    Zero,
    /// More sessions for a client than for its tenant.
    #[error(
        "the console sessions of a client ({per_client}) cannot exceed those of a tenant \
         ({per_tenant})"
    )]
    ClientAboveTenant {
        /// The per-client limit.
        per_client: usize,
        /// The per-tenant limit.
        per_tenant: usize,
    },
    /// One tenant could fill the whole table.
    #[error(
        "the console sessions of the process ({total}) must be more than those of one tenant \
         ({per_tenant}), so that no tenant fills them alone"
    )]
    TotalNotAboveTenant {
        /// The per-tenant limit.
        per_tenant: usize,
        /// The process's limit.
        total: usize,
    },
}

impl ConsoleSessionLimits {
    /// Checked limits: each at least 1, `per_client <= per_tenant < total`.
    pub fn new(
        per_client: usize,
        per_tenant: usize,
        total: usize,
    ) -> Result<Self, ConsoleSessionLimitsError> {
        if per_client == 0 || per_tenant == 0 || total == 0 {
            return Err(ConsoleSessionLimitsError::Zero);
        }
        if per_client > per_tenant {
            return Err(ConsoleSessionLimitsError::ClientAboveTenant {
                per_client,
                per_tenant,
            });
        }
        if total <= per_tenant {
            return Err(ConsoleSessionLimitsError::TotalNotAboveTenant { per_tenant, total });
        }
        Ok(Self {
            per_client,
            per_tenant,
            total,
        })
    }
}

impl Default for ConsoleSessionLimits {
    fn default() -> Self {
        Self {
            per_client: DEFAULT_CONSOLE_SESSIONS_PER_CLIENT,
            per_tenant: DEFAULT_CONSOLE_SESSIONS_PER_TENANT,
            total: DEFAULT_CONSOLE_SESSIONS,
        }
    }
}

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
    pub operator_token: Option<crate::operator::OperatorToken>,
    /// How much of each tenant's log is kept (`GET /api/v2/logs`): by default
    /// [`DEFAULT_LOG_RETENTION_EVENTS`](crate::DEFAULT_LOG_RETENTION_EVENTS) events and
    /// [`DEFAULT_LOG_RETENTION_DAYS`](crate::DEFAULT_LOG_RETENTION_DAYS) days.
    pub log_retention: netacl_store::LogRetention,
    /// How the console's sessions are bounded.
    pub console_sessions: ConsoleSessionLimits,
    /// The URL clients reach this service at, when a proxy is in front (`--public-url`): with
    /// `https`, the console's cookie is `Secure` whatever the transport to this process.
    pub public_url: Option<http::Uri>,
    /// Peers whose `X-Forwarded-Proto` is believed (`--trusted-proxy`): a request from one of
    /// them saying `https` gets a `Secure` console cookie. The header is ignored from any other
    /// peer.
    pub trusted_proxies: netacl_model::TrustedProxies,
    /// Where the impact preview reads the in-process edge's traffic sample (shared by every
    /// tenant's copy of the configuration; set through
    /// [`AdminService::set_edge_sample_source`](crate::AdminService::set_edge_sample_source)).
    pub(crate) local_samples: crate::logs::sample::LocalSamples,
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
            log_retention: crate::logs::default_log_retention(),
            console_sessions: ConsoleSessionLimits::default(),
            public_url: None,
            trusted_proxies: netacl_model::TrustedProxies::none(),
            local_samples: Default::default(),
        }
    }

    /// With another log retention.
    pub fn with_log_retention(mut self, retention: netacl_store::LogRetention) -> Self {
        self.log_retention = retention;
        self
    }

    /// With other bounds on the console's sessions.
    pub fn with_console_sessions(mut self, limits: ConsoleSessionLimits) -> Self {
        self.console_sessions = limits;
        self
    }

    /// With the URL clients reach this service at (a proxy in front).
    pub fn with_public_url(mut self, url: http::Uri) -> Self {
        self.public_url = Some(url);
        self
    }

    /// With the peers whose `X-Forwarded-Proto` is believed.
    pub fn with_trusted_proxies(mut self, trusted: netacl_model::TrustedProxies) -> Self {
        self.trusted_proxies = trusted;
        self
    }

    /// Whether the URL clients reach this service at is `https://`.
    pub(crate) fn public_https(&self) -> bool {
        self.public_url
            .as_ref()
            .and_then(|u| u.scheme())
            .is_some_and(|s| *s == http::uri::Scheme::HTTPS)
    }

    /// With the key-encryption key of secrets at rest.
    pub fn with_secrets_key(mut self, kek: Arc<Kek>) -> Self {
        self.secrets_key = Some(kek);
        self
    }

    /// With the operator token of `/_netacl/v1/tenants`.
    pub fn with_operator_token(mut self, token: crate::operator::OperatorToken) -> Self {
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

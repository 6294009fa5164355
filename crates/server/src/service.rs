//! Starting the admin service: tenant, signing key, clients, bootstrap client, engine.
use std::sync::Arc;

use axum::Router;
use netacl_store::{Store, StoredClient, TenantId};

use crate::auth::{
    generate_client_id, generate_client_secret, hash_client_secret, AuthorityConfig,
    AuthorityConfigError, KeyError, TenantAuthority,
};
use crate::config::ServerConfig;
use crate::http::rate_limit::{RateLimitConfigError, RateLimiter};
use crate::resources::signing_keys::{KeysError, SigningKeys};
use crate::tenancy::{Registry, TenantDirectory};
use crate::tenant::{LoadError, TenantRuntime};
use crate::{routes, AppState, Shared};

/// The bootstrap client asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct BootstrapClient {
    /// Its id; generated when absent and no client exists yet.
    pub client_id: Option<String>,
    /// Its secret; when given, the client is created or its secret replaced. When absent, a
    /// client is created with a generated secret only if it does not exist yet.
    pub client_secret: Option<String>,
}

/// What [`AdminService::start`] did, for the operator.
#[derive(Clone)]
pub struct StartReport {
    /// The bootstrap client's id (the first registered client when none was created).
    pub bootstrap_client_id: Option<String>,
    /// The secret generated for a newly created bootstrap client: show it once, it is stored
    /// only as a hash.
    pub generated_secret: Option<String>,
    /// Whether the signing key was created now (first start).
    pub signing_key_created: bool,
    /// The current signing key's id.
    pub kid: String,
    /// How many signing keys stored in clear (before schema 5) were sealed now.
    pub signing_keys_sealed: usize,
    /// The rule-set version loaded into the engine.
    pub version: u64,
    /// How many network ACLs were loaded.
    pub network_acls: usize,
}

impl std::fmt::Debug for StartReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartReport")
            .field("bootstrap_client_id", &self.bootstrap_client_id)
            .field(
                "generated_secret",
                &self.generated_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("signing_key_created", &self.signing_key_created)
            .field("kid", &self.kid)
            .field("signing_keys_sealed", &self.signing_keys_sealed)
            .field("version", &self.version)
            .field("network_acls", &self.network_acls)
            .finish()
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] netacl_store::StoreError),
    /// The stored signing key is unusable, or a new one could not be made.
    #[error("signing key: {0}")]
    Key(#[from] KeyError),
    /// The signing keys could not be opened, sealed or set up.
    #[error("signing keys: {0}")]
    Keys(#[from] KeysError),
    /// The key-encryption key could not be made.
    #[error("secrets key: {0}")]
    Secrets(#[from] netacl_secrets::SecretsError),
    /// The tenant domain, token lifetime or a stored client is unusable.
    #[error("authority: {0}")]
    Authority(#[from] AuthorityConfigError),
    /// The rate-limit settings are unusable.
    #[error("rate limit: {0}")]
    RateLimit(#[from] RateLimitConfigError),
    /// The stored rule set could not be loaded into the engine.
    #[error("rules: {0}")]
    Load(#[from] LoadError),
    /// A blocking task failed.
    #[error("start-up task failed: {0}")]
    Task(String),
}

/// The running admin service: the default tenant (the one [`ServerConfig::tenant_domain`]
/// names, which the single-tenant accessors below refer to) and every other tenant of the store,
/// selected by host (see `Many tenants` in the README). Build it with [`AdminService::start`],
/// serve [`AdminService::router`].
#[derive(Clone)]
pub struct AdminService {
    state: AppState,
    registry: Arc<Registry>,
    /// The console's sessions (one store for every router made from this service).
    console: Arc<crate::console::Sessions>,
}

impl AdminService {
    /// Prepares the service over `store`: the tenant, its signing key (created on first start),
    /// its clients and the bootstrap client, and the engine rebuilt from the stored rules, all
    /// before the first request can be accepted.
    pub async fn start(
        store: Arc<dyn Store>,
        config: ServerConfig,
        bootstrap: BootstrapClient,
    ) -> Result<(Self, StartReport), StartError> {
        let tenant_id = TenantId::default_tenant();
        store
            .ensure_tenant(&tenant_id, &config.tenant_domain)
            .await?;

        let kek = match &config.secrets_key {
            Some(kek) => Arc::clone(kek),
            None => Arc::new(netacl_secrets::Kek::generate()?),
        };
        let authority_config = AuthorityConfig::new(config.tenant_domain.clone())
            .with_token_lifetime_secs(config.token_lifetime_secs);
        let (prepared, authority) = SigningKeys::prepare(
            Arc::clone(&store),
            tenant_id.clone(),
            Arc::clone(&kek),
            config.tenant_domain.clone(),
            config.signing_key.clone(),
            |key| Ok(Arc::new(TenantAuthority::new(authority_config, key, [])?)),
        )
        .await?;
        let signing_key_created = prepared.created;
        let kid = authority.signing_key().kid().to_owned();

        let mut clients = store.clients(&tenant_id).await?;
        crate::auth::key_material::drop_from_bootstrap_clients(&store, &tenant_id, &mut clients)
            .await?;
        for client in &clients {
            authority.upsert_client(authority.management_client(
                client.client_id.clone(),
                client.secret_hash.clone(),
                crate::auth::with_added_scopes(&client.scopes),
            ))?;
        }
        let exists = |id: &str| clients.iter().any(|c| c.client_id == id);
        let (create, bootstrap_client_id, generated_secret) =
            match (bootstrap.client_id, bootstrap.client_secret) {
                (id, Some(secret)) => {
                    let id = id
                        .or_else(|| clients.first().map(|c| c.client_id.clone()))
                        .unwrap_or_else(generate_client_id);
                    (Some((id.clone(), secret)), Some(id), None)
                }
                (Some(id), None) if exists(&id) => (None, Some(id), None),
                (Some(id), None) => {
                    let secret = generate_client_secret();
                    (Some((id.clone(), secret.clone())), Some(id), Some(secret))
                }
                (None, None) if clients.is_empty() => {
                    let (id, secret) = (generate_client_id(), generate_client_secret());
                    (Some((id.clone(), secret.clone())), Some(id), Some(secret))
                }
                (None, None) => (None, clients.first().map(|c| c.client_id.clone()), None),
            };
        if let Some((client_id, secret)) = create {
            let stored = StoredClient {
                client_id: client_id.clone(),
                secret_hash: hash_client_secret(&secret),
                scopes: crate::auth::bootstrap_scopes(),
                created_at_ms: netacl_model::Timestamp::now().unix_millis(),
            };
            authority.upsert_client(authority.management_client(
                client_id,
                stored.secret_hash.clone(),
                stored.scopes.iter().cloned(),
            ))?;
            store.put_client(&tenant_id, &stored).await?;
        }

        let limiter = RateLimiter::new(config.rate_limit)?;
        let tenant = TenantRuntime::load(
            Arc::clone(&store),
            tenant_id,
            config.limits,
            &config.managed_list_files,
            Arc::clone(&kek),
        )
        .await?;
        let snapshot = tenant.snapshot();
        let report = StartReport {
            bootstrap_client_id,
            generated_secret,
            signing_key_created,
            kid,
            signing_keys_sealed: prepared.sealed,
            version: snapshot.version,
            network_acls: snapshot.ordered.len(),
        };
        let state = AppState {
            inner: Arc::new(Shared {
                config: config.clone(),
                authority,
                limiter,
                tenant,
                verified: crate::http::guard::VerifiedTokens::new(),
                signing_keys: Arc::clone(&prepared.keys),
            }),
        };
        let console = Arc::new(crate::console::Sessions::new(config.console.sessions));
        let registry =
            Registry::load(config, store, kek, state.clone(), Arc::clone(&console)).await?;
        Ok((
            Self {
                state,
                registry,
                console,
            },
            report,
        ))
    }

    /// The whole HTTP surface: `/api/v2/network-acls`, `/_netacl/v1/*`, `POST /oauth/token` and
    /// `GET /.well-known/jwks.json`. `POST /oauth/token` is rate limited per peer address (a
    /// bucket apart from the API's, same limits).
    ///
    /// Outermost is the request id (`X-Request-Id` on every answer, see [`RequestContext`]), then
    /// the panic guard: should a handler ever panic, the client gets a 500 in the error shape
    /// (the panic is logged), never a dropped connection.
    ///
    /// [`RequestContext`]: crate::RequestContext
    pub fn router(&self) -> Router {
        self.router_with(Router::new())
    }

    /// [`Self::router`] with `extra` routes merged in (the tests add one that panics).
    fn router_with(&self, extra: Router) -> Router {
        use axum::routing::{get, post};
        async fn token(
            state: AppState,
            headers: http::HeaderMap,
            body: axum::body::Body,
        ) -> axum::response::Response {
            let authority = Arc::clone(&state.inner.authority);
            crate::auth::token_endpoint(axum::extract::State(authority), headers, body).await
        }
        async fn jwks(state: AppState) -> axum::response::Response {
            let authority = Arc::clone(&state.inner.authority);
            crate::auth::jwks_endpoint(axum::extract::State(authority)).await
        }
        let token = Router::new()
            .route("/oauth/token", post(token))
            .route("/oauth/token/", post(token))
            .route_layer(axum::middleware::from_fn(
                crate::http::guard::limit_token_requests,
            ));
        let jwks = Router::new().route("/.well-known/jwks.json", get(jwks));
        let api = routes::router()
            .merge(extra)
            .merge(token)
            .merge(jwks)
            .fallback(|| async { crate::http::error::ApiError::no_such_route() });
        // The console answers its API calls with the same router, below the tenant selection.
        let console = crate::console::router(api.clone(), Arc::clone(&self.console));
        let tenants = api
            .merge(console)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&self.registry),
                crate::tenancy::select_tenant,
            ));
        // The operator API is above tenants: served whatever the host.
        crate::operator::router(Arc::clone(&self.registry), crate::routes::body_components())
            .merge(tenants)
            .layer(tower_http::catch_panic::CatchPanicLayer::custom(
                crate::http::error::panic_response,
            ))
            .layer(axum::middleware::from_fn(
                crate::http::request_context::assign,
            ))
    }

    /// Sets the size past which an answer of the operator's tenants watch stops adding tenants
    /// (16 MiB by default); for tests of the continuation (`"more": true`).
    #[doc(hidden)]
    pub fn set_tenants_watch_budget(&self, bytes: usize) {
        self.registry.feed().set_budget(bytes);
    }

    /// The console sessions this process holds, every tenant's (live, or expired and not yet
    /// collected); for tests of their bounds.
    #[doc(hidden)]
    pub fn console_session_count(&self) -> usize {
        self.console.len()
    }

    /// Every tenant this service serves, a new value on every tenant added or removed (or its
    /// domains changed). An edge in the same process selects a tenant per request with
    /// [`TenantDirectory::for_host`] and enforces with that tenant's engine; rule changes inside
    /// a tenant go through its engine and rule sets as for the single tenant.
    pub fn tenants(&self) -> tokio::sync::watch::Receiver<Arc<TenantDirectory>> {
        self.registry.subscribe()
    }

    /// Keeps this node in step with the other nodes sharing its database: catches up on every
    /// change `listener` announces and, whatever it hears, every `interval` (see
    /// [`StoreFollower`](crate::StoreFollower)). Runs until the returned follower is dropped.
    pub fn follow_store(
        &self,
        listener: Option<netacl_store::ChangeListener>,
        interval: std::time::Duration,
    ) -> crate::StoreFollower {
        self.registry.follow_rules();
        crate::tenancy::sync::StoreFollower::start(
            Arc::clone(&self.state.inner.tenant),
            Arc::clone(&self.state.inner.authority),
            Arc::clone(&self.state.inner.signing_keys),
            listener,
            interval,
            Arc::downgrade(&self.registry),
        )
    }

    /// The engine holding the tenant's live compiled policy: the one the write path (and, with
    /// a shared database, the store follower) installs each new rule set into. An edge in the
    /// same process evaluates against it directly, so a change answered `201`/`204` is already
    /// enforced there.
    pub fn engine(&self) -> &Arc<netacl_eval::Engine> {
        self.state.inner.tenant.engine()
    }

    /// The rule set installed in [`engine`](Self::engine), a new value sent right after each
    /// install (writes through this node and rule sets caught up from the store alike). The
    /// same channel wakes the watch long poll. Starts at the rule set loaded at start.
    pub fn rule_sets(&self) -> tokio::sync::watch::Receiver<Arc<netacl_model::RuleSet>> {
        self.state.inner.tenant.subscribe()
    }

    /// Puts the new content of a managed list given by a file of this node in force (the
    /// caller reloaded the file): the lists are compiled, the rule set is compiled against them,
    /// the tenant's version is bumped (a list changes decisions), and edges following this node
    /// get the list with the next watch answer. Returns the new version. On error nothing
    /// changed (the database is unreachable, say): call again later.
    pub async fn load_file_list(
        &self,
        name: netacl_model::ManagedListName,
        list: Arc<netacl_model::ManagedList>,
    ) -> Result<u64, crate::ApiError> {
        self.state
            .inner
            .tenant
            .load_file_list(name, list)
            .await
            .map_err(crate::ApiError::from)
    }

    /// Records the per-rule counts of an edge running in this process as `acls_summary` events
    /// in the default tenant's log (see "Tenant logs" in the README). Returns whether they were
    /// recorded (a store failure is logged).
    pub async fn record_acl_summaries(&self, summaries: &[netacl_model::AclSummary]) -> bool {
        crate::resources::logs::record_summaries(&self.state, summaries).await
    }

    /// Records the per-rule counts a multi-tenant edge running in this process kept for
    /// `tenant` as `acls_summary` events in that tenant's log (`details.edge`: `in-process`).
    /// Returns whether they were recorded: `false` for a tenant this service does not serve
    /// (deleted meanwhile: nothing is created) or a store failure (logged).
    pub async fn record_tenant_acl_summaries(
        &self,
        tenant: &str,
        summaries: &[netacl_model::AclSummary],
    ) -> bool {
        let Some((state, _)) =
            netacl_store::TenantId::new(tenant).and_then(|id| self.registry.served(&id))
        else {
            return false;
        };
        crate::resources::logs::record_summaries(&state, summaries).await
    }

    /// Lets the impact preview read the traffic sample of an edge running in this process:
    /// `source` is called with a tenant's id when that tenant's preview is given no `requests`
    /// (see "Rule analysis and impact preview" in the README), and answers that tenant's sample
    /// (`None` or empty: none). Replaces an earlier source.
    pub fn set_edge_sample_source(&self, source: crate::EdgeSampleSource) {
        self.state.inner.config.local_samples.set(source);
    }

    /// The tenant's token authority (issuer, audience, clients).
    pub fn authority(&self) -> &Arc<TenantAuthority> {
        &self.state.inner.authority
    }

    /// The settings in force.
    pub fn config(&self) -> &ServerConfig {
        &self.state.inner.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    /// A handler that panics (only in this test) gets the client a 500 in the error shape, on
    /// a guarded route and an open one, and the service goes on answering.
    #[tokio::test]
    async fn a_panicking_handler_gets_a_500_in_the_error_shape() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(
            netacl_store::SqliteStore::open(dir.path(), Default::default()).expect("store"),
        );
        let bootstrap = BootstrapClient {
            client_id: Some("ops".into()),
            client_secret: Some("a-long-secret-for-the-panic-test".into()),
        };
        let (service, _) = AdminService::start(store, ServerConfig::new("tenant.test"), bootstrap)
            .await
            .expect("start");
        let token = service
            .authority()
            .issue_client_credentials(&crate::auth::TokenRequest::client_credentials(
                "ops",
                "a-long-secret-for-the-panic-test",
                "https://tenant.test/api/v2/",
            ))
            .expect("token")
            .access_token;
        async fn panics() -> &'static str {
            panic!("a handler bug, in a test")
        }
        let extra = Router::new()
            .route(
                "/_netacl/v1/test/panic",
                axum::routing::get(panics)
                    .layer(axum::middleware::from_fn(crate::http::guard::guard)),
            )
            .route("/test/open-panic", axum::routing::get(panics));
        let router = service.router_with(extra);
        for (uri, authorized) in [
            ("/_netacl/v1/test/panic", true),
            ("/test/open-panic", false),
        ] {
            let mut request = Request::get(uri);
            if authorized {
                request = request.header("authorization", format!("Bearer {token}"));
            }
            let response = router
                .clone()
                .oneshot(request.body(Body::empty()).expect("request"))
                .await
                .expect("infallible");
            assert_eq!(
                response.status(),
                StatusCode::INTERNAL_SERVER_ERROR,
                "{uri}"
            );
            assert_eq!(
                response.headers()["content-type"],
                crate::http::error::JSON_UTF8,
                "{uri}"
            );
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
            assert_eq!(
                body,
                serde_json::json!({"statusCode": 500, "error": "Internal Server Error",
                                   "message": "Internal Server Error"}),
                "{uri}: no detail of the panic is sent"
            );
        }
        // The service goes on answering.
        let response = router
            .oneshot(
                Request::get("/api/v2/network-acls")
                    .header("authorization", format!("Bearer {token}"))
                    .body(Body::empty())
                    .expect("request"),
            )
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::OK);
    }
}

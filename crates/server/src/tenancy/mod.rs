//! Many tenants in one service: the registry of served tenants, host routing, and the tenant
//! directory an edge in the same process follows.
//!
//! Every tenant served has its own state ([`AppState`]: authority, rate limiter, runtime with
//! its engine, verified-token cache, signing keys). A middleware, the outermost after the panic
//! guard, resolves the request's host (`Host`, or the URI authority of HTTP/2) to one of them
//! with one hash-map lookup and puts it in the request's extensions; handlers take it from there.
//!
//! - While the default tenant is the only tenant, every host selects it (zero configuration).
//! - As soon as another tenant exists, routing is strict: a host that is no tenant's domain, or
//!   a request without a host, is refused with `421 Misdirected Request` and one fixed body
//!   (`errorCode: unknown_host`) before any other work; a malformed host is a `400`.
//! - Whatever the number of tenants, a request naming two hosts (two `Host` headers, or a
//!   `Host` and a URI authority that differ) is refused with `421` (`errorCode:
//!   ambiguous_host`), as the edge refuses it: a proxy in front could route by the other one.
//! - Tenants are loaded at start and added or removed at run time (the operator API, and a poll
//!   of the store's tenants generation for the CLI and other nodes).
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::StatusCode;
use netacl_model::{ManagedLists, RuleSet};
use netacl_secrets::Kek;
use netacl_store::{Store, TenantId, TenantRecord};
use tokio::sync::watch;

use crate::auth::{AuthorityConfig, TenantAuthority};
use crate::config::ServerConfig;
use crate::http::error::ApiError;
use crate::http::rate_limit::RateLimiter;
use crate::resources::signing_keys::SigningKeys;
use crate::tenant::TenantRuntime;
use crate::{AppState, Shared, StartError};

pub(crate) mod feed;
pub(crate) mod sync;

/// How often the set of tenants is compared with the store's (its tenants generation).
pub const TENANTS_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// One tenant the service serves, as an edge in the same process sees it.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServedTenantInfo {
    /// The tenant.
    pub id: TenantId,
    /// The hosts that select it, canonical (lowercase, no port, no trailing dot, A-labels).
    pub domains: Vec<String>,
    /// The engine holding its live compiled policy.
    pub engine: Arc<netacl_eval::Engine>,
    /// Its installed rule sets (a new value after each install), as
    /// [`AdminService::rule_sets`](crate::AdminService::rule_sets) for the default tenant.
    pub rule_sets: watch::Receiver<Arc<RuleSet>>,
}

impl std::fmt::Debug for ServedTenantInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedTenantInfo")
            .field("id", &self.id)
            .field("domains", &self.domains)
            .finish_non_exhaustive()
    }
}

/// Every tenant served, with a host index. A new value is published on every tenant added or
/// removed ([`AdminService::tenants`](crate::AdminService::tenants)); rule changes inside a
/// tenant go through that tenant's engine and rule sets.
#[derive(Debug, Clone, Default)]
pub struct TenantDirectory {
    /// The tenants, ordered by id.
    pub tenants: Vec<ServedTenantInfo>,
    by_host: HashMap<String, usize>,
    default: Option<usize>,
}

impl TenantDirectory {
    fn new(mut tenants: Vec<ServedTenantInfo>) -> Self {
        tenants.sort_by(|a, b| a.id.cmp(&b.id));
        let mut by_host = HashMap::new();
        let mut default = None;
        for (index, tenant) in tenants.iter().enumerate() {
            if tenant.id.as_str() == TenantId::DEFAULT {
                default = Some(index);
            }
            for domain in &tenant.domains {
                by_host.insert(domain.clone(), index);
            }
        }
        Self {
            tenants,
            by_host,
            default,
        }
    }

    /// Whether routing is strict: some tenant other than the default one exists. When it is
    /// not, every host selects the default tenant.
    pub fn is_strict(&self) -> bool {
        self.tenants.len() > 1 || self.default.is_none()
    }

    /// The tenant a canonical host (see `netacl_model::request_host`) selects, under the rules
    /// of the admin API: the default tenant for every host while it is the only one, else the
    /// tenant owning the domain, if any.
    pub fn for_host(&self, host: &str) -> Option<&ServedTenantInfo> {
        if !self.is_strict() {
            return self.default.map(|i| &self.tenants[i]);
        }
        self.by_host.get(host).map(|&i| &self.tenants[i])
    }

    /// The tenant with this id, if served.
    pub fn get(&self, id: &TenantId) -> Option<&ServedTenantInfo> {
        self.tenants
            .binary_search_by(|t| t.id.cmp(id))
            .ok()
            .map(|i| &self.tenants[i])
    }
}

/// The served tenants' states, indexed by host and by id.
#[derive(Default)]
struct Table {
    by_host: HashMap<String, AppState>,
    by_id: HashMap<TenantId, AppState>,
    generation: u64,
}

impl Table {
    fn strict(&self) -> bool {
        self.by_id.len() > 1
    }
}

/// The registry of served tenants (see the module docs).
pub(crate) struct Registry {
    base: ServerConfig,
    store: Arc<dyn Store>,
    kek: Arc<Kek>,
    default: AppState,
    table: ArcSwap<Table>,
    directory: watch::Sender<Arc<TenantDirectory>>,
    /// Serialises changes to the table (the operator API, the poll).
    changes: tokio::sync::Mutex<()>,
    /// Whether the poll also catches up each tenant's rules (nodes sharing a database).
    follow_rules: std::sync::atomic::AtomicBool,
    /// Every tenant's changes, for the operator's tenants watch.
    feed: Arc<crate::tenancy::feed::ChangeFeed>,
    /// The console's sessions: a tenant no longer served loses its sessions at once.
    sessions: Arc<crate::console::Sessions>,
}

/// The hosts that select the default tenant: its configured domain without the port.
fn default_hosts(config: &ServerConfig) -> Vec<String> {
    netacl_model::request_host(&config.tenant_domain)
        .map(|h| vec![h])
        .unwrap_or_default()
}

fn info(state: &AppState, domains: Vec<String>) -> ServedTenantInfo {
    let tenant = &state.inner.tenant;
    ServedTenantInfo {
        id: tenant.id.clone(),
        domains,
        engine: Arc::clone(tenant.engine()),
        rule_sets: tenant.subscribe(),
    }
}

impl Registry {
    /// The registry serving `default` and every other tenant of the store.
    pub(crate) async fn load(
        base: ServerConfig,
        store: Arc<dyn Store>,
        kek: Arc<Kek>,
        default: AppState,
        sessions: Arc<crate::console::Sessions>,
    ) -> Result<Arc<Self>, StartError> {
        let generation = store.tenants_generation().await?;
        let mut table = Table {
            generation,
            ..Table::default()
        };
        for host in default_hosts(&base) {
            table.by_host.insert(host, default.clone());
        }
        table
            .by_id
            .insert(TenantId::default_tenant(), default.clone());
        let mut after: Option<TenantId> = None;
        loop {
            let page = store.list_tenants(after.as_ref(), 500).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            for record in page {
                if record.id.as_str() == TenantId::DEFAULT {
                    continue;
                }
                let state = load_tenant(&base, &store, &kek, &record).await?;
                for domain in &record.domains {
                    table.by_host.insert(domain.clone(), state.clone());
                }
                table.by_id.insert(record.id.clone(), state);
            }
        }
        let (directory, _) = watch::channel(Arc::new(TenantDirectory::default()));
        let registry = Arc::new(Self {
            base,
            store,
            kek,
            default,
            table: ArcSwap::from_pointee(table),
            directory,
            changes: tokio::sync::Mutex::new(()),
            follow_rules: std::sync::atomic::AtomicBool::new(false),
            feed: crate::tenancy::feed::ChangeFeed::new(),
            sessions,
        });
        registry.publish();
        crate::tenancy::feed::follow(&registry, Arc::clone(&registry.feed));
        tokio::spawn(poll(Arc::downgrade(&registry)));
        Ok(registry)
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<TenantDirectory>> {
        self.directory.subscribe()
    }

    pub(crate) fn operator_token(&self) -> Option<&crate::auth::operator_token::OperatorToken> {
        self.base.operator_token.as_ref()
    }

    pub(crate) fn body_limit(&self) -> usize {
        self.base.body_limit
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn kek(&self) -> &Arc<Kek> {
        &self.kek
    }

    /// The change feed of the operator's tenants watch.
    pub(crate) fn feed(&self) -> &Arc<crate::tenancy::feed::ChangeFeed> {
        &self.feed
    }

    /// Every served tenant's runtime, by id.
    pub(crate) fn served_runtimes(&self) -> HashMap<TenantId, Arc<TenantRuntime>> {
        self.table
            .load()
            .by_id
            .iter()
            .map(|(id, state)| (id.clone(), Arc::clone(&state.inner.tenant)))
            .collect()
    }

    /// A served tenant's state and its domains, as the directory publishes them.
    pub(crate) fn served(&self, id: &TenantId) -> Option<(AppState, Vec<String>)> {
        let state = self.table.load().by_id.get(id).cloned()?;
        let domains = self.directory.borrow().get(id).map(|t| t.domains.clone())?;
        Some((state, domains))
    }

    pub(crate) fn follow_rules(&self) {
        self.follow_rules
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn publish(&self) {
        let table = self.table.load();
        let mut tenants = Vec::with_capacity(table.by_id.len());
        for (id, state) in &table.by_id {
            let domains = if id.as_str() == TenantId::DEFAULT {
                default_hosts(&self.base)
            } else {
                let mut d: Vec<String> = table
                    .by_host
                    .iter()
                    .filter(|(_, s)| Arc::ptr_eq(&s.inner, &state.inner))
                    .map(|(h, _)| h.clone())
                    .collect();
                d.sort();
                d
            };
            tenants.push(info(state, domains));
        }
        self.directory
            .send_replace(Arc::new(TenantDirectory::new(tenants)));
    }

    /// The tenant a request's host selects (see the module docs).
    fn resolve(&self, request: &Request) -> Result<AppState, ApiError> {
        check_one_host(request)?;
        let table = self.table.load();
        if !table.strict() {
            return Ok(self.default.clone());
        }
        let raw = match request.headers().get(http::header::HOST) {
            Some(value) => Some(value.to_str().map_err(|_| ApiError::malformed_host())?),
            None => request.uri().authority().map(|a| a.as_str()),
        };
        let Some(raw) = raw else {
            return Err(ApiError::unknown_host());
        };
        let host = netacl_model::request_host(raw).map_err(|_| ApiError::malformed_host())?;
        table
            .by_host
            .get(&host)
            .cloned()
            .ok_or_else(ApiError::unknown_host)
    }

    /// Serves a tenant just created (by this node's operator API): loaded from the store.
    pub(crate) async fn add(&self, record: &TenantRecord) -> Result<(), StartError> {
        let _guard = self.changes.lock().await;
        if self.table.load().by_id.contains_key(&record.id) {
            return Ok(());
        }
        let state = load_tenant(&self.base, &self.store, &self.kek, record).await?;
        let current = self.table.load();
        let mut by_host = current.by_host.clone();
        let mut by_id = current.by_id.clone();
        for domain in &record.domains {
            by_host.insert(domain.clone(), state.clone());
        }
        by_id.insert(record.id.clone(), state);
        self.table.store(Arc::new(Table {
            by_host,
            by_id,
            generation: current.generation,
        }));
        self.publish();
        Ok(())
    }

    /// Stops serving a tenant (deleted): its hosts answer 421 from now on, its tokens select
    /// no tenant, its console sessions are gone.
    pub(crate) async fn remove(&self, id: &TenantId) {
        let _guard = self.changes.lock().await;
        self.remove_locked(id);
    }

    fn remove_locked(&self, id: &TenantId) {
        if id.as_str() == TenantId::DEFAULT {
            return;
        }
        let current = self.table.load();
        let Some(state) = current.by_id.get(id) else {
            return;
        };
        let mut by_host = current.by_host.clone();
        by_host.retain(|_, s| !Arc::ptr_eq(&s.inner, &state.inner));
        let mut by_id = current.by_id.clone();
        by_id.remove(id);
        self.table.store(Arc::new(Table {
            by_host,
            by_id,
            generation: current.generation,
        }));
        self.publish();
        let sessions = self.sessions.drop_tenant(id);
        tracing::info!(tenant = %id, console_sessions = sessions, "tenant no longer served");
    }

    /// Catches tenant `id` up with the store now (another node announced a change of its
    /// rules, or with `keys` of its signing keys), in the background; the poll remains the
    /// safety net for a notification lost.
    pub(crate) fn catch_up(&self, id: &netacl_store::TenantId, keys: bool) {
        let Some(state) = self.table.load().by_id.get(id).cloned() else {
            return;
        };
        let id = id.clone();
        tokio::spawn(async move {
            if keys {
                let _ = state.inner.signing_keys.reload().await;
            } else if let Err(err) = state.inner.tenant.refresh_from_store().await {
                tracing::debug!(tenant = %id, error = %err, "cannot catch up the tenant");
            }
        });
    }

    /// Re-reads the set of tenants now (another node created or deleted one), in the background.
    pub(crate) fn tenants_changed(self: &Arc<Self>) {
        let registry = Arc::clone(self);
        tokio::spawn(async move {
            if let Err(err) = registry.sync_tenants().await {
                tracing::debug!(error = %err, "cannot read the tenants");
            }
        });
    }

    /// Brings the served set in line with the store's when its tenants generation moved.
    async fn sync_tenants(&self) -> Result<(), StartError> {
        let generation = self.store.tenants_generation().await?;
        if generation == self.table.load().generation {
            return Ok(());
        }
        let mut stored = Vec::new();
        let mut after: Option<TenantId> = None;
        loop {
            let page = self.store.list_tenants(after.as_ref(), 500).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            stored.extend(page);
        }
        let served: Vec<TenantId> = self.table.load().by_id.keys().cloned().collect();
        for id in served {
            if !stored.iter().any(|r| r.id == id) {
                self.remove(&id).await;
            }
        }
        for record in &stored {
            if record.id.as_str() == TenantId::DEFAULT {
                continue;
            }
            // A tenant deleted and created again under the same id between two polls: its
            // state is rebuilt (new keys, no old data).
            let served = self.table.load().by_id.get(&record.id).cloned();
            if let Some(state) = served {
                let same = state.inner.config.tenant_domain == record.domain
                    && store_has_same_key(&self.store, record, &state).await;
                if same {
                    continue;
                }
                self.remove(&record.id).await;
            }
            if let Err(err) = self.add(record).await {
                tracing::error!(tenant = %record.id, error = %err, "cannot serve the tenant");
            }
        }
        let _guard = self.changes.lock().await;
        let current = self.table.load();
        self.table.store(Arc::new(Table {
            by_host: current.by_host.clone(),
            by_id: current.by_id.clone(),
            generation,
        }));
        Ok(())
    }
}

/// Refuses a request naming more than one host ([`ApiError::ambiguous_host`]): two `Host`
/// headers, or a `Host` and a URI authority (an absolute-form target over HTTP/1.1, the
/// `:authority` of HTTP/2) that are not the same host in canonical form (case, port and a
/// trailing dot aside; compared as bytes, without case, when either is not a host name). A
/// proxy in front of the service could pick the other one than the tenant selection would, so
/// the request is refused whatever the number of tenants, as the edge refuses it (421).
fn check_one_host(request: &Request) -> Result<(), ApiError> {
    let mut hosts = request.headers().get_all(http::header::HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(ApiError::ambiguous_host());
    }
    let (Some(host), Some(authority)) = (first, request.uri().authority()) else {
        return Ok(());
    };
    let authority = authority.as_str();
    let canonical = |raw: &str| netacl_model::request_host(raw).ok();
    let same = match (host.to_str().ok().and_then(canonical), canonical(authority)) {
        (Some(host), Some(authority)) => host == authority,
        _ => host.as_bytes().eq_ignore_ascii_case(authority.as_bytes()),
    };
    if same {
        Ok(())
    } else {
        Err(ApiError::ambiguous_host())
    }
}

/// Whether the served state's signing keys are still those the store holds for the tenant (a
/// tenant deleted and re-created under its id has new ones).
async fn store_has_same_key(
    store: &Arc<dyn Store>,
    record: &TenantRecord,
    state: &AppState,
) -> bool {
    let Ok(keys) = store.signing_keys(&record.id).await else {
        return true;
    };
    let served = state.inner.authority.signing_key();
    keys.iter().any(|k| k.kid == served.kid())
}

/// The background poll: the set of tenants every [`TENANTS_POLL_INTERVAL`], and with
/// [`Registry::follow_rules`] each non-default tenant's rules.
async fn poll(registry: Weak<Registry>) {
    let mut ticker = tokio::time::interval(TENANTS_POLL_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut reachable = true;
    loop {
        ticker.tick().await;
        let Some(registry) = registry.upgrade() else {
            return;
        };
        match registry.sync_tenants().await {
            Ok(()) => reachable = true,
            Err(err) => {
                if reachable {
                    tracing::warn!(error = %err, "cannot read the tenants; serving the last set");
                }
                reachable = false;
            }
        }
        if registry
            .follow_rules
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            let table = registry.table.load_full();
            for (id, state) in &table.by_id {
                if id.as_str() == TenantId::DEFAULT {
                    continue;
                }
                if let Err(err) = state.inner.tenant.refresh_from_store().await {
                    tracing::debug!(tenant = %id, error = %err, "cannot catch up the tenant");
                }
                let _ = state.inner.signing_keys.reload().await;
            }
        }
    }
}

/// The state of a tenant other than the default one, from the store: its signing keys (sealed
/// with the service's key-encryption key), its clients, its rules.
pub(crate) async fn load_tenant(
    base: &ServerConfig,
    store: &Arc<dyn Store>,
    kek: &Arc<Kek>,
    record: &TenantRecord,
) -> Result<AppState, StartError> {
    let mut config = base.clone();
    config.tenant_domain = record.domain.clone();
    config.managed_list_files = ManagedLists::new();
    config.signing_key = None;
    config.operator_token = None;
    let authority_config = AuthorityConfig::new(record.domain.clone())
        .with_token_lifetime_secs(config.token_lifetime_secs);
    let (prepared, authority) = SigningKeys::prepare(
        Arc::clone(store),
        record.id.clone(),
        Arc::clone(kek),
        record.domain.clone(),
        None,
        |key| Ok(Arc::new(TenantAuthority::new(authority_config, key, [])?)),
    )
    .await?;
    let mut clients = store.clients(&record.id).await?;
    crate::auth::key_material::drop_from_bootstrap_clients(store, &record.id, &mut clients).await?;
    for client in clients {
        authority.upsert_client(authority.management_client(
            client.client_id.clone(),
            client.secret_hash.clone(),
            crate::auth::with_added_scopes(&client.scopes),
        ))?;
    }
    let limiter = RateLimiter::new(config.rate_limit)?;
    let tenant = TenantRuntime::load(
        Arc::clone(store),
        record.id.clone(),
        config.limits,
        &ManagedLists::new(),
        Arc::clone(kek),
    )
    .await?;
    Ok(AppState {
        inner: Arc::new(Shared {
            config,
            authority,
            limiter,
            tenant,
            verified: crate::http::guard::VerifiedTokens::new(),
            signing_keys: Arc::clone(&prepared.keys),
        }),
    })
}

/// The middleware selecting the tenant (see the module docs).
pub(crate) async fn select_tenant(
    State(registry): State<Arc<Registry>>,
    mut request: Request,
    next: Next,
) -> Response {
    match registry.resolve(&request) {
        Ok(state) => {
            request.extensions_mut().insert(state);
            next.run(request).await
        }
        Err(err) => err.into_response(),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for AppState {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts.extensions.get::<AppState>().cloned().ok_or_else(|| {
            // Only a route mounted outside the tenant middleware could get here.
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                "Internal Server Error",
            )
        })
    }
}

//! Console sessions: opaque random ids mapped, in this process's memory, to the access token
//! the sign-in obtained. The token never leaves the server.
//!
//! The table is bounded per client, per tenant and in all ([`ConsoleSessionLimits`]); a new
//! session always finds room: it replaces its client's oldest session when the client holds its
//! share, else its tenant's oldest when the tenant does, else (the table full) the oldest session
//! of the tenant holding the most. So no tenant, whatever its clients do, keeps another from
//! signing in. A tenant no longer served has its sessions dropped at once ([`Sessions::drop_tenant`]).

use std::any::Any;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::HeaderMap;
use netacl_store::TenantId;
use rand::RngCore;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

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

/// Why a console request has no usable session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SessionError {
    /// No session cookie, an unknown id, or a session of another tenant.
    #[error("Sign in to the console first.")]
    Missing,
    /// The session's token has expired.
    #[error("The console session has expired: sign in again.")]
    Expired,
    /// `X-CSRF-Token` missing or not the session's.
    #[error("Missing or wrong X-CSRF-Token.")]
    Csrf,
    /// A browser request from another site.
    #[error("Cross-site requests to the console are refused.")]
    CrossSite,
}

/// The served tenant a session belongs to: its id (the per-tenant bound, its deletion) and the
/// instance serving it, so that a tenant deleted and created again under its id (a new
/// instance, new keys) never finds the sessions of the old one.
#[derive(Clone)]
pub(crate) struct Owner {
    tenant: TenantId,
    /// Held weakly: the allocation stays while the session does, so its address names this
    /// instance and no later one.
    instance: Weak<dyn Any + Send + Sync>,
}

impl Owner {
    /// The tenant `tenant` as served by `instance` (its state).
    pub(crate) fn new<T: Any + Send + Sync>(tenant: TenantId, instance: &Arc<T>) -> Self {
        let instance: Arc<dyn Any + Send + Sync> = instance.clone();
        Self {
            tenant,
            instance: Arc::downgrade(&instance),
        }
    }

    fn is(&self, other: &Owner) -> bool {
        self.tenant == other.tenant && Weak::ptr_eq(&self.instance, &other.instance)
    }
}

/// One signed-in console.
pub(crate) struct Session {
    id: String,
    owner: Owner,
    client_id: String,
    scopes: Vec<String>,
    token: Zeroizing<String>,
    csrf: String,
    expires: Instant,
    expires_in: Duration,
    /// Its place in the order of creation (the oldest goes first).
    seq: u64,
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Session {
    /// A session of `client_id` at `owner`, holding `token` for `lifetime`.
    pub(crate) fn new(
        owner: Owner,
        client_id: String,
        scopes: Vec<String>,
        token: String,
        lifetime: Duration,
    ) -> Self {
        Self {
            id: String::new(),
            owner,
            client_id,
            scopes,
            token: Zeroizing::new(token),
            csrf: random_token(),
            expires: Instant::now() + lifetime,
            expires_in: lifetime,
            seq: 0,
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// What the console's script may know: client, scopes, CSRF token, seconds left.
    pub(crate) fn info(&self) -> serde_json::Value {
        let left = self
            .expires
            .saturating_duration_since(Instant::now())
            .as_secs()
            .min(self.expires_in.as_secs());
        serde_json::json!({
            "client_id": self.client_id,
            "scopes": self.scopes,
            "csrf_token": self.csrf,
            "expires_in": left,
        })
    }

    /// The request's `X-CSRF-Token` is this session's (compared in constant time).
    pub(crate) fn check_csrf(&self, headers: &HeaderMap) -> Result<(), SessionError> {
        let sent = headers
            .get("x-csrf-token")
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if bool::from(sent.ct_eq(self.csrf.as_bytes())) {
            Ok(())
        } else {
            Err(SessionError::Csrf)
        }
    }
}

/// One tenant's sessions, oldest first, and by client.
#[derive(Default)]
struct TenantSessions {
    /// Creation order → session id.
    by_age: BTreeMap<u64, String>,
    /// Client id → its sessions' creation order, oldest first.
    by_client: HashMap<String, VecDeque<u64>>,
}

#[derive(Default)]
struct Table {
    by_id: HashMap<String, Arc<Session>>,
    tenants: HashMap<TenantId, TenantSessions>,
    next_seq: u64,
}

impl Table {
    fn remove(&mut self, id: &str) -> Option<Arc<Session>> {
        let session = self.by_id.remove(id)?;
        let tenant_id = &session.owner.tenant;
        if let Some(tenant) = self.tenants.get_mut(tenant_id) {
            tenant.by_age.remove(&session.seq);
            if let Some(seqs) = tenant.by_client.get_mut(&session.client_id) {
                seqs.retain(|&s| s != session.seq);
                if seqs.is_empty() {
                    tenant.by_client.remove(&session.client_id);
                }
            }
            if tenant.by_age.is_empty() {
                self.tenants.remove(tenant_id);
            }
        }
        Some(session)
    }

    /// The id of the oldest session of `tenant`, and whether it has expired.
    fn oldest_of_tenant(&self, tenant: &TenantId, now: Instant) -> Option<(String, bool)> {
        let (_, id) = self.tenants.get(tenant)?.by_age.first_key_value()?;
        let expired = self.by_id.get(id).is_none_or(|s| s.expires <= now);
        Some((id.clone(), expired))
    }

    fn oldest_of_client(&self, tenant: &TenantId, client: &str) -> Option<String> {
        let sessions = self.tenants.get(tenant)?;
        let seq = sessions.by_client.get(client)?.front()?;
        sessions.by_age.get(seq).cloned()
    }

    fn count_of(&self, tenant: &TenantId, client: Option<&str>) -> usize {
        let Some(sessions) = self.tenants.get(tenant) else {
            return 0;
        };
        match client {
            Some(client) => sessions.by_client.get(client).map_or(0, VecDeque::len),
            None => sessions.by_age.len(),
        }
    }

    /// The tenant holding the most sessions (of two alike, the one whose oldest is older).
    fn largest_tenant(&self) -> Option<TenantId> {
        self.tenants
            .iter()
            .max_by_key(|(_, s)| {
                let oldest = s.by_age.first_key_value().map_or(u64::MAX, |(&seq, _)| seq);
                (s.by_age.len(), std::cmp::Reverse(oldest))
            })
            .map(|(id, _)| id.clone())
    }
}

/// Every live session of this process (see the module docs).
pub(crate) struct Sessions {
    limits: ConsoleSessionLimits,
    table: Mutex<Table>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::new(ConsoleSessionLimits::default())
    }
}

impl Sessions {
    /// No session yet, bounded by `limits`.
    pub(crate) fn new(limits: ConsoleSessionLimits) -> Self {
        Self {
            limits,
            table: Mutex::new(Table::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `session` under a new random id, returned, making room as the module docs say.
    pub(crate) fn insert(&self, mut session: Session) -> String {
        let id = random_token();
        session.id = id.clone();
        let tenant = session.owner.tenant.clone();
        let client = session.client_id.clone();
        let now = Instant::now();
        let mut table = self.lock();
        // The tenant's expired sessions first: they are its oldest.
        while let Some((oldest, true)) = table.oldest_of_tenant(&tenant, now) {
            table.remove(&oldest);
        }
        while table.count_of(&tenant, Some(&client)) >= self.limits.per_client {
            let Some(oldest) = table.oldest_of_client(&tenant, &client) else {
                break;
            };
            table.remove(&oldest);
        }
        while table.count_of(&tenant, None) >= self.limits.per_tenant {
            let Some((oldest, _)) = table.oldest_of_tenant(&tenant, now) else {
                break;
            };
            table.remove(&oldest);
        }
        if table.by_id.len() >= self.limits.total {
            let expired: Vec<String> = table
                .by_id
                .values()
                .filter(|s| s.expires <= now)
                .map(|s| s.id.clone())
                .collect();
            for id in expired {
                table.remove(&id);
            }
        }
        while table.by_id.len() >= self.limits.total {
            let Some(largest) = table.largest_tenant() else {
                break;
            };
            let Some((oldest, _)) = table.oldest_of_tenant(&largest, now) else {
                break;
            };
            tracing::debug!(tenant = %largest, "console sessions full: the oldest session of the largest tenant replaced");
            table.remove(&oldest);
        }
        table.next_seq += 1;
        session.seq = table.next_seq;
        let entry = table.tenants.entry(tenant).or_default();
        entry.by_age.insert(session.seq, id.clone());
        entry
            .by_client
            .entry(client)
            .or_default()
            .push_back(session.seq);
        table.by_id.insert(id.clone(), Arc::new(session));
        id
    }

    /// The live session `id` of `owner`.
    pub(crate) fn get(&self, id: &str, owner: &Owner) -> Result<Arc<Session>, SessionError> {
        let mut table = self.lock();
        let session = table.by_id.get(id).ok_or(SessionError::Missing)?;
        if !session.owner.is(owner) {
            return Err(SessionError::Missing);
        }
        if session.expires <= Instant::now() {
            table.remove(id);
            return Err(SessionError::Expired);
        }
        Ok(Arc::clone(session))
    }

    /// Ends session `id`.
    pub(crate) fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Ends every session of `tenant` (no longer served); returns how many there were.
    pub(crate) fn drop_tenant(&self, tenant: &TenantId) -> usize {
        let mut table = self.lock();
        let Some(sessions) = table.tenants.remove(tenant) else {
            return 0;
        };
        for id in sessions.by_age.values() {
            table.by_id.remove(id);
        }
        sessions.by_age.len()
    }

    /// Live (or not yet collected) sessions in the table.
    pub(crate) fn len(&self) -> usize {
        self.lock().by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tenant {
        id: TenantId,
        instance: Arc<()>,
    }

    impl Tenant {
        fn new(id: &str) -> Self {
            Self {
                id: TenantId::new(id).unwrap(),
                instance: Arc::new(()),
            }
        }

        fn owner(&self) -> Owner {
            Owner::new(self.id.clone(), &self.instance)
        }

        fn session(&self, client: &str, lifetime: Duration) -> Session {
            Session::new(
                self.owner(),
                client.into(),
                vec!["read:network_acls".into()],
                "token".into(),
                lifetime,
            )
        }
    }

    const MINUTE: Duration = Duration::from_secs(60);

    fn limits(per_client: usize, per_tenant: usize, total: usize) -> ConsoleSessionLimits {
        ConsoleSessionLimits::new(per_client, per_tenant, total).unwrap()
    }

    #[test]
    fn a_session_is_found_by_its_id_at_its_own_tenant_only() {
        let sessions = Sessions::default();
        let (a, b) = (Tenant::new("a"), Tenant::new("b"));
        let id = sessions.insert(a.session("c", MINUTE));
        assert_eq!(sessions.get(&id, &a.owner()).unwrap().token(), "token");
        assert_eq!(
            sessions.get(&id, &b.owner()).err(),
            Some(SessionError::Missing)
        );
        assert_eq!(
            sessions.get("nope", &a.owner()).err(),
            Some(SessionError::Missing)
        );
        // Another instance of a tenant of the same id (deleted, created again): not found.
        let again = Tenant::new("a");
        assert_eq!(
            sessions.get(&id, &again.owner()).err(),
            Some(SessionError::Missing)
        );
        sessions.remove(&id);
        assert_eq!(
            sessions.get(&id, &a.owner()).err(),
            Some(SessionError::Missing)
        );
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn an_expired_session_is_refused_and_dropped() {
        let sessions = Sessions::default();
        let a = Tenant::new("a");
        let id = sessions.insert(a.session("c", Duration::ZERO));
        assert_eq!(
            sessions.get(&id, &a.owner()).err(),
            Some(SessionError::Expired)
        );
        assert_eq!(
            sessions.get(&id, &a.owner()).err(),
            Some(SessionError::Missing)
        );
    }

    #[test]
    fn the_csrf_token_must_be_the_sessions() {
        let s = Tenant::new("a").session("c", MINUTE);
        let mut headers = HeaderMap::new();
        assert_eq!(s.check_csrf(&headers), Err(SessionError::Csrf));
        headers.insert("x-csrf-token", "wrong".parse().unwrap());
        assert_eq!(s.check_csrf(&headers), Err(SessionError::Csrf));
        headers.insert("x-csrf-token", s.csrf.parse().unwrap());
        assert_eq!(s.check_csrf(&headers), Ok(()));
    }

    #[test]
    fn a_clients_oldest_session_is_replaced() {
        let sessions = Sessions::new(limits(2, 10, 20));
        let a = Tenant::new("a");
        let ids: Vec<String> = (0..3)
            .map(|_| sessions.insert(a.session("c", MINUTE)))
            .collect();
        let other = sessions.insert(a.session("d", MINUTE));
        assert_eq!(
            sessions.get(&ids[0], &a.owner()).err(),
            Some(SessionError::Missing)
        );
        for id in [&ids[1], &ids[2], &other] {
            assert!(sessions.get(id, &a.owner()).is_ok());
        }
    }

    #[test]
    fn a_tenants_oldest_session_is_replaced_and_no_tenant_fills_the_table() {
        let sessions = Sessions::new(limits(2, 4, 6));
        let (a, b) = (Tenant::new("a"), Tenant::new("b"));
        // Tenant a's clients sign in over and over: a keeps its newest 4.
        let mut of_a = Vec::new();
        for round in 0..10 {
            for client in ["c1", "c2", "c3"] {
                of_a.push(sessions.insert(a.session(&format!("{client}-{round}"), MINUTE)));
            }
        }
        assert_eq!(sessions.len(), 4);
        for (i, id) in of_a.iter().enumerate() {
            assert_eq!(
                sessions.get(id, &a.owner()).is_ok(),
                i >= of_a.len() - 4,
                "{i}"
            );
        }
        // Tenant b signs in three times: the table (6) is then full, and b's third session
        // replaces the oldest of the tenant holding the most (a).
        let of_b: Vec<String> = ["x", "y", "z"]
            .iter()
            .map(|c| sessions.insert(b.session(c, MINUTE)))
            .collect();
        assert_eq!(sessions.len(), 6);
        for id in &of_b {
            assert!(sessions.get(id, &b.owner()).is_ok());
        }
        assert_eq!(
            sessions.get(&of_a[of_a.len() - 4], &a.owner()).err(),
            Some(SessionError::Missing)
        );
        assert!(sessions.get(&of_a[of_a.len() - 3], &a.owner()).is_ok());
    }

    #[test]
    fn expired_sessions_make_room_before_live_ones() {
        let sessions = Sessions::new(limits(1, 2, 3));
        let (a, b, c) = (Tenant::new("a"), Tenant::new("b"), Tenant::new("c"));
        let stale = sessions.insert(a.session("a1", Duration::ZERO));
        let b1 = sessions.insert(b.session("b1", MINUTE));
        let b2 = sessions.insert(b.session("b2", MINUTE));
        // Full: the expired session goes, not the largest tenant's oldest live one.
        let c1 = sessions.insert(c.session("c1", MINUTE));
        assert_eq!(sessions.len(), 3);
        assert_eq!(
            sessions.get(&stale, &a.owner()).err(),
            Some(SessionError::Missing)
        );
        for (id, t) in [(&b1, &b), (&b2, &b), (&c1, &c)] {
            assert!(sessions.get(id, &t.owner()).is_ok());
        }
    }

    #[test]
    fn a_tenant_dropped_loses_every_session() {
        let sessions = Sessions::default();
        let (a, b) = (Tenant::new("a"), Tenant::new("b"));
        let ids: Vec<String> = (0..3)
            .map(|_| sessions.insert(a.session("c", MINUTE)))
            .collect();
        let kept = sessions.insert(b.session("c", MINUTE));
        assert_eq!(sessions.drop_tenant(&a.id), 3);
        assert_eq!(sessions.drop_tenant(&a.id), 0);
        for id in &ids {
            assert_eq!(
                sessions.get(id, &a.owner()).err(),
                Some(SessionError::Missing)
            );
        }
        assert!(sessions.get(&kept, &b.owner()).is_ok());
        assert_eq!(sessions.len(), 1);
    }

    #[test]
    fn limits_must_fit_together() {
        use super::ConsoleSessionLimitsError as E;
        assert_eq!(ConsoleSessionLimits::new(0, 1, 2), Err(E::Zero));
        assert!(matches!(
            ConsoleSessionLimits::new(3, 2, 5),
            Err(E::ClientAboveTenant { .. })
        ));
        assert!(matches!(
            ConsoleSessionLimits::new(1, 5, 5),
            Err(E::TotalNotAboveTenant { .. })
        ));
        let d = ConsoleSessionLimits::default();
        assert_eq!(
            ConsoleSessionLimits::new(d.per_client, d.per_tenant, d.total),
            Ok(d)
        );
    }
}

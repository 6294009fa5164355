//! Several nodes, one database: keeping a node in step with what other nodes commit.
//!
//! Each `netacl serve` node holds its tenant's committed network ACLs in memory (the snapshot the
//! reads are served from, the engine's compiled policy, the version the watch long poll waits
//! on). A node's own writes update all three before they are answered. Writes made by other
//! nodes sharing the database reach it two ways, and a [`StoreFollower`] uses both:
//!
//! - **Notifications.** The PostgreSQL backend sends `NOTIFY netacl_changes, '<tenant>:<version>'`
//!   inside every committing ACL transaction; each node listens on a dedicated connection
//!   ([`netacl_store::ChangeListener`]) and catches up as soon as one arrives (typically a few
//!   milliseconds after the commit).
//! - **A periodic version check** (every [`DEFAULT_SYNC_INTERVAL`]): one cheap query reads the
//!   tenant's committed version; when it differs from the served one, the node reloads the rule
//!   set, compiles it, swaps it into the engine and publishes it (which also wakes the watch
//!   long polls, so edges following this node converge too). A lost notification, a listener
//!   connection that dropped, or a database that went away and came back therefore cannot leave
//!   a node stale for longer than one interval after the database answers again.
//!
//! Catching up is serialised with the node's write path. A write a node makes from a snapshot
//! that is behind the database is refused by the store (the version it is conditioned on has
//! moved) and answered `409 conflict` ("changed concurrently; retry"); the node catches up within
//! an interval, so the client's retry succeeds.
//!
//! **Losing the database.** The engine keeps deciding with the last policy, reads of network ACLs
//! are served from memory, tokens are issued and verified from memory, and writes are answered
//! `503` with `errorCode: temporarily_unavailable` (nothing is acknowledged that is not
//! committed). The connection pool and the listener reconnect by themselves; the follower logs
//! the outage once and its end once.
//!
//! **Signing keys** are reloaded when the database announces a rotation or a revocation
//! (`NOTIFY netacl_changes, '<tenant>:keys'`), when the listener reconnects, and every
//! [`KEY_REFRESH_INTERVAL`](crate::KEY_REFRESH_INTERVAL) (a cheap read; keys are opened only
//! when something changed), so a revoked key's tokens stop on every node.
//!
//! **API clients** are re-read from the store every [`CLIENT_REFRESH_INTERVAL`], so a client
//! created, or a secret replaced, on one node is honoured by the others.
//!
//! **Rate limits are per node.** Each node keeps its own token buckets in memory; behind a load
//! balancer spreading a client over N nodes, the client's effective limit is up to N times the
//! configured one. This keeps the hot path free of database round trips and keeps the limiter
//! working while the database is away; size `--rate-limit-*` per node accordingly.
use std::sync::{Arc, Weak};
use std::time::Duration;

use netacl_store::{ChangeListener, ChangeNotice};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::auth::TenantAuthority;
use crate::resources::signing_keys::SigningKeys;
use crate::tenancy::Registry;
use crate::tenant::{LoadError, TenantRuntime};

/// How often a follower compares the committed version with the served one, by default.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(500);

/// How often a follower re-reads the API clients from the store.
pub const CLIENT_REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// A running follower (see the module docs); dropping it stops it.
#[derive(Debug)]
pub struct StoreFollower {
    task: JoinHandle<()>,
}

impl StoreFollower {
    pub(crate) fn start(
        tenant: Arc<TenantRuntime>,
        authority: Arc<TenantAuthority>,
        keys: Arc<SigningKeys>,
        listener: Option<ChangeListener>,
        interval: Duration,
        others: Weak<Registry>,
    ) -> Self {
        let interval = interval.max(Duration::from_millis(10));
        let task = tokio::spawn(follow(tenant, authority, keys, listener, interval, others));
        Self { task }
    }
}

impl Drop for StoreFollower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why the follower woke up.
enum Wake {
    Tick,
    Notice(ChangeNotice),
    ListenerGone,
}

async fn follow(
    tenant: Arc<TenantRuntime>,
    authority: Arc<TenantAuthority>,
    keys: Arc<SigningKeys>,
    mut listener: Option<ChangeListener>,
    interval: Duration,
    others: Weak<Registry>,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut reachable = true;
    let mut clients_read_at: Option<Instant> = None;
    let mut keys_read_at = Instant::now();
    let mut last_compile_error: Option<String> = None;
    loop {
        let wake = tokio::select! {
            _ = ticker.tick() => Wake::Tick,
            notice = next_notice(&mut listener) => match notice {
                Some(notice) => Wake::Notice(notice),
                None => Wake::ListenerGone,
            },
        };
        match wake {
            Wake::ListenerGone => {
                tracing::error!("change listener ended; following by version checks only");
                listener = None;
                continue;
            }
            Wake::Notice(ChangeNotice::KeysChanged { tenant: ref id }) => {
                if *id == tenant.id {
                    keys_read_at = Instant::now();
                    reload_keys(&keys).await;
                } else if let Some(registry) = others.upgrade() {
                    registry.catch_up(id, true);
                }
                continue;
            }
            Wake::Notice(ChangeNotice::TenantsChanged) => {
                if let Some(registry) = others.upgrade() {
                    registry.tenants_changed();
                }
                continue;
            }
            Wake::Notice(ChangeNotice::Connected) => {
                // Key changes made while the listener was away were not heard.
                keys_read_at = Instant::now();
                reload_keys(&keys).await;
            }
            Wake::Notice(ChangeNotice::Changed {
                tenant: ref id,
                version,
            }) if *id != tenant.id || version == tenant.snapshot().version => {
                // Another tenant's change (caught up at once: its rules, lists and keys are
                // served from its own runtime), or our own write.
                if *id != tenant.id {
                    if let Some(registry) = others.upgrade() {
                        registry.catch_up(id, false);
                    }
                }
                continue;
            }
            Wake::Notice(_) | Wake::Tick => {}
        }
        let before = tenant.snapshot().version;
        match tenant.refresh_from_store().await {
            Ok(version) => {
                if !reachable {
                    tracing::info!(version, "database reachable again");
                    reachable = true;
                }
                last_compile_error = None;
                if version != before {
                    tracing::debug!(from = before, to = version, "caught up with the database");
                }
            }
            Err(LoadError::Compile(reason)) => {
                // Another node committed a rule set this node cannot compile (its limits differ):
                // keep enforcing the last good one, and say so once per reason.
                if last_compile_error.as_deref() != Some(reason.as_str()) {
                    tracing::error!(
                        %reason,
                        version = before,
                        "the committed rule set does not compile on this node; \
                         serving the last one (check that all nodes run with the same limits)"
                    );
                    last_compile_error = Some(reason);
                }
                continue;
            }
            Err(err) => {
                if reachable {
                    tracing::warn!(
                        error = %err,
                        version = before,
                        "cannot follow the database; serving the last rule set"
                    );
                    reachable = false;
                }
                continue;
            }
        }
        if keys_read_at.elapsed() >= crate::resources::signing_keys::KEY_REFRESH_INTERVAL {
            keys_read_at = Instant::now();
            reload_keys(&keys).await;
        }
        let due = clients_read_at.is_none_or(|at| at.elapsed() >= CLIENT_REFRESH_INTERVAL);
        if due {
            clients_read_at = Some(Instant::now());
            refresh_clients(&tenant, &authority).await;
        }
    }
}

/// Installs the signing keys another node rotated or revoked.
async fn reload_keys(keys: &SigningKeys) {
    if let Err(err) = keys.reload().await {
        tracing::warn!(error = %err, "cannot reload the signing keys; keeping those in force");
    }
}

async fn next_notice(listener: &mut Option<ChangeListener>) -> Option<ChangeNotice> {
    match listener {
        Some(listener) => listener.recv().await,
        None => std::future::pending().await,
    }
}

/// Registers clients created (or whose secret was replaced) on other nodes.
async fn refresh_clients(tenant: &TenantRuntime, authority: &TenantAuthority) {
    let clients = match tenant.store().clients(&tenant.id).await {
        Ok(clients) => clients,
        Err(err) => {
            tracing::debug!(error = %err, "cannot re-read API clients");
            return;
        }
    };
    for stored in clients {
        // As served at load: a bootstrap client never regains the key material scope here.
        let scopes = crate::auth::with_added_scopes(&stored.scopes);
        let current = authority.client(&stored.client_id);
        let unchanged =
            current.is_some_and(|c| c.secret_hash == stored.secret_hash && c.scopes == scopes);
        if unchanged {
            continue;
        }
        let record =
            authority.management_client(stored.client_id.clone(), stored.secret_hash, scopes);
        match authority.upsert_client(record) {
            Ok(_) => {
                tracing::info!(client_id = %stored.client_id, "API client updated from the store")
            }
            Err(err) => {
                tracing::warn!(client_id = %stored.client_id, error = %err, "stored API client refused")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Two "nodes" on one SQLite file (two store handles): the follower's version-check path,
    //! which catches up without any notification.
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use netacl_model::{AclId, Limits, NetworkAcl, NetworkAclSpec, Timestamp};
    use netacl_store::{SqliteStore, Store, StoredClient, TenantId};

    use super::*;
    use crate::auth::{AuthorityConfig, SigningKey};
    use crate::tenant::Change;

    fn acl(seed: u128, priority: u64) -> NetworkAcl {
        let spec = NetworkAclSpec::from_json(
            &serde_json::json!({
                "description": "t", "active": true, "priority": priority,
                "rule": {"action": {"block": true}, "scope": "tenant",
                         "match": {"ipv4_cidrs": ["192.0.2.0/24"]}}
            }),
            &Limits::default(),
        )
        .expect("spec");
        let now = Timestamp::from_unix_millis(1_700_000_000_000);
        NetworkAcl {
            id: AclId::from_random(seed),
            spec,
            created_at: now,
            updated_at: now,
        }
    }

    async fn node(dir: &std::path::Path) -> Arc<TenantRuntime> {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir, Limits::default()).expect("open"));
        let tenant = TenantId::default_tenant();
        store
            .ensure_tenant(&tenant, "localhost")
            .await
            .expect("tenant");
        let kek = Arc::new(netacl_secrets::Kek::generate().expect("kek"));
        TenantRuntime::load(store, tenant, Limits::default(), &Default::default(), kek)
            .await
            .expect("load")
    }

    fn authority() -> Arc<TenantAuthority> {
        let key = SigningKey::generate().expect("key");
        Arc::new(
            TenantAuthority::new(AuthorityConfig::new("localhost"), key, []).expect("authority"),
        )
    }

    /// The node's signing keys (a key of its own, unrelated to `authority()`'s).
    async fn keys(node: &TenantRuntime) -> Arc<SigningKeys> {
        let kek = Arc::new(netacl_secrets::Kek::generate().expect("kek"));
        let (prepared, _) = SigningKeys::prepare(
            Arc::clone(node.store()),
            node.id.clone(),
            kek,
            "localhost".into(),
            None,
            |key| {
                Ok(Arc::new(
                    TenantAuthority::new(AuthorityConfig::new("localhost"), key, [])
                        .expect("authority"),
                ))
            },
        )
        .await
        .expect("keys");
        prepared.keys
    }

    /// Polls `f` every 10 ms for at most 10 s.
    async fn eventually(mut f: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if f() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn version_checks_alone_bring_a_node_up_to_date() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (node(dir.path()).await, node(dir.path()).await);
        let mut watch = b.subscribe();
        let _follower = StoreFollower::start(
            Arc::clone(&b),
            authority(),
            keys(&b).await,
            None,
            Duration::from_millis(20),
            Weak::new(),
        );

        let record = acl(1, 10);
        a.apply(Change::Create(Box::new(record.clone())))
            .await
            .expect("create on a");
        assert!(
            eventually(|| b.snapshot().version == 1).await,
            "b caught up"
        );
        assert_eq!(b.policy().version(), 1);
        assert_eq!(
            b.snapshot().get(&record.id).map(|s| s.acl.clone()),
            Some(record.clone())
        );
        // The watch long polls of b were woken with the new version.
        assert_eq!(watch.borrow_and_update().version, 1);

        a.apply(Change::Delete(record.id.clone()))
            .await
            .expect("delete on a");
        assert!(
            eventually(|| b.snapshot().version == 2).await,
            "b caught up again"
        );
        assert!(b.snapshot().get(&record.id).is_none());
        assert_eq!(b.policy().version(), 2);
    }

    #[tokio::test]
    async fn managed_lists_written_on_one_node_reach_the_other() {
        use netacl_model::{ManagedList, ManagedListName};
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (node(dir.path()).await, node(dir.path()).await);
        let _follower = StoreFollower::start(
            Arc::clone(&b),
            authority(),
            keys(&b).await,
            None,
            Duration::from_millis(20),
            Weak::new(),
        );
        let list = Arc::new(ManagedList::from_lines("192.0.2.0/24\n", 10).expect("list"));
        a.apply(Change::PutList(ManagedListName::Tor, Arc::clone(&list)))
            .await
            .expect("put on a");
        assert!(
            eventually(|| b.snapshot().version == 1).await,
            "b caught up"
        );
        let on_b = b.snapshot();
        let entry = on_b
            .lists
            .effective(ManagedListName::Tor)
            .expect("tor on b");
        assert_eq!(entry.list.digest(), list.digest());
        assert_eq!(entry.version, 1);
        let index = Arc::clone(&on_b.lists.index);
        assert!(Arc::ptr_eq(b.policy().managed_index(), &index));
        // A rule change on a: b reloads the rules, not the list, and keeps its index.
        a.apply(Change::Create(Box::new(acl(1, 10))))
            .await
            .expect("create on a");
        assert!(
            eventually(|| b.snapshot().version == 2).await,
            "b caught up again"
        );
        assert!(Arc::ptr_eq(&b.snapshot().lists.index, &index));
        assert!(Arc::ptr_eq(b.policy().managed_index(), &index));
        a.apply(Change::DeleteList(ManagedListName::Tor))
            .await
            .expect("delete on a");
        assert!(eventually(|| b.snapshot().version == 3).await);
        assert!(b.snapshot().lists.effective(ManagedListName::Tor).is_none());
    }

    #[tokio::test]
    async fn a_stale_node_refuses_a_write_and_succeeds_after_catching_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (node(dir.path()).await, node(dir.path()).await);
        a.apply(Change::Create(Box::new(acl(1, 10))))
            .await
            .expect("create on a");
        // b still serves version 0: its write is conditioned on it and refused, nothing written.
        let refused = b
            .apply(Change::Create(Box::new(acl(2, 20))))
            .await
            .err()
            .expect("refused");
        assert_eq!(
            crate::ApiError::from(refused).status(),
            http::StatusCode::CONFLICT
        );
        assert_eq!(b.snapshot().version, 0);
        assert_eq!(b.refresh_from_store().await.expect("refresh"), 1);
        b.apply(Change::Create(Box::new(acl(2, 20))))
            .await
            .expect("retry on b");
        assert_eq!(b.snapshot().version, 2);
        assert_eq!(a.refresh_from_store().await.expect("refresh a"), 2);
        assert_eq!(a.snapshot().ordered.len(), 2);
        // Nothing to do when up to date.
        assert_eq!(a.refresh_from_store().await.expect("again"), 2);
    }

    #[tokio::test]
    async fn clients_registered_on_another_node_are_honoured() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = node(dir.path()).await;
        let authority = authority();
        assert!(authority.client("ops").is_none());
        let other = SqliteStore::open(dir.path(), Limits::default()).expect("open");
        let stored = StoredClient {
            client_id: "ops".into(),
            secret_hash: crate::auth::hash_client_secret("a-long-enough-secret-for-ops"),
            scopes: vec!["read:network_acls".into()],
            created_at_ms: 1,
        };
        netacl_store::CredentialStore::put_client(&other, &b.id, &stored)
            .await
            .expect("client");
        let _follower = StoreFollower::start(
            Arc::clone(&b),
            Arc::clone(&authority),
            keys(&b).await,
            None,
            Duration::from_millis(20),
            Weak::new(),
        );
        assert!(eventually(|| authority.client("ops").is_some()).await);
        let record = authority.client("ops").expect("client");
        assert_eq!(record.scopes, stored.scopes);
        assert_eq!(record.secret_hash, stored.secret_hash);
    }
}

//! One suite, every backend: the same async test functions run against the embedded SQLite store
//! and, when `NETACL_TEST_DATABASE_URL` names a PostgreSQL database, against PostgreSQL (each test
//! in a fresh database of its own). Without that variable the PostgreSQL cases print a notice and
//! pass, except under CI (`CI` set), where they fail: CI always provides a database.
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use netacl_model::{
    AclId, BrandingPatch, DirectoryData, GroupId, Limits, ManagedList, ManagedListName, NetworkAcl,
    NetworkAclSpec, Organization, OrganizationId, OrganizationSpec, Timestamp,
};
use netacl_store::{
    ChangeNotice, ImportReport, ManagedListStore, NetworkAclStore, PostgresStore, SqliteStore,
    Store, StoreError, StoredClient, StoredSigningKey, TenantId, TenantStore,
};
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// Backends

/// Opens another handle on the same database (a second process, or a second node).
type Reopen =
    Box<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

struct Backend {
    store: Arc<dyn Store>,
    reopen: Reopen,
    _keep: Option<tempfile::TempDir>,
}

async fn sqlite() -> Backend {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_owned();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&path, Limits::default()).expect("open sqlite"));
    let reopen: Reopen = Box::new(move || {
        let path = path.clone();
        Box::pin(async move {
            Arc::new(SqliteStore::open(&path, Limits::default()).expect("reopen sqlite"))
                as Arc<dyn Store>
        })
    });
    Backend {
        store,
        reopen,
        _keep: Some(dir),
    }
}

/// The test database's URL, or `None` (with a notice) when there is none and we are not in CI.
fn database_url(test: &str) -> Option<String> {
    match std::env::var("NETACL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but NETACL_TEST_DATABASE_URL is not: source .ci/postgres.sh")
        }
        _ => {
            eprintln!("skipping {test}: NETACL_TEST_DATABASE_URL is not set (see .ci/postgres.sh)");
            None
        }
    }
}

/// `url` with its database name replaced by `dbname` (URL or key=value form).
fn with_dbname(url: &str, dbname: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let (base, query) = match url.find('?') {
            Some(q) => (&url[..q], &url[q..]),
            None => (url, ""),
        };
        let after = &base[scheme_end + 3..];
        let authority = after.split('/').next().unwrap_or(after);
        format!("{}://{authority}/{dbname}{query}", &url[..scheme_end])
    } else {
        format!("{url} dbname={dbname}")
    }
}

/// A fresh, empty database on the test server; returns its URL.
async fn fresh_database(url: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database server");
    let driver = tokio::spawn(connection);
    let name = format!("netacl_t_{}_{}", std::process::id(), rand_suffix());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    drop(client);
    let _ = driver.await;
    with_dbname(url, &name)
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    nanos * 1000 + NEXT.fetch_add(1, Ordering::Relaxed)
}

async fn postgres(url: &str) -> (Backend, String) {
    let db = fresh_database(url).await;
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect(&db, Limits::default())
            .await
            .expect("connect postgres"),
    );
    let reopen_url = db.clone();
    let reopen: Reopen = Box::new(move || {
        let url = reopen_url.clone();
        Box::pin(async move {
            Arc::new(
                PostgresStore::connect(&url, Limits::default())
                    .await
                    .expect("reconnect postgres"),
            ) as Arc<dyn Store>
        })
    });
    (
        Backend {
            store,
            reopen,
            _keep: None,
        },
        db,
    )
}

/// `sqlite_NAME` and `postgres_NAME` for a conformance function `NAME(Backend)`.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::sqlite().await).await;
                }
            )*
        }
        mod postgres_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(url) = super::database_url(stringify!($name)) else { return };
                    let (backend, _) = super::postgres(&url).await;
                    super::$name(backend).await;
                }
            )*
        }
    };
}

conformance!(
    crud_bumps_the_version_and_orders_by_priority,
    refused_writes_change_nothing,
    tenants_are_isolated,
    records_and_credentials_survive_a_reopen,
    concurrent_writers_on_one_version_have_one_winner,
    two_handles_racing_for_one_priority_have_one_winner,
    signing_key_set_up_is_decided_once,
    directory_imports_are_idempotent_and_pages_follow_insertion,
    organization_names_are_unique_and_connections_must_exist,
    branding_patches_merge_across_handles,
    managed_lists_bump_the_version_and_read_back_what_changed,
);

// ---------------------------------------------------------------------------------------------
// The suite

fn acl(seed: u128, priority: u64, cidr: &str) -> NetworkAcl {
    let spec = NetworkAclSpec::from_json(
        &json!({
            "description": format!("rule {seed}"),
            "active": true,
            "priority": priority,
            "rule": {"action": {"block": true}, "scope": "tenant",
                     "match": {"ipv4_cidrs": [cidr]}}
        }),
        &Limits::default(),
    )
    .expect("valid spec");
    let now = Timestamp::from_unix_millis(1_700_000_000_000 + seed as i64);
    NetworkAcl {
        id: AclId::from_random(seed),
        spec,
        created_at: now,
        updated_at: now,
    }
}

async fn with_tenant(store: &Arc<dyn Store>) -> TenantId {
    let tenant = TenantId::default_tenant();
    let state = store
        .ensure_tenant(&tenant, "localhost:8080")
        .await
        .expect("tenant");
    assert_eq!(state.acl_version, 0);
    tenant
}

async fn crud_bumps_the_version_and_orders_by_priority(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let a = acl(1, 30, "10.0.0.0/8");
    let b = acl(2, 10, "192.0.2.1");
    assert_eq!(
        store.create_network_acl(&tenant, 0, &a).await.expect("a"),
        1
    );
    assert_eq!(
        store.create_network_acl(&tenant, 1, &b).await.expect("b"),
        2
    );

    let page = store.list_network_acls(&tenant, 0, 50).await.expect("list");
    assert_eq!((page.total, page.version), (2, 2));
    assert_eq!(page.acls, vec![b.clone(), a.clone()]);
    let second = store.list_network_acls(&tenant, 1, 1).await.expect("page");
    assert_eq!(second.acls, vec![a.clone()]);
    let past = store.list_network_acls(&tenant, 5, 1).await.expect("past");
    assert!(past.acls.is_empty());
    assert_eq!(past.total, 2);

    let mut a2 = acl(1, 5, "10.1.0.0/16");
    a2.created_at = a.created_at;
    a2.updated_at = Timestamp::from_unix_millis(a.created_at.unix_millis() + 5);
    assert_eq!(
        store
            .replace_network_acl(&tenant, 2, &a2)
            .await
            .expect("put"),
        3
    );
    assert_eq!(
        store.get_network_acl(&tenant, &a.id).await.expect("get"),
        a2
    );
    // Priorities can be swapped through a free one without tripping the unique constraint.
    assert_eq!(
        store
            .delete_network_acl(&tenant, 3, &b.id)
            .await
            .expect("del"),
        4
    );
    assert!(matches!(
        store.get_network_acl(&tenant, &b.id).await,
        Err(StoreError::NotFound(_))
    ));
    let rules = store.network_acl_rule_set(&tenant).await.expect("rules");
    assert_eq!(rules.version, 4);
    assert_eq!(rules.acls, vec![a2]);
    let state = store
        .tenant(&tenant)
        .await
        .expect("tenant")
        .expect("exists");
    assert_eq!(state.acl_version, 4);
}

async fn refused_writes_change_nothing(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let a = acl(1, 30, "10.0.0.0/8");
    store.create_network_acl(&tenant, 0, &a).await.expect("a");

    let twin = acl(2, 30, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 1, &twin).await,
        Err(StoreError::PriorityTaken(p)) if p.get() == 30
    ));
    let same_id = acl(1, 31, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 1, &same_id).await,
        Err(StoreError::DuplicateId(_))
    ));
    let c = acl(3, 40, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 0, &c).await,
        Err(StoreError::VersionConflict {
            expected: 0,
            actual: 1
        })
    ));
    assert!(matches!(
        store.create_network_acl(&tenant, 7, &c).await,
        Err(StoreError::VersionConflict {
            expected: 7,
            actual: 1
        })
    ));
    assert!(matches!(
        store.replace_network_acl(&tenant, 1, &c).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_network_acl(&tenant, 1, &c.id).await,
        Err(StoreError::NotFound(_))
    ));
    store.create_network_acl(&tenant, 1, &c).await.expect("c");
    let moved = acl(3, 30, "10.0.0.0/8");
    assert!(matches!(
        store.replace_network_acl(&tenant, 2, &moved).await,
        Err(StoreError::PriorityTaken(_))
    ));

    let rules = store.network_acl_rule_set(&tenant).await.expect("rules");
    assert_eq!(rules.version, 2);
    assert_eq!(rules.acls, vec![a, c]);
}

async fn tenants_are_isolated(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let other = TenantId::new("other-tenant").expect("id");
    store
        .ensure_tenant(&other, "other.example")
        .await
        .expect("other");
    let a = acl(1, 30, "10.0.0.0/8");
    store.create_network_acl(&tenant, 0, &a).await.expect("a");
    store
        .create_network_acl(&other, 0, &a)
        .await
        .expect("other a");
    assert_eq!(
        store
            .network_acl_rule_set(&other)
            .await
            .expect("rules")
            .acls,
        vec![a.clone()]
    );
    let unknown = TenantId::new("nobody").expect("id");
    assert!(matches!(
        store.create_network_acl(&unknown, 0, &a).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.network_acl_rule_set(&unknown).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.tenant(&unknown).await.expect("lookup"), None);
    let t = store.tenant(&other).await.expect("lookup").expect("exists");
    assert_eq!((t.domain.as_str(), t.acl_version), ("other.example", 1));
    // ensure_tenant keeps the version and updates the domain.
    let t = store
        .ensure_tenant(&other, "renamed.example")
        .await
        .expect("again");
    assert_eq!((t.domain.as_str(), t.acl_version), ("renamed.example", 1));
}

async fn records_and_credentials_survive_a_reopen(backend: Backend) {
    let tenant = TenantId::default_tenant();
    let a = acl(9, 77, "192.0.2.0/24");
    let key = StoredSigningKey {
        kid: "k1".into(),
        private_key_pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".into(),
        created_at_ms: 1,
    };
    let client = StoredClient {
        client_id: "bootstrap".into(),
        secret_hash: "hash".into(),
        scopes: vec!["read:network_acls".into(), "create:network_acls".into()],
        created_at_ms: 2,
    };
    {
        let store = &backend.store;
        with_tenant(store).await;
        store.create_network_acl(&tenant, 0, &a).await.expect("a");
        store.add_signing_key(&tenant, &key).await.expect("key");
        assert!(store.add_signing_key(&tenant, &key).await.is_err());
        store.put_client(&tenant, &client).await.expect("client");
        let rotated = StoredClient {
            secret_hash: "hash2".into(),
            ..client.clone()
        };
        store.put_client(&tenant, &rotated).await.expect("rotate");
    }
    drop(backend.store);
    let store = (backend.reopen)().await;
    let t = store
        .ensure_tenant(&tenant, "example.test")
        .await
        .expect("tenant");
    assert_eq!((t.acl_version, t.domain.as_str()), (1, "example.test"));
    assert_eq!(
        store
            .network_acl_rule_set(&tenant)
            .await
            .expect("rules")
            .acls,
        vec![a]
    );
    assert_eq!(store.signing_keys(&tenant).await.expect("keys"), vec![key]);
    let clients = store.clients(&tenant).await.expect("clients");
    assert_eq!(clients.len(), 1);
    assert_eq!(clients[0].secret_hash, "hash2");
    assert_eq!(clients[0].scopes, client.scopes);
    assert!(!format!("{:?}", store.signing_keys(&tenant).await.expect("k")[0]).contains("AAAA"));
}

async fn concurrent_writers_on_one_version_have_one_winner(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let mut tasks = Vec::new();
    for seed in 0..8u128 {
        let (store, tenant) = (Arc::clone(&store), tenant.clone());
        tasks.push(tokio::spawn(async move {
            store
                .create_network_acl(&tenant, 0, &acl(100 + seed, 10 + seed as u64, "10.0.0.0/8"))
                .await
        }));
    }
    let mut wins = 0;
    for task in tasks {
        match task.await.expect("join") {
            Ok(version) => {
                assert_eq!(version, 1);
                wins += 1;
            }
            Err(StoreError::VersionConflict {
                expected: 0,
                actual: 1,
            }) => {}
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(wins, 1);
    let rules = store.network_acl_rule_set(&tenant).await.expect("rules");
    assert_eq!((rules.version, rules.acls.len()), (1, 1));
}

/// Two handles (two nodes) each believing the version is the one they read, both creating the
/// same priority: exactly one commits, whatever the interleaving.
async fn two_handles_racing_for_one_priority_have_one_winner(backend: Backend) {
    let first = backend.store;
    let tenant = with_tenant(&first).await;
    let second = (backend.reopen)().await;
    for round in 0..10u64 {
        let version = first
            .tenant(&tenant)
            .await
            .expect("t")
            .expect("t")
            .acl_version;
        let priority = 20 + round;
        let (t1, t2) = (tenant.clone(), tenant.clone());
        let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
        let a = tokio::spawn(async move {
            s1.create_network_acl(
                &t1,
                version,
                &acl(1000 + round as u128, priority, "10.0.0.0/8"),
            )
            .await
        });
        let b = tokio::spawn(async move {
            s2.create_network_acl(
                &t2,
                version,
                &acl(2000 + round as u128, priority, "10.0.0.0/8"),
            )
            .await
        });
        let results = [a.await.expect("join"), b.await.expect("join")];
        let wins = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {results:?}");
        for result in &results {
            assert!(
                matches!(
                    result,
                    Ok(_) | Err(StoreError::VersionConflict { .. } | StoreError::PriorityTaken(_))
                ),
                "{result:?}"
            );
        }
    }
    let rules = second.network_acl_rule_set(&tenant).await.expect("rules");
    assert_eq!((rules.version, rules.acls.len()), (10, 10));
}

async fn signing_key_set_up_is_decided_once(backend: Backend) {
    let first = backend.store;
    let tenant = with_tenant(&first).await;
    let second = (backend.reopen)().await;
    let key = |kid: &str, at: i64| StoredSigningKey {
        kid: kid.into(),
        private_key_pem: format!("pem of {kid}"),
        created_at_ms: at,
    };
    let (t1, t2) = (tenant.clone(), tenant.clone());
    let (k1, k2) = (key("node-a", 10), key("node-b", 11));
    let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
    let a = tokio::spawn(async move { s1.ensure_signing_key(&t1, &k1).await });
    let b = tokio::spawn(async move { s2.ensure_signing_key(&t2, &k2).await });
    let (a, b) = (
        a.await.expect("join").expect("a"),
        b.await.expect("join").expect("b"),
    );
    assert_eq!(a, b, "both nodes use one key");
    assert!(a.kid == "node-a" || a.kid == "node-b");
    assert_eq!(
        first.signing_keys(&tenant).await.expect("keys"),
        vec![a.clone()]
    );
    // Later starts keep the key.
    let again = second
        .ensure_signing_key(&tenant, &key("node-c", 12))
        .await
        .expect("again");
    assert_eq!(again, a);
}

const CON_A: &str = "con_AAAAAAAAAAAAAAAA";
const CON_B: &str = "con_BBBBBBBBBBBBBBBB";
const GROUP: &str = "grp_ABCDEFGHJKLMNPQR";
const AT: &str = "2024-01-02T03:04:05.000Z";

fn directory(members: &[&str], sessions: &[&str]) -> DirectoryData {
    let users: Vec<_> = ["auth0|u1", "auth0|u2", "auth0|u3"]
        .iter()
        .map(|u| json!({"user_id": u, "email": "user@example.com", "name": "A user", "created_at": AT}))
        .collect();
    DirectoryData::from_json(&json!({
        "connections": [{"id": CON_A, "name": "db-main", "strategy": "auth0"}],
        "users": users,
        "groups": [{"id": GROUP, "name": "ops", "description": "operators", "created_at": AT}],
        "members": members.iter().map(|m| json!({
            "group_id": GROUP, "id": m, "member_type": "user", "type": "connection",
            "connection_id": CON_A, "created_at": AT
        })).collect::<Vec<_>>(),
        "sessions": sessions.iter().map(|s| json!({
            "id": s, "user_id": "auth0|u1", "created_at": AT, "updated_at": AT,
            "authenticated_at": AT
        })).collect::<Vec<_>>(),
    }))
    .expect("valid directory data")
}

async fn directory_imports_are_idempotent_and_pages_follow_insertion(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let data = directory(&["auth0|u1", "auth0|u2"], &["s1", "s2", "s3"]);
    let first = store
        .import_directory(&tenant, &data)
        .await
        .expect("import");
    assert_eq!(
        first,
        ImportReport {
            inserted: 10,
            updated: 0,
            unchanged: 0
        }
    );
    let again = store.import_directory(&tenant, &data).await.expect("again");
    assert_eq!(
        again,
        ImportReport {
            inserted: 0,
            updated: 0,
            unchanged: 10
        }
    );
    // A later file adds a member: it sorts after the existing ones.
    let more = directory(&["auth0|u3"], &[]);
    let report = store.import_directory(&tenant, &more).await.expect("more");
    assert_eq!((report.inserted, report.unchanged), (1, 5));

    let group = GroupId::parse(GROUP).expect("group id");
    let page1 = store
        .group_members(&tenant, &group, None, 2)
        .await
        .expect("p1")
        .expect("group");
    let ids: Vec<_> = page1.items.iter().map(|m| m["id"].clone()).collect();
    assert_eq!(ids, vec![json!("auth0|u1"), json!("auth0|u2")]);
    let after = page1.next_after.expect("more follow");
    let page2 = store
        .group_members(&tenant, &group, Some(after), 2)
        .await
        .expect("p2")
        .expect("group");
    assert_eq!(page2.items.len(), 1);
    assert_eq!(page2.items[0]["id"], json!("auth0|u3"));
    assert_eq!(page2.next_after, None);
    let unknown = GroupId::parse("grp_ZZZZZZZZZZZZZZZZ").expect("id");
    assert_eq!(
        store
            .group_members(&tenant, &unknown, None, 2)
            .await
            .expect("none"),
        None
    );

    let sessions = store
        .user_sessions(&tenant, "auth0|u1", None, 2, true)
        .await
        .expect("sessions")
        .expect("user");
    assert_eq!(sessions.total, Some(3));
    assert_eq!(sessions.items.len(), 2);
    assert_eq!(sessions.items[0]["id"], json!("s1"));
    assert!(sessions.next_after.is_some());
    assert_eq!(
        store
            .user_sessions(&tenant, "auth0|nobody", None, 2, false)
            .await
            .expect("none"),
        None
    );
    // Another connection id with a stored connection's name is refused, and nothing is written.
    let clash = DirectoryData::from_json(&json!({
        "connections": [{"id": CON_B, "name": "db-main", "strategy": "auth0"}],
        "users": [{"user_id": "auth0|new", "email": "n@example.com", "name": "N", "created_at": AT}]
    }))
    .expect("valid");
    assert!(matches!(
        store.import_directory(&tenant, &clash).await,
        Err(StoreError::NameTaken(_))
    ));
    assert_eq!(
        store
            .user_sessions(&tenant, "auth0|new", None, 1, false)
            .await
            .expect("none"),
        None
    );
    let connections = store.connections(&tenant).await.expect("connections");
    assert_eq!(connections.len(), 1);
    assert_eq!(
        (connections[0].id.as_str(), connections[0].name.as_str()),
        (CON_A, "db-main")
    );
}

fn organization(seed: u128, name: &str, connections: &[&str]) -> Organization {
    let enabled: Vec<_> = connections
        .iter()
        .map(|c| json!({"connection_id": c}))
        .collect();
    let mut body = json!({"name": name, "display_name": "An organization"});
    if !enabled.is_empty() {
        body["enabled_connections"] = json!(enabled);
    }
    Organization {
        id: OrganizationId::from_random(seed),
        spec: OrganizationSpec::from_json(&body).expect("valid organization"),
    }
}

async fn organization_names_are_unique_and_connections_must_exist(backend: Backend) {
    let first = backend.store;
    let tenant = with_tenant(&first).await;
    first
        .import_directory(&tenant, &directory(&[], &[]))
        .await
        .expect("import");
    let connections = first
        .create_organization(&tenant, &organization(1, "acme", &[CON_A]))
        .await
        .expect("acme");
    assert_eq!(connections.len(), 1);
    assert_eq!(
        (
            connections[0].name.as_str(),
            connections[0].strategy.as_str()
        ),
        ("db-main", "auth0")
    );
    assert!(matches!(
        first
            .create_organization(&tenant, &organization(2, "acme", &[]))
            .await,
        Err(StoreError::NameTaken(_))
    ));
    assert!(matches!(
        first.create_organization(&tenant, &organization(3, "other", &[CON_B])).await,
        Err(StoreError::UnknownConnection(ref c)) if c == CON_B
    ));
    // Nothing was written by the refused create: the name is still free.
    first
        .create_organization(&tenant, &organization(4, "other", &[]))
        .await
        .expect("other");

    // Two handles racing for one name: exactly one wins.
    let second = (backend.reopen)().await;
    for round in 0..5u128 {
        let name = format!("race-{round}");
        let (t1, t2) = (tenant.clone(), tenant.clone());
        let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
        let (o1, o2) = (
            organization(100 + round, &name, &[]),
            organization(200 + round, &name, &[]),
        );
        let a = tokio::spawn(async move { s1.create_organization(&t1, &o1).await });
        let b = tokio::spawn(async move { s2.create_organization(&t2, &o2).await });
        let results = [a.await.expect("join"), b.await.expect("join")];
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        assert!(results
            .iter()
            .any(|r| matches!(r, Err(StoreError::NameTaken(_)))));
    }
}

async fn branding_patches_merge_across_handles(backend: Backend) {
    let first = backend.store;
    let tenant = with_tenant(&first).await;
    let second = (backend.reopen)().await;
    assert_eq!(
        first.branding(&tenant).await.expect("empty").to_json(),
        json!({})
    );
    let logo = BrandingPatch::from_json(&json!({"logo_url": "https://example.com/logo.png"}))
        .expect("patch");
    let favicon = BrandingPatch::from_json(&json!({"favicon_url": "https://example.com/f.ico"}))
        .expect("patch");
    let (t1, t2) = (tenant.clone(), tenant.clone());
    let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
    let a = tokio::spawn(async move { s1.update_branding(&t1, &logo).await });
    let b = tokio::spawn(async move { s2.update_branding(&t2, &favicon).await });
    a.await.expect("join").expect("logo");
    b.await.expect("join").expect("favicon");
    let merged = second.branding(&tenant).await.expect("merged").to_json();
    assert_eq!(merged["logo_url"], json!("https://example.com/logo.png"));
    assert_eq!(merged["favicon_url"], json!("https://example.com/f.ico"));
    let cleared = first
        .update_branding(
            &tenant,
            &BrandingPatch::from_json(&json!({"logo_url": null})).expect("p"),
        )
        .await
        .expect("clear");
    assert_eq!(cleared.to_json()["logo_url"], json!(null));
    assert_eq!(
        cleared.to_json()["favicon_url"],
        json!("https://example.com/f.ico")
    );
}

fn managed_list(lines: &str) -> ManagedList {
    ManagedList::from_lines(lines, 1_000).expect("valid list")
}

async fn managed_lists_bump_the_version_and_read_back_what_changed(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let tor = managed_list("192.0.2.0/24\n2001:db8::1\ne7d705a3286e19ea42f587b344ee6865\n");
    let vpn = managed_list("198.51.100.7\n");
    store
        .create_network_acl(&tenant, 0, &acl(1, 10, "10.0.0.0/8"))
        .await
        .expect("acl");
    assert_eq!(
        store
            .put_managed_list(&tenant, 1, ManagedListName::Tor, &tor)
            .await
            .expect("put"),
        2
    );
    assert_eq!(
        store
            .put_managed_list(&tenant, 2, ManagedListName::Vpn, &vpn)
            .await
            .expect("put"),
        3
    );
    // A stale version is refused and writes nothing.
    assert!(matches!(
        store
            .put_managed_list(&tenant, 2, ManagedListName::Vpn, &tor)
            .await,
        Err(StoreError::VersionConflict {
            expected: 2,
            actual: 3
        })
    ));
    let policy = store.tenant_policy(&tenant, &[]).await.expect("policy");
    assert_eq!(policy.rules.version, 3);
    assert_eq!(policy.rules.acls.len(), 1);
    let read: Vec<(ManagedListName, u64, Option<ManagedList>)> = policy
        .managed_lists
        .iter()
        .map(|l| (l.name, l.version, l.list.as_deref().cloned()))
        .collect();
    let mut want = vec![
        (ManagedListName::Tor, 2, Some(tor.clone())),
        (ManagedListName::Vpn, 3, Some(vpn.clone())),
    ];
    want.sort_by_key(|(name, _, _)| name.as_str());
    assert_eq!(read, want);
    // The content of a list the caller holds at that version is not read again.
    let policy = store
        .tenant_policy(
            &tenant,
            &[(ManagedListName::Tor, 2), (ManagedListName::Vpn, 2)],
        )
        .await
        .expect("policy");
    for list in &policy.managed_lists {
        assert_eq!(
            list.list.is_none(),
            list.name == ManagedListName::Tor,
            "{list:?}"
        );
    }
    // Replace, empty, delete, and the version moves every time.
    let replaced = managed_list("203.0.113.0/24\n");
    assert_eq!(
        store
            .put_managed_list(&tenant, 3, ManagedListName::Tor, &replaced)
            .await
            .expect("replace"),
        4
    );
    assert_eq!(
        store
            .put_managed_list(&tenant, 4, ManagedListName::Proxy, &ManagedList::empty())
            .await
            .expect("empty"),
        5
    );
    assert_eq!(
        store
            .delete_managed_list(&tenant, 5, ManagedListName::Vpn)
            .await
            .expect("delete"),
        6
    );
    assert!(matches!(
        store
            .delete_managed_list(&tenant, 6, ManagedListName::Vpn)
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.bump_version(&tenant, 6).await.expect("bump"), 7);
    assert!(matches!(
        store.bump_version(&tenant, 6).await,
        Err(StoreError::VersionConflict { .. })
    ));
    let policy = store.tenant_policy(&tenant, &[]).await.expect("policy");
    assert_eq!(policy.rules.version, 7);
    let read: Vec<(&str, u64, usize)> = policy
        .managed_lists
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.version,
                l.list.as_ref().map_or(99, |l| l.len()),
            )
        })
        .collect();
    assert_eq!(read, [("auth0.proxy", 5, 0), ("auth0.tor", 4, 1)]);
    assert_eq!(
        store
            .network_acl_rule_set(&tenant)
            .await
            .expect("rules")
            .version,
        7
    );
    // A reopened handle reads the same.
    let other = (backend.reopen)().await;
    let again = other.tenant_policy(&tenant, &[]).await.expect("policy");
    assert_eq!(again, policy);
}

/// Migration 3 (managed lists) applied to a database at schema version 2 keeps its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_managed_lists_migration_keeps_existing_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = TenantId::default_tenant();
    let a = acl(3, 20, "192.0.2.0/24");
    let file = {
        let sqlite = SqliteStore::open(dir.path(), Limits::default()).expect("open");
        let file = sqlite.path().to_owned();
        let store: Arc<dyn Store> = Arc::new(sqlite);
        with_tenant(&store).await;
        store.create_network_acl(&tenant, 0, &a).await.expect("acl");
        file
    };
    {
        // Back to the schema of the previous release.
        let conn = rusqlite::Connection::open(&file).expect("open file");
        conn.execute_batch("DROP TABLE managed_lists; PRAGMA user_version = 2;")
            .expect("downgrade");
    }
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("migrate"));
    let rules = store.network_acl_rule_set(&tenant).await.expect("rules");
    assert_eq!((rules.version, rules.acls), (1, vec![a]));
    assert_eq!(
        store
            .put_managed_list(
                &tenant,
                1,
                ManagedListName::Tor,
                &managed_list("10.0.0.1\n")
            )
            .await
            .expect("the new table works"),
        2
    );
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL only: migrations, notifications, reconnection, corruption, unavailability

/// Migration 3 (managed lists) applied to a database at schema version 2 keeps its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_managed_lists_migration_keeps_existing_data() {
    let Some(url) = database_url("postgres_managed_lists_migration_keeps_existing_data") else {
        return;
    };
    let (backend, db) = postgres(&url).await;
    let tenant = with_tenant(&backend.store).await;
    let a = acl(4, 30, "198.51.100.0/24");
    backend
        .store
        .create_network_acl(&tenant, 0, &a)
        .await
        .expect("acl");
    drop(backend);
    let (client, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let driver = tokio::spawn(connection);
    client
        .batch_execute(
            "DROP TABLE managed_lists; DELETE FROM netacl_schema_migrations WHERE version = 3;",
        )
        .await
        .expect("downgrade");
    drop(client);
    let _ = driver.await;
    let store = PostgresStore::connect(&db, Limits::default())
        .await
        .expect("migrate");
    let rules = store.network_acl_rule_set(&tenant).await.expect("rules");
    assert_eq!((rules.version, rules.acls), (1, vec![a]));
    assert_eq!(
        store
            .put_managed_list(
                &tenant,
                1,
                ManagedListName::Vpn,
                &managed_list("10.0.0.1\n")
            )
            .await
            .expect("the new table works"),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_nodes_starting_together_migrate_once() {
    let Some(url) = database_url("postgres_nodes_starting_together_migrate_once") else {
        return;
    };
    let db = fresh_database(&url).await;
    let mut starts = Vec::new();
    for _ in 0..4 {
        let db = db.clone();
        starts.push(tokio::spawn(async move {
            PostgresStore::connect(&db, Limits::default()).await
        }));
    }
    for start in starts {
        start.await.expect("join").expect("every node starts");
    }
    let (client, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM netacl_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .expect("migrations")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(versions, (1..=versions.len() as i32).collect::<Vec<_>>());
    assert!(versions.len() >= 2);
    // A database migrated by a newer build is refused.
    client
        .execute(
            "INSERT INTO netacl_schema_migrations (version) VALUES (99)",
            &[],
        )
        .await
        .expect("future version");
    let err = PostgresStore::connect(&db, Limits::default())
        .await
        .expect_err("refused");
    assert!(
        matches!(err, StoreError::Setup(ref m) if m.contains("99")),
        "{err}"
    );
}

/// The listener's next notice, waiting at most 10 s.
async fn next(listener: &mut netacl_store::ChangeListener) -> ChangeNotice {
    tokio::time::timeout(Duration::from_secs(10), listener.recv())
        .await
        .expect("a notice within 10 s")
        .expect("listener alive")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_commits_are_announced_and_the_listener_reconnects() {
    let Some(url) = database_url("postgres_commits_are_announced_and_the_listener_reconnects")
    else {
        return;
    };
    let db = fresh_database(&url).await;
    let store = PostgresStore::connect(&db, Limits::default())
        .await
        .expect("connect");
    let mut listener = store.listen();
    assert_eq!(next(&mut listener).await, ChangeNotice::Connected);
    assert!(listener.is_connected());
    let tenant = TenantId::default_tenant();
    store
        .ensure_tenant(&tenant, "localhost")
        .await
        .expect("tenant");
    let a = acl(1, 10, "10.0.0.0/8");
    store.create_network_acl(&tenant, 0, &a).await.expect("a");
    assert_eq!(
        next(&mut listener).await,
        ChangeNotice::Changed {
            tenant: tenant.clone(),
            version: 1
        }
    );
    // A refused write announces nothing: the next notice is the next commit's.
    assert!(store.create_network_acl(&tenant, 0, &a).await.is_err());
    store
        .delete_network_acl(&tenant, 1, &a.id)
        .await
        .expect("delete");
    assert_eq!(
        next(&mut listener).await,
        ChangeNotice::Changed {
            tenant: tenant.clone(),
            version: 2
        }
    );

    // Kill the listening connection from the server side: the listener comes back by itself.
    let (admin, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let killed: i64 = admin
        .query_one(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE 'LISTEN%'",
            &[],
        )
        .await
        .expect("terminate")
        .get(0);
    assert_eq!(killed, 1);
    assert_eq!(next(&mut listener).await, ChangeNotice::Connected);
    store
        .create_network_acl(&tenant, 2, &a)
        .await
        .expect("again");
    assert_eq!(
        next(&mut listener).await,
        ChangeNotice::Changed {
            tenant: tenant.clone(),
            version: 3
        }
    );

    // Pooled connections killed under the store: the next calls get fresh ones.
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND application_name = 'netacl' AND query NOT LIKE 'LISTEN%'",
            &[],
        )
        .await
        .expect("terminate pool");
    let mut recovered = None;
    for _ in 0..3 {
        match store.network_acl_rule_set(&tenant).await {
            Ok(rules) => {
                recovered = Some(rules);
                break;
            }
            Err(StoreError::Unavailable(_)) => {}
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(recovered.expect("recovered within 3 calls").version, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_corrupted_records_are_reported_not_served() {
    let Some(url) = database_url("postgres_corrupted_records_are_reported_not_served") else {
        return;
    };
    let (backend, db) = postgres(&url).await;
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    store
        .create_network_acl(&tenant, 0, &acl(4, 20, "10.0.0.0/8"))
        .await
        .expect("a");
    let (admin, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    admin
        .execute("UPDATE network_acls SET record = '{\"id\": 1}'", &[])
        .await
        .expect("corrupt");
    assert!(matches!(
        store.network_acl_rule_set(&tenant).await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn postgres_unreachable_or_invalid_is_a_setup_error() {
    // A loopback port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("postgres://netacl@127.0.0.1:{port}/netacl?connect_timeout=2");
    let err = PostgresStore::connect(&url, Limits::default())
        .await
        .expect_err("nothing listens");
    assert!(matches!(err, StoreError::Setup(_)), "{err}");
    let err = PostgresStore::connect("postgres://host:notaport/db", Limits::default())
        .await
        .expect_err("invalid");
    assert!(
        matches!(err, StoreError::Setup(ref m) if m.contains("invalid")),
        "{err}"
    );
}

#[test]
fn database_names_are_replaced_in_both_url_forms() {
    assert_eq!(
        with_dbname(
            "postgres://u:p@127.0.0.1:5432/netacl_test?sslmode=disable",
            "x"
        ),
        "postgres://u:p@127.0.0.1:5432/x?sslmode=disable"
    );
    assert_eq!(with_dbname("postgresql://h", "x"), "postgresql://h/x");
    assert_eq!(with_dbname("host=h user=u", "x"), "host=h user=u dbname=x");
}

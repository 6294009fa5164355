//! One suite, every backend: the same async test functions run against the embedded SQLite store
//! and, when `NETACL_TEST_DATABASE_URL` names a PostgreSQL database, against PostgreSQL (each test
//! in a fresh database of its own). Without that variable the PostgreSQL cases print a notice and
//! pass, except under CI (`CI` set), where they fail: CI always provides a database.
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use netacl_model::{
    AccessLevel, AclId, BrandingPatch, ConnectionView, DirectoryData, GroupId, Limits, ManagedList,
    ManagedListName, NetworkAcl, NetworkAclKey, NetworkAclKeyId, NetworkAclSpec, Organization,
    OrganizationConnection, OrganizationConnectionPatch, OrganizationId, OrganizationPatch,
    OrganizationSpec, Timestamp,
};
use netacl_store::{
    AclSummaryCounts, ChangeNotice, ChangeOp, CountWindow, HistoryRetention, ImportReport,
    LogFilter, LogOrder, LogRetention, ManagedListStore, NetworkAclStore, NewLogEvent,
    OrganizationCursor, PostgresStore, RecordChange, RecordKind, RuleBucketCounts, SqliteStore,
    Store, StoreError, StoredClient, StoredSigningKey, TenantId, TenantStore, WriteOrigin,
};
use serde_json::json;

/// The write time the managed-list tests give the store.
const NOW_MS: i64 = 1_767_225_600_000;

/// The origin the tests' writes record.
fn origin() -> WriteOrigin {
    WriteOrigin {
        client_id: Some("conformance".into()),
        request_id: Some("req-1".into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Backends

/// Opens another handle on the same database (a second process, or a second node).
type Reopen =
    Box<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

/// Opens another handle on the same database with another history retention.
type ReopenRetaining = Box<
    dyn Fn(HistoryRetention) -> std::pin::Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>>
        + Send
        + Sync,
>;

/// Runs SQL (the backend's dialect) on the same database through a connection of its own: a
/// query (`SELECT`, `PRAGMA`) gives the first column of its first row as an integer (0 when
/// there is none), anything else runs as a batch (0): what the tests measure (bytes the history
/// tables hold) and the old formats they build.
type Sql = Box<dyn Fn(String) -> std::pin::Pin<Box<dyn Future<Output = i64> + Send>> + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Sqlite,
    Postgres,
}

struct Backend {
    store: Arc<dyn Store>,
    reopen: Reopen,
    reopen_retaining: ReopenRetaining,
    sql: Sql,
    dialect: Dialect,
    _keep: Option<tempfile::TempDir>,
}

impl Backend {
    /// The bytes the tables of the rule-set history (`network_acl_history*`) hold, their indexes
    /// and (PostgreSQL) TOAST included, as the database reports them: SQLite's `dbstat` pages,
    /// PostgreSQL's `pg_total_relation_size`.
    async fn history_table_bytes(&self) -> i64 {
        let sql = match self.dialect {
            Dialect::Sqlite => {
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN \
                 (SELECT name FROM sqlite_schema WHERE tbl_name LIKE 'network_acl_history%')"
            }
            Dialect::Postgres => {
                "SELECT COALESCE(SUM(pg_total_relation_size(oid)), 0)::BIGINT FROM pg_class \
                 WHERE relkind = 'r' AND relname LIKE 'network_acl_history%'"
            }
        };
        (self.sql)(sql.to_owned()).await
    }

    /// The size of the whole database, for the record: the SQLite file after a checkpoint (its
    /// pages, free ones included), PostgreSQL's `pg_database_size`.
    async fn database_bytes(&self) -> i64 {
        match self.dialect {
            Dialect::Sqlite => {
                (self.sql)("PRAGMA wal_checkpoint(TRUNCATE)".into()).await;
                (self.sql)(
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
                        .into(),
                )
                .await
            }
            Dialect::Postgres => {
                (self.sql)("SELECT pg_database_size(current_database())".into()).await
            }
        }
    }
}

/// Whether `sql` is one query whose first value the hook returns (else a batch of statements).
fn returns_rows(sql: &str) -> bool {
    let start = sql.trim_start().to_ascii_uppercase();
    start.starts_with("SELECT") || start.starts_with("PRAGMA")
}

/// A connection of the tests' own on a SQLite file.
fn sqlite_sql(file: std::path::PathBuf) -> Sql {
    Box::new(move |sql| {
        let file = file.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let conn = rusqlite::Connection::open(&file).expect("open the file");
                conn.busy_timeout(Duration::from_secs(5))
                    .expect("busy timeout");
                if !returns_rows(&sql) {
                    conn.execute_batch(&sql).expect("batch");
                    return 0;
                }
                let mut statement = conn.prepare(&sql).expect("prepare");
                let mut rows = statement.query([]).expect("query");
                match rows.next().expect("row") {
                    Some(row) => row
                        .get::<_, Option<i64>>(0)
                        .expect("an integer")
                        .unwrap_or(0),
                    None => 0,
                }
            })
            .await
            .expect("join")
        })
    })
}

/// A connection of the tests' own on a PostgreSQL database.
fn postgres_sql(url: String) -> Sql {
    Box::new(move |sql| {
        let url = url.clone();
        Box::pin(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            let driver = tokio::spawn(connection);
            let value = if !returns_rows(&sql) {
                client.batch_execute(&sql).await.expect("batch");
                0
            } else {
                client
                    .query_opt(&sql, &[])
                    .await
                    .expect("query")
                    .and_then(|row| {
                        row.try_get::<_, Option<i64>>(0)
                            .expect("a BIGINT (cast sums)")
                    })
                    .unwrap_or(0)
            };
            drop(client);
            let _ = driver.await;
            value
        })
    })
}

async fn sqlite() -> Backend {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_owned();
    let sqlite = SqliteStore::open(&path, Limits::default()).expect("open sqlite");
    let sql = sqlite_sql(sqlite.path().to_owned());
    let store: Arc<dyn Store> = Arc::new(sqlite);
    let again = path.clone();
    let reopen: Reopen = Box::new(move || {
        let path = path.clone();
        Box::pin(async move {
            Arc::new(SqliteStore::open(&path, Limits::default()).expect("reopen sqlite"))
                as Arc<dyn Store>
        })
    });
    let reopen_retaining: ReopenRetaining = Box::new(move |retention| {
        let path = again.clone();
        Box::pin(async move {
            Arc::new(
                SqliteStore::open(&path, Limits::default())
                    .expect("reopen sqlite")
                    .with_history_retention(retention),
            ) as Arc<dyn Store>
        })
    });
    Backend {
        store,
        reopen,
        reopen_retaining,
        sql,
        dialect: Dialect::Sqlite,
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
    let retaining_url = db.clone();
    let reopen_retaining: ReopenRetaining = Box::new(move |retention| {
        let url = retaining_url.clone();
        Box::pin(async move {
            Arc::new(
                PostgresStore::connect(&url, Limits::default())
                    .await
                    .expect("reconnect postgres")
                    .with_history_retention(retention),
            ) as Arc<dyn Store>
        })
    });
    (
        Backend {
            store,
            reopen,
            reopen_retaining,
            sql: postgres_sql(db.clone()),
            dialect: Dialect::Postgres,
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
    signing_keys_rotate_and_revoke,
    directory_imports_are_idempotent_and_pages_follow_insertion,
    organization_names_are_unique_and_connections_must_exist,
    organizations_page_in_creation_order_and_checkpoints_skip_nothing,
    organizations_are_read_updated_and_deleted,
    organization_connections_have_two_views,
    organization_writes_race_safely,
    branding_patches_merge_across_handles,
    managed_lists_bump_the_version_and_read_back_what_changed,
    network_acl_keys_bump_the_version_and_names_are_unique,
    tenants_are_created_listed_and_deleted_with_everything_they_own,
    refused_tenant_creations_write_nothing,
    tenants_racing_for_one_domain_have_one_winner,
    logs_are_numbered_filtered_paged_retained_and_kept,
    history_records_every_write_and_rebuilds_every_version,
    restore_brings_a_version_back_in_one_write,
    history_retention_caps_the_count_the_age_and_the_bytes,
    history_removal_is_bounded_per_write_and_converges,
    history_grows_in_proportion_to_change,
    history_of_schema_9_is_converted_and_answers_as_before,
    acl_summary_counts_sum_rules_by_bucket_within_the_window,
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
        store
            .create_network_acl(&tenant, 0, &a, &origin())
            .await
            .expect("a"),
        1
    );
    assert_eq!(
        store
            .create_network_acl(&tenant, 1, &b, &origin())
            .await
            .expect("b"),
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
            .replace_network_acl(&tenant, 2, &a2, &origin())
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
            .delete_network_acl(&tenant, 3, &b.id, &origin())
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
    store
        .create_network_acl(&tenant, 0, &a, &origin())
        .await
        .expect("a");

    let twin = acl(2, 30, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 1, &twin, &origin()).await,
        Err(StoreError::PriorityTaken(p)) if p.get() == 30
    ));
    let same_id = acl(1, 31, "10.0.0.0/8");
    assert!(matches!(
        store
            .create_network_acl(&tenant, 1, &same_id, &origin())
            .await,
        Err(StoreError::DuplicateId(_))
    ));
    let c = acl(3, 40, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 0, &c, &origin()).await,
        Err(StoreError::VersionConflict {
            expected: 0,
            actual: 1
        })
    ));
    assert!(matches!(
        store.create_network_acl(&tenant, 7, &c, &origin()).await,
        Err(StoreError::VersionConflict {
            expected: 7,
            actual: 1
        })
    ));
    assert!(matches!(
        store.replace_network_acl(&tenant, 1, &c, &origin()).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_network_acl(&tenant, 1, &c.id, &origin()).await,
        Err(StoreError::NotFound(_))
    ));
    store
        .create_network_acl(&tenant, 1, &c, &origin())
        .await
        .expect("c");
    let moved = acl(3, 30, "10.0.0.0/8");
    assert!(matches!(
        store
            .replace_network_acl(&tenant, 2, &moved, &origin())
            .await,
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
    store
        .create_network_acl(&tenant, 0, &a, &origin())
        .await
        .expect("a");
    store
        .create_network_acl(&other, 0, &a, &origin())
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
        store.create_network_acl(&unknown, 0, &a, &origin()).await,
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
    let key = StoredSigningKey::new(
        "k1",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        1,
    );
    let client = StoredClient {
        client_id: "bootstrap".into(),
        secret_hash: "hash".into(),
        scopes: vec!["read:network_acls".into(), "create:network_acls".into()],
        created_at_ms: 2,
    };
    {
        let store = &backend.store;
        with_tenant(store).await;
        store
            .create_network_acl(&tenant, 0, &a, &origin())
            .await
            .expect("a");
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
                .create_network_acl(
                    &tenant,
                    0,
                    &acl(100 + seed, 10 + seed as u64, "10.0.0.0/8"),
                    &origin(),
                )
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
                &origin(),
            )
            .await
        });
        let b = tokio::spawn(async move {
            s2.create_network_acl(
                &t2,
                version,
                &acl(2000 + round as u128, priority, "10.0.0.0/8"),
                &origin(),
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
    let key = |kid: &str, at: i64| StoredSigningKey::new(kid, format!("pem of {kid}"), at);
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

async fn signing_keys_rotate_and_revoke(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let key = |kid: &str, at: i64| StoredSigningKey::new(kid, format!("sealed {kid}"), at);
    store
        .ensure_signing_key(&tenant, &key("a", 10))
        .await
        .expect("first");
    // A rotation from a stale view is refused and changes nothing.
    assert!(matches!(
        store
            .rotate_signing_key(&tenant, "zz", &key("b", 20), 20)
            .await,
        Err(StoreError::KeyConflict(_))
    ));
    store
        .rotate_signing_key(&tenant, "a", &key("b", 20), 20)
        .await
        .expect("rotate");
    let keys = store.signing_keys(&tenant).await.expect("keys");
    assert_eq!(keys.len(), 2);
    let current = netacl_store::current_key(&keys).expect("current");
    assert_eq!(
        (current.kid.as_str(), current.current_since_ms),
        ("b", Some(20))
    );
    let a = keys.iter().find(|k| k.kid == "a").expect("a kept");
    assert_eq!(
        (a.current_since_ms, a.current_until_ms),
        (Some(10), Some(20))
    );
    // The current key cannot be revoked; unknown kids are not found.
    assert!(matches!(
        store.revoke_signing_key(&tenant, "b", 30).await,
        Err(StoreError::KeyConflict(_))
    ));
    assert!(matches!(
        store.revoke_signing_key(&tenant, "nope", 30).await,
        Err(StoreError::NotFound(_))
    ));
    let revoked = store
        .revoke_signing_key(&tenant, "a", 30)
        .await
        .expect("revoke");
    assert_eq!(revoked.revoked_at_ms, Some(30));
    // Again: the first time is kept.
    let again = store
        .revoke_signing_key(&tenant, "a", 40)
        .await
        .expect("again");
    assert_eq!(again.revoked_at_ms, Some(30));
    // A revoked key cannot become current again; a previous one can.
    assert!(matches!(
        store
            .rotate_signing_key(&tenant, "b", &key("a", 50), 50)
            .await,
        Err(StoreError::KeyConflict(_))
    ));
    store
        .rotate_signing_key(&tenant, "b", &key("c", 60), 60)
        .await
        .expect("c");
    store
        .rotate_signing_key(&tenant, "c", &key("b", 70), 70)
        .await
        .expect("b again");
    let keys = store.signing_keys(&tenant).await.expect("keys");
    assert_eq!(keys.len(), 3);
    let current = netacl_store::current_key(&keys).expect("current");
    assert_eq!(
        (current.kid.as_str(), current.current_since_ms),
        ("b", Some(70))
    );
    assert_eq!(
        keys.iter().filter(|k| k.is_current()).count(),
        1,
        "{keys:?}"
    );
    // Sealing replaces the stored text only if it is still the expected one.
    assert!(!store
        .seal_signing_key(&tenant, "c", "not what is stored", "x", "cert")
        .await
        .expect("seal"));
    assert!(store
        .seal_signing_key(&tenant, "c", "sealed c", "resealed c", "cert c")
        .await
        .expect("seal"));
    let c = store.signing_keys(&tenant).await.expect("keys");
    let c = c.iter().find(|k| k.kid == "c").expect("c");
    assert_eq!(
        (c.private_key.as_str(), c.cert_pem.as_deref()),
        ("resealed c", Some("cert c"))
    );
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

/// Two connections (the directory's `CON_A` and `CON_B`).
fn two_connections() -> DirectoryData {
    DirectoryData::from_json(&json!({"connections": [
        {"id": CON_A, "name": "db-main", "strategy": "auth0"},
        {"id": CON_B, "name": "saml-main", "strategy": "samlp"}
    ]}))
    .expect("valid directory data")
}

fn names(page: &[Organization]) -> Vec<String> {
    page.iter().map(|o| o.spec.name.clone()).collect()
}

/// Every organization of the tenant through checkpoints of `take`.
async fn all_by_checkpoint(store: &Arc<dyn Store>, tenant: &TenantId, take: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut after: Option<OrganizationCursor> = None;
    loop {
        let page = store
            .organizations_after(tenant, after.as_ref(), take)
            .await
            .expect("page");
        assert!(page.organizations.len() <= take as usize);
        assert_eq!(page.total, None);
        out.extend(names(&page.organizations));
        match page.next {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
}

async fn organizations_page_in_creation_order_and_checkpoints_skip_nothing(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    // Created back to back (several in one millisecond): listed in creation order all the same.
    let created: Vec<String> = (0..12).map(|i| format!("org-{i:02}")).collect();
    for (i, name) in created.iter().enumerate() {
        // Ids in descending order, so an order by id alone would reverse the list.
        store
            .create_organization(&tenant, &organization(1000 - i as u128, name, &[]))
            .await
            .expect("create");
    }
    let page = store
        .list_organizations(&tenant, 0, 100)
        .await
        .expect("all");
    assert_eq!(names(&page.organizations), created);
    assert_eq!((page.total, page.next), (Some(12), None));
    let middle = store
        .list_organizations(&tenant, 5, 4)
        .await
        .expect("middle");
    assert_eq!(names(&middle.organizations), created[5..9].to_vec());
    assert_eq!(middle.total, Some(12));
    let past = store
        .list_organizations(&tenant, 12, 50)
        .await
        .expect("past");
    assert!(past.organizations.is_empty());
    assert_eq!(past.total, Some(12));
    assert!(store
        .list_organizations(&tenant, u64::MAX, 50)
        .await
        .expect("far past")
        .organizations
        .is_empty());

    for take in [1, 5, 12, 13, 100] {
        assert_eq!(
            all_by_checkpoint(&store, &tenant, take).await,
            created,
            "take {take}"
        );
    }
    // The last page has no `next`; an exact multiple ends on a full page without one.
    let first = store
        .organizations_after(&tenant, None, 12)
        .await
        .expect("one page");
    assert_eq!((first.organizations.len(), first.next), (12, None));

    // Paging while organizations are created, renamed and deleted: the later creates appear
    // at the end, nothing is served twice or skipped.
    let mut seen = Vec::new();
    let page = store
        .organizations_after(&tenant, None, 5)
        .await
        .expect("p1");
    seen.extend(names(&page.organizations));
    let cursor = page.next.expect("more");
    store
        .create_organization(&tenant, &organization(1, "late-a", &[]))
        .await
        .expect("late");
    let renamed = OrganizationPatch::from_json(&json!({"name": "org-00-renamed"})).expect("p");
    let first_id = store
        .organization_by_name(&tenant, "org-00")
        .await
        .expect("by name")
        .id;
    store
        .update_organization(&tenant, &first_id, &renamed)
        .await
        .expect("rename");
    let gone = store
        .organization_by_name(&tenant, "org-07")
        .await
        .expect("by name")
        .id;
    store
        .delete_organization(&tenant, &gone)
        .await
        .expect("delete");
    let mut after = Some(cursor);
    let mut pages = 1;
    while let Some(cursor) = after {
        let page = store
            .organizations_after(&tenant, Some(&cursor), 5)
            .await
            .expect("page");
        seen.extend(names(&page.organizations));
        after = page.next;
        pages += 1;
        if pages == 2 {
            store
                .create_organization(&tenant, &organization(2, "late-b", &[]))
                .await
                .expect("late");
        }
    }
    let mut expected: Vec<String> = created.iter().filter(|n| *n != "org-07").cloned().collect();
    expected.extend(["late-a".to_owned(), "late-b".to_owned()]);
    assert_eq!(seen, expected);
    // A cursor naming a deleted organization still continues after its position.
    let resumed = store
        .organizations_after(
            &tenant,
            Some(&OrganizationCursor {
                created_at_ms: i64::MAX,
                id: gone.clone(),
            }),
            5,
        )
        .await
        .expect("past the end");
    assert!(resumed.organizations.is_empty() && resumed.next.is_none());

    // Tenants do not see each other's organizations.
    let other = TenantId::new("other").expect("id");
    store
        .ensure_tenant(&other, "other.example")
        .await
        .expect("tenant");
    assert_eq!(
        store
            .list_organizations(&other, 0, 50)
            .await
            .expect("other")
            .total,
        Some(0)
    );
    assert!(matches!(
        store.organization(&other, &first_id).await,
        Err(StoreError::UnknownOrganization(_))
    ));
}

async fn organizations_are_read_updated_and_deleted(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    store
        .import_directory(&tenant, &two_connections())
        .await
        .expect("import");
    let acme = organization(1, "acme", &[CON_A]);
    store
        .create_organization(&tenant, &acme)
        .await
        .expect("acme");
    let other = organization(2, "other", &[]);
    store
        .create_organization(&tenant, &other)
        .await
        .expect("other");

    let read = store.organization(&tenant, &acme.id).await.expect("get");
    assert_eq!(read.id, acme.id);
    assert_eq!(read.spec.name, "acme");
    assert_eq!(read.spec.display_name.as_deref(), Some("An organization"));
    assert_eq!(
        read.spec.enabled_connections, None,
        "connections live apart"
    );
    assert_eq!(
        store
            .organization_by_name(&tenant, "acme")
            .await
            .expect("by name"),
        read
    );
    assert!(matches!(
        store
            .organization(&tenant, &OrganizationId::from_random(99))
            .await,
        Err(StoreError::UnknownOrganization(_))
    ));
    assert!(matches!(
        store.organization_by_name(&tenant, "nobody").await,
        Err(StoreError::UnknownOrganization(ref n)) if n == "nobody"
    ));

    let patch = OrganizationPatch::from_json(&json!({
        "display_name": "Acme Inc", "metadata": {"tier": "gold"},
        "token_quota": {"client_credentials": {"per_day": 5}}
    }))
    .expect("patch");
    let updated = store
        .update_organization(&tenant, &acme.id, &patch)
        .await
        .expect("update");
    assert_eq!(updated.spec.display_name.as_deref(), Some("Acme Inc"));
    assert_eq!(
        store.organization(&tenant, &acme.id).await.expect("get"),
        updated
    );
    let cleared = store
        .update_organization(
            &tenant,
            &acme.id,
            &OrganizationPatch::from_json(&json!({"token_quota": null})).expect("p"),
        )
        .await
        .expect("clear");
    assert_eq!(cleared.spec.token_quota, None);
    assert_eq!(cleared.spec.metadata, updated.spec.metadata);

    // A rename to a taken name is refused and changes nothing; a free name is taken, the old
    // one freed.
    let to_other =
        OrganizationPatch::from_json(&json!({"name": "other", "display_name": "X"})).expect("p");
    assert!(matches!(
        store
            .update_organization(&tenant, &acme.id, &to_other)
            .await,
        Err(StoreError::NameTaken(_))
    ));
    assert_eq!(
        store.organization(&tenant, &acme.id).await.expect("get"),
        cleared
    );
    let rename = OrganizationPatch::from_json(&json!({"name": "acme-2"})).expect("p");
    store
        .update_organization(&tenant, &acme.id, &rename)
        .await
        .expect("rename");
    assert_eq!(
        store
            .organization_by_name(&tenant, "acme-2")
            .await
            .expect("new name")
            .id,
        acme.id
    );
    assert!(store.organization_by_name(&tenant, "acme").await.is_err());
    store
        .create_organization(&tenant, &organization(3, "acme", &[]))
        .await
        .expect("the old name is free");
    assert!(matches!(
        store
            .update_organization(&tenant, &OrganizationId::from_random(98), &rename)
            .await,
        Err(StoreError::UnknownOrganization(_))
    ));

    // Delete takes the organization's connections with it, not the tenant's connections.
    store
        .delete_organization(&tenant, &acme.id)
        .await
        .expect("delete");
    assert!(matches!(
        store.organization(&tenant, &acme.id).await,
        Err(StoreError::UnknownOrganization(_))
    ));
    assert!(matches!(
        store.delete_organization(&tenant, &acme.id).await,
        Err(StoreError::UnknownOrganization(_))
    ));
    assert!(matches!(
        store
            .organization_connections(&tenant, &acme.id, None, 0, 50)
            .await,
        Err(StoreError::UnknownOrganization(_))
    ));
    assert_eq!(
        store.connections(&tenant).await.expect("connections").len(),
        2
    );
    // Its id and name can be used again.
    let mut again = organization(1, "acme-2", &[CON_A]);
    again.id = acme.id.clone();
    store
        .create_organization(&tenant, &again)
        .await
        .expect("recreate");

    // Survives a reopen.
    let reopened = (backend.reopen)().await;
    assert_eq!(
        reopened
            .organization(&tenant, &other.id)
            .await
            .expect("get"),
        store.organization(&tenant, &other.id).await.expect("get")
    );
}

fn settings(body: serde_json::Value) -> OrganizationConnection {
    OrganizationConnection::from_json(&body, ConnectionView::All).expect("valid connection body")
}

async fn organization_connections_have_two_views(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    store
        .import_directory(&tenant, &two_connections())
        .await
        .expect("import");
    let mut org = organization(1, "acme", &[]);
    org.spec = OrganizationSpec::from_json(&json!({"name": "acme", "enabled_connections": [
        {"connection_id": CON_A, "assign_membership_on_login": true, "show_as_button": false}
    ]}))
    .expect("spec");
    store
        .create_organization(&tenant, &org)
        .await
        .expect("create");

    // The create's connection is a row of its own, with the create's flags.
    let all = store
        .organization_connections(&tenant, &org.id, None, 0, 50)
        .await
        .expect("list");
    assert_eq!(all.total, 1);
    let a = &all.entries[0];
    assert_eq!(
        (
            a.settings.assign_membership_on_login,
            a.settings.show_as_button,
            a.settings.is_enabled
        ),
        (true, false, true)
    );
    assert_eq!(
        (a.connection.name.as_str(), a.connection.strategy.as_str()),
        ("db-main", "auth0")
    );

    // Added disabled, with a name and a level: listed by `All`, absent from `Enabled`.
    let b = settings(json!({"connection_id": CON_B, "is_enabled": false,
        "organization_connection_name": "Partners", "organization_access_level": "limited"}));
    let added = store
        .add_organization_connection(&tenant, &org.id, &b)
        .await
        .expect("add");
    assert_eq!(added.settings, b);
    assert_eq!(added.connection.strategy, "samlp");
    let listed = store
        .organization_connections(&tenant, &org.id, None, 0, 50)
        .await
        .expect("list");
    let ids: Vec<&str> = listed
        .entries
        .iter()
        .map(|e| e.connection.id.as_str())
        .collect();
    assert_eq!((ids, listed.total), (vec![CON_A, CON_B], 2));
    assert_eq!(
        listed.entries[1].settings.organization_access_level,
        Some(AccessLevel::Limited)
    );
    let enabled = store
        .organization_connections(&tenant, &org.id, Some(true), 0, 50)
        .await
        .expect("enabled");
    assert_eq!((enabled.entries.len(), enabled.total), (1, 1));
    let disabled = store
        .organization_connections(&tenant, &org.id, Some(false), 0, 50)
        .await
        .expect("disabled");
    assert_eq!(disabled.entries[0].connection.id, CON_B);
    let second = store
        .organization_connections(&tenant, &org.id, None, 1, 1)
        .await
        .expect("offset");
    assert_eq!(
        (second.entries[0].connection.id.as_str(), second.total),
        (CON_B, 2)
    );
    assert!(store
        .organization_connections(&tenant, &org.id, None, 2, 50)
        .await
        .expect("past")
        .entries
        .is_empty());

    assert!(matches!(
        store.organization_connection(&tenant, &org.id, CON_B, true).await,
        Err(StoreError::ConnectionNotInOrganization(ref c)) if c == CON_B
    ));
    assert_eq!(
        store
            .organization_connection(&tenant, &org.id, CON_B, false)
            .await
            .expect("one")
            .settings,
        b
    );
    // Added again, through either view: 409 semantics, nothing written.
    assert!(matches!(
        store.add_organization_connection(&tenant, &org.id, &settings(json!({"connection_id": CON_A}))).await,
        Err(StoreError::ConnectionAlreadyInOrganization(ref c)) if c == CON_A
    ));
    assert!(matches!(
        store
            .add_organization_connection(
                &tenant,
                &org.id,
                &settings(json!({"connection_id": "con_CCCCCCCCCCCCCCCC"}))
            )
            .await,
        Err(StoreError::UnknownConnection(_))
    ));
    assert!(matches!(
        store
            .add_organization_connection(&tenant, &OrganizationId::from_random(7), &b)
            .await,
        Err(StoreError::UnknownOrganization(_))
    ));
    assert_eq!(
        store
            .organization_connections(&tenant, &org.id, None, 0, 50)
            .await
            .expect("list")
            .total,
        2
    );

    // Updates: the `Enabled` view cannot reach the disabled connection; `All` can.
    let enable = OrganizationConnectionPatch::from_json(
        &json!({"is_enabled": true, "organization_connection_name": null}),
        ConnectionView::All,
    )
    .expect("patch");
    assert!(matches!(
        store
            .update_organization_connection(&tenant, &org.id, CON_B, &enable, true)
            .await,
        Err(StoreError::ConnectionNotInOrganization(_))
    ));
    let enabled_b = store
        .update_organization_connection(&tenant, &org.id, CON_B, &enable, false)
        .await
        .expect("enable");
    assert!(enabled_b.settings.is_enabled);
    assert_eq!(enabled_b.settings.organization_connection_name, None);
    assert_eq!(
        enabled_b.settings.organization_access_level,
        Some(AccessLevel::Limited)
    );
    assert_eq!(
        store
            .organization_connection(&tenant, &org.id, CON_B, true)
            .await
            .expect("now enabled")
            .settings,
        enabled_b.settings
    );
    let flags = OrganizationConnectionPatch::from_json(
        &json!({"is_signup_enabled": true}),
        ConnectionView::Enabled,
    )
    .expect("patch");
    let a2 = store
        .update_organization_connection(&tenant, &org.id, CON_A, &flags, true)
        .await
        .expect("flags");
    assert!(a2.settings.is_signup_enabled && a2.settings.assign_membership_on_login);

    // Removal: a disabled connection is out of the `Enabled` view's reach.
    let disable =
        OrganizationConnectionPatch::from_json(&json!({"is_enabled": false}), ConnectionView::All)
            .expect("patch");
    store
        .update_organization_connection(&tenant, &org.id, CON_A, &disable, false)
        .await
        .expect("disable");
    assert!(matches!(
        store
            .remove_organization_connection(&tenant, &org.id, CON_A, true)
            .await,
        Err(StoreError::ConnectionNotInOrganization(_))
    ));
    store
        .remove_organization_connection(&tenant, &org.id, CON_A, false)
        .await
        .expect("remove");
    assert!(matches!(
        store
            .remove_organization_connection(&tenant, &org.id, CON_A, false)
            .await,
        Err(StoreError::ConnectionNotInOrganization(_))
    ));
    // Added back, it goes to the end.
    store
        .add_organization_connection(&tenant, &org.id, &settings(json!({"connection_id": CON_A})))
        .await
        .expect("re-add");
    let order = store
        .organization_connections(&tenant, &org.id, None, 0, 50)
        .await
        .expect("list");
    let ids: Vec<&str> = order
        .entries
        .iter()
        .map(|e| e.connection.id.as_str())
        .collect();
    assert_eq!(ids, vec![CON_B, CON_A]);

    // A reopened handle reads the same.
    let reopened = (backend.reopen)().await;
    assert_eq!(
        reopened
            .organization_connections(&tenant, &org.id, None, 0, 50)
            .await
            .expect("list"),
        order
    );
}

async fn organization_writes_race_safely(backend: Backend) {
    let first = backend.store;
    let tenant = with_tenant(&first).await;
    first
        .import_directory(&tenant, &two_connections())
        .await
        .expect("import");
    let second = (backend.reopen)().await;
    let org = organization(1, "acme", &[]);
    first
        .create_organization(&tenant, &org)
        .await
        .expect("create");

    // Two handles adding one connection: one wins, one is told it is there already.
    let (t1, t2, id1, id2) = (
        tenant.clone(),
        tenant.clone(),
        org.id.clone(),
        org.id.clone(),
    );
    let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
    let c = settings(json!({"connection_id": CON_A}));
    let c2 = c.clone();
    let a = tokio::spawn(async move { s1.add_organization_connection(&t1, &id1, &c).await });
    let b = tokio::spawn(async move { s2.add_organization_connection(&t2, &id2, &c2).await });
    let results = [a.await.expect("join"), b.await.expect("join")];
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(results
        .iter()
        .any(|r| matches!(r, Err(StoreError::ConnectionAlreadyInOrganization(_)))));

    // Concurrent patches of different flags of one connection: both apply (no lost update).
    let mut tasks = Vec::new();
    for (i, body) in [
        json!({"assign_membership_on_login": true}),
        json!({"is_signup_enabled": true}),
        json!({"show_as_button": false}),
        json!({"organization_access_level": "full"}),
    ]
    .into_iter()
    .enumerate()
    {
        let store = if i % 2 == 0 {
            Arc::clone(&first)
        } else {
            Arc::clone(&second)
        };
        let (t, id) = (tenant.clone(), org.id.clone());
        let patch = OrganizationConnectionPatch::from_json(&body, ConnectionView::All).expect("p");
        tasks.push(tokio::spawn(async move {
            store
                .update_organization_connection(&t, &id, CON_A, &patch, false)
                .await
        }));
    }
    for task in tasks {
        task.await.expect("join").expect("patch");
    }
    let s = first
        .organization_connection(&tenant, &org.id, CON_A, false)
        .await
        .expect("one")
        .settings;
    assert!(s.assign_membership_on_login && s.is_signup_enabled && !s.show_as_button);
    assert_eq!(s.organization_access_level, Some(AccessLevel::Full));

    // Concurrent patches of different members of one organization: both apply.
    let (t1, t2, id1, id2) = (
        tenant.clone(),
        tenant.clone(),
        org.id.clone(),
        org.id.clone(),
    );
    let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
    let p1 = OrganizationPatch::from_json(&json!({"display_name": "Acme"})).expect("p");
    let p2 = OrganizationPatch::from_json(&json!({"metadata": {"k": "v"}})).expect("p");
    let a = tokio::spawn(async move { s1.update_organization(&t1, &id1, &p1).await });
    let b = tokio::spawn(async move { s2.update_organization(&t2, &id2, &p2).await });
    a.await.expect("join").expect("p1");
    b.await.expect("join").expect("p2");
    let read = first.organization(&tenant, &org.id).await.expect("get");
    assert_eq!(read.spec.display_name.as_deref(), Some("Acme"));
    assert!(read.spec.metadata.is_some());

    // Two handles renaming two organizations to one new name: one wins.
    let other = organization(2, "other", &[]);
    first
        .create_organization(&tenant, &other)
        .await
        .expect("other");
    let (t1, t2, id1, id2) = (
        tenant.clone(),
        tenant.clone(),
        org.id.clone(),
        other.id.clone(),
    );
    let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
    let rename = OrganizationPatch::from_json(&json!({"name": "winner"})).expect("p");
    let rename2 = rename.clone();
    let a = tokio::spawn(async move { s1.update_organization(&t1, &id1, &rename).await });
    let b = tokio::spawn(async move { s2.update_organization(&t2, &id2, &rename2).await });
    let results = [a.await.expect("join"), b.await.expect("join")];
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(results
        .iter()
        .any(|r| matches!(r, Err(StoreError::NameTaken(_)))));

    // Creates from two handles keep one creation order, strictly increasing.
    let mut tasks = Vec::new();
    for i in 0..10u128 {
        let store = if i % 2 == 0 {
            Arc::clone(&first)
        } else {
            Arc::clone(&second)
        };
        let t = tenant.clone();
        tasks.push(tokio::spawn(async move {
            store
                .create_organization(&t, &organization(100 + i, &format!("par-{i}"), &[]))
                .await
        }));
    }
    for task in tasks {
        task.await.expect("join").expect("create");
    }
    let listed = all_by_checkpoint(&first, &tenant, 3).await;
    assert_eq!(listed.len(), 12);
    let offset: Vec<String> = names(
        &first
            .list_organizations(&tenant, 0, 100)
            .await
            .expect("list")
            .organizations,
    );
    assert_eq!(listed, offset);
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
        .create_network_acl(&tenant, 0, &acl(1, 10, "10.0.0.0/8"), &origin())
        .await
        .expect("acl");
    assert_eq!(
        store
            .put_managed_list(&tenant, 1, ManagedListName::Tor, &tor, NOW_MS, &origin())
            .await
            .expect("put"),
        2
    );
    assert_eq!(
        store
            .put_managed_list(&tenant, 2, ManagedListName::Vpn, &vpn, NOW_MS, &origin())
            .await
            .expect("put"),
        3
    );
    // A stale version is refused and writes nothing.
    assert!(matches!(
        store
            .put_managed_list(&tenant, 2, ManagedListName::Vpn, &tor, NOW_MS, &origin())
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
    // The write time is the caller's, so that what it answered is what is stored.
    assert!(policy
        .managed_lists
        .iter()
        .all(|l| l.updated_at_ms == NOW_MS));
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
            .put_managed_list(
                &tenant,
                3,
                ManagedListName::Tor,
                &replaced,
                NOW_MS,
                &origin()
            )
            .await
            .expect("replace"),
        4
    );
    assert_eq!(
        store
            .put_managed_list(
                &tenant,
                4,
                ManagedListName::Proxy,
                &ManagedList::empty(),
                NOW_MS,
                &origin()
            )
            .await
            .expect("empty"),
        5
    );
    assert_eq!(
        store
            .delete_managed_list(&tenant, 5, ManagedListName::Vpn, &origin())
            .await
            .expect("delete"),
        6
    );
    assert!(matches!(
        store
            .delete_managed_list(&tenant, 6, ManagedListName::Vpn, &origin())
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        store
            .bump_version(&tenant, 6, &origin(), &reload())
            .await
            .expect("bump"),
        7
    );
    assert!(matches!(
        store.bump_version(&tenant, 6, &origin(), &reload()).await,
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

/// Back from schema 5 to 4 (signing keys without rotation columns, the PEM in clear).
const SQLITE_UNDO_5: &str = "
    ALTER TABLE signing_keys RENAME COLUMN private_key TO private_key_pem;
    ALTER TABLE signing_keys DROP COLUMN cert_pem;
    ALTER TABLE signing_keys DROP COLUMN current_since;
    ALTER TABLE signing_keys DROP COLUMN current_until;
    ALTER TABLE signing_keys DROP COLUMN revoked_at;";
const POSTGRES_UNDO_5: &str = "
    ALTER TABLE signing_keys RENAME COLUMN private_key TO private_key_pem;
    ALTER TABLE signing_keys DROP COLUMN cert_pem, DROP COLUMN current_since,
        DROP COLUMN current_until, DROP COLUMN revoked_at;";

/// Migration 5 (signing-key rotation) applied to a database at schema version 4: the key is
/// kept, current since its creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_signing_key_migration_keeps_the_key_current() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = TenantId::default_tenant();
    let file = {
        let sqlite = SqliteStore::open(dir.path(), Limits::default()).expect("open");
        let file = sqlite.path().to_owned();
        let store: Arc<dyn Store> = Arc::new(sqlite);
        with_tenant(&store).await;
        file
    };
    {
        let conn = rusqlite::Connection::open(&file).expect("open file");
        conn.execute_batch(&format!(
            "{UNDO_7} DROP TABLE network_acl_keys; {SQLITE_UNDO_5} PRAGMA user_version = 4;"
        ))
        .expect("downgrade");
        conn.execute(
            "INSERT INTO signing_keys (tenant_id, kid, private_key_pem, created_at)
             VALUES (?1, 'old', 'PEM', 5)",
            [tenant.as_str()],
        )
        .expect("old key");
    }
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("migrate"));
    let keys = store.signing_keys(&tenant).await.expect("keys");
    assert_eq!(keys, vec![StoredSigningKey::new("old", "PEM", 5)]);
}

/// The same on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_signing_key_migration_keeps_the_key_current() {
    let Some(url) = database_url("postgres_signing_key_migration_keeps_the_key_current") else {
        return;
    };
    let (backend, db) = postgres(&url).await;
    let tenant = with_tenant(&backend.store).await;
    drop(backend);
    let (client, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "{UNDO_7} DROP TABLE network_acl_keys; {POSTGRES_UNDO_5}
                 DELETE FROM netacl_schema_migrations WHERE version >= 5;"
        ))
        .await
        .expect("downgrade");
    client
        .execute(
            "INSERT INTO signing_keys (tenant_id, kid, private_key_pem, created_at)
             VALUES ($1, 'old', 'PEM', 5)",
            &[&tenant.as_str()],
        )
        .await
        .expect("old key");
    drop(client);
    let _ = driver.await;
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect(&db, Limits::default())
            .await
            .expect("migrate"),
    );
    let keys = store.signing_keys(&tenant).await.expect("keys");
    assert_eq!(keys, vec![StoredSigningKey::new("old", "PEM", 5)]);
}

/// Migration 4 (managed lists) applied to a database at schema version 3 keeps its data.
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
        store
            .create_network_acl(&tenant, 0, &a, &origin())
            .await
            .expect("acl");
        file
    };
    {
        // Back to the schema of the previous release.
        let conn = rusqlite::Connection::open(&file).expect("open file");
        conn.execute_batch(&format!(
            "{UNDO_7} {SQLITE_UNDO_5} DROP TABLE network_acl_keys; DROP TABLE managed_lists; \
             PRAGMA user_version = 3;"
        ))
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
                &managed_list("10.0.0.1\n"),
                NOW_MS,
                &origin(),
            )
            .await
            .expect("the new table works"),
        2
    );
}

fn credentials() -> netacl_store::TenantCredentials {
    netacl_store::TenantCredentials {
        signing_key: StoredSigningKey::new("kid-0", "sealed key", NOW_MS),
        client: StoredClient {
            client_id: "bootstrap".into(),
            secret_hash: "hash".into(),
            scopes: vec!["read:network_acls".into()],
            created_at_ms: NOW_MS,
        },
    }
}

fn domains(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Gives the tenant a record in every family the store keeps.
async fn fill(store: &Arc<dyn Store>, tenant: &TenantId) {
    store
        .create_network_acl(tenant, 0, &acl(1, 10, "10.0.0.0/8"), &origin())
        .await
        .expect("acl");
    store
        .put_managed_list(
            tenant,
            1,
            ManagedListName::Tor,
            &managed_list("192.0.2.1\n"),
            NOW_MS,
            &origin(),
        )
        .await
        .expect("list");
    store
        .create_network_acl_key(tenant, 2, &stored_key(3, "k", NOW_MS), &origin())
        .await
        .expect("acl key");
    store
        .add_signing_key(tenant, &StoredSigningKey::new("kid-1", "sealed", NOW_MS))
        .await
        .expect("signing key");
    store
        .put_client(
            tenant,
            &StoredClient {
                client_id: "client-1".into(),
                secret_hash: "hash".into(),
                scopes: vec!["read:network_acls".into()],
                created_at_ms: NOW_MS,
            },
        )
        .await
        .expect("client");
    store
        .import_directory(tenant, &directory(&["auth0|u1"], &["s1"]))
        .await
        .expect("directory");
    store
        .create_organization(tenant, &organization(5, "org-one", &[CON_A]))
        .await
        .expect("organization");
    store
        .update_branding(
            tenant,
            &BrandingPatch::from_json(&json!({"logo_url": "https://example.com/l.png"}))
                .expect("patch"),
        )
        .await
        .expect("branding");
    store
        .append_log_events(
            tenant,
            &[log_event(NOW_MS, "sapi", Some("client-1"))],
            KEEP_ALL,
        )
        .await
        .expect("log event");
}

/// What the store holds of the tenant, family by family (empty for a fresh tenant).
async fn holdings(store: &Arc<dyn Store>, tenant: &TenantId) -> serde_json::Value {
    let group = GroupId::parse(GROUP).expect("group id");
    json!({
        "acls": store.network_acl_rule_set(tenant).await.expect("rules").acls.len(),
        "lists": store.tenant_policy(tenant, &[]).await.expect("policy").managed_lists.len(),
        "acl_keys": store.network_acl_keys(tenant).await.expect("keys").len(),
        "signing_keys": store.signing_keys(tenant).await.expect("signing keys").len(),
        "clients": store.clients(tenant).await.expect("clients").len(),
        "connections": store.connections(tenant).await.expect("connections").len(),
        "members": store.group_members(tenant, &group, None, 10).await.expect("members")
            .map(|p| p.items.len()),
        "sessions": store.user_sessions(tenant, "auth0|u1", None, 10, false).await
            .expect("sessions").map(|p| p.items.len()),
        "organizations": store.list_organizations(tenant, 0, 10).await
            .expect("organizations").organizations.len(),
        "branding": store.branding(tenant).await.expect("branding").to_json(),
        "logs": store.list_log_events(tenant, &LogFilter::default(), LogOrder::Ascending, 0, 10)
            .await.expect("logs").total,
        "history": store.versions(tenant, None, 100).await.expect("history").len(),
    })
}

async fn tenants_are_created_listed_and_deleted_with_everything_they_own(backend: Backend) {
    let store = backend.store;
    let default = with_tenant(&store).await;
    let generation = store.tenants_generation().await.expect("generation");
    let (acme, beta) = (
        TenantId::new("acme").expect("id"),
        TenantId::new("beta").expect("id"),
    );
    let created = store
        .create_tenant(
            &acme,
            &domains(&["acme.test", "www.acme.test"]),
            &credentials(),
            NOW_MS,
        )
        .await
        .expect("acme");
    assert_eq!(created.domain, "acme.test");
    assert_eq!(created.domains, domains(&["acme.test", "www.acme.test"]));
    store
        .create_tenant(&beta, &domains(&["beta.test"]), &credentials(), NOW_MS + 1)
        .await
        .expect("beta");
    let second = (backend.reopen)().await;
    assert_eq!(
        second.tenants_generation().await.expect("generation"),
        generation + 2,
        "another handle sees the generation move"
    );
    assert_eq!(
        second.tenant_record(&acme).await.expect("read"),
        Some(created.clone())
    );
    let t = store.tenant(&acme).await.expect("read").expect("exists");
    assert_eq!((t.domain.as_str(), t.acl_version), ("acme.test", 0));
    let default_record = store
        .tenant_record(&default)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(default_record.domain, "localhost:8080");
    assert!(default_record.domains.is_empty());

    // Listing pages by id, byte order.
    let ids = |records: Vec<netacl_store::TenantRecord>| -> Vec<String> {
        records.into_iter().map(|r| r.id.to_string()).collect()
    };
    assert_eq!(
        ids(store.list_tenants(None, 10).await.expect("list")),
        ["acme", "beta", "default"]
    );
    let first_page = store.list_tenants(None, 2).await.expect("list");
    assert_eq!(first_page[1].domains, domains(&["beta.test"]));
    assert_eq!(
        ids(store
            .list_tenants(Some(&first_page[1].id), 2)
            .await
            .expect("list")),
        ["default"]
    );
    assert!(store
        .list_tenants(Some(&default), 2)
        .await
        .expect("list")
        .is_empty());

    // Deleting removes everything the tenant owns and nothing of the others.
    fill(&store, &acme).await;
    fill(&store, &beta).await;
    let full = holdings(&store, &beta).await;
    assert_eq!(holdings(&store, &acme).await, full);
    let before = store.tenants_generation().await.expect("generation");
    store.delete_tenant(&acme).await.expect("delete");
    assert_eq!(
        store.tenants_generation().await.expect("generation"),
        before + 1
    );
    assert_eq!(store.tenant(&acme).await.expect("read"), None);
    assert_eq!(store.tenant_record(&acme).await.expect("read"), None);
    assert!(matches!(
        store.network_acl_rule_set(&acme).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_tenant(&acme).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(holdings(&store, &beta).await, full, "beta keeps its data");
    assert_eq!(
        ids(store.list_tenants(None, 10).await.expect("list")),
        ["beta", "default"]
    );

    // The same id and domain again: a fresh tenant, nothing of the old one.
    let again = store
        .create_tenant(&acme, &domains(&["acme.test"]), &credentials(), NOW_MS + 2)
        .await
        .expect("re-create");
    assert_eq!(again.domains, domains(&["acme.test"]));
    assert_eq!(
        holdings(&store, &acme).await,
        json!({"acls": 0, "lists": 0, "acl_keys": 0, "signing_keys": 1, "clients": 1,
               "connections": 0, "members": null, "sessions": null, "organizations": 0,
               "branding": {}, "logs": 0, "history": 0})
    );
    assert_eq!(
        store
            .tenant(&acme)
            .await
            .expect("read")
            .expect("exists")
            .acl_version,
        0
    );
}

async fn refused_tenant_creations_write_nothing(backend: Backend) {
    let store = backend.store;
    with_tenant(&store).await;
    let acme = TenantId::new("acme").expect("id");
    store
        .create_tenant(&acme, &domains(&["acme.test"]), &credentials(), NOW_MS)
        .await
        .expect("acme");
    let generation = store.tenants_generation().await.expect("generation");
    let other = TenantId::new("other").expect("id");
    // A domain of another tenant, even as the second of the list.
    for taken in [&["acme.test"][..], &["fresh.test", "acme.test"][..]] {
        assert!(matches!(
            store.create_tenant(&other, &domains(taken), &credentials(), NOW_MS).await,
            Err(StoreError::DomainTaken(ref d)) if d == "acme.test"
        ));
    }
    // The same domain twice in one list.
    assert!(matches!(
        store
            .create_tenant(
                &other,
                &domains(&["dup.test", "dup.test"]),
                &credentials(),
                NOW_MS
            )
            .await,
        Err(StoreError::DomainTaken(_))
    ));
    // An id that exists.
    assert!(matches!(
        store
            .create_tenant(&acme, &domains(&["new.test"]), &credentials(), NOW_MS)
            .await,
        Err(StoreError::TenantExists(_))
    ));
    assert_eq!(store.tenant(&other).await.expect("read"), None);
    assert_eq!(
        store.tenants_generation().await.expect("generation"),
        generation
    );
    // fresh.test and new.test were not kept: another tenant may have them.
    store
        .create_tenant(
            &other,
            &domains(&["fresh.test", "new.test", "dup.test"]),
            &credentials(),
            NOW_MS,
        )
        .await
        .expect("the refused creates left their domains free");
}

async fn tenants_racing_for_one_domain_have_one_winner(backend: Backend) {
    let first = backend.store;
    with_tenant(&first).await;
    let second = (backend.reopen)().await;
    for round in 0..5 {
        let domain = domains(&[&format!("race{round}.test")]);
        let (d1, d2) = (domain.clone(), domain.clone());
        let (s1, s2) = (Arc::clone(&first), Arc::clone(&second));
        let (t1, t2) = (
            TenantId::new(&format!("one-{round}")).expect("id"),
            TenantId::new(&format!("two-{round}")).expect("id"),
        );
        let a =
            tokio::spawn(async move { s1.create_tenant(&t1, &d1, &credentials(), NOW_MS).await });
        let b =
            tokio::spawn(async move { s2.create_tenant(&t2, &d2, &credentials(), NOW_MS).await });
        let results = [a.await.expect("join"), b.await.expect("join")];
        let winners = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(winners, 1, "round {round}: {results:?}");
        assert!(
            results
                .iter()
                .any(|r| matches!(r, Err(StoreError::DomainTaken(_)))),
            "round {round}: {results:?}"
        );
    }
}

/// Takes a database back from schema 10 to 9 (10: the content-addressed history), in both
/// dialects (the entries of the history, if any, are lost: write them back in the format before).
const UNDO_10: &str = "DROP TABLE network_acl_history_texts; \
                       DROP TABLE network_acl_history_contents; \
                       DROP TABLE network_acl_history_versions; \
                       ALTER TABLE tenants DROP COLUMN history_bytes;";

/// Takes a database back from schema 10 to 7 (8: history), in both dialects.
const UNDO_8: &str = concat!(
    "DROP TABLE network_acl_history_texts; DROP TABLE network_acl_history_contents; \
     DROP TABLE network_acl_history_versions; ALTER TABLE tenants DROP COLUMN history_bytes; ",
    "DROP TABLE tenant_logs; ALTER TABLE tenants DROP COLUMN log_seq; \
     DROP TABLE network_acl_history;"
);

/// Takes a database back from schema 10 to 6 (7: many tenants), in both dialects.
const UNDO_7: &str = concat!(
    "DROP TABLE network_acl_history_texts; DROP TABLE network_acl_history_contents; \
     DROP TABLE network_acl_history_versions; ALTER TABLE tenants DROP COLUMN history_bytes; ",
    "DROP TABLE tenant_logs; ALTER TABLE tenants DROP COLUMN log_seq; \
     DROP TABLE network_acl_history; DROP TABLE tenant_domains; \
     DROP TABLE tenants_generation;"
);

/// Migration 8 (history) applied to a database at schema 7 keeps its rules; the history starts
/// with the first write after it (the version current at migration is available until then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_history_migration_starts_at_the_current_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = TenantId::default_tenant();
    let file = {
        let sqlite = SqliteStore::open(dir.path(), Limits::default()).expect("open");
        let file = sqlite.path().to_owned();
        let store: Arc<dyn Store> = Arc::new(sqlite);
        with_tenant(&store).await;
        for (version, priority) in [(0, 10), (1, 20)] {
            let rule = acl(u128::from(priority), priority, "192.0.2.1");
            store
                .create_network_acl(&tenant, version, &rule, &origin())
                .await
                .expect("write");
        }
        file
    };
    {
        let conn = rusqlite::Connection::open(&file).expect("open file");
        conn.execute_batch(&format!("{UNDO_8} PRAGMA user_version = 7;"))
            .expect("downgrade");
    }
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("migrate"));
    assert!(store
        .versions(&tenant, None, 10)
        .await
        .expect("h")
        .is_empty());
    let current = store.network_acls_at(&tenant, 2).await.expect("current");
    assert_eq!(current.map(|r| r.acls.len()), Some(2));
    assert_eq!(store.network_acls_at(&tenant, 1).await.expect("v1"), None);
    assert_eq!(store.network_acls_at(&tenant, 0).await.expect("v0"), None);
    store
        .delete_network_acl(&tenant, 2, &AclId::from_random(10), &origin())
        .await
        .expect("delete");
    let kept: Vec<u64> = store
        .versions(&tenant, None, 10)
        .await
        .expect("h")
        .iter()
        .map(|e| e.version)
        .collect();
    assert_eq!(kept, [3]);
    let after = store.network_acls_at(&tenant, 3).await.expect("v3");
    assert_eq!(after.map(|r| r.acls.len()), Some(1));
    assert_eq!(
        store.network_acls_at(&tenant, 2).await.expect("v2"),
        None,
        "committed before the history: no entry"
    );
}

fn stored_key(seed: u128, name: &str, at: i64) -> netacl_store::StoredNetworkAclKey {
    netacl_store::StoredNetworkAclKey {
        record: NetworkAclKey {
            id: NetworkAclKeyId::from_random(seed),
            name: name.to_owned(),
            fingerprint: format!("{seed:064x}"),
            created_at: Timestamp::from_unix_millis(at),
            updated_at: Timestamp::from_unix_millis(at),
        },
        sealed_material: format!("sealed-v1:test:{seed}"),
    }
}

async fn network_acl_keys_bump_the_version_and_names_are_unique(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let older = stored_key(1, "proxy-a", 1_700_000_000_000);
    let newer = stored_key(2, "proxy-b", 1_700_000_000_500);
    assert_eq!(
        store
            .create_network_acl_key(&tenant, 0, &older, &origin())
            .await
            .expect("a"),
        1
    );
    assert_eq!(
        store
            .create_network_acl_key(&tenant, 1, &newer, &origin())
            .await
            .expect("b"),
        2
    );
    // A second key of the same name is refused and changes nothing.
    let clash = stored_key(3, "proxy-a", 1_700_000_001_000);
    match store
        .create_network_acl_key(&tenant, 2, &clash, &origin())
        .await
    {
        Err(StoreError::NameTaken(_)) => {}
        other => panic!("expected NameTaken, got {other:?}"),
    }
    assert_eq!(
        store
            .tenant(&tenant)
            .await
            .expect("t")
            .expect("t")
            .acl_version,
        2
    );
    // A stale version is a conflict.
    assert!(matches!(
        store
            .create_network_acl_key(&tenant, 1, &stored_key(4, "c", 1), &origin())
            .await,
        Err(StoreError::VersionConflict { .. })
    ));
    // Newest first, sealed material back as stored.
    let keys = store.network_acl_keys(&tenant).await.expect("list");
    assert_eq!(keys, vec![newer.clone(), older.clone()]);
    let reopened = (backend.reopen)().await;
    assert_eq!(
        reopened.network_acl_keys(&tenant).await.expect("list"),
        keys
    );
    assert_eq!(
        store
            .delete_network_acl_key(&tenant, 2, &older.record.id, &origin())
            .await
            .expect("delete"),
        3
    );
    assert!(matches!(
        store
            .delete_network_acl_key(&tenant, 3, &older.record.id, &origin())
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        store.network_acl_keys(&tenant).await.expect("list"),
        vec![newer]
    );
}

// ---------------------------------------------------------------------------------------------
// History

/// The change a node records when it reloads a managed list file.
fn reload() -> RecordChange {
    RecordChange {
        kind: RecordKind::ManagedList,
        op: ChangeOp::Reload,
        id: "auth0.tor".into(),
        before: None,
        after: Some(json!({"name": "auth0.tor", "source": "file"})),
    }
}

/// `(kind, op, id)` of each change of an entry.
fn summary(changes: &[RecordChange]) -> Vec<(&'static str, &'static str, String)> {
    changes
        .iter()
        .map(|c| (c.kind.as_str(), c.op.as_str(), c.id.clone()))
        .collect()
}

async fn rules_now(store: &Arc<dyn Store>, tenant: &TenantId) -> Vec<NetworkAcl> {
    store
        .network_acl_rule_set(tenant)
        .await
        .expect("rules")
        .acls
}

async fn history_records_every_write_and_rebuilds_every_version(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let by = |client: &str, request: &str| WriteOrigin {
        client_id: Some(client.into()),
        request_id: Some(request.into()),
    };
    // The rule set after each version, as the writes leave it.
    let mut expected: Vec<Vec<NetworkAcl>> = vec![Vec::new()];
    let a = acl(1, 30, "10.0.0.0/8");
    let b = acl(2, 10, "192.0.2.1");
    store
        .create_network_acl(&tenant, 0, &a, &by("ops", "r1"))
        .await
        .expect("a");
    expected.push(rules_now(&store, &tenant).await);
    store
        .create_network_acl(&tenant, 1, &b, &by("ops", "r2"))
        .await
        .expect("b");
    expected.push(rules_now(&store, &tenant).await);
    let mut a2 = acl(1, 20, "10.0.0.0/16");
    a2.updated_at = Timestamp::from_unix_millis(a.updated_at.unix_millis() + 9);
    store
        .replace_network_acl(&tenant, 2, &a2, &by("deploy", "r3"))
        .await
        .expect("replace");
    expected.push(rules_now(&store, &tenant).await);
    store
        .delete_network_acl(&tenant, 3, &b.id, &by("ops", "r4"))
        .await
        .expect("delete");
    expected.push(rules_now(&store, &tenant).await);
    let key = stored_key(7, "proxy", 1_700_000_000_000);
    store
        .create_network_acl_key(&tenant, 4, &key, &by("ops", "r5"))
        .await
        .expect("key");
    expected.push(rules_now(&store, &tenant).await);
    store
        .put_managed_list(
            &tenant,
            5,
            ManagedListName::Tor,
            &managed_list("192.0.2.7\n198.51.100.0/24\n"),
            NOW_MS,
            &by("ops", "r6"),
        )
        .await
        .expect("list");
    expected.push(rules_now(&store, &tenant).await);
    store
        .delete_network_acl_key(&tenant, 6, &key.record.id, &by("ops", "r7"))
        .await
        .expect("delete key");
    expected.push(rules_now(&store, &tenant).await);
    store
        .bump_version(&tenant, 7, &WriteOrigin::default(), &reload())
        .await
        .expect("bump");
    expected.push(rules_now(&store, &tenant).await);
    store
        .delete_managed_list(&tenant, 8, ManagedListName::Tor, &by("ops", "r9"))
        .await
        .expect("delete list");
    expected.push(rules_now(&store, &tenant).await);
    // Refused writes record nothing.
    assert!(store
        .create_network_acl(&tenant, 9, &acl(3, 20, "192.0.2.2"), &by("ops", "x"))
        .await
        .is_err());
    assert!(store
        .delete_network_acl(&tenant, 9, &b.id, &by("ops", "x"))
        .await
        .is_err());

    let all = store.versions(&tenant, None, 100).await.expect("versions");
    let versions: Vec<u64> = all.iter().map(|e| e.version).collect();
    assert_eq!(versions, (1..=9).rev().collect::<Vec<_>>(), "newest first");
    let listed: Vec<_> = all
        .iter()
        .rev()
        .map(|e| {
            (
                e.client_id.clone(),
                e.request_id.clone(),
                summary(&e.changes),
            )
        })
        .collect();
    let key_id = key.record.id.to_string();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        listed,
        vec![
            (
                some("ops"),
                some("r1"),
                vec![("network_acl", "create", a.id.to_string())]
            ),
            (
                some("ops"),
                some("r2"),
                vec![("network_acl", "create", b.id.to_string())]
            ),
            (
                some("deploy"),
                some("r3"),
                vec![("network_acl", "update", a.id.to_string())]
            ),
            (
                some("ops"),
                some("r4"),
                vec![("network_acl", "delete", b.id.to_string())]
            ),
            (
                some("ops"),
                some("r5"),
                vec![("network_acl_key", "create", key_id.clone())]
            ),
            (
                some("ops"),
                some("r6"),
                vec![("managed_list", "create", "auth0.tor".into())]
            ),
            (
                some("ops"),
                some("r7"),
                vec![("network_acl_key", "delete", key_id.clone())]
            ),
            (
                None,
                None,
                vec![("managed_list", "reload", "auth0.tor".into())]
            ),
            (
                some("ops"),
                some("r9"),
                vec![("managed_list", "delete", "auth0.tor".into())]
            ),
        ]
    );
    assert!(all
        .windows(2)
        .all(|w| w[0].created_at_ms >= w[1].created_at_ms));

    // A network ACL change carries both records; key and list changes only their metadata.
    let replace = store
        .version_entry(&tenant, 3)
        .await
        .expect("entry")
        .expect("kept");
    assert_eq!(replace.changes[0].before, Some(a.to_json()));
    assert_eq!(replace.changes[0].after, Some(a2.to_json()));
    let text = format!("{all:?}");
    assert!(
        !text.contains(&key.sealed_material) && !text.contains(&key.record.fingerprint),
        "no key material in the history"
    );
    assert!(
        !text.contains("198.51.100.0/24"),
        "no list items in the history"
    );
    let list = &all[3].changes[0];
    assert_eq!(
        list.after.as_ref().and_then(|v| v.get("entries")),
        Some(&json!(2))
    );

    // Paging: `from` is inclusive, newest first.
    let page: Vec<u64> = store
        .versions(&tenant, Some(4), 2)
        .await
        .expect("page")
        .iter()
        .map(|e| e.version)
        .collect();
    assert_eq!(page, [4, 3]);
    assert!(store
        .versions(&tenant, Some(0), 10)
        .await
        .expect("past the end")
        .is_empty());
    assert_eq!(store.version_entry(&tenant, 10).await.expect("entry"), None);

    // Every version's rule set, rebuilt from the current one.
    for (version, acls) in expected.iter().enumerate() {
        let rebuilt = store
            .network_acls_at(&tenant, version as u64)
            .await
            .expect("rebuild")
            .unwrap_or_else(|| panic!("version {version} is kept"));
        assert_eq!(rebuilt.version, version as u64);
        assert_eq!(&rebuilt.acls, acls, "version {version}");
    }
    assert_eq!(
        store.network_acls_at(&tenant, 10).await.expect("future"),
        None
    );

    // Another handle (process, node) reads the same history; another tenant has none of it.
    let reopened = (backend.reopen)().await;
    assert_eq!(
        reopened
            .versions(&tenant, None, 100)
            .await
            .expect("reopened"),
        all
    );
    let other = TenantId::new("other").expect("id");
    store
        .create_tenant(&other, &domains(&["other.test"]), &credentials(), NOW_MS)
        .await
        .expect("other");
    assert!(store
        .versions(&other, None, 10)
        .await
        .expect("other")
        .is_empty());
    assert_eq!(store.network_acls_at(&other, 3).await.expect("other"), None);
    assert_eq!(store.version_entry(&other, 3).await.expect("other"), None);
}

async fn restore_brings_a_version_back_in_one_write(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let a = acl(1, 30, "10.0.0.0/8");
    let b = acl(2, 10, "192.0.2.1");
    store
        .create_network_acl(&tenant, 0, &a, &origin())
        .await
        .expect("a");
    store
        .create_network_acl(&tenant, 1, &b, &origin())
        .await
        .expect("b");
    let at_two = rules_now(&store, &tenant).await;
    // b goes, a takes b's priority, c takes a's: a restore must free priorities before it
    // reuses them.
    store
        .delete_network_acl(&tenant, 2, &b.id, &origin())
        .await
        .expect("del b");
    let mut a2 = acl(1, 10, "10.0.0.0/8");
    a2.updated_at = Timestamp::from_unix_millis(a.updated_at.unix_millis() + 1);
    store
        .replace_network_acl(&tenant, 3, &a2, &origin())
        .await
        .expect("a2");
    let c = acl(3, 30, "203.0.113.0/24");
    store
        .create_network_acl(&tenant, 4, &c, &origin())
        .await
        .expect("c");
    let at_five = rules_now(&store, &tenant).await;

    // Stale: refused, nothing written.
    assert!(matches!(
        store
            .restore_network_acls(&tenant, 4, &at_two, &origin())
            .await,
        Err(StoreError::VersionConflict {
            expected: 4,
            actual: 5
        })
    ));
    assert_eq!(rules_now(&store, &tenant).await, at_five);
    assert_eq!(
        store.versions(&tenant, None, 100).await.expect("h").len(),
        5
    );

    let rollback = WriteOrigin {
        client_id: Some("ops".into()),
        request_id: Some("rollback-1".into()),
    };
    assert_eq!(
        store
            .restore_network_acls(&tenant, 5, &at_two, &rollback)
            .await
            .expect("restore"),
        6
    );
    assert_eq!(rules_now(&store, &tenant).await, at_two);
    let entry = store
        .version_entry(&tenant, 6)
        .await
        .expect("entry")
        .expect("kept");
    assert_eq!(entry.request_id.as_deref(), Some("rollback-1"));
    let mut changes = summary(&entry.changes);
    changes.sort();
    let mut want = vec![
        ("network_acl", "update", a.id.to_string()),
        ("network_acl", "delete", c.id.to_string()),
        ("network_acl", "create", b.id.to_string()),
    ];
    want.sort();
    assert_eq!(changes, want);
    // The versions in between are still there, and rebuild as they were.
    assert_eq!(
        store
            .network_acls_at(&tenant, 5)
            .await
            .expect("v5")
            .expect("kept")
            .acls,
        at_five
    );
    assert_eq!(
        store
            .network_acls_at(&tenant, 2)
            .await
            .expect("v2")
            .expect("kept")
            .acls,
        at_two
    );
    // Restoring what is there changes no record (the version still moves: callers that want a
    // no-op compare first).
    store
        .restore_network_acls(&tenant, 6, &at_two, &origin())
        .await
        .expect("same");
    let same = store
        .version_entry(&tenant, 7)
        .await
        .expect("e")
        .expect("kept");
    assert!(same.changes.is_empty());
}

/// The versions kept, newest first.
async fn kept(store: &Arc<dyn Store>, tenant: &TenantId) -> Vec<u64> {
    store
        .versions(tenant, None, 100)
        .await
        .expect("versions")
        .iter()
        .map(|e| e.version)
        .collect()
}

/// The bytes the store counts for the history equal the text its tables hold (no content is
/// left behind by the versions removed, none is missing for those kept).
async fn history_bytes_add_up(backend: &Backend, store: &Arc<dyn Store>, tenant: &TenantId) {
    let counted = store.history_bytes(tenant).await.expect("bytes");
    let t = tenant.as_str();
    let held = (backend.sql)(format!(
        "SELECT CAST((SELECT COALESCE(SUM(bytes), 0) FROM network_acl_history_versions \
                      WHERE tenant_id = '{t}') \
                   + (SELECT COALESCE(SUM(size), 0) FROM network_acl_history_contents \
                      WHERE tenant_id = '{t}') AS BIGINT)"
    ))
    .await;
    assert_eq!(counted as i64, held, "history bytes");
    let orphans = (backend.sql)(format!(
        "SELECT COUNT(*) FROM network_acl_history_contents AS c WHERE c.tenant_id = '{t}' \
         AND NOT EXISTS (SELECT 1 FROM network_acl_history_texts AS x \
                         WHERE x.tenant_id = c.tenant_id AND x.hash = c.hash)"
    ))
    .await;
    assert_eq!(orphans, 0, "every content has its text");
}

async fn history_retention_caps_the_count_the_age_and_the_bytes(backend: Backend) {
    let tenant = with_tenant(&backend.store).await;
    let mut expected: Vec<Vec<NetworkAcl>> = vec![Vec::new()];
    // The count is a hard cap: versions go however young they are.
    let counted = (backend.reopen_retaining)(HistoryRetention {
        versions: 3,
        days: 1,
        bytes: 0,
    })
    .await;
    for version in 0..6u64 {
        let rule = acl(u128::from(version) + 1, 10 + version, "192.0.2.1");
        counted
            .create_network_acl(&tenant, version, &rule, &origin())
            .await
            .expect("write");
        expected.push(rules_now(&counted, &tenant).await);
    }
    assert_eq!(kept(&counted, &tenant).await, [6, 5, 4]);
    for version in [4u64, 5, 6] {
        let rebuilt = counted
            .network_acls_at(&tenant, version)
            .await
            .expect("rebuild")
            .expect("kept");
        assert_eq!(
            rebuilt.acls, expected[version as usize],
            "version {version}"
        );
    }
    assert_eq!(counted.network_acls_at(&tenant, 3).await.expect("v3"), None);
    assert_eq!(counted.network_acls_at(&tenant, 0).await.expect("v0"), None);
    assert_eq!(counted.version_entry(&tenant, 3).await.expect("e3"), None);
    history_bytes_add_up(&backend, &counted, &tenant).await;

    // The age is a maximum: versions older than it go although the count would keep them.
    let aged = (backend.reopen_retaining)(HistoryRetention {
        versions: 1_000,
        days: 1,
        bytes: 0,
    })
    .await;
    (backend.sql)(
        "UPDATE network_acl_history_versions SET created_at = created_at - 172800000 \
         WHERE version <= 5"
            .into(),
    )
    .await;
    aged.delete_network_acl(&tenant, 6, &expected[1][0].id, &origin())
        .await
        .expect("write");
    expected.push(rules_now(&aged, &tenant).await);
    assert_eq!(kept(&aged, &tenant).await, [7, 6]);
    assert_eq!(
        aged.network_acls_at(&tenant, 6)
            .await
            .expect("v6")
            .expect("kept")
            .acls,
        expected[6]
    );
    assert_eq!(aged.network_acls_at(&tenant, 5).await.expect("v5"), None);
    history_bytes_add_up(&backend, &aged, &tenant).await;

    // The byte budget: each write brings a rule of its own (about 9 KB of text); the history
    // stays within 40,000 bytes, the oldest versions going first.
    let budget = 40_000u64;
    let sized = (backend.reopen_retaining)(HistoryRetention {
        versions: 1_000,
        days: 0,
        bytes: budget,
    })
    .await;
    let mut version = 7u64;
    for round in 0..12u32 {
        let cidrs: Vec<String> = (0..600u32)
            .map(|i| format!("10.{round}.{}.{}", i / 256, i % 256))
            .collect();
        let spec = NetworkAclSpec::from_json(
            &json!({"description": format!("round {round}"), "active": true, "priority": 90,
                    "rule": {"action": {"block": true}, "scope": "tenant",
                             "match": {"ipv4_cidrs": cidrs}}}),
            &Limits::default(),
        )
        .expect("spec");
        let at = Timestamp::from_unix_millis(1_700_000_100_000 + i64::from(round));
        let record = NetworkAcl {
            id: AclId::from_random(900),
            spec,
            created_at: Timestamp::from_unix_millis(1_700_000_100_000),
            updated_at: at,
        };
        version = if round == 0 {
            sized
                .create_network_acl(&tenant, version, &record, &origin())
                .await
        } else {
            sized
                .replace_network_acl(&tenant, version, &record, &origin())
                .await
        }
        .expect("write");
        expected.push(rules_now(&sized, &tenant).await);
        let now_kept = kept(&sized, &tenant).await;
        let bytes = sized.history_bytes(&tenant).await.expect("bytes");
        assert!(
            bytes <= budget || now_kept == [version],
            "round {round}: {bytes} bytes kept in versions {now_kept:?}"
        );
        let contiguous: Vec<u64> = (0..now_kept.len() as u64).map(|i| version - i).collect();
        assert_eq!(now_kept, contiguous, "round {round}");
    }
    let now_kept = kept(&sized, &tenant).await;
    assert!(
        now_kept.len() > 1 && now_kept.len() < 12,
        "the budget keeps some versions, not all: {now_kept:?}"
    );
    for version in &now_kept {
        let rebuilt = sized
            .network_acls_at(&tenant, *version)
            .await
            .expect("rebuild")
            .expect("kept");
        assert_eq!(
            rebuilt.acls, expected[*version as usize],
            "version {version}"
        );
    }
    history_bytes_add_up(&backend, &sized, &tenant).await;

    // A budget smaller than the current version alone keeps that version only.
    let tiny = (backend.reopen_retaining)(HistoryRetention {
        versions: 1_000,
        days: 0,
        bytes: 1,
    })
    .await;
    tiny.bump_version(&tenant, version, &WriteOrigin::default(), &reload())
        .await
        .expect("write");
    assert_eq!(kept(&tiny, &tenant).await, [version + 1]);
    assert_eq!(
        tiny.network_acls_at(&tenant, version + 1)
            .await
            .expect("current")
            .expect("kept")
            .acls,
        expected[version as usize]
    );
    history_bytes_add_up(&backend, &tiny, &tenant).await;
}

/// Removal is bounded per write (64 versions) and converges: lowering the byte budget to
/// nothing over 70 versions takes two writes to bring the history down to the current version.
async fn history_removal_is_bounded_per_write_and_converges(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let tenant = with_tenant(&store).await;
    let mut rule = acl(1, 10, "192.0.2.1");
    store
        .create_network_acl(&tenant, 0, &rule, &origin())
        .await
        .expect("create");
    for version in 1..70u64 {
        rule.spec.active = !rule.spec.active;
        store
            .replace_network_acl(&tenant, version, &rule, &origin())
            .await
            .expect("toggle");
    }
    assert_eq!(kept(&store, &tenant).await.len(), 70);
    let small = (backend.reopen_retaining)(HistoryRetention {
        versions: 1_000,
        days: 0,
        bytes: 1,
    })
    .await;
    rule.spec.active = !rule.spec.active;
    small
        .replace_network_acl(&tenant, 70, &rule, &origin())
        .await
        .expect("toggle");
    let after_one = kept(&small, &tenant).await;
    assert_eq!(after_one.len(), 71 - 64, "{after_one:?}");
    history_bytes_add_up(&backend, &small, &tenant).await;
    rule.spec.active = !rule.spec.active;
    small
        .replace_network_acl(&tenant, 71, &rule, &origin())
        .await
        .expect("toggle");
    assert_eq!(kept(&small, &tenant).await, [72]);
    assert_eq!(
        small
            .network_acls_at(&tenant, 72)
            .await
            .expect("v72")
            .expect("kept")
            .acls,
        vec![rule]
    );
    history_bytes_add_up(&backend, &small, &tenant).await;
}

/// The history as schema 9 stored it (whole records in every entry, table
/// `network_acl_history`) is converted by migration 10: every version answers exactly as it did
/// (its rule set, its entry with the records before and after, the list); an entry that cannot
/// be converted stays in `network_acl_history` (reported in the log), unread; writes and
/// removal go on from the converted history.
async fn history_of_schema_9_is_converted_and_answers_as_before(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let tenant = with_tenant(&store).await;
    let by = |request: &str| WriteOrigin {
        client_id: Some("ops".into()),
        request_id: Some(request.into()),
    };
    // A history of every kind of change.
    let a = acl(1, 30, "10.0.0.0/8");
    let b = large_acl(2, 10, 2_000);
    store
        .create_network_acl(&tenant, 0, &a, &by("r1"))
        .await
        .expect("a");
    store
        .create_network_acl(&tenant, 1, &b, &by("r2"))
        .await
        .expect("b");
    let mut a2 = acl(1, 20, "10.0.0.0/16");
    a2.updated_at = Timestamp::from_unix_millis(a.updated_at.unix_millis() + 9);
    store
        .replace_network_acl(&tenant, 2, &a2, &by("r3"))
        .await
        .expect("a2");
    let mut b_off = b.clone();
    b_off.spec.active = false;
    store
        .replace_network_acl(&tenant, 3, &b_off, &by("r4"))
        .await
        .expect("b off");
    let key = stored_key(7, "proxy", 1_700_000_000_000);
    store
        .create_network_acl_key(&tenant, 4, &key, &by("r5"))
        .await
        .expect("key");
    store
        .put_managed_list(
            &tenant,
            5,
            ManagedListName::Tor,
            &managed_list("192.0.2.7\n198.51.100.0/24\n"),
            NOW_MS,
            &by("r6"),
        )
        .await
        .expect("list");
    store
        .bump_version(&tenant, 6, &WriteOrigin::default(), &reload())
        .await
        .expect("reload");
    store
        .delete_network_acl(&tenant, 7, &a.id, &by("r8"))
        .await
        .expect("delete a");
    let at_three = store
        .network_acls_at(&tenant, 3)
        .await
        .expect("v3")
        .expect("kept");
    store
        .restore_network_acls(&tenant, 8, &at_three.acls, &by("r9"))
        .await
        .expect("restore");
    let newest = 9u64;
    let list = store.versions(&tenant, None, 100).await.expect("versions");
    let mut entries = Vec::new();
    let mut sets = Vec::new();
    for version in 0..=newest {
        sets.push(store.network_acls_at(&tenant, version).await.expect("set"));
        entries.push(store.version_entry(&tenant, version).await.expect("entry"));
    }
    assert_eq!(entries[0], None);
    assert!(sets.iter().all(Option::is_some));

    // A second tenant whose entry of version 2 is not the format: 3 converts, 2 and 1 stay.
    let other = TenantId::new("other").expect("id");
    store
        .create_tenant(&other, &domains(&["other.test"]), &credentials(), NOW_MS)
        .await
        .expect("other");
    for version in 0..3u64 {
        let rule = acl(50 + u128::from(version), 10 + version, "203.0.113.1");
        store
            .create_network_acl(&other, version, &rule, &origin())
            .await
            .expect("other");
    }
    let other_three = store
        .version_entry(&other, 3)
        .await
        .expect("e")
        .expect("kept");
    let other_set = store
        .network_acls_at(&other, 3)
        .await
        .expect("s")
        .expect("kept");
    let other_old = [
        (
            1u64,
            store
                .version_entry(&other, 1)
                .await
                .expect("e")
                .expect("kept"),
        ),
        (3, other_three.clone()),
    ];

    // Back to schema 9: its tables, and the entries as it wrote them, with its SQL.
    let quote = |text: &str| format!("'{}'", text.replace('\'', "''"));
    let nullable = |text: &Option<String>| text.as_deref().map_or("NULL".to_owned(), quote);
    let old_row = |tenant: &TenantId, entry: &netacl_store::VersionEntry| {
        let changes: Vec<serde_json::Value> = entry
            .changes
            .iter()
            .map(|c| {
                json!({"type": c.kind.as_str(), "op": c.op.as_str(), "id": c.id,
                            "before": c.before, "after": c.after})
            })
            .collect();
        format!(
            "INSERT INTO network_acl_history \
             (tenant_id, version, created_at, client_id, request_id, changes) \
             VALUES ({}, {}, {}, {}, {}, {});",
            quote(tenant.as_str()),
            entry.version,
            entry.created_at_ms,
            nullable(&entry.client_id),
            nullable(&entry.request_id),
            quote(&serde_json::Value::Array(changes).to_string())
        )
    };
    let mut sql = String::from(UNDO_10);
    for entry in entries.iter().flatten() {
        sql.push_str(&old_row(&tenant, entry));
    }
    for (_, entry) in &other_old {
        sql.push_str(&old_row(&other, entry));
    }
    sql.push_str(&format!(
        "INSERT INTO network_acl_history \
         (tenant_id, version, created_at, client_id, request_id, changes) \
         VALUES ('other', 2, {NOW_MS}, NULL, NULL, 'not the format');"
    ));
    sql.push_str(match backend.dialect {
        Dialect::Sqlite => "PRAGMA user_version = 9;",
        Dialect::Postgres => "DELETE FROM netacl_schema_migrations WHERE version >= 10;",
    });
    (backend.sql)(sql).await;
    assert_eq!(
        (backend.sql)("SELECT COUNT(*) FROM network_acl_history".into()).await,
        newest as i64 + 3
    );

    // Migration 10 converts it: every answer as before.
    let migrated = (backend.reopen)().await;
    assert_eq!(
        migrated.versions(&tenant, None, 100).await.expect("list"),
        list
    );
    for version in 0..=newest {
        assert_eq!(
            migrated
                .network_acls_at(&tenant, version)
                .await
                .expect("set"),
            sets[version as usize],
            "version {version}"
        );
        assert_eq!(
            migrated
                .version_entry(&tenant, version)
                .await
                .expect("entry"),
            entries[version as usize],
            "entry {version}"
        );
    }
    history_bytes_add_up(&backend, &migrated, &tenant).await;
    // The other tenant: what converts is served, the rest stays where it was, unread.
    assert_eq!(kept(&migrated, &other).await, [3]);
    assert_eq!(
        migrated.version_entry(&other, 3).await.expect("e"),
        Some(other_three)
    );
    assert_eq!(
        migrated.network_acls_at(&other, 3).await.expect("s"),
        Some(other_set)
    );
    assert_eq!(migrated.network_acls_at(&other, 2).await.expect("s"), None);
    assert_eq!(
        (backend.sql)(
            "SELECT COUNT(*) FROM network_acl_history WHERE tenant_id = 'other' AND version <= 2"
                .into()
        )
        .await,
        2
    );
    assert_eq!(
        (backend.sql)("SELECT COUNT(*) FROM network_acl_history WHERE tenant_id <> 'other'".into())
            .await,
        0
    );
    history_bytes_add_up(&backend, &migrated, &other).await;

    // Writes go on from the converted history, and removal keeps the rest exact.
    let pruning = (backend.reopen_retaining)(HistoryRetention {
        versions: 4,
        days: 0,
        bytes: 0,
    })
    .await;
    pruning
        .delete_network_acl(&tenant, newest, &b.id, &by("r10"))
        .await
        .expect("write");
    assert_eq!(kept(&pruning, &tenant).await, [10, 9, 8, 7]);
    for version in 7..=newest {
        assert_eq!(
            pruning
                .network_acls_at(&tenant, version)
                .await
                .expect("set"),
            sets[version as usize],
            "version {version}"
        );
        assert_eq!(
            pruning
                .version_entry(&tenant, version)
                .await
                .expect("entry"),
            entries[version as usize],
            "entry {version}"
        );
    }
    assert_eq!(
        pruning
            .network_acls_at(&tenant, 10)
            .await
            .expect("v10")
            .expect("kept")
            .acls,
        vec![a2.clone()]
    );
    history_bytes_add_up(&backend, &pruning, &tenant).await;
}

/// A rule of `cidrs` distinct /24s (10.0.0.0/24, 10.0.1.0/24, ... on into 11.0.0.0/8).
fn large_acl(seed: u128, priority: u64, cidrs: usize) -> NetworkAcl {
    let list: Vec<String> = (0..cidrs)
        .map(|i| format!("{}.{}.{}.0/24", 10 + i / 65_536, (i / 256) % 256, i % 256))
        .collect();
    let spec = NetworkAclSpec::from_json(
        &json!({
            "description": format!("large rule {seed}"),
            "active": true,
            "priority": priority,
            "rule": {"action": {"block": true}, "scope": "tenant",
                     "match": {"ipv4_cidrs": list}}
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

/// The size of a record's `rule`: what "one copy of the rule" weighs.
fn rule_bytes(acl: &NetworkAcl) -> i64 {
    serde_json::to_string(&acl.to_json()["rule"])
        .expect("json")
        .len() as i64
}

/// Toggling `active` on a rule of 100,000 CIDRs forty times grows the history tables by less
/// than one copy of the rule, and every one of the 41 versions still rebuilds as it was.
async fn history_grows_in_proportion_to_change(backend: Backend) {
    let store = Arc::clone(&backend.store);
    let tenant = with_tenant(&store).await;
    let large = large_acl(1, 10, 100_000);
    let copy = rule_bytes(&large);
    store
        .create_network_acl(&tenant, 0, &large, &origin())
        .await
        .expect("create");
    let before = backend.history_table_bytes().await;
    let database_before = backend.database_bytes().await;
    let mut expected = vec![large.clone()];
    let mut current = large.clone();
    for version in 1..=40u64 {
        current.spec.active = !current.spec.active;
        current.updated_at = Timestamp::from_unix_millis(current.updated_at.unix_millis() + 1);
        store
            .replace_network_acl(&tenant, version, &current, &origin())
            .await
            .expect("toggle");
        expected.push(current.clone());
    }
    let after = backend.history_table_bytes().await;
    let database_after = backend.database_bytes().await;
    eprintln!(
        "{:?}: 40 toggles of a rule of {copy} bytes grew the history tables by {} bytes \
         ({before} -> {after}), the whole database by {} bytes ({database_before} -> \
         {database_after})",
        backend.dialect,
        after - before,
        database_after - database_before
    );
    assert!(
        after - before < copy,
        "the history tables grew by {} bytes for 40 toggles: more than one copy of the rule \
         ({copy} bytes)",
        after - before
    );
    if backend.dialect == Dialect::Sqlite {
        // The whole file too (PostgreSQL keeps the live table's replaced rows until vacuum).
        assert!(
            database_after - database_before < copy,
            "the database file grew by {} bytes for 40 toggles",
            database_after - database_before
        );
    }
    let started = std::time::Instant::now();
    let oldest = store
        .network_acls_at(&tenant, 1)
        .await
        .expect("rebuild")
        .expect("kept");
    eprintln!(
        "{:?}: the oldest of 41 versions rebuilt in {:?}",
        backend.dialect,
        started.elapsed()
    );
    assert_eq!(oldest.acls, vec![large.clone()]);
    for version in [2u64, 21, 40, 41] {
        let rebuilt = store
            .network_acls_at(&tenant, version)
            .await
            .expect("rebuild")
            .expect("kept");
        assert_eq!(rebuilt.acls, vec![expected[version as usize - 1].clone()]);
    }
    let toggle = store
        .version_entry(&tenant, 21)
        .await
        .expect("entry")
        .expect("kept");
    assert_eq!(toggle.changes[0].before, Some(expected[19].to_json()));
    assert_eq!(toggle.changes[0].after, Some(expected[20].to_json()));
}

/// Migration 6 (network ACL keys) applied to a database at schema version 4 keeps its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_network_acl_keys_migration_keeps_existing_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant = TenantId::default_tenant();
    let a = acl(5, 20, "192.0.2.0/24");
    let file = {
        let sqlite = SqliteStore::open(dir.path(), Limits::default()).expect("open");
        let file = sqlite.path().to_owned();
        let store: Arc<dyn Store> = Arc::new(sqlite);
        with_tenant(&store).await;
        store
            .create_network_acl(&tenant, 0, &a, &origin())
            .await
            .expect("acl");
        file
    };
    {
        let conn = rusqlite::Connection::open(&file).expect("open file");
        conn.execute_batch(&format!(
            "{UNDO_7} DROP TABLE network_acl_keys; PRAGMA user_version = 5;"
        ))
        .expect("downgrade");
    }
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("migrate"));
    let rules = store.network_acl_rule_set(&tenant).await.expect("rules");
    assert_eq!((rules.version, rules.acls), (1, vec![a]));
    assert_eq!(
        store
            .create_network_acl_key(&tenant, 1, &stored_key(9, "k", 1), &origin())
            .await
            .expect("the new table works"),
        2
    );
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL only: migrations, notifications, reconnection, corruption, unavailability

/// Migration 4 (managed lists) applied to a database at schema version 3 keeps its data.
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
        .create_network_acl(&tenant, 0, &a, &origin())
        .await
        .expect("acl");
    drop(backend);
    let (client, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "{UNDO_7} {POSTGRES_UNDO_5} DROP TABLE network_acl_keys; DROP TABLE managed_lists;
                 DELETE FROM netacl_schema_migrations WHERE version >= 4;"
        ))
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
                &managed_list("10.0.0.1\n"),
                NOW_MS,
                &origin(),
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

/// Tenants created and deleted are announced (`tenants`), a refused create is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tenant_changes_are_announced() {
    let Some(url) = database_url("postgres_tenant_changes_are_announced") else {
        return;
    };
    let db = fresh_database(&url).await;
    let store = PostgresStore::connect(&db, Limits::default())
        .await
        .expect("connect");
    let mut listener = store.listen();
    assert_eq!(next(&mut listener).await, ChangeNotice::Connected);
    let acme = TenantId::new("acme").expect("id");
    store
        .create_tenant(&acme, &domains(&["acme.test"]), &credentials(), NOW_MS)
        .await
        .expect("create");
    assert_eq!(next(&mut listener).await, ChangeNotice::TenantsChanged);
    let other = TenantId::new("other").expect("id");
    assert!(store
        .create_tenant(&other, &domains(&["acme.test"]), &credentials(), NOW_MS)
        .await
        .is_err());
    store.delete_tenant(&acme).await.expect("delete");
    assert_eq!(next(&mut listener).await, ChangeNotice::TenantsChanged);
    assert_eq!(store.tenants_generation().await.expect("generation"), 2);
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
    store
        .create_network_acl(&tenant, 0, &a, &origin())
        .await
        .expect("a");
    assert_eq!(
        next(&mut listener).await,
        ChangeNotice::Changed {
            tenant: tenant.clone(),
            version: 1
        }
    );
    // A refused write announces nothing: the next notice is the next commit's.
    assert!(store
        .create_network_acl(&tenant, 0, &a, &origin())
        .await
        .is_err());
    store
        .delete_network_acl(&tenant, 1, &a.id, &origin())
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
        .create_network_acl(&tenant, 2, &a, &origin())
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
        .create_network_acl(&tenant, 0, &acl(4, 20, "10.0.0.0/8"), &origin())
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

// ---------------------------------------------------------------------------------------------
// Tenant logs

/// No retention bound.
const KEEP_ALL: LogRetention = LogRetention {
    max_events: None,
    max_age_ms: None,
};

fn log_event(date_ms: i64, event_type: &str, client_id: Option<&str>) -> NewLogEvent {
    NewLogEvent {
        date_ms,
        event_type: event_type.into(),
        client_id: client_id.map(str::to_owned),
        record: json!({"description": format!("{event_type} at {date_ms}"),
                       "details": {"status": 200}}),
    }
}

async fn logs_are_numbered_filtered_paged_retained_and_kept(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let other = TenantId::new("other").expect("id");
    store
        .create_tenant(&other, &domains(&["other.test"]), &credentials(), NOW_MS)
        .await
        .expect("other");
    // Dates out of order: numbers follow the appends, listings follow the dates.
    let now = Timestamp::now().unix_millis();
    let events = [
        log_event(now - 5_000, "sapi", Some("a")),
        log_event(now - 9_000, "fapi", Some("b")),
        log_event(now - 1_000, "sapi", Some("b")),
    ];
    let numbers = store
        .append_log_events(&tenant, &events, KEEP_ALL)
        .await
        .expect("append");
    assert_eq!(numbers, [1, 2, 3]);
    let more = store
        .append_log_events(
            &tenant,
            &[log_event(now - 3_000, "acls_summary", None)],
            KEEP_ALL,
        )
        .await
        .expect("append");
    assert_eq!(more, [4]);
    assert!(store
        .append_log_events(&tenant, &[], KEEP_ALL)
        .await
        .expect("nothing")
        .is_empty());
    // Another tenant has its own numbers, and sees none of these.
    assert_eq!(
        store
            .append_log_events(&other, &[log_event(now, "sapi", Some("a"))], KEEP_ALL)
            .await
            .expect("other"),
        [1]
    );
    let all = |order| {
        let store = Arc::clone(&store);
        let tenant = tenant.clone();
        async move {
            let page = store
                .list_log_events(&tenant, &LogFilter::default(), order, 0, 100)
                .await
                .expect("list");
            (
                page.total,
                page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            )
        }
    };
    assert_eq!(all(LogOrder::Ascending).await, (4, vec![2, 1, 4, 3]));
    assert_eq!(all(LogOrder::Descending).await, (4, vec![3, 4, 1, 2]));
    let page = store
        .list_log_events(&tenant, &LogFilter::default(), LogOrder::Ascending, 1, 2)
        .await
        .expect("page");
    assert_eq!(
        (
            page.total,
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>()
        ),
        (4, vec![1, 4])
    );
    let past_end = store
        .list_log_events(&tenant, &LogFilter::default(), LogOrder::Ascending, 10, 2)
        .await
        .expect("past the end");
    assert!(past_end.events.is_empty());
    assert_eq!(past_end.total, 4);
    // Filters: type, client, dates (inclusive), together.
    let filtered = |filter: LogFilter| {
        let store = Arc::clone(&store);
        let tenant = tenant.clone();
        async move {
            let page = store
                .list_log_events(&tenant, &filter, LogOrder::Ascending, 0, 100)
                .await
                .expect("filtered");
            assert_eq!(page.total as usize, page.events.len());
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>()
        }
    };
    let of_type = |t: &str| LogFilter {
        event_type: Some(t.into()),
        ..LogFilter::default()
    };
    assert_eq!(filtered(of_type("sapi")).await, [1, 3]);
    assert_eq!(filtered(of_type("nothing")).await, Vec::<u64>::new());
    let of_b = LogFilter {
        client_id: Some("b".into()),
        ..LogFilter::default()
    };
    assert_eq!(filtered(of_b.clone()).await, [2, 3]);
    assert_eq!(
        filtered(LogFilter {
            event_type: Some("sapi".into()),
            ..of_b
        })
        .await,
        [3]
    );
    assert_eq!(
        filtered(LogFilter {
            from_ms: Some(now - 5_000),
            to_ms: Some(now - 3_000),
            ..LogFilter::default()
        })
        .await,
        [1, 4]
    );
    // The stored event reads back as appended.
    let one = store
        .log_event(&tenant, 2)
        .await
        .expect("get")
        .expect("held");
    assert_eq!(
        (
            one.date_ms,
            one.event_type.as_str(),
            one.client_id.as_deref(),
            &one.record
        ),
        (now - 9_000, "fapi", Some("b"), &events[1].record)
    );
    assert_eq!(store.log_event(&tenant, 99).await.expect("get"), None);
    // Forward from a number, by number.
    let after = |from: u64, take: u32| {
        let store = Arc::clone(&store);
        let tenant = tenant.clone();
        async move {
            store
                .log_events_after(&tenant, from, take, None)
                .await
                .expect("after")
                .iter()
                .map(|e| e.seq)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(after(0, 2).await, [1, 2]);
    assert_eq!(after(2, 10).await, [3, 4]);
    assert!(after(4, 10).await.is_empty());

    // Durable: another handle (a restart) reads the same and numbers on.
    drop(store);
    let store = (backend.reopen)().await;
    assert_eq!(
        store
            .list_log_events(&tenant, &LogFilter::default(), LogOrder::Ascending, 0, 100)
            .await
            .expect("reopened")
            .total,
        4
    );
    // Retention by count: the newest N stay; by age: nothing older than the bound.
    let by_count = LogRetention {
        max_events: Some(3),
        max_age_ms: None,
    };
    let numbers = store
        .append_log_events(&tenant, &[log_event(now, "sapi", None)], by_count)
        .await
        .expect("append");
    assert_eq!(numbers, [5], "numbering goes on after a restart");
    let seqs = |page: netacl_store::LogPage| page.events.iter().map(|e| e.seq).collect::<Vec<_>>();
    let everything = || {
        let store = Arc::clone(&store);
        let tenant = tenant.clone();
        async move {
            store
                .list_log_events(&tenant, &LogFilter::default(), LogOrder::Ascending, 0, 100)
                .await
                .expect("list")
        }
    };
    let mut kept = seqs(everything().await);
    kept.sort_unstable();
    assert_eq!(kept, [3, 4, 5]);
    let by_age = LogRetention {
        max_events: None,
        max_age_ms: Some(2_000),
    };
    store
        .append_log_events(&tenant, &[log_event(now, "sapi", None)], by_age)
        .await
        .expect("append");
    let mut kept = seqs(everything().await);
    kept.sort_unstable();
    assert_eq!(kept, [3, 5, 6], "events older than two seconds are gone");
    // Every event aged out: numbers are still never reused.
    let nothing_old = LogRetention {
        max_events: Some(1),
        max_age_ms: None,
    };
    assert_eq!(
        store
            .append_log_events(&tenant, &[log_event(now, "sapi", None)], nothing_old)
            .await
            .expect("append"),
        [7]
    );
    assert_eq!(seqs(everything().await), [7]);
    // The other tenant kept its own event throughout.
    assert_eq!(
        store
            .list_log_events(&other, &LogFilter::default(), LogOrder::Ascending, 0, 10)
            .await
            .expect("other")
            .total,
        1
    );
    assert!(matches!(
        store
            .append_log_events(
                &TenantId::new("ghost").expect("id"),
                &[log_event(now, "sapi", None)],
                KEEP_ALL
            )
            .await,
        Err(StoreError::NotFound(_))
    ));
}

fn summary_event(
    date_ms: i64,
    edge: &str,
    rule: &str,
    action: &str,
    seen: u64,
    hits: u64,
) -> NewLogEvent {
    NewLogEvent {
        date_ms,
        event_type: "acls_summary".into(),
        client_id: None,
        record: json!({"description": "summary", "details": {
            "edge": edge, "rule_id": rule, "action": action, "scope": "tenant",
            "policy_version": 1, "interval_s": 60, "evaluated": seen, "matched": hits,
            "connections_refused": 0}}),
    }
}

fn sorted(mut counts: AclSummaryCounts) -> AclSummaryCounts {
    counts
        .rules
        .sort_by(|a, b| (&a.rule_id, a.bucket).cmp(&(&b.rule_id, b.bucket)));
    counts.requests.sort_unstable();
    counts
}

async fn acl_summary_counts_sum_rules_by_bucket_within_the_window(backend: Backend) {
    let store = backend.store;
    let tenant = with_tenant(&store).await;
    let other = TenantId::new("other").expect("id");
    store
        .create_tenant(&other, &domains(&["other.test"]), &credentials(), NOW_MS)
        .await
        .expect("other");
    // A window of 60 s from `from`, in 4 buckets of 15 s.
    let from = NOW_MS;
    let window = CountWindow {
        from_ms: from,
        to_ms: from + 60_000,
        buckets: 4,
    };
    let (a, b) = ("acl_1111111111111111111111", "acl_2222222222222222222222");
    let events = [
        // Before the window, and a sapi event inside it: not counted.
        summary_event(from - 1, "e1", a, "block", 1_000, 1_000),
        log_event(from + 1_000, "sapi", Some("c")),
        // Bucket 0: one report of e1 (a and b), one of e2 (a).
        summary_event(from, "e1", a, "block", 10, 4),
        summary_event(from, "e1", b, "log", 6, 6),
        summary_event(from + 14_999, "e2", a, "block", 7, 1),
        // Bucket 2, then the window's end (the last bucket).
        summary_event(from + 30_000, "e1", b, "log", 5, 2),
        summary_event(from + 60_000, "e2", a, "block", 3, 3),
        // After the window.
        summary_event(from + 60_001, "e1", a, "block", 1_000, 1_000),
        // Sums saturate instead of failing.
        summary_event(from + 45_000, "e1", b, "log", u64::MAX, 1),
        summary_event(from + 45_000, "e2", b, "log", i64::MAX as u64, 1),
    ];
    store
        .append_log_events(&tenant, &events, KEEP_ALL)
        .await
        .expect("append");
    store
        .append_log_events(
            &other,
            &[summary_event(from + 1, "e1", a, "block", 50, 50)],
            KEEP_ALL,
        )
        .await
        .expect("other");
    let counts = sorted(
        store
            .acl_summary_counts(&tenant, window)
            .await
            .expect("counts"),
    );
    let row = |rule: &str, action: &str, bucket, evaluated, matched| RuleBucketCounts {
        rule_id: rule.into(),
        action: action.into(),
        bucket,
        evaluated,
        matched,
    };
    assert_eq!(
        counts.rules,
        [
            row(a, "block", 0, 17, 5),
            row(a, "block", 3, 3, 3),
            row(b, "log", 0, 6, 6),
            row(b, "log", 2, 5, 2),
            row(b, "log", 3, u64::MAX, 2),
        ]
    );
    // Requests: per report (edge, date) the largest evaluated, summed by bucket.
    assert_eq!(counts.requests, [(0, 10 + 7), (2, 5), (3, u64::MAX)]);
    let theirs = store
        .acl_summary_counts(&other, window)
        .await
        .expect("other");
    assert_eq!(theirs.rules, [row(a, "block", 0, 50, 50)]);
    assert_eq!(theirs.requests, [(0, 50)]);
    // A window with no event.
    let empty = store
        .acl_summary_counts(
            &tenant,
            CountWindow {
                from_ms: from + 120_000,
                to_ms: from + 180_000,
                buckets: 12,
            },
        )
        .await
        .expect("empty");
    assert_eq!(empty, AclSummaryCounts::default());
}

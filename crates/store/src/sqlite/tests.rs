use std::sync::Arc;

use netacl_model::{AclId, Limits, NetworkAcl, NetworkAclSpec, Timestamp};
use serde_json::json;

use super::*;
use crate::{
    CredentialStore, NetworkAclStore, Store, StoreError, StoredClient, StoredSigningKey, TenantId,
    TenantStore,
};

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

async fn fresh() -> (tempfile::TempDir, Arc<dyn Store>, TenantId) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("open"));
    let tenant = TenantId::default_tenant();
    store
        .ensure_tenant(&tenant, "localhost:8080")
        .await
        .expect("tenant");
    (dir, store, tenant)
}

#[test]
fn wal_and_full_sync_are_in_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path(), Limits::default()).expect("open");
    let conn = store.inner.writer.lock().expect("lock");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("mode");
    let sync: i64 = conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .expect("sync");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("user_version");
    assert_eq!(mode, "wal");
    assert_eq!(sync, 2);
    assert_eq!(version, migrations::SCHEMA_VERSION);
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(SqliteStore::open(dir.path(), Limits::default()).expect("open"));
    let conn = Connection::open(dir.path().join(DATABASE_FILE)).expect("conn");
    conn.pragma_update(None, "user_version", 99)
        .expect("set version");
    drop(conn);
    let err = SqliteStore::open(dir.path(), Limits::default())
        .err()
        .expect("refused");
    assert!(
        matches!(err, StoreError::Setup(ref m) if m.contains("99")),
        "{err}"
    );
}

#[tokio::test]
async fn crud_bumps_the_version_and_orders_by_priority() {
    let (_dir, store, tenant) = fresh().await;
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
    assert_eq!(page.total, 2);
    assert_eq!(page.version, 2);
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
}

#[tokio::test]
async fn refused_writes_change_nothing() {
    let (_dir, store, tenant) = fresh().await;
    let a = acl(1, 30, "10.0.0.0/8");
    store.create_network_acl(&tenant, 0, &a).await.expect("a");

    // Priority held by another record.
    let twin = acl(2, 30, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 1, &twin).await,
        Err(StoreError::PriorityTaken(p)) if p.get() == 30
    ));
    // Same id again.
    let same_id = acl(1, 31, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 1, &same_id).await,
        Err(StoreError::DuplicateId(_))
    ));
    // A stale expected version.
    let c = acl(3, 40, "10.0.0.0/8");
    assert!(matches!(
        store.create_network_acl(&tenant, 0, &c).await,
        Err(StoreError::VersionConflict {
            expected: 0,
            actual: 1
        })
    ));
    // Replace / delete of an unknown record.
    assert!(matches!(
        store.replace_network_acl(&tenant, 1, &c).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_network_acl(&tenant, 1, &c.id).await,
        Err(StoreError::NotFound(_))
    ));
    // Replace onto another record's priority.
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

#[tokio::test]
async fn tenants_are_isolated() {
    let (_dir, store, tenant) = fresh().await;
    let other = TenantId::new("other-tenant").expect("id");
    store
        .ensure_tenant(&other, "other.example")
        .await
        .expect("other");
    let a = acl(1, 30, "10.0.0.0/8");
    store.create_network_acl(&tenant, 0, &a).await.expect("a");
    // The same priority and id are free in another tenant.
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
    assert_eq!(store.tenant(&unknown).await.expect("lookup"), None);
    let t = store.tenant(&other).await.expect("lookup").expect("exists");
    assert_eq!((t.domain.as_str(), t.acl_version), ("other.example", 1));
}

#[tokio::test]
async fn records_and_credentials_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
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
        let store = SqliteStore::open(dir.path(), Limits::default()).expect("open");
        store
            .ensure_tenant(&tenant, "localhost:8080")
            .await
            .expect("tenant");
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
    let store = SqliteStore::open(dir.path(), Limits::default()).expect("reopen");
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

#[tokio::test]
async fn a_corrupted_record_is_reported_not_served() {
    let (dir, store, tenant) = fresh().await;
    store
        .create_network_acl(&tenant, 0, &acl(4, 20, "10.0.0.0/8"))
        .await
        .expect("a");
    let conn = Connection::open(dir.path().join(DATABASE_FILE)).expect("conn");
    conn.execute("UPDATE network_acls SET record = '{\"id\": 1}'", [])
        .expect("corrupt");
    drop(conn);
    assert!(matches!(
        store.network_acl_rule_set(&tenant).await,
        Err(StoreError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn concurrent_writers_on_one_version_have_one_winner() {
    let (_dir, store, tenant) = fresh().await;
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
    assert_eq!(
        store
            .network_acl_rule_set(&tenant)
            .await
            .expect("rules")
            .acls
            .len(),
        1
    );
}

//! What only the SQLite store has: its pragmas, the schema version check and the file under it.
//! The behaviours every backend shares run against SQLite in `tests/conformance.rs`
//! (`sqlite_backend::*`).
use std::sync::Arc;

use netacl_model::{AclId, Limits, NetworkAcl, NetworkAclSpec, Timestamp};
use serde_json::json;

use super::*;
use crate::{Store, StoreError, TenantId};

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
async fn a_corrupted_record_is_reported_not_served() {
    let (dir, store, tenant) = fresh().await;
    store
        .create_network_acl(
            &tenant,
            0,
            &acl(4, 20, "10.0.0.0/8"),
            &crate::WriteOrigin::default(),
        )
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
async fn organizations_written_before_connection_settings_keep_their_connections() {
    use crate::organizations::earlier_release as before;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        // The database as the release with organization creates only left it: schema 2.
        let conn = Connection::open(dir.path().join(DATABASE_FILE)).expect("conn");
        for sql in &migrations::MIGRATIONS[..2] {
            conn.execute_batch(sql).expect("old schema");
        }
        conn.pragma_update(None, "user_version", 2)
            .expect("version");
        conn.execute(
            "INSERT INTO tenants (id, domain, acl_version, created_at) VALUES ('default', 'localhost:8080', 0, 0)",
            [],
        )
        .expect("tenant");
        for (id, name, strategy, record) in before::connections() {
            conn.execute(
                "INSERT INTO connections (tenant_id, id, name, strategy, record) VALUES ('default', ?1, ?2, ?3, ?4)",
                rusqlite::params![id, name, strategy, record],
            )
            .expect("connection");
        }
        for org in before::organizations() {
            conn.execute(
                "INSERT INTO organizations (tenant_id, id, name, record, created_at) VALUES ('default', ?1, ?2, ?3, ?4)",
                rusqlite::params![org.id.as_str(), org.spec.name, before::record(&org), before::CREATED_AT],
            )
            .expect("organization");
            for (position, e) in org.spec.enabled_connections.iter().flatten().enumerate() {
                conn.execute(
                    "INSERT INTO organization_connections (tenant_id, organization_id, connection_id, position) VALUES ('default', ?1, ?2, ?3)",
                    rusqlite::params![org.id.as_str(), e.connection_id, position as i64],
                )
                .expect("organization connection");
            }
        }
    }
    let store = SqliteStore::open(dir.path(), Limits::default()).expect("migrate");
    before::check_migrated(&store, &TenantId::default_tenant()).await;
}

/// Every table with a `tenant_id` column is one a tenant's deletion empties: a table added by a
/// later migration and not listed fails here.
#[test]
fn tenant_deletion_covers_every_table_keyed_by_tenant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path(), Limits::default()).expect("open");
    let conn = store.inner.writer.lock().expect("lock");
    let mut statement = conn
        .prepare(
            "SELECT m.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c
             WHERE m.type = 'table' AND c.name = 'tenant_id' ORDER BY m.name",
        )
        .expect("prepare");
    let mut keyed: Vec<String> = statement
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let mut listed: Vec<String> = crate::tenant::TENANT_TABLES
        .iter()
        .map(|t| t.to_string())
        .collect();
    keyed.sort();
    listed.sort();
    assert_eq!(keyed, listed);
}

/// A damaged history (a manifest's text gone) never stops a write: the next version builds its
/// manifest afresh from the records in force, and reading the damaged version reports it.
#[tokio::test]
async fn a_damaged_history_is_reported_and_writes_go_on() {
    let (dir, store, tenant) = fresh().await;
    let origin = crate::WriteOrigin::default();
    store
        .create_network_acl(&tenant, 0, &acl(1, 10, "10.0.0.0/8"), &origin)
        .await
        .expect("a");
    store
        .create_network_acl(&tenant, 1, &acl(2, 20, "192.0.2.1"), &origin)
        .await
        .expect("b");
    let conn = Connection::open(dir.path().join(DATABASE_FILE)).expect("conn");
    conn.execute(
        "DELETE FROM network_acl_history_texts WHERE hash =
         (SELECT manifest FROM network_acl_history_versions WHERE version = 2)",
        [],
    )
    .expect("damage");
    drop(conn);
    assert!(matches!(
        store.network_acls_at(&tenant, 1).await,
        Ok(Some(ref rules)) if rules.acls.len() == 1
    ));
    assert!(
        matches!(
            store.network_acls_at(&tenant, 2).await,
            Ok(Some(ref rules)) if rules.acls.len() == 2
        ),
        "the current version is read from the records in force"
    );
    store
        .create_network_acl(&tenant, 2, &acl(3, 30, "192.0.2.2"), &origin)
        .await
        .expect("a write after the damage");
    assert!(matches!(
        store.network_acls_at(&tenant, 2).await,
        Err(StoreError::Corrupt { .. })
    ));
    let three = store
        .network_acls_at(&tenant, 3)
        .await
        .expect("v3")
        .expect("kept");
    assert_eq!(three.acls.len(), 3);
    store
        .create_network_acl(&tenant, 3, &acl(4, 40, "192.0.2.3"), &origin)
        .await
        .expect("and the next");
    assert_eq!(
        store
            .network_acls_at(&tenant, 3)
            .await
            .expect("v3")
            .expect("kept")
            .acls,
        three.acls
    );
}

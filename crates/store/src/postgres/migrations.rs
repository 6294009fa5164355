//! Schema migrations, recorded in `netacl_schema_migrations` (one row per applied version).
//! Migration `n` (1-based) takes the schema from version `n - 1` to `n`. They run in one
//! transaction that first takes a transaction-scoped advisory lock, so nodes starting together
//! apply each migration exactly once (the others wait, then find nothing to do). Append, never
//! edit.
use tokio_postgres::Client;

use super::db_message;
use crate::StoreError;

/// The advisory-lock key of schema migrations (`netacl` in ASCII, as a number).
pub(super) const MIGRATION_LOCK: i64 = 0x6e65_7461_636c;

/// The migrations in order. Resource families added later (organizations, connections, groups,
/// members, users, sessions, branding) append their own migration, each with a `tenant_id`.
const MIGRATIONS: &[&str] = &[
    // 1: tenants, network ACLs, signing keys, clients.
    r#"
    CREATE TABLE tenants (
        id          TEXT PRIMARY KEY,
        domain      TEXT NOT NULL,
        acl_version BIGINT NOT NULL DEFAULT 0 CHECK (acl_version >= 0),
        created_at  BIGINT NOT NULL
    );

    CREATE TABLE network_acls (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        id         TEXT NOT NULL,
        priority   INTEGER NOT NULL,
        record     TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        CONSTRAINT network_acls_pkey PRIMARY KEY (tenant_id, id),
        CONSTRAINT network_acls_priority_key UNIQUE (tenant_id, priority)
    );

    CREATE TABLE signing_keys (
        tenant_id       TEXT NOT NULL REFERENCES tenants(id),
        kid             TEXT NOT NULL,
        private_key_pem TEXT NOT NULL,
        created_at      BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, kid)
    );

    CREATE TABLE clients (
        tenant_id   TEXT NOT NULL REFERENCES tenants(id),
        client_id   TEXT NOT NULL,
        secret_hash TEXT NOT NULL,
        scopes      TEXT NOT NULL,
        created_at  BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, client_id)
    );
    "#,
];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database up to [`SCHEMA_VERSION`], or refuses a database a newer build migrated.
pub(super) async fn apply(client: &mut Client) -> Result<(), StoreError> {
    let setup = |err: tokio_postgres::Error| {
        StoreError::Setup(format!("schema migration: {}", db_message(&err)))
    };
    let tx = client.transaction().await.map_err(setup)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(setup)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS netacl_schema_migrations (
             version    INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(setup)?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::BIGINT FROM netacl_schema_migrations",
            &[],
        )
        .await
        .map_err(setup)?
        .get(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::Setup(format!(
            "the database has schema version {current}; this build knows up to {SCHEMA_VERSION}"
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        let version = i32::try_from(index + 1).unwrap_or(i32::MAX);
        tx.batch_execute(sql).await.map_err(setup)?;
        tx.execute(
            "INSERT INTO netacl_schema_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(setup)?;
    }
    tx.commit().await.map_err(setup)
}

//! Schema migrations, versioned with SQLite's `user_version`. Migration `n` (1-based) takes the
//! schema from version `n - 1` to `n`; each runs in its own transaction. Append, never edit.
use rusqlite::Connection;

use crate::StoreError;

/// The migrations in order. Resource families added later (organizations, connections, groups,
/// members, users, sessions, branding) append their own migration, each with a `tenant_id`.
const MIGRATIONS: &[&str] = &[
    // 1: tenants, network ACLs, signing keys, clients.
    r#"
    CREATE TABLE tenants (
        id          TEXT PRIMARY KEY NOT NULL,
        domain      TEXT NOT NULL,
        acl_version INTEGER NOT NULL DEFAULT 0,
        created_at  INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE network_acls (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        id         TEXT NOT NULL,
        priority   INTEGER NOT NULL,
        record     TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, id)
    ) STRICT;
    CREATE UNIQUE INDEX network_acls_priority ON network_acls (tenant_id, priority);

    CREATE TABLE signing_keys (
        tenant_id       TEXT NOT NULL REFERENCES tenants(id),
        kid             TEXT NOT NULL,
        private_key_pem TEXT NOT NULL,
        created_at      INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, kid)
    ) STRICT;

    CREATE TABLE clients (
        tenant_id   TEXT NOT NULL REFERENCES tenants(id),
        client_id   TEXT NOT NULL,
        secret_hash TEXT NOT NULL,
        scopes      TEXT NOT NULL,
        created_at  INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, client_id)
    ) STRICT;
    "#,
];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database up to [`SCHEMA_VERSION`].
pub(crate) fn apply(conn: &mut Connection) -> Result<(), StoreError> {
    let setup = |err: rusqlite::Error| StoreError::Setup(format!("schema migration: {err}"));
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(setup)?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::Setup(format!(
            "the database has schema version {current}; this build knows up to {SCHEMA_VERSION}"
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        let tx = conn.transaction().map_err(setup)?;
        tx.execute_batch(sql).map_err(setup)?;
        tx.pragma_update(None, "user_version", (index + 1) as i64)
            .map_err(setup)?;
        tx.commit().map_err(setup)?;
    }
    Ok(())
}

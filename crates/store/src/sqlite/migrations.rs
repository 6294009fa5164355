//! Schema migrations, versioned with SQLite's `user_version`. Migration `n` (1-based) takes the
//! schema from version `n - 1` to `n`; each runs in its own transaction. Append, never edit.
use rusqlite::Connection;

use crate::StoreError;

/// The migrations in order. Resource families added later append their own migration, each with
/// a `tenant_id`.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 2: directory data (connections, users, groups, members, sessions), organizations and
    // branding. Members and sessions keep their insertion sequence (`seq`, never reused) as
    // their listing order and paging position.
    r#"
    CREATE TABLE connections (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        id        TEXT NOT NULL,
        name      TEXT NOT NULL,
        strategy  TEXT NOT NULL,
        record    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, id)
    ) STRICT;
    CREATE UNIQUE INDEX connections_name ON connections (tenant_id, name);

    CREATE TABLE organizations (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        id         TEXT NOT NULL,
        name       TEXT NOT NULL,
        record     TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, id)
    ) STRICT;
    CREATE UNIQUE INDEX organizations_name ON organizations (tenant_id, name);

    CREATE TABLE organization_connections (
        tenant_id       TEXT NOT NULL,
        organization_id TEXT NOT NULL,
        connection_id   TEXT NOT NULL,
        position        INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, organization_id, connection_id),
        FOREIGN KEY (tenant_id, organization_id) REFERENCES organizations (tenant_id, id),
        FOREIGN KEY (tenant_id, connection_id) REFERENCES connections (tenant_id, id)
    ) STRICT;

    CREATE TABLE directory_users (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        user_id   TEXT NOT NULL,
        record    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, user_id)
    ) STRICT;

    CREATE TABLE directory_groups (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        id        TEXT NOT NULL,
        record    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, id)
    ) STRICT;

    CREATE TABLE group_members (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        group_id  TEXT NOT NULL,
        member_id TEXT NOT NULL,
        record    TEXT NOT NULL,
        UNIQUE (tenant_id, group_id, member_id),
        FOREIGN KEY (tenant_id, group_id) REFERENCES directory_groups (tenant_id, id)
    ) STRICT;
    CREATE INDEX group_members_page ON group_members (tenant_id, group_id, seq);

    CREATE TABLE user_sessions (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        id        TEXT NOT NULL,
        user_id   TEXT NOT NULL,
        record    TEXT NOT NULL,
        UNIQUE (tenant_id, id),
        FOREIGN KEY (tenant_id, user_id) REFERENCES directory_users (tenant_id, user_id)
    ) STRICT;
    CREATE INDEX user_sessions_page ON user_sessions (tenant_id, user_id, seq);

    CREATE TABLE branding (
        tenant_id  TEXT PRIMARY KEY NOT NULL REFERENCES tenants(id),
        record     TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    ) STRICT;
    "#,
    // 3: an organization's connections carry their own settings (they were kept in the
    // organization's record, as its create body's `enabled_connections`): the create's three
    // flags, copied from the record, and `is_enabled`, `organization_connection_name`,
    // `organization_access_level`. Records are left as they are (readers ignore their
    // `enabled_connections`). Organizations are listed in creation order.
    r#"
    ALTER TABLE organization_connections
        ADD COLUMN assign_membership_on_login INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE organization_connections
        ADD COLUMN show_as_button INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE organization_connections
        ADD COLUMN is_signup_enabled INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE organization_connections
        ADD COLUMN is_enabled INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE organization_connections ADD COLUMN organization_connection_name TEXT;
    ALTER TABLE organization_connections ADD COLUMN organization_access_level TEXT;

    UPDATE organization_connections AS oc SET
        assign_membership_on_login = COALESCE(flags.assign, 0),
        show_as_button = COALESCE(flags.button, 1),
        is_signup_enabled = COALESCE(flags.signup, 0)
    FROM (
        SELECT o.tenant_id, o.id AS organization_id,
               json_extract(e.value, '$.connection_id') AS connection_id,
               json_extract(e.value, '$.assign_membership_on_login') AS assign,
               json_extract(e.value, '$.show_as_button') AS button,
               json_extract(e.value, '$.is_signup_enabled') AS signup
        FROM organizations AS o, json_each(o.record, '$.enabled_connections') AS e
    ) AS flags
    WHERE flags.tenant_id = oc.tenant_id AND flags.organization_id = oc.organization_id
      AND flags.connection_id = oc.connection_id;

    CREATE INDEX organizations_created ON organizations (tenant_id, created_at, id);
    "#,
    // 4: managed lists (`auth0_managed` content written through the API). `items` is the JSON
    // array of the accepted entries; `version` the tenant's rule-set version its last write
    // produced.
    r#"
    CREATE TABLE managed_lists (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        name       TEXT NOT NULL,
        items      TEXT NOT NULL,
        version    INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, name)
    ) STRICT;
    "#,
    // 5: signing-key rotation and secrets at rest. `private_key` holds the key sealed with the
    // server's key-encryption key; rows written before keep their PEM until the server's first
    // start seals them (it needs the key-encryption key, which the database never holds).
    // Existing keys are current since their creation.
    r#"
    ALTER TABLE signing_keys RENAME COLUMN private_key_pem TO private_key;
    ALTER TABLE signing_keys ADD COLUMN cert_pem TEXT;
    ALTER TABLE signing_keys ADD COLUMN current_since INTEGER;
    ALTER TABLE signing_keys ADD COLUMN current_until INTEGER;
    ALTER TABLE signing_keys ADD COLUMN revoked_at INTEGER;
    UPDATE signing_keys SET current_since = created_at;
    "#,
    // 6: network ACL keys. `sealed_material` is the key material sealed with the server's
    // key-encryption key (netacl-secrets); the fingerprint is the SHA-256 of the material.
    r#"
    CREATE TABLE network_acl_keys (
        tenant_id       TEXT NOT NULL REFERENCES tenants(id),
        id              TEXT NOT NULL,
        name            TEXT NOT NULL,
        fingerprint     TEXT NOT NULL,
        sealed_material TEXT NOT NULL,
        created_at      INTEGER NOT NULL,
        updated_at      INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, id),
        UNIQUE (tenant_id, name)
    ) STRICT;
    "#,
    // 7: many tenants. A tenant's domains (canonical host names), each belonging to at most one
    // tenant (the primary key); the tenants generation, bumped by every tenant created or deleted
    // so that other processes notice with one cheap read.
    r#"
    CREATE TABLE tenant_domains (
        domain    TEXT PRIMARY KEY NOT NULL,
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        position  INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX tenant_domains_tenant ON tenant_domains (tenant_id, position);

    CREATE TABLE tenants_generation (
        id         INTEGER PRIMARY KEY CHECK (id = 1),
        generation INTEGER NOT NULL
    ) STRICT;
    INSERT INTO tenants_generation (id, generation) VALUES (1, 0);
    "#,
    // 8: rule-set history. One row per version of a tenant (written in the transaction that
    // bumps it): when, by which client, in answer to which request, and `changes`, the JSON
    // array of the records it changed (network ACLs before and after; keys and lists by id and
    // metadata, never their material or items). Versions committed before this migration have
    // no entry.
    r#"
    CREATE TABLE network_acl_history (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        version    INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        client_id  TEXT,
        request_id TEXT,
        changes    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, version)
    ) STRICT;
    "#,
    // 9: tenant logs. One row per event; `seq` is the tenant's own event counter
    // (`tenants.log_seq`, never reused, so a log id is never handed out twice even after every
    // event aged out); `record` the event's other members as JSON.
    r#"
    ALTER TABLE tenants ADD COLUMN log_seq INTEGER NOT NULL DEFAULT 0;

    CREATE TABLE tenant_logs (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        seq       INTEGER NOT NULL,
        date      INTEGER NOT NULL,
        type      TEXT NOT NULL,
        client_id TEXT,
        record    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, seq)
    ) STRICT;
    CREATE INDEX tenant_logs_date ON tenant_logs (tenant_id, date, seq);
    "#,
    // 10: the rule-set history, content-addressed (see `crate::history`). A version's row holds
    // its changes (network ACL records as stubs: `rule` replaced by the rule's content hash) and
    // the hash of its manifest (the stubs of every record in force after it); `contents` the
    // bookkeeping of each rule or manifest text (how many records in force use it, the newest
    // version referring to it), `texts` the text itself, written once. `tenants.history_bytes`
    // counts the text a tenant's history holds. After this SQL the entries of
    // `network_acl_history` are converted (`history::convert_legacy`); those that cannot be stay
    // there, unread, and are reported.
    r#"
    CREATE TABLE network_acl_history_versions (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        version    INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        client_id  TEXT,
        request_id TEXT,
        changes    TEXT NOT NULL,
        manifest   TEXT NOT NULL,
        bytes      INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, version)
    ) STRICT;

    CREATE TABLE network_acl_history_contents (
        tenant_id    TEXT NOT NULL REFERENCES tenants(id),
        hash         TEXT NOT NULL,
        size         INTEGER NOT NULL,
        live         INTEGER NOT NULL,
        last_version INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, hash)
    ) STRICT;
    CREATE INDEX network_acl_history_contents_unused
        ON network_acl_history_contents (tenant_id, live, last_version);

    CREATE TABLE network_acl_history_texts (
        tenant_id TEXT NOT NULL,
        hash      TEXT NOT NULL,
        text      TEXT NOT NULL,
        PRIMARY KEY (tenant_id, hash),
        FOREIGN KEY (tenant_id, hash)
            REFERENCES network_acl_history_contents (tenant_id, hash) ON DELETE CASCADE
    ) STRICT;

    ALTER TABLE tenants ADD COLUMN history_bytes INTEGER NOT NULL DEFAULT 0;
    "#,
];

/// The migration after whose SQL the history of the format before it is converted.
const CONTENT_ADDRESSED_HISTORY: usize = 10;

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
        if index + 1 == CONTENT_ADDRESSED_HISTORY {
            super::history::convert_legacy(&tx).map_err(setup)?;
        }
        tx.pragma_update(None, "user_version", (index + 1) as i64)
            .map_err(setup)?;
        tx.commit().map_err(setup)?;
    }
    Ok(())
}

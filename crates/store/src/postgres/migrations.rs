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

/// The migrations in order. Resource families added later append their own migration, each with
/// a `tenant_id`.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 2: directory data (connections, users, groups, members, sessions), organizations and
    // branding. Members and sessions keep their insertion sequence (`seq`, never reused) as
    // their listing order and paging position; imports of a tenant are serialised (advisory
    // lock), so a sequence number is never committed after a larger one of the same tenant.
    r#"
    CREATE TABLE connections (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        id        TEXT NOT NULL,
        name      TEXT NOT NULL,
        strategy  TEXT NOT NULL,
        record    TEXT NOT NULL,
        CONSTRAINT connections_pkey PRIMARY KEY (tenant_id, id),
        CONSTRAINT connections_name_key UNIQUE (tenant_id, name)
    );

    CREATE TABLE organizations (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        id         TEXT NOT NULL,
        name       TEXT NOT NULL,
        record     TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        CONSTRAINT organizations_pkey PRIMARY KEY (tenant_id, id),
        CONSTRAINT organizations_name_key UNIQUE (tenant_id, name)
    );

    CREATE TABLE organization_connections (
        tenant_id       TEXT NOT NULL,
        organization_id TEXT NOT NULL,
        connection_id   TEXT NOT NULL,
        position        INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, organization_id, connection_id),
        FOREIGN KEY (tenant_id, organization_id) REFERENCES organizations (tenant_id, id),
        FOREIGN KEY (tenant_id, connection_id) REFERENCES connections (tenant_id, id)
    );

    CREATE TABLE directory_users (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        user_id   TEXT NOT NULL,
        record    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, user_id)
    );

    CREATE TABLE directory_groups (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        id        TEXT NOT NULL,
        record    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, id)
    );

    CREATE TABLE group_members (
        seq       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        group_id  TEXT NOT NULL,
        member_id TEXT NOT NULL,
        record    TEXT NOT NULL,
        UNIQUE (tenant_id, group_id, member_id),
        FOREIGN KEY (tenant_id, group_id) REFERENCES directory_groups (tenant_id, id)
    );
    CREATE INDEX group_members_page ON group_members (tenant_id, group_id, seq);

    CREATE TABLE user_sessions (
        seq       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        id        TEXT NOT NULL,
        user_id   TEXT NOT NULL,
        record    TEXT NOT NULL,
        UNIQUE (tenant_id, id),
        FOREIGN KEY (tenant_id, user_id) REFERENCES directory_users (tenant_id, user_id)
    );
    CREATE INDEX user_sessions_page ON user_sessions (tenant_id, user_id, seq);

    CREATE TABLE branding (
        tenant_id  TEXT PRIMARY KEY REFERENCES tenants(id),
        record     TEXT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    "#,
    // 3: an organization's connections carry their own settings (they were kept in the
    // organization's record, as its create body's `enabled_connections`): the create's three
    // flags, copied from the record, and `is_enabled`, `organization_connection_name`,
    // `organization_access_level`. Records are left as they are (readers ignore their
    // `enabled_connections`). Organizations are listed in creation order, ids in byte order.
    r#"
    ALTER TABLE organization_connections
        ADD COLUMN assign_membership_on_login BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN show_as_button BOOLEAN NOT NULL DEFAULT true,
        ADD COLUMN is_signup_enabled BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN is_enabled BOOLEAN NOT NULL DEFAULT true,
        ADD COLUMN organization_connection_name TEXT,
        ADD COLUMN organization_access_level TEXT;

    UPDATE organization_connections AS oc SET
        assign_membership_on_login = COALESCE((e.value ->> 'assign_membership_on_login')::boolean, false),
        show_as_button = COALESCE((e.value ->> 'show_as_button')::boolean, true),
        is_signup_enabled = COALESCE((e.value ->> 'is_signup_enabled')::boolean, false)
    FROM organizations AS o,
         jsonb_array_elements(COALESCE(o.record::jsonb -> 'enabled_connections', '[]'::jsonb)) AS e
    WHERE o.tenant_id = oc.tenant_id AND o.id = oc.organization_id
      AND e.value ->> 'connection_id' = oc.connection_id;

    CREATE INDEX organizations_created ON organizations (tenant_id, created_at, id COLLATE "C");
    "#,
    // 4: managed lists (`auth0_managed` content written through the API). `items` is the JSON
    // array of the accepted entries; `version` the tenant's rule-set version its last write
    // produced.
    r#"
    CREATE TABLE managed_lists (
        tenant_id  TEXT NOT NULL REFERENCES tenants(id),
        name       TEXT NOT NULL,
        items      TEXT NOT NULL,
        version    BIGINT NOT NULL CHECK (version >= 0),
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, name)
    );
    "#,
    // 5: signing-key rotation and secrets at rest. `private_key` holds the key sealed with the
    // servers' key-encryption key; rows written before keep their PEM until a server's first
    // start seals them (it needs the key-encryption key, which the database never holds).
    // Existing keys are current since their creation.
    r#"
    ALTER TABLE signing_keys RENAME COLUMN private_key_pem TO private_key;
    ALTER TABLE signing_keys ADD COLUMN cert_pem TEXT;
    ALTER TABLE signing_keys ADD COLUMN current_since BIGINT;
    ALTER TABLE signing_keys ADD COLUMN current_until BIGINT;
    ALTER TABLE signing_keys ADD COLUMN revoked_at BIGINT;
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
        created_at      BIGINT NOT NULL,
        updated_at      BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, id),
        CONSTRAINT network_acl_keys_name_key UNIQUE (tenant_id, name)
    );
    "#,
    // 7: many tenants. A tenant's domains (canonical host names), each belonging to at most one
    // tenant (the primary key: two nodes racing for a domain, one wins); the tenants generation,
    // bumped by every tenant created or deleted (with a `tenants` notice on netacl_changes).
    r#"
    CREATE TABLE tenant_domains (
        domain    TEXT NOT NULL,
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        position  INTEGER NOT NULL,
        CONSTRAINT tenant_domains_pkey PRIMARY KEY (domain)
    );
    CREATE INDEX tenant_domains_tenant ON tenant_domains (tenant_id, position);

    CREATE TABLE tenants_generation (
        id         INTEGER PRIMARY KEY CHECK (id = 1),
        generation BIGINT NOT NULL CHECK (generation >= 0)
    );
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
        version    BIGINT NOT NULL CHECK (version > 0),
        created_at BIGINT NOT NULL,
        client_id  TEXT,
        request_id TEXT,
        changes    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, version)
    );
    "#,
    // 9: tenant logs. One row per event; `seq` is the tenant's own event counter
    // (`tenants.log_seq`, bumped under the tenant row's lock, so a tenant's events commit in
    // `seq` order and a log id is never handed out twice); `record` the other members as JSON.
    r#"
    ALTER TABLE tenants ADD COLUMN log_seq BIGINT NOT NULL DEFAULT 0 CHECK (log_seq >= 0);

    CREATE TABLE tenant_logs (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        seq       BIGINT NOT NULL,
        date      BIGINT NOT NULL,
        type      TEXT NOT NULL,
        client_id TEXT,
        record    TEXT NOT NULL,
        PRIMARY KEY (tenant_id, seq)
    );
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
        version    BIGINT NOT NULL CHECK (version > 0),
        created_at BIGINT NOT NULL,
        client_id  TEXT,
        request_id TEXT,
        changes    TEXT NOT NULL,
        manifest   TEXT NOT NULL,
        bytes      BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, version)
    );

    CREATE TABLE network_acl_history_contents (
        tenant_id    TEXT NOT NULL REFERENCES tenants(id),
        hash         TEXT NOT NULL,
        size         BIGINT NOT NULL,
        live         BIGINT NOT NULL,
        last_version BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, hash)
    );
    CREATE INDEX network_acl_history_contents_unused
        ON network_acl_history_contents (tenant_id, live, last_version);

    CREATE TABLE network_acl_history_texts (
        tenant_id TEXT NOT NULL,
        hash      TEXT NOT NULL,
        text      TEXT NOT NULL,
        PRIMARY KEY (tenant_id, hash),
        FOREIGN KEY (tenant_id, hash)
            REFERENCES network_acl_history_contents (tenant_id, hash) ON DELETE CASCADE
    );

    ALTER TABLE tenants ADD COLUMN history_bytes BIGINT NOT NULL DEFAULT 0;
    "#,
];

/// The migration after whose SQL the history of the format before it is converted.
const CONTENT_ADDRESSED_HISTORY: usize = 10;

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
        if index + 1 == CONTENT_ADDRESSED_HISTORY {
            super::history::convert_legacy(&tx).await.map_err(setup)?;
        }
        tx.execute(
            "INSERT INTO netacl_schema_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(setup)?;
    }
    tx.commit().await.map_err(setup)
}

//! What only the PostgreSQL store has that needs its private parts: migrating a database an
//! earlier release wrote. Runs on the server `NETACL_TEST_DATABASE_URL` names (each test in a
//! fresh database); without it the tests print a notice and pass, except under CI (`CI` set),
//! where they fail. The behaviours every backend shares are in `tests/conformance.rs`.
use netacl_model::Limits;
use tokio_postgres::NoTls;

use super::{migrations, PostgresStore};
use crate::TenantId;

/// A fresh database on the test server, as `(url, client)`; `None` (with a notice) without a
/// server outside CI.
async fn fresh_database(test: &str) -> Option<(String, tokio_postgres::Client)> {
    let url = match std::env::var("NETACL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but NETACL_TEST_DATABASE_URL is not: source .ci/postgres.sh")
        }
        _ => {
            eprintln!("skipping {test}: NETACL_TEST_DATABASE_URL is not set (see .ci/postgres.sh)");
            return None;
        }
    };
    let mut config: tokio_postgres::Config = url.parse().expect("database URL");
    let (admin, connection) = config.connect(NoTls).await.expect("connect");
    let driver = tokio::spawn(connection);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!("netacl_m_{}_{nanos}", std::process::id());
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    drop(admin);
    let _ = driver.await;
    config.dbname(&name);
    let (client, connection) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(connection);
    // The store connects with the same configuration, written as key=value pairs.
    let mut url = format!("dbname={name}");
    for host in config.get_hosts() {
        if let tokio_postgres::config::Host::Tcp(host) = host {
            url.push_str(&format!(" host={host}"));
        }
    }
    if let Some(port) = config.get_ports().first() {
        url.push_str(&format!(" port={port}"));
    }
    if let Some(user) = config.get_user() {
        url.push_str(&format!(" user={user}"));
    }
    if let Some(password) = config.get_password() {
        url.push_str(&format!(" password={}", String::from_utf8_lossy(password)));
    }
    Some((url, client))
}

#[tokio::test]
async fn organizations_written_before_connection_settings_keep_their_connections() {
    use crate::organizations::earlier_release as before;
    let Some((url, client)) =
        fresh_database("organizations_written_before_connection_settings_keep_their_connections")
            .await
    else {
        return;
    };
    // The database as the release with organization creates only left it: schema 2.
    client
        .batch_execute(
            "CREATE TABLE netacl_schema_migrations (
                 version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )
        .await
        .expect("migrations table");
    for (index, sql) in migrations::MIGRATIONS[..2].iter().enumerate() {
        client.batch_execute(sql).await.expect("old schema");
        client
            .execute(
                "INSERT INTO netacl_schema_migrations (version) VALUES ($1)",
                &[&(index as i32 + 1)],
            )
            .await
            .expect("version");
    }
    client
        .execute(
            "INSERT INTO tenants (id, domain, acl_version, created_at)
             VALUES ('default', 'localhost:8080', 0, 0)",
            &[],
        )
        .await
        .expect("tenant");
    for (id, name, strategy, record) in before::connections() {
        client
            .execute(
                "INSERT INTO connections (tenant_id, id, name, strategy, record)
                 VALUES ('default', $1, $2, $3, $4)",
                &[&id, &name, &strategy, &record],
            )
            .await
            .expect("connection");
    }
    for org in before::organizations() {
        client
            .execute(
                "INSERT INTO organizations (tenant_id, id, name, record, created_at)
                 VALUES ('default', $1, $2, $3, $4)",
                &[
                    &org.id.as_str(),
                    &org.spec.name,
                    &before::record(&org),
                    &before::CREATED_AT,
                ],
            )
            .await
            .expect("organization");
        for (position, e) in org.spec.enabled_connections.iter().flatten().enumerate() {
            client
                .execute(
                    "INSERT INTO organization_connections
                     (tenant_id, organization_id, connection_id, position)
                     VALUES ('default', $1, $2, $3)",
                    &[&org.id.as_str(), &e.connection_id, &(position as i32)],
                )
                .await
                .expect("organization connection");
        }
    }
    let store = PostgresStore::connect(&url, Limits::default())
        .await
        .expect("migrate");
    before::check_migrated(&store, &TenantId::default_tenant()).await;
}

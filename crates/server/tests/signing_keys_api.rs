//! Signing keys through the admin API (`/api/v2/keys/signing`), sealed at rest: rotation,
//! revocation, the JWKS, tokens of previous and revoked keys, the migration of keys stored in
//! clear, and the database files read for private key material (SQLite; PostgreSQL on two nodes).
mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use netacl_model::Limits;
use netacl_server::auth::SigningKey;
use netacl_server::{AdminService, BootstrapClient};
use netacl_store::{PostgresStore, SqliteStore, Store, TenantId, TenantStore};
use serde_json::Value;

/// 40-character pieces of the base64 body of a PEM: any of them found in a file means the
/// key is readable from it.
fn pem_pieces(pem: &str) -> Vec<String> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    body.as_bytes()
        .chunks(40)
        .filter(|c| c.len() == 40)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

/// Every file of `dir` (the database, its WAL and shared memory) holds none of `pieces`.
fn assert_no_piece_in_files(dir: &std::path::Path, pieces: &[String]) {
    let mut read = 0;
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("read");
        read += 1;
        let text = String::from_utf8_lossy(&bytes);
        for piece in pieces {
            assert!(
                !text.contains(piece.as_str()),
                "{} holds private key material",
                path.display()
            );
        }
        assert!(
            !text.contains("BEGIN PRIVATE KEY") && !text.contains("BEGIN RSA PRIVATE KEY"),
            "{} holds a PEM private key",
            path.display()
        );
    }
    assert!(read >= 1, "nothing was read");
}

async fn jwks_kids(api: &support::Api) -> Vec<String> {
    let answer = api
        .call(
            Request::builder()
                .uri("/.well-known/jwks.json")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    answer.body["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["kid"].as_str().expect("kid").to_owned())
        .collect()
}

fn assert_public(body: &Value) {
    let text = body.to_string();
    assert!(!text.contains("PRIVATE"), "{text}");
    assert!(!text.contains("sealed-v1"), "{text}");
}

#[tokio::test]
async fn rotate_and_revoke_through_the_api() {
    let api = support::api().await;
    let first_kid = SigningKey::from_pem(support::key_pem())
        .expect("key")
        .kid()
        .to_owned();
    let old_token = api.token.clone();

    let list = api.send(Method::GET, "/api/v2/keys/signing", None).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_public(&list.body);
    let keys = list.body.as_array().expect("array");
    assert_eq!(keys.len(), 1);
    let key = &keys[0];
    assert_eq!(key["kid"], first_kid.as_str());
    assert_eq!(
        (key["current"].clone(), key["revoked"].clone()),
        (true.into(), false.into())
    );
    assert!(key["cert"]
        .as_str()
        .expect("cert")
        .starts_with("-----BEGIN CERTIFICATE-----"));
    let fingerprint = key["fingerprint"].as_str().expect("fingerprint");
    assert_eq!(fingerprint.len(), 59, "{fingerprint}");
    assert_eq!(
        key["thumbprint"].as_str().expect("t"),
        fingerprint.replace(':', "")
    );
    assert!(key["current_since"].is_string());

    // Rotate: a new key is current, the first one previous; its tokens still verify.
    let rotated = api
        .send(Method::POST, "/api/v2/keys/signing/rotate", None)
        .await;
    assert_eq!(rotated.status, StatusCode::CREATED, "{}", rotated.body);
    assert_public(&rotated.body);
    let new_kid = rotated.body["kid"].as_str().expect("kid").to_owned();
    assert_ne!(new_kid, first_kid);
    assert!(rotated.body["cert"]
        .as_str()
        .expect("cert")
        .contains("CERTIFICATE"));
    assert_eq!(jwks_kids(&api).await, [new_kid.clone(), first_kid.clone()]);
    let acls = api
        .send_as(&old_token, Method::GET, "/api/v2/network-acls", None)
        .await;
    assert_eq!(
        acls.status,
        StatusCode::OK,
        "a previous key's token verifies"
    );
    let new_token = support::token_for(&api.service, support::CLIENT, support::SECRET);
    assert_eq!(
        api.service.authority().signing_key().kid(),
        new_kid,
        "new tokens are signed with the new key"
    );
    let previous = api
        .send(
            Method::GET,
            &format!("/api/v2/keys/signing/{first_kid}"),
            None,
        )
        .await;
    assert_eq!(previous.status, StatusCode::OK);
    assert_eq!(previous.body["previous"], true);
    assert_eq!(previous.body["current"], false);
    assert!(previous.body["current_until"].is_string());

    // The current key cannot be revoked; an unknown one is not found.
    let refused = api
        .send_as(
            &new_token,
            Method::PUT,
            &format!("/api/v2/keys/signing/{new_kid}/revoke"),
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    let missing = api
        .send_as(&new_token, Method::GET, "/api/v2/keys/signing/nope", None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let missing = api
        .send_as(
            &new_token,
            Method::PUT,
            "/api/v2/keys/signing/nope/revoke",
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // Revoke the first key: its tokens stop at once (the verified-token cache included).
    let revoked = api
        .send_as(
            &new_token,
            Method::PUT,
            &format!("/api/v2/keys/signing/{first_kid}/revoke"),
            None,
        )
        .await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);
    assert_eq!(revoked.body["kid"], first_kid.as_str());
    assert_public(&revoked.body);
    let refused = api
        .send_as(&old_token, Method::GET, "/api/v2/network-acls", None)
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let fine = api
        .send_as(&new_token, Method::GET, "/api/v2/network-acls", None)
        .await;
    assert_eq!(fine.status, StatusCode::OK);
    assert_eq!(jwks_kids(&api).await, std::slice::from_ref(&new_kid));
    let shown = api
        .send_as(
            &new_token,
            Method::GET,
            &format!("/api/v2/keys/signing/{first_kid}"),
            None,
        )
        .await;
    assert_eq!(
        (
            shown.body["revoked"].clone(),
            shown.body["previous"].clone()
        ),
        (true.into(), false.into())
    );
    assert!(shown.body["revoked_at"].is_string());

    // Scopes compare exactly.
    let reader = support::scoped_token(&api.service, "reader", &["read:signing_keys"]);
    let answer = api
        .send_as(&reader, Method::POST, "/api/v2/keys/signing/rotate", None)
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let answer = api
        .send_as(&reader, Method::GET, "/api/v2/keys/signing", None)
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let other = support::scoped_token(&api.service, "other", &["read:signing_keysX"]);
    let answer = api
        .send_as(&other, Method::GET, "/api/v2/keys/signing", None)
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);

    // A restart keeps all of it.
    let dir = api.dir.as_ref().expect("dir").path().to_owned();
    let support::Api {
        dir: owned,
        service,
        ..
    } = api;
    drop(service);
    let (service, token) = support::start_in(&dir, support::config()).await;
    let again = support::Api::new(service, token);
    assert_eq!(jwks_kids(&again).await, std::slice::from_ref(&new_kid));
    let refused = again
        .send_as(&old_token, Method::GET, "/api/v2/network-acls", None)
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let fine = again
        .send_as(&new_token, Method::GET, "/api/v2/network-acls", None)
        .await;
    assert_eq!(fine.status, StatusCode::OK);

    // At rest: every key sealed; the first key's PEM (known to the test) nowhere in the files.
    let conn = rusqlite::Connection::open(dir.join("netacl.db")).expect("open");
    let stored: Vec<String> = conn
        .prepare("SELECT private_key FROM signing_keys")
        .expect("prepare")
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|s| s.starts_with("sealed-v1:")));
    drop(conn);
    drop(again);
    assert_no_piece_in_files(&dir, &pem_pieces(support::key_pem()));
    drop(owned);
}

/// A database of schema 4 (before this release) holds its key in clear: the first start with a
/// key-encryption key seals it in place (same kid, same JWKS, tokens verify) and the files no
/// longer hold it; a start with another key-encryption key is refused, naming the cause.
#[tokio::test]
async fn keys_stored_in_clear_are_sealed_at_first_start() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/keys");
    let legacy_pem = std::fs::read_to_string(root.join("legacy-pkcs8.pem")).expect("fixture");
    let legacy_jwks: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("legacy-jwks.json")).expect("fixture"),
    )
    .expect("json");
    let kid = legacy_jwks["keys"][0]["kid"]
        .as_str()
        .expect("kid")
        .to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = SqliteStore::open(dir.path(), Limits::default()).expect("store");
        store
            .ensure_tenant(&TenantId::default_tenant(), support::DOMAIN)
            .await
            .expect("tenant");
    }
    {
        // Back to schema 4, and the key as version 4 stored it.
        let conn = rusqlite::Connection::open(dir.path().join("netacl.db")).expect("open");
        conn.execute_batch(
            "ALTER TABLE signing_keys RENAME COLUMN private_key TO private_key_pem;
             ALTER TABLE signing_keys DROP COLUMN cert_pem;
             ALTER TABLE signing_keys DROP COLUMN current_since;
             ALTER TABLE signing_keys DROP COLUMN current_until;
             ALTER TABLE signing_keys DROP COLUMN revoked_at;
             DROP TABLE network_acl_history_texts;
             DROP TABLE network_acl_history_contents;
             DROP TABLE network_acl_history_versions;
             ALTER TABLE tenants DROP COLUMN history_bytes;
             DROP TABLE network_acl_history;
             DROP TABLE tenant_logs;
             ALTER TABLE tenants DROP COLUMN log_seq;
             DROP TABLE network_acl_keys;
             DROP TABLE tenant_domains;
             DROP TABLE tenants_generation;
             PRAGMA user_version = 4;",
        )
        .expect("downgrade");
        conn.execute(
            "INSERT INTO signing_keys (tenant_id, kid, private_key_pem, created_at)
             VALUES ('default', ?1, ?2, 1)",
            [kid.as_str(), legacy_pem.as_str()],
        )
        .expect("key in clear");
    }
    let text = |path: &std::path::Path| {
        String::from_utf8_lossy(&std::fs::read(path).expect("read")).into_owned()
    };
    let pieces = pem_pieces(&legacy_pem);
    let db = dir.path().join("netacl.db");
    let before: String = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| text(&e.expect("entry").path()))
        .collect();
    assert!(
        pieces.iter().any(|p| before.contains(p.as_str())),
        "the test sees the key in clear"
    );

    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("migrate"));
    let bootstrap = BootstrapClient {
        client_id: Some(support::CLIENT.into()),
        client_secret: Some(support::SECRET.into()),
    };
    let (service, report) = AdminService::start(store, support::config(), bootstrap.clone())
        .await
        .expect("start");
    assert_eq!(report.signing_keys_sealed, 1);
    assert_eq!(report.kid, kid);
    let token = support::token_for(&service, support::CLIENT, support::SECRET);
    let api = support::Api::new(service, token);
    let jwks = api
        .call(
            Request::builder()
                .uri("/.well-known/jwks.json")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(jwks.body, legacy_jwks, "same kid, same JWKS");
    let answer = api.send(Method::GET, "/api/v2/network-acls", None).await;
    assert_eq!(answer.status, StatusCode::OK);
    drop(api);
    assert_no_piece_in_files(dir.path(), &pieces);
    assert!(db.exists());

    // Another key-encryption key: refused, and the database is left as it is.
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("open"));
    let other =
        support::config().with_secrets_key(Arc::new(netacl_secrets::Kek::generate().expect("kek")));
    let err = AdminService::start(store, other, bootstrap.clone())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("key-encryption key"), "{err}");
    // The right one still opens it.
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("open"));
    let (_, report) = AdminService::start(store, support::config(), bootstrap)
        .await
        .expect("start again");
    assert_eq!(
        (report.kid.as_str(), report.signing_keys_sealed),
        (kid.as_str(), 0)
    );
}

/// `--signing-key-file`: the key given becomes current (a rotation when another is current;
/// nothing when it is current already).
#[tokio::test]
async fn a_key_brought_by_the_operator_becomes_current() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (service, _) = support::start_in(dir.path(), support::config()).await;
    let first = service.authority().signing_key().kid().to_owned();
    drop(service);
    let brought = Arc::new(SigningKey::generate().expect("key"));
    let config = support::config().with_signing_key(Arc::clone(&brought));
    let (service, _) = support::start_in(dir.path(), config.clone()).await;
    assert_eq!(service.authority().signing_key().kid(), brought.kid());
    let ring: Vec<String> = service
        .authority()
        .key_ring()
        .kids()
        .map(str::to_owned)
        .collect();
    assert_eq!(ring, [brought.kid().to_owned(), first.clone()]);
    drop(service);
    // The same key again: no rotation.
    let (service, token) = support::start_in(dir.path(), config).await;
    let api = support::Api::new(service, token);
    let list = api.send(Method::GET, "/api/v2/keys/signing", None).await;
    assert_eq!(list.body.as_array().map(Vec::len), Some(2), "{}", list.body);
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: two nodes sharing one database

fn database_url() -> Option<String> {
    match std::env::var("NETACL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but NETACL_TEST_DATABASE_URL is not: source .ci/postgres.sh")
        }
        _ => {
            eprintln!("skipping: NETACL_TEST_DATABASE_URL is not set (see .ci/postgres.sh)");
            None
        }
    }
}

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

async fn fresh_database(url: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let driver = tokio::spawn(connection);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!("netacl_keys_{}_{nanos}", std::process::id());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    drop(client);
    let _ = driver.await;
    with_dbname(url, &name)
}

async fn node(
    db: &str,
    config: netacl_server::ServerConfig,
) -> (AdminService, netacl_server::StoreFollower) {
    let store = PostgresStore::connect(db, Limits::default())
        .await
        .expect("connect");
    let listener = store.listen();
    let bootstrap = BootstrapClient {
        client_id: Some(support::CLIENT.into()),
        client_secret: Some(support::SECRET.into()),
    };
    let (service, _) = AdminService::start(Arc::new(store), config, bootstrap)
        .await
        .expect("start");
    let follower = service.follow_store(Some(listener), Duration::from_millis(500));
    (service, follower)
}

/// Polls `f` every 20 ms for at most 10 s.
async fn eventually<F: std::future::Future<Output = bool>>(mut f: impl FnMut() -> F) -> bool {
    for _ in 0..500 {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_postgres_rotate_and_revoke() {
    let Some(url) = database_url() else { return };
    let db = fresh_database(&url).await;
    let brought = Arc::new(SigningKey::from_pem(support::key_pem()).expect("key"));
    let (a, _fa) = node(
        &db,
        support::config().with_signing_key(Arc::clone(&brought)),
    )
    .await;
    let (b, _fb) = node(&db, support::config()).await;
    let (a, b) = (
        support::Api::new(a.clone(), String::new()),
        support::Api::new(b.clone(), String::new()),
    );
    assert_eq!(b.service.authority().signing_key().kid(), brought.kid());
    let first_token = support::token_for(&a.service, support::CLIENT, support::SECRET);
    for node in [&a, &b] {
        let answer = node
            .send_as(&first_token, Method::GET, "/api/v2/network-acls", None)
            .await;
        assert_eq!(answer.status, StatusCode::OK);
    }

    // Rotated on A: B takes A's new tokens at once (an unknown kid makes it reload).
    let admin = first_token.clone();
    let rotated = a
        .send_as(&admin, Method::POST, "/api/v2/keys/signing/rotate", None)
        .await;
    assert_eq!(rotated.status, StatusCode::CREATED, "{}", rotated.body);
    let new_kid = rotated.body["kid"].as_str().expect("kid").to_owned();
    let new_token = support::token_for(&a.service, support::CLIENT, support::SECRET);
    let answer = b
        .send_as(&new_token, Method::GET, "/api/v2/network-acls", None)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(b.service.authority().signing_key().kid(), new_kid);
    // The previous key's tokens still verify on both.
    for node in [&a, &b] {
        let answer = node
            .send_as(&first_token, Method::GET, "/api/v2/network-acls", None)
            .await;
        assert_eq!(answer.status, StatusCode::OK);
    }

    // Revoked on A: refused on A on return, and on B as soon as it hears of it.
    let revoked = a
        .send_as(
            &new_token,
            Method::PUT,
            &format!("/api/v2/keys/signing/{}/revoke", brought.kid()),
            None,
        )
        .await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);
    let on_a = a
        .send_as(&first_token, Method::GET, "/api/v2/network-acls", None)
        .await;
    assert_eq!(on_a.status, StatusCode::UNAUTHORIZED);
    assert!(
        eventually(|| {
            let b = &b;
            let t = first_token.clone();
            async move {
                b.send_as(&t, Method::GET, "/api/v2/network-acls", None)
                    .await
                    .status
                    == StatusCode::UNAUTHORIZED
            }
        })
        .await,
        "B still accepts a revoked key's token"
    );
    let listed = b
        .send_as(
            &new_token,
            Method::GET,
            &format!("/api/v2/keys/signing/{}", brought.kid()),
            None,
        )
        .await;
    assert_eq!(listed.body["revoked"], true);

    // A dump of every table: the private key (known to the test) is nowhere.
    let (client, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let driver = tokio::spawn(connection);
    let tables: Vec<String> = client
        .query(
            "SELECT quote_ident(table_name) FROM information_schema.tables
             WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
            &[],
        )
        .await
        .expect("tables")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(tables.iter().any(|t| t == "signing_keys"), "{tables:?}");
    let pieces = pem_pieces(support::key_pem());
    let mut rows = 0;
    for table in &tables {
        for row in client
            .query(&format!("SELECT t::text FROM {table} AS t"), &[])
            .await
            .expect("dump")
        {
            let text: String = row.get(0);
            rows += 1;
            assert!(!text.contains("PRIVATE KEY"), "{table}");
            for piece in &pieces {
                assert!(
                    !text.contains(piece.as_str()),
                    "{table} holds private key material"
                );
            }
        }
    }
    assert!(rows > 0);
    drop(client);
    let _ = driver.await;
}

//! `netacl tenant create|list|show|delete` on the embedded store: the printed records, refusals
//! (bad ids and domains, a taken domain, the default tenant), and a secrets key that is not the
//! server's refused before anything is written.
mod serve_support;

use std::path::Path;
use std::process::{Command, Output};

use serve_support::{free_port, Server};

fn netacl(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netacl"))
        .arg("tenant")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("NETACL_SECRETS_KEY_FILE")
        .env_remove("NETACL_DATABASE_URL")
        .output()
        .expect("run netacl tenant")
}

fn ok_json(data_dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = netacl(data_dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON value")
}

fn refused(data_dir: &Path, args: &[&str]) -> String {
    let out = netacl(data_dir, args);
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn tenants_are_created_listed_shown_and_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let created = ok_json(
        data,
        &[
            "create",
            "acme",
            "--domain",
            "ACME.test.:8443",
            "--domain",
            "bücher.example",
            "--json",
        ],
    );
    assert_eq!(created["tenant"], "acme");
    assert_eq!(
        created["domains"],
        serde_json::json!(["acme.test", "xn--bcher-kva.example"])
    );
    assert_eq!(created["issuer"], "https://acme.test/");
    assert_eq!(created["audience"], "https://acme.test/api/v2/");
    let client_id = created["client_id"].as_str().expect("client_id");
    let secret = created["client_secret"].as_str().expect("client_secret");
    assert_eq!((client_id.len(), secret.len()), (32, 64));

    // The secret is shown once: never by show or list.
    let shown = ok_json(data, &["show", "acme", "--json"]);
    assert_eq!(shown["domains"], created["domains"]);
    assert_eq!(shown["created_at"], created["created_at"]);
    assert!(shown.get("client_secret").is_none());
    let out = netacl(data, &["list", "--json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(listed[0]["tenant"], "acme");

    // Refusals name what is wrong and write nothing.
    let err = refused(data, &["create", "other", "--domain", "Acme.Test"]);
    assert!(err.contains("acme.test belongs to another tenant"), "{err}");
    let err = refused(data, &["create", "acme", "--domain", "new.test"]);
    assert!(err.contains("already exists"), "{err}");
    let err = refused(data, &["create", "bad id", "--domain", "new.test"]);
    assert!(err.contains("tenant: must be"), "{err}");
    let err = refused(data, &["create", "other", "--domain", "a b.test"]);
    assert!(err.contains("domains[0]"), "{err}");
    let err = refused(
        data,
        &[
            "create", "other", "--domain", "x.test", "--domain", "X.test:1",
        ],
    );
    assert!(err.contains("domains[1]") && err.contains("twice"), "{err}");
    let err = refused(data, &["create", "default", "--domain", "new.test"]);
    assert!(err.contains("already exists"), "{err}");
    let listed = ok_json(data, &["list", "--json"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    // Deleting: the default tenant is refused; a deleted tenant is gone, its domains free.
    let err = refused(data, &["delete", "default"]);
    assert!(err.contains("default tenant cannot be deleted"), "{err}");
    let out = netacl(data, &["delete", "acme"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = refused(data, &["show", "acme"]);
    assert!(err.contains("does not exist"), "{err}");
    let err = refused(data, &["delete", "acme"]);
    assert!(err.contains("does not exist"), "{err}");
    let again = ok_json(
        data,
        &["create", "acme2", "--domain", "acme.test", "--json"],
    );
    assert_eq!(again["domains"], serde_json::json!(["acme.test"]));
    assert_ne!(again["client_id"], created["client_id"]);
}

/// A tenant created with another key-encryption key than the server's would not open on the
/// server: the command refuses before writing, naming the flag; the default tenant's domain is
/// refused like another tenant's.
#[test]
fn a_secrets_key_that_is_not_the_servers_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let port = free_port();
    let server = Server::start(&data, &format!("127.0.0.1:{port}"), "main.test:8080", &[]);
    server.kill();
    let other_key = dir.path().join("other.key");
    let out = Command::new(env!("CARGO_BIN_EXE_netacl"))
        .args(["secrets-key", "new"])
        .arg(&other_key)
        .output()
        .expect("secrets-key new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = refused(
        &data,
        &[
            "create",
            "acme",
            "--domain",
            "acme.test",
            "--secrets-key-file",
            other_key.to_str().expect("path"),
        ],
    );
    assert!(err.contains("--secrets-key-file"), "{err}");
    let listed = ok_json(&data, &["list", "--json"]);
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(1),
        "only the default: {listed}"
    );
    let err = refused(&data, &["create", "acme", "--domain", "MAIN.test"]);
    assert!(err.contains("main.test belongs to another tenant"), "{err}");
    ok_json(
        &data,
        &["create", "acme", "--domain", "acme.test", "--json"],
    );
}

/// Issue 28: the data directory is the owner's alone. Created `0700` (with its missing
/// parents), and every file in it `0600`: the database and its WAL and SHM files, the secrets
/// key, the operator token, after `serve`, a write, `netacl tenant create` and a `secrets-key`
/// command writing there. A directory and database found looser at start are tightened.
#[cfg(unix)]
#[test]
fn the_data_directory_and_its_files_are_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| {
        std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let check = |data: &Path| {
        assert_eq!(mode(data), 0o700, "{}", data.display());
        let mut names = Vec::new();
        for entry in std::fs::read_dir(data).expect("read_dir") {
            let path = entry.expect("entry").path();
            assert_eq!(mode(&path), 0o600, "{}", path.display());
            names.push(
                path.file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        names.sort();
        names
    };
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("state").join("netacl-data");
    let server = Server::start(&data, "127.0.0.1:0", "modes.test", &[]);
    let token = server.token();
    let rule = serde_json::json!({"description": "a write", "active": true, "priority": 1,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": ["192.0.2.1"]}}});
    let answer = serve_support::request(
        server.addr,
        "POST",
        "/api/v2/network-acls",
        Some(&token),
        Some(&rule),
    )
    .expect("answer");
    assert_eq!(answer.status, 201, "{}", answer.text);
    ok_json(
        &data,
        &["create", "beta", "--domain", "beta.test", "--json"],
    );
    let written = Command::new(env!("CARGO_BIN_EXE_netacl"))
        .args(["secrets-key", "new"])
        .arg(data.join("other.key"))
        .output()
        .expect("run netacl secrets-key");
    assert!(written.status.success(), "{written:?}");
    assert_eq!(mode(&root.path().join("state")), 0o700);
    assert_eq!(
        check(&data),
        [
            "netacl.db",
            "netacl.db-shm",
            "netacl.db-wal",
            "operator-token",
            "other.key",
            "secrets.key"
        ]
    );
    server.kill();

    // Loosened by hand (or made by an earlier version): tightened at the next start.
    for (path, loose) in [
        (data.clone(), 0o755),
        (data.join("netacl.db"), 0o644),
        (data.join("netacl.db-wal"), 0o644),
        (data.join("netacl.db-shm"), 0o644),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(loose)).expect("chmod");
    }
    let server = Server::start(&data, "127.0.0.1:0", "modes.test", &[]);
    check(&data);
    server.kill();
}

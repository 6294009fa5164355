//! The official deploy CLI (`auth0-deploy-cli`, `a0deploy`, unchanged; it only speaks https)
//! straight against `netacl serve --tls-cert --tls-key` on loopback, trusting a test CA through
//! `NODE_EXTRA_CA_CERTS`: export (directory and YAML formats), edit the exported rules (one
//! updated, one deleted, one added), import, export again, and check that nothing drifts and
//! that the server holds what was imported. Without Node.js or `tests/node/node_modules`
//! (`npm ci --prefix tests/node`) the test prints a notice and passes locally, and FAILS when
//! `CI` is set.
mod serve_support;
mod tls_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_support::{free_port, repo_root, wait_with_output, Server, CLIENT_ID, CLIENT_SECRET};
use tls_support::{create_over_https, https_request, https_token, TestCa};

/// One CLI run may take a while: the import validates its input against the schema of every
/// resource type (tens of seconds of CPU on a loaded 2-core machine).
const CLI_TIMEOUT: Duration = Duration::from_secs(600);

/// `tests/node/node_modules/.bin/a0deploy`, or `None` (with a notice) when Node.js or the
/// package is missing outside CI; under CI that is a failure.
fn deploy_cli_or_skip() -> Option<PathBuf> {
    let bin = repo_root().join("tests/node/node_modules/.bin/a0deploy");
    let node = Command::new("node").arg("--version").output();
    let why = match node {
        Ok(out) if out.status.success() && bin.exists() => return Some(bin),
        Ok(out) if out.status.success() => format!(
            "{} is missing; install it with: npm ci --prefix tests/node",
            bin.display()
        ),
        Ok(out) => format!(
            "node --version failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(err) => format!("node cannot run: {err}"),
    };
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and the deploy CLI test cannot run: {why}");
    }
    eprintln!("skipping the deploy CLI test (set CI to make this fatal): {why}");
    None
}

/// The deploy CLI's version, from its package.json.
fn deploy_cli_version() -> String {
    let path = repo_root().join("tests/node/node_modules/auth0-deploy-cli/package.json");
    let text = std::fs::read_to_string(path).expect("package.json");
    let package: Value = serde_json::from_str(&text).expect("package.json is JSON");
    package["version"].as_str().unwrap_or("?").to_owned()
}

/// Runs `a0deploy ARGS` against `domain` with the bootstrap client, trusting `ca`; asserts
/// success and returns its output.
fn a0deploy(bin: &Path, ca: &Path, domain: &str, args: &[&str]) -> String {
    let mut command = Command::new(bin);
    // Only this test's configuration: no AUTH0_* from the environment of whoever runs it.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AUTH0_") {
            command.env_remove(name);
        }
    }
    let child = command
        .args(args)
        .env("NODE_EXTRA_CA_CERTS", ca)
        .env("AUTH0_DOMAIN", domain)
        .env("AUTH0_CLIENT_ID", CLIENT_ID)
        .env("AUTH0_CLIENT_SECRET", CLIENT_SECRET)
        .env("AUTH0_INCLUDED_ONLY", r#"["networkACLs"]"#)
        .env("AUTH0_ALLOW_DELETE", "true")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run a0deploy");
    let (status, stdout, stderr) = wait_with_output(child, CLI_TIMEOUT, "a0deploy");
    let output = format!("{stdout}{stderr}");
    assert!(
        status.success(),
        "a0deploy {args:?} failed ({status}):\n{output}"
    );
    output
}

/// `a0deploy export --format FORMAT` into `folder`; asserts it succeeded.
fn export(bin: &Path, ca: &Path, domain: &str, format: &str, folder: &Path) {
    let folder = folder.to_str().expect("utf-8 path");
    let out = a0deploy(
        bin,
        ca,
        domain,
        &["export", "--format", format, "--output_folder", folder],
    );
    assert!(out.contains("Export Successful"), "{out}");
}

/// The network ACLs of a directory-format export, by priority.
fn exported(folder: &Path) -> BTreeMap<u64, Value> {
    let dir = folder.join("network-acls");
    let mut acls = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).expect("read");
            let acl: Value = serde_json::from_str(&text).expect("JSON");
            let priority = acl["priority"].as_u64().expect("priority");
            assert!(
                acls.insert(priority, acl).is_none(),
                "priority {priority} twice"
            );
        }
    }
    acls
}

/// Writes `acls` as a directory-format input folder.
fn write_input(folder: &Path, acls: &BTreeMap<u64, Value>) {
    let dir = folder.join("network-acls");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (priority, acl) in acls {
        let path = dir.join(format!("network-acl-p-{priority}.json"));
        std::fs::write(path, serde_json::to_string_pretty(acl).expect("JSON")).expect("write");
    }
}

/// What the server holds, as the deploy CLI writes it (no id or timestamps), by priority.
fn held(server: &Server, ca: &TestCa) -> BTreeMap<u64, Value> {
    let config = ca.client_config(&[]);
    let token = https_token(server.addr, "localhost", &config, &server.domain);
    let list = https_request(
        server.addr,
        "localhost",
        &config,
        "GET",
        "/api/v2/network-acls?per_page=100",
        Some(&token),
        None,
    )
    .expect("list");
    assert_eq!(list.status, 200, "{}", list.text);
    list.json()
        .as_array()
        .expect("array")
        .iter()
        .map(|acl| {
            let mut acl = acl.clone();
            let object = acl.as_object_mut().expect("object");
            for key in ["id", "created_at", "updated_at"] {
                object.remove(key);
            }
            (acl["priority"].as_u64().expect("priority"), acl)
        })
        .collect()
}

#[test]
fn the_deploy_cli_exports_and_imports_network_acls_over_tls() {
    let Some(bin) = deploy_cli_or_skip() else {
        return;
    };
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(dir.path(), "deploy");
    let issued = ca.issue(dir.path(), "localhost", &["localhost"]);
    // The deploy CLI reaches https://AUTH0_DOMAIN/: the tenant domain must be that host:port.
    let port = free_port();
    let domain = format!("localhost:{port}");
    let cert = issued.cert.to_str().expect("utf-8");
    let key = issued.key.to_str().expect("utf-8");
    let server = Server::start(
        &dir.path().join("data"),
        &format!("127.0.0.1:{port}"),
        &domain,
        &[
            "--tls-cert",
            cert,
            "--tls-key",
            key,
            "--rate-limit-burst",
            "10000",
            "--rate-limit-per-second",
            "10000",
        ],
    );

    // Two rules created through the API.
    let config = ca.client_config(&[]);
    let token = https_token(server.addr, "localhost", &config, &domain);
    for body in [
        json!({"description": "block a bad network", "active": true, "priority": 10,
               "rule": {"action": {"block": true}, "scope": "tenant",
                        "match": {"ipv4_cidrs": ["198.51.100.0/24"], "ipv6_cidrs": ["2001:db8::/32"]}}}),
        json!({"description": "send some countries elsewhere", "active": true, "priority": 20,
               "rule": {"action": {"redirect": true, "redirect_uri": "https://example.com/elsewhere"},
                        "scope": "authentication",
                        "match": {"geo_country_codes": ["FR", "DE"]},
                        "not_match": {"ipv4_cidrs": ["192.0.2.0/24"]}}}),
    ] {
        create_over_https(server.addr, "localhost", &config, &token, &body);
    }

    // Export (directory format): what the server holds.
    let first = dir.path().join("first");
    export(&bin, &ca.pem, &domain, "directory", &first);
    let mut acls = exported(&first);
    assert_eq!(acls, held(&server, &ca));
    assert_eq!(acls.len(), 2);

    // Edit: one rule changed, one removed, one added.
    let block = acls.get_mut(&10).expect("priority 10");
    block["description"] = json!("block two bad networks");
    block["rule"]["match"]["ipv4_cidrs"] = json!(["198.51.100.0/24", "203.0.113.0/25"]);
    acls.remove(&20);
    acls.insert(
        30,
        json!({"description": "watch a fingerprint on the management API", "active": false,
               "priority": 30,
               "rule": {"action": {"log": true}, "scope": "management",
                        "match": {"ja4_fingerprints": ["t13d1516h2_8daaf6152771_e5627efa2ab1"]},
                        "not_match": {"geo_country_codes": ["US"]}}}),
    );
    let input = dir.path().join("input");
    write_input(&input, &acls);
    let out = a0deploy(
        &bin,
        &ca.pem,
        &domain,
        &["import", "--input_file", input.to_str().expect("utf-8")],
    );
    assert!(out.contains("Import Successful"), "{out}");

    // The server holds what was imported, and a new export has no drift.
    assert_eq!(held(&server, &ca), acls);
    let second = dir.path().join("second");
    export(&bin, &ca.pem, &domain, "directory", &second);
    assert_eq!(exported(&second), acls);

    // The YAML format exports the same rules.
    let yaml = dir.path().join("yaml");
    export(&bin, &ca.pem, &domain, "yaml", &yaml);
    let text = std::fs::read_to_string(yaml.join("tenant.yaml")).expect("tenant.yaml");
    assert!(text.starts_with("networkACLs:"), "{text}");
    for expected in [
        "block two bad networks",
        "203.0.113.0/25",
        "t13d1516h2_8daaf6152771_e5627efa2ab1",
    ] {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
    assert!(!text.contains("send some countries elsewhere"), "{text}");

    eprintln!(
        "auth0-deploy-cli {} against netacl serve over TLS: {:.1} s",
        deploy_cli_version(),
        started.elapsed().as_secs_f64()
    );
    server.kill();
}

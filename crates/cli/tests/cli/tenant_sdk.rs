//! The tenant endpoints through the official Python SDK (auth0-python 6.x), unchanged, against
//! the real binary on loopback, after `netacl directory import testdata/directory.json`: runs
//! `tests/sdk/test_tenant.py` and `tests/sdk/test_organizations.py`. Without Python or the
//! package the SDK part is skipped locally and FAILS when `CI` is set (never a silent skip in
//! CI). The import command itself is checked either way.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::serve_support::{python_sdk_or_skip, repo_root, run_sdk_script, start_for_sdk};

fn fixture() -> PathBuf {
    repo_root().join("testdata/directory.json")
}

fn import(file: &Path, data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netacl"))
        .args(["directory", "import"])
        .arg(file)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("run netacl directory import")
}

#[test]
fn directory_import_is_idempotent_and_names_the_bad_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = import(&fixture(), dir.path());
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        stdout.contains("3 connections, 50 users, 4 groups"),
        "{stdout}"
    );
    assert!(stdout.contains("0 updated, 0 unchanged"), "{stdout}");
    let again = import(&fixture(), dir.path());
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("(0 inserted, 0 updated, "), "{stdout}");

    let text = std::fs::read_to_string(fixture()).expect("fixture");
    let mut data: serde_json::Value = serde_json::from_str(&text).expect("json");
    data["sessions"][12]["user_id"] = serde_json::json!("auth0|x");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, data.to_string()).expect("write");
    let refused = import(&bad, dir.path());
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("bad.json: sessions[12].user_id: unknown user auth0|x"),
        "{stderr}"
    );
}

#[test]
fn the_python_sdk_drives_the_tenant_endpoints() {
    if !python_sdk_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let imported = import(&fixture(), dir.path());
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let server = start_for_sdk(dir.path());
    let directory = fixture();
    let stdout = run_sdk_script(
        &server,
        "tests/sdk/test_tenant.py",
        &[("NETACL_DIRECTORY", directory.as_os_str())],
    );
    assert!(stdout.contains("sdk: all tenant checks passed"), "{stdout}");
    server.kill();
}

#[test]
fn the_directory_fixture_matches_its_generator() {
    let script = repo_root().join("testdata/gen_directory.py");
    let output = match Command::new("python3").arg(&script).arg("--check").output() {
        Ok(output) => output,
        Err(err) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping the fixture check (python3 cannot run: {err})");
            return;
        }
        Err(err) => panic!("CI is set and python3 cannot run: {err}"),
    };
    assert!(
        output.status.success(),
        "testdata/directory.json is stale; run python3 testdata/gen_directory.py: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_python_sdk_drives_the_organization_endpoints() {
    if !python_sdk_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let imported = import(&fixture(), dir.path());
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let server = start_for_sdk(dir.path());
    let directory = fixture();
    let stdout = run_sdk_script(
        &server,
        "tests/sdk/test_organizations.py",
        &[("NETACL_DIRECTORY", directory.as_os_str())],
    );
    assert!(
        stdout.contains("sdk: all organization checks passed"),
        "{stdout}"
    );
    server.kill();
}

//! The console in a real browser: Debian's `chromium` driven by `chromedriver` through Selenium
//! (`tests/console/test_console.py`), against the real binary on loopback. It signs in, has a
//! rule refused with the API's message at its field, creates a rule whose description holds
//! markup (shown as text), sees it decide a tried request, toggles it, filters, signs out, and
//! checks a read-only client's console. Screenshots go to `target/console-screenshots/` (the
//! README's, and one of the page on failure).
//!
//! Without chromium, chromedriver or Selenium the test is skipped locally and FAILS when `CI` is
//! set (`.ci/run` installs them).
mod serve_support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use netacl_store::{CredentialStore, SqliteStore, StoredClient, TenantId};
use serve_support::{repo_root, start_for_sdk, wait_with_output, CLIENT_ID, CLIENT_SECRET};

const READER_ID: &str = "console-reader";
const READER_SECRET: &str = "console-reader-secret-0123456789abcdef";

fn browser_or_skip() -> bool {
    let chromium = std::path::Path::new("/usr/bin/chromium").exists();
    let driver = std::path::Path::new("/usr/bin/chromedriver").exists();
    let selenium = Command::new("python3")
        .args(["-c", "import selenium"])
        .output()
        .is_ok_and(|o| o.status.success());
    if chromium && driver && selenium {
        return true;
    }
    let why = format!(
        "chromium: {chromium}, chromedriver: {driver}, selenium: {selenium} \
         (apt-get install chromium chromium-driver; python3 -m pip install selenium)"
    );
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and the console browser test cannot run: {why}");
    }
    eprintln!("skipping the console browser test (set CI to make this fatal): {why}");
    false
}

/// Adds a client holding `read:network_acls` only to the store in `dir` (the server is stopped).
fn add_reader(dir: &std::path::Path) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(dir, netacl_model::Limits::default()).expect("store");
        store
            .put_client(
                &TenantId::default_tenant(),
                &StoredClient {
                    client_id: READER_ID.into(),
                    secret_hash: netacl_server::auth::hash_client_secret(READER_SECRET),
                    scopes: vec!["read:network_acls".into()],
                    created_at_ms: 0,
                },
            )
            .await
            .expect("reader client");
    });
}

#[test]
fn the_console_works_in_a_real_browser() {
    if !browser_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // A first start makes the tenant; the read-only client is added while the server is down.
    start_for_sdk(dir.path()).kill();
    add_reader(dir.path());
    let server = start_for_sdk(dir.path());
    let shots: PathBuf = repo_root().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot directory");
    let child = Command::new("python3")
        .arg(repo_root().join("tests/console/test_console.py"))
        .env("NETACL_BASE", format!("http://{}", server.addr))
        .env("NETACL_CLIENT_ID", CLIENT_ID)
        .env("NETACL_CLIENT_SECRET", CLIENT_SECRET)
        .env("NETACL_READER_ID", READER_ID)
        .env("NETACL_READER_SECRET", READER_SECRET)
        .env("NETACL_SHOTS", &shots)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let (status, stdout, stderr) =
        wait_with_output(child, Duration::from_secs(240), "the console browser test");
    server.kill();
    assert!(
        status.success(),
        "console browser test failed ({status}); screenshots in {}:\n{stdout}\n{stderr}",
        shots.display()
    );
    assert!(stdout.contains("console: all checks passed"), "{stdout}");
    for shot in [
        "console-rules.png",
        "console-try.png",
        "console-editor-error.png",
    ] {
        assert!(shots.join(shot).exists(), "{shot} not taken");
    }
}

/// The console's per-rule counts, tenant overview, keys and managed lists
/// (`tests/console/test_console_overview.py`) against a fresh tenant: edge summaries posted with
/// the bootstrap client show on the rule's row (counts and sparkline) and in the overview
/// (decisions, blocked share); logs filtered by type; a key created (its material gone from the
/// page) and deleted; a list edited (a malformed entry refused at its field); a read-only client
/// sees no write control.
#[test]
fn the_console_overview_works_in_a_real_browser() {
    if !browser_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    start_for_sdk(dir.path()).kill();
    add_reader(dir.path());
    let server = start_for_sdk(dir.path());
    let shots: PathBuf = repo_root().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot directory");
    let child = Command::new("python3")
        .arg(repo_root().join("tests/console/test_console_overview.py"))
        .env("NETACL_BASE", format!("http://{}", server.addr))
        .env("NETACL_CLIENT_ID", CLIENT_ID)
        .env("NETACL_CLIENT_SECRET", CLIENT_SECRET)
        .env("NETACL_READER_ID", READER_ID)
        .env("NETACL_READER_SECRET", READER_SECRET)
        .env("NETACL_SHOTS", &shots)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let (status, stdout, stderr) = wait_with_output(
        child,
        Duration::from_secs(240),
        "the console overview browser test",
    );
    server.kill();
    assert!(
        status.success(),
        "console overview browser test failed ({status}); screenshots in {}:\n{stdout}\n{stderr}",
        shots.display()
    );
    assert!(
        stdout.contains("console overview: all checks passed"),
        "{stdout}"
    );
    for shot in [
        "console-rules-counts.png",
        "console-overview.png",
        "console-keys.png",
    ] {
        assert!(shots.join(shot).exists(), "{shot} not taken");
    }
}

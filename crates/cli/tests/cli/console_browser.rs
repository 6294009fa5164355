//! The console in a real browser: Debian's `chromium` driven by `chromedriver` through Selenium
//! (`tests/console/test_console.py`), against the real binary on loopback. It signs in, has a
//! rule refused with the API's message at its field, creates a rule whose description holds
//! markup (shown as text), sees it decide a tried request, toggles it, opens the history (a
//! version's diff), has a stale rollback refused and rolls the toggle back, sees a finding on a
//! shadowed rule, previews a change's impact over pasted requests (and a proposed rule refused at
//! its field), previews an update and a deletion, saves a PATCH and deletes a rule, does the
//! editor, toggle, try and rollback flows with the keyboard alone, reads the page's console (no
//! CSP violation, no uncaught error), filters, signs out, and checks a read-only client's
//! console (no rollback). It
//! then times the rules view of a second server whose tenant holds 10,000 rules (printed, and in
//! the README). Screenshots go to `target/console-screenshots/` (the README's, and one of the
//! page on failure).
//!
//! Without chromium, chromedriver or Selenium the test is skipped locally and FAILS when `CI` is
//! set (`.ci/run` installs them).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::serve_support::{repo_root, start_for_sdk, wait_with_output, CLIENT_ID, CLIENT_SECRET};
use netacl_model::{AclId, NetworkAcl, NetworkAclSpec, Timestamp};
use netacl_store::{
    CredentialStore, HistoryStore, LogRetention, LogStore, NetworkAclStore, NewLogEvent,
    SqliteStore, StoredClient, TenantId, WriteOrigin,
};

const READER_ID: &str = "console-reader";
const READER_SECRET: &str = "console-reader-secret-0123456789abcdef";

/// One browser at a time: the two tests would otherwise run two Chromiums at once on the
/// machine's two cores, and the 10,000-rule timing would measure the other test.
static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

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

/// An edge's earlier reports, for the overview's charts: `(minutes ago, decisions, blocked)`,
/// one report in the middle of each of the buckets 10 (7.5 minutes ago) down to 1 (52.5
/// minutes ago) of the last hour, so a minute or two of test run leaves each in its bucket.
const PAST_TRAFFIC: [(f64, u64, u64); 10] = [
    (7.5, 120, 12),
    (12.5, 90, 9),
    (17.5, 150, 60),
    (22.5, 60, 6),
    (27.5, 200, 20),
    (32.5, 180, 90),
    (37.5, 80, 8),
    (42.5, 100, 10),
    (47.5, 130, 26),
    (52.5, 70, 35),
];

/// Writes [`PAST_TRAFFIC`] into the default tenant's log of the store in `dir` (the server is
/// stopped) as one block rule's `acls_summary` events of a remote edge, and answers it as JSON
/// for the browser test.
fn add_past_traffic(dir: &std::path::Path) -> String {
    let now = netacl_model::Timestamp::now().unix_millis();
    let rule = AclId::from_random(0x7a5f_0001).to_string();
    let events: Vec<NewLogEvent> = PAST_TRAFFIC
        .iter()
        .map(|&(minutes_ago, decisions, blocked)| NewLogEvent {
            date_ms: now - (minutes_ago * 60_000.0) as i64,
            event_type: "acls_summary".into(),
            client_id: Some("history-edge".into()),
            record: serde_json::json!({
                "description": format!(
                    "Network ACL {rule} (block): {blocked} matched of {decisions} evaluated in 300 s"
                ),
                "details": {"edge": "remote:history-edge", "rule_id": rule, "action": "block",
                    "scope": "tenant", "policy_version": 1, "interval_s": 300,
                    "evaluated": decisions, "matched": blocked, "connections_refused": 0}}),
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(dir, netacl_model::Limits::default()).expect("store");
        store
            .append_log_events(
                &TenantId::default_tenant(),
                &events,
                LogRetention {
                    max_events: None,
                    max_age_ms: None,
                },
            )
            .await
            .expect("past reports");
    });
    serde_json::to_string(&PAST_TRAFFIC).expect("json")
}

/// The number of rules of the timed tenant (the most a rule set may hold).
const BIG_RULES: usize = 10_000;

/// Fills the default tenant of the store in `dir` (the server is stopped) with [`BIG_RULES`]
/// rules in one write: varied actions, scopes and signals.
///
/// The admin API cannot make such a tenant: priorities are 1..100 and unique in a tenant (the
/// public API's rule), so a tenant holds at most 100 rules. This throw-away database has its
/// unique priority index dropped, and each priority is held by 100 rules (ties by id, as in a
/// rule file): the server loads, compiles and serves them as any rule set.
fn add_big_rule_set(dir: &std::path::Path) {
    let db = rusqlite::Connection::open(dir.join("netacl.db")).expect("the test tenant's database");
    db.execute_batch("DROP INDEX network_acls_priority")
        .expect("drop the unique priority index");
    drop(db);
    let limits = netacl_model::Limits::default();
    let acls: Vec<NetworkAcl> = (0..BIG_RULES)
        .map(|i| {
            let action = match i % 4 {
                0 => serde_json::json!({"block": true}),
                1 => serde_json::json!({"allow": true}),
                2 => serde_json::json!({"log": true}),
                _ => serde_json::json!({"redirect": true, "redirect_uri": "https://example.com/denied"}),
            };
            let scope = ["tenant", "authentication", "management"][i % 3];
            let mut matched = serde_json::json!({
                "ipv4_cidrs": [format!("10.{}.{}.0/24", i / 256, i % 256)],
            });
            if i % 5 == 0 {
                matched["geo_country_codes"] = serde_json::json!(["FR", "DE", "US"]);
            }
            if i % 7 == 0 {
                matched["asns"] = serde_json::json!([64_512 + (i % 1000) as u64]);
            }
            let spec = NetworkAclSpec::from_json(
                &serde_json::json!({
                    "description": format!("rule {i}: generated for the timing"),
                    "active": i % 10 != 9,
                    "priority": i % 100 + 1,
                    "rule": {"action": action, "scope": scope, "match": matched},
                }),
                &limits,
            )
            .expect("valid rule");
            let now = Timestamp::from_unix_millis(1_700_000_000_000 + i as i64);
            NetworkAcl {
                id: AclId::from_random(0x5eed_0000 + i as u128),
                spec,
                created_at: now,
                updated_at: now,
            }
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(dir, limits).expect("store");
        let tenant = TenantId::default_tenant();
        let version = store
            .network_acl_rule_set(&tenant)
            .await
            .expect("rule set")
            .version;
        let origin = WriteOrigin {
            client_id: Some("console-browser-test".into()),
            request_id: None,
        };
        store
            .restore_network_acls(&tenant, version, &acls, &origin)
            .await
            .expect("10,000 rules written");
    });
}

#[test]
fn the_console_works_in_a_real_browser() {
    if !browser_or_skip() {
        return;
    }
    let _one = ONE_BROWSER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    // A first start makes the tenant; the read-only client is added while the server is down.
    start_for_sdk(dir.path()).kill();
    add_reader(dir.path());
    let server = start_for_sdk(dir.path());
    // The timed tenant: 10,000 rules written through the store before its server starts.
    let big_dir = tempfile::tempdir().expect("tempdir");
    start_for_sdk(big_dir.path()).kill();
    add_big_rule_set(big_dir.path());
    let big = start_for_sdk(big_dir.path());
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
        .env("NETACL_BIG_BASE", format!("http://{}", big.addr))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let (status, stdout, stderr) =
        wait_with_output(child, Duration::from_secs(240), "the console browser test");
    server.kill();
    big.kill();
    assert!(
        status.success(),
        "console browser test failed ({status}); screenshots in {}:\n{stdout}\n{stderr}",
        shots.display()
    );
    assert!(stdout.contains("console: all checks passed"), "{stdout}");
    // The timing of the 10,000-rule rules view, for the README (measured, not asserted).
    for line in stdout.lines().filter(|l| l.contains("big_rules_view")) {
        eprintln!("{line}");
    }
    for shot in [
        "console-rules.png",
        "console-try.png",
        "console-editor-error.png",
        "console-history.png",
        "console-preview.png",
        "console-preview-delete.png",
        "console-findings.png",
    ] {
        assert!(shots.join(shot).exists(), "{shot} not taken");
    }
}

/// The console's per-rule counts, tenant overview, keys and managed lists
/// (`tests/console/test_console_overview.py`) against a fresh tenant: edge summaries posted with
/// the bootstrap client show on the rule's row (counts and sparkline) and, with an hour of
/// earlier reports written into the log before the server starts, in the overview (decisions,
/// blocked share, the charts of decisions per second and blocked share per 5 minutes); logs
/// filtered by type and date; a key created (its material gone from the
/// page) and deleted; a list edited (a malformed entry refused at its field); a read-only client
/// sees no write control.
#[test]
fn the_console_overview_works_in_a_real_browser() {
    if !browser_or_skip() {
        return;
    }
    let _one = ONE_BROWSER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    start_for_sdk(dir.path()).kill();
    add_reader(dir.path());
    let past = add_past_traffic(dir.path());
    let server = start_for_sdk(dir.path());
    let shots: PathBuf = repo_root().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot directory");
    let child = Command::new("python3")
        .arg(repo_root().join("tests/console/test_console_overview.py"))
        .env("NETACL_PAST_TRAFFIC", past)
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

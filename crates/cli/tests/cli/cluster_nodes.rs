//! Two `netacl serve` nodes on one PostgreSQL database and a `netacl edge` following node B:
//! started together they share one signing key; a create on node A is enforced by node B's
//! engine and by the edge; racing creates of one priority on both nodes give exactly one 201 and
//! one 409; a delete on B reaches A. Convergence times are printed, never asserted.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::cluster_support::*;
use serde_json::Value;

const CONVERGE_LIMIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(5);

#[test]
fn nodes_and_an_edge_converge_and_racing_writes_have_one_winner() {
    let Some(url) = database_url("nodes_and_an_edge_converge_and_racing_writes_have_one_winner")
    else {
        return;
    };
    let db = fresh_database(&url, "cluster");
    // Both nodes start together on an empty database: migrations, tenant, signing key and
    // bootstrap client are decided once.
    let a = start_node(&db);
    let b = start_node(&db);
    let token_a = wait_token(a.addr);
    let token_b = wait_token(b.addr);
    // One key set: a token issued by A is accepted by B and the other way round.
    assert_eq!(
        call(
            b.addr,
            &token_a,
            "GET",
            "/api/v2/network-acls",
            &Value::Null
        )
        .0,
        200
    );
    assert_eq!(
        call(
            a.addr,
            &token_b,
            "GET",
            "/api/v2/network-acls",
            &Value::Null
        )
        .0,
        200
    );

    let upstream = upstream();
    let (_edge, edge) = start_edge(b.addr, upstream);
    assert_eq!(edge_status(edge, "/login"), Some(200));
    assert_eq!(
        decision(b.addr, &token_b, "127.0.0.1")
            .map(|d| d.0)
            .as_deref(),
        Some("none")
    );

    // A create on A: enforced by B's engine and by the edge following B.
    let (status, created) = call(
        a.addr,
        &token_a,
        "POST",
        "/api/v2/network-acls",
        &block_rule(5, "127.0.0.0/8"),
    );
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_owned();
    let on_b = wait_for(CONVERGE_LIMIT, POLL, || {
        decision(b.addr, &token_b, "127.0.0.1").is_some_and(|d| d.0 == "block")
    })
    .expect("node B enforces the rule created on node A");
    let on_edge = wait_for(CONVERGE_LIMIT, POLL, || {
        edge_status(edge, "/login") == Some(403)
    })
    .expect("the edge following B enforces the rule created on A");
    eprintln!("create on A: enforced by B after {on_b:?}, by the edge after {on_edge:?}");
    // B serves the record from its own snapshot too.
    let (status, fetched) = call(
        b.addr,
        &token_b,
        "GET",
        &format!("/api/v2/network-acls/{id}"),
        &Value::Null,
    );
    assert_eq!(status, 200);
    assert_eq!(fetched, created);

    // Racing creates of one priority on both nodes: exactly one 201 and one 409, whatever the
    // interleaving; afterwards both nodes list the same records.
    for round in 0..5u64 {
        let priority = 10 + round;
        let barrier = Arc::new(Barrier::new(2));
        let racers: Vec<_> = [
            (a.addr, token_a.clone(), "10.1.0.0/16"),
            (b.addr, token_b.clone(), "10.2.0.0/16"),
        ]
        .into_iter()
        .map(|(node, token, cidr)| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                call(
                    node,
                    &token,
                    "POST",
                    "/api/v2/network-acls",
                    &block_rule(priority, cidr),
                )
            })
        })
        .collect();
        let mut results: Vec<(u16, Value)> = racers
            .into_iter()
            .map(|r| r.join().expect("racer"))
            .collect();
        results.sort_by_key(|r| r.0);
        assert_eq!(
            (results[0].0, results[1].0),
            (201, 409),
            "round {round}: {results:?}"
        );
        assert_eq!(results[1].1["errorCode"], "conflict", "{results:?}");
        assert_eq!(results[0].1["priority"], priority);
    }
    let agree = wait_for(CONVERGE_LIMIT, POLL, || {
        let (la, lb) = (listed_ids(a.addr, &token_a), listed_ids(b.addr, &token_b));
        la.is_some() && la == lb && la.as_ref().is_some_and(|l| l.len() == 6)
    });
    assert!(
        agree.is_some(),
        "both nodes list the same 6 records: {:?} / {:?}",
        listed_ids(a.addr, &token_a),
        listed_ids(b.addr, &token_b)
    );

    // A delete on B reaches A's engine; the edge lets requests through again.
    let (status, _) = call(
        b.addr,
        &token_b,
        "DELETE",
        &format!("/api/v2/network-acls/{id}"),
        &Value::Null,
    );
    assert!(status == 204 || status == 200, "delete answered {status}");
    wait_for(CONVERGE_LIMIT, POLL, || {
        decision(a.addr, &token_a, "127.0.0.1").is_some_and(|d| d.0 == "none")
    })
    .expect("node A drops the rule deleted on node B");
    wait_for(CONVERGE_LIMIT, POLL, || {
        edge_status(edge, "/login") == Some(200)
    })
    .expect("the edge drops the rule deleted on node A's peer");
    let (va, vb) = (
        decision(a.addr, &token_a, "127.0.0.1").expect("a").1,
        decision(b.addr, &token_b, "127.0.0.1").expect("b").1,
    );
    assert_eq!(va, vb, "both engines run the same rule-set version");
}

/// `--database-url` without `--secrets-key-file` is refused, naming the flag; a key file that
/// others may read is refused without quoting it.
#[test]
fn a_database_url_node_needs_a_secrets_key_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(crate::cluster_support::BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--database-url", "postgres://nobody@127.0.0.1:1/none"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--secrets-key-file"), "{stderr}");
    assert!(!dir.path().join("secrets.key").exists());

    let key = dir.path().join("kek");
    let made = std::process::Command::new(crate::cluster_support::BIN)
        .args(["secrets-key", "new"])
        .arg(&key)
        .output()
        .expect("run");
    assert!(made.status.success());
    let contents = std::fs::read_to_string(&key).expect("key file");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = std::process::Command::new(crate::cluster_support::BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--database-url", "postgres://nobody@127.0.0.1:1/none"])
        .arg("--secrets-key-file")
        .arg(&key)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("chmod 600"), "{stderr}");
    let encoded = contents.trim_end().split_once(':').expect("format").1;
    assert!(!stderr.contains(encoded));
}

//! Measures convergence across nodes (prints figures, asserts no timing): 100 changes made on
//! node A (a create, then its delete, 50 times); after each acknowledged change, node B's engine
//! (through its dry-run endpoint) and a `netacl edge` following node B are polled until their
//! decision changes. Prints the median and the worst time of each.
//!
//! Run: `cargo test --release --workspace --test cli cluster_measure -- --nocapture`
//! (with `NETACL_TEST_DATABASE_URL` set, e.g. by `. .ci/postgres.sh`).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cluster_support::*;
use serde_json::Value;

const CHANGES: usize = 100;
const LIMIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(1);

#[test]
fn convergence_figures_over_100_changes() {
    let Some(url) = database_url("convergence_figures_over_100_changes") else {
        return;
    };
    let db = fresh_database(&url, "measure");
    let a = start_node(&db);
    let b = start_node(&db);
    let token_a = wait_token(a.addr);
    let token_b = wait_token(b.addr);
    let (_edge, edge) = start_edge(b.addr, upstream());
    assert_eq!(edge_status(edge, "/login"), Some(200));

    let mut on_b = Vec::with_capacity(CHANGES);
    let mut on_edge = Vec::with_capacity(CHANGES);
    let mut id = None::<String>;
    for change in 0..CHANGES {
        let blocking = change % 2 == 0;
        let (status, body) = match &id {
            None => call(
                a.addr,
                &token_a,
                "POST",
                "/api/v2/network-acls",
                &block_rule(7, "127.0.0.0/8"),
            ),
            Some(existing) => call(
                a.addr,
                &token_a,
                "DELETE",
                &format!("/api/v2/network-acls/{existing}"),
                &Value::Null,
            ),
        };
        assert!(
            matches!(status, 200 | 201 | 204),
            "change {change}: {status} {body}"
        );
        id = if blocking {
            body["id"].as_str().map(str::to_owned)
        } else {
            None
        };
        let acknowledged = Instant::now();
        let (want_action, want_status) = if blocking {
            ("block", 403)
        } else {
            ("none", 200)
        };

        // Poll B's engine and the edge at the same time, from the same instant.
        let (tx, rx) = mpsc::channel();
        let token = token_b.clone();
        let node = b.addr;
        let tx_b = tx.clone();
        let poll_b = std::thread::spawn(move || {
            let took = wait_for(LIMIT, POLL, || {
                decision(node, &token, "127.0.0.1").is_some_and(|d| d.0 == want_action)
            });
            let _ = tx_b.send(("b", took.map(|_| acknowledged.elapsed())));
        });
        let poll_edge = std::thread::spawn(move || {
            let took = wait_for(LIMIT, POLL, || {
                edge_status(edge, "/login") == Some(want_status)
            });
            let _ = tx.send(("edge", took.map(|_| acknowledged.elapsed())));
        });
        poll_b.join().expect("poll b");
        poll_edge.join().expect("poll edge");
        for (who, took) in rx.try_iter() {
            let took = took.unwrap_or_else(|| {
                panic!("change {change}: {who} did not converge within {LIMIT:?}")
            });
            if who == "b" {
                on_b.push(took);
            } else {
                on_edge.push(took);
            }
        }
    }
    assert_eq!((on_b.len(), on_edge.len()), (CHANGES, CHANGES));
    let (median_b, worst_b) = median_and_worst(&mut on_b);
    let (median_edge, worst_edge) = median_and_worst(&mut on_edge);
    println!(
        "convergence over {CHANGES} changes made on node A (from the acknowledgement; polled every {POLL:?}):\n  \
         node B engine (dry-run): median {median_b:?}, worst {worst_b:?}\n  \
         edge following node B:   median {median_edge:?}, worst {worst_edge:?}"
    );
}

//! A rule change in the rule file is enforced within 5 s while a bounded load runs across the
//! swap, and no request of the load fails.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{
    connect_from, exchange, get_from, local, metric, record, rules, start, write_rules, Upstream,
    ID1,
};

/// Concurrent keep-alive clients of the load.
const CLIENTS: usize = 4;
/// Requests each client sends at most.
const REQUESTS_PER_CLIENT: usize = 2_000;
/// The load's time bound.
const LOAD_LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_change_is_enforced_within_5s_without_a_failed_request() {
    let upstream = Upstream::start().await;
    let block = |cidr: &str| {
        rules(&[record(
            ID1,
            1,
            r#"{"block":true}"#,
            &format!(r#"{{"ipv4_cidrs":["{cidr}"]}}"#),
        )])
    };
    let proxy = start(upstream.addr, &block("127.0.0.2/32"), None, &[]);
    let addr = proxy.http;
    let status_from =
        |x: u8| async move { get_from(local(x), addr, "/", "app.test", &[]).await.status };
    assert_eq!(status_from(2).await, 403);
    assert_eq!(status_from(3).await, 200);
    let version = metric(proxy.metrics, "netacl_edge_policy_version").await;

    // The load: clients from 127.0.0.1 (allowed by both rule sets), each on one keep-alive
    // connection, until the swap has been seen or the bounds are reached.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let mut load = Vec::new();
    for _ in 0..CLIENTS {
        let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
        load.push(tokio::spawn(async move {
            let started = Instant::now();
            let mut stream = connect_from(local(1), addr).await;
            let mut failures = Vec::new();
            for _ in 0..REQUESTS_PER_CLIENT {
                if stop.load(Ordering::SeqCst) || started.elapsed() > LOAD_LIMIT {
                    break;
                }
                let answer = exchange(&mut stream, "/", "app.test", &[], false).await;
                sent.fetch_add(1, Ordering::SeqCst);
                if answer.status != 200 {
                    failures.push(answer.status);
                }
            }
            failures
        }));
    }
    // Let the load run, then swap: 127.0.0.3 blocked instead of 127.0.0.2.
    let wait_start = Instant::now();
    while sent.load(Ordering::SeqCst) < 200 && wait_start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before_swap = sent.load(Ordering::SeqCst);
    write_rules(&proxy.rules, &block("127.0.0.3/32"));
    let swapped = Instant::now();
    let mut enforced = None;
    while swapped.elapsed() < Duration::from_secs(5) {
        if status_from(3).await == 403 {
            enforced = Some(swapped.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Some more load after the swap.
    let after = sent.load(Ordering::SeqCst);
    let wait_start = Instant::now();
    while sent.load(Ordering::SeqCst) < after + 200
        && wait_start.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut failures = Vec::new();
    for client in load {
        failures.extend(client.await.expect("load client"));
    }
    let total = sent.load(Ordering::SeqCst);
    let enforced = enforced.expect("the new rule enforced within 5 s");
    assert!(
        failures.is_empty(),
        "failed requests across the swap: {failures:?}"
    );
    assert!(
        before_swap >= 200 && total >= after + 200,
        "load ran across the swap: {before_swap} before, {total} in all"
    );
    assert_eq!(status_from(2).await, 200, "the old rule is gone");
    assert!(metric(proxy.metrics, "netacl_edge_policy_version").await > version);
    eprintln!("rule change enforced after {enforced:?}; {total} requests of the load, none failed");
}

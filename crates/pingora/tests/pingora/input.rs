//! Bad input: a bad rule file is refused and the last good policy stays; malformed requests get
//! a refusal and the process keeps answering.
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    connect_from, get, get_from, local, metric, read_answer, record, rules, start, wait_until,
    write_rules, Upstream, ID1,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_rules_file_is_refused_and_the_last_good_policy_stays() {
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
    let status_from = |x: u8| async move {
        get_from(local(x), proxy.http, "/", "app.test", &[])
            .await
            .status
    };
    assert_eq!(status_from(2).await, 403);
    let errors = |n: u64| async move {
        metric(proxy.metrics, "netacl_edge_rule_source_errors_total").await == n
    };
    // Not JSON.
    write_rules(&proxy.rules, "[{\"id\": ");
    assert!(wait_until(Duration::from_secs(10), || errors(1)).await);
    assert_eq!(status_from(2).await, 403, "the last good policy stays");
    assert_eq!(status_from(1).await, 200);
    // JSON, but an invalid rule.
    write_rules(&proxy.rules, &block("300.0.0.0/8"));
    assert!(wait_until(Duration::from_secs(10), || errors(2)).await);
    assert_eq!(status_from(2).await, 403, "the last good policy stays");
    assert_eq!(status_from(1).await, 200);
}

/// Sends `bytes` on a new connection and reads what comes back (at most 10 s).
async fn raw(to: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut stream = connect_from(local(1), to).await;
    stream.write_all(bytes).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_refused_and_the_process_keeps_answering() {
    let upstream = Upstream::start().await;
    let mut proxy = start(upstream.addr, "[]", None, &[]);
    // Not HTTP, a header line without a colon, a request line without a version, a header
    // name with a space, NUL bytes, TLS on the plain port: Pingora's 400, never the upstream.
    for request in [
        &b"garbage\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nhost: a.test\r\nno colon here\r\n\r\n",
        b"GET /\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a.test\r\nbad name: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a.test\r\nx: \0\0\r\n\r\n",
        b"\x16\x03\x01\x00\x05hello",
    ] {
        let answer = raw(proxy.http, request).await;
        let status = answer.split(' ').nth(1).unwrap_or("closed");
        assert_eq!(
            status,
            "400",
            "{:?}: {answer:?}",
            String::from_utf8_lossy(request)
        );
    }
    // A path the decision refuses: 400 in the edge's error shape.
    let mut stream = connect_from(local(1), proxy.http).await;
    stream
        .write_all(b"GET /a%zzb HTTP/1.1\r\nhost: a.test\r\nconnection: close\r\n\r\n")
        .await
        .expect("write");
    let answer = read_answer(&mut stream).await.expect("an answer");
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body, netacl_edge::INVALID_PATH_BODY);
    assert_eq!(
        upstream.hits(),
        0,
        "no malformed request reached the upstream"
    );
    // Still serving.
    assert!(proxy.proc.running());
    assert_eq!(get(proxy.http, "/").await.status, 200);
}

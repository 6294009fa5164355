//! `netacl serve`'s rule-set limit flags reach validation: a member over
//! `--max-entries-per-member` is a 400 `invalid_body` naming the property, and nothing is written.

use crate::serve_support::{free_port, request, Server};
use serde_json::json;

#[test]
fn limit_flags_apply_to_the_admin_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let domain = format!("127.0.0.1:{port}");
    let server = Server::start(
        dir.path(),
        &listen,
        &domain,
        &["--max-entries-per-member", "2", "--rate-limit-burst", "0"],
    );
    let token = server.token();
    let body = |cidrs: &[&str]| {
        json!({"description": "limits", "active": true, "priority": 5,
               "rule": {"action": {"block": true}, "scope": "tenant",
                        "match": {"ipv4_cidrs": cidrs}}})
    };
    let answer = request(
        server.addr,
        "POST",
        "/api/v2/network-acls",
        Some(&token),
        Some(&body(&["192.0.2.1", "192.0.2.2", "192.0.2.3"])),
    )
    .expect("create");
    assert_eq!(answer.status, 400, "{:?}", answer.json());
    assert_eq!(answer.json()["errorCode"], "invalid_body");
    assert_eq!(
        answer.json()["message"],
        "Payload validation error: 'Array is too long (3), maximum 2' on property rule.match.ipv4_cidrs."
    );
    let list = request(
        server.addr,
        "GET",
        "/api/v2/network-acls",
        Some(&token),
        None,
    )
    .expect("list");
    assert_eq!(list.json(), json!([]));
    let answer = request(
        server.addr,
        "POST",
        "/api/v2/network-acls",
        Some(&token),
        Some(&body(&["192.0.2.1", "192.0.2.2"])),
    )
    .expect("create");
    assert_eq!(answer.status, 201, "{:?}", answer.json());
    server.kill();
}

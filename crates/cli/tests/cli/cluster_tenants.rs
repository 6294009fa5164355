//! Many tenants on two `netacl serve` nodes sharing one PostgreSQL database: a tenant created on
//! node A is served by node B (its tokens, issued by A, accepted by B); two nodes creating
//! tenants with one domain at the same time: exactly one 201, the other 409; a tenant deleted on
//! B stops on A; a rule written on A for one tenant reaches B's view of that tenant. Times are
//! printed (the README's figures), never asserted.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::cluster_support::*;
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(5);

/// One request with `Host: host`; `(status, JSON body or Null)`.
fn at(
    node: SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(node).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if !body.is_empty() {
        request.push_str("Content-Type: application/json\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).expect("write");
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

fn operator_token(node: &Node) -> String {
    std::fs::read_to_string(node.data.path().join("operator-token"))
        .expect("operator token")
        .trim()
        .to_owned()
}

fn tenant_token(node: SocketAddr, host: &str, created: &Value) -> String {
    let body = json!({
        "grant_type": "client_credentials",
        "client_id": created["client_id"],
        "client_secret": created["client_secret"],
        "audience": created["audience"],
    });
    let (status, answer) = at(node, host, "POST", "/oauth/token", None, Some(&body));
    assert_eq!(status, 200, "{answer}");
    answer["access_token"].as_str().expect("token").to_owned()
}

#[test]
fn tenants_are_shared_by_nodes_and_a_domain_race_has_one_winner() {
    let Some(url) = database_url("tenants_are_shared_by_nodes_and_a_domain_race_has_one_winner")
    else {
        return;
    };
    let db = fresh_database(&url, "tenants");
    let a = start_node(&db);
    let b = start_node(&db);
    wait_token(a.addr);
    wait_token(b.addr);
    let (op_a, op_b) = (operator_token(&a), operator_token(&b));

    // Created on A, served by B.
    let mut created = Vec::new();
    for name in ["acme", "beta"] {
        let (status, body) = at(
            a.addr,
            "ops.test",
            "POST",
            "/_netacl/v1/tenants",
            Some(&op_a),
            Some(&json!({"tenant": name, "domains": [format!("{name}.test")]})),
        );
        assert_eq!(status, 201, "{body}");
        created.push(body);
    }
    // B serves beta when its key set for beta.test is beta's (the one A serves): before B knows
    // the new tenants it is still single-tenant, where every host selects the default tenant and
    // a JWKS (the default tenant's) is answered at once.
    let (status, beta_keys) = at(
        a.addr,
        "beta.test",
        "GET",
        "/.well-known/jwks.json",
        None,
        None,
    );
    assert_eq!(status, 200, "{beta_keys}");
    let took = wait_for(LIMIT, POLL, || {
        at(
            b.addr,
            "beta.test",
            "GET",
            "/.well-known/jwks.json",
            None,
            None,
        ) == (200, beta_keys.clone())
    })
    .expect("node B serves a tenant created on A");
    println!("tenant created on A served by B after {took:?}");
    for (name, body) in ["acme", "beta"].iter().zip(&created) {
        let host = format!("{name}.test");
        let token = tenant_token(a.addr, &host, body);
        let (status, answer) = at(
            b.addr,
            &host,
            "GET",
            "/api/v2/network-acls",
            Some(&token),
            None,
        );
        assert_eq!(status, 200, "A's token for {name} on B: {answer}");
    }

    // Rule convergence per tenant: written on A, listed by B.
    for (index, (name, body)) in ["acme", "beta"].iter().zip(&created).enumerate() {
        let host = format!("{name}.test");
        let token = tenant_token(a.addr, &host, body);
        let (status, rule) = at(
            a.addr,
            &host,
            "POST",
            "/api/v2/network-acls",
            Some(&token),
            Some(&block_rule(10 + index as u64, "198.51.100.0/24")),
        );
        assert_eq!(status, 201, "{rule}");
        let id = rule["id"].as_str().expect("id").to_owned();
        let took = wait_for(LIMIT, POLL, || {
            let (status, list) = at(
                b.addr,
                &host,
                "GET",
                "/api/v2/network-acls",
                Some(&token),
                None,
            );
            status == 200
                && list
                    .as_array()
                    .is_some_and(|l| l.iter().any(|r| r["id"] == id))
        })
        .expect("the rule reaches B");
        println!("tenant {name}: a rule written on A listed by B after {took:?}");
    }

    // Racing for one domain: exactly one 201, the other 409.
    for round in 0..3 {
        let barrier = Arc::new(Barrier::new(2));
        let domain = format!("race{round}.test");
        let racers: Vec<_> = [(a.addr, op_a.clone(), "one"), (b.addr, op_b.clone(), "two")]
            .into_iter()
            .map(|(node, op, who)| {
                let (barrier, domain) = (Arc::clone(&barrier), domain.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    at(
                        node,
                        "ops.test",
                        "POST",
                        "/_netacl/v1/tenants",
                        Some(&op),
                        Some(&json!({"tenant": format!("{who}-{round}"), "domains": [domain]})),
                    )
                })
            })
            .collect();
        let mut statuses: Vec<u16> = racers
            .into_iter()
            .map(|r| r.join().expect("racer").0)
            .collect();
        statuses.sort();
        assert_eq!(statuses, [201, 409], "round {round}");
    }

    // Deleted on B, stops on A.
    let (status, body) = at(
        b.addr,
        "ops.test",
        "DELETE",
        "/_netacl/v1/tenants/acme",
        Some(&op_b),
        None,
    );
    assert_eq!(status, 204, "{body}");
    assert_eq!(
        at(
            b.addr,
            "acme.test",
            "GET",
            "/.well-known/jwks.json",
            None,
            None
        )
        .0,
        421
    );
    let took = wait_for(LIMIT, POLL, || {
        at(
            a.addr,
            "acme.test",
            "GET",
            "/.well-known/jwks.json",
            None,
            None,
        )
        .0 == 421
    })
    .expect("node A stops serving a tenant deleted on B");
    println!("tenant deleted on B refused by A after {took:?}");
    assert_eq!(
        at(
            a.addr,
            "beta.test",
            "GET",
            "/.well-known/jwks.json",
            None,
            None
        )
        .0,
        200
    );
}

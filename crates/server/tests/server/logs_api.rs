//! Tenant logs through HTTP (`GET /api/v2/logs`, `GET /api/v2/logs/{id}`, the edges'
//! summaries): one event per management write, none per read; paging both ways, totals,
//! fields, sort, search; retention; restarts; secrets; tenants apart.

use std::net::SocketAddr;

use crate::support::{api, api_with, config, oneshot, scoped_token, start_in, Api};
use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Method, Request, StatusCode};
use netacl_server::OperatorToken;
use netacl_store::LogRetention;
use serde_json::{json, Value};

fn acl_body(priority: u64, cidr: &str) -> Value {
    json!({"description": "logged", "active": true, "priority": priority,
           "rule": {"action": {"block": true}, "scope": "tenant",
                    "match": {"ipv4_cidrs": [cidr]}}})
}

/// Creates `n` network ACLs (priorities 1..=n): `n` sapi events.
async fn create_acls(api: &Api, n: u64) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 1..=n {
        let created = api
            .send(
                Method::POST,
                "/api/v2/network-acls",
                Some(acl_body(i, &format!("198.51.100.{i}/32"))),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        ids.push(created.body["id"].as_str().expect("id").to_owned());
    }
    ids
}

fn events(body: &Value) -> &Vec<Value> {
    body.as_array().expect("a bare array of events")
}

fn log_ids(body: &Value) -> Vec<String> {
    events(body)
        .iter()
        .map(|e| e["log_id"].as_str().expect("log_id").to_owned())
        .collect()
}

#[tokio::test]
async fn writes_are_logged_reads_are_not_and_no_secret_appears() {
    let api = api().await;
    // A write from a known address and user agent.
    let mut request = Request::post("/api/v2/network-acls")
        .header("authorization", format!("Bearer {}", api.token))
        .header("content-type", "application/json")
        .header("user-agent", "netacl-test/1.0")
        .header("x-request-id", "req-logged-1")
        .body(Body::from(acl_body(10, "192.0.2.0/24").to_string()))
        .expect("request");
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([203, 0, 113, 9], 40_000))));
    let created = api.call(request).await;
    assert_eq!(created.status, StatusCode::CREATED);
    let id = created.body["id"].as_str().expect("id").to_owned();
    // Reads, a dry run and unauthenticated writes add nothing.
    api.get_ok("/api/v2/network-acls").await;
    api.get_ok(&format!("/api/v2/network-acls/{id}")).await;
    let dry = api
        .send(
            Method::POST,
            "/_netacl/v1/dry-run",
            Some(json!({"request": {"client_ip": "192.0.2.1"}})),
        )
        .await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.body);
    let unauthenticated = api
        .send_as(
            "not-a-token",
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(11, "192.0.2.0/24")),
        )
        .await;
    assert_eq!(unauthenticated.status, StatusCode::UNAUTHORIZED);
    let logs = api.get_ok("/api/v2/logs?sort=date:1").await;
    assert_eq!(events(&logs).len(), 1, "{logs}");
    let event = &events(&logs)[0];
    assert_eq!(event["type"], "sapi");
    assert_eq!(event["client_id"], crate::support::CLIENT);
    assert_eq!(event["client_name"], crate::support::CLIENT);
    assert_eq!(event["ip"], "203.0.113.9");
    assert_eq!(event["user_agent"], "netacl-test/1.0");
    assert_eq!(event["hostname"], crate::support::DOMAIN);
    assert_eq!(event["description"], "Create a network ACL");
    assert_eq!(
        event["details"],
        json!({"request": {"method": "post", "path": "/api/v2/network-acls",
                           "operation": "post_network-acls"},
               "response": {"statusCode": 201},
               "request_id": "req-logged-1"})
    );
    let date = event["date"].as_str().expect("date");
    assert!(netacl_model::Timestamp::parse(date).is_some(), "{date}");

    // Failures: a refused body (400), a missing scope (403), an unknown record (404).
    let refused = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(12, "not-a-cidr")),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let reader = scoped_token(&api.service, "reader", &["read:network_acls"]);
    let forbidden = api
        .send_as(
            &reader,
            Method::DELETE,
            &format!("/api/v2/network-acls/{id}"),
            None,
        )
        .await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    let missing = api
        .send(
            Method::DELETE,
            "/api/v2/network-acls/acl_1111111111111111111111",
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    // A network ACL key: its material must never reach the log.
    let material = "c2VjcmV0LWtleS1tYXRlcmlhbC1vZi10aGUtbG9ncy10ZXN0";
    let key = api
        .send(
            Method::POST,
            "/api/v2/keys/network-acls",
            Some(json!({"name": "edge", "alg": "hmac-sha256", "value": material})),
        )
        .await;
    assert_eq!(key.status, StatusCode::CREATED, "{}", key.body);
    let logs = api.get_ok("/api/v2/logs?sort=date:1").await;
    let kinds: Vec<(&str, u64, Option<&str>)> = events(&logs)
        .iter()
        .map(|e| {
            (
                e["type"].as_str().expect("type"),
                e["details"]["response"]["statusCode"]
                    .as_u64()
                    .expect("status"),
                e["client_id"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("sapi", 201, Some(crate::support::CLIENT)),
            ("fapi", 400, Some(crate::support::CLIENT)),
            ("fapi", 403, Some("reader")),
            ("fapi", 404, Some(crate::support::CLIENT)),
            ("sapi", 201, Some(crate::support::CLIENT)),
        ]
    );
    assert_eq!(
        events(&logs)[2]["description"],
        "Delete a network ACL: 403 Forbidden"
    );
    let text = logs.to_string();
    for secret in [
        material,
        api.token.as_str(),
        reader.as_str(),
        crate::support::SECRET,
    ] {
        assert!(!text.contains(secret), "a secret reached the log: {text}");
    }
    // Reading the logs needs read:logs, exactly.
    for scope in ["read:logsX", "read:log", "read:network_acls"] {
        let token = scoped_token(&api.service, &format!("c-{}", scope.len()), &[scope]);
        let answer = api.send_as(&token, Method::GET, "/api/v2/logs", None).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{scope}");
    }
    let reader = scoped_token(&api.service, "log-reader", &["read:logs"]);
    let answer = api
        .send_as(&reader, Method::GET, "/api/v2/logs", None)
        .await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn pages_both_ways_with_totals_fields_and_sort() {
    let api = api().await;
    create_acls(&api, 7).await;
    let all = api.get_ok("/api/v2/logs?sort=date:1&per_page=100").await;
    let ascending = log_ids(&all);
    assert_eq!(ascending.len(), 7);
    let mut sorted = ascending.clone();
    sorted.sort();
    assert_eq!(
        ascending, sorted,
        "log ids sort as the events were recorded"
    );
    // The default order is newest first.
    let mut descending = ascending.clone();
    descending.reverse();
    assert_eq!(log_ids(&api.get_ok("/api/v2/logs").await), descending);
    assert_eq!(
        log_ids(&api.get_ok("/api/v2/logs?sort=date:-1").await),
        descending
    );
    // Offset pages, with totals.
    let page = api
        .get_ok("/api/v2/logs?sort=date:1&page=1&per_page=3&include_totals=true")
        .await;
    assert_eq!(
        (
            page["start"].clone(),
            page["limit"].clone(),
            page["length"].clone(),
            page["total"].clone()
        ),
        (json!(3), json!(3), json!(3), json!(7))
    );
    assert_eq!(log_ids(&page["logs"]), ascending[3..6]);
    let last = api
        .get_ok("/api/v2/logs?sort=date:1&page=2&per_page=3&include_totals=true")
        .await;
    assert_eq!(log_ids(&last["logs"]), ascending[6..]);
    let past = api.get_ok("/api/v2/logs?page=5&per_page=3").await;
    assert!(events(&past).is_empty(), "a page past the end is empty");
    // Checkpoints: from an id, by id, following the Link header.
    let mut seen = Vec::new();
    let mut uri = "/api/v2/logs?take=3".to_owned();
    loop {
        let answer = api.send(Method::GET, &uri, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
        let ids = log_ids(&answer.body);
        if ids.is_empty() {
            assert!(answer.headers.get("link").is_none());
            break;
        }
        assert!(ids.len() <= 3);
        seen.extend(ids);
        let link = answer.headers["link"].to_str().expect("link").to_owned();
        assert!(link.ends_with("; rel=\"next\""), "{link}");
        uri = link[1..link.find('>').expect(">")].to_owned();
    }
    assert_eq!(seen, ascending);
    let from = api
        .get_ok(&format!("/api/v2/logs?from={}&take=2", ascending[4]))
        .await;
    assert_eq!(log_ids(&from), ascending[5..7]);
    // Fields, included and excluded.
    let only = api
        .get_ok("/api/v2/logs?fields=log_id,type&include_fields=true")
        .await;
    for event in events(&only) {
        let mut keys: Vec<&String> = event.as_object().expect("object").keys().collect();
        keys.sort();
        assert_eq!(keys, ["log_id", "type"]);
    }
    let without = api
        .get_ok("/api/v2/logs?fields=details,ip&include_fields=false&take=1")
        .await;
    let event = &events(&without)[0];
    assert!(event.get("details").is_none() && event.get("log_id").is_some());
    // Refused parameters name themselves.
    for (uri, name) in [
        ("/api/v2/logs?sort=type:1", "sort"),
        ("/api/v2/logs?per_page=101", "per_page"),
        ("/api/v2/logs?take=101", "take"),
        ("/api/v2/logs?take=0", "take"),
        ("/api/v2/logs?from=12", "from"),
        ("/api/v2/logs?from=00000000000000000001&q=type:sapi", "q"),
        ("/api/v2/logs?fields=secret", "fields"),
        ("/api/v2/logs?unknown=1", "unknown"),
    ] {
        let answer = api.send(Method::GET, uri, None).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(answer.body["errorCode"], "invalid_query_string", "{uri}");
        assert!(
            answer.body["message"]
                .as_str()
                .expect("message")
                .contains(name),
            "{uri}: {}",
            answer.body
        );
    }
    let mixed = api
        .send(Method::GET, "/api/v2/logs?page=1&take=2", None)
        .await;
    assert_eq!(mixed.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn searches_by_type_client_and_date() {
    let api = api().await;
    create_acls(&api, 2).await;
    let other = scoped_token(&api.service, "other-writer", &["create:network_acls"]);
    let refused = api
        .send_as(
            &other,
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(1, "192.0.2.0/24")),
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "priority 1 is taken");
    let count = |q: &'static str| {
        let api = &api;
        async move {
            let uri = format!("/api/v2/logs?include_totals=true&q={}", urlencoding(q));
            api.get_ok(&uri).await["total"].as_u64().expect("total")
        }
    };
    assert_eq!(count("type:sapi").await, 2);
    assert_eq!(count("type:fapi").await, 1);
    assert_eq!(count("client_id:other-writer").await, 1);
    assert_eq!(count("client_id:\"test-admin\" AND type:sapi").await, 2);
    assert_eq!(count("type:sapi AND type:fapi").await, 0);
    assert_eq!(count("date:[2000-01-01 TO *]").await, 3);
    assert_eq!(count("date:[* TO 2000-01-01]").await, 0);
    assert_eq!(
        count("type:fapi AND date:[2000-01-01T00:00:00Z TO 2999-12-31]").await,
        1
    );
    // The Python SDK's name for the parameter.
    let search = api.get_ok("/api/v2/logs?search=type%3Afapi").await;
    assert_eq!(events(&search).len(), 1);
    // Malformed: 400 naming the position and what was expected.
    for (q, needle) in [
        ("type:sapi OR type:fapi", "at character 11: expected AND"),
        ("user:x", "at character 1: expected a field"),
        (
            "date:[2026-13-01 TO *]",
            "at character 7: expected '*' or a date",
        ),
        ("type:\"open", "expected a closing"),
    ] {
        let answer = api
            .send(
                Method::GET,
                &format!("/api/v2/logs?q={}", urlencoding(q)),
                None,
            )
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{q}");
        assert_eq!(answer.body["errorCode"], "invalid_query_string");
        let message = answer.body["message"].as_str().expect("message");
        assert!(
            message.contains(needle) && message.ends_with("on property q."),
            "{q}: {message}"
        );
    }
}

/// Percent-encodes a query value.
fn urlencoding(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn one_event_by_id_unknown_404_malformed_400() {
    let api = api().await;
    create_acls(&api, 1).await;
    let logs = api.get_ok("/api/v2/logs").await;
    let event = &events(&logs)[0];
    let id = event["log_id"].as_str().expect("id");
    assert_eq!(&api.get_ok(&format!("/api/v2/logs/{id}")).await, event);
    for unknown in [
        "00000000000000000099",
        "00000000000000000000",
        "99999999999999999999",
    ] {
        let answer = api
            .send(Method::GET, &format!("/api/v2/logs/{unknown}"), None)
            .await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{unknown}");
        assert_eq!(answer.body["errorCode"], "inexistent_log");
    }
    for malformed in ["42", "abc", "0000000000000000000a"] {
        let answer = api
            .send(Method::GET, &format!("/api/v2/logs/{malformed}"), None)
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{malformed}");
        assert_eq!(answer.body["errorCode"], "invalid_uri");
    }
}

#[tokio::test]
async fn retention_keeps_the_newest_events() {
    let api = api_with(config().with_log_retention(LogRetention {
        max_events: Some(3),
        max_age_ms: None,
    }))
    .await;
    create_acls(&api, 5).await;
    let logs = api
        .get_ok("/api/v2/logs?include_totals=true&sort=date:1")
        .await;
    assert_eq!(logs["total"], 3);
    assert_eq!(
        log_ids(&logs["logs"]),
        [
            "00000000000000000003",
            "00000000000000000004",
            "00000000000000000005"
        ]
    );
    let gone = api
        .send(Method::GET, "/api/v2/logs/00000000000000000001", None)
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn events_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = {
        let (service, token) = start_in(dir.path(), config()).await;
        let api = Api::new(service, token);
        create_acls(&api, 2).await;
        api.get_ok("/api/v2/logs").await
    };
    let (service, token) = start_in(dir.path(), config()).await;
    let api = Api::new(service, token);
    assert_eq!(api.get_ok("/api/v2/logs").await, before);
    create_acls_from(&api, 3).await;
    let after = api.get_ok("/api/v2/logs?sort=date:1").await;
    assert_eq!(
        log_ids(&after),
        [
            "00000000000000000001",
            "00000000000000000002",
            "00000000000000000003"
        ],
        "numbering goes on"
    );
}

async fn create_acls_from(api: &Api, priority: u64) {
    let created = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(priority, "192.0.2.7/32")),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
}

#[tokio::test]
async fn edge_summaries_become_acls_summary_events() {
    let api = api().await;
    let ids = create_acls(&api, 1).await;
    let summary = json!({"rule_id": ids[0], "action": "block", "scope": "tenant",
        "policy_version": 1, "interval_s": 600, "evaluated": 12, "matched": 5,
        "connections_refused": 1});
    let edge = scoped_token(&api.service, "edge-1", &["create:edge_summaries"]);
    let posted = api
        .send_as(
            &edge,
            Method::POST,
            "/_netacl/v1/edge/summaries",
            Some(json!({"summaries": [summary]})),
        )
        .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
    assert_eq!(posted.body, json!({"recorded": 1}));
    // The in-process edge's way.
    let in_process: netacl_model::AclSummary =
        serde_json::from_value(summary.clone()).expect("summary");
    assert!(api.service.record_acl_summaries(&[in_process]).await);
    let logs = api
        .get_ok(&format!(
            "/api/v2/logs?sort=date:1&q={}",
            urlencoding("type:acls_summary")
        ))
        .await;
    let got = events(&logs);
    assert_eq!(got.len(), 2, "{logs}");
    assert_eq!(got[0]["client_id"], "edge-1");
    assert_eq!(got[0]["details"]["rule_id"], ids[0].as_str());
    assert_eq!(got[0]["details"]["matched"], 5);
    assert_eq!(got[0]["details"]["edge"], "remote:edge-1");
    assert_eq!(got[1]["details"]["edge"], "in-process");
    assert!(got[1].get("client_id").is_none());
    // Posting summaries is no management write: no sapi for it.
    let writes = api
        .get_ok(&format!("/api/v2/logs?q={}", urlencoding("type:sapi")))
        .await;
    assert_eq!(events(&writes).len(), 1);
    // Refused: a bad member (with its path), another scope, a body too long.
    let mut bad = summary.clone();
    bad["scope"] = json!("everything");
    let answer = api
        .send_as(
            &edge,
            Method::POST,
            "/_netacl/v1/edge/summaries",
            Some(json!({"summaries": [summary.clone(), bad]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        answer.body["message"]
            .as_str()
            .expect("message")
            .contains("summaries[1]"),
        "{}",
        answer.body
    );
    let reader = scoped_token(&api.service, "rules-reader", &["read:network_acls"]);
    let answer = api
        .send_as(
            &reader,
            Method::POST,
            "/_netacl/v1/edge/summaries",
            Some(json!({"summaries": []})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let many: Vec<Value> = (0..1_001).map(|_| summary.clone()).collect();
    let answer = api
        .send_as(
            &edge,
            Method::POST,
            "/_netacl/v1/edge/summaries",
            Some(json!({ "summaries": many })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let total = api.get_ok("/api/v2/logs?include_totals=true").await["total"].clone();
    assert_eq!(total, 3, "refused reports record nothing");
}

const OPERATOR: &str = "operator-token-of-the-logs-test-long-enough";

fn on_host(
    host: &str,
    method: Method,
    uri: &str,
    token: &str,
    body: Option<Value>,
) -> Request<Body> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", host)
        .header("authorization", format!("Bearer {token}"));
    match body {
        Some(body) => builder
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .expect("request")
}

#[tokio::test]
async fn a_tenant_never_sees_another_tenants_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = OperatorToken::new(OPERATOR.into()).expect("token");
    let (service, default_token) =
        start_in(dir.path(), config().with_operator_token(operator)).await;
    let router = service.router();
    let created = oneshot(
        &router,
        on_host(
            "whatever.test",
            Method::POST,
            "/_netacl/v1/tenants",
            OPERATOR,
            Some(json!({"tenant": "acme", "domains": ["acme.test"]})),
        ),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let token = oneshot(
        &router,
        Request::post("/oauth/token")
            .header("host", "acme.test")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"grant_type": "client_credentials",
                       "client_id": created.body["client_id"],
                       "client_secret": created.body["client_secret"],
                       "audience": "https://acme.test/api/v2/"})
                .to_string(),
            ))
            .expect("request"),
    )
    .await;
    assert_eq!(token.status, StatusCode::OK, "{}", token.body);
    let acme_token = token.body["access_token"]
        .as_str()
        .expect("token")
        .to_owned();
    for (host, token, cidr) in [
        ("acme.test", acme_token.as_str(), "192.0.2.0/24"),
        (
            crate::support::DOMAIN,
            default_token.as_str(),
            "198.51.100.0/24",
        ),
        (
            crate::support::DOMAIN,
            default_token.as_str(),
            "203.0.113.0/24",
        ),
    ] {
        let priority = if cidr.starts_with("203") { 2 } else { 1 };
        let answer = oneshot(
            &router,
            on_host(
                host,
                Method::POST,
                "/api/v2/network-acls",
                token,
                Some(acl_body(priority, cidr)),
            ),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{host}: {}",
            answer.body
        );
    }
    let list = |host: &'static str, token: String| {
        let router = router.clone();
        async move {
            oneshot(
                &router,
                on_host(host, Method::GET, "/api/v2/logs", &token, None),
            )
            .await
            .body
        }
    };
    let acme = list("acme.test", acme_token.clone()).await;
    let default = list(crate::support::DOMAIN, default_token.clone()).await;
    assert_eq!(events(&acme).len(), 1, "{acme}");
    assert_eq!(events(&default).len(), 2, "{default}");
    assert_eq!(events(&acme)[0]["hostname"], "acme.test");
    assert_eq!(log_ids(&acme), ["00000000000000000001"]);
    // The default tenant's second event is no event of acme's.
    let answer = oneshot(
        &router,
        on_host(
            "acme.test",
            Method::GET,
            "/api/v2/logs/00000000000000000002",
            &acme_token,
            None,
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert!(!default
        .to_string()
        .contains(created.body["client_id"].as_str().expect("id")));
}

/// Each write's event carries the request id its answer carried in `X-Request-Id`: the
/// caller's, or the one the server generated; a refused write's too.
#[tokio::test]
async fn a_write_event_carries_the_request_id_of_its_answer() {
    let api = api().await;
    let created = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(10, "192.0.2.0/24")),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let generated = created.headers["x-request-id"]
        .to_str()
        .expect("ASCII")
        .to_owned();
    let refused = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(11, "192.0.2.0/33")),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    let logs = api.get_ok("/api/v2/logs?sort=date:1").await;
    let got: Vec<&Value> = events(&logs)
        .iter()
        .map(|e| &e["details"]["request_id"])
        .collect();
    let refused_id = refused.headers["x-request-id"].to_str().expect("ASCII");
    assert_ne!(generated, refused_id);
    assert_eq!(got, [&json!(generated), &json!(refused_id)], "{logs}");
}

/// A tenant created through the operator API: its bootstrap client's token, asked on its host.
async fn operator_tenant(router: &axum::Router, id: &str, host: &str) -> String {
    let created = oneshot(
        router,
        on_host(
            "whatever.test",
            Method::POST,
            "/_netacl/v1/tenants",
            OPERATOR,
            Some(json!({"tenant": id, "domains": [host]})),
        ),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let token = oneshot(
        router,
        Request::post("/oauth/token")
            .header("host", host)
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"grant_type": "client_credentials",
                       "client_id": created.body["client_id"],
                       "client_secret": created.body["client_secret"],
                       "audience": format!("https://{host}/api/v2/")})
                .to_string(),
            ))
            .expect("request"),
    )
    .await;
    assert_eq!(token.status, StatusCode::OK, "{}", token.body);
    token.body["access_token"]
        .as_str()
        .expect("token")
        .to_owned()
}

/// A multi-tenant edge holds the operator token only: it posts every tenant's summaries and
/// samples of an interval in one body each (`/_netacl/v1/tenants/edge/...`). Each tenant's log,
/// counts and preview get its own and nothing of another's; an unknown or deleted tenant is
/// skipped and nothing of it is created; a bad member refuses the whole body; tenant tokens
/// and no token are refused.
#[tokio::test]
async fn a_platform_edge_reports_every_tenant_through_the_operator_api() {
    const SUMMARIES: &str = "/_netacl/v1/tenants/edge/summaries";
    const SAMPLE: &str = "/_netacl/v1/tenants/edge/sample";
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = OperatorToken::new(OPERATOR.into()).expect("token");
    let (service, _) = start_in(dir.path(), config().with_operator_token(operator)).await;
    let router = service.router();
    let acme = operator_tenant(&router, "acme", "acme.test").await;
    let beta = operator_tenant(&router, "beta", "beta.test").await;
    // One rule in each (version 1 in each).
    let mut rule_ids = Vec::new();
    for (host, token, cidr) in [
        ("acme.test", &acme, "192.0.2.0/24"),
        ("beta.test", &beta, "198.51.100.0/24"),
    ] {
        let answer = oneshot(
            &router,
            on_host(
                host,
                Method::POST,
                "/api/v2/network-acls",
                token,
                Some(acl_body(1, cidr)),
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        rule_ids.push(answer.body["id"].as_str().expect("id").to_owned());
    }
    let summary = |rule: &str, version: u64, matched: u64| {
        json!({"rule_id": rule, "action": "block", "scope": "tenant",
               "policy_version": version, "interval_s": 600, "evaluated": matched + 1,
               "matched": matched, "connections_refused": 0})
    };
    let post = |uri: &'static str, token: Option<&str>, body: Value| {
        let router = router.clone();
        let token = token.map(str::to_owned);
        async move {
            let mut request = Request::post(uri)
                .header("host", "anything.test")
                .header("content-type", "application/json");
            if let Some(token) = token {
                request = request.header("authorization", format!("Bearer {token}"));
            }
            oneshot(
                &router,
                request.body(Body::from(body.to_string())).expect("request"),
            )
            .await
        }
    };
    let report = json!({"edge": "edge-0123456789abcdef", "tenants": {
        "acme": [summary(&rule_ids[0], 1, 7)],
        "beta": [summary(&rule_ids[1], 1, 3), summary(&rule_ids[1], 9, 100)],
        "nobody": [summary(&rule_ids[0], 1, 5)]}});
    let answer = post(SUMMARIES, Some(OPERATOR), report.clone()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        answer.body,
        json!({"recorded": 2, "skipped": 2, "unknown_tenants": ["nobody"]}),
        "beta's version-9 summary is no summary of this beta"
    );
    // Not the operator token: 401, nothing recorded.
    for token in [
        None,
        Some("not-the-operator-token-but-long-enough-1234"),
        Some(acme.as_str()),
    ] {
        for uri in [SUMMARIES, SAMPLE] {
            let answer = post(uri, token, report.clone()).await;
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{uri}");
            assert_eq!(answer.body["errorCode"], "invalid_operator_token");
        }
    }
    // A bad member anywhere: 400 with its path, nothing of the body recorded.
    let mut bad = report.clone();
    bad["tenants"]["beta"][1]["scope"] = json!("everything");
    let answer = post(SUMMARIES, Some(OPERATOR), bad).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert!(
        answer.body["message"]
            .as_str()
            .expect("message")
            .ends_with("on property tenants.beta[1]."),
        "{}",
        answer.body
    );
    let answer = post(
        SUMMARIES,
        Some(OPERATOR),
        json!({"edge": "edge-1", "tenants": {"no such id!": []}}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    let many: Vec<Value> = (0..5_001).map(|_| summary(&rule_ids[0], 1, 1)).collect();
    let answer = post(
        SUMMARIES,
        Some(OPERATOR),
        json!({"edge": "edge-1", "tenants": {"acme": many.clone(), "beta": many}}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);

    // Each tenant's log and counts: its own rule, once.
    let summaries_of = |host: &'static str, token: String| {
        let router = router.clone();
        async move {
            let answer = oneshot(
                &router,
                on_host(
                    host,
                    Method::GET,
                    &format!("/api/v2/logs?q={}", urlencoding("type:acls_summary")),
                    &token,
                    None,
                ),
            )
            .await;
            assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
            events(&answer.body).clone()
        }
    };
    let got = summaries_of("acme.test", acme.clone()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["details"]["rule_id"], rule_ids[0].as_str());
    assert_eq!(got[0]["details"]["matched"], 7);
    assert_eq!(got[0]["details"]["edge"], "platform:edge-0123456789abcdef");
    assert!(got[0].get("client_id").is_none());
    let got = summaries_of("beta.test", beta.clone()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["details"]["rule_id"], rule_ids[1].as_str());
    assert_eq!(got[0]["details"]["matched"], 3);
    let counts = oneshot(
        &router,
        on_host(
            "beta.test",
            Method::GET,
            "/_netacl/v1/network-acls/counts",
            &beta,
            None,
        ),
    )
    .await;
    assert_eq!(counts.status, StatusCode::OK, "{}", counts.body);
    assert_eq!(counts.body["totals"]["matched"], 3, "{}", counts.body);
    assert_eq!(
        counts.body["network_acls"][0]["rule_id"],
        rule_ids[1].as_str()
    );

    // Samples: each tenant's preview replays its own.
    let sample = json!({"edge": "edge-0123456789abcdef", "tenants": {
        "acme": [{"client_ip": "192.0.2.1", "user_agent": "acme/1"}],
        "beta": [{"client_ip": "10.0.0.1"}, {"client_ip": "10.0.0.2"}],
        "nobody": [{"client_ip": "10.0.0.3"}]}});
    let answer = post(SAMPLE, Some(OPERATOR), sample).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        answer.body,
        json!({"kept": 3, "skipped": 1, "unknown_tenants": ["nobody"]})
    );
    let preview = |host: &'static str, token: String| {
        let router = router.clone();
        async move {
            oneshot(
                &router,
                on_host(
                    host,
                    Method::POST,
                    "/_netacl/v1/network-acls/preview",
                    &token,
                    Some(json!({"changes": [{"op": "create",
                                             "network_acl": acl_body(5, "10.0.0.0/8")}]})),
                ),
            )
            .await
        }
    };
    let answer = preview("beta.test", beta.clone()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["sample"], json!({"edges": 1, "requests": 2}));
    assert_eq!(answer.body["changed"], 2);
    let answer = preview("acme.test", acme.clone()).await;
    assert_eq!(answer.body["sample"], json!({"edges": 1, "requests": 1}));
    assert_eq!(
        answer.body["examples"],
        json!([]),
        "192.0.2.1 stays blocked"
    );
    let bad = json!({"edge": "edge-1", "tenants": {"acme": [{"client_ip": "not an address"}]}});
    let answer = post(SAMPLE, Some(OPERATOR), bad).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert!(answer.body["message"]
        .as_str()
        .expect("message")
        .ends_with("on property tenants.acme[0]."));

    // beta deleted: its reports are skipped, and beta created again has nothing of them.
    let deleted = oneshot(
        &router,
        on_host(
            "whatever.test",
            Method::DELETE,
            "/_netacl/v1/tenants/beta",
            OPERATOR,
            None,
        ),
    )
    .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let late = json!({"edge": "edge-1", "tenants": {"beta": [summary(&rule_ids[1], 1, 4)]}});
    let answer = post(SUMMARIES, Some(OPERATOR), late.clone()).await;
    assert_eq!(
        answer.body,
        json!({"recorded": 0, "skipped": 1, "unknown_tenants": ["beta"]})
    );
    let answer = post(
        SAMPLE,
        Some(OPERATOR),
        json!({"edge": "edge-1", "tenants": {"beta": [{"client_ip": "10.0.0.9"}]}}),
    )
    .await;
    assert_eq!(answer.body["unknown_tenants"], json!(["beta"]));
    let beta = operator_tenant(&router, "beta", "beta.test").await;
    assert!(summaries_of("beta.test", beta.clone()).await.is_empty());
    // Its rule-set version is 0: the old beta's version-1 counts are not its own.
    let answer = post(SUMMARIES, Some(OPERATOR), late).await;
    assert_eq!(answer.body["recorded"], 0, "{}", answer.body);
    assert!(summaries_of("beta.test", beta.clone()).await.is_empty());
    let answer = preview("beta.test", beta).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(answer.body["errorCode"], "no_traffic_sample");
}

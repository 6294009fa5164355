//! Rule analysis and impact preview through HTTP (`oneshot`): `POST
//! /_netacl/v1/network-acls/analyze`, `POST /_netacl/v1/network-acls/preview` and the
//! `Netacl-Findings` header of the ACL write answers.

use crate::support::{api, scoped_token, Answer, Api};
use http::{Method, StatusCode};
use serde_json::{json, Value};

const ANALYZE: &str = "/_netacl/v1/network-acls/analyze";
const PREVIEW: &str = "/_netacl/v1/network-acls/preview";

fn acl(priority: u64, action: &str, cidr: &str) -> Value {
    json!({
        "description": format!("{action} {cidr}"),
        "active": true,
        "priority": priority,
        "rule": {"action": {action: true}, "scope": "tenant", "match": {"ipv4_cidrs": [cidr]}}
    })
}

async fn create(api: &Api, body: Value) -> Answer {
    let answer = api
        .send(Method::POST, "/api/v2/network-acls", Some(body))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer
}

fn findings_header(answer: &Answer) -> Option<String> {
    answer
        .headers
        .get("netacl-findings")
        .map(|v| v.to_str().expect("ASCII").to_owned())
}

#[tokio::test]
async fn the_live_rules_are_analysed_and_writes_carry_their_findings() {
    let api = api().await;
    let first = create(&api, acl(10, "block", "10.0.0.0/8")).await;
    assert_eq!(findings_header(&first), None);
    let id1 = first.body["id"].as_str().expect("id").to_owned();
    let second = create(&api, acl(20, "allow", "10.1.0.0/16")).await;
    let id2 = second.body["id"].as_str().expect("id").to_owned();
    assert_eq!(
        findings_header(&second).as_deref(),
        Some(format!("shadowed by {id1}; conflict with {id1}").as_str())
    );
    // The body is the record as ever.
    let stored = api.get_ok(&format!("/api/v2/network-acls/{id2}")).await;
    assert_eq!(second.body, stored);

    let answer = api.send(Method::POST, ANALYZE, Some(json!({}))).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        answer.body,
        json!({"findings": [
            {"kind": "shadowed", "rule_id": id2, "by": [id1],
             "detail": format!("never decides: {id1} decides every request it matches")},
            {"kind": "conflict", "rule_id": id2, "by": [id1],
             "detail": format!("{id1} (block) decides requests this rule (allow) also matches: their order decides")}
        ], "undecided": []})
    );

    // A PATCH that moves the allow rule first: the block rule is no longer shadowing it, the
    // two still conflict (now the other way round).
    let moved = api
        .send(
            Method::PATCH,
            &format!("/api/v2/network-acls/{id2}"),
            Some(json!({"priority": 5})),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    assert_eq!(
        findings_header(&moved).as_deref(),
        Some(format!("conflict with {id1}").as_str())
    );
    // A PUT that makes the block rule redundant with nothing: it stays alone in its network.
    let replaced = api
        .send(
            Method::PUT,
            &format!("/api/v2/network-acls/{id1}"),
            Some(acl(10, "block", "192.0.2.0/24")),
        )
        .await;
    assert_eq!(replaced.status, StatusCode::OK, "{}", replaced.body);
    assert_eq!(findings_header(&replaced), None);
}

#[tokio::test]
async fn a_proposed_rule_set_is_analysed_and_an_invalid_one_named_by_its_path() {
    let api = api().await;
    let rules = json!({"network_acls": [
        acl(1, "block", "10.0.0.0/8"),
        acl(2, "block", "10.0.0.0/16"),
    ]});
    let answer = api.send(Method::POST, ANALYZE, Some(rules)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["findings"][0]["kind"], "shadowed");
    assert_eq!(
        answer.body["findings"][0]["rule_id"],
        "acl_1111111111111111111113"
    );

    let bad =
        json!({"network_acls": [acl(1, "block", "10.0.0.0/8"), acl(2, "block", "10.0.0.256")]});
    let answer = api.send(Method::POST, ANALYZE, Some(bad)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    let message = answer.body["message"].as_str().expect("message");
    assert!(
        message.ends_with("on property network_acls[1].rule.match.ipv4_cidrs[0]."),
        "{message}"
    );
    let unknown = api
        .send(Method::POST, ANALYZE, Some(json!({"rules": []})))
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn analysis_and_preview_need_read_network_acls() {
    let api = api().await;
    let token = scoped_token(&api.service, "writer", &["create:network_acls"]);
    for path in [ANALYZE, PREVIEW] {
        let answer = api
            .send_as(&token, Method::POST, path, Some(json!({})))
            .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
    }
    let token = scoped_token(&api.service, "reader", &["read:network_acls"]);
    let answer = api
        .send_as(&token, Method::POST, ANALYZE, Some(json!({})))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn a_preview_counts_the_changed_decisions() {
    let api = api().await;
    let live = create(&api, acl(10, "block", "10.0.0.0/8")).await;
    let live_id = live.body["id"].as_str().expect("id").to_owned();
    let body = json!({
        "changes": [{"op": "create", "network_acl": acl(5, "allow", "10.1.0.0/16")}],
        "requests": [
            {"client_ip": "10.1.0.1"},
            {"client_ip": "10.2.0.1"},
            {"client_ip": "192.0.2.1", "path": "/api/v2/users"},
            {"client_ip": "10.1.200.7"}
        ]
    });
    let answer = api.send(Method::POST, PREVIEW, Some(body)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let created = "acl_1111111111111111111112";
    let mut by_rule = vec![
        json!({"rule_id": created, "gained": 2, "lost": 0}),
        json!({"rule_id": live_id, "gained": 0, "lost": 2}),
    ];
    by_rule.sort_by(|a, b| a["rule_id"].as_str().cmp(&b["rule_id"].as_str()));
    assert_eq!(answer.body["requests"], 4);
    assert_eq!(answer.body["changed"], 2);
    assert_eq!(
        answer.body["transitions"],
        json!([{"from": {"action": "block"}, "to": {"action": "allow"}, "count": 2}])
    );
    assert_eq!(answer.body["by_rule"], json!(by_rule));
    assert_eq!(
        answer.body["examples"].as_array().expect("examples").len(),
        2
    );
    assert_eq!(
        answer.body["examples"][0],
        json!({
            "request": {"client_ip": "10.1.0.1"},
            "from": {"action": "block", "rule_id": live_id, "monitored": []},
            "to": {"action": "allow", "rule_id": created, "monitored": []}
        })
    );

    // Delete, update and replace of the live rule, in memory only.
    let body = json!({
        "changes": [
            {"op": "update", "id": live_id, "network_acl": {"rule": {
                "action": {"redirect": true, "redirect_uri": "https://example.com/"},
                "scope": "tenant", "match": {"ipv4_cidrs": ["10.0.0.0/8"]}}}}
        ],
        "requests": [{"client_ip": "10.9.9.9"}, {"client_ip": "11.0.0.1"}]
    });
    let answer = api.send(Method::POST, PREVIEW, Some(body)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        answer.body["transitions"],
        json!([{"from": {"action": "block"},
                "to": {"action": "redirect", "redirect_uri": "https://example.com/"}, "count": 1}])
    );
    let body = json!({
        "changes": [{"op": "delete", "id": live_id}],
        "requests": [{"client_ip": "10.9.9.9"}]
    });
    let answer = api.send(Method::POST, PREVIEW, Some(body)).await;
    assert_eq!(
        answer.body["transitions"],
        json!([{"from": {"action": "block"}, "to": {"action": "none"}, "count": 1}])
    );
    // Nothing was applied.
    let list = api.get_ok("/api/v2/network-acls").await;
    assert_eq!(list.as_array().expect("list").len(), 1);
    assert_eq!(list[0], live.body);
}

#[tokio::test]
async fn an_invalid_proposed_rule_is_the_create_message_with_the_path_prefixed() {
    let api = api().await;
    let bad = acl(5, "block", "10.0.0.0/33");
    let created = api
        .send(Method::POST, "/api/v2/network-acls", Some(bad.clone()))
        .await;
    assert_eq!(created.status, StatusCode::BAD_REQUEST);
    let message = created.body["message"].as_str().expect("message");
    let body = json!({"changes": [{"op": "create", "network_acl": bad}], "requests": []});
    let answer = api.send(Method::POST, PREVIEW, Some(body)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(
        answer.body["message"].as_str().expect("message"),
        message.replace(
            "on property rule.",
            "on property changes[0].network_acl.rule."
        )
    );
    assert!(
        message.contains("on property rule.match.ipv4_cidrs[0]."),
        "{message}"
    );

    // An unknown id is a 404; a malformed one, a missing op, a bad request line are 400s.
    let unknown =
        json!({"changes": [{"op": "delete", "id": "acl_2222222222222222222222"}], "requests": []});
    let answer = api.send(Method::POST, PREVIEW, Some(unknown)).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    for (body, path) in [
        (
            json!({"changes": [{"op": "delete", "id": "nope"}], "requests": []}),
            "changes[0].id",
        ),
        (
            json!({"changes": [{"id": "nope"}], "requests": []}),
            "changes[0]",
        ),
        (
            json!({"changes": [], "requests": [{"client_ip": "x"}]}),
            "requests[0]",
        ),
        (
            json!({"changes": [], "requests": [{"bogus": 1}]}),
            "requests[0]",
        ),
    ] {
        let answer = api.send(Method::POST, PREVIEW, Some(body)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
        let message = answer.body["message"].as_str().expect("message");
        assert!(
            message.contains(&format!("on property {path}.")),
            "{message}"
        );
    }
    // Without requests and without any edge's traffic sample: a 400 saying so.
    let answer = api
        .send(Method::POST, PREVIEW, Some(json!({"changes": []})))
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
}

#[tokio::test]
async fn a_rule_set_too_large_to_analyse_in_the_api_is_refused() {
    let api = api().await;
    let acls: Vec<Value> = (0..1_001u64)
        .map(|i| {
            acl(
                i % 100 + 1,
                "block",
                &format!("10.{}.{}.0/24", i / 256, i % 256),
            )
        })
        .collect();
    // 1,000 rules (the bound) are analysed; 1,001 are refused.
    let answer = api
        .send(
            Method::POST,
            ANALYZE,
            Some(json!({ "network_acls": acls[..1_000] })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["undecided"], json!([]), "{}", answer.body);
    let answer = api
        .send(Method::POST, ANALYZE, Some(json!({ "network_acls": acls })))
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(
        answer.body["errorCode"], "too_many_rules",
        "{}",
        answer.body
    );
    assert_eq!(
        answer.body["message"], "The analysis takes at most 1000 rules; this rule set has 1001.",
        "{}",
        answer.body
    );
}

const SAMPLE: &str = "/_netacl/v1/edge/sample";

#[tokio::test]
async fn without_requests_the_preview_replays_the_edges_samples() {
    let api = api().await;
    let change =
        json!({"changes": [{"op": "create", "network_acl": acl(5, "block", "10.1.0.0/16")}]});
    // No edge has a sample yet: a 400 that says so.
    let answer = api.send(Method::POST, PREVIEW, Some(change.clone())).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(
        answer.body["errorCode"], "no_traffic_sample",
        "{}",
        answer.body
    );

    // Two remote edges (two clients) post their samples; an edge's second post replaces its
    // first.
    let edge_a = scoped_token(&api.service, "edge-a", &["create:edge_summaries"]);
    let edge_b = scoped_token(&api.service, "edge-b", &["create:edge_summaries"]);
    let post = |token: String, requests: Value| {
        let api = &api;
        async move {
            api.send_as(
                &token,
                Method::POST,
                SAMPLE,
                Some(json!({"requests": requests})),
            )
            .await
        }
    };
    let first = post(
        edge_a.clone(),
        json!([{"client_ip": "10.1.0.1", "scope": "authentication"}, {"client_ip": "10.2.0.1"}]),
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body, json!({"kept": 2}));
    let answer = post(
        edge_b.clone(),
        json!([{"client_ip": "10.1.0.9", "user_agent": "b/1"}]),
    )
    .await;
    assert_eq!(answer.body, json!({"kept": 1}));
    let answer = post(
        edge_a.clone(),
        json!([{"client_ip": "10.1.0.2", "path": "/api/v2/users"}, {"client_ip": "192.0.2.1"}]),
    )
    .await;
    assert_eq!(answer.body, json!({"kept": 2}));
    // The edge in this process answers for the default tenant.
    api.service
        .set_edge_sample_source(std::sync::Arc::new(|tenant: &str| {
            (tenant == "default").then(|| {
                vec![netacl_eval::RequestInput {
                    client_ip: Some("10.1.7.7".into()),
                    ..Default::default()
                }]
            })
        }));

    let answer = api.send(Method::POST, PREVIEW, Some(change)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["sample"], json!({"edges": 3, "requests": 4}));
    assert_eq!(answer.body["requests"], 4);
    assert_eq!(
        answer.body["changed"], 3,
        "10.1.7.7, 10.1.0.2 and 10.1.0.9: not 10.1.0.1 (replaced)"
    );
    assert_eq!(
        answer.body["transitions"],
        json!([{"from": {"action": "none"}, "to": {"action": "block"}, "count": 3}])
    );
    // Requests given: they are replayed, not the samples.
    let body = json!({"changes": [], "requests": [{"client_ip": "10.1.0.1"}]});
    let answer = api.send(Method::POST, PREVIEW, Some(body)).await;
    assert_eq!(answer.body["requests"], 1);
    assert!(answer.body.get("sample").is_none(), "{}", answer.body);
}

#[tokio::test]
async fn a_posted_sample_is_checked_member_by_member_and_changes_nothing_when_refused() {
    let api = api().await;
    let edge = scoped_token(&api.service, "edge", &["create:edge_summaries"]);
    for (body, path) in [
        (json!({"requests": [{"client_ip": "x"}]}), "requests[0]"),
        (
            json!({"requests": [{"path": "/ok"}, {"bogus": 1}]}),
            "requests[1]",
        ),
        (
            json!({"requests": [{}, {"path": "/%%361pi"}]}),
            "requests[1]",
        ),
        (json!({"requests": {}}), "requests"),
    ] {
        let answer = api.send_as(&edge, Method::POST, SAMPLE, Some(body)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
        let message = answer.body["message"].as_str().expect("message");
        assert!(
            message.contains(&format!("on property {path}.")),
            "{message}"
        );
    }
    let answer = api
        .send_as(
            &edge,
            Method::POST,
            SAMPLE,
            Some(json!({"requests": [], "edge": "x"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    let too_many: Vec<Value> = (0..10_001).map(|_| json!({})).collect();
    let answer = api
        .send_as(
            &edge,
            Method::POST,
            SAMPLE,
            Some(json!({"requests": too_many})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert!(
        answer.body["message"]
            .as_str()
            .expect("message")
            .contains("maximum 10000"),
        "{}",
        answer.body
    );
    // A client without create:edge_summaries may not post one.
    let reader = scoped_token(&api.service, "reader", &["read:network_acls"]);
    let answer = api
        .send_as(
            &reader,
            Method::POST,
            SAMPLE,
            Some(json!({"requests": [{}]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    // Nothing was kept: the preview still has no sample.
    let answer = api
        .send(Method::POST, PREVIEW, Some(json!({"changes": []})))
        .await;
    assert_eq!(
        answer.body["errorCode"], "no_traffic_sample",
        "{}",
        answer.body
    );
    // Samples are not management writes: the tenant's log holds none of these posts.
    let answer = api
        .send_as(&edge, Method::POST, SAMPLE, Some(json!({"requests": [{}]})))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let logs = api.get_ok("/api/v2/logs").await;
    assert!(
        !logs.to_string().contains("/_netacl/v1/edge/sample"),
        "{logs}"
    );
}

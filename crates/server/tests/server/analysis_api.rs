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

/// The rule set made to be costly to analyse (`netacl_eval::synthetic::overlapping`): the
/// CIDRs, ASNs and countries of every rule overlap every other rule's.
fn overlapping(rules: usize) -> Value {
    json!({ "network_acls": netacl_eval::synthetic::overlapping(rules, 0x2828) })
}

/// 1,000 rules whose CIDRs, ASNs and countries all overlap take minutes of CPU to analyse
/// unbounded. Through the API the analysis stops at its budget (or its deadline, 10 s by
/// default): 200 with the findings it proved and the rules it left open undecided for the
/// `budget`, in the usual shape. (Without the budget the answer takes minutes: the timeout
/// below fails the test long before.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adversarial_analysis_answers_within_its_deadline_with_rules_undecided_for_budget() {
    let api = api().await;
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        api.send(Method::POST, ANALYZE, Some(overlapping(1_000))),
    )
    .await
    .expect("the analysis answers long before the minutes it takes unbounded");
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let body = answer.body.as_object().expect("object");
    assert_eq!(
        body.keys().collect::<Vec<_>>(),
        ["findings", "undecided"],
        "the usual shape"
    );
    let undecided = body["undecided"].as_array().expect("undecided");
    let budget = undecided.iter().filter(|u| u["reason"] == "budget").count();
    assert!(budget > 100, "{budget} rules undecided for the budget");
    for u in undecided {
        assert_eq!(u.as_object().expect("object").len(), 2, "{u}");
    }
    // What it proved before stopping is reported.
    assert!(!body["findings"].as_array().expect("findings").is_empty());
}

/// A request body that never arrives.
fn pending_body() -> axum::body::Body {
    axum::body::Body::from_stream(futures_util::stream::pending::<
        Result<bytes::Bytes, std::io::Error>,
    >())
}

/// At most one expensive request of a tenant runs at once (`with_concurrency(1, 4)`): while an
/// analysis of the default tenant runs, its other analyses, dry runs and list uploads get 429
/// `too_many_requests` with `Retry-After` and the rate-limit headers, at once (before their
/// body is read: an upload whose body never comes is refused), while another tenant's are
/// served. When the client of the long analysis goes away (its request dropped), the analysis
/// stops and its permit is released: the tenant's requests are served again (with no budget
/// and a deadline of ten minutes, only the cancellation can end it that soon).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expensive_requests_are_limited_per_tenant_and_a_dropped_analysis_stops() {
    use crate::support::{oneshot, start_in, DOMAIN};
    use axum::body::Body;
    use http::Request;
    use netacl_server::rate_limit::RateLimitConfig;
    use netacl_server::{OperatorToken, WorkLimits};
    use std::time::{Duration, Instant};

    const OPERATOR: &str = "operator-token-of-the-expensive-requests-test";
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = WorkLimits::new()
        .with_analysis(u64::MAX, Duration::from_secs(600))
        .with_concurrency(1, 4);
    let config = crate::support::config()
        .with_operator_token(OperatorToken::new(OPERATOR.into()).expect("operator token"))
        .with_rate_limit(RateLimitConfig {
            burst: 10_000,
            per_second: 10_000.0,
        })
        .with_work_limits(limits);
    let (service, token) = start_in(dir.path(), config).await;
    let router = service.router();
    let on = |host: &str, token: &str, method: &str, uri: &str, body: Body| {
        Request::builder()
            .method(method)
            .uri(uri)
            .header("host", host)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(body)
            .expect("request")
    };
    let json_body = |value: Value| Body::from(value.to_string());

    // A second tenant and a token of its client.
    let acme = oneshot(
        &router,
        on(
            "any.test",
            OPERATOR,
            "POST",
            "/_netacl/v1/tenants",
            json_body(json!({"tenant": "acme", "domains": ["acme.test"]})),
        ),
    )
    .await;
    assert_eq!(acme.status, StatusCode::CREATED, "{}", acme.body);
    let issued = oneshot(
        &router,
        Request::post("/oauth/token")
            .header("host", "acme.test")
            .header("content-type", "application/json")
            .body(json_body(json!({
                "grant_type": "client_credentials",
                "client_id": acme.body["client_id"], "client_secret": acme.body["client_secret"],
                "audience": "https://acme.test/api/v2/"})))
            .expect("request"),
    )
    .await;
    assert_eq!(issued.status, StatusCode::OK, "{}", issued.body);
    let acme_token = issued.body["access_token"]
        .as_str()
        .expect("token")
        .to_owned();

    // The long analysis, on a task of its own: its client.
    let overlapping_body = overlapping(1_000);
    let spawn_long = || {
        let router = router.clone();
        let request = on(
            DOMAIN,
            &token,
            "POST",
            ANALYZE,
            json_body(overlapping_body.clone()),
        );
        tokio::spawn(async move { oneshot(&router, request).await })
    };
    let mut long = spawn_long();
    // Until it holds its permit the tenant's small analyses are answered; then refused. A small
    // one may hold the tenant's one place at the moment the long one asks: then the long one is
    // the one refused (429), and it is sent again.
    let small = || on(DOMAIN, &token, "POST", ANALYZE, json_body(json!({})));
    let start = Instant::now();
    let refused = loop {
        let answer = oneshot(&router, small()).await;
        if answer.status == StatusCode::TOO_MANY_REQUESTS {
            break answer;
        }
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        if long.is_finished() {
            let lost = long.await.expect("the long analysis's task");
            assert_eq!(
                lost.status,
                StatusCode::TOO_MANY_REQUESTS,
                "the long analysis ended before it was refused or stopped: {}",
                lost.body
            );
            long = spawn_long();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never refused");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        refused.body["errorCode"], "too_many_requests",
        "{}",
        refused.body
    );
    assert_eq!(refused.body["statusCode"], 429);
    assert!(refused.headers.contains_key("retry-after"));
    refused.assert_rate_limit_headers();
    // A dry run and a list upload of the tenant too, the upload before its body is read.
    let dry_run = oneshot(
        &router,
        on(
            DOMAIN,
            &token,
            "POST",
            "/_netacl/v1/dry-run",
            json_body(json!({"request": {"client_ip": "192.0.2.1"}})),
        ),
    )
    .await;
    assert_eq!(
        dry_run.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        dry_run.body
    );
    let upload = tokio::time::timeout(
        Duration::from_secs(30),
        oneshot(
            &router,
            on(
                DOMAIN,
                &token,
                "PUT",
                "/_netacl/v1/managed-lists/auth0.tor",
                pending_body(),
            ),
        ),
    )
    .await
    .expect("refused without waiting for the body");
    assert_eq!(
        upload.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        upload.body
    );
    assert!(upload.headers.contains_key("retry-after"));
    // Another tenant is served meanwhile.
    for (method, uri, body) in [
        ("POST", ANALYZE, json!({})),
        (
            "PUT",
            "/_netacl/v1/managed-lists/auth0.tor",
            json!({"items": ["192.0.2.0/24"]}),
        ),
    ] {
        let theirs = oneshot(
            &router,
            on("acme.test", &acme_token, method, uri, json_body(body)),
        )
        .await;
        assert_eq!(theirs.status, StatusCode::OK, "{uri}: {}", theirs.body);
    }
    assert!(!long.is_finished(), "the long analysis still runs");

    // Its client goes away: the request is dropped, the analysis stops, the permit is
    // released and the tenant's small analyses are answered again.
    long.abort();
    let start = Instant::now();
    loop {
        let answer = oneshot(&router, small()).await;
        if answer.status == StatusCode::OK {
            break;
        }
        assert_eq!(
            answer.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            answer.body
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the dropped analysis still holds its permit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

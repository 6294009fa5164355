//! The admin API through the router (`oneshot`, no socket): every status code and body shape of
//! the compat doc for network ACLs, authentication, rate limits, the write path's guarantees and
//! netacl's own endpoints.
mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use netacl_model::{AclId, Limits, NetworkAclSpec, Timestamp};
use netacl_server::rate_limit::RateLimitConfig;
use netacl_server::{AdminService, BootstrapClient};
use netacl_store::SqliteStore;
use serde_json::{json, Value};
use support::{
    api, api_with, config, scoped_token, start_in, token_for, Answer, Api, AUDIENCE, CLIENT, SECRET,
};
use tower::ServiceExt;

impl Api {
    async fn create(&self, body: Value) -> Value {
        let answer = self
            .send(Method::POST, "/api/v2/network-acls", Some(body))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        answer.body
    }

    async fn list(&self) -> Value {
        let answer = self.send(Method::GET, "/api/v2/network-acls", None).await;
        assert_eq!(answer.status, StatusCode::OK);
        answer.body
    }

    async fn dry_run(&self, request: Value) -> Value {
        let answer = self
            .send(
                Method::POST,
                "/_netacl/v1/dry-run",
                Some(json!({"request": request})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        answer.body
    }
}

fn acl_body(priority: u64, cidr: &str) -> Value {
    json!({
        "description": format!("block {cidr}"),
        "active": true,
        "priority": priority,
        "rule": {"action": {"block": true}, "scope": "tenant", "match": {"ipv4_cidrs": [cidr]}}
    })
}

/// The URI of a stored network ACL.
fn acl_uri(record: &Value) -> String {
    format!(
        "/api/v2/network-acls/{}",
        record["id"].as_str().expect("id")
    )
}

fn assert_error(answer: &Answer, status: u16, code: Option<&str>) {
    assert_eq!(answer.status.as_u16(), status, "{}", answer.body);
    assert_eq!(
        answer
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json; charset=utf-8")
    );
    let body = answer.body.as_object().expect("error object");
    assert_eq!(body["statusCode"], json!(status));
    assert_eq!(
        body["error"],
        json!(StatusCode::from_u16(status)
            .expect("status")
            .canonical_reason()
            .expect("reason"))
    );
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(
        body.get("errorCode").and_then(Value::as_str),
        code,
        "{}",
        answer.body
    );
}

fn is_millis_timestamp(value: &Value) -> bool {
    value.as_str().and_then(Timestamp::parse).is_some()
}

#[tokio::test]
async fn create_answers_201_with_the_stored_record() {
    let api = api().await;
    let body = acl_body(10, "198.51.100.0/24");
    let created = api.create(body.clone()).await;
    let id = created["id"].as_str().expect("id");
    assert!(AclId::parse(id).is_some(), "{id}");
    assert!(is_millis_timestamp(&created["created_at"]));
    assert_eq!(created["created_at"], created["updated_at"]);
    for field in ["description", "active", "priority", "rule"] {
        assert_eq!(created[field], body[field], "{field}");
    }
    // The default priority is 50 and is returned.
    let mut no_priority = acl_body(1, "203.0.113.0/24");
    no_priority
        .as_object_mut()
        .expect("object")
        .remove("priority");
    assert_eq!(api.create(no_priority).await["priority"], json!(50));

    let got = api
        .send(Method::GET, &format!("/api/v2/network-acls/{id}"), None)
        .await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body, created);
    assert_eq!(api.list().await.as_array().expect("array").len(), 2);
}

#[tokio::test]
async fn ids_are_distinct_and_well_formed() {
    let api = api().await;
    let mut ids = std::collections::HashSet::new();
    for priority in 1..=12 {
        let created = api.create(acl_body(priority, "192.0.2.1")).await;
        let id = created["id"].as_str().expect("id").to_owned();
        assert!(AclId::parse(&id).is_some());
        assert!(ids.insert(id));
    }
}

#[tokio::test]
async fn a_taken_priority_is_409_and_writes_nothing() {
    let api = api().await;
    api.create(acl_body(10, "198.51.100.0/24")).await;
    let before = api.list().await;
    let answer = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(10, "192.0.2.0/24")),
        )
        .await;
    assert_error(&answer, 409, Some("conflict"));
    assert_eq!(api.list().await, before);
    let status = api.send(Method::GET, "/_netacl/v1/status", None).await;
    assert_eq!(status.body["version"], json!(1));
}

#[tokio::test]
async fn invalid_bodies_are_400_with_the_models_message() {
    let api = api().await;
    let cases = [
        json!({"description": "x", "active": true,
               "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [1, 1]}}}),
        json!({"description": "x", "active": true, "extra": 1,
               "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [1]}}}),
        json!({"description": "x", "active": "yes",
               "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [1]}}}),
        json!({"description": "x", "active": true, "priority": 101,
               "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [1]}}}),
        json!({"description": "x", "active": true,
               "rule": {"action": {"block": false}, "scope": "tenant", "match": {"asns": [1]}}}),
        json!({"active": true,
               "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [1]}}}),
        json!([1, 2]),
    ];
    for body in cases {
        let expected = NetworkAclSpec::from_json(&body, &Limits::default())
            .expect_err("invalid")
            .to_string();
        let answer = api
            .send(Method::POST, "/api/v2/network-acls", Some(body.clone()))
            .await;
        assert_error(&answer, 400, Some("invalid_body"));
        assert_eq!(answer.body["message"], json!(expected), "{body}");
        assert!(expected.starts_with("Payload validation error:"));
    }
    assert_eq!(api.list().await, json!([]));
}

#[tokio::test]
async fn malformed_json_and_other_content_types_are_refused() {
    let api = api().await;
    let uri = "/api/v2/network-acls";
    let answer = api
        .raw(
            Method::POST,
            uri,
            Some("application/json"),
            "{\"description\": ",
        )
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
    assert!(answer.body["message"]
        .as_str()
        .expect("m")
        .starts_with("Payload validation error:"));
    let answer = api
        .raw(Method::POST, uri, Some("application/json"), "")
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
    let answer = api
        .raw(Method::POST, uri, Some("text/plain"), "hello")
        .await;
    assert_error(&answer, 415, Some("unsupported_media_type"));
    let answer = api
        .raw(
            Method::POST,
            uri,
            Some("multipart/form-data; boundary=x"),
            "--x--",
        )
        .await;
    assert_error(&answer, 415, Some("unsupported_media_type"));
    // A charset parameter is fine.
    let answer = api
        .raw(
            Method::POST,
            uri,
            Some("application/json; charset=utf-8"),
            &acl_body(3, "192.0.2.1").to_string(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED);
}

#[tokio::test]
async fn form_bodies_carry_the_nested_rule() {
    let api = api().await;
    let uri = "/api/v2/network-acls";
    let form = "application/x-www-form-urlencoded";
    let bracketed = "description=from+a+form&active=true&priority=20\
        &rule%5Baction%5D%5Bblock%5D=true&rule%5Bscope%5D=management\
        &rule%5Bmatch%5D%5Bipv4_cidrs%5D%5B%5D=192.0.2.0%2F24\
        &rule%5Bmatch%5D%5Bipv4_cidrs%5D%5B%5D=198.51.100.7\
        &rule%5Bnot_match%5D%5Basns%5D%5B%5D=64500";
    let answer = api.raw(Method::POST, uri, Some(form), bracketed).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(answer.body["description"], json!("from a form"));
    assert_eq!(answer.body["active"], json!(true));
    assert_eq!(answer.body["priority"], json!(20));
    assert_eq!(
        answer.body["rule"],
        json!({"action": {"block": true}, "scope": "management",
               "match": {"ipv4_cidrs": ["192.0.2.0/24", "198.51.100.7"]},
               "not_match": {"asns": [64500]}})
    );

    let rule =
        json!({"action": {"log": true}, "scope": "tenant", "match": {"geo_country_codes": ["NL"]}});
    let with_json: String = serde_urlencoded::to_string([
        ("description", "rule as JSON text"),
        ("active", "false"),
        ("priority", "21"),
        ("rule", &rule.to_string()),
    ])
    .expect("form");
    let answer = api.raw(Method::POST, uri, Some(form), &with_json).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(answer.body["rule"], rule);
    assert_eq!(answer.body["active"], json!(false));

    // A form PATCH.
    let id = answer.body["id"].as_str().expect("id").to_owned();
    let answer = api
        .raw(
            Method::PATCH,
            &format!("{uri}/{id}"),
            Some(form),
            "active=true&description=on",
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        (
            answer.body["active"].clone(),
            answer.body["description"].clone()
        ),
        (json!(true), json!("on"))
    );

    // Coercion is by position: a non-boolean `active` is reported by the validator.
    let answer = api
        .raw(
            Method::POST,
            uri,
            Some(form),
            "description=x&active=yes&rule=%7B%7D",
        )
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
    assert!(
        answer.body["message"]
            .as_str()
            .expect("m")
            .contains("active"),
        "{}",
        answer.body
    );
    let answer = api
        .raw(Method::POST, uri, Some(form), "description=a&description=b")
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let api = api_with(config().with_body_limit(512)).await;
    let mut body = acl_body(5, "192.0.2.1");
    body["description"] = json!("x".repeat(600));
    let answer = api
        .send(Method::POST, "/api/v2/network-acls", Some(body.clone()))
        .await;
    assert_error(&answer, 413, Some("payload_too_large"));
    // Also refused up front by a declared Content-Length (the first request had none).
    let text = body.to_string();
    let request = Request::post("/api/v2/network-acls")
        .header("authorization", format!("Bearer {}", api.token))
        .header("content-type", "application/json")
        .header("content-length", text.len().to_string())
        .body(Body::from(text))
        .expect("request");
    let answer = api.call(request).await;
    assert_error(&answer, 413, Some("payload_too_large"));
    assert_eq!(api.list().await, json!([]));
}

#[tokio::test]
async fn path_ids_are_checked_and_decoded() {
    let api = api().await;
    let created = api.create(acl_body(10, "198.51.100.0/24")).await;
    let id = created["id"].as_str().expect("id");
    for bad in ["nope", "acl_0000000000000000000000", "acl_short", "acl_%ZZ"] {
        for method in [Method::GET, Method::PUT, Method::PATCH, Method::DELETE] {
            let body = (method == Method::PUT || method == Method::PATCH)
                .then(|| acl_body(11, "192.0.2.1"));
            let answer = api
                .send(method.clone(), &format!("/api/v2/network-acls/{bad}"), body)
                .await;
            assert_error(&answer, 400, Some("invalid_uri"));
            assert!(answer.body["message"].as_str().expect("m").contains("id"));
        }
    }
    let unknown = AclId::from_random(42);
    for method in [Method::GET, Method::PUT, Method::PATCH, Method::DELETE] {
        let body =
            (method == Method::PUT || method == Method::PATCH).then(|| acl_body(11, "192.0.2.1"));
        let answer = api
            .send(method, &format!("/api/v2/network-acls/{unknown}"), body)
            .await;
        assert_error(&answer, 404, Some("inexistent_network_acl"));
    }
    // Percent-encoded path parameters are decoded before use.
    let encoded = id.replacen('_', "%5F", 1);
    let answer = api
        .send(
            Method::GET,
            &format!("/api/v2/network-acls/{encoded}"),
            None,
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, created);
    // Operations on one record take no query parameters.
    let answer = api
        .send(
            Method::GET,
            &format!("/api/v2/network-acls/{id}?fields=id"),
            None,
        )
        .await;
    assert_error(&answer, 400, Some("invalid_query_string"));
}

#[tokio::test]
async fn put_replaces_and_keeps_created_at() {
    let api = api().await;
    let created = api.create(acl_body(10, "198.51.100.0/24")).await;
    let other = api.create(acl_body(20, "203.0.113.0/24")).await;
    let id = created["id"].as_str().expect("id");
    let uri = format!("/api/v2/network-acls/{id}");
    tokio::time::sleep(Duration::from_millis(3)).await;

    let replacement = json!({
        "description": "replaced", "active": false,
        "rule": {"action": {"redirect": true, "redirect_uri": "https://example.com/blocked"},
                 "scope": "authentication", "not_match": {"geo_country_codes": ["US"]}}
    });
    let answer = api.send(Method::PUT, &uri, Some(replacement.clone())).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["id"], created["id"]);
    assert_eq!(answer.body["created_at"], created["created_at"]);
    assert!(answer.body["updated_at"].as_str() > created["updated_at"].as_str());
    assert_eq!(answer.body["rule"], replacement["rule"]);
    assert_eq!(answer.body["description"], json!("replaced"));
    // PUT is a whole replacement: the omitted priority is back to its default.
    assert_eq!(answer.body["priority"], json!(50));
    let stored = api.send(Method::GET, &uri, None).await;
    assert_eq!(stored.body, answer.body);

    // Onto another record's priority: 409, nothing changes.
    let before = api.list().await;
    let mut clash = replacement.clone();
    clash["priority"] = other["priority"].clone();
    let answer = api.send(Method::PUT, &uri, Some(clash)).await;
    assert_error(&answer, 409, Some("conflict"));
    assert_eq!(api.list().await, before);
    // Its own priority is fine.
    let mut same = replacement;
    same["priority"] = json!(50);
    assert_eq!(
        api.send(Method::PUT, &uri, Some(same)).await.status,
        StatusCode::OK
    );
    // An invalid replacement is a 400.
    let answer = api
        .send(Method::PUT, &uri, Some(json!({"description": "x"})))
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
}

#[tokio::test]
async fn patch_merges_top_level_fields() {
    let api = api().await;
    let created = api.create(acl_body(10, "198.51.100.0/24")).await;
    let uri = acl_uri(&created);

    let answer = api
        .send(Method::PATCH, &uri, Some(json!({"description": "renamed"})))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["description"], json!("renamed"));
    for field in ["active", "priority", "rule", "created_at", "id"] {
        assert_eq!(answer.body[field], created[field], "{field}");
    }
    // A given rule replaces the whole rule (no deep merge).
    let rule = json!({"action": {"allow": true}, "scope": "tenant", "match": {"asns": [64500]}});
    let answer = api
        .send(
            Method::PATCH,
            &uri,
            Some(json!({"rule": rule, "priority": 7})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["rule"], rule);
    assert_eq!(answer.body["priority"], json!(7));
    assert_eq!(answer.body["description"], json!("renamed"));

    for bad in [json!({}), json!({"unknown": 1}), json!({"active": "no"})] {
        let answer = api.send(Method::PATCH, &uri, Some(bad.clone())).await;
        assert_error(&answer, 400, Some("invalid_body"));
    }
    let other = api.create(acl_body(30, "192.0.2.1")).await;
    let answer = api
        .send(
            Method::PATCH,
            &uri,
            Some(json!({"priority": other["priority"]})),
        )
        .await;
    assert_error(&answer, 409, Some("conflict"));
}

#[tokio::test]
async fn delete_is_204_then_404() {
    let api = api().await;
    let created = api.create(acl_body(10, "198.51.100.0/24")).await;
    let uri = acl_uri(&created);
    let answer = api.send(Method::DELETE, &uri, None).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert!(answer.raw.is_empty());
    assert_error(
        &api.send(Method::GET, &uri, None).await,
        404,
        Some("inexistent_network_acl"),
    );
    assert_error(
        &api.send(Method::DELETE, &uri, None).await,
        404,
        Some("inexistent_network_acl"),
    );
    assert_eq!(api.list().await, json!([]));
    // The freed priority can be used again.
    api.create(acl_body(10, "192.0.2.1")).await;
}

#[tokio::test]
async fn list_pages_in_priority_order() {
    let api = api().await;
    let mut ids = Vec::new();
    for priority in [40, 10, 30, 20, 50] {
        let created = api.create(acl_body(priority, "192.0.2.1")).await;
        ids.push((priority, created["id"].as_str().expect("id").to_owned()));
    }
    ids.sort();
    let all = api.list().await;
    let listed: Vec<u64> = all
        .as_array()
        .expect("array")
        .iter()
        .map(|a| a["priority"].as_u64().expect("priority"))
        .collect();
    assert_eq!(listed, vec![10, 20, 30, 40, 50]);

    let mut seen = Vec::new();
    for page in 0..5 {
        let answer = api
            .send(
                Method::GET,
                &format!("/api/v2/network-acls?page={page}&per_page=2"),
                None,
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        let items = answer.body.as_array().expect("bare array").clone();
        let expected = [2, 2, 1, 0, 0][page];
        assert_eq!(items.len(), expected, "page {page}");
        seen.extend(
            items
                .iter()
                .map(|a| a["id"].as_str().expect("id").to_owned()),
        );
    }
    assert_eq!(
        seen,
        ids.iter().map(|(_, id)| id.clone()).collect::<Vec<_>>()
    );

    let answer = api
        .send(
            Method::GET,
            "/api/v2/network-acls?page=1&per_page=2&include_totals=true",
            None,
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["start"], json!(2));
    assert_eq!(answer.body["limit"], json!(2));
    assert_eq!(answer.body["total"], json!(5));
    assert_eq!(
        answer.body["network_acls"].as_array().expect("array").len(),
        2
    );
    assert_eq!(answer.body.as_object().expect("object").len(), 4);

    let answer = api
        .send(
            Method::GET,
            "/api/v2/network-acls?page=9&include_totals=true",
            None,
        )
        .await;
    assert_eq!(
        answer.body,
        json!({"network_acls": [], "start": 450, "limit": 50, "total": 5})
    );
    let answer = api
        .send(
            Method::GET,
            "/api/v2/network-acls?include_totals=false&per_page=0",
            None,
        )
        .await;
    assert_eq!(answer.body, json!([]));

    for bad in [
        "page=-1",
        "page=abc",
        "per_page=101",
        "per_page=1.5",
        "include_totals=maybe",
        "fields=id",
        "page=1&page=2",
    ] {
        let answer = api
            .send(Method::GET, &format!("/api/v2/network-acls?{bad}"), None)
            .await;
        assert_error(&answer, 400, Some("invalid_query_string"));
    }
}

#[tokio::test]
async fn authentication_and_scopes() {
    let api = api().await;
    let uri = "/api/v2/network-acls";
    // No token, a garbage token, another scheme: 401 with the error body and WWW-Authenticate.
    let none = api
        .call(Request::get(uri).body(Body::empty()).expect("request"))
        .await;
    assert_error(&none, 401, None);
    assert!(none.headers["www-authenticate"]
        .to_str()
        .expect("h")
        .starts_with("Bearer"));
    for header in ["Bearer not.a.token", "Basic dXNlcjpwYXNz", "Bearer"] {
        let answer = api
            .call(
                Request::get(uri)
                    .header("authorization", header)
                    .body(Body::empty())
                    .expect("request"),
            )
            .await;
        assert_error(&answer, 401, None);
        assert!(answer.headers["www-authenticate"]
            .to_str()
            .expect("h")
            .starts_with("Bearer"));
    }

    // Each operation requires its own scope.
    let reader = scoped_token(&api.service, "reader", &["read:network_acls"]);
    let lookalike = scoped_token(
        &api.service,
        "lookalike",
        &["create:network_aclsX", "read:network_acls"],
    );
    let created = api.create(acl_body(10, "192.0.2.1")).await;
    let one = format!("{uri}/{}", created["id"].as_str().expect("id"));
    assert_eq!(
        api.send_as(&reader, Method::GET, uri, None).await.status,
        StatusCode::OK
    );
    assert_eq!(
        api.send_as(&reader, Method::GET, &one, None).await.status,
        StatusCode::OK
    );
    let denied = [
        (
            Method::POST,
            uri.to_owned(),
            Some(acl_body(11, "192.0.2.1")),
            "create:network_acls",
        ),
        (
            Method::PUT,
            one.clone(),
            Some(acl_body(11, "192.0.2.1")),
            "update:network_acls",
        ),
        (
            Method::PATCH,
            one.clone(),
            Some(json!({"active": false})),
            "update:network_acls",
        ),
        (Method::DELETE, one.clone(), None, "delete:network_acls"),
    ];
    for (method, path, body, scope) in denied {
        for token in [&reader, &lookalike] {
            let answer = api
                .send_as(token, method.clone(), &path, body.clone())
                .await;
            assert_error(&answer, 403, Some("insufficient_scope"));
            assert_eq!(
                answer.body["message"],
                json!(format!("Insufficient scope, expected any of: {scope}"))
            );
        }
    }
    let writer = scoped_token(&api.service, "writer", &["create:network_acls"]);
    let answer = api.send_as(&writer, Method::GET, uri, None).await;
    assert_error(&answer, 403, Some("insufficient_scope"));
    assert_eq!(api.list().await.as_array().expect("array").len(), 1);
}

#[tokio::test]
async fn rate_limit_lets_exactly_the_burst_through() {
    let limited = config().with_rate_limit(RateLimitConfig {
        burst: 3,
        per_second: 0.01,
    });
    let api = api_with(limited).await;
    let mut resets = Vec::new();
    for expected_remaining in [2u32, 1, 0] {
        let answer = api.send(Method::GET, "/api/v2/network-acls", None).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.headers["x-ratelimit-limit"], "3");
        assert_eq!(
            answer.headers["x-ratelimit-remaining"],
            expected_remaining.to_string().as_str()
        );
        resets.push(
            answer.headers["x-ratelimit-reset"]
                .to_str()
                .expect("reset")
                .parse::<u64>()
                .expect("number"),
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(resets.iter().all(|r| *r >= now));
    let answer = api.send(Method::GET, "/api/v2/network-acls", None).await;
    assert_error(&answer, 429, Some("too_many_requests"));
    assert_eq!(answer.headers["x-ratelimit-remaining"], "0");
    assert!(
        answer.headers["retry-after"]
            .to_str()
            .expect("h")
            .parse::<u64>()
            .expect("n")
            >= 1
    );
    // The limit is per client: another client still has its burst.
    let other = scoped_token(&api.service, "other", &["read:network_acls"]);
    assert_eq!(
        api.send_as(&other, Method::GET, "/api/v2/network-acls", None)
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn every_api_response_carries_rate_limit_headers() {
    let limited = config().with_rate_limit(RateLimitConfig {
        burst: 1000,
        per_second: 100.0,
    });
    let api = api_with(limited).await;
    let created = api.create(acl_body(10, "192.0.2.1")).await;
    let one = acl_uri(&created);
    let reader = scoped_token(&api.service, "reader", &["read:network_acls"]);
    let answers = vec![
        api.send(Method::GET, "/api/v2/network-acls", None).await,
        api.send(Method::GET, &one, None).await,
        api.send(Method::GET, "/api/v2/network-acls/acl_bad", None)
            .await,
        api.send(
            Method::GET,
            &format!("/api/v2/network-acls/{}", AclId::from_random(1)),
            None,
        )
        .await,
        api.send(
            Method::POST,
            "/api/v2/network-acls",
            Some(acl_body(10, "192.0.2.1")),
        )
        .await,
        api.send(Method::POST, "/api/v2/network-acls", Some(json!({})))
            .await,
        api.send(Method::GET, "/api/v2/network-acls?bad=1", None)
            .await,
        api.send(Method::GET, "/api/v2/unknown-resource", None)
            .await,
        api.send(Method::POST, &one, None).await,
        api.send_as(&reader, Method::DELETE, &one, None).await,
        api.send_as("garbage", Method::GET, "/api/v2/network-acls", None)
            .await,
        api.send(Method::PATCH, &one, Some(json!({"active": false})))
            .await,
        api.send(Method::DELETE, &one, None).await,
    ];
    let statuses: Vec<u16> = answers.iter().map(|a| a.status.as_u16()).collect();
    assert_eq!(
        statuses,
        vec![200, 200, 400, 404, 409, 400, 400, 404, 405, 403, 401, 200, 204]
    );
    for answer in &answers {
        answer.assert_rate_limit_headers();
        if answer.status.is_client_error() {
            assert_error(
                answer,
                answer.status.as_u16(),
                answer.body.get("errorCode").and_then(Value::as_str),
            );
        }
    }
}

#[tokio::test]
async fn a_201_is_sent_only_after_the_engine_decides_with_the_new_rule() {
    let api = api().await;
    let request = json!({"client_ip": "198.51.100.7", "path": "/api/v2/users"});
    let before = api.dry_run(request.clone()).await;
    assert_eq!(before["outcome"]["action"], json!("none"));
    assert_eq!(before["version"], json!(0));
    for round in 0..5u64 {
        let created = api.create(acl_body(10 + round, "198.51.100.0/24")).await;
        let after = api.dry_run(request.clone()).await;
        assert_eq!(after["version"], json!(2 * round + 1));
        assert_eq!(after["outcome"]["action"], json!("block"));
        assert_eq!(after["outcome"]["rule_id"], created["id"]);
        let uri = acl_uri(&created);
        assert_eq!(
            api.send(Method::DELETE, &uri, None).await.status,
            StatusCode::NO_CONTENT
        );
        let gone = api.dry_run(request.clone()).await;
        assert_eq!(gone["outcome"]["action"], json!("none"));
        assert_eq!(gone["version"], json!(2 * round + 2));
    }
}

#[tokio::test]
async fn dry_run_against_a_rule_set_in_the_body() {
    let api = api().await;
    api.create(acl_body(10, "198.51.100.0/24")).await;
    let body = json!({
        "request": {"client_ip": "192.0.2.9", "user_agent": "curl/8.0", "scope": "authentication"},
        "network_acls": [
            {"description": "watch curl", "active": true, "priority": 1,
             "rule": {"action": {"log": true}, "scope": "tenant", "match": {"user_agents": ["curl/*"]}}},
            {"description": "send away", "active": true, "priority": 2,
             "rule": {"action": {"redirect": true, "redirect_uri": "https://example.com/"},
                      "scope": "authentication", "match": {"ipv4_cidrs": ["192.0.2.0/24"]}}}
        ]
    });
    let answer = api
        .send(Method::POST, "/_netacl/v1/dry-run", Some(body))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["source"], json!("body"));
    let outcome = &answer.body["outcome"];
    assert_eq!(outcome["action"], json!("redirect"));
    assert_eq!(outcome["redirect_uri"], json!("https://example.com/"));
    assert_eq!(outcome["rule_id"], json!(AclId::from_random(2).as_str()));
    assert_eq!(
        outcome["monitored"],
        json!([AclId::from_random(1).as_str()])
    );

    // Records (with ids) are accepted as well, and the live rules are untouched.
    let live = api.list().await;
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/dry-run",
            Some(json!({"request": {"client_ip": "198.51.100.1"}, "network_acls": live})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["outcome"]["rule_id"], live[0]["id"]);

    for bad in [
        json!({"request": {"client_ip": "not-an-ip"}}),
        json!({"request": {"unknown_signal": 1}}),
        json!({"request": {}, "extra": true}),
        json!({"network_acls": []}),
        json!({"request": {}, "network_acls": [{"description": "x"}]}),
    ] {
        let answer = api
            .send(Method::POST, "/_netacl/v1/dry-run", Some(bad.clone()))
            .await;
        assert_error(&answer, 400, Some("invalid_body"));
    }
    let reader = scoped_token(&api.service, "nobody", &["create:network_acls"]);
    let answer = api
        .send_as(
            &reader,
            Method::POST,
            "/_netacl/v1/dry-run",
            Some(json!({"request": {}})),
        )
        .await;
    assert_error(&answer, 403, Some("insufficient_scope"));
}

#[tokio::test]
async fn status_reports_the_live_policy() {
    let api = api().await;
    api.create(acl_body(10, "198.51.100.0/24")).await;
    let mut inactive = acl_body(11, "192.0.2.0/24");
    inactive["active"] = json!(false);
    api.create(inactive).await;
    let answer = api.send(Method::GET, "/_netacl/v1/status", None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["version"], json!(2));
    assert_eq!(answer.body["network_acls"], json!(2));
    assert_eq!(answer.body["policy"]["version"], json!(2));
    assert_eq!(answer.body["policy"]["rules"], json!(2));
}

#[tokio::test]
async fn watch_answers_changes_and_304_without() {
    let api = api().await;
    let watch = "/_netacl/v1/network-acls/watch";
    let first = api.send(Method::GET, watch, None).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body, json!({"version": 0, "network_acls": []}));

    let unchanged = api
        .send(Method::GET, &format!("{watch}?since=0&timeout_ms=30"), None)
        .await;
    assert_eq!(unchanged.status, StatusCode::NOT_MODIFIED);
    assert!(unchanged.raw.is_empty());

    // A stale version answers at once.
    let created = api.create(acl_body(10, "198.51.100.0/24")).await;
    let at_once = api
        .send(
            Method::GET,
            &format!("{watch}?since=0&timeout_ms=60000"),
            None,
        )
        .await;
    assert_eq!(at_once.status, StatusCode::OK);
    assert_eq!(at_once.body["version"], json!(1));
    assert_eq!(at_once.body["network_acls"], json!([created]));

    // A waiting poll is answered by the next write.
    let poll = {
        let router = api.router.clone();
        let token = api.token.clone();
        tokio::spawn(async move {
            let request = Request::get(format!("{watch}?since=1&timeout_ms=10000"))
                .header("authorization", format!("Bearer {token}"))
                .body(Body::empty())
                .expect("request");
            let response = router.oneshot(request).await.expect("infallible");
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            (
                status,
                serde_json::from_slice::<Value>(&body).expect("json"),
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = api.create(acl_body(20, "203.0.113.0/24")).await;
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("answered before its timeout")
        .expect("join");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["version"], json!(2));
    assert_eq!(body["network_acls"], json!([created, second]));

    for bad in ["since=x", "timeout_ms=60001", "since=1&since=2", "other=1"] {
        let answer = api.send(Method::GET, &format!("{watch}?{bad}"), None).await;
        assert_error(&answer, 400, Some("invalid_query_string"));
    }
}

#[tokio::test]
async fn a_rule_set_over_the_limits_is_refused_and_changes_nothing() {
    let limits = Limits::new(100, 100, 10, 5);
    let api = api_with(config().with_limits(limits)).await;
    let three = |priority: u64| {
        json!({"description": "three", "active": true, "priority": priority,
               "rule": {"action": {"block": true}, "scope": "tenant",
                        "match": {"ipv4_cidrs": ["192.0.2.1", "192.0.2.2", "192.0.2.3"]}}})
    };
    api.create(three(1)).await;
    let before = api.list().await;
    let answer = api
        .send(Method::POST, "/api/v2/network-acls", Some(three(2)))
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
    assert!(
        answer.body["message"]
            .as_str()
            .expect("m")
            .contains("limit"),
        "{}",
        answer.body
    );
    assert_eq!(api.list().await, before);
    let status = api.send(Method::GET, "/_netacl/v1/status", None).await;
    assert_eq!(status.body["version"], json!(1));
}

#[tokio::test]
async fn rules_and_engine_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (created, listed) = {
        let (service, token) = start_in(dir.path(), config()).await;
        let api = Api::new(service, token);
        let created = api.create(acl_body(10, "198.51.100.0/24")).await;
        api.create(acl_body(20, "203.0.113.0/24")).await;
        (created, api.list().await)
    };
    let (service, token) = start_in(dir.path(), config()).await;
    let api = Api::new(service, token);
    assert_eq!(api.list().await, listed);
    let decided = api.dry_run(json!({"client_ip": "198.51.100.1"})).await;
    assert_eq!(decided["version"], json!(2));
    assert_eq!(decided["outcome"]["rule_id"], created["id"]);
}

#[tokio::test]
async fn first_start_creates_a_key_and_a_bootstrap_client_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("store"));
    let (service, report) =
        AdminService::start(store.clone(), config(), BootstrapClient::default())
            .await
            .expect("start");
    assert!(report.signing_key_created);
    let client = report.bootstrap_client_id.clone().expect("client id");
    let secret = report.generated_secret.clone().expect("generated secret");
    assert!(!format!("{report:?}").contains(&secret));
    let token = token_for(&service, &client, &secret);
    let api = Api::new(service, token);
    assert_eq!(api.list().await, json!([]));
    let jwks = api
        .call(
            Request::get("/.well-known/jwks.json")
                .body(Body::empty())
                .expect("r"),
        )
        .await;
    assert_eq!(jwks.body["keys"][0]["kid"], json!(report.kid));
    drop(api);

    // Second start: same key, same client, no new secret.
    let (service, again) = AdminService::start(store, config(), BootstrapClient::default())
        .await
        .expect("restart");
    assert!(!again.signing_key_created);
    assert_eq!(again.kid, report.kid);
    assert_eq!(again.bootstrap_client_id.as_deref(), Some(client.as_str()));
    assert!(again.generated_secret.is_none());
    token_for(&service, &client, &secret);
}

#[tokio::test]
async fn openapi_document_matches_the_routes() {
    let api = api().await;
    let answer = api
        .call(
            Request::get("/_netacl/v1/openapi.json")
                .body(Body::empty())
                .expect("r"),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let doc = answer.body;
    assert_eq!(doc["openapi"], json!("3.1.0"));
    let created = api.create(acl_body(10, "192.0.2.1")).await;
    let id = created["id"].as_str().expect("id");
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("item") {
            operations += 1;
            let method =
                Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
            // Every documented operation is routed: neither the generic 404 nor a 405.
            let uri = path.replace("{id}", id)
                + if path.ends_with("watch") {
                    "?timeout_ms=0"
                } else {
                    ""
                };
            let answer = api.send(method.clone(), &uri, None).await;
            assert!(
                answer.status != StatusCode::METHOD_NOT_ALLOWED
                    && !(answer.status == StatusCode::NOT_FOUND
                        && answer.body.get("errorCode").is_none()),
                "{method} {path} is documented but not routed ({})",
                answer.status
            );
            // Request bodies are closed.
            if let Some(schema) =
                operation.pointer("/requestBody/content/application~1json/schema/$ref")
            {
                let name = schema
                    .as_str()
                    .expect("ref")
                    .rsplit('/')
                    .next()
                    .expect("name");
                assert_eq!(
                    doc["components"]["schemas"][name]["additionalProperties"],
                    json!(false),
                    "{name}"
                );
            }
            // A scope is documented exactly when the route wants a token.
            let open = operation["security"] == json!([]);
            let anonymous = api
                .call(
                    Request::builder()
                        .method(method.clone())
                        .uri(&uri)
                        .body(Body::empty())
                        .expect("r"),
                )
                .await;
            assert_eq!(
                anonymous.status == StatusCode::UNAUTHORIZED,
                !open,
                "{method} {path}"
            );
        }
    }
    // 16 network-ACL and netacl operations (4 of them managed lists, 2 analysis), 6 tenant operations
    // (tenant_api.rs), 19 organization, connection and client operations (organizations_api.rs),
    // 4 signing-key operations (signing_keys_api.rs), 4 network ACL key operations, 6 operator
    // operations on tenants (crates/cli/tests/tenant_cli.rs, tenant_isolation.rs; the tenants
    // watch: tenancy_directory.rs, edge_platform.rs; edge clients: edge_signatures.rs), 2 operator operations for multi-tenant
    // edges' summaries and samples (tenancy_directory.rs, edge_platform.rs), 4 history
    // operations (history_api.rs), 3 log operations (logs_api.rs), 1 rule-counts operation
    // (rule_counts_api.rs), the edges' traffic sample (analysis_api.rs).
    assert_eq!(operations, 66);
    // Undocumented methods on documented paths are 405, undocumented paths 404.
    let answer = api
        .send(Method::POST, &format!("/api/v2/network-acls/{id}"), None)
        .await;
    assert_error(&answer, 405, None);
    let answer = api.send(Method::DELETE, "/api/v2/network-acls", None).await;
    assert_error(&answer, 405, None);
    let answer = api.send(Method::GET, "/_netacl/v1/nothing", None).await;
    assert_error(&answer, 404, None);
}

#[tokio::test]
async fn requests_without_a_valid_token_are_limited_by_peer_address() {
    let limited = config().with_rate_limit(RateLimitConfig {
        burst: 2,
        per_second: 0.01,
    });
    let api = api_with(limited).await;
    let from = |peer: &str, token: Option<&str>| {
        let mut request = Request::get("/api/v2/network-acls");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let mut request = request.body(Body::empty()).expect("request");
        let addr: std::net::SocketAddr = peer.parse().expect("addr");
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(addr));
        request
    };
    for _ in 0..2 {
        assert_error(&api.call(from("192.0.2.1:1000", None)).await, 401, None);
    }
    // The third from the same address (any port, any bad token) is refused before auth.
    let refused = api
        .call(from("192.0.2.1:2000", Some("bad.token.here")))
        .await;
    assert_error(&refused, 429, Some("too_many_requests"));
    assert!(refused.headers.contains_key("retry-after"));
    // Another address has its own bucket, and a valid token is keyed by its client.
    assert_error(&api.call(from("192.0.2.2:1000", None)).await, 401, None);
    let token = api.token.clone();
    let ok = api.call(from("192.0.2.1:3000", Some(&token))).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.headers["x-ratelimit-remaining"], "1");
}

#[tokio::test]
async fn token_requests_are_limited_by_peer_address() {
    const BURST: u32 = 3;
    let limited = config().with_rate_limit(RateLimitConfig {
        burst: BURST,
        per_second: 0.01,
    });
    let api = api_with(limited).await;
    let token_request = |peer: &str, secret: &str| {
        let body = json!({
            "grant_type": "client_credentials", "client_id": CLIENT,
            "client_secret": secret, "audience": AUDIENCE,
        });
        let mut request = Request::post("/oauth/token")
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request");
        let addr: std::net::SocketAddr = peer.parse().expect("addr");
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(addr));
        request
    };
    // Exactly the burst passes (wrong secrets count too), from addresses of one /64.
    for n in 0..BURST {
        let peer = format!("[2001:db8:7:7::{}]:4000", n + 1);
        let answer = api.call(token_request(&peer, "wrong-secret")).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "request {n}");
        assert_eq!(answer.body["error"], "access_denied");
        assert_eq!(
            answer.headers["x-ratelimit-remaining"],
            (BURST - 1 - n).to_string().as_str()
        );
    }
    // The next one is refused before the secret is checked, even with the right secret.
    let refused = api
        .call(token_request("[2001:db8:7:7:ffff::1]:4001", SECRET))
        .await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.body["error"], "too_many_requests");
    assert!(refused.body["error_description"].is_string());
    assert_eq!(refused.headers["cache-control"], "no-store");
    let retry: u64 = refused.headers["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("integer");
    assert!(retry >= 1);
    // Another /64, and another IPv4 address, have their own buckets.
    let other = api
        .call(token_request("[2001:db8:7:8::1]:4000", SECRET))
        .await;
    assert_eq!(other.status, StatusCode::OK);
    assert!(other.body["access_token"].is_string());
    let v4 = api.call(token_request("192.0.2.9:4000", SECRET)).await;
    assert_eq!(v4.status, StatusCode::OK);
    // The token bucket is apart from the API's: the limited peer still reaches the API (401
    // without a token, not 429).
    let mut request = Request::get("/api/v2/network-acls")
        .body(Body::empty())
        .expect("request");
    let addr: std::net::SocketAddr = "[2001:db8:7:7::1]:4000".parse().expect("addr");
    request
        .extensions_mut()
        .insert(axum::extract::ConnectInfo(addr));
    assert_error(&api.call(request).await, 401, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_on_one_priority_have_one_winner() {
    let api = Arc::new(api().await);
    let mut tasks = Vec::new();
    for n in 0..8 {
        let api = Arc::clone(&api);
        tasks.push(tokio::spawn(async move {
            api.send(
                Method::POST,
                "/api/v2/network-acls",
                Some(acl_body(42, &format!("192.0.2.{n}"))),
            )
            .await
        }));
    }
    let mut statuses = Vec::new();
    for task in tasks {
        let answer = task.await.expect("join");
        if answer.status == StatusCode::CONFLICT {
            assert_error(&answer, 409, Some("conflict"));
        }
        statuses.push(answer.status.as_u16());
    }
    statuses.sort();
    assert_eq!(statuses, vec![201, 409, 409, 409, 409, 409, 409, 409]);
    assert_eq!(api.list().await.as_array().expect("array").len(), 1);
    let status = api.send(Method::GET, "/_netacl/v1/status", None).await;
    assert_eq!(status.body["version"], json!(1));
}

const LISTS: &str = "/_netacl/v1/managed-lists";

fn tor_rule(priority: u64) -> Value {
    json!({"description": "block Tor", "active": true, "priority": priority,
           "rule": {"action": {"block": true}, "scope": "tenant",
                    "match": {"auth0_managed": ["auth0.tor"]}}})
}

#[tokio::test]
async fn managed_lists_are_written_read_and_enforced() {
    let api = api().await;
    let all = api.get_ok(LISTS).await;
    assert_eq!(all["version"], json!(0));
    let names: Vec<&str> = all["managed_lists"]
        .as_array()
        .expect("lists")
        .iter()
        .map(|l| {
            assert_eq!(l["source"], "none");
            l["name"].as_str().expect("name")
        })
        .collect();
    assert_eq!(
        names,
        [
            "auth0.low_reputation",
            "auth0.tor",
            "auth0.proxy",
            "auth0.vpn",
            "auth0.icloud_relay_proxy"
        ]
    );
    let tor = format!("{LISTS}/auth0.tor");
    assert_eq!(
        api.get_ok(&tor).await,
        json!({"name": "auth0.tor", "source": "none", "version": 0, "entries": 0,
               "rules": 0, "items": []})
    );

    // A rule naming the list is accepted before the list has content, and matches nothing.
    let rule = api.create(tor_rule(10)).await;
    let probe = json!({"client_ip": "192.0.2.7"});
    assert_eq!(
        api.dry_run(probe.clone()).await["outcome"]["action"],
        "none"
    );
    let status = api.get_ok("/_netacl/v1/status").await;
    assert_eq!(
        status["policy"]["rules_naming_empty_lists"],
        json!([{"rule_id": rule["id"], "list": "auth0.tor", "configured": false}])
    );

    // A malformed list is refused with the item's path, and nothing changes.
    let answer = api
        .send(
            Method::PUT,
            &tor,
            Some(json!({"items": ["192.0.2.0/24", "192.0.2.300"]})),
        )
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
    assert!(
        answer.body["message"]
            .as_str()
            .expect("m")
            .ends_with("on property items[1]."),
        "{}",
        answer.body
    );
    assert_eq!(api.get_ok(&tor).await["source"], "none");
    assert_eq!(api.get_ok("/_netacl/v1/status").await["version"], json!(1));

    // A write is enforced when answered, and bumps the tenant's version.
    let answer = api
        .send(
            Method::PUT,
            &tor,
            Some(json!({"items": ["192.0.2.0/24", "2001:db8::/32"]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["version"], json!(2));
    assert_eq!(answer.body["source"], "api");
    assert_eq!(answer.body["rules"], json!(1));
    assert_eq!(
        answer.body["items"],
        json!(["192.0.2.0/24", "2001:db8::/32"])
    );
    assert_eq!(api.get_ok(&tor).await, answer.body);
    let decided = api.dry_run(probe.clone()).await;
    assert_eq!(decided["version"], json!(2));
    assert_eq!(decided["outcome"]["rule_id"], rule["id"]);
    let mapped = api.dry_run(json!({"client_ip": "::ffff:192.0.2.9"})).await;
    assert_eq!(mapped["outcome"]["action"], "block", "IPv4-mapped address");
    let status = api.get_ok("/_netacl/v1/status").await;
    assert_eq!(status["policy"]["rules_naming_empty_lists"], json!([]));
    assert_eq!(status["managed_lists"][1]["entries"], json!(2));

    // Every accepted write changes the version; a form body works like JSON.
    let answer = api
        .form(
            Method::PUT,
            &tor,
            "items[]=198.51.100.0%2F24&items[]=192.0.2.1",
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["version"], json!(3));
    assert_eq!(
        answer.body["items"],
        json!(["198.51.100.0/24", "192.0.2.1"])
    );
    assert_eq!(
        api.dry_run(probe.clone()).await["outcome"]["action"],
        "none"
    );
    let answer = api.form(Method::PUT, &tor, "items=%5B%5D").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["entries"], json!(0));
    assert_eq!(answer.body["version"], json!(4));

    // Delete: the list is unconfigured again; a second delete is 404.
    let answer = api.send(Method::DELETE, &tor, None).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert_eq!(api.get_ok(&tor).await["source"], "none");
    let answer = api.send(Method::DELETE, &tor, None).await;
    assert_error(&answer, 404, Some("inexistent_managed_list"));
    assert_eq!(api.get_ok("/_netacl/v1/status").await["version"], json!(5));

    // Unknown names are 404, bodies are strict.
    for uri in [
        format!("{LISTS}/auth0.botnet"),
        format!("{LISTS}/tor"),
        format!("{LISTS}/AUTH0.TOR"),
    ] {
        let answer = api.send(Method::GET, &uri, None).await;
        assert_error(&answer, 404, Some("inexistent_managed_list"));
        let answer = api
            .send(Method::PUT, &uri, Some(json!({"items": []})))
            .await;
        assert_error(&answer, 404, Some("inexistent_managed_list"));
    }
    let answer = api
        .send(Method::PUT, &tor, Some(json!({"items": [], "extra": 1})))
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
    let answer = api
        .raw(Method::PUT, &tor, Some("text/plain"), "192.0.2.1")
        .await;
    assert_error(&answer, 415, Some("unsupported_media_type"));
}

#[tokio::test]
async fn managed_list_scopes_compare_exactly() {
    let api = api().await;
    let tor = format!("{LISTS}/auth0.tor");
    let reader = scoped_token(&api.service, "reader", &["read:network_acls"]);
    let writer = scoped_token(&api.service, "writer", &["update:network_acls"]);
    let other = scoped_token(
        &api.service,
        "other",
        &[
            "create:network_acls",
            "delete:network_acls",
            "update:network_aclsX",
        ],
    );
    let body = Some(json!({"items": ["192.0.2.1"]}));
    let (put, get, delete) = (Method::PUT, Method::GET, Method::DELETE);
    let refused = api.send_as(&reader, put.clone(), &tor, body.clone()).await;
    assert_error(&refused, 403, Some("insufficient_scope"));
    let refused = api.send_as(&other, put.clone(), &tor, body.clone()).await;
    assert_error(&refused, 403, Some("insufficient_scope"));
    let written = api.send_as(&writer, put, &tor, body).await;
    assert_eq!(written.status, StatusCode::OK);
    let read = api.send_as(&reader, get.clone(), &tor, None).await;
    assert_eq!(read.status, StatusCode::OK);
    let refused = api.send_as(&writer, get, &tor, None).await;
    assert_error(&refused, 403, Some("insufficient_scope"));
    let refused = api.send_as(&reader, delete.clone(), &tor, None).await;
    assert_error(&refused, 403, Some("insufficient_scope"));
    let deleted = api.send_as(&writer, delete, &tor, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let anonymous = api
        .call(Request::get(&tor).body(Body::empty()).expect("r"))
        .await;
    assert_error(&anonymous, 401, None);
}

#[tokio::test]
async fn a_list_given_by_a_file_wins_and_is_read_only() {
    use netacl_model::{ManagedList, ManagedListName, ManagedLists};
    let mut files = ManagedLists::new();
    let from_file = Arc::new(ManagedList::from_lines("192.0.2.0/24\n", 100).expect("list"));
    files.set(ManagedListName::Tor, Some(Arc::clone(&from_file)));
    let api = api_with(config().with_managed_list_files(files)).await;
    let tor = format!("{LISTS}/auth0.tor");
    let listed = api.get_ok(&tor).await;
    assert_eq!(listed["source"], "file");
    assert_eq!(listed["items"], json!(["192.0.2.0/24"]));
    assert_eq!(listed["digest"], json!(from_file.digest()));
    let answer = api
        .send(Method::PUT, &tor, Some(json!({"items": ["10.0.0.1"]})))
        .await;
    assert_error(&answer, 409, Some("conflict"));
    let answer = api.send(Method::DELETE, &tor, None).await;
    assert_error(&answer, 409, Some("conflict"));
    assert_eq!(
        api.get_ok(&tor).await,
        listed,
        "refused writes change nothing"
    );
    api.create(tor_rule(10)).await;
    assert_eq!(
        api.dry_run(json!({"client_ip": "192.0.2.9"})).await["outcome"]["action"],
        "block"
    );
    // A reloaded file bumps the version and changes decisions.
    let reloaded = Arc::new(ManagedList::from_lines("198.51.100.0/24\n", 100).expect("list"));
    let version = api
        .service
        .load_file_list(ManagedListName::Tor, reloaded)
        .await
        .expect("reload");
    assert_eq!(version, 2);
    assert_eq!(api.get_ok(&tor).await["items"], json!(["198.51.100.0/24"]));
    let decided = api.dry_run(json!({"client_ip": "192.0.2.9"})).await;
    assert_eq!(decided["version"], json!(2));
    assert_eq!(decided["outcome"]["action"], "none");
    // Other names stay writable through the API.
    let answer = api
        .send(
            Method::PUT,
            &format!("{LISTS}/auth0.vpn"),
            Some(json!({"items": ["10.0.0.1"]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["version"], json!(3));
}

#[tokio::test]
async fn stored_lists_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listed = {
        let (service, token) = start_in(dir.path(), config()).await;
        let api = Api::new(service, token);
        api.create(tor_rule(10)).await;
        let answer = api
            .send(
                Method::PUT,
                &format!("{LISTS}/auth0.tor"),
                Some(json!({"items": ["192.0.2.0/24"]})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        answer.body
    };
    let (service, token) = start_in(dir.path(), config()).await;
    let api = Api::new(service, token);
    assert_eq!(api.get_ok(&format!("{LISTS}/auth0.tor")).await, listed);
    let decided = api.dry_run(json!({"client_ip": "192.0.2.1"})).await;
    assert_eq!(decided["outcome"]["action"], "block");
    assert_eq!(decided["version"], json!(2));
}

#[tokio::test]
async fn the_watch_carries_managed_lists_to_edges_that_ask() {
    let api = api().await;
    let watch = "/_netacl/v1/network-acls/watch";
    api.create(tor_rule(10)).await;
    let put = api
        .send(
            Method::PUT,
            &format!("{LISTS}/auth0.tor"),
            Some(json!({"items": ["192.0.2.0/24"]})),
        )
        .await;
    let digest = put.body["digest"].as_str().expect("digest").to_owned();
    // An edge that does not ask (an older edge) gets the answer it always got.
    let old = api.send(Method::GET, watch, None).await;
    assert_eq!(old.body["version"], json!(2));
    assert!(old.body.get("managed_lists").is_none());
    // An edge holding no list gets every list with its items.
    let fresh = api
        .send(Method::GET, &format!("{watch}?lists="), None)
        .await;
    assert_eq!(
        fresh.body["managed_lists"],
        json!([{"name": "auth0.tor", "source": "api", "version": 2, "digest": digest,
                "items": ["192.0.2.0/24"]}])
    );
    // Holding that digest: nothing new, the poll waits (304); the items are not sent again.
    let held = format!("{watch}?since=2&timeout_ms=30&lists=auth0.tor:{digest}");
    assert_eq!(
        api.send(Method::GET, &held, None).await.status,
        StatusCode::NOT_MODIFIED
    );
    let stale_digest = format!("{watch}?since=2&timeout_ms=60000&lists=auth0.tor:00ff");
    let answer = api.send(Method::GET, &stale_digest, None).await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "a different digest answers at once"
    );
    assert_eq!(
        answer.body["managed_lists"][0]["items"],
        json!(["192.0.2.0/24"])
    );
    let same = api
        .send(
            Method::GET,
            &format!("{watch}?lists=auth0.tor:{digest}"),
            None,
        )
        .await;
    assert!(same.body["managed_lists"][0].get("items").is_none());
    // A list change ends a waiting poll.
    let poll = {
        let router = api.router.clone();
        let token = api.token.clone();
        let uri = format!("{watch}?since=2&timeout_ms=10000&lists=auth0.tor:{digest}");
        tokio::spawn(async move {
            let request = Request::get(uri)
                .header("authorization", format!("Bearer {token}"))
                .body(Body::empty())
                .expect("request");
            let response = router.oneshot(request).await.expect("infallible");
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            serde_json::from_slice::<Value>(&body).expect("json")
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    api.send(
        Method::PUT,
        &format!("{LISTS}/auth0.tor"),
        Some(json!({"items": ["198.51.100.0/24"]})),
    )
    .await;
    let body = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("answered")
        .expect("join");
    assert_eq!(body["version"], json!(3));
    assert_eq!(
        body["managed_lists"][0]["items"],
        json!(["198.51.100.0/24"])
    );
    for bad in ["lists=auth0.tor", "lists=tor:00", "lists=auth0.tor:xyz"] {
        let answer = api.send(Method::GET, &format!("{watch}?{bad}"), None).await;
        assert_error(&answer, 400, Some("invalid_query_string"));
    }
}

#[tokio::test]
async fn dry_runs_may_bring_their_own_list_content() {
    let api = api().await;
    api.create(tor_rule(10)).await;
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/dry-run",
            Some(json!({"request": {"client_ip": "192.0.2.1"},
                        "managed_lists": {"auth0.tor": ["192.0.2.0/24"]}})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["source"], "live");
    assert_eq!(answer.body["outcome"]["action"], "block");
    // Nothing was stored.
    assert_eq!(
        api.get_ok(&format!("{LISTS}/auth0.tor")).await["source"],
        "none"
    );
    for (lists, message) in [
        (
            json!({"auth0.x": []}),
            "Additional properties not allowed: auth0.x",
        ),
        (json!({"auth0.tor": ["nope"]}), "managed_lists.auth0.tor[0]"),
        (json!([]), "Expected type object"),
    ] {
        let answer = api
            .send(
                Method::POST,
                "/_netacl/v1/dry-run",
                Some(json!({"request": {}, "managed_lists": lists})),
            )
            .await;
        assert_error(&answer, 400, Some("invalid_body"));
        assert!(
            answer.body["message"]
                .as_str()
                .expect("m")
                .contains(message),
            "{}",
            answer.body
        );
    }
}

#[tokio::test]
async fn match_all_rules_through_the_api() {
    let api = api().await;
    let allow = api.create(acl_body(10, "203.0.113.0/24")).await;
    let deny = api
        .create(
            json!({"description": "deny the rest", "active": true, "priority": 90,
                       "rule": {"action": {"block": true}, "scope": "tenant", "match_all": true}}),
        )
        .await;
    assert_eq!(deny["rule"]["match_all"], json!(true));
    assert_eq!(
        api.dry_run(json!({"client_ip": "198.51.100.1"})).await["outcome"]["rule_id"],
        deny["id"]
    );
    assert_eq!(
        api.dry_run(json!({"client_ip": "203.0.113.1"})).await["outcome"]["rule_id"],
        allow["id"]
    );
    let answer = api
        .form(
            Method::PUT,
            &acl_uri(&deny),
            "description=d&active=true&priority=90&rule[action][log]=true&rule[scope]=management&rule[match_all]=true",
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["rule"]["match_all"], json!(true));
    let answer = api
        .send(
            Method::PATCH,
            &acl_uri(&deny),
            Some(
                json!({"rule": {"action": {"block": true}, "scope": "tenant",
                                 "match_all": true, "not_match": {"asns": [1]}}}),
            ),
        )
        .await;
    assert_error(&answer, 400, Some("invalid_body"));
    assert_eq!(
        answer.body["message"],
        "Payload validation error: 'match_all cannot be combined with not_match' on property rule."
    );
}

// ---------------------------------------------------------------------------------------------
// Network ACL keys (`/api/v2/keys/network-acls`) and `http_message_signature` references

/// RFC 9421 Appendix B.1.5's shared secret (64 bytes), as a key's material.
const KEY_VALUE: &str =
    "uzvJfB4u3N0Jy4T7NZ75MDVcr8zSTInedJtkgcu46YW4XByzNJjxBdtjUkdJPBtbmHhIDi6pcl8jsasjlTMtDQ==";

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn signed_rule(priority: u64, key_ids: &[&str]) -> Value {
    let keys: Vec<Value> = key_ids.iter().map(|id| json!({"id": id})).collect();
    json!({
        "description": "block what the proxy did not sign",
        "active": true,
        "priority": priority,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "not_match": {"http_message_signature": {"keys": keys}}}
    })
}

#[tokio::test]
async fn network_acl_keys_are_created_listed_and_deleted_without_their_material() {
    let api = api().await;
    let uri = "/api/v2/keys/network-acls";
    let mut answers: Vec<String> = Vec::new();
    let created = api
        .send(
            Method::POST,
            uri,
            Some(json!({"name": "edge-proxy", "alg": "hmac-sha256", "value": KEY_VALUE})),
        )
        .await;
    answers.push(created.body.to_string());
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let key = created.body.clone();
    let keys: Vec<&str> = key
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "alg",
            "fingerprint",
            "created_at",
            "updated_at"
        ]
    );
    // The fingerprint is the lowercase hex SHA-256 of the decoded material.
    use sha2::Digest;
    let decoded = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, KEY_VALUE)
        .expect("base64");
    let expected = to_hex(&sha2::Sha256::digest(&decoded));
    assert_eq!(key["fingerprint"], json!(expected));
    assert_eq!(key["alg"], json!("hmac-sha256"));
    assert!(is_millis_timestamp(&key["created_at"]));
    let id = key["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("nak_") && id.len() == 26, "{id}");

    // A form body makes a second key; the same name again is 409 and changes nothing.
    let other_value = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [7u8; 32]);
    let form = serde_urlencoded::to_string([
        ("name", "second"),
        ("alg", "hmac-sha256"),
        ("value", other_value.as_str()),
    ])
    .expect("form");
    let second = api
        .raw(
            Method::POST,
            uri,
            Some("application/x-www-form-urlencoded"),
            &form,
        )
        .await;
    answers.push(second.body.to_string());
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.body);
    let version = api.get_ok("/_netacl/v1/status").await["version"].clone();
    let clash = api
        .send(
            Method::POST,
            uri,
            Some(json!({"name": "edge-proxy", "alg": "hmac-sha256", "value": other_value})),
        )
        .await;
    answers.push(clash.body.to_string());
    assert_error(&clash, 409, Some("conflict"));
    assert_eq!(api.get_ok("/_netacl/v1/status").await["version"], version);

    // Bad bodies: 400 with the property path, never quoting the value.
    for (body, message) in [
        (
            json!({"name": "k", "alg": "hmac-sha256", "value": "c2hvcnQ="}),
            "Payload validation error: 'Decoded key is 5 bytes, must be 32 to 64 bytes' on property value.",
        ),
        (
            json!({"name": "k", "alg": "hmac-sha512", "value": KEY_VALUE}),
            "Payload validation error: 'No enum match for: \"hmac-sha512\"' on property alg.",
        ),
        (
            json!({"name": "k", "alg": "hmac-sha256", "value": format!("{KEY_VALUE}!")}),
            "Payload validation error: 'Object didn't pass validation for format base64 (the value is not shown)' on property value.",
        ),
        (
            json!({"name": "k", "alg": "hmac-sha256", "value": KEY_VALUE, "kid": "x"}),
            "Payload validation error: 'Additional properties not allowed: kid'.",
        ),
    ] {
        let answer = api.send(Method::POST, uri, Some(body)).await;
        answers.push(answer.body.to_string());
        assert_error(&answer, 400, Some("invalid_body"));
        assert_eq!(answer.body["message"], json!(message));
    }

    // List (newest first) and get.
    let list = api.get_ok(uri).await;
    answers.push(list.to_string());
    let ids: Vec<&str> = list["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [second.body["id"].as_str().expect("id"), id.as_str()]);
    let got = api.get_ok(&format!("{uri}/{id}")).await;
    answers.push(got.to_string());
    assert_eq!(got, key);
    let missing = api
        .send(Method::GET, &format!("{uri}/nak_nothere"), None)
        .await;
    assert_error(&missing, 404, Some("inexistent_network_acl_key"));

    // Rules name keys by id: an unknown id is a 400 at its path, a known one is stored.
    let unknown = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(signed_rule(10, &[&id, "nak_unknown"])),
        )
        .await;
    assert_error(&unknown, 400, Some("invalid_body"));
    assert_eq!(
        unknown.body["message"],
        json!("Payload validation error: 'No network ACL key with id nak_unknown' on property rule.not_match.http_message_signature.keys[1].id.")
    );
    let rule = api.create(signed_rule(10, &[&id])).await;
    answers.push(rule.to_string());
    assert_eq!(
        rule["rule"]["not_match"],
        json!({"http_message_signature": {"keys": [{"id": id}]}})
    );
    // The reference survives a replacement of the rule and key listing.
    let replaced = api
        .send(Method::PUT, &acl_uri(&rule), Some(signed_rule(11, &[&id])))
        .await;
    assert_eq!(replaced.status, StatusCode::OK, "{}", replaced.body);
    assert_eq!(replaced.body["rule"], rule["rule"]);
    api.get_ok(uri).await;

    // The dry run takes the verified key id as a request key.
    let signed = api
        .dry_run(json!({"path": "/authorize", "http_message_signature": id}))
        .await;
    answers.push(signed.to_string());
    assert_eq!(signed["outcome"]["action"], json!("none"), "{signed}");
    let unsigned = api.dry_run(json!({"path": "/authorize"})).await;
    assert_eq!(unsigned["outcome"]["action"], json!("block"), "{unsigned}");

    // A key a rule names cannot be deleted; once the rule is gone it can.
    let in_use = api.send(Method::DELETE, &format!("{uri}/{id}"), None).await;
    answers.push(in_use.body.to_string());
    assert_error(&in_use, 409, Some("conflict"));
    assert_eq!(api.get_ok(&format!("{uri}/{id}")).await, key);
    let gone = api.send(Method::DELETE, &acl_uri(&rule), None).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    let deleted = api.send(Method::DELETE, &format!("{uri}/{id}"), None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    let again = api.send(Method::DELETE, &format!("{uri}/{id}"), None).await;
    assert_error(&again, 404, Some("inexistent_network_acl_key"));

    // No answer carried the material, in any encoding.
    let hex_material = to_hex(&decoded);
    let url_safe = KEY_VALUE.replace('+', "-").replace('/', "_");
    for text in &answers {
        for secret in [
            &KEY_VALUE[..40],
            &hex_material[..40],
            &url_safe[..40],
            &other_value[..40],
        ] {
            assert!(!text.contains(secret), "material in an answer: {text}");
        }
    }
}

#[tokio::test]
async fn network_acl_key_scopes_are_exact() {
    let api = api().await;
    let service = &api.service;
    let uri = "/api/v2/keys/network-acls";
    let readers = scoped_token(service, "reader", &["read:network_acl_keys"]);
    let acl_reader = scoped_token(
        service,
        "acl-reader",
        &["read:network_acls", "create:network_acls"],
    );
    let body = json!({"name": "k", "alg": "hmac-sha256", "value": KEY_VALUE});
    let denied = api
        .send_as(&readers, Method::POST, uri, Some(body.clone()))
        .await;
    assert_error(&denied, 403, Some("insufficient_scope"));
    let denied = api.send_as(&acl_reader, Method::GET, uri, None).await;
    assert_error(&denied, 403, Some("insufficient_scope"));
    let listed = api.send_as(&readers, Method::GET, uri, None).await;
    assert_eq!(listed.status, StatusCode::OK);
    // The bootstrap client holds the three key scopes.
    let created = api.send(Method::POST, uri, Some(body)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
}

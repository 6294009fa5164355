//! Input limits through the router (`oneshot`, no socket): bodies nested deeper than the limit
//! (32 levels of arrays and objects), as JSON, as forms and as JSON text inside a form field,
//! are a 400 `invalid_body` naming the limit on every endpoint that takes a body. A form
//! `x[a][a]…[a]=1` of 50,000 levels used to build a value whose drop overflowed the stack and
//! aborted the server.
//!
//! Requests are JSON objects: serde's positional form of a struct (a JSON array, `[null, null]`
//! for the dry run's request, `["client_credentials", "id", "secret", "aud"]` for a token
//! request) is refused.

use crate::support::{api, Answer, Api, AUDIENCE, CLIENT, SECRET};
use http::{Method, StatusCode};
use serde_json::{json, Value};

/// The limit the README documents.
const LIMIT: usize = 32;

fn too_deep_message() -> String {
    format!(
        "Payload validation error: 'Nested deeper than the limit of {LIMIT} levels of arrays \
         and objects'."
    )
}

fn assert_too_deep(answer: &Answer, what: &str) {
    assert_eq!(
        answer.status,
        StatusCode::BAD_REQUEST,
        "{what}: {}",
        answer.body
    );
    assert_eq!(
        answer.body,
        json!({"statusCode": 400, "error": "Bad Request", "message": too_deep_message(),
               "errorCode": "invalid_body"}),
        "{what}"
    );
}

/// `{"a":{"a":…{"a":1}…}}`, `depth` objects.
fn nested_objects(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

/// `[[…[1]…]]`, `depth` arrays.
fn nested_arrays(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// `x[a][a]…[a]=1`: a form key of `depth` levels (`x` and `depth - 1` brackets).
fn nested_form_key(depth: usize) -> String {
    format!("x{}=1", "[a]".repeat(depth - 1))
}

/// Every endpoint that takes a body, with an id where the path needs one: (method, uri, takes
/// forms).
async fn body_endpoints(api: &Api) -> Vec<(Method, String, bool)> {
    let created = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(json!({"description": "x", "active": true, "priority": 1,
                   "rule": {"action": {"block": true}, "scope": "tenant",
                            "match": {"asns": [64500]}}})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let by_id = format!(
        "/api/v2/network-acls/{}",
        created.body["id"].as_str().expect("id")
    );
    vec![
        (Method::POST, "/api/v2/network-acls".into(), true),
        (Method::PUT, by_id.clone(), true),
        (Method::PATCH, by_id, true),
        (Method::POST, "/api/v2/organizations".into(), true),
        (Method::PATCH, "/api/v2/branding".into(), true),
        (Method::POST, "/_netacl/v1/dry-run".into(), false),
        (Method::POST, "/_netacl/v1/directory/import".into(), false),
    ]
}

#[tokio::test]
async fn a_form_of_50000_levels_is_refused_naming_the_limit() {
    let api = api().await;
    let form = nested_form_key(50_000);
    for (method, uri, forms) in body_endpoints(&api).await {
        if forms {
            let answer = api.form(method.clone(), &uri, &form).await;
            assert_too_deep(&answer, &format!("{method} {uri}"));
        }
    }
    // The rule set is as it was, and the service answers.
    let list = api.get_ok("/api/v2/network-acls").await;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn json_bodies_of_50000_levels_are_refused_naming_the_limit() {
    let api = api().await;
    for (method, uri, _) in body_endpoints(&api).await {
        for (shape, body) in [
            ("objects", nested_objects(50_000)),
            ("arrays", nested_arrays(50_000)),
            // Deep inside a body of the right shape.
            (
                "objects in request",
                format!("{{\"request\":{}}}", nested_objects(50_000)),
            ),
            (
                "arrays in rule",
                format!(
                    "{{\"description\":\"x\",\"active\":true,\"rule\":{}}}",
                    nested_arrays(50_000)
                ),
            ),
        ] {
            let answer = api
                .raw(method.clone(), &uri, Some("application/json"), &body)
                .await;
            assert_too_deep(&answer, &format!("{method} {uri} {shape}"));
        }
    }
}

#[tokio::test]
async fn json_text_in_a_form_field_counts_with_its_key() {
    let api = api().await;
    // `rule` is one level; the JSON text in it may take the 31 others.
    let fits = format!(
        "description=x&active=true&rule={}",
        url_encode(&nested_arrays(LIMIT - 1))
    );
    let answer = api.form(Method::POST, "/api/v2/network-acls", &fits).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_ne!(
        answer.body["message"],
        json!(too_deep_message()),
        "{}",
        answer.body
    );
    for depth in [LIMIT, 50_000] {
        let form = format!(
            "description=x&active=true&rule={}",
            url_encode(&nested_arrays(depth))
        );
        let answer = api.form(Method::POST, "/api/v2/network-acls", &form).await;
        assert_too_deep(&answer, &format!("rule of {depth} arrays"));
        let form = format!(
            "description=x&active=true&rule[match]={}",
            url_encode(&nested_objects(depth - 1))
        );
        let answer = api.form(Method::POST, "/api/v2/network-acls", &form).await;
        assert_too_deep(&answer, &format!("rule[match] of {} objects", depth - 1));
    }
}

#[tokio::test]
async fn the_limit_is_exact() {
    let api = api().await;
    // At the limit: the depth is fine and the validator speaks (an unknown property).
    let unknown = "Payload validation error: 'Additional properties not allowed: x'.";
    let answer = api
        .form(Method::PATCH, "/api/v2/branding", &nested_form_key(LIMIT))
        .await;
    assert_eq!(answer.body["message"], json!(unknown), "{}", answer.body);
    let answer = api
        .raw(
            Method::PATCH,
            "/api/v2/branding",
            Some("application/json"),
            &format!("{{\"x\":{}}}", nested_arrays(LIMIT - 1)),
        )
        .await;
    assert_eq!(answer.body["message"], json!(unknown), "{}", answer.body);
    // One more: refused for its depth.
    let answer = api
        .form(
            Method::PATCH,
            "/api/v2/branding",
            &nested_form_key(LIMIT + 1),
        )
        .await;
    assert_too_deep(&answer, "form one over");
    let answer = api
        .raw(
            Method::PATCH,
            "/api/v2/branding",
            Some("application/json"),
            &format!("{{\"x\":{}}}", nested_arrays(LIMIT)),
        )
        .await;
    assert_too_deep(&answer, "JSON one over");
    // Brackets inside strings are text, not nesting.
    let answer = api
        .send(
            Method::PATCH,
            "/api/v2/branding",
            Some(json!({"x": "[".repeat(100) + "\\\"{"})),
        )
        .await;
    assert_eq!(answer.body["message"], json!(unknown), "{}", answer.body);
    assert_eq!(
        api.get_ok("/api/v2/branding").await,
        Value::Object(Default::default())
    );
}

/// `application/x-www-form-urlencoded` encoding of `text`.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn a_dry_run_request_must_be_a_json_object() {
    let api = api().await;
    let rules = json!([{"description": "block management", "active": true, "priority": 10,
        "rule": {"action": {"block": true}, "scope": "management",
                 "match": {"ipv4_cidrs": ["198.51.100.0/24"]}}}]);
    // The object form decides `block`: the array forms below would be the same request.
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/dry-run",
            Some(
                json!({"request": {"scope": "management", "client_ip": "198.51.100.7"},
                        "network_acls": rules}),
            ),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["outcome"]["action"], "block");
    for request in [
        json!([null, null]),
        json!(["management", null, "198.51.100.7"]),
        json!([]),
        json!("management"),
        json!(null),
    ] {
        let answer = api
            .send(
                Method::POST,
                "/_netacl/v1/dry-run",
                Some(json!({"request": request, "network_acls": rules})),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{request}: {}",
            answer.body
        );
        assert_eq!(answer.body["errorCode"], "invalid_body", "{request}");
        let message = answer.body["message"].as_str().unwrap_or("");
        assert!(
            message.contains("expected a JSON object") && message.ends_with("on property request."),
            "{request}: {message}"
        );
    }
}

#[tokio::test]
async fn a_token_request_must_be_a_json_object() {
    let api = api().await;
    let token = |body: String| {
        http::Request::post("/oauth/token")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .expect("request")
    };
    let object = json!({"grant_type": "client_credentials", "client_id": CLIENT,
                        "client_secret": SECRET, "audience": AUDIENCE});
    let answer = api.call(token(object.to_string())).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let positional = json!(["client_credentials", CLIENT, SECRET, AUDIENCE]);
    let answer = api.call(token(positional.to_string())).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert_eq!(answer.body["error"], "invalid_request", "{}", answer.body);
    assert!(answer.body.get("access_token").is_none());
}

//! The project's data-driven cases, through the HTTP API (the router, `oneshot`):
//!
//! - `testdata/cases/*.json` (evaluation): every request through `POST /_netacl/v1/dry-run`
//!   with the file's rule set (and managed lists) in the body must give exactly the expected
//!   outcome — the same cases the reference and compiled evaluators run in `crates/eval/tests`.
//! - `testdata/validation/managed_list.json`: every body through
//!   `PUT /_netacl/v1/managed-lists/{name}`: stored and answered as sent, or refused with 400
//!   and the expected message, the stored list unchanged.
//! - `testdata/validation/network_acl_create.json` and `network_acl_patch.json`: every body
//!   through `POST` / `PATCH /api/v2/network-acls` must be accepted (201/200, stored as sent) or
//!   refused with 400 `invalid_body` and exactly the expected message — the same cases the model
//!   runs in `crates/model/tests`.
//! - `testdata/validation/branding_patch.json` and `organization_create.json`: every body through
//!   `PATCH /api/v2/branding` and `POST /api/v2/organizations` alike.

use std::path::{Path, PathBuf};

use crate::support::{api, Api};
use http::{Method, StatusCode};
use serde_json::{json, Value};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl Api {
    /// `method uri` with `body` as JSON; the answer's status and body, which must be JSON unless
    /// empty.
    async fn exchange(&self, method: Method, uri: &str, body: &Value) -> (StatusCode, Value) {
        let answer = self.send(method, uri, Some(body.clone())).await;
        let value = if answer.raw.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&answer.raw).expect("JSON answer")
        };
        (answer.status, value)
    }
}

/// The evaluation case files, sorted.
fn evaluation_case_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(testdata().join("cases"))
        .expect("testdata/cases")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn evaluation_cases_through_the_dry_run_endpoint() {
    let api = api().await;
    let files = evaluation_case_files();
    assert!(files.len() >= 5, "expected the evaluation case files");
    let mut checked = 0;
    for file in files {
        let case_file = read_json(&file);
        // The dry run takes the records themselves; a file may hold the list envelope.
        let rules = match &case_file["rules"] {
            Value::Object(envelope) => envelope["network_acls"].clone(),
            rules => rules.clone(),
        };
        let lists = case_file
            .get("managed_lists")
            .cloned()
            .unwrap_or_else(|| json!({}));
        for case in case_file["cases"].as_array().expect("cases") {
            let name = case["name"].as_str().unwrap_or("?");
            let (status, body) = api
                .exchange(
                    Method::POST,
                    "/_netacl/v1/dry-run",
                    &json!({"request": case["request"], "network_acls": rules,
                            "managed_lists": lists}),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{}: {name}: {body}", file.display());
            assert_eq!(body["source"], "body");
            assert_eq!(
                body["outcome"],
                case["expect"],
                "{}: {name}",
                file.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} evaluation cases ran");
}

/// The create body as the API stores it: the default priority filled in.
fn as_stored(body: &Value) -> Value {
    let mut stored = body.clone();
    if stored.get("priority").is_none() {
        stored["priority"] = json!(50);
    }
    stored
}

fn without_server_fields(record: &Value) -> Value {
    let mut record = record.clone();
    if let Value::Object(fields) = &mut record {
        fields.remove("id");
        fields.remove("created_at");
        fields.remove("updated_at");
    }
    record
}

#[tokio::test]
async fn validation_cases_through_create() {
    let api = api().await;
    let cases = read_json(&testdata().join("validation/network_acl_create.json"));
    let cases = cases.as_array().expect("cases");
    assert!(!cases.is_empty());
    let (mut accepted, mut refused) = (0, 0);
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let (status, answer) = api
            .exchange(Method::POST, "/api/v2/network-acls", &case["body"])
            .await;
        match case["error"].as_str() {
            None => {
                assert_eq!(status, StatusCode::CREATED, "{name}: {answer}");
                assert_eq!(
                    without_server_fields(&answer),
                    as_stored(&case["body"]),
                    "{name}: stored as sent"
                );
                // Free the priority for the next case.
                let id = answer["id"].as_str().expect("id");
                let (status, _) = api
                    .exchange(
                        Method::DELETE,
                        &format!("/api/v2/network-acls/{id}"),
                        &Value::Null,
                    )
                    .await;
                assert_eq!(status, StatusCode::NO_CONTENT, "{name}: delete");
                accepted += 1;
            }
            Some(message) => {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {answer}");
                assert_eq!(answer["errorCode"], "invalid_body", "{name}");
                assert_eq!(answer["message"], message, "{name}");
                refused += 1;
            }
        }
    }
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
    // Nothing refused was written, and every accepted rule was deleted again.
    let (status, list) = api
        .exchange(Method::GET, "/api/v2/network-acls", &Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn validation_cases_through_patch() {
    let api = api().await;
    let base = json!({
        "description": "patched by every case", "active": true, "priority": 40,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": ["192.0.2.0/24"]}}
    });
    let (status, created) = api
        .exchange(Method::POST, "/api/v2/network-acls", &base)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let uri = format!(
        "/api/v2/network-acls/{}",
        created["id"].as_str().expect("id")
    );
    let cases = read_json(&testdata().join("validation/network_acl_patch.json"));
    let cases = cases.as_array().expect("cases");
    assert!(!cases.is_empty());
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let (_, before) = api.exchange(Method::GET, &uri, &Value::Null).await;
        let (status, answer) = api.exchange(Method::PATCH, &uri, &case["body"]).await;
        match case["error"].as_str() {
            None => {
                assert_eq!(status, StatusCode::OK, "{name}: {answer}");
                // Every field the patch names now holds the patched value; the others kept theirs.
                for (field, value) in before.as_object().expect("record") {
                    let expected = case["body"].get(field).unwrap_or(value);
                    if field != "updated_at" {
                        assert_eq!(&answer[field], expected, "{name}: {field}");
                    }
                }
            }
            Some(message) => {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {answer}");
                assert_eq!(answer["errorCode"], "invalid_body", "{name}");
                assert_eq!(answer["message"], message, "{name}");
                let (_, after) = api.exchange(Method::GET, &uri, &Value::Null).await;
                assert_eq!(after, before, "{name}: a refused patch changes nothing");
            }
        }
    }
}

#[tokio::test]
async fn validation_cases_through_managed_list_put() {
    let api = api().await;
    let uri = "/_netacl/v1/managed-lists/auth0.vpn";
    let cases = read_json(&testdata().join("validation/managed_list.json"));
    let cases = cases.as_array().expect("cases");
    let (mut accepted, mut refused) = (0, 0);
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let (_, before) = api.exchange(Method::GET, uri, &Value::Null).await;
        let (status, answer) = api.exchange(Method::PUT, uri, &case["body"]).await;
        match case["error"].as_str() {
            None => {
                assert_eq!(status, StatusCode::OK, "{name}: {answer}");
                assert_eq!(
                    answer["items"], case["body"]["items"],
                    "{name}: stored as sent"
                );
                assert_eq!(answer["source"], "api", "{name}");
                let (_, after) = api.exchange(Method::GET, uri, &Value::Null).await;
                assert_eq!(after, answer, "{name}: read back");
                accepted += 1;
            }
            Some(message) => {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {answer}");
                assert_eq!(answer["errorCode"], "invalid_body", "{name}");
                assert_eq!(answer["message"], message, "{name}");
                let (_, after) = api.exchange(Method::GET, uri, &Value::Null).await;
                assert_eq!(after, before, "{name}: a refused write changes nothing");
                refused += 1;
            }
        }
    }
    assert!(
        accepted > 0 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

#[tokio::test]
async fn validation_cases_through_branding() {
    let api = api().await;
    let cases = read_json(&testdata().join("validation/branding_patch.json"));
    let cases = cases.as_array().expect("cases");
    assert!(!cases.is_empty());
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let (_, before) = api
            .exchange(Method::GET, "/api/v2/branding", &Value::Null)
            .await;
        let (status, answer) = api
            .exchange(Method::PATCH, "/api/v2/branding", &case["body"])
            .await;
        match case["error"].as_str() {
            None => {
                assert_eq!(status, StatusCode::OK, "{name}: {answer}");
                // Every member the patch names now holds the patched value.
                for (field, value) in case["body"].as_object().expect("object") {
                    match value {
                        Value::Object(inner) => {
                            for (key, value) in inner {
                                assert_eq!(&answer[field][key], value, "{name}: {field}.{key}");
                            }
                        }
                        value => assert_eq!(&answer[field], value, "{name}: {field}"),
                    }
                }
            }
            Some(message) => {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {answer}");
                assert_eq!(answer["errorCode"], "invalid_body", "{name}");
                assert_eq!(answer["message"], message, "{name}");
                let (_, after) = api
                    .exchange(Method::GET, "/api/v2/branding", &Value::Null)
                    .await;
                assert_eq!(after, before, "{name}: a refused patch changes nothing");
            }
        }
    }
}

#[tokio::test]
async fn validation_cases_through_organizations() {
    let api = api().await;
    let cases = read_json(&testdata().join("validation/organization_create.json"));
    let cases = cases.as_array().expect("cases");
    assert!(!cases.is_empty());
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        let (status, answer) = api
            .exchange(Method::POST, "/api/v2/organizations", &case["body"])
            .await;
        match case["error"].as_str() {
            None => {
                assert_eq!(status, StatusCode::CREATED, "{name}: {answer}");
                for (field, value) in case["body"].as_object().expect("object") {
                    assert_eq!(&answer[field], value, "{name}: {field}");
                }
            }
            Some(message) => {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {answer}");
                assert_eq!(answer["errorCode"], "invalid_body", "{name}");
                assert_eq!(answer["message"], message, "{name}");
            }
        }
    }
}

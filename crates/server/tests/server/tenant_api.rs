//! The tenant endpoints through the router (`oneshot`, no socket): organizations, group members,
//! user sessions, branding and the directory import — every constraint accepted and refused with
//! its exact status and body, paging to the end (also while records are added), scopes, forms,
//! persistence across a restart and the OpenAPI document.

use std::collections::HashSet;

use crate::support::{api, api_with, config, scoped_token, start_in, Answer, Api, DOMAIN};
use axum::body::Body;
use http::{Method, Request, StatusCode};
use netacl_server::rate_limit::RateLimitConfig;
use netacl_server::ServerConfig;
use serde_json::{json, Value};
use tower::ServiceExt;

const T: &str = "2026-02-03T04:05:06.789Z";
const DB: &str = "con_Db00000000000001";
const SAML: &str = "con_Saml000000000002";
const GROUP: &str = "grp_2ZbGfPu9TCHmbkDc";
const OTHER_GROUP: &str = "grp_3ZbGfPu9TCHmbkDcXy";

/// `api()` with the small directory of [`directory()`] imported.
async fn api_with_directory() -> Api {
    let api = api().await;
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/directory/import",
            Some(directory()),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    api
}

impl Api {
    async fn import(&self, data: Value) -> Value {
        let answer = self
            .send(Method::POST, "/_netacl/v1/directory/import", Some(data))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        answer.body
    }
}

/// The error body of the compat doc, with its exact message.
fn assert_error(answer: &Answer, status: u16, code: &str, message: &str) {
    assert_eq!(answer.status.as_u16(), status, "{}", answer.body);
    assert_eq!(
        answer.content_type.as_deref(),
        Some("application/json; charset=utf-8")
    );
    let reason = StatusCode::from_u16(status)
        .expect("status")
        .canonical_reason()
        .expect("reason");
    assert_eq!(
        answer.body,
        json!({"statusCode": status, "error": reason, "message": message, "errorCode": code})
    );
}

fn session(id: &str, user: &str) -> Value {
    json!({"id": id, "user_id": user, "created_at": T, "updated_at": T, "authenticated_at": T,
           "idle_expires_at": T, "expires_at": T, "last_interacted_at": T,
           "device": {"initial_user_agent": "curl/8", "initial_ip": "192.0.2.1", "initial_asn": "64500",
                      "last_user_agent": "curl/8", "last_ip": "192.0.2.2", "last_asn": "64501"},
           "clients": [{"client_id": "cli1"}],
           "authentication": {"methods": [{"name": "pwd", "timestamp": T, "type": "password"}]},
           "cookie": {"mode": "non-persistent"}, "session_metadata": {"k": "v"}})
}

fn user_member(group: &str, user: &str) -> Value {
    json!({"group_id": group, "id": user, "member_type": "user", "type": "connection",
           "connection_id": DB, "created_at": T})
}

/// Two connections, users `auth0|123` (three sessions) and `auth0|0`..`auth0|9`, a group with
/// those ten users and a nested group.
fn directory() -> Value {
    let mut users: Vec<Value> = (0..10)
        .map(|i| json!({"user_id": format!("auth0|{i}"), "name": format!("User {i}")}))
        .collect();
    users.push(json!({"user_id": "auth0|123", "email": "u123@example.com", "created_at": T}));
    let mut members: Vec<Value> = (0..10)
        .map(|i| user_member(GROUP, &format!("auth0|{i}")))
        .collect();
    members.push(
        json!({"group_id": GROUP, "id": OTHER_GROUP, "member_type": "group",
                        "type": "tenant", "created_at": T}),
    );
    json!({
        "connections": [{"id": DB, "name": "Username-Password-Authentication", "strategy": "auth0"},
                        {"id": SAML, "name": "acme-saml", "strategy": "samlp"}],
        "users": users,
        "groups": [{"id": GROUP, "name": "eng", "created_at": T}, {"id": OTHER_GROUP, "name": "ops"}],
        "members": members,
        "sessions": [session("s1", "auth0|123"), session("s2", "auth0|123"), session("s3", "auth0|123")]
    })
}

fn fixture_file() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/directory.json");
    let text = std::fs::read_to_string(path).expect("testdata/directory.json (gen_directory.py)");
    serde_json::from_str(&text).expect("fixture JSON")
}

// ---------------------------------------------------------------------------------------
// Organizations

#[tokio::test]
async fn organization_create_answers_201_with_the_stored_organization() {
    let api = api_with_directory().await;
    let body = json!({
        "name": "acme",
        "display_name": "Acme Corporation",
        "branding": {"logo_url": "https://cdn.acme.example/logo.png",
                     "colors": {"primary": "#0059d6", "page_background": "#FFF"}},
        "metadata": {"tier": "gold", "region": null},
        "enabled_connections": [
            {"connection_id": DB, "assign_membership_on_login": true},
            {"connection_id": SAML, "show_as_button": false, "is_signup_enabled": true}
        ],
        "token_quota": {"client_credentials": {"enforce": true, "per_day": 1000, "per_hour": 100}}
    });
    let answer = api
        .send(Method::POST, "/api/v2/organizations", Some(body.clone()))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let org = answer.body;
    let id = org["id"].as_str().expect("id");
    assert!(
        id.len() == 20
            && id.starts_with("org_")
            && id[4..].bytes().all(|c| c.is_ascii_alphanumeric()),
        "{id}"
    );
    for key in [
        "name",
        "display_name",
        "branding",
        "metadata",
        "token_quota",
    ] {
        assert_eq!(org[key], body[key], "{key}");
    }
    assert_eq!(
        org["enabled_connections"],
        json!([
            {"connection_id": DB, "assign_membership_on_login": true, "show_as_button": true,
             "is_signup_enabled": false,
             "connection": {"name": "Username-Password-Authentication", "strategy": "auth0"}},
            {"connection_id": SAML, "assign_membership_on_login": false, "show_as_button": false,
             "is_signup_enabled": true, "connection": {"name": "acme-saml", "strategy": "samlp"}}
        ])
    );
    // A minimal body, and ids are distinct.
    let second = api
        .send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "b"})),
        )
        .await;
    assert_eq!(second.status, StatusCode::CREATED);
    assert_eq!(second.body["name"], "b");
    assert_ne!(second.body["id"], org["id"]);
    assert_eq!(second.body.as_object().map(|o| o.len()), Some(2));
}

/// Each case: a body and `None` (accepted: 201) or the exact `invalid_body` message.
fn organization_cases() -> Vec<(Value, Option<String>)> {
    let pv = |reason: &str, path: &str| {
        Some(format!(
            "Payload validation error: '{reason}' on property {path}."
        ))
    };
    let metadata = |n: usize| -> Value {
        Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect())
    };
    let connections = |n: usize| -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"connection_id": format!("con_{i:016}")}))
                .collect(),
        )
    };
    let q = |cc: Value| json!({"client_credentials": cc});
    vec![
        // name
        (json!({"name": "a"}), None),
        (json!({"name": "a".repeat(50)}), None),
        (json!({"name": "acme-corp_2"}), None),
        (json!({"name": "0rg"}), None),
        (json!({}), Some("Payload validation error: 'Missing required property: name'.".into())),
        (json!({"name": ""}), pv("String is too short (0 chars), minimum 1", "name")),
        (json!({"name": "a".repeat(51)}), pv("String is too long (51 chars), maximum 50", "name")),
        (json!({"name": 7}), pv("Expected type string but found type integer", "name")),
        (json!({"name": "Acme"}), pv("Object didn't pass validation for format organization-name: Acme", "name")),
        (json!({"name": "-acme"}), pv("Object didn't pass validation for format organization-name: -acme", "name")),
        (json!({"name": "acme_"}), pv("Object didn't pass validation for format organization-name: acme_", "name")),
        (json!({"name": "org_acme"}), pv("Object didn't pass validation for format organization-name: org_acme", "name")),
        (json!({"name": "ac me"}), pv("Object didn't pass validation for format organization-name: ac me", "name")),
        // display_name
        (json!({"name": "dn1", "display_name": "é".repeat(255)}), None),
        (json!({"name": "dn2", "display_name": ""}), pv("String is too short (0 chars), minimum 1", "display_name")),
        (json!({"name": "dn3", "display_name": "x".repeat(256)}), pv("String is too long (256 chars), maximum 255", "display_name")),
        // branding
        (json!({"name": "br1", "branding": {"logo_url": null}}), None),
        (json!({"name": "br2", "branding": {"logo_url": "https://x.example/l.svg",
            "colors": {"primary": "#abc", "page_background": "#abcd"}}}), None),
        (json!({"name": "br3", "branding": {"colors": {"primary": "#a1b2c3", "page_background": "#a1b2c3d4"}}}), None),
        (json!({"name": "br4", "branding": {"logo_url": "http://x.example/l.svg"}}),
            pv("Object didn't pass validation for format strict-https-uri-or-null: http://x.example/l.svg", "branding.logo_url")),
        (json!({"name": "br5", "branding": {"logo_url": "logo.png"}}),
            pv("Object didn't pass validation for format strict-https-uri-or-null: logo.png", "branding.logo_url")),
        (json!({"name": "br6", "branding": {"colors": {"primary": "#abc"}}}),
            pv("Missing required property: page_background", "branding.colors")),
        (json!({"name": "br7", "branding": {"colors": {"primary": "#ab", "page_background": "#abc"}}}),
            pv("Object didn't pass validation for format html-color: #ab", "branding.colors.primary")),
        (json!({"name": "br8", "branding": {"colors": {"primary": "#abc", "page_background": "white"}}}),
            pv("Object didn't pass validation for format html-color: white", "branding.colors.page_background")),
        (json!({"name": "br9", "branding": {"logo": "https://x.example"}}),
            pv("Additional properties not allowed: logo", "branding")),
        (json!({"name": "br10", "branding": {"colors": {"primary": "#abc", "page_background": "#abc", "text": "#000"}}}),
            pv("Additional properties not allowed: text", "branding.colors")),
        // metadata
        (json!({"name": "md1", "metadata": metadata(25)}), None),
        (json!({"name": "md2", "metadata": {"k": "v".repeat(255), "n": null}}), None),
        (json!({"name": "md3", "metadata": metadata(26)}), pv("Too many properties defined (26), maximum 25", "metadata")),
        (json!({"name": "md4", "metadata": {"k": "v".repeat(256)}}), pv("String is too long (256 chars), maximum 255", "metadata.k")),
        (json!({"name": "md5", "metadata": {"k": 1}}), pv("Expected type string,null but found type integer", "metadata.k")),
        (json!({"name": "md6", "metadata": []}), pv("Expected type object but found type array", "metadata")),
        // enabled_connections
        (json!({"name": "ec1", "enabled_connections": []}), None),
        (json!({"name": "ec2", "enabled_connections": [{"connection_id": DB, "assign_membership_on_login": false,
            "show_as_button": true, "is_signup_enabled": false}]}), None),
        (json!({"name": "ec3", "enabled_connections": connections(11)}), pv("Array is too long (11), maximum 10", "enabled_connections")),
        (json!({"name": "ec4", "enabled_connections": [{"connection_id": DB}, {"connection_id": "con_Missing000000001"}]}),
            pv("Connection con_Missing000000001 does not exist", "enabled_connections[1].connection_id")),
        (json!({"name": "ec5", "enabled_connections": [{"show_as_button": true}]}),
            pv("Missing required property: connection_id", "enabled_connections[0]")),
        (json!({"name": "ec6", "enabled_connections": [{"connection_id": DB, "default": true}]}),
            pv("Additional properties not allowed: default", "enabled_connections[0]")),
        (json!({"name": "ec7", "enabled_connections": [{"connection_id": DB, "show_as_button": "yes"}]}),
            pv("Expected type boolean but found type string", "enabled_connections[0].show_as_button")),
        (json!({"name": "ec8", "enabled_connections": [{"connection_id": DB}, {"connection_id": DB}]}),
            pv(&format!("Connection {DB} is already enabled by enabled_connections[0]"), "enabled_connections[1].connection_id")),
        // token_quota
        (json!({"name": "tq1", "token_quota": q(json!({"enforce": false}))}), None),
        (json!({"name": "tq2", "token_quota": q(json!({"per_day": 1, "per_hour": 2147483647}))}), None),
        (json!({"name": "tq3", "token_quota": q(json!({}))}), pv("Too few properties defined (0), minimum 1", "token_quota.client_credentials")),
        (json!({"name": "tq4", "token_quota": q(json!({"per_day": 0}))}), pv("Value 0 is less than minimum 1", "token_quota.client_credentials.per_day")),
        (json!({"name": "tq5", "token_quota": q(json!({"per_hour": 2147483648u64}))}),
            pv("Value 2147483648 is greater than maximum 2147483647", "token_quota.client_credentials.per_hour")),
        (json!({"name": "tq6", "token_quota": q(json!({"per_day": 1.5}))}), pv("Expected type integer but found type number", "token_quota.client_credentials.per_day")),
        (json!({"name": "tq7", "token_quota": q(json!({"enforce": "yes"}))}), pv("Expected type boolean but found type string", "token_quota.client_credentials.enforce")),
        (json!({"name": "tq8", "token_quota": {}}), pv("Missing required property: client_credentials", "token_quota")),
        (json!({"name": "tq9", "token_quota": q(json!({"per_minute": 5}))}), pv("Additional properties not allowed: per_minute", "token_quota.client_credentials")),
        // unknown properties at the top
        (json!({"name": "un1", "id": "org_0000000000000000"}), Some("Payload validation error: 'Additional properties not allowed: id'.".into())),
    ]
}

#[tokio::test]
async fn every_organization_constraint_is_accepted_and_refused_exactly() {
    let api = api_with_directory().await;
    for (body, expected) in organization_cases() {
        let answer = api
            .send(Method::POST, "/api/v2/organizations", Some(body.clone()))
            .await;
        match expected {
            None => assert_eq!(
                answer.status,
                StatusCode::CREATED,
                "{body}: {}",
                answer.body
            ),
            Some(message) => assert_error(&answer, 400, "invalid_body", &message),
        }
    }
}

#[tokio::test]
async fn a_taken_organization_name_is_409_once_and_for_all() {
    let api = api_with_directory().await;
    let first = api
        .send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "acme"})),
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = api
        .send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "acme", "enabled_connections": [{"connection_id": DB}]})),
        )
        .await;
    assert_error(
        &again,
        409,
        "conflict",
        "An organization with the name acme already exists.",
    );
    // Concurrent creates of one new name: exactly one wins, the database decides.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (router, token) = (api.router.clone(), api.token.clone());
        tasks.push(tokio::spawn(async move {
            let request = Request::post("/api/v2/organizations")
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .body(Body::from(json!({"name": "racer"}).to_string()))
                .expect("request");
            router.oneshot(request).await.expect("infallible").status()
        }));
    }
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.expect("task"));
    }
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CREATED)
            .count(),
        1
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CONFLICT)
            .count(),
        7
    );
}

#[tokio::test]
async fn organization_form_bodies_carry_nested_members() {
    let api = api_with_directory().await;
    let form = format!(
        "name=form-org&display_name=Form+Org&branding[logo_url]=https%3A%2F%2Fx.example%2Fl.png\
         &branding[colors][primary]=%23123&branding[colors][page_background]=%23456\
         &metadata[tier]=silver&token_quota[client_credentials][enforce]=true\
         &token_quota[client_credentials][per_day]=50\
         &enabled_connections=%5B%7B%22connection_id%22%3A%22{DB}%22%7D%5D"
    );
    let answer = api.form(Method::POST, "/api/v2/organizations", &form).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let org = answer.body;
    assert_eq!(org["display_name"], "Form Org");
    assert_eq!(
        org["branding"],
        json!({"logo_url": "https://x.example/l.png", "colors": {"primary": "#123", "page_background": "#456"}})
    );
    assert_eq!(org["metadata"], json!({"tier": "silver"}));
    assert_eq!(
        org["token_quota"],
        json!({"client_credentials": {"enforce": true, "per_day": 50}})
    );
    assert_eq!(
        org["enabled_connections"][0]["connection"]["strategy"],
        "auth0"
    );
    // Coercion is by position: a non-numeric quota stays a string and is refused.
    let answer = api
        .form(
            Method::POST,
            "/api/v2/organizations",
            "name=form-two&token_quota[client_credentials][per_day]=many",
        )
        .await;
    assert_error(
        &answer,
        400,
        "invalid_body",
        "Payload validation error: 'Expected type integer but found type string' on property token_quota.client_credentials.per_day.",
    );
    let answer = api
        .form(
            Method::POST,
            "/api/v2/organizations",
            "name=form-three&owner=me",
        )
        .await;
    assert_error(
        &answer,
        400,
        "invalid_body",
        "Payload validation error: 'Additional properties not allowed: owner'.",
    );
}

#[tokio::test]
async fn enabling_connections_needs_the_organization_connections_scope() {
    let api = api_with_directory().await;
    let creator = scoped_token(&api.service, "creator", &["create:organizations"]);
    let both = scoped_token(
        &api.service,
        "both",
        &["create:organizations", "create:organization_connections"],
    );
    let only_conns = scoped_token(&api.service, "conns", &["create:organization_connections"]);
    let with_conn =
        |name: &str| json!({"name": name, "enabled_connections": [{"connection_id": DB}]});
    let uri = "/api/v2/organizations";

    let plain = api
        .send_as(&creator, Method::POST, uri, Some(json!({"name": "plain"})))
        .await;
    assert_eq!(plain.status, StatusCode::CREATED);
    let empty = api
        .send_as(
            &creator,
            Method::POST,
            uri,
            Some(json!({"name": "empty-list", "enabled_connections": []})),
        )
        .await;
    assert_eq!(empty.status, StatusCode::CREATED);
    let denied = api
        .send_as(&creator, Method::POST, uri, Some(with_conn("denied")))
        .await;
    assert_error(
        &denied,
        403,
        "insufficient_scope",
        "Insufficient scope, expected any of: create:organization_connections",
    );
    let allowed = api
        .send_as(&both, Method::POST, uri, Some(with_conn("denied")))
        .await;
    assert_eq!(allowed.status, StatusCode::CREATED, "the 403 wrote nothing");
    let no_create = api
        .send_as(&only_conns, Method::POST, uri, Some(with_conn("nope")))
        .await;
    assert_error(
        &no_create,
        403,
        "insufficient_scope",
        "Insufficient scope, expected any of: create:organizations",
    );
}

// ---------------------------------------------------------------------------------------
// Group members

async fn all_members(api: &Api, group: &str, take: u64) -> Vec<String> {
    let mut ids = Vec::new();
    let mut uri = format!("/api/v2/groups/{group}/members?take={take}");
    for _ in 0..200 {
        let page = api.get_ok(&uri).await;
        let members = page["members"].as_array().expect("members");
        assert!(members.len() as u64 <= take);
        ids.extend(
            members
                .iter()
                .map(|m| m["id"].as_str().expect("id").to_owned()),
        );
        match page.get("next") {
            Some(next) => {
                uri = format!(
                    "/api/v2/groups/{group}/members?take={take}&from={}",
                    next.as_str().expect("cursor")
                )
            }
            None => return ids,
        }
    }
    panic!("more than 200 pages");
}

#[tokio::test]
async fn group_members_answer_records_pages_and_projections() {
    let api = api_with_directory().await;
    let page = api
        .get_ok(&format!("/api/v2/groups/{GROUP}/members?take=2"))
        .await;
    assert_eq!(
        page["members"][0],
        json!({"id": "auth0|0", "member_type": "user", "type": "connection",
               "connection_id": DB, "created_at": T})
    );
    assert!(page["next"].is_string());
    let all = api.get_ok(&format!("/api/v2/groups/{GROUP}/members")).await;
    assert_eq!(all["members"].as_array().map(Vec::len), Some(11));
    assert!(all.get("next").is_none(), "next is absent on the last page");
    assert_eq!(
        all["members"][10],
        json!({"id": OTHER_GROUP, "member_type": "group", "type": "tenant", "created_at": T})
    );
    // The percent-encoded id is decoded.
    let encoded = api
        .get_ok("/api/v2/groups/grp_%32ZbGfPu9TCHmbkDc/members?take=1")
        .await;
    assert_eq!(encoded["members"][0]["id"], "auth0|0");

    let only = api
        .get_ok(&format!(
            "/api/v2/groups/{GROUP}/members?fields=id,created_at&take=1"
        ))
        .await;
    assert_eq!(
        only["members"][0],
        json!({"id": "auth0|0", "created_at": T})
    );
    let without = api
        .get_ok(&format!(
            "/api/v2/groups/{GROUP}/members?fields=connection_id,created_at&include_fields=false&take=1"
        ))
        .await;
    assert_eq!(
        without["members"][0],
        json!({"id": "auth0|0", "member_type": "user", "type": "connection"})
    );
    let empty = api
        .get_ok(&format!("/api/v2/groups/{GROUP}/members?fields=&take=1"))
        .await;
    assert_eq!(empty["members"][0].as_object().map(|o| o.len()), Some(5));
    let at_limit = format!("{},type", ["id"; 84].join(","));
    assert_eq!(at_limit.len(), 256);
    let answer = api
        .get_ok(&format!(
            "/api/v2/groups/{GROUP}/members?fields={at_limit}&take=1"
        ))
        .await;
    assert_eq!(
        answer["members"][0],
        json!({"id": "auth0|0", "type": "connection"})
    );
    let answer = api
        .get_ok(&format!("/api/v2/groups/{GROUP}/members?take=100"))
        .await;
    assert_eq!(answer["members"].as_array().map(Vec::len), Some(11));
}

#[tokio::test]
async fn group_member_requests_are_checked() {
    let api = api_with_directory().await;
    let members = |q: &str| format!("/api/v2/groups/{GROUP}/members?{q}");
    let query_error =
        |answer: &Answer, message: &str| assert_error(answer, 400, "invalid_query_string", message);
    let long = ["id"; 86].join(",");
    let cases: Vec<(String, String)> = vec![
        (members("fields=id,email"), "Query validation error: 'Unknown field \"email\"; the fields are id, member_type, type, connection_id, created_at' on property fields.".into()),
        (members(&format!("fields={long}")), "Query validation error: 'String is too long (257 chars), maximum 256' on property fields.".into()),
        (members("take=0"), "Query validation error: 'Value 0 is less than minimum 1' on property take.".into()),
        (members("take=101"), "Query validation error: 'Value 101 is greater than maximum 100' on property take.".into()),
        (members("include_fields=yes"), "Query validation error: 'Expected type boolean but found type string (\"yes\")' on property include_fields.".into()),
        (members("from=not-a-cursor"), "Query validation error: 'Invalid cursor: pass the `next` value of the previous page' on property from.".into()),
        (members("from=AAAAAAAAAAE%3D"), "Query validation error: 'Invalid cursor: pass the `next` value of the previous page' on property from.".into()),
        (members("page=1"), "Query validation error: 'Additional properties not allowed: page'.".into()),
    ];
    for (uri, message) in cases {
        query_error(&api.send(Method::GET, &uri, None).await, &message);
    }
    for bad in [
        "grp_short",
        "acl_2ZbGfPu9TCHmbkDc8Qv3rL",
        "grp_0ZbGfPu9TCHmbkDc",
        "grp_2ZbGfPu9TCHmbkDc8Qv3rLxy",
    ] {
        let answer = api
            .send(Method::GET, &format!("/api/v2/groups/{bad}/members"), None)
            .await;
        assert_error(
            &answer,
            400,
            "invalid_uri",
            "Path validation error: 'String does not match pattern ^grp_[1-9A-HJ-NP-Za-km-z]{14,22}$' on property id.",
        );
    }
    let unknown = api
        .send(
            Method::GET,
            "/api/v2/groups/grp_9ZbGfPu9TCHmbkDc/members",
            None,
        )
        .await;
    assert_error(
        &unknown,
        404,
        "inexistent_group",
        "The group does not exist.",
    );
    let reader = scoped_token(&api.service, "sessions-only", &["read:sessions"]);
    let denied = api
        .send_as(&reader, Method::GET, &members("take=1"), None)
        .await;
    assert_error(
        &denied,
        403,
        "insufficient_scope",
        "Insufficient scope, expected any of: read:group_members",
    );
}

#[tokio::test]
async fn paging_a_large_group_serves_each_member_once_while_members_are_added() {
    let api = api().await;
    let fixture = fixture_file();
    let report = api.import(fixture.clone()).await;
    assert_eq!(report["updated"], 0);
    let big = fixture["groups"][0]["id"]
        .as_str()
        .expect("group")
        .to_owned();
    let expected: Vec<String> = fixture["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|m| m["group_id"] == big.as_str())
        .map(|m| m["id"].as_str().expect("id").to_owned())
        .collect();
    assert!(expected.len() >= 3000);
    assert_eq!(all_members(&api, &big, 100).await, expected);

    // Page by hand, adding members after the second page: every member exactly once, in
    // insertion order, the new ones at the end.
    let conn = fixture["connections"][2]["id"]
        .as_str()
        .expect("conn")
        .to_owned();
    let mut seen = Vec::new();
    let mut uri = format!("/api/v2/groups/{big}/members?take=97&fields=id");
    for round in 0..100 {
        let page = api.get_ok(&uri).await;
        seen.extend(
            page["members"]
                .as_array()
                .expect("members")
                .iter()
                .map(|m| m["id"].as_str().expect("id").to_owned()),
        );
        if round == 1 || round == 20 {
            let added: Vec<Value> = (0..150)
                .map(|i| json!({"group_id": big, "id": format!("samlp|acme-saml|new{round}-{i}@acme.example"),
                                "member_type": "user", "type": "connection", "connection_id": conn,
                                "created_at": T}))
                .collect();
            let mut data =
                json!({"connections": fixture["connections"], "groups": fixture["groups"]});
            data["members"] = Value::Array(added);
            let report = api.import(data).await;
            assert_eq!(report["inserted"], 150);
        }
        match page.get("next").and_then(Value::as_str) {
            Some(next) => {
                uri = format!("/api/v2/groups/{big}/members?take=97&fields=id&from={next}")
            }
            None => break,
        }
    }
    let mut want = expected.clone();
    for round in [1, 20] {
        want.extend((0..150).map(|i| format!("samlp|acme-saml|new{round}-{i}@acme.example")));
    }
    assert_eq!(seen.len(), want.len());
    assert_eq!(seen, want);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), seen.len());
}

// ---------------------------------------------------------------------------------------
// User sessions

async fn all_sessions(api: &Api, user: &str, take: u64) -> Vec<String> {
    let mut ids = Vec::new();
    let mut uri = format!("/api/v2/users/{user}/sessions?take={take}");
    for _ in 0..200 {
        let page = api.get_ok(&uri).await;
        ids.extend(
            page["sessions"]
                .as_array()
                .expect("sessions")
                .iter()
                .map(|s| s["id"].as_str().expect("id").to_owned()),
        );
        match page.get("next").and_then(Value::as_str) {
            Some(next) => uri = format!("/api/v2/users/{user}/sessions?take={take}&from={next}"),
            None => return ids,
        }
    }
    panic!("more than 200 pages");
}

#[tokio::test]
async fn user_sessions_decode_the_id_and_page_with_totals() {
    let api = api_with_directory().await;
    let page = api.get_ok("/api/v2/users/auth0%7C123/sessions").await;
    assert_eq!(
        page,
        json!({"sessions": [session("s1", "auth0|123"), session("s2", "auth0|123"), session("s3", "auth0|123")]})
    );
    let first = api
        .get_ok("/api/v2/users/auth0%7C123/sessions?take=2&include_totals=true")
        .await;
    assert_eq!(first["total"], 3);
    assert_eq!(first["sessions"].as_array().map(Vec::len), Some(2));
    let next = first["next"].as_str().expect("next");
    let rest = api
        .get_ok(&format!(
            "/api/v2/users/auth0%7C123/sessions?take=2&from={next}"
        ))
        .await;
    assert_eq!(rest, json!({"sessions": [session("s3", "auth0|123")]}));
    let none = api
        .get_ok("/api/v2/users/auth0%7C0/sessions?include_totals=true")
        .await;
    assert_eq!(none, json!({"sessions": [], "total": 0}));

    let unknown = api
        .send(Method::GET, "/api/v2/users/auth0%7Cnobody/sessions", None)
        .await;
    assert_error(&unknown, 404, "inexistent_user", "The user does not exist.");
    for (query, message) in [
        ("take=0", "Query validation error: 'Value 0 is less than minimum 1' on property take."),
        ("take=101", "Query validation error: 'Value 101 is greater than maximum 100' on property take."),
        ("from=%21%21", "Query validation error: 'Invalid cursor: pass the `next` value of the previous page' on property from."),
        ("include_totals=1", "Query validation error: 'Expected type boolean but found type string (\"1\")' on property include_totals."),
        ("fields=id", "Query validation error: 'Additional properties not allowed: fields'."),
    ] {
        let answer = api
            .send(Method::GET, &format!("/api/v2/users/auth0%7C123/sessions?{query}"), None)
            .await;
        assert_error(&answer, 400, "invalid_query_string", message);
    }
    let members_only = scoped_token(&api.service, "members-only", &["read:group_members"]);
    let denied = api
        .send_as(
            &members_only,
            Method::GET,
            "/api/v2/users/auth0%7C123/sessions",
            None,
        )
        .await;
    assert_error(
        &denied,
        403,
        "insufficient_scope",
        "Insufficient scope, expected any of: read:sessions",
    );
}

#[tokio::test]
async fn paging_a_user_with_many_sessions_serves_each_once_while_sessions_are_added() {
    let api = api().await;
    let fixture = fixture_file();
    api.import(fixture.clone()).await;
    let user = fixture["users"][0]["user_id"]
        .as_str()
        .expect("user")
        .to_owned();
    let encoded = user.replace('|', "%7C");
    let expected: Vec<String> = fixture["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter(|s| s["user_id"] == user.as_str())
        .map(|s| s["id"].as_str().expect("id").to_owned())
        .collect();
    assert!(expected.len() >= 1000);
    assert_eq!(all_sessions(&api, &encoded, 100).await, expected);
    let totals = api
        .get_ok(&format!(
            "/api/v2/users/{encoded}/sessions?take=1&include_totals=true"
        ))
        .await;
    assert_eq!(totals["total"], json!(expected.len()));

    let mut seen = Vec::new();
    let mut uri = format!("/api/v2/users/{encoded}/sessions?take=64");
    for round in 0..100 {
        let page = api.get_ok(&uri).await;
        seen.extend(
            page["sessions"]
                .as_array()
                .expect("sessions")
                .iter()
                .map(|s| s["id"].as_str().expect("id").to_owned()),
        );
        if round == 3 {
            let added: Vec<Value> = (0..70)
                .map(|i| session(&format!("late-{i}"), &user))
                .collect();
            let data = json!({"users": [fixture["users"][0]], "sessions": added});
            assert_eq!(api.import(data).await["inserted"], 70);
        }
        match page.get("next").and_then(Value::as_str) {
            Some(next) => uri = format!("/api/v2/users/{encoded}/sessions?take=64&from={next}"),
            None => break,
        }
    }
    let mut want = expected;
    want.extend((0..70).map(|i| format!("late-{i}")));
    assert_eq!(seen, want);
}

// ---------------------------------------------------------------------------------------
// Branding

#[tokio::test]
async fn every_branding_constraint_is_accepted_and_refused_exactly() {
    let api = api().await;
    let pv = |reason: &str, path: &str| {
        Some(format!(
            "Payload validation error: '{reason}' on property {path}."
        ))
    };
    let gradient = |v: Value| json!({"colors": {"page_background": v}});
    let cases: Vec<(Value, Option<String>)> = vec![
        (json!({}), Some("Payload validation error: 'Too few properties defined (0), minimum 1'.".into())),
        (json!({"favicon_url": "https://x.example/f.ico"}), None),
        (json!({"favicon_url": null}), None),
        (json!({"favicon_url": "http://x.example/f.ico"}), pv("Object didn't pass validation for format strict-https-uri-or-null: http://x.example/f.ico", "favicon_url")),
        (json!({"logo_url": "https://x.example/l.png"}), None),
        (json!({"logo_url": null}), None),
        (json!({"logo_url": "ftp://x.example/l.png"}), pv("Object didn't pass validation for format strict-https-uri-or-null: ftp://x.example/l.png", "logo_url")),
        (json!({"logo_url": 5}), pv("Expected type string,null but found type integer", "logo_url")),
        (json!({"font": {"url": "https://x.example/f.woff2"}}), None),
        (json!({"font": {"url": null}}), None),
        (json!({"font": {"url": "https://"}}), pv("Object didn't pass validation for format strict-https-uri-or-null: https://", "font.url")),
        (json!({"font": {"family": "Inter"}}), pv("Additional properties not allowed: family", "font")),
        (json!({"colors": {"primary": "#abc"}}), None),
        (json!({"colors": {"primary": "#abcd"}}), None),
        (json!({"colors": {"primary": "#aabbcc"}}), None),
        (json!({"colors": {"primary": "#aabbccdd"}}), None),
        (json!({"colors": {"primary": null}}), None),
        (json!({"colors": {"primary": "#abcde"}}), pv("Object didn't pass validation for format html-color: #abcde", "colors.primary")),
        (json!({"colors": {"primary": "abc"}}), pv("Object didn't pass validation for format html-color: abc", "colors.primary")),
        (json!({"colors": {"page_background": "#000"}}), None),
        (json!({"colors": {"page_background": null}}), None),
        (gradient(json!({"type": "linear-gradient", "start": "#000", "end": "#ffffff", "angle_deg": 90})), None),
        (gradient(json!({"type": "linear-gradient", "start": "#000", "end": "#fff", "angle_deg": -22.5})), None),
        (gradient(json!({"type": "radial-gradient", "start": "#000", "end": "#fff", "angle_deg": 9})),
            pv("No enum match for: \"radial-gradient\"", "colors.page_background.type")),
        (gradient(json!({"type": "linear-gradient", "start": "#000", "end": "#fff"})),
            pv("Missing required property: angle_deg", "colors.page_background")),
        (gradient(json!({"type": "linear-gradient", "start": "black", "end": "#fff", "angle_deg": 9})),
            pv("Object didn't pass validation for format html-color: black", "colors.page_background.start")),
        (gradient(json!({"type": "linear-gradient", "start": "#000", "end": "#fff", "angle_deg": "9"})),
            pv("Expected type number but found type string", "colors.page_background.angle_deg")),
        (gradient(json!({"type": "linear-gradient", "start": "#000", "end": "#fff", "angle_deg": 9, "stops": 2})),
            pv("Additional properties not allowed: stops", "colors.page_background")),
        (gradient(json!(7)), pv("Expected type string,object,null but found type integer", "colors.page_background")),
        (json!({"colors": {"text": "#000"}}), pv("Additional properties not allowed: text", "colors")),
        (json!({"theme": "dark"}), Some("Payload validation error: 'Additional properties not allowed: theme'.".into())),
    ];
    for (body, expected) in cases {
        let answer = api
            .send(Method::PATCH, "/api/v2/branding", Some(body.clone()))
            .await;
        match expected {
            None => assert_eq!(answer.status, StatusCode::OK, "{body}: {}", answer.body),
            Some(message) => assert_error(&answer, 400, "invalid_body", &message),
        }
    }
}

/// A URI whose eighth byte falls inside a UTF-8 character (`https:/é`) used to panic the
/// handler (`text[..8]`) and drop the connection; as JSON and as a form, in every URI member of
/// branding and of an organization's branding, it is a 400 naming the property.
#[tokio::test]
async fn non_ascii_uris_are_refused_without_a_panic_as_json_and_as_forms() {
    let api = api().await;
    let message = |value: &str, path: &str| {
        format!(
            "Payload validation error: 'Object didn't pass validation for format \
             strict-https-uri-or-null: {value}' on property {path}."
        )
    };
    for value in ["https:/é", "https:/😀", "HTTPS:/ü"] {
        let encoded: String = url_encode(value);
        for (json_body, form, path) in [
            (
                json!({"logo_url": value}),
                format!("logo_url={encoded}"),
                "logo_url",
            ),
            (
                json!({"favicon_url": value}),
                format!("favicon_url={encoded}"),
                "favicon_url",
            ),
            (
                json!({"font": {"url": value}}),
                format!("font[url]={encoded}"),
                "font.url",
            ),
        ] {
            let answer = api
                .send(Method::PATCH, "/api/v2/branding", Some(json_body))
                .await;
            assert_error(&answer, 400, "invalid_body", &message(value, path));
            let answer = api.form(Method::PATCH, "/api/v2/branding", &form).await;
            assert_error(&answer, 400, "invalid_body", &message(value, path));
        }
        let answer = api
            .send(
                Method::POST,
                "/api/v2/organizations",
                Some(json!({"name": "acme", "branding": {"logo_url": value}})),
            )
            .await;
        assert_error(
            &answer,
            400,
            "invalid_body",
            &message(value, "branding.logo_url"),
        );
        let form = format!("name=acme&branding[logo_url]={encoded}");
        let answer = api.form(Method::POST, "/api/v2/organizations", &form).await;
        assert_error(
            &answer,
            400,
            "invalid_body",
            &message(value, "branding.logo_url"),
        );
    }
    assert_eq!(api.get_ok("/api/v2/branding").await, json!({}));
}

/// `application/x-www-form-urlencoded` encoding of `text` (every byte but unreserved ones).
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn branding_patches_merge_and_survive_a_restart() {
    let api = api().await;
    assert_eq!(api.get_ok("/api/v2/branding").await, json!({}));
    let first = api
        .send(
            Method::PATCH,
            "/api/v2/branding",
            Some(json!({"colors": {"primary": "#0059d6", "page_background": "#000"},
                        "logo_url": "https://x.example/l.png", "font": {"url": "https://x.example/f.woff2"}})),
        )
        .await;
    assert_eq!(first.status, StatusCode::OK);
    let second = api
        .send(
            Method::PATCH,
            "/api/v2/branding",
            Some(json!({"colors": {"page_background": {"type": "linear-gradient", "start": "#111", "end": "#222", "angle_deg": 45}},
                        "logo_url": null, "favicon_url": "https://x.example/f.ico"})),
        )
        .await;
    let expected = json!({
        "colors": {"primary": "#0059d6",
                   "page_background": {"type": "linear-gradient", "start": "#111", "end": "#222", "angle_deg": 45}},
        "favicon_url": "https://x.example/f.ico",
        "logo_url": null,
        "font": {"url": "https://x.example/f.woff2"}
    });
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.body, expected);
    // Form bodies.
    let form = api
        .form(
            Method::PATCH,
            "/api/v2/branding",
            "colors[primary]=%23abc&font[url]=https%3A%2F%2Fy.example%2Fg.woff2",
        )
        .await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.body);
    let mut expected = expected;
    expected["colors"]["primary"] = json!("#abc");
    expected["font"]["url"] = json!("https://y.example/g.woff2");
    assert_eq!(form.body, expected);
    // A refused patch changes nothing.
    let refused = api
        .send(
            Method::PATCH,
            "/api/v2/branding",
            Some(json!({"logo_url": "https://ok.example/l.png", "font": {"url": "http://bad.example"}})),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(api.get_ok("/api/v2/branding").await, expected);

    // The same data directory after a restart.
    let (service, token) = start_in(api.dir(), config()).await;
    let restarted = Api::new(service, token);
    assert_eq!(restarted.get_ok("/api/v2/branding").await, expected);

    let reader = scoped_token(&api.service, "branding-reader", &["read:branding"]);
    let denied = api
        .send_as(
            &reader,
            Method::PATCH,
            "/api/v2/branding",
            Some(json!({"logo_url": null})),
        )
        .await;
    assert_error(
        &denied,
        403,
        "insufficient_scope",
        "Insufficient scope, expected any of: update:branding",
    );
}

// ---------------------------------------------------------------------------------------
// Directory import

#[tokio::test]
async fn directory_import_is_idempotent_and_all_or_nothing() {
    let api = api().await;
    let first = api.import(directory()).await;
    assert_eq!(
        first,
        json!({"inserted": 2 + 11 + 2 + 11 + 3, "updated": 0, "unchanged": 0})
    );
    let again = api.import(directory()).await;
    assert_eq!(again, json!({"inserted": 0, "updated": 0, "unchanged": 29}));
    let mut changed = directory();
    changed["users"][0]["name"] = json!("Renamed");
    changed["sessions"][0]["cookie"]["mode"] = json!("persistent");
    assert_eq!(
        api.import(changed).await,
        json!({"inserted": 0, "updated": 2, "unchanged": 27})
    );
    // The update kept the session's place in the list.
    let page = api
        .get_ok("/api/v2/users/auth0%7C123/sessions?take=1")
        .await;
    assert_eq!(page["sessions"][0]["id"], "s1");
    assert_eq!(page["sessions"][0]["cookie"]["mode"], "persistent");

    // A bad record is named, and nothing of the file is written.
    let mut bad = directory();
    bad["users"]
        .as_array_mut()
        .expect("users")
        .push(json!({"user_id": "auth0|fresh"}));
    bad["sessions"]
        .as_array_mut()
        .expect("sessions")
        .push(session("s9", "auth0|x"));
    let answer = api
        .send(Method::POST, "/_netacl/v1/directory/import", Some(bad))
        .await;
    assert_error(
        &answer,
        400,
        "invalid_body",
        "Payload validation error: 'unknown user auth0|x' on property sessions[3].user_id.",
    );
    let clash = json!({
        "users": [{"user_id": "auth0|fresh"}],
        "connections": [{"id": "con_Other00000000003", "name": "acme-saml", "strategy": "samlp"}]
    });
    let answer = api
        .send(Method::POST, "/_netacl/v1/directory/import", Some(clash))
        .await;
    assert_error(
        &answer,
        409,
        "conflict",
        &format!("The import conflicts with stored data: connections[0].name: acme-saml is the name of stored connection {SAML}."),
    );
    let fresh = api
        .send(Method::GET, "/api/v2/users/auth0%7Cfresh/sessions", None)
        .await;
    assert_eq!(fresh.status, StatusCode::NOT_FOUND, "nothing was written");

    let reader = scoped_token(&api.service, "reader", &["read:sessions"]);
    let denied = api
        .send_as(
            &reader,
            Method::POST,
            "/_netacl/v1/directory/import",
            Some(directory()),
        )
        .await;
    assert_error(
        &denied,
        403,
        "insufficient_scope",
        "Insufficient scope, expected any of: create:users",
    );
}

// ---------------------------------------------------------------------------------------
// OpenAPI

#[tokio::test]
async fn the_openapi_document_covers_the_tenant_endpoints_with_closed_bodies() {
    let api = api_with_directory().await;
    let doc = api.get_ok("/_netacl/v1/openapi.json").await;
    let expected = [
        (
            "/api/v2/organizations",
            "post",
            "create:organizations",
            Some("OrganizationCreate"),
        ),
        (
            "/api/v2/groups/{id}/members",
            "get",
            "read:group_members",
            None,
        ),
        (
            "/api/v2/users/{user_id}/sessions",
            "get",
            "read:sessions",
            None,
        ),
        ("/api/v2/branding", "get", "read:branding", None),
        (
            "/api/v2/branding",
            "patch",
            "update:branding",
            Some("BrandingUpdate"),
        ),
        (
            "/_netacl/v1/directory/import",
            "post",
            "create:users",
            Some("DirectoryImport"),
        ),
    ];
    for (path, method, scope, body) in expected {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is documented");
        assert_eq!(op["security"][0]["bearerAuth"], json!([scope]));
        assert!(
            doc["components"]["securitySchemes"]["oAuth2ClientCredentials"]["flows"]
                ["clientCredentials"]["scopes"][scope]
                .is_string(),
            "{scope}"
        );
        if let Some(name) = body {
            let schema = &doc["components"]["schemas"][name];
            assert_eq!(
                op["requestBody"]["content"]["application/json"]["schema"]["$ref"],
                json!(format!("#/components/schemas/{name}"))
            );
            // Closed at every level: each object schema that lists properties refuses others.
            let mut open = Vec::new();
            fn walk(value: &Value, at: String, open: &mut Vec<String>) {
                match value {
                    Value::Object(map) => {
                        if map.contains_key("properties")
                            && map.get("additionalProperties") != Some(&json!(false))
                        {
                            open.push(at.clone());
                        }
                        for (k, v) in map {
                            walk(v, format!("{at}/{k}"), open);
                        }
                    }
                    Value::Array(items) => {
                        for (i, v) in items.iter().enumerate() {
                            walk(v, format!("{at}/{i}"), open);
                        }
                    }
                    _ => {}
                }
            }
            walk(schema, name.to_owned(), &mut open);
            assert!(open.is_empty(), "open object schemas: {open:?}");
        }
        // Documented paths are routed to their handler (not the generic 404 / 405).
        let uri = path
            .replace("{id}", GROUP)
            .replace("{user_id}", "auth0%7C123");
        let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
        let answer = api.send(method, &uri, None).await;
        assert!(
            answer.status != StatusCode::METHOD_NOT_ALLOWED
                && !(answer.status == StatusCode::NOT_FOUND
                    && answer.body.get("errorCode").is_none()),
            "{path}: {}",
            answer.status
        );
    }
    let params = &doc["paths"]["/api/v2/groups/{id}/members"]["get"]["parameters"];
    let names: Vec<&str> = params
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["id", "fields", "include_fields", "from", "take"]);
}

// ---------------------------------------------------------------------------------------
// Rate limits

#[tokio::test]
async fn tenant_endpoints_carry_rate_limit_headers_and_answer_429_past_the_burst() {
    let limited = ServerConfig::new(DOMAIN).with_rate_limit(RateLimitConfig {
        burst: 9,
        per_second: 0.001,
    });
    let api = api_with(limited).await;
    let answers = vec![
        api.send(
            Method::POST,
            "/_netacl/v1/directory/import",
            Some(directory()),
        )
        .await,
        api.send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "rl"})),
        )
        .await,
        api.send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "rl"})),
        )
        .await,
        api.send(
            Method::GET,
            &format!("/api/v2/groups/{GROUP}/members"),
            None,
        )
        .await,
        api.send(
            Method::GET,
            "/api/v2/groups/grp_9ZbGfPu9TCHmbkDc/members",
            None,
        )
        .await,
        api.send(Method::GET, "/api/v2/users/auth0%7C123/sessions", None)
            .await,
        api.send(Method::PATCH, "/api/v2/branding", Some(json!({})))
            .await,
        api.send(
            Method::PATCH,
            "/api/v2/branding",
            Some(json!({"logo_url": null})),
        )
        .await,
        api.send(Method::GET, "/api/v2/branding", None).await,
        api.send(Method::GET, "/api/v2/branding", None).await,
    ];
    let statuses: Vec<u16> = answers.iter().map(|a| a.status.as_u16()).collect();
    assert_eq!(statuses, [200, 201, 409, 200, 404, 200, 400, 200, 200, 429]);
    let mut remaining = Vec::new();
    for answer in &answers {
        answer.assert_rate_limit_headers();
        remaining.push(
            answer.headers["x-ratelimit-remaining"]
                .to_str()
                .expect("header")
                .to_owned(),
        );
    }
    assert_eq!(
        remaining,
        ["8", "7", "6", "5", "4", "3", "2", "1", "0", "0"]
    );
    let limited = answers.last().expect("answers");
    assert_error(
        limited,
        429,
        "too_many_requests",
        "Global limit has been reached",
    );
    assert!(limited.headers.contains_key("retry-after"));
}

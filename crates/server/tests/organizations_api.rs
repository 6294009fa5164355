//! Organizations beyond create through the router (`oneshot`, no socket): list (bare array,
//! offset envelope, checkpoints), get by id and by name, update, delete, an organization's
//! connections in their two views, its client grants, and the tenant's connections, clients and
//! client grants the deploy CLI's organizations handler reads — every answer, every refusal with
//! its exact status and body, every scope, and the deploy CLI's own sequence of calls replayed.
mod support;

use std::collections::HashSet;

use http::{Method, StatusCode};
use netacl_model::Limits;
use netacl_server::auth::MANAGEMENT_SCOPES;
use netacl_server::rate_limit::RateLimitConfig;
use netacl_server::ServerConfig;
use netacl_store::{CredentialStore, SqliteStore, StoredClient, TenantId};
use serde_json::{json, Value};
use support::{api, api_with, scoped_token, Answer, Api, AUDIENCE, CLIENT, DOMAIN, SECRET};

const DB: &str = "con_Db00000000000001";
const SAML: &str = "con_Saml000000000002";
const GOOGLE: &str = "con_Goog000000000003";
const UNKNOWN_ORG: &str = "org_0000000000000000";

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

fn query_error(reason: &str, property: Option<&str>) -> String {
    match property {
        Some(p) => format!("Query validation error: '{reason}' on property {p}."),
        None => format!("Query validation error: '{reason}'."),
    }
}

fn payload_error(reason: &str, property: Option<&str>) -> String {
    match property {
        Some(p) => format!("Payload validation error: '{reason}' on property {p}."),
        None => format!("Payload validation error: '{reason}'."),
    }
}

/// `api()` with three connections imported.
async fn api_with_connections() -> Api {
    let api = api().await;
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/directory/import",
            Some(json!({"connections": [
                {"id": DB, "name": "Username-Password-Authentication", "strategy": "auth0"},
                {"id": SAML, "name": "acme-saml", "strategy": "samlp"},
                {"id": GOOGLE, "name": "google-oauth2", "strategy": "google-oauth2"}
            ]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    api
}

impl Api {
    async fn create_org(&self, body: Value) -> Value {
        let answer = self
            .send(Method::POST, "/api/v2/organizations", Some(body))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        answer.body
    }
}

fn id_of(org: &Value) -> String {
    org["id"].as_str().expect("id").to_owned()
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("array")
        .iter()
        .map(|o| o["name"].as_str().expect("name").to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------
// List

#[tokio::test]
async fn organizations_list_as_an_array_an_envelope_and_checkpoints() {
    let api = api_with_connections().await;
    let created: Vec<String> = (0..7).map(|i| format!("org-{i}")).collect();
    let mut records = Vec::new();
    for name in &created {
        records.push(
            api.create_org(json!({"name": name, "display_name": format!("Org {name}"),
                "enabled_connections": [{"connection_id": DB}]}))
                .await,
        );
    }
    // The records as get answers them: no enabled_connections (a resource of its own).
    let expected: Vec<Value> = records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut()
                .expect("object")
                .shift_remove("enabled_connections");
            r
        })
        .collect();

    let bare = api.get_ok("/api/v2/organizations").await;
    assert_eq!(bare, json!(expected));
    let envelope = api
        .get_ok("/api/v2/organizations?page=1&per_page=3&include_totals=true")
        .await;
    assert_eq!(
        envelope,
        json!({"organizations": expected[3..6], "start": 3, "limit": 3, "total": 7})
    );
    let last = api
        .get_ok("/api/v2/organizations?page=2&per_page=3&include_totals=false")
        .await;
    assert_eq!(last, json!(expected[6..]));
    // Past the end: empty, the total still said.
    assert_eq!(
        api.get_ok("/api/v2/organizations?page=3&per_page=3").await,
        json!([])
    );
    assert_eq!(
        api.get_ok("/api/v2/organizations?page=4294967295&per_page=100&include_totals=true")
            .await,
        json!({"organizations": [], "start": 429496729500u64, "limit": 100, "total": 7})
    );
    assert_eq!(
        api.get_ok("/api/v2/organizations?per_page=0&include_totals=true")
            .await,
        json!({"organizations": [], "start": 0, "limit": 0, "total": 7})
    );

    // Checkpoints, as the SDKs page (include_totals=true&take=N, then from=next).
    for take in [1, 3, 7, 50] {
        let mut seen = Vec::new();
        let mut uri = format!("/api/v2/organizations?include_totals=true&take={take}");
        let mut pages = 0;
        loop {
            let page = api.get_ok(&uri).await;
            pages += 1;
            let orgs = page["organizations"].as_array().expect("organizations");
            assert!(orgs.len() <= take);
            assert!(page.get("total").is_none() && page.get("start").is_none());
            seen.extend(orgs.iter().cloned());
            match page.get("next").and_then(Value::as_str) {
                Some(next) => {
                    assert!(!next.is_empty());
                    uri = format!(
                        "/api/v2/organizations?include_totals=true&take={take}&from={next}"
                    );
                }
                None => break,
            }
        }
        assert_eq!(seen, expected, "take {take}");
        assert_eq!(
            pages,
            7usize.div_ceil(take),
            "take {take}: no empty last page"
        );
    }
    // `from` alone pages by checkpoint with the default take.
    let first = api.get_ok("/api/v2/organizations?take=2").await;
    let next = first["next"].as_str().expect("next");
    let rest = api
        .get_ok(&format!("/api/v2/organizations?from={next}"))
        .await;
    assert_eq!(rest["organizations"], json!(expected[2..]));
    assert!(rest.get("next").is_none());
    // Created after a checkpoint was handed out: served after it.
    let late = api.create_org(json!({"name": "late"})).await;
    let page = api
        .get_ok(&format!("/api/v2/organizations?from={next}&take=50"))
        .await;
    assert_eq!(
        names(&page["organizations"]).last().map(String::as_str),
        Some("late")
    );
    assert_eq!(page["organizations"].as_array().map(Vec::len), Some(6));
    assert_eq!(late["name"], "late");
}

#[tokio::test]
async fn organization_list_queries_are_checked() {
    let api = api_with_connections().await;
    api.create_org(json!({"name": "acme"})).await;
    let foreign = {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b"not an organization checkpoint")
    };
    let invalid_from = query_error(
        "Invalid checkpoint: pass the `next` value of the previous page",
        Some("from"),
    );
    let cases: Vec<(String, String)> = vec![
        (
            "take=0".into(),
            query_error("Value 0 is less than minimum 1", Some("take")),
        ),
        (
            "take=101".into(),
            query_error("Value 101 is greater than maximum 100", Some("take")),
        ),
        (
            "take=ten".into(),
            query_error(
                "Expected type integer but found type string (\"ten\")",
                Some("take"),
            ),
        ),
        (
            "per_page=101".into(),
            query_error("Value 101 is greater than maximum 100", Some("per_page")),
        ),
        (
            "page=-1".into(),
            query_error(
                "Expected type integer but found type string (\"-1\")",
                Some("page"),
            ),
        ),
        (
            "include_totals=yes".into(),
            query_error(
                "Expected type boolean but found type string (\"yes\")",
                Some("include_totals"),
            ),
        ),
        ("from=".into(), invalid_from.clone()),
        ("from=%21%21%21".into(), invalid_from.clone()),
        ("from=AAAAAAAAAAE=".into(), invalid_from.clone()),
        (format!("from={foreign}"), invalid_from.clone()),
        (
            "page=0&take=5".into(),
            query_error(
                "page and per_page cannot be combined with from and take",
                None,
            ),
        ),
        (
            "per_page=5&from=AAAA".into(),
            query_error(
                "page and per_page cannot be combined with from and take",
                None,
            ),
        ),
        (
            "sort=name%3A1".into(),
            query_error("Additional properties not allowed: sort", None),
        ),
        (
            "q=acme".into(),
            query_error("Additional properties not allowed: q", None),
        ),
        (
            "take=5&take=6".into(),
            query_error("Parameter given more than once", Some("take")),
        ),
    ];
    for (query, message) in cases {
        let answer = api
            .send(Method::GET, &format!("/api/v2/organizations?{query}"), None)
            .await;
        assert_error(&answer, 400, "invalid_query_string", &message);
    }
}

// ---------------------------------------------------------------------------------------
// Get, update, delete

#[tokio::test]
async fn organizations_are_read_by_id_and_by_name() {
    let api = api_with_connections().await;
    let org = api
        .create_org(json!({"name": "acme", "display_name": "Acme",
            "branding": {"logo_url": "https://cdn.acme.example/l.png"},
            "metadata": {"tier": "gold", "note": null},
            "enabled_connections": [{"connection_id": SAML}],
            "token_quota": {"client_credentials": {"per_hour": 10}}}))
        .await;
    let id = id_of(&org);
    let mut expected = org.clone();
    expected
        .as_object_mut()
        .expect("object")
        .shift_remove("enabled_connections");
    let by_id = api
        .send(Method::GET, &format!("/api/v2/organizations/{id}"), None)
        .await;
    assert_eq!(by_id.status, StatusCode::OK);
    assert_eq!(
        by_id.content_type.as_deref(),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(by_id.body, expected);
    assert_eq!(
        api.get_ok("/api/v2/organizations/name/acme").await,
        expected
    );

    assert_error(
        &api.send(
            Method::GET,
            &format!("/api/v2/organizations/{UNKNOWN_ORG}"),
            None,
        )
        .await,
        404,
        "inexistent_organization",
        "The organization does not exist.",
    );
    assert_error(
        &api.send(Method::GET, "/api/v2/organizations/name/nobody", None)
            .await,
        404,
        "inexistent_organization",
        "The organization does not exist.",
    );
    for bad in [
        "org_short",
        "acme",
        "org_0000000000000000x",
        "org_00000000000000%2F0",
    ] {
        assert_error(
            &api.send(Method::GET, &format!("/api/v2/organizations/{bad}"), None).await,
            400,
            "invalid_uri",
            "Path validation error: 'String does not match pattern ^org_[a-zA-Z0-9]{16}$' on property id.",
        );
    }
    assert_error(
        &api.send(Method::GET, "/api/v2/organizations/name/Acme", None).await,
        400,
        "invalid_uri",
        "Path validation error: 'Object didn't pass validation for format organization-name: Acme' on property name.",
    );
    let long = "a".repeat(51);
    assert_error(
        &api.send(
            Method::GET,
            &format!("/api/v2/organizations/name/{long}"),
            None,
        )
        .await,
        400,
        "invalid_uri",
        "Path validation error: 'String is too long (51 chars), maximum 50' on property name.",
    );
    assert_error(
        &api.send(
            Method::GET,
            &format!("/api/v2/organizations/{id}?fields=name"),
            None,
        )
        .await,
        400,
        "invalid_query_string",
        &query_error("Additional properties not allowed: fields", None),
    );
}

#[tokio::test]
async fn organization_updates_replace_members_and_refuse_bad_bodies() {
    let api = api_with_connections().await;
    let org = api
        .create_org(json!({"name": "acme", "display_name": "Acme",
            "metadata": {"tier": "gold", "region": "eu"},
            "token_quota": {"client_credentials": {"per_day": 10}},
            "enabled_connections": [{"connection_id": DB}]}))
        .await;
    api.create_org(json!({"name": "taken"})).await;
    let id = id_of(&org);
    let uri = format!("/api/v2/organizations/{id}");

    let answer = api
        .send(
            Method::PATCH,
            &uri,
            Some(json!({"display_name": "Acme Inc",
            "metadata": {"tier": "platinum"},
            "branding": {"colors": {"primary": "#000", "page_background": "#fff"}}})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let updated = json!({"id": id, "name": "acme", "display_name": "Acme Inc",
        "branding": {"colors": {"primary": "#000", "page_background": "#fff"}},
        "metadata": {"tier": "platinum"},
        "token_quota": {"client_credentials": {"per_day": 10}}});
    assert_eq!(answer.body, updated, "metadata is replaced, not merged");
    assert_eq!(api.get_ok(&uri).await, updated);

    // Bad bodies: the create's messages and paths; nothing written.
    let cases = vec![
        (json!({}), payload_error("Too few properties defined (0), minimum 1", None)),
        (json!([]), payload_error("Expected type object but found type array", None)),
        (json!({"id": "org_1111111111111111"}), payload_error("Additional properties not allowed: id", None)),
        (json!({"enabled_connections": []}), payload_error("Additional properties not allowed: enabled_connections", None)),
        (json!({"third_party_client_access": "allow"}), payload_error("Additional properties not allowed: third_party_client_access", None)),
        (json!({"name": "Acme"}), payload_error("Object didn't pass validation for format organization-name: Acme", Some("name"))),
        (json!({"name": "org_acme"}), payload_error("Object didn't pass validation for format organization-name: org_acme", Some("name"))),
        (json!({"name": ""}), payload_error("String is too short (0 chars), minimum 1", Some("name"))),
        (json!({"display_name": ""}), payload_error("String is too short (0 chars), minimum 1", Some("display_name"))),
        (json!({"display_name": null}), payload_error("Expected type string but found type null", Some("display_name"))),
        (json!({"branding": {"logo_url": "http://x.example/l.png"}}),
            payload_error("Object didn't pass validation for format strict-https-uri-or-null: http://x.example/l.png", Some("branding.logo_url"))),
        (json!({"branding": {"colors": {"primary": "#000"}}}),
            payload_error("Missing required property: page_background", Some("branding.colors"))),
        (json!({"metadata": {"k": 5}}), payload_error("Expected type string,null but found type integer", Some("metadata.k"))),
        (json!({"metadata": (0..26).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}),
            payload_error("Too many properties defined (26), maximum 25", Some("metadata"))),
        (json!({"token_quota": {"client_credentials": {}}}),
            payload_error("Too few properties defined (0), minimum 1", Some("token_quota.client_credentials"))),
        (json!({"token_quota": {"client_credentials": {"per_day": 0}}}),
            payload_error("Value 0 is less than minimum 1", Some("token_quota.client_credentials.per_day"))),
        (json!({"token_quota": "none"}), payload_error("Expected type object but found type string", Some("token_quota"))),
        (json!({"display_name": "ok", "name": "Bad"}),
            payload_error("Object didn't pass validation for format organization-name: Bad", Some("name"))),
    ];
    for (body, message) in cases {
        let answer = api.send(Method::PATCH, &uri, Some(body.clone())).await;
        assert_error(&answer, 400, "invalid_body", &message);
    }
    assert_eq!(api.get_ok(&uri).await, updated);

    // A taken name: 409, nothing written; a free one renames.
    assert_error(
        &api.send(
            Method::PATCH,
            &uri,
            Some(json!({"name": "taken", "display_name": "X"})),
        )
        .await,
        409,
        "conflict",
        "An organization with the name taken already exists.",
    );
    assert_eq!(api.get_ok(&uri).await, updated);
    let renamed = api
        .send(
            Method::PATCH,
            &uri,
            Some(json!({"name": "acme-two", "token_quota": null})),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    assert_eq!(renamed.body["name"], "acme-two");
    assert!(renamed.body.get("token_quota").is_none());
    assert_eq!(
        api.get_ok("/api/v2/organizations/name/acme-two").await["id"],
        json!(id)
    );
    assert_eq!(
        api.send(Method::GET, "/api/v2/organizations/name/acme", None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // The organization's connections are untouched by updates.
    let conns = api.get_ok(&format!("{uri}/enabled_connections")).await;
    assert_eq!(conns.as_array().map(Vec::len), Some(1));

    // A form body; a body of another type; an unknown organization; a malformed id.
    let form = api
        .form(
            Method::PATCH,
            &uri,
            "display_name=From+a+form&metadata[tier]=silver",
        )
        .await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.body);
    assert_eq!(form.body["metadata"], json!({"tier": "silver"}));
    assert_eq!(
        api.raw(Method::PATCH, &uri, Some("text/plain"), "display_name=x")
            .await
            .status,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    assert_error(
        &api.send(
            Method::PATCH,
            &format!("/api/v2/organizations/{UNKNOWN_ORG}"),
            Some(json!({"display_name": "x"})),
        )
        .await,
        404,
        "inexistent_organization",
        "The organization does not exist.",
    );
    assert_error(
        &api.send(Method::PATCH, "/api/v2/organizations/org_bad", Some(json!({"display_name": "x"}))).await,
        400,
        "invalid_uri",
        "Path validation error: 'String does not match pattern ^org_[a-zA-Z0-9]{16}$' on property id.",
    );
    assert_error(
        &api.send(
            Method::PATCH,
            &format!("{uri}?force=true"),
            Some(json!({"display_name": "x"})),
        )
        .await,
        400,
        "invalid_query_string",
        &query_error("Additional properties not allowed: force", None),
    );
}

#[tokio::test]
async fn deleting_an_organization_takes_its_connections_and_frees_its_name() {
    let api = api_with_connections().await;
    let org = api
        .create_org(json!({"name": "acme", "enabled_connections": [{"connection_id": DB}, {"connection_id": SAML}]}))
        .await;
    let other = api
        .create_org(json!({"name": "other", "enabled_connections": [{"connection_id": DB}]}))
        .await;
    let uri = format!("/api/v2/organizations/{}", id_of(&org));
    let answer = api.send(Method::DELETE, &uri, None).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert!(answer.raw.is_empty());
    for path in ["", "/enabled_connections", "/connections", "/client-grants"] {
        assert_error(
            &api.send(Method::GET, &format!("{uri}{path}"), None).await,
            404,
            "inexistent_organization",
            "The organization does not exist.",
        );
    }
    assert_error(
        &api.send(Method::DELETE, &uri, None).await,
        404,
        "inexistent_organization",
        "The organization does not exist.",
    );
    // The other organization and the tenant's connections are untouched; the name is free.
    let others = api
        .get_ok(&format!(
            "/api/v2/organizations/{}/enabled_connections",
            id_of(&other)
        ))
        .await;
    assert_eq!(others.as_array().map(Vec::len), Some(1));
    let connections = api.get_ok("/api/v2/connections").await;
    assert_eq!(connections.as_array().map(Vec::len), Some(3));
    api.create_org(json!({"name": "acme"})).await;
}

// ---------------------------------------------------------------------------------------
// An organization's connections

#[tokio::test]
async fn organization_connections_are_two_views_of_the_same_rows() {
    let api = api_with_connections().await;
    let org = api
        .create_org(json!({"name": "acme", "enabled_connections": [
            {"connection_id": DB, "assign_membership_on_login": true}
        ]}))
        .await;
    let base = format!("/api/v2/organizations/{}", id_of(&org));
    let db_enabled = json!({"connection_id": DB, "assign_membership_on_login": true,
        "show_as_button": true, "is_signup_enabled": false,
        "connection": {"name": "Username-Password-Authentication", "strategy": "auth0"}});
    let db_all = json!({"connection_id": DB, "assign_membership_on_login": true,
        "show_as_button": true, "is_signup_enabled": false, "is_enabled": true,
        "connection": {"name": "Username-Password-Authentication", "strategy": "auth0"}});
    assert_eq!(
        api.get_ok(&format!("{base}/enabled_connections")).await,
        json!([db_enabled])
    );
    assert_eq!(
        api.get_ok(&format!("{base}/connections")).await,
        json!([db_all])
    );

    // Added through the enabled view: enabled, visible in both.
    let added = api
        .send(
            Method::POST,
            &format!("{base}/enabled_connections"),
            Some(json!({"connection_id": SAML, "show_as_button": false})),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    let saml_enabled = json!({"connection_id": SAML, "assign_membership_on_login": false,
        "show_as_button": false, "is_signup_enabled": false,
        "connection": {"name": "acme-saml", "strategy": "samlp"}});
    assert_eq!(added.body, saml_enabled);
    // Added through the full view, disabled, named, with an access level: only in that view.
    let added = api
        .send(Method::POST, &format!("{base}/connections"),
            Some(json!({"connection_id": GOOGLE, "is_enabled": false,
                "organization_connection_name": "Google", "organization_access_level": "readonly"})))
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    let google_all = json!({"connection_id": GOOGLE, "assign_membership_on_login": false,
        "show_as_button": true, "is_signup_enabled": false, "is_enabled": false,
        "organization_connection_name": "Google", "organization_access_level": "readonly",
        "connection": {"name": "google-oauth2", "strategy": "google-oauth2"}});
    assert_eq!(added.body, google_all);

    let enabled = api
        .get_ok(&format!("{base}/enabled_connections?include_totals=true"))
        .await;
    assert_eq!(
        enabled,
        json!({"enabled_connections": [db_enabled, saml_enabled], "start": 0, "limit": 50, "total": 2})
    );
    let all = api
        .get_ok(&format!(
            "{base}/connections?page=0&per_page=50&include_totals=true"
        ))
        .await;
    assert_eq!(all["total"], 3);
    let ids: Vec<&str> = all["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| c["connection_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [DB, SAML, GOOGLE], "in the order they were added");
    assert_eq!(
        api.get_ok(&format!("{base}/connections?is_enabled=false"))
            .await,
        json!([google_all])
    );
    assert_eq!(
        api.get_ok(&format!(
            "{base}/connections?is_enabled=true&include_totals=true&per_page=1&page=1"
        ))
        .await["connections"][0]["connection_id"],
        json!(SAML)
    );
    // Offset pages to the end, as the SDKs page (until an empty page).
    for page in 0..4 {
        let one = api
            .get_ok(&format!(
                "{base}/connections?page={page}&per_page=1&include_totals=true"
            ))
            .await;
        let got = one["connections"].as_array().expect("connections").len();
        assert_eq!(got, usize::from(page < 3), "page {page}");
        assert_eq!(one["total"], 3);
    }

    // One connection, per view.
    assert_eq!(
        api.get_ok(&format!("{base}/connections/{GOOGLE}")).await,
        google_all
    );
    assert_error(
        &api.send(
            Method::GET,
            &format!("{base}/enabled_connections/{GOOGLE}"),
            None,
        )
        .await,
        404,
        "inexistent_connection",
        "The connection is not enabled for the organization.",
    );
    assert_eq!(
        api.get_ok(&format!("{base}/enabled_connections/{SAML}"))
            .await,
        saml_enabled
    );

    // Updates: the enabled view cannot reach a disabled connection nor set is_enabled.
    assert_error(
        &api.send(
            Method::PATCH,
            &format!("{base}/enabled_connections/{GOOGLE}"),
            Some(json!({"show_as_button": false})),
        )
        .await,
        404,
        "inexistent_connection",
        "The connection is not enabled for the organization.",
    );
    let enabled_now = api
        .send(Method::PATCH, &format!("{base}/connections/{GOOGLE}"),
            Some(json!({"is_enabled": true, "organization_connection_name": null, "is_signup_enabled": true})))
        .await;
    assert_eq!(enabled_now.status, StatusCode::OK, "{}", enabled_now.body);
    assert_eq!(
        enabled_now.body,
        json!({"connection_id": GOOGLE, "assign_membership_on_login": false,
            "show_as_button": true, "is_signup_enabled": true, "is_enabled": true,
            "organization_access_level": "readonly",
            "connection": {"name": "google-oauth2", "strategy": "google-oauth2"}})
    );
    let through_enabled = api
        .send(
            Method::PATCH,
            &format!("{base}/enabled_connections/{GOOGLE}"),
            Some(json!({"assign_membership_on_login": true})),
        )
        .await;
    assert_eq!(through_enabled.status, StatusCode::OK);
    assert_eq!(through_enabled.body["assign_membership_on_login"], true);
    assert!(through_enabled.body.get("is_enabled").is_none());
    // An empty body changes nothing (the deploy CLI sends one).
    let unchanged = api
        .send(
            Method::PATCH,
            &format!("{base}/connections/{GOOGLE}"),
            Some(json!({})),
        )
        .await;
    assert_eq!(unchanged.status, StatusCode::OK);
    assert_eq!(unchanged.body["assign_membership_on_login"], true);
    assert_eq!(unchanged.body["is_signup_enabled"], true);

    // Added twice, through either view: 409, nothing written.
    for view in ["enabled_connections", "connections"] {
        assert_error(
            &api.send(
                Method::POST,
                &format!("{base}/{view}"),
                Some(json!({"connection_id": DB})),
            )
            .await,
            409,
            "conflict",
            "The connection is already a connection of the organization.",
        );
    }
    // Disabled, then removed: only the full view reaches it.
    api.send(
        Method::PATCH,
        &format!("{base}/connections/{DB}"),
        Some(json!({"is_enabled": false})),
    )
    .await;
    assert_error(
        &api.send(
            Method::DELETE,
            &format!("{base}/enabled_connections/{DB}"),
            None,
        )
        .await,
        404,
        "inexistent_connection",
        "The connection is not enabled for the organization.",
    );
    let removed = api
        .send(Method::DELETE, &format!("{base}/connections/{DB}"), None)
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    assert_error(
        &api.send(Method::DELETE, &format!("{base}/connections/{DB}"), None)
            .await,
        404,
        "inexistent_connection",
        "The connection is not a connection of the organization.",
    );
    let removed = api
        .send(
            Method::DELETE,
            &format!("{base}/enabled_connections/{SAML}"),
            None,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let left = api.get_ok(&format!("{base}/connections")).await;
    assert_eq!(left.as_array().map(Vec::len), Some(1));
    // Re-added after removal: at the end, with the defaults.
    let back = api
        .send(
            Method::POST,
            &format!("{base}/connections"),
            Some(json!({"connection_id": DB})),
        )
        .await;
    assert_eq!(back.status, StatusCode::CREATED);
    assert_eq!(back.body["assign_membership_on_login"], false);
    let ids: Vec<Value> = api
        .get_ok(&format!("{base}/connections"))
        .await
        .as_array()
        .expect("array")
        .iter()
        .map(|c| c["connection_id"].clone())
        .collect();
    assert_eq!(ids, [json!(GOOGLE), json!(DB)]);
}

#[tokio::test]
async fn organization_connection_requests_are_checked() {
    let api = api_with_connections().await;
    let org = api.create_org(json!({"name": "acme"})).await;
    let base = format!("/api/v2/organizations/{}", id_of(&org));
    let cases: Vec<(&str, Value, String)> = vec![
        (
            "enabled_connections",
            json!({}),
            payload_error("Missing required property: connection_id", None),
        ),
        (
            "enabled_connections",
            json!({"connection_id": DB, "is_enabled": true}),
            payload_error("Additional properties not allowed: is_enabled", None),
        ),
        (
            "enabled_connections",
            json!({"connection_id": DB, "organization_connection_name": "x"}),
            payload_error(
                "Additional properties not allowed: organization_connection_name",
                None,
            ),
        ),
        (
            "enabled_connections",
            json!({"connection_id": 5}),
            payload_error(
                "Expected type string but found type integer",
                Some("connection_id"),
            ),
        ),
        (
            "enabled_connections",
            json!({"connection_id": "x".repeat(51)}),
            payload_error(
                "String is too long (51 chars), maximum 50",
                Some("connection_id"),
            ),
        ),
        (
            "enabled_connections",
            json!({"connection_id": DB, "show_as_button": "yes"}),
            payload_error(
                "Expected type boolean but found type string",
                Some("show_as_button"),
            ),
        ),
        (
            "enabled_connections",
            json!({"connection_id": "con_Missing000000001"}),
            payload_error(
                "Connection con_Missing000000001 does not exist",
                Some("connection_id"),
            ),
        ),
        (
            "connections",
            json!({"connection_id": DB, "is_enabled": null}),
            payload_error(
                "Expected type boolean but found type null",
                Some("is_enabled"),
            ),
        ),
        (
            "connections",
            json!({"connection_id": DB, "organization_access_level": "admin"}),
            payload_error(
                "No enum match for: \"admin\"",
                Some("organization_access_level"),
            ),
        ),
        (
            "connections",
            json!({"connection_id": DB, "organization_connection_name": ""}),
            payload_error(
                "String is too short (0 chars), minimum 1",
                Some("organization_connection_name"),
            ),
        ),
        (
            "connections",
            json!({"connection_id": DB, "organization_member_access_level": "full"}),
            payload_error(
                "Additional properties not allowed: organization_member_access_level",
                None,
            ),
        ),
        (
            "connections",
            json!([{"connection_id": DB}]),
            payload_error("Expected type object but found type array", None),
        ),
    ];
    for (view, body, message) in cases {
        let answer = api
            .send(Method::POST, &format!("{base}/{view}"), Some(body.clone()))
            .await;
        assert_error(&answer, 400, "invalid_body", &message);
    }
    assert_eq!(
        api.get_ok(&format!("{base}/connections")).await,
        json!([]),
        "nothing written"
    );
    for view in ["enabled_connections", "connections"] {
        let answer = api
            .send(
                Method::POST,
                &format!("{base}/{view}"),
                Some(json!({"connection_id": SAML})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED);
        api.send(Method::DELETE, &format!("{base}/{view}/{SAML}"), None)
            .await;
    }
    api.send(
        Method::POST,
        &format!("{base}/connections"),
        Some(json!({"connection_id": DB})),
    )
    .await;
    let patches: Vec<(&str, Value, String)> = vec![
        (
            "enabled_connections",
            json!({"is_enabled": false}),
            payload_error("Additional properties not allowed: is_enabled", None),
        ),
        (
            "enabled_connections",
            json!({"connection_id": SAML}),
            payload_error("Additional properties not allowed: connection_id", None),
        ),
        (
            "enabled_connections",
            json!({"show_as_button": null}),
            payload_error(
                "Expected type boolean but found type null",
                Some("show_as_button"),
            ),
        ),
        (
            "connections",
            json!({"is_enabled": "no"}),
            payload_error(
                "Expected type boolean,null but found type string",
                Some("is_enabled"),
            ),
        ),
        (
            "connections",
            json!({"organization_access_level": 3}),
            payload_error(
                "Expected type string,null but found type integer",
                Some("organization_access_level"),
            ),
        ),
        (
            "connections",
            json!({"organization_connection_name": "x".repeat(129)}),
            payload_error(
                "String is too long (129 chars), maximum 128",
                Some("organization_connection_name"),
            ),
        ),
    ];
    for (view, body, message) in patches {
        let answer = api
            .send(
                Method::PATCH,
                &format!("{base}/{view}/{DB}"),
                Some(body.clone()),
            )
            .await;
        assert_error(&answer, 400, "invalid_body", &message);
    }
    let stored = api.get_ok(&format!("{base}/connections/{DB}")).await;
    assert_eq!(
        stored["show_as_button"], true,
        "refused patches wrote nothing"
    );
    assert_eq!(stored["is_enabled"], true);

    // Paths and queries.
    let long = "c".repeat(51);
    assert_error(
        &api.send(Method::GET, &format!("{base}/connections/{long}"), None).await,
        400,
        "invalid_uri",
        "Path validation error: 'String is too long (51 chars), maximum 50' on property connection_id.",
    );
    assert_error(
        &api.send(
            Method::GET,
            &format!("{base}/connections/con_Nothing00000000"),
            None,
        )
        .await,
        404,
        "inexistent_connection",
        "The connection is not a connection of the organization.",
    );
    assert_error(
        &api.send(
            Method::GET,
            &format!("/api/v2/organizations/{UNKNOWN_ORG}/connections/{DB}"),
            None,
        )
        .await,
        404,
        "inexistent_organization",
        "The organization does not exist.",
    );
    assert_error(
        &api.send(
            Method::POST,
            &format!("/api/v2/organizations/{UNKNOWN_ORG}/enabled_connections"),
            Some(json!({"connection_id": DB})),
        )
        .await,
        404,
        "inexistent_organization",
        "The organization does not exist.",
    );
    assert_error(
        &api.send(Method::GET, "/api/v2/organizations/org_x/enabled_connections", None).await,
        400,
        "invalid_uri",
        "Path validation error: 'String does not match pattern ^org_[a-zA-Z0-9]{16}$' on property id.",
    );
    for (query, message) in [
        (
            "is_enabled=true",
            query_error("Additional properties not allowed: is_enabled", None),
        ),
        (
            "take=5",
            query_error("Additional properties not allowed: take", None),
        ),
        (
            "per_page=101",
            query_error("Value 101 is greater than maximum 100", Some("per_page")),
        ),
    ] {
        assert_error(
            &api.send(
                Method::GET,
                &format!("{base}/enabled_connections?{query}"),
                None,
            )
            .await,
            400,
            "invalid_query_string",
            &message,
        );
    }
    assert_error(
        &api.send(
            Method::GET,
            &format!("{base}/connections?is_enabled=maybe"),
            None,
        )
        .await,
        400,
        "invalid_query_string",
        &query_error(
            "Expected type boolean but found type string (\"maybe\")",
            Some("is_enabled"),
        ),
    );
    // A form body.
    let form = api
        .form(
            Method::PATCH,
            &format!("{base}/connections/{DB}"),
            "is_enabled=false&organization_connection_name=Staff",
        )
        .await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.body);
    assert_eq!(
        (
            form.body["is_enabled"].clone(),
            form.body["organization_connection_name"].clone()
        ),
        (json!(false), json!("Staff"))
    );
}

// ---------------------------------------------------------------------------------------
// The tenant's connections, clients and client grants

/// Registers another client in the store (as a second node or an operator would).
async fn register_client(api: &Api, client_id: &str, scopes: &[&str]) {
    let store = SqliteStore::open(api.dir(), Limits::default()).expect("store");
    store
        .put_client(
            &TenantId::default_tenant(),
            &StoredClient {
                client_id: client_id.into(),
                secret_hash: "never-shown-hash-value".into(),
                scopes: scopes.iter().map(|s| s.to_string()).collect(),
                created_at_ms: 0,
            },
        )
        .await
        .expect("put client");
}

#[tokio::test]
async fn connections_page_by_checkpoint_and_offset_with_filters() {
    let api = api_with_connections().await;
    let all = json!([
        {"id": DB, "name": "Username-Password-Authentication", "strategy": "auth0"},
        {"id": GOOGLE, "name": "google-oauth2", "strategy": "google-oauth2"},
        {"id": SAML, "name": "acme-saml", "strategy": "samlp"}
    ]);
    assert_eq!(api.get_ok("/api/v2/connections").await, all, "in id order");
    let first = api
        .get_ok("/api/v2/connections?include_totals=true&take=2")
        .await;
    assert_eq!(first["connections"], json!(all.as_array().expect("a")[..2]));
    let next = first["next"].as_str().expect("next");
    let second = api
        .get_ok(&format!(
            "/api/v2/connections?include_totals=true&take=2&from={next}"
        ))
        .await;
    assert_eq!(second, json!({"connections": [all[2]]}));
    assert_eq!(
        api.get_ok("/api/v2/connections?take=3").await,
        json!({"connections": all}),
        "a full last page has no next"
    );
    assert_eq!(
        api.get_ok("/api/v2/connections?page=1&per_page=2&include_totals=true")
            .await,
        json!({"connections": [all[2]], "start": 2, "limit": 2, "total": 3})
    );
    assert_eq!(
        api.get_ok("/api/v2/connections?strategy=samlp").await,
        json!([all[2]])
    );
    assert_eq!(
        api.get_ok("/api/v2/connections?name=google-oauth2&fields=id,name")
            .await,
        json!([{"id": GOOGLE, "name": "google-oauth2"}])
    );
    assert_eq!(
        api.get_ok("/api/v2/connections?fields=strategy&include_fields=false&take=1")
            .await["connections"],
        json!([{"id": DB, "name": "Username-Password-Authentication"}])
    );
    for (query, message) in [
        (
            "from=%24%24",
            query_error(
                "Invalid checkpoint: pass the `next` value of the previous page",
                Some("from"),
            ),
        ),
        (
            "from=__8",
            query_error(
                "Invalid checkpoint: pass the `next` value of the previous page",
                Some("from"),
            ),
        ),
        (
            "take=0",
            query_error("Value 0 is less than minimum 1", Some("take")),
        ),
        (
            "fields=options",
            query_error(
                "Unknown field \"options\"; the fields are id, name, strategy",
                Some("fields"),
            ),
        ),
        (
            "strategy=auth0&strategy=samlp",
            query_error("Parameter given more than once", Some("strategy")),
        ),
    ] {
        assert_error(
            &api.send(Method::GET, &format!("/api/v2/connections?{query}"), None)
                .await,
            400,
            "invalid_query_string",
            &message,
        );
    }
}

#[tokio::test]
async fn clients_and_their_grants_answer_without_secrets() {
    let api = api_with_connections().await;
    register_client(&api, "deploy-cli", &["read:organizations", "read:clients"]).await;
    let clients = api
        .send(
            Method::GET,
            "/api/v2/clients?page=0&per_page=100&include_totals=true",
            None,
        )
        .await;
    assert_eq!(clients.status, StatusCode::OK);
    let text = String::from_utf8_lossy(&clients.raw).into_owned();
    assert!(
        !text.contains(SECRET) && !text.contains("never-shown-hash-value"),
        "{text}"
    );
    assert!(!text.contains("secret"), "{text}");
    assert_eq!(
        clients.body,
        json!({"clients": [
            {"client_id": "deploy-cli", "name": "deploy-cli", "app_type": "non_interactive",
             "grant_types": ["client_credentials"], "is_first_party": true},
            {"client_id": CLIENT, "name": CLIENT, "app_type": "non_interactive",
             "grant_types": ["client_credentials"], "is_first_party": true}
        ], "start": 0, "limit": 100, "total": 2})
    );
    assert_eq!(
        api.get_ok("/api/v2/clients?fields=client_id&page=1&per_page=1")
            .await,
        json!([{"client_id": CLIENT}])
    );
    assert_error(
        &api.send(Method::GET, "/api/v2/clients?is_global=true", None)
            .await,
        400,
        "invalid_query_string",
        &query_error("Additional properties not allowed: is_global", None),
    );

    let grants = api
        .get_ok("/api/v2/client-grants?include_totals=true&take=50")
        .await;
    let list = grants["client_grants"].as_array().expect("grants");
    assert!(grants.get("next").is_none());
    assert_eq!(list.len(), 2);
    let ours = &list[1];
    assert_eq!(ours["client_id"], CLIENT);
    assert_eq!(ours["audience"], AUDIENCE);
    // Every management scope and netacl's added ones, but not the key material's (issue 28).
    let bootstrap_scopes: Vec<&str> = MANAGEMENT_SCOPES
        .iter()
        .chain(netacl_server::auth::ADDED_SCOPES)
        .copied()
        .filter(|s| *s != netacl_server::KEY_MATERIAL_SCOPE)
        .collect();
    assert_eq!(ours["scope"], json!(bootstrap_scopes));
    assert_eq!(
        list[0]["scope"],
        json!(["read:organizations", "read:clients"])
    );
    let grant_id = ours["id"].as_str().expect("id");
    assert!(
        grant_id.starts_with("cgr_") && grant_id.len() == 20,
        "{grant_id}"
    );
    assert_eq!(
        api.get_ok("/api/v2/client-grants?take=50").await["client_grants"][1]["id"],
        json!(grant_id),
        "grant ids are stable"
    );
    let grants_text = String::from_utf8_lossy(
        &api.send(Method::GET, "/api/v2/client-grants", None)
            .await
            .raw,
    )
    .into_owned();
    assert!(!grants_text.contains("never-shown-hash-value"));
    // Checkpoints, filters, offset pages.
    let first = api.get_ok("/api/v2/client-grants?take=1").await;
    assert_eq!(first["client_grants"][0]["client_id"], "deploy-cli");
    let next = first["next"].as_str().expect("next");
    let second = api
        .get_ok(&format!("/api/v2/client-grants?take=1&from={next}"))
        .await;
    assert_eq!(second["client_grants"][0]["client_id"], CLIENT);
    assert!(second.get("next").is_none());
    assert_eq!(
        api.get_ok(&format!("/api/v2/client-grants?client_id={CLIENT}"))
            .await
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(
        api.get_ok("/api/v2/client-grants?audience=https%3A%2F%2Felsewhere.example%2F")
            .await,
        json!([])
    );
    assert_eq!(
        api.get_ok("/api/v2/client-grants?page=1&per_page=1&include_totals=true")
            .await["total"],
        2
    );
    assert_error(
        &api.send(
            Method::GET,
            "/api/v2/client-grants?allow_any_organization=true",
            None,
        )
        .await,
        400,
        "invalid_query_string",
        &query_error(
            "Additional properties not allowed: allow_any_organization",
            None,
        ),
    );
}

#[tokio::test]
async fn an_organization_has_no_client_grants_but_must_exist() {
    let api = api_with_connections().await;
    let org = api.create_org(json!({"name": "acme"})).await;
    let uri = format!("/api/v2/organizations/{}/client-grants", id_of(&org));
    assert_eq!(api.get_ok(&uri).await, json!([]));
    assert_eq!(
        api.get_ok(&format!(
            "{uri}?page=0&per_page=50&include_totals=true&client_id={CLIENT}"
        ))
        .await,
        json!({"client_grants": [], "start": 0, "limit": 50, "total": 0})
    );
    assert_error(
        &api.send(
            Method::GET,
            &format!("/api/v2/organizations/{UNKNOWN_ORG}/client-grants"),
            None,
        )
        .await,
        404,
        "inexistent_organization",
        "The organization does not exist.",
    );
    assert_eq!(
        api.send(Method::POST, &uri, Some(json!({"grant_id": "cgr_x"})))
            .await
            .status,
        StatusCode::METHOD_NOT_ALLOWED,
        "netacl keeps no organization grants"
    );
}

// ---------------------------------------------------------------------------------------
// Scopes

#[tokio::test]
async fn every_operation_wants_its_exact_scope() {
    let api = api_with_connections().await;
    let org = api
        .create_org(json!({"name": "acme", "enabled_connections": [{"connection_id": DB}]}))
        .await;
    let base = format!("/api/v2/organizations/{}", id_of(&org));
    let cases: Vec<(Method, String, Option<Value>, &str)> = vec![
        (
            Method::GET,
            "/api/v2/organizations".into(),
            None,
            "read:organizations",
        ),
        (Method::GET, base.clone(), None, "read:organizations"),
        (
            Method::GET,
            "/api/v2/organizations/name/acme".into(),
            None,
            "read:organizations",
        ),
        (
            Method::PATCH,
            base.clone(),
            Some(json!({"display_name": "A"})),
            "update:organizations",
        ),
        (
            Method::GET,
            format!("{base}/enabled_connections"),
            None,
            "read:organization_connections",
        ),
        (
            Method::GET,
            format!("{base}/enabled_connections/{DB}"),
            None,
            "read:organization_connections",
        ),
        (
            Method::GET,
            format!("{base}/connections"),
            None,
            "read:organization_connections",
        ),
        (
            Method::GET,
            format!("{base}/connections/{DB}"),
            None,
            "read:organization_connections",
        ),
        (
            Method::POST,
            format!("{base}/enabled_connections"),
            Some(json!({"connection_id": SAML})),
            "create:organization_connections",
        ),
        (
            Method::PATCH,
            format!("{base}/enabled_connections/{DB}"),
            Some(json!({})),
            "update:organization_connections",
        ),
        (
            Method::PATCH,
            format!("{base}/connections/{DB}"),
            Some(json!({})),
            "update:organization_connections",
        ),
        (
            Method::DELETE,
            format!("{base}/enabled_connections/{SAML}"),
            None,
            "delete:organization_connections",
        ),
        (
            Method::POST,
            format!("{base}/connections"),
            Some(json!({"connection_id": SAML})),
            "create:organization_connections",
        ),
        (
            Method::DELETE,
            format!("{base}/connections/{SAML}"),
            None,
            "delete:organization_connections",
        ),
        (
            Method::GET,
            format!("{base}/client-grants"),
            None,
            "read:organization_client_grants",
        ),
        (
            Method::GET,
            "/api/v2/connections".into(),
            None,
            "read:connections",
        ),
        (Method::GET, "/api/v2/clients".into(), None, "read:clients"),
        (
            Method::GET,
            "/api/v2/client-grants".into(),
            None,
            "read:client_grants",
        ),
        (Method::DELETE, base.clone(), None, "delete:organizations"),
    ];
    let declared: HashSet<&str> = MANAGEMENT_SCOPES.iter().copied().collect();
    for (i, (method, uri, body, scope)) in cases.into_iter().enumerate() {
        assert!(declared.contains(scope), "{scope} is a declared scope");
        // Every other scope, and the scope with a suffix: 403 naming exactly the one wanted.
        let others: Vec<String> = MANAGEMENT_SCOPES
            .iter()
            .filter(|s| **s != scope)
            .map(|s| s.to_string())
            .chain([format!("{scope}X")])
            .collect();
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        let without = scoped_token(&api.service, &format!("without-{i}"), &others);
        let denied = api
            .send_as(&without, method.clone(), &uri, body.clone())
            .await;
        assert_error(
            &denied,
            403,
            "insufficient_scope",
            &format!("Insufficient scope, expected any of: {scope}"),
        );
        // The one scope alone is enough.
        let only = scoped_token(&api.service, &format!("only-{i}"), &[scope]);
        let allowed = api.send_as(&only, method.clone(), &uri, body).await;
        assert!(
            allowed.status.is_success(),
            "{method} {uri} with {scope}: {} {}",
            allowed.status,
            allowed.body
        );
    }
    // Without a token: 401.
    let anonymous = api
        .call(
            http::Request::get("/api/v2/organizations")
                .body(axum::body::Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}

// ---------------------------------------------------------------------------------------
// The deploy CLI's organizations handler, call by call

/// Every page of an offset list the way the SDK pages it (page=0,1,... until an empty page),
/// with the query the SDK sends.
async fn sdk_offset_pages(api: &Api, path: &str, key: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for page in 0..100 {
        let body = api
            .get_ok(&format!(
                "{path}?page={page}&per_page=50&include_totals=true"
            ))
            .await;
        let items = body[key].as_array().expect(key).clone();
        if items.is_empty() {
            return out;
        }
        out.extend(items);
    }
    panic!("{path} never ended");
}

#[tokio::test]
async fn the_deploy_cli_organizations_handler_calls_all_answer() {
    let api = api_with_connections().await;
    for i in 0..3 {
        api.create_org(
            json!({"name": format!("org-{i}"), "display_name": format!("Org {i}"),
            "enabled_connections": [{"connection_id": DB, "assign_membership_on_login": true}]}),
        )
        .await;
    }
    // getType: organizations (checkpoint, take=50) and clients (offset, per_page=100) ...
    let orgs = api
        .get_ok("/api/v2/organizations?include_totals=true&take=50")
        .await;
    let orgs = orgs["organizations"]
        .as_array()
        .expect("organizations")
        .clone();
    assert_eq!(orgs.len(), 3);
    let clients = api
        .get_ok("/api/v2/clients?page=0&per_page=100&include_totals=true")
        .await;
    assert_eq!(clients["total"], 1);
    for org in &orgs {
        let id = id_of(org);
        // ... then per organization: its connections (all view), its client grants, its
        // discovery domains and clients (a 404 there is "not enabled", which the handler
        // accepts; the first two must answer).
        let connections = sdk_offset_pages(
            &api,
            &format!("/api/v2/organizations/{id}/connections"),
            "connections",
        )
        .await;
        assert_eq!(connections.len(), 1);
        assert_eq!(
            connections[0]["connection"]["name"],
            "Username-Password-Authentication"
        );
        assert_eq!(connections[0]["is_enabled"], true);
        let grants = sdk_offset_pages(
            &api,
            &format!("/api/v2/organizations/{id}/client-grants"),
            "client_grants",
        )
        .await;
        assert!(grants.is_empty());
        for path in ["discovery-domains", "clients"] {
            let answer = api
                .send(
                    Method::GET,
                    &format!("/api/v2/organizations/{id}/{path}?take=50"),
                    None,
                )
                .await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        }
    }
    // processChanges: the directory's connections (checkpoint) and the client grants
    // (the SDK drops page/per_page and sends include_totals=true&take=50).
    let connections = api
        .get_ok("/api/v2/connections?include_totals=true&take=50")
        .await;
    assert_eq!(connections["connections"].as_array().map(Vec::len), Some(3));
    let grants = api
        .get_ok("/api/v2/client-grants?include_totals=true&take=50")
        .await;
    assert_eq!(grants["client_grants"].as_array().map(Vec::len), Some(1));
    assert!(
        grants.get("total").is_none(),
        "a total would make the CLI page again"
    );

    // Import: create (without connections), then connections one by one.
    let created = api
        .send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "new-org", "display_name": "New"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let new_id = id_of(&created.body);
    let added = api
        .send(
            Method::POST,
            &format!("/api/v2/organizations/{new_id}/connections"),
            Some(
                json!({"connection_id": SAML, "assign_membership_on_login": false,
                "show_as_button": true, "is_signup_enabled": false, "is_enabled": true}),
            ),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    // Update: top-level PATCH without name, connections updated (possibly with an empty
    // body), added, removed.
    let first_id = id_of(&orgs[0]);
    let patched = api
        .send(
            Method::PATCH,
            &format!("/api/v2/organizations/{first_id}"),
            Some(json!({"display_name": "Org 0 renamed", "metadata": {"env": "prod"}})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    for body in [
        json!({}),
        json!({"assign_membership_on_login": false, "show_as_button": true, "is_signup_enabled": true}),
    ] {
        let answer = api
            .send(
                Method::PATCH,
                &format!("/api/v2/organizations/{first_id}/connections/{DB}"),
                Some(body),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    let added = api
        .send(
            Method::POST,
            &format!("/api/v2/organizations/{first_id}/connections"),
            Some(json!({"connection_id": GOOGLE})),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED);
    let removed = api
        .send(
            Method::DELETE,
            &format!("/api/v2/organizations/{first_id}/connections/{DB}"),
            None,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    // Delete (AUTH0_ALLOW_DELETE).
    let deleted = api
        .send(
            Method::DELETE,
            &format!("/api/v2/organizations/{}", id_of(&orgs[2])),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    // Re-export: what was written reads back.
    let again = api
        .get_ok("/api/v2/organizations?include_totals=true&take=50")
        .await;
    let names = names(&again["organizations"]);
    assert_eq!(names, ["org-0", "org-1", "new-org"]);
    assert_eq!(
        again["organizations"][0]["metadata"],
        json!({"env": "prod"})
    );
    let first_connections = sdk_offset_pages(
        &api,
        &format!("/api/v2/organizations/{first_id}/connections"),
        "connections",
    )
    .await;
    assert_eq!(first_connections.len(), 1);
    assert_eq!(first_connections[0]["connection_id"], GOOGLE);
}

// ---------------------------------------------------------------------------------------
// OpenAPI

#[tokio::test]
async fn the_openapi_document_describes_the_organization_endpoints() {
    let api = api().await;
    let doc = api.get_ok("/_netacl/v1/openapi.json").await;
    let op = &doc["paths"]["/api/v2/organizations/{id}/connections/{connection_id}"]["patch"];
    assert_eq!(
        op["security"][0]["bearerAuth"],
        json!(["update:organization_connections"])
    );
    let names: Vec<&str> = op["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["id", "connection_id"]);
    assert_eq!(
        op["parameters"][0]["schema"]["pattern"],
        "^org_[a-zA-Z0-9]{16}$"
    );
    let list = &doc["paths"]["/api/v2/organizations"]["get"];
    let query: Vec<&str> = list["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(
        query,
        ["page", "per_page", "include_totals", "from", "take"]
    );
    let update = &doc["components"]["schemas"]["OrganizationUpdate"];
    assert_eq!(update["additionalProperties"], false);
    assert_eq!(update["minProperties"], 1);
    assert!(update["properties"].get("enabled_connections").is_none());
    assert!(update.get("required").is_none());
    assert_eq!(
        update["properties"]["name"],
        doc["components"]["schemas"]["OrganizationCreate"]["properties"]["name"]
    );
    assert_eq!(
        update["properties"]["token_quota"]["oneOf"][1],
        json!({"type": "null"})
    );
    let scopes = &doc["components"]["securitySchemes"]["oAuth2ClientCredentials"]["flows"]
        ["clientCredentials"]["scopes"];
    for scope in [
        "read:organizations",
        "update:organizations",
        "delete:organizations",
        "create:organization_connections",
        "read:organization_connections",
        "update:organization_connections",
        "delete:organization_connections",
        "read:organization_client_grants",
        "read:connections",
        "read:clients",
        "read:client_grants",
    ] {
        assert!(scopes[scope].is_string(), "{scope}");
    }
}

#[tokio::test]
async fn organization_endpoints_carry_rate_limit_headers() {
    let api = api_with(ServerConfig::new(DOMAIN).with_rate_limit(RateLimitConfig {
        burst: 1000,
        per_second: 1000.0,
    }))
    .await;
    let org = api.create_org(json!({"name": "acme"})).await;
    let base = format!("/api/v2/organizations/{}", id_of(&org));
    for uri in [
        "/api/v2/organizations".to_owned(),
        base.clone(),
        format!("{base}/connections"),
        format!("{base}/enabled_connections/con_x"),
        "/api/v2/clients".to_owned(),
        "/api/v2/client-grants".to_owned(),
        "/api/v2/connections".to_owned(),
    ] {
        api.send(Method::GET, &uri, None)
            .await
            .assert_rate_limit_headers();
    }
    api.send(Method::DELETE, &base, None)
        .await
        .assert_rate_limit_headers();
}

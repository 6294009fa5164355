//! The OpenAPI document held to the server's answers where schemathesis found them apart (its
//! runs of 2026-11-25): the dry run's `path` pattern is the server's rule; every refusal the
//! document declares in `x-netacl-refusals-beyond-schema` matches the server's message for any
//! value the schema lets through (the schemathesis hooks, `tests/schemathesis/hooks.py`, drop a
//! refused schema-valid request only on such a match); an empty form body is valid to the
//! document exactly when the server takes it; a record a `fields` projection can thin out
//! requires no member.
//!
//! The document's regular expressions are compiled here with the `regex` crate; they keep to the
//! part of the syntax that it, Python's `re` (the hooks) and ECMA-262 (JSON Schema) read alike.
mod support;

use http::{Method, StatusCode};
use regex::Regex;
use serde_json::{json, Value};
use support::{api, api_with, config, Answer, Api};

/// Connection ids the body schemas take (1 to 50 characters of any kind) that no connection
/// has: whitespace and control characters of every kind, quotes, backslashes, text that looks
/// like the rest of the message. The first three are those of the 2026-11-25 run.
const ODD_IDS: [&str; 14] = [
    "\u{f3}(\u{10c175}@\u{c70ab}rm\u{b}\u{58e3c}T|\u{c0}\\\u{8f}\u{b7}\u{d0}9",
    "\u{e7eab}\u{c4}\u{1e}\u{1d}\u{d2}\u{ce}\u{7d175}\u{3e8d4}3k\u{131dc}\u{f9}\u{b7}\u{b0}",
    "\u{d6}\u{d8}\u{fb8b}\u{a0}\u{c7c18}\u{d3}",
    "con_0000000000000000",
    " ",
    "a b",
    "tab\there",
    "new\nline",
    "\r\n",
    "\u{2028}\u{3000}\u{85}",
    "x' on property connection_id.",
    "\"quoted\" \\ back",
    "\u{0}",
    "12345678901234567890123456789012345678901234567890",
];

/// The served document.
async fn document(api: &Api) -> Value {
    api.get_ok("/_netacl/v1/openapi.json").await
}

/// The refusals `document` declares for `method path`, compiled.
fn declared(document: &Value, path: &str, method: &str) -> Vec<Regex> {
    document["paths"][path][method]["x-netacl-refusals-beyond-schema"]
        .as_array()
        .unwrap_or_else(|| panic!("{method} {path} declares no refusal"))
        .iter()
        .map(|refusal| {
            let text = refusal["message"].as_str().expect("message");
            Regex::new(text).unwrap_or_else(|err| panic!("{text}: {err}"))
        })
        .collect()
}

/// `answer` is a 400 with `message`, and one of `refusals` matches it.
fn assert_declared(answer: &Answer, message: &str, refusals: &[Regex], what: &str) {
    assert_eq!(
        answer.status,
        StatusCode::BAD_REQUEST,
        "{what}: {}",
        answer.body
    );
    assert_eq!(answer.body["message"], message, "{what}");
    assert!(
        refusals.iter().any(|r| r.is_match(message)),
        "{what}: {message:?} matches no declared refusal"
    );
}

/// The operator endpoints multi-tenant edges report to: a count written with a zero fraction is
/// the integer it is (JSON Schema), one with another fraction is refused with its property
/// path; more items than all tenants together may carry are refused with the declared message.
#[tokio::test]
async fn edge_report_refusals_match_the_servers_messages() {
    const OPERATOR: &str = "operator-token-of-the-conformance-test-0123";
    let api =
        api_with(config().with_operator_token(
            netacl_server::OperatorToken::new(OPERATOR.into()).expect("token"),
        ))
        .await;
    let doc = document(&api).await;
    let summaries = declared(&doc, "/_netacl/v1/tenants/edge/summaries", "post");
    let sample = declared(&doc, "/_netacl/v1/tenants/edge/sample", "post");
    let summary = json!({"rule_id": "acl_1111111111111111111111", "action": "block",
        "scope": "tenant", "policy_version": 1, "interval_s": 600, "evaluated": 12.0,
        "matched": 5, "connections_refused": 0});
    let answer = api
        .send_as(
            OPERATOR,
            Method::POST,
            "/_netacl/v1/tenants/edge/summaries",
            Some(json!({"edge": "edge-1", "tenants": {"acme_1": [summary]}})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["unknown_tenants"], json!(["acme_1"]));
    let mut halves = summary.clone();
    halves["evaluated"] = json!(12.5);
    let answer = api
        .send_as(
            OPERATOR,
            Method::POST,
            "/_netacl/v1/tenants/edge/summaries",
            Some(json!({"edge": "edge-1", "tenants": {"acme_1": [halves]}})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert!(
        answer.body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("on property tenants.acme_1[0].")),
        "{}",
        answer.body
    );
    let half = vec![Value::from(0); 6_000];
    let too_many = json!({"edge": "edge-1", "tenants": {"a": half.clone(), "b": half}});
    for (uri, refusals, max) in [
        ("/_netacl/v1/tenants/edge/summaries", &summaries, 10_000),
        ("/_netacl/v1/tenants/edge/sample", &sample, 10_000),
    ] {
        let answer = api
            .send_as(OPERATOR, Method::POST, uri, Some(too_many.clone()))
            .await;
        let message = format!(
            "Payload validation error: 'Too many items in all tenants together, maximum {max}' on property tenants."
        );
        assert_declared(&answer, &message, refusals, uri);
    }
}

#[tokio::test]
async fn connection_refusals_match_every_id_the_schema_takes() {
    let api = api().await;
    let doc = document(&api).await;
    let answer = api
        .send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "acme"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let org = answer.body["id"].as_str().expect("id").to_owned();
    let create = declared(&doc, "/api/v2/organizations", "post");
    for id in ODD_IDS {
        assert!((1..=50).contains(&id.chars().count()), "{id:?}");
        for (path, operation) in [
            (
                "/api/v2/organizations/{id}/enabled_connections",
                "enabled_connections",
            ),
            ("/api/v2/organizations/{id}/connections", "connections"),
        ] {
            let refusals = declared(&doc, path, "post");
            let answer = api
                .send(
                    Method::POST,
                    &format!("/api/v2/organizations/{org}/{operation}"),
                    Some(json!({"connection_id": id})),
                )
                .await;
            assert_declared(
                &answer,
                &format!(
                    "Payload validation error: 'Connection {id} does not exist' on property \
                     connection_id."
                ),
                &refusals,
                &format!("{operation} {id:?}"),
            );
        }
        let answer = api
            .send(
                Method::POST,
                "/api/v2/organizations",
                Some(json!({"name": "beta", "enabled_connections": [{"connection_id": id}]})),
            )
            .await;
        assert_declared(
            &answer,
            &format!(
                "Payload validation error: 'Connection {id} does not exist' on property \
                 enabled_connections[0].connection_id."
            ),
            &create,
            &format!("create {id:?}"),
        );
        let answer = api
            .send(
                Method::POST,
                "/api/v2/organizations",
                Some(json!({"name": "beta", "enabled_connections": [
                    {"connection_id": "x"}, {"connection_id": id}, {"connection_id": id}]})),
            )
            .await;
        assert_declared(
            &answer,
            &format!(
                "Payload validation error: 'Connection {id} is already enabled by \
                 enabled_connections[1]' on property enabled_connections[2].connection_id."
            ),
            &create,
            &format!("create twice {id:?}"),
        );
    }
}

#[tokio::test]
async fn dry_run_paths_are_refused_as_the_document_says() {
    let api = api().await;
    let doc = document(&api).await;
    let property = &doc["components"]["schemas"]["RequestInput"]["properties"]["path"];
    let pattern = Regex::new(property["pattern"].as_str().expect("a path pattern")).expect("regex");
    let refusals = declared(&doc, "/_netacl/v1/dry-run", "post");
    let dry_run = |path: &str| {
        api.send(
            Method::POST,
            "/_netacl/v1/dry-run",
            Some(json!({"request": {"path": path}})),
        )
    };
    // Outside the pattern: refused, as the edge refuses them. The first is the 2026-11-25 run's.
    for path in [
        "3W\u{f9}:%\u{96}\u{61c4e}\u{7e2bb}[\u{9498d}\u{e8}\u{6f5ef}\u{e3}\u{7f}l",
        "/%%361pi/v2/users",
        "/a%zz",
        "/a%4",
        "/a%",
        "/api\\v2\\users",
        "\\",
        "/x%2/?%2F",
    ] {
        assert!(!pattern.is_match(path), "{path:?}");
        let answer = dry_run(path).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path:?}");
    }
    // Inside the pattern but ambiguous: refused with the declared message.
    for path in [
        "/api/v2//../users",
        "/api%2Fv2%2Fusers",
        "/api;x/v2/users",
        "/api;\"x\u{7}\u{e9}/v2/users?q=\"",
        "/oidc;a/register",
    ] {
        assert!(pattern.is_match(path), "{path:?}");
        let answer = dry_run(path).await;
        let message = format!(
            "Payload validation error: 'path {path:?}: ambiguous path: servers that merge '//', \
             decode '%2F' or strip ';' parameters would route it to another scope' on property \
             request."
        );
        assert_declared(&answer, &message, &refusals, path);
    }
    // Inside the pattern: answered.
    for path in [
        "/api/v2/users",
        "",
        "/%61pi/v2/./users",
        "/a?b=%zz\\",
        "/a#%",
        "/caf\u{e9} \"x\"",
        "/api/v2/users/auth0%7Cx%2Fy",
    ] {
        assert!(pattern.is_match(path), "{path:?}");
        let answer = dry_run(path).await;
        assert_eq!(answer.status, StatusCode::OK, "{path:?}: {}", answer.body);
    }
    // A path refused for a malformed escape never matches the ambiguity's refusal, whatever it
    // spells.
    let answer = dry_run("/a\": ambiguous path: %zz").await;
    let message = answer.body["message"].as_str().expect("message");
    assert!(message.contains("malformed percent-escape"), "{message}");
    assert!(!refusals.iter().any(|r| r.is_match(message)), "{message}");
}

/// Whether the object schema `schema` (a body's, at its top) takes `{}`: no required member and
/// no least count of members.
fn takes_empty_object(schema: &Value) -> bool {
    for combinator in ["oneOf", "anyOf", "allOf", "not"] {
        assert!(schema.get(combinator).is_none(), "{combinator} in {schema}");
    }
    assert_eq!(schema["type"], "object", "{schema}");
    schema["required"].as_array().is_none_or(Vec::is_empty)
        && schema["minProperties"].as_u64().unwrap_or(0) == 0
}

/// An empty form (the seed-4242 run sent one to `PATCH .../enabled_connections/{connection_id}`:
/// the server took it as `{}`, the document's form schema wanted a member).
#[tokio::test]
async fn an_empty_form_is_valid_exactly_when_the_server_takes_it() {
    let api = api().await;
    let connection = "con_Db00000000000001";
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/directory/import",
            Some(json!({"connections": [
                {"id": connection, "name": "Username-Password-Authentication", "strategy": "auth0"}
            ]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let answer = api
        .send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "acme", "enabled_connections": [{"connection_id": connection}]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let org = answer.body["id"].as_str().expect("id").to_owned();
    let answer = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(
                json!({"description": "d", "active": true, "rule": {"action": {"block": true},
                        "scope": "tenant", "match": {"ipv4_cidrs": ["192.0.2.0/24"]}}}),
            ),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let acl = answer.body["id"].as_str().expect("id").to_owned();
    let doc = document(&api).await;
    let schemas = &doc["components"]["schemas"];
    let (mut taken, mut refused) = (0, 0);
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let form = &operation["requestBody"]["content"]["application/x-www-form-urlencoded"];
            let Some(reference) = form["schema"]["$ref"].as_str() else {
                continue;
            };
            let name = reference.rsplit('/').next().expect("name");
            let valid = takes_empty_object(&schemas[name]);
            let id = if path.starts_with("/api/v2/network-acls") {
                &acl
            } else {
                &org
            };
            let uri = path
                .replace("{id}", id)
                .replace("{connection_id}", connection);
            let method =
                Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
            let answer = api.form(method.clone(), &uri, "").await;
            if valid {
                assert!(
                    answer.status.is_success(),
                    "{method} {path}: {}",
                    answer.body
                );
                taken += 1;
            } else {
                assert_eq!(
                    answer.status,
                    StatusCode::BAD_REQUEST,
                    "{method} {path}: {}",
                    answer.body
                );
                refused += 1;
            }
        }
    }
    assert!(
        taken >= 2 && refused >= 5,
        "{taken} taken, {refused} refused"
    );
}

/// The schemas of the records an answer lists (array items, directly or in an envelope).
fn listed_records<'a>(schema: &'a Value, schemas: &'a Value) -> Vec<&'a Value> {
    let resolve = |schema: &'a Value| match schema["$ref"].as_str() {
        Some(reference) => &schemas[reference.rsplit('/').next().expect("name")],
        None => schema,
    };
    let schema = resolve(schema);
    let mut records = Vec::new();
    for branch in ["anyOf", "oneOf"]
        .iter()
        .filter_map(|key| schema[*key].as_array())
        .flatten()
        .chain(std::iter::once(schema))
    {
        let branch = resolve(branch);
        if branch["type"] == "array" {
            records.push(resolve(&branch["items"]));
        }
        for member in branch["properties"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            if member["type"] == "array" {
                records.push(resolve(&member["items"]));
            }
        }
    }
    records
}

/// `fields` thins records out (the seed-4242 run's stateful phase: `GET /api/v2/connections
/// ?fields=strategy` answered `{"strategy": ...}`, and the document required id and name).
#[tokio::test]
async fn records_a_fields_projection_thins_require_no_member() {
    let api = api().await;
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/directory/import",
            Some(json!({"connections": [
                {"id": "con_Db00000000000001", "name": "db", "strategy": "auth0"}
            ]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let projected = api
        .get_ok("/api/v2/connections?fields=strategy&include_totals=true")
        .await;
    assert_eq!(projected["connections"], json!([{"strategy": "auth0"}]));
    let doc = document(&api).await;
    let schemas = &doc["components"]["schemas"];
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let projects = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"] == "fields" && p["in"] == "query");
            if !projects {
                continue;
            }
            let answer = &operation["responses"]["200"]["content"]["application/json"]["schema"];
            let records = listed_records(answer, schemas);
            assert!(
                !records.is_empty(),
                "{method} {path}: no records in {answer}"
            );
            for record in records {
                assert!(
                    record["required"].as_array().is_none_or(Vec::is_empty),
                    "{method} {path}: {record}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 3, "{checked}");
}

/// A schema-valid preview without `requests` while no edge has a traffic sample (schemathesis's
/// `{"changes": []}` of the 2026-11-27 run): refused with the message the document declares.
#[tokio::test]
async fn a_preview_without_a_sample_is_refused_as_the_document_says() {
    let api = api().await;
    let doc = document(&api).await;
    let refusals = declared(&doc, "/_netacl/v1/network-acls/preview", "post");
    for body in [
        json!({"changes": []}),
        json!({"changes": [{"op": "create", "network_acl": {"description": "d", "active": true,
            "priority": 1, "rule": {"action": {"block": true}, "scope": "tenant",
            "match": {"ipv4_cidrs": ["192.0.2.0/24"]}}}}]}),
    ] {
        let answer = api
            .send(
                Method::POST,
                "/_netacl/v1/network-acls/preview",
                Some(body.clone()),
            )
            .await;
        let message = answer.body["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(answer.body["errorCode"], "no_traffic_sample", "{body}");
        assert_declared(&answer, &message, &refusals, &body.to_string());
    }
    // With requests the preview is answered: the refusal is about the sample only.
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/network-acls/preview",
            Some(json!({"changes": [], "requests": [{"client_ip": "192.0.2.1"}]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

/// What JSON Schema can state, the document states (issue 28): the analysis's rule bound is
/// `maxItems`, the rollback's version bounds are `maximum`, and no refusal is declared for a
/// number written with a zero fraction where the schema says integer, because the server takes
/// it as the integer it is (`63.0` stored and answered as `63`); `63.5` is refused with its
/// property path.
#[tokio::test]
async fn integers_are_what_json_schema_calls_integers_and_bounds_are_in_the_schema() {
    let api = api().await;
    let doc = document(&api).await;
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["Analyze"]["properties"]["network_acls"]["maxItems"],
        1_000
    );
    for name in ["version", "expected_version"] {
        assert_eq!(
            schemas["Rollback"]["properties"][name]["maximum"],
            i64::MAX,
            "{name}"
        );
    }
    // What these operations still list beyond the schema is only the 2^53 bound (a number
    // written with a fraction from 2^53 up is refused: JSON Schema cannot say that), never the
    // refusal of a zero fraction below it.
    let large_fraction = |refusal: &serde_json::Value| {
        refusal["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("invalid type: floating point"))
    };
    for (path, method) in [
        ("/_netacl/v1/network-acls/rollback", "post"),
        ("/_netacl/v1/edge/summaries", "post"),
        ("/_netacl/v1/tenants/edge/summaries", "post"),
    ] {
        let refusals = doc["paths"][path][method]["x-netacl-refusals-beyond-schema"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            refusals.iter().any(large_fraction),
            "{method} {path}: the 2^53 bound is stated"
        );
        for refusal in refusals.iter().filter(|r| !large_fraction(r)) {
            assert!(
                !refusal.to_string().contains("fraction"),
                "{method} {path}: {refusal}"
            );
        }
    }

    // A network ACL: priority and asns items written with a zero fraction.
    let body = json!({"description": "integral", "active": true, "priority": 63.0,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"asns": [64500.0, 6.4501e4]}}});
    let created = api
        .send(Method::POST, "/api/v2/network-acls", Some(body))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert!(created.body["priority"].is_u64(), "{}", created.body);
    assert_eq!(created.body["priority"], 63);
    assert_eq!(created.body["rule"]["match"]["asns"], json!([64500, 64501]));
    let id = created.body["id"].as_str().expect("id").to_owned();
    let read = api.get_ok(&format!("/api/v2/network-acls/{id}")).await;
    assert_eq!(read, created.body, "stored and answered as the integer");
    let listed = api.get_ok("/api/v2/network-acls").await;
    assert!(listed.to_string().contains("\"priority\":63,"), "{listed}");

    // Another fraction: refused, naming the property.
    for (body, property) in [
        (
            json!({"description": "half", "active": true, "priority": 63.5,
                "rule": {"action": {"block": true}, "scope": "tenant",
                         "match": {"asns": [64500]}}}),
            "on property priority.",
        ),
        (
            json!({"description": "half", "active": true, "priority": 64,
                "rule": {"action": {"block": true}, "scope": "tenant",
                         "match": {"asns": [64500.5]}}}),
            "on property rule.match.asns[0].",
        ),
    ] {
        let answer = api
            .send(Method::POST, "/api/v2/network-acls", Some(body))
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
        let message = answer.body["message"].as_str().expect("message");
        assert!(message.ends_with(property), "{message}");
    }

    // A PATCH, the dry run and the rollback read their integers the same way.
    let patched = api
        .send(
            Method::PATCH,
            &format!("/api/v2/network-acls/{id}"),
            Some(json!({"priority": 7.0})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["priority"], 7);
    let version = api.get_ok("/_netacl/v1/network-acls/versions").await;
    let newest = version["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_u64())
        .max()
        .expect("a version");
    let rolled = api
        .send(
            Method::POST,
            "/_netacl/v1/network-acls/rollback",
            Some(json!({"version": (newest - 1) as f64, "expected_version": newest as f64})),
        )
        .await;
    assert_eq!(rolled.status, StatusCode::OK, "{}", rolled.body);
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/network-acls/rollback",
            Some(json!({"version": 1.5, "expected_version": newest})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    assert!(
        answer.body["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("on property version.")),
        "{}",
        answer.body
    );

    // An organization's token quota.
    let org = api
        .send(
            Method::POST,
            "/api/v2/organizations",
            Some(json!({"name": "integral", "token_quota": {"client_credentials": {"per_day": 10.0}}})),
        )
        .await;
    assert_eq!(org.status, StatusCode::CREATED, "{}", org.body);
    assert!(org.body["token_quota"]["client_credentials"]["per_day"].is_u64());
    assert_eq!(org.body["token_quota"]["client_credentials"]["per_day"], 10);
}

//! Rule-set history and rollback through HTTP (`/_netacl/v1/network-acls/versions`, `/rollback`):
//! every write recorded with its client and request id, paging, a version's rule set, the diff
//! of two versions, rollbacks (stale, no-op, a key deleted since), scopes, the request id on
//! every answer, tenants kept apart. The scenario runs on SQLite and on PostgreSQL (when
//! `NETACL_TEST_DATABASE_URL` names a server; under CI it must).
mod support;

use std::sync::Arc;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use netacl_model::Limits;
use netacl_server::{AdminService, BootstrapClient, OperatorToken};
use netacl_store::{PostgresStore, Store};
use serde_json::{json, Value};
use support::{config, oneshot, scoped_token, Answer, Api};

/// RFC 9421 Appendix B.1.5's shared secret, as a network ACL key's material.
const KEY_VALUE: &str =
    "uzvJfB4u3N0Jy4T7NZ75MDVcr8zSTInedJtkgcu46YW4XByzNJjxBdtjUkdJPBtbmHhIDi6pcl8jsasjlTMtDQ==";

const VERSIONS: &str = "/_netacl/v1/network-acls/versions";
const ROLLBACK: &str = "/_netacl/v1/network-acls/rollback";

fn acl_body(priority: u64, cidr: &str) -> Value {
    json!({
        "description": format!("block {cidr}"),
        "active": true,
        "priority": priority,
        "rule": {"action": {"block": true}, "scope": "tenant", "match": {"ipv4_cidrs": [cidr]}}
    })
}

async fn with_request_id(api: &Api, method: Method, uri: &str, id: &str, body: Value) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {}", api.token))
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(Body::from(body.to_string()))
        .expect("request");
    api.call(request).await
}

async fn created(api: &Api, body: Value) -> Value {
    let answer = api
        .send(Method::POST, "/api/v2/network-acls", Some(body))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer.body
}

async fn decide(api: &Api, ip: &str) -> Value {
    let answer = api
        .send(
            Method::POST,
            "/_netacl/v1/dry-run",
            Some(json!({"request": {"client_ip": ip}})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body
}

fn versions_of(page: &Value) -> Vec<u64> {
    page["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|e| e["version"].as_u64().expect("version"))
        .collect()
}

async fn rollback(api: &Api, version: u64, expected: u64) -> Answer {
    api.send(
        Method::POST,
        ROLLBACK,
        Some(json!({"version": version, "expected_version": expected})),
    )
    .await
}

/// The whole scenario on one service.
async fn history_and_rollback(api: Api) {
    let a = with_request_id(
        &api,
        Method::POST,
        "/api/v2/network-acls",
        "req-create-a",
        acl_body(10, "192.0.2.0/24"),
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    assert_eq!(
        a.headers["x-request-id"], "req-create-a",
        "an acceptable id is kept"
    );
    let a = a.body;
    let b = created(&api, acl_body(20, "198.51.100.0/24")).await;
    let a_uri = format!("/api/v2/network-acls/{}", a["id"].as_str().expect("id"));
    let b_uri = format!("/api/v2/network-acls/{}", b["id"].as_str().expect("id"));
    let patched = api
        .send(
            Method::PATCH,
            &a_uri,
            Some(json!({"description": "renamed"})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK);
    let deleted = api.send(Method::DELETE, &b_uri, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let generated = deleted.headers["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert_eq!(generated.len(), 32, "a generated id: {generated}");
    assert_eq!(
        decide(&api, "198.51.100.7").await["outcome"]["action"],
        "none"
    );

    // The list: newest first, who and which request, what changed (ids only).
    let page = api.get_ok(VERSIONS).await;
    assert_eq!(versions_of(&page), [4, 3, 2, 1]);
    assert!(page.get("next").is_none(), "one page: {page}");
    let entries = page["versions"].as_array().expect("entries");
    assert!(entries.iter().all(|e| e["client_id"] == support::CLIENT));
    assert_eq!(entries[3]["request_id"], "req-create-a");
    assert_eq!(entries[0]["request_id"], json!(generated));
    assert_eq!(
        entries[3]["changes"],
        json!([{"op": "create", "type": "network_acl", "id": a["id"]}])
    );
    assert_eq!(
        entries[1]["changes"],
        json!([{"op": "update", "type": "network_acl", "id": a["id"]}])
    );
    assert_eq!(
        entries[0]["changes"],
        json!([{"op": "delete", "type": "network_acl", "id": b["id"]}])
    );
    assert!(entries[0]["created_at"]
        .as_str()
        .expect("time")
        .ends_with('Z'));

    // Paging with take and the next cursor; bad values are 400s naming the parameter.
    let first = api.get_ok(&format!("{VERSIONS}?take=3")).await;
    assert_eq!(versions_of(&first), [4, 3, 2]);
    assert_eq!(first["next"], "1");
    let rest = api.get_ok(&format!("{VERSIONS}?take=3&from=1")).await;
    assert_eq!(versions_of(&rest), [1]);
    assert!(rest.get("next").is_none());
    let past = api.get_ok(&format!("{VERSIONS}?from=0")).await;
    assert_eq!(past, json!({"versions": []}));
    for (query, name) in [
        ("take=0", "take"),
        ("take=101", "take"),
        ("take=x", "take"),
        ("from=abc", "from"),
        ("from=-1", "from"),
        ("page=1", "page"),
    ] {
        let answer = api
            .send(Method::GET, &format!("{VERSIONS}?{query}"), None)
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(answer.body["errorCode"], "invalid_query_string", "{query}");
        assert!(
            answer.body["message"].as_str().expect("m").contains(name),
            "{query}"
        );
    }

    // One version: its rule set then, and what it changed (both records).
    let two = api.get_ok(&format!("{VERSIONS}/2")).await;
    assert_eq!(two["network_acls"], json!([a, b]));
    assert_eq!(two["changes"][0]["before"], Value::Null);
    assert_eq!(two["changes"][0]["after"], b);
    let three = api.get_ok(&format!("{VERSIONS}/3")).await;
    assert_eq!(three["changes"][0]["before"], a);
    assert_eq!(three["changes"][0]["after"]["description"], "renamed");
    let zero = api.get_ok(&format!("{VERSIONS}/0")).await;
    assert_eq!(zero["network_acls"], json!([]));
    for missing in ["5", "99", "9223372036854775807"] {
        let answer = api
            .send(Method::GET, &format!("{VERSIONS}/{missing}"), None)
            .await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{missing}");
        assert_eq!(answer.body["errorCode"], "inexistent_version");
    }
    for bad in ["abc", "-1", "1.5", "18446744073709551616"] {
        let answer = api
            .send(Method::GET, &format!("{VERSIONS}/{bad}"), None)
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(answer.body["errorCode"], "invalid_uri");
    }

    // The diff: updated_at ignored, top-level field names.
    let diff = api.get_ok(&format!("{VERSIONS}/4/diff?against=2")).await;
    assert_eq!(diff["added"], json!([]));
    assert_eq!(diff["removed"], json!([b]));
    assert_eq!(diff["changed"][0]["id"], a["id"]);
    assert_eq!(diff["changed"][0]["fields"], json!(["description"]));
    assert_eq!(diff["changed"][0]["before"], a);
    let back = api.get_ok(&format!("{VERSIONS}/2/diff?against=4")).await;
    assert_eq!(back["added"], json!([b]));
    let same = api.get_ok(&format!("{VERSIONS}/3/diff?against=4")).await;
    assert_eq!(same["changed"], json!([]));
    let answer = api
        .send(Method::GET, &format!("{VERSIONS}/4/diff"), None)
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let answer = api
        .send(Method::GET, &format!("{VERSIONS}/4/diff?against=50"), None)
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);

    // A stale rollback: 409, nothing changes.
    let stale = rollback(&api, 2, 3).await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert!(stale.body["message"]
        .as_str()
        .expect("m")
        .contains("version 4"));
    assert_eq!(versions_of(&api.get_ok(VERSIONS).await).len(), 4);
    // Unknown version: 404, nothing changes.
    assert_eq!(rollback(&api, 40, 4).await.status, StatusCode::NOT_FOUND);
    // Bad bodies: 400 with the property.
    for (body, needle) in [
        (json!({"version": "2", "expected_version": 4}), "version"),
        (json!({"version": 2}), "expected_version"),
        (
            json!({"version": 2, "expected_version": 4, "force": true}),
            "force",
        ),
    ] {
        let answer = api.send(Method::POST, ROLLBACK, Some(body.clone())).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer.body["errorCode"], "invalid_body");
        assert!(answer.body["message"].as_str().expect("m").contains(needle));
    }
    assert_eq!(versions_of(&api.get_ok(VERSIONS).await).len(), 4);

    // Rolling back to version 2: one new version, ids kept, enforced at once.
    let mut watch = api.service.rule_sets();
    let restored = rollback(&api, 2, 4).await;
    assert_eq!(restored.status, StatusCode::OK, "{}", restored.body);
    assert_eq!(restored.body["version"], 5);
    let acls = restored.body["network_acls"].as_array().expect("acls");
    assert_eq!(acls.len(), 2);
    assert_eq!(acls[0]["id"], a["id"]);
    assert_eq!(acls[0]["description"], a["description"]);
    assert_eq!(acls[1]["id"], b["id"]);
    assert_eq!(acls[1]["created_at"], b["created_at"]);
    assert_eq!(api.get_ok(&b_uri).await, acls[1]);
    assert_eq!(
        decide(&api, "198.51.100.7").await["outcome"]["action"],
        "block"
    );
    assert!(watch.has_changed().expect("open"));
    assert_eq!(watch.borrow_and_update().version, 5);
    let five = api.get_ok(&format!("{VERSIONS}/5")).await;
    let mut ops: Vec<String> = five["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                c["op"].as_str().expect("op"),
                c["id"].as_str().expect("id")
            )
        })
        .collect();
    ops.sort();
    let mut want = vec![
        format!("create {}", b["id"].as_str().expect("id")),
        format!("update {}", a["id"].as_str().expect("id")),
    ];
    want.sort();
    assert_eq!(ops, want);
    let diff = api.get_ok(&format!("{VERSIONS}/5/diff?against=2")).await;
    assert_eq!(diff, json!({"added": [], "removed": [], "changed": []}));

    // Rolling back to the rule set in force: 200, nothing recorded.
    for target in [5, 2] {
        let noop = rollback(&api, target, 5).await;
        assert_eq!(noop.status, StatusCode::OK, "{}", noop.body);
        assert_eq!(noop.body["version"], 5);
        assert_eq!(noop.body["network_acls"], restored.body["network_acls"]);
    }
    assert_eq!(versions_of(&api.get_ok(VERSIONS).await)[0], 5);
    assert!(!watch.has_changed().expect("open"));

    // A version naming a key deleted since cannot be restored: 409 naming it, nothing changes.
    let key = api
        .send(
            Method::POST,
            "/api/v2/keys/network-acls",
            Some(json!({"name": "edge-proxy", "alg": "hmac-sha256", "value": KEY_VALUE})),
        )
        .await;
    assert_eq!(key.status, StatusCode::CREATED, "{}", key.body);
    let key_id = key.body["id"].as_str().expect("id").to_owned();
    let signed = created(
        &api,
        json!({"description": "unsigned", "active": true, "priority": 5,
               "rule": {"action": {"block": true}, "scope": "tenant",
                        "not_match": {"http_message_signature": {"keys": [{"id": key_id}]}}}}),
    )
    .await;
    let signed_uri = format!(
        "/api/v2/network-acls/{}",
        signed["id"].as_str().expect("id")
    );
    assert_eq!(
        api.send(Method::DELETE, &signed_uri, None).await.status,
        StatusCode::NO_CONTENT
    );
    let key_uri = format!("/api/v2/keys/network-acls/{key_id}");
    assert_eq!(
        api.send(Method::DELETE, &key_uri, None).await.status,
        StatusCode::NO_CONTENT
    );
    let gone = rollback(&api, 7, 9).await;
    assert_eq!(gone.status, StatusCode::CONFLICT, "{}", gone.body);
    let message = gone.body["message"].as_str().expect("message");
    assert!(
        message.contains(&key_id) && message.contains("Version 7"),
        "{message}"
    );
    assert_eq!(versions_of(&api.get_ok(VERSIONS).await)[0], 9);
    assert_eq!(
        api.get_ok("/api/v2/network-acls")
            .await
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // Key changes are in the history by id and name only: never the material.
    let history = api.get_ok(VERSIONS).await;
    let kinds: Vec<&Value> = history["versions"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| &e["changes"][0]["type"])
        .collect();
    assert_eq!(kinds[0], "network_acl_key");
    let created_key = api.get_ok(&format!("{VERSIONS}/6")).await;
    assert_eq!(created_key["changes"][0]["after"]["name"], "edge-proxy");
    for text in [history.to_string(), created_key.to_string()] {
        assert!(!text.contains(KEY_VALUE) && !text.contains(&KEY_VALUE[..20]));
        assert!(!text.contains("sealed") && !text.contains("fingerprint"));
    }

    // Scopes: reading needs read:network_acls; a rollback every network ACL write scope.
    let reader = scoped_token(&api.service, "reader", &["read:network_acls"]);
    assert_eq!(
        api.send_as(&reader, Method::GET, VERSIONS, None)
            .await
            .status,
        StatusCode::OK
    );
    let body = json!({"version": 4, "expected_version": 9});
    for scopes in [
        &["read:network_acls"][..],
        &["update:network_acls"],
        &["update:network_acls", "create:network_acls"],
        &["update:network_acls", "delete:network_acls"],
    ] {
        let token = scoped_token(&api.service, &format!("w{}", scopes.len()), scopes);
        let answer = api
            .send_as(&token, Method::POST, ROLLBACK, Some(body.clone()))
            .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{scopes:?}");
        assert_eq!(answer.body["errorCode"], "insufficient_scope");
    }
    let writer = scoped_token(&api.service, "writer", &["create:network_acls"]);
    assert_eq!(
        api.send_as(&writer, Method::GET, VERSIONS, None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let all = scoped_token(
        &api.service,
        "rollbacker",
        &[
            "create:network_acls",
            "update:network_acls",
            "delete:network_acls",
        ],
    );
    let answer = api.send_as(&all, Method::POST, ROLLBACK, Some(body)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["version"], 10);
    let entry = api.get_ok(&format!("{VERSIONS}/10")).await;
    assert_eq!(entry["client_id"], "rollbacker");

    // The request id is on every answer, errors and unauthenticated ones included.
    for request in [
        Request::get(VERSIONS).body(Body::empty()),
        Request::get("/nowhere").body(Body::empty()),
        Request::get("/_netacl/v1/openapi.json").body(Body::empty()),
    ] {
        let answer = api.call(request.expect("request")).await;
        let id = answer.headers.get("x-request-id").expect("x-request-id");
        assert_eq!(id.len(), 32, "{}", answer.status);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_history_and_rollback() {
    history_and_rollback(support::api().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_history_and_rollback() {
    let Some(url) = database_url() else { return };
    let db = fresh_database(&url).await;
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect(&db, Limits::default())
            .await
            .expect("connect"),
    );
    let bootstrap = BootstrapClient {
        client_id: Some(support::CLIENT.into()),
        client_secret: Some(support::SECRET.into()),
    };
    let (service, _) = AdminService::start(store, config(), bootstrap)
        .await
        .expect("start");
    let token = support::token_for(&service, support::CLIENT, support::SECRET);
    history_and_rollback(Api::new(service, token)).await;
}

/// A tenant's versions are its own: another tenant's host answers 404 for them, and lists only
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_of_one_tenant_are_not_served_on_another_tenants_host() {
    const OPERATOR: &str = "operator-token-of-the-history-test";
    let dir = tempfile::tempdir().expect("tempdir");
    let operator = OperatorToken::new(OPERATOR.into()).expect("token");
    let (service, token) =
        support::start_in(dir.path(), config().with_operator_token(operator)).await;
    let router = service.router();
    let on = |host: &str, token: &str, method: &str, uri: &str, body: Option<Value>| {
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
    };
    let acme = oneshot(
        &router,
        on(
            "any.test",
            OPERATOR,
            "POST",
            "/_netacl/v1/tenants",
            Some(json!({"tenant": "acme", "domains": ["acme.test"]})),
        ),
    )
    .await;
    assert_eq!(acme.status, StatusCode::CREATED, "{}", acme.body);
    let (client, secret) = (
        acme.body["client_id"].as_str().expect("client").to_owned(),
        acme.body["client_secret"]
            .as_str()
            .expect("secret")
            .to_owned(),
    );
    let token_answer = oneshot(
        &router,
        Request::post("/oauth/token")
            .header("host", "acme.test")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"grant_type": "client_credentials", "client_id": client,
                       "client_secret": secret, "audience": "https://acme.test/api/v2/"})
                .to_string(),
            ))
            .expect("request"),
    )
    .await;
    assert_eq!(token_answer.status, StatusCode::OK, "{}", token_answer.body);
    let acme_token = token_answer.body["access_token"]
        .as_str()
        .expect("token")
        .to_owned();

    // The default tenant writes three versions, acme one.
    for priority in [10, 20, 30] {
        let answer = oneshot(
            &router,
            on(
                support::DOMAIN,
                &token,
                "POST",
                "/api/v2/network-acls",
                Some(acl_body(priority, "192.0.2.0/24")),
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    let answer = oneshot(
        &router,
        on(
            "acme.test",
            &acme_token,
            "POST",
            "/api/v2/network-acls",
            Some(acl_body(10, "203.0.113.0/24")),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);

    let get = |host: &'static str, token: String, uri: String| {
        let router = router.clone();
        async move { oneshot(&router, on(host, &token, "GET", &uri, None)).await }
    };
    let listed = get("acme.test", acme_token.clone(), VERSIONS.into()).await;
    assert_eq!(versions_of(&listed.body), [1]);
    assert_eq!(listed.body["versions"][0]["client_id"], json!(client));
    let theirs = get("acme.test", acme_token.clone(), format!("{VERSIONS}/3")).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND);
    let diff = get(
        "acme.test",
        acme_token.clone(),
        format!("{VERSIONS}/1/diff?against=3"),
    )
    .await;
    assert_eq!(diff.status, StatusCode::NOT_FOUND);
    let stale = oneshot(
        &router,
        on(
            "acme.test",
            &acme_token,
            "POST",
            ROLLBACK,
            Some(json!({"version": 2, "expected_version": 1})),
        ),
    )
    .await;
    assert_eq!(stale.status, StatusCode::NOT_FOUND, "{}", stale.body);
    let own = get(support::DOMAIN, token.clone(), format!("{VERSIONS}/1")).await;
    assert_eq!(own.status, StatusCode::OK);
    assert_eq!(own.body["network_acls"][0]["priority"], 10);
    assert_eq!(
        versions_of(
            &get(support::DOMAIN, token.clone(), VERSIONS.into())
                .await
                .body
        ),
        [3, 2, 1]
    );
    // A token of one tenant is no token on the other's host.
    let crossed = get("acme.test", token, VERSIONS.into()).await;
    assert_eq!(crossed.status, StatusCode::UNAUTHORIZED);
}

/// `(resident, peak resident)` memory of this process in KiB (Linux `/proc/self/status`).
fn memory_kib() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// `GET uri` as the bootstrap client, measured: the answer's raw bytes, the time to its last
/// byte, and how far the process's peak resident memory rose above the resident memory before
/// (the peak is reset first, Linux `clear_refs`; `None` where that cannot be read).
async fn measured_get(
    api: &Api,
    uri: &str,
) -> (StatusCode, Vec<u8>, std::time::Duration, Option<u64>) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let base = memory_kib().map(|(resident, _)| resident);
    let request = Request::get(uri)
        .header("authorization", format!("Bearer {}", api.token))
        .body(Body::empty())
        .expect("request");
    let started = std::time::Instant::now();
    let response = api
        .router
        .clone()
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let raw = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    let elapsed = started.elapsed();
    let rise = match (reset, base, memory_kib()) {
        (true, Some(base), Some((_, peak))) => Some(peak.saturating_sub(base)),
        _ => None,
    };
    (status, raw, elapsed, rise)
}

/// The oldest of 41 versions of a tenant holding 100,000 CIDRs (a rule created, then its
/// `active` toggled forty times) reads back as it was, within a bound of memory; the time and
/// memory it takes (and those of the list and of the newest version) are printed for the
/// record (times are not asserted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_of_41_versions_of_a_large_rule_set_reads_back() {
    let api = support::api().await;
    let cidrs: Vec<String> = (0..100_000)
        .map(|i| format!("{}.{}.{}.0/24", 10 + i / 65_536, (i / 256) % 256, i % 256))
        .collect();
    let body = json!({
        "description": "a large rule", "active": true, "priority": 10,
        "rule": {"action": {"block": true}, "scope": "tenant", "match": {"ipv4_cidrs": cidrs}}
    });
    let rule_bytes = body["rule"].to_string().len();
    let first = created(&api, body).await;
    let uri = format!("/api/v2/network-acls/{}", first["id"].as_str().expect("id"));
    let mut last = first.clone();
    for toggle in 0..40 {
        let answer = api
            .send(
                Method::PATCH,
                &uri,
                Some(json!({"active": toggle % 2 == 1})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        last = answer.body;
    }
    let mut rises = Vec::new();
    for (what, uri, want) in [
        ("the oldest version", format!("{VERSIONS}/1"), Some(&first)),
        ("the list of versions", VERSIONS.to_owned(), None),
        ("the newest version", format!("{VERSIONS}/41"), Some(&last)),
    ] {
        let (status, raw, elapsed, rise) = measured_get(&api, &uri).await;
        rises.extend(rise);
        assert_eq!(status, StatusCode::OK);
        eprintln!(
            "{what} ({uri}) of a rule of {rule_bytes} bytes: {} bytes in {elapsed:?}, \
             peak resident memory +{} KiB",
            raw.len(),
            rise.map_or("?".to_owned(), |kib| kib.to_string())
        );
        let answer: Value = serde_json::from_slice(&raw).expect("json");
        if let Some(want) = want {
            assert_eq!(answer["network_acls"], json!([want]), "{what}");
        } else {
            assert_eq!(versions_of(&answer).len(), 41);
        }
    }
    // Memory, not time: reading the oldest version (then the list) costs what its own rule set
    // does, a small multiple of the rule's text (the answer holds it twice, parsed), not what
    // the forty versions since cost. Measured first, on a heap not yet grown by the others.
    let bound = 32 * rule_bytes as u64 / 1024;
    if let [oldest, list, _] = rises[..] {
        assert!(
            oldest <= bound && list <= bound,
            "peak memory rose by {oldest} KiB (oldest version) and {list} KiB (list): more \
             than {bound} KiB"
        );
    }
}

/// The history of a database written before schema 10 (every entry with whole records, table
/// `network_acl_history`, written here with that schema's SQL) is converted at start: every
/// version's answer, the list and the diffs are byte for byte what they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_of_schema_9_answers_as_before_after_the_migration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (service, token) = support::start_in(dir.path(), config()).await;
    let api = Api::new(service, token);
    let a = created(&api, acl_body(10, "192.0.2.0/24")).await;
    let b = created(&api, acl_body(20, "198.51.100.0/24")).await;
    let a_uri = format!("/api/v2/network-acls/{}", a["id"].as_str().expect("id"));
    let b_uri = format!("/api/v2/network-acls/{}", b["id"].as_str().expect("id"));
    for body in [json!({"description": "renamed"}), json!({"active": false})] {
        let answer = api.send(Method::PATCH, &a_uri, Some(body)).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    let key = api
        .send(
            Method::POST,
            "/api/v2/keys/network-acls",
            Some(json!({"name": "edge-proxy", "alg": "hmac-sha256", "value": KEY_VALUE})),
        )
        .await;
    assert_eq!(key.status, StatusCode::CREATED, "{}", key.body);
    assert_eq!(
        api.send(Method::DELETE, &b_uri, None).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(rollback(&api, 3, 6).await.status, StatusCode::OK);
    let newest = 7u64;
    let mut uris = vec![
        format!("{VERSIONS}?take=100"),
        format!("{VERSIONS}?take=2&from=5"),
    ];
    for version in 0..=newest {
        uris.push(format!("{VERSIONS}/{version}"));
        if version > 0 {
            uris.push(format!("{VERSIONS}/{version}/diff?against={}", version - 1));
        }
    }
    let mut answers = Vec::new();
    for uri in &uris {
        let answer = api.send(Method::GET, uri, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {}", answer.body);
        answers.push(answer.raw);
    }
    let entries: Vec<Value> = (1..=newest)
        .map(|v| serde_json::from_slice(&answers[2 + 2 * v as usize - 1]).expect("json"))
        .collect();
    drop(api);

    // Back to schema 9, its entries written as it wrote them (whole records before and after).
    let file = dir.path().join("netacl.db");
    {
        let conn = rusqlite::Connection::open(&file).expect("open");
        let mut rows = Vec::new();
        {
            let mut statement = conn
                .prepare(
                    "SELECT tenant_id, version, created_at, client_id, request_id
                     FROM network_acl_history_versions ORDER BY version",
                )
                .expect("prepare");
            let mapped = statement
                .query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, Option<String>>(4)?,
                    ))
                })
                .expect("rows");
            for row in mapped {
                rows.push(row.expect("row"));
            }
        }
        assert_eq!(rows.len() as u64, newest);
        conn.execute_batch(
            "DROP TABLE network_acl_history_texts;
             DROP TABLE network_acl_history_contents;
             DROP TABLE network_acl_history_versions;
             ALTER TABLE tenants DROP COLUMN history_bytes;
             PRAGMA user_version = 9;",
        )
        .expect("downgrade");
        for (tenant, version, created_at, client_id, request_id) in rows {
            let entry = &entries[version as usize - 1];
            let changes: Vec<Value> = entry["changes"]
                .as_array()
                .expect("changes")
                .iter()
                .map(|c| {
                    json!({"type": c["type"], "op": c["op"], "id": c["id"],
                           "before": c["before"], "after": c["after"]})
                })
                .collect();
            conn.execute(
                "INSERT INTO network_acl_history
                 (tenant_id, version, created_at, client_id, request_id, changes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![
                    tenant,
                    version,
                    created_at,
                    client_id,
                    request_id,
                    Value::Array(changes).to_string()
                ],
            )
            .expect("old entry");
        }
    }

    // Started again: migrated, and every answer as it was.
    let (service, token) = support::start_in(dir.path(), config()).await;
    let api = Api::new(service, token);
    for (uri, before) in uris.iter().zip(&answers) {
        let answer = api.send(Method::GET, uri, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}");
        assert_eq!(
            String::from_utf8_lossy(&answer.raw),
            String::from_utf8_lossy(before),
            "{uri}"
        );
    }
    let conn = rusqlite::Connection::open(&file).expect("open");
    let left: i64 = conn
        .query_row("SELECT COUNT(*) FROM network_acl_history", [], |row| {
            row.get(0)
        })
        .expect("count");
    assert_eq!(left, 0, "every entry converted");
}

/// The test database's URL, or `None` (with a notice) when there is none and we are not in CI.
fn database_url() -> Option<String> {
    match std::env::var("NETACL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but NETACL_TEST_DATABASE_URL is not: source .ci/postgres.sh")
        }
        _ => {
            eprintln!("skipping: NETACL_TEST_DATABASE_URL is not set (see .ci/postgres.sh)");
            None
        }
    }
}

/// A fresh, empty database on the test server; returns its URL.
async fn fresh_database(url: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database server");
    let driver = tokio::spawn(connection);
    let name = format!(
        "netacl_history_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    drop(client);
    let _ = driver.await;
    match url.find("://") {
        Some(_) => {
            let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
            let cut = base
                .rfind('/')
                .filter(|i| *i > url.find("://").unwrap_or(0) + 2);
            let base = cut.map_or(base, |i| &base[..i]);
            if query.is_empty() {
                format!("{base}/{name}")
            } else {
                format!("{base}/{name}?{query}")
            }
        }
        None => format!("{url} dbname={name}"),
    }
}

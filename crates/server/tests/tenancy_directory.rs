//! The tenant directory an edge in the same process follows (`AdminService::tenants`): one
//! tenant and every host selects it; a tenant created through the operator API appears with its
//! domains and engine (strict routing from then on), and goes when deleted.
mod support;

use axum::body::Body;
use http::{Request, StatusCode};
use netacl_server::OperatorToken;
use support::{config, oneshot, start_in};

const OPERATOR: &str = "operator-token-of-the-tenancy-directory-test";

fn operator(method: &str, uri: &str, body: Option<serde_json::Value>) -> Request<Body> {
    let builder = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "whatever.test")
        .header("authorization", format!("Bearer {OPERATOR}"));
    match body {
        Some(body) => builder
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .expect("request")
}

#[tokio::test]
async fn the_directory_follows_tenants_added_and_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = OperatorToken::new(OPERATOR.into()).expect("token");
    let (service, _) = start_in(dir.path(), config().with_operator_token(token)).await;
    let mut tenants = service.tenants();
    {
        let directory = tenants.borrow_and_update();
        assert_eq!(directory.tenants.len(), 1);
        assert!(!directory.is_strict());
        let any = directory.for_host("anything.example").expect("default");
        assert_eq!(any.id.as_str(), "default");
        assert_eq!(any.domains, ["tenant.test"]);
        assert!(std::sync::Arc::ptr_eq(&any.engine, service.engine()));
    }
    let router = service.router();
    let created = oneshot(
        &router,
        operator(
            "POST",
            "/_netacl/v1/tenants",
            Some(serde_json::json!({"tenant": "acme", "domains": ["Acme.Test", "www.acme.test"]})),
        ),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert!(tenants.has_changed().expect("open"));
    {
        let directory = tenants.borrow_and_update();
        assert!(directory.is_strict());
        assert_eq!(directory.tenants.len(), 2);
        let acme = directory.for_host("www.acme.test").expect("acme");
        assert_eq!(acme.id.as_str(), "acme");
        assert_eq!(acme.domains, ["acme.test", "www.acme.test"]);
        assert!(!std::sync::Arc::ptr_eq(&acme.engine, service.engine()));
        assert_eq!(acme.rule_sets.borrow().version, 0);
        assert_eq!(
            directory
                .for_host("tenant.test")
                .expect("default")
                .id
                .as_str(),
            "default"
        );
        assert!(directory.for_host("nobody.test").is_none());
    }
    // Without the operator token: 401, nothing created.
    let refused = oneshot(
        &router,
        Request::post("/_netacl/v1/tenants")
            .header("content-type", "application/json")
            .body(Body::from(r#"{"tenant":"x","domains":["x.test"]}"#))
            .expect("request"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(!tenants.has_changed().expect("open"));
    let deleted = oneshot(
        &router,
        operator("DELETE", "/_netacl/v1/tenants/acme", None),
    )
    .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let directory = tenants.borrow_and_update();
    assert_eq!(directory.tenants.len(), 1);
    assert!(!directory.is_strict());
}

/// `GET /_netacl/v1/tenants/watch` with the operator token; the answer.
async fn watch(router: &axum::Router, query: &str) -> support::Answer {
    oneshot(
        router,
        operator("GET", &format!("/_netacl/v1/tenants/watch?{query}"), None),
    )
    .await
}

fn ids(answer: &support::Answer) -> Vec<String> {
    answer.body["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| t["tenant"].as_str().expect("tenant").to_owned())
        .collect()
}

fn cursor(answer: &support::Answer) -> String {
    answer.body["cursor"].as_str().expect("cursor").to_owned()
}

/// A token of tenant `host`'s bootstrap client, asked on its host.
async fn tenant_token(router: &axum::Router, host: &str, created: &serde_json::Value) -> String {
    let body = serde_json::json!({
        "grant_type": "client_credentials",
        "client_id": created["client_id"],
        "client_secret": created["client_secret"],
        "audience": format!("https://{host}/api/v2/"),
    });
    let answer = oneshot(
        router,
        Request::post("/oauth/token")
            .header("host", host)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("request"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body["access_token"]
        .as_str()
        .expect("token")
        .to_owned()
}

#[tokio::test]
async fn the_tenants_watch_ships_only_what_changed_since_the_cursor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = OperatorToken::new(OPERATOR.into()).expect("token");
    let (service, _) = start_in(dir.path(), config().with_operator_token(token)).await;
    let router = service.router();

    // No cursor: the full snapshot (the default tenant alone).
    let first = watch(&router, "timeout_ms=0").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body["full"], true);
    assert_eq!(first.body["more"], false);
    assert_eq!(ids(&first), ["default"]);
    assert_eq!(
        first.body["tenants"][0]["domains"],
        serde_json::json!(["tenant.test"])
    );
    assert_eq!(first.body["removed"], serde_json::json!([]));
    let c0 = cursor(&first);
    // Nothing changed: 304 once the wait is over.
    let same = watch(&router, &format!("since={c0}&timeout_ms=0")).await;
    assert_eq!(same.status, StatusCode::NOT_MODIFIED);

    let mut created = Vec::new();
    for (id, domain) in [("acme", "acme.test"), ("beta", "beta.test")] {
        let answer = oneshot(
            &router,
            operator(
                "POST",
                "/_netacl/v1/tenants",
                Some(serde_json::json!({"tenant": id, "domains": [domain]})),
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        created.push(answer.body);
    }
    // The feed records the new tenants as the directory announces them.
    let mut added = watch(&router, &format!("since={c0}&timeout_ms=5000")).await;
    for _ in 0..100 {
        if ids(&added).len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        added = watch(&router, &format!("since={c0}&timeout_ms=5000")).await;
    }
    assert_eq!(added.status, StatusCode::OK, "{}", added.body);
    assert_eq!(added.body["full"], false);
    assert_eq!(ids(&added), ["acme", "beta"]);
    assert_eq!(
        added.body["tenants"][0]["domains"],
        serde_json::json!(["acme.test"])
    );
    assert_eq!(added.body["tenants"][0]["version"], 0);
    assert_eq!(
        added.body["tenants"][0]["network_acls"],
        serde_json::json!([])
    );
    let c1 = cursor(&added);

    // A rule in acme: the next answer names acme alone, at its new version.
    let acme_token = tenant_token(&router, "acme.test", &created[0]).await;
    let rule = serde_json::json!({
        "description": "block one address", "active": true, "priority": 1,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": ["192.0.2.1"]}}
    });
    let written = oneshot(
        &router,
        Request::post("/api/v2/network-acls")
            .header("host", "acme.test")
            .header("authorization", format!("Bearer {acme_token}"))
            .header("content-type", "application/json")
            .body(Body::from(rule.to_string()))
            .expect("request"),
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.body);
    let changed = watch(&router, &format!("since={c1}&timeout_ms=5000&lists=true")).await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(ids(&changed), ["acme"], "{}", changed.body);
    assert_eq!(changed.body["tenants"][0]["version"], 1);
    assert_eq!(
        changed.body["tenants"][0]["network_acls"][0]["description"],
        "block one address"
    );
    assert_eq!(
        changed.body["tenants"][0]["managed_lists"],
        serde_json::json!([])
    );
    let c2 = cursor(&changed);

    // beta deleted: named in `removed`, no tenant shipped.
    let deleted = oneshot(
        &router,
        operator("DELETE", "/_netacl/v1/tenants/beta", None),
    )
    .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = watch(&router, &format!("since={c2}&timeout_ms=5000")).await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    assert_eq!(ids(&gone), Vec::<String>::new());
    assert_eq!(gone.body["removed"], serde_json::json!(["beta"]));
    // An older cursor sees both changes: acme's rule and beta's removal.
    let both = watch(&router, &format!("since={c1}&timeout_ms=0")).await;
    assert_eq!(ids(&both), ["acme"]);
    assert_eq!(both.body["removed"], serde_json::json!(["beta"]));

    // Another process's cursor (another node, or this one before a restart): the full
    // snapshot, said so.
    let foreign = watch(&router, "since=0123456789abcdef.3&timeout_ms=0").await;
    assert_eq!(foreign.status, StatusCode::OK, "{}", foreign.body);
    assert_eq!(foreign.body["full"], true);
    assert_eq!(ids(&foreign), ["acme", "default"]);
    assert_eq!(foreign.body["removed"], serde_json::json!([]));

    // Key material is sealed only over TLS or from loopback (no peer address here).
    let edge_key = netacl_secrets::transit::TransitKeyPair::generate()
        .public_key()
        .to_base64url();
    let keys = watch(&router, &format!("timeout_ms=0&keys={edge_key}")).await;
    assert_eq!(keys.status, StatusCode::OK, "{}", keys.body);
    assert_eq!(keys.body["network_acl_keys_withheld"], "transport");
    assert!(keys.body["tenants"][0].get("network_acl_keys").is_none());

    // Bad input: the API's error shape; no operator token: 401.
    for query in [
        "since=nonsense",
        "since=0123456789abcdef.x",
        "since=0123456789abcdef.5.4.acme",
        "timeout_ms=600001",
        "lists=yes",
        "keys=short",
        "other=1",
    ] {
        let bad = watch(&router, query).await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{query}: {}", bad.body);
        assert_eq!(bad.body["errorCode"], "invalid_query_string", "{query}");
    }
    let refused = oneshot(
        &router,
        Request::get("/_netacl/v1/tenants/watch")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_answer_continues_and_a_full_pass_covers_every_tenant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = OperatorToken::new(OPERATOR.into()).expect("token");
    let (service, _) = start_in(dir.path(), config().with_operator_token(token)).await;
    let router = service.router();
    for id in ["t1", "t2", "t3", "t4"] {
        let answer = oneshot(
            &router,
            operator(
                "POST",
                "/_netacl/v1/tenants",
                Some(serde_json::json!({"tenant": id, "domains": [format!("{id}.test")]})),
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    // The feed records tenants as the directory announces them (a task of its own).
    for _ in 0..200 {
        if ids(&watch(&router, "timeout_ms=0").await).len() == 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Every answer past one byte: one tenant an answer.
    service.set_tenants_watch_budget(1);
    let mut seen = Vec::new();
    let mut query = "timeout_ms=0".to_owned();
    let mut pages = 0;
    let last = loop {
        let page = watch(&router, &query).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert_eq!(page.body["full"], true, "{}", page.body);
        let names = ids(&page);
        assert_eq!(names.len(), 1, "{}", page.body);
        seen.extend(names);
        pages += 1;
        assert!(pages <= 5, "the pass does not end");
        if page.body["more"] == false {
            break page;
        }
        // A tenant removed during the pass (t1, already shipped): its removal follows the pass.
        if pages == 2 {
            let deleted =
                oneshot(&router, operator("DELETE", "/_netacl/v1/tenants/t1", None)).await;
            assert_eq!(deleted.status, StatusCode::NO_CONTENT);
        }
        query = format!("since={}&timeout_ms=0", cursor(&page));
    };
    assert_eq!(seen, ["default", "t1", "t2", "t3", "t4"]);
    // The pass's cursor: the removal during it follows (once the feed has recorded it).
    let mut next = cursor(&last);
    let mut removed = Vec::new();
    for _ in 0..20 {
        let after = watch(&router, &format!("since={next}&timeout_ms=1000")).await;
        if after.status == StatusCode::NOT_MODIFIED {
            continue;
        }
        assert_eq!(after.status, StatusCode::OK, "{}", after.body);
        assert_eq!(after.body["full"], false, "{}", after.body);
        removed.extend(after.body["removed"].as_array().expect("removed").clone());
        next = cursor(&after);
        if !removed.is_empty() {
            break;
        }
    }
    assert_eq!(removed, [serde_json::json!("t1")]);
    let quiet = watch(&router, &format!("since={next}&timeout_ms=0")).await;
    assert_eq!(quiet.status, StatusCode::NOT_MODIFIED);
}

/// The status and `errorCode` of one raw HTTP/1.1 exchange with `addr`.
async fn raw_exchange(addr: std::net::SocketAddr, request: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut raw),
    )
    .await
    .expect("answer in time")
    .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let code = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["errorCode"].as_str().map(str::to_owned))
        .unwrap_or_default();
    (status, code)
}

/// Issue 28: a request naming two hosts is refused with 421 `ambiguous_host` in the error shape,
/// as the edge refuses it (a proxy in front routing by the other one would disagree with the
/// service about the tenant): two `Host` headers, an absolute-form target whose authority is
/// another host than `Host`, an HTTP/2 `:authority` other than its `host` (h2c with prior
/// knowledge, on a real socket). The same host written differently (case, port) is one host.
#[tokio::test]
async fn a_request_naming_two_hosts_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = OperatorToken::new(OPERATOR.into()).expect("token");
    let (service, _) = start_in(dir.path(), config().with_operator_token(token)).await;
    let router = service.router();
    let get = |uri: &str, hosts: &[&str]| {
        let mut request = Request::get(uri);
        for host in hosts {
            request = request.header("host", *host);
        }
        request.body(Body::empty()).expect("request")
    };
    // One tenant: every host selects it, yet two hosts are refused.
    let answer = oneshot(
        &router,
        get("/api/v2/network-acls", &["tenant.test", "tenant.test"]),
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::MISDIRECTED_REQUEST,
        "{}",
        answer.body
    );
    assert_eq!(
        answer.body,
        serde_json::json!({"statusCode": 421, "error": "Misdirected Request",
            "message": "The request names more than one host.", "errorCode": "ambiguous_host"})
    );

    let created = oneshot(
        &router,
        operator(
            "POST",
            "/_netacl/v1/tenants",
            Some(serde_json::json!({"tenant": "acme", "domains": ["acme.test"]})),
        ),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    for (uri, hosts) in [
        ("/api/v2/network-acls", &["acme.test", "tenant.test"][..]),
        ("/api/v2/network-acls", &["tenant.test", "acme.test"][..]),
        ("http://acme.test/api/v2/network-acls", &["tenant.test"][..]),
        ("http://tenant.test/api/v2/network-acls", &["acme.test"][..]),
        ("http://acme.test/console/session", &["tenant.test"][..]),
    ] {
        let answer = oneshot(&router, get(uri, hosts)).await;
        assert_eq!(
            answer.status,
            StatusCode::MISDIRECTED_REQUEST,
            "{uri} {hosts:?}"
        );
        assert_eq!(
            answer.body["errorCode"], "ambiguous_host",
            "{uri} {hosts:?}"
        );
    }
    // One host, written two ways: acme's API answers (401 without a token).
    let answer = oneshot(
        &router,
        get("http://ACME.test:8080/api/v2/network-acls", &["acme.test."]),
    )
    .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);

    // On a real socket: HTTP/1.1 absolute-form, and h2c with prior knowledge.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    assert_eq!(
        raw_exchange(
            addr,
            b"GET http://acme.test/api/v2/network-acls HTTP/1.1\r\nHost: tenant.test\r\n\
              Connection: close\r\n\r\n"
        )
        .await,
        (421, "ambiguous_host".to_owned())
    );
    assert_eq!(
        raw_exchange(
            addr,
            b"GET /api/v2/network-acls HTTP/1.1\r\nHost: acme.test\r\nHost: tenant.test\r\n\
              Connection: close\r\n\r\n"
        )
        .await,
        (421, "ambiguous_host".to_owned())
    );
    let h2 = |authority: &'static str, host: &'static str| async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .expect("h2 handshake");
        tokio::spawn(connection);
        let request = Request::get(format!("http://{authority}/api/v2/network-acls"))
            .header("host", host)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let response = sender.send_request(request).await.expect("answer");
        let status = response.status();
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("body")
            .to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        (
            status,
            body["errorCode"].as_str().unwrap_or_default().to_owned(),
        )
    };
    assert_eq!(
        h2("acme.test", "tenant.test").await,
        (StatusCode::MISDIRECTED_REQUEST, "ambiguous_host".to_owned())
    );
    assert_eq!(
        h2("acme.test", "ACME.test:443").await.0,
        StatusCode::UNAUTHORIZED
    );
    server.abort();
}

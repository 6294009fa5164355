//! The console's server side through the router: its pages and their security headers, sign-in
//! through the token endpoint, the session cookie, the CSRF token, the same-origin proxy to the
//! API and its scopes. (The browser test, `crates/cli/tests/console_browser.rs`, drives the
//! pages themselves.)
mod support;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use netacl_server::auth::hash_client_secret;
use serde_json::{json, Value};
use support::{api, Answer, Api, CLIENT, SECRET};

async fn sign_in(api: &Api, client: &str, secret: &str) -> Answer {
    api.call(
        Request::post("/console/session")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"client_id": client, "client_secret": secret}).to_string(),
            ))
            .unwrap(),
    )
    .await
}

/// The session cookie's `name=value` from a sign-in answer.
fn cookie_of(answer: &Answer) -> String {
    let set = answer.headers["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

async fn through(
    api: &Api,
    method: Method,
    path: &str,
    cookie: Option<&str>,
    csrf: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut builder = Request::builder()
        .method(method)
        .uri(format!("/console/api/{path}"));
    if let Some(cookie) = cookie {
        builder = builder.header("cookie", cookie);
    }
    if let Some(csrf) = csrf {
        builder = builder.header("x-csrf-token", csrf);
    }
    let body = match body {
        Some(v) => {
            builder = builder.header("content-type", "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    api.call(builder.body(body).unwrap()).await
}

#[tokio::test]
async fn the_pages_are_embedded_and_served_with_a_strict_policy() {
    let api = api().await;
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/assets/console.js", "text/javascript"),
        ("/console/assets/console.css", "text/css"),
    ] {
        let answer = api
            .call(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        assert!(
            answer.content_type.as_deref().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = answer.headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(answer.headers["x-content-type-options"], "nosniff");
    }
    let page = api
        .call(Request::get("/console").body(Body::empty()).unwrap())
        .await;
    let html = String::from_utf8(page.raw).unwrap();
    // No inline script, style or event handler: the policy would block them anyway.
    assert!(!html.contains("<script>"), "inline script");
    assert!(!html.contains("style="), "inline style");
    assert!(!html.contains(" onclick") && !html.contains(" onload"));
    assert!(html.contains(r#"autocomplete="username""#));
    assert!(html.contains(r#"autocomplete="current-password""#));
    let missing = api
        .call(
            Request::get("/console/assets/nope.js")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn sign_in_goes_through_the_token_endpoint_and_keeps_the_token_on_the_server() {
    let api = api().await;
    let refused = sign_in(&api, CLIENT, "wrong-secret").await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    assert!(!refused.headers.contains_key("set-cookie"));

    let answer = sign_in(&api, CLIENT, SECRET).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let set = answer.headers["set-cookie"].to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(set.contains(attribute), "{set}");
    }
    // Over plain HTTP the cookie cannot be Secure (the browser would drop it).
    assert!(!set.contains("Secure"), "{set}");
    assert_eq!(answer.body["client_id"], CLIENT);
    assert!(answer.body["csrf_token"].as_str().unwrap().len() >= 40);
    let raw = String::from_utf8(answer.raw.clone()).unwrap();
    assert!(
        !raw.contains("access_token") && !raw.contains(SECRET),
        "{raw}"
    );
    assert!(!raw.contains("eyJ"), "a JWT in the answer: {raw}");

    // Bad bodies: not JSON, unknown member.
    let form = api
        .call(
            Request::post("/console/session")
                .header("content-type", "application/x-www-form-urlencoded")
                .body(Body::from("client_id=a&client_secret=b"))
                .unwrap(),
        )
        .await;
    assert_eq!(form.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let extra = api
        .call(
            Request::post("/console/session")
                .header("content-type", "application/json")
                .body(Body::from(r#"{"client_id":"a","client_secret":"b","x":1}"#))
                .unwrap(),
        )
        .await;
    assert_eq!(extra.status, StatusCode::BAD_REQUEST, "{}", extra.body);
}

/// A request that arrived over TLS (the listener marks it with `TlsTransport`) gets a `Secure`
/// session cookie, and so does the cookie that sign-out clears.
#[tokio::test]
async fn over_tls_the_session_cookie_is_secure() {
    let api = api().await;
    let answer = api
        .call(
            Request::post("/console/session")
                .header("content-type", "application/json")
                .extension(netacl_server::TlsTransport)
                .body(Body::from(
                    json!({"client_id": CLIENT, "client_secret": SECRET}).to_string(),
                ))
                .unwrap(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let set = answer.headers["set-cookie"].to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console", "; Secure"] {
        assert!(set.contains(attribute), "{set}");
    }
    let cookie = cookie_of(&answer);
    let csrf = answer.body["csrf_token"].as_str().unwrap();
    let out = api
        .call(
            Request::delete("/console/session")
                .header("cookie", &cookie)
                .header("x-csrf-token", csrf)
                .extension(netacl_server::TlsTransport)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(out.status, StatusCode::NO_CONTENT, "{}", out.body);
    let cleared = out.headers["set-cookie"].to_str().unwrap();
    assert!(
        cleared.contains("Max-Age=0") && cleared.contains("; Secure"),
        "{cleared}"
    );
}

#[tokio::test]
async fn the_proxy_needs_the_cookie_and_the_csrf_token() {
    let api = api().await;
    let answer = sign_in(&api, CLIENT, SECRET).await;
    let cookie = cookie_of(&answer);
    let csrf = answer.body["csrf_token"].as_str().unwrap().to_owned();
    let list = "api/v2/network-acls";

    let none = through(&api, Method::GET, list, None, Some(&csrf), None).await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    let no_csrf = through(&api, Method::GET, list, Some(&cookie), None, None).await;
    assert_eq!(no_csrf.status, StatusCode::FORBIDDEN);
    let bad_csrf = through(&api, Method::GET, list, Some(&cookie), Some("x"), None).await;
    assert_eq!(bad_csrf.status, StatusCode::FORBIDDEN);
    let forged = through(
        &api,
        Method::GET,
        list,
        Some("netacl_console=forged"),
        Some(&csrf),
        None,
    )
    .await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);
    let ok = through(&api, Method::GET, list, Some(&cookie), Some(&csrf), None).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);

    // A write through the console is the API's write, with the API's validation messages.
    let body = json!({"description": "via the console", "active": true, "priority": 5,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": ["198.51.100.0/24"]}}});
    let created = through(
        &api,
        Method::POST,
        list,
        Some(&cookie),
        Some(&csrf),
        Some(body),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let bad = json!({"description": "bad", "active": true, "priority": 6,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": ["198.51.100.0/33"]}}});
    let refused = through(
        &api,
        Method::POST,
        list,
        Some(&cookie),
        Some(&csrf),
        Some(bad),
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("rule.match.ipv4_cidrs[0]"),
        "{}",
        refused.body
    );

    // A browser request from another site is refused even with the cookie and the token.
    let cross = api
        .call(
            Request::get(format!("/console/api/{list}"))
                .header("cookie", &cookie)
                .header("x-csrf-token", &csrf)
                .header("sec-fetch-site", "cross-site")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);

    // Only the API's own prefixes are reachable.
    for path in [
        "oauth/token",
        ".well-known/jwks.json",
        "api/v2/../../console",
    ] {
        let answer = through(&api, Method::GET, path, Some(&cookie), Some(&csrf), None).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
    }

    // Signing out ends the session.
    let out = api
        .call(
            Request::delete("/console/session")
                .header("cookie", &cookie)
                .header("x-csrf-token", &csrf)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(out.status, StatusCode::NO_CONTENT);
    assert!(out.headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let after = through(&api, Method::GET, list, Some(&cookie), Some(&csrf), None).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_read_only_client_gets_a_read_only_console() {
    let api = api().await;
    let authority = api.service.authority();
    let secret = "reader-secret-long-enough-for-tests";
    authority
        .upsert_client(authority.management_client(
            "reader",
            hash_client_secret(secret),
            ["read:network_acls"],
        ))
        .expect("client");
    let answer = sign_in(&api, "reader", secret).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(answer.body["scopes"], json!(["read:network_acls"]));
    let cookie = cookie_of(&answer);
    let csrf = answer.body["csrf_token"].as_str().unwrap().to_owned();
    let read = through(
        &api,
        Method::GET,
        "api/v2/network-acls",
        Some(&cookie),
        Some(&csrf),
        None,
    )
    .await;
    assert_eq!(read.status, StatusCode::OK);
    let body = json!({"description": "x", "active": true, "priority": 5,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": ["198.51.100.0/24"]}}});
    let write = through(
        &api,
        Method::POST,
        "api/v2/network-acls",
        Some(&cookie),
        Some(&csrf),
        Some(body),
    )
    .await;
    assert_eq!(write.status, StatusCode::FORBIDDEN, "{}", write.body);
}

#[tokio::test]
async fn every_file_the_page_names_is_served_with_its_type() {
    let api = api().await;
    let page = api
        .call(Request::get("/console").body(Body::empty()).unwrap())
        .await;
    let html = String::from_utf8(page.raw).unwrap();
    let named: Vec<&str> = html
        .split(['"', '\''])
        .filter(|s| s.starts_with("/console/assets/"))
        .collect();
    // The main script and style sheet, the change-safety modules and style sheet, and the
    // overview, counts, keys and lists modules.
    for expected in [
        "console.js",
        "console.css",
        "findings.js",
        "history.js",
        "preview.js",
        "safety.css",
        "counts.js",
        "overview.js",
        "keys.js",
        "lists.js",
    ] {
        assert!(
            named.contains(&format!("/console/assets/{expected}").as_str()),
            "{expected} not named by the page: {named:?}"
        );
    }
    for path in named {
        let answer = api
            .call(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        let kind = if path.ends_with(".js") {
            "text/javascript"
        } else {
            "text/css"
        };
        assert!(
            answer.content_type.as_deref().unwrap().starts_with(kind),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_proxy_passes_the_findings_header_of_a_write_on() {
    let api = api().await;
    let answer = sign_in(&api, CLIENT, SECRET).await;
    let cookie = cookie_of(&answer);
    let csrf = answer.body["csrf_token"].as_str().unwrap().to_owned();
    let rule = |priority: u32, cidr: &str| {
        json!({"description": format!("p{priority}"), "active": true, "priority": priority,
            "rule": {"action": {"block": true}, "scope": "tenant",
                     "match": {"ipv4_cidrs": [cidr]}}})
    };
    let first = through(
        &api,
        Method::POST,
        "api/v2/network-acls",
        Some(&cookie),
        Some(&csrf),
        Some(rule(10, "198.51.100.0/24")),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert!(!first.headers.contains_key("netacl-findings"));
    let shadowed = through(
        &api,
        Method::POST,
        "api/v2/network-acls",
        Some(&cookie),
        Some(&csrf),
        Some(rule(20, "198.51.100.0/25")),
    )
    .await;
    assert_eq!(shadowed.status, StatusCode::CREATED, "{}", shadowed.body);
    let findings = shadowed.headers["netacl-findings"].to_str().unwrap();
    let by = first.body["id"].as_str().unwrap();
    assert_eq!(findings, format!("shadowed by {by}"));
}

#[tokio::test]
async fn a_write_through_the_console_is_recorded_with_its_client_and_request_id() {
    let api = api().await;
    let answer = sign_in(&api, CLIENT, SECRET).await;
    let cookie = cookie_of(&answer);
    let csrf = answer.body["csrf_token"].as_str().unwrap().to_owned();
    let body = json!({"description": "x", "active": true, "priority": 5,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ipv4_cidrs": ["198.51.100.0/24"]}}});
    let write = through(
        &api,
        Method::POST,
        "api/v2/network-acls",
        Some(&cookie),
        Some(&csrf),
        Some(body),
    )
    .await;
    assert_eq!(write.status, StatusCode::CREATED, "{}", write.body);
    let request_id = write.headers["x-request-id"].to_str().unwrap().to_owned();
    let history = through(
        &api,
        Method::GET,
        "_netacl/v1/network-acls/versions",
        Some(&cookie),
        Some(&csrf),
        None,
    )
    .await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.body);
    let newest = &history.body["versions"][0];
    assert_eq!(newest["client_id"], CLIENT, "{newest}");
    assert_eq!(newest["request_id"], request_id.as_str(), "{newest}");
}

// ---------------------------------------------------------------------------------------------
// Issue 28: sessions bounded per client and per tenant, dropped with their tenant; the cookie
// Secure behind a TLS-terminating proxy.

const OPERATOR: &str = "operator-token-of-the-console-session-tests";

fn operator(method: &str, uri: &str, body: Option<Value>) -> Request<Body> {
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
    .unwrap()
}

/// Creates tenant `id` on `domain` through the operator API: its bootstrap client's id and
/// secret.
async fn create_tenant(api: &Api, id: &str, domain: &str) -> (String, String) {
    let created = api
        .call(operator(
            "POST",
            "/_netacl/v1/tenants",
            Some(json!({"tenant": id, "domains": [domain]})),
        ))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    (
        created.body["client_id"].as_str().unwrap().to_owned(),
        created.body["client_secret"].as_str().unwrap().to_owned(),
    )
}

async fn sign_in_at(api: &Api, host: &str, client: &str, secret: &str) -> Answer {
    api.call(
        Request::post("/console/session")
            .header("host", host)
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"client_id": client, "client_secret": secret}).to_string(),
            ))
            .unwrap(),
    )
    .await
}

/// `GET /console/session` with `cookie` at `host`: the status.
async fn session_status(api: &Api, host: &str, cookie: &str) -> StatusCode {
    api.call(
        Request::get("/console/session")
            .header("host", host)
            .header("cookie", cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await
    .status
}

/// A client's next sign-in beyond its share (10 by default) replaces its oldest session.
#[tokio::test]
async fn a_clients_oldest_session_is_replaced_by_its_new_one() {
    let api = api().await;
    let mut cookies = Vec::new();
    for _ in 0..=netacl_server::DEFAULT_CONSOLE_SESSIONS_PER_CLIENT {
        let answer = sign_in_at(&api, support::DOMAIN, CLIENT, SECRET).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        cookies.push(cookie_of(&answer));
    }
    assert_eq!(
        session_status(&api, support::DOMAIN, &cookies[0]).await,
        StatusCode::UNAUTHORIZED,
        "the oldest session is gone"
    );
    for cookie in &cookies[1..] {
        assert_eq!(
            session_status(&api, support::DOMAIN, cookie).await,
            StatusCode::OK
        );
    }
    assert_eq!(
        api.service.console_session_count(),
        netacl_server::DEFAULT_CONSOLE_SESSIONS_PER_CLIENT
    );
}

/// The clients of one tenant signing in over and over fill that tenant's share only: another
/// tenant's sign-in is answered, and its session works.
#[tokio::test]
async fn one_tenant_signing_in_without_end_cannot_keep_another_from_signing_in() {
    let limits = netacl_server::ConsoleSessionLimits::new(2, 4, 6).unwrap();
    let api = support::api_with(
        support::config()
            .with_operator_token(netacl_server::OperatorToken::new(OPERATOR.into()).unwrap())
            .with_console_sessions(limits),
    )
    .await;
    let (acme_client, acme_secret) = create_tenant(&api, "acme", "acme.test").await;
    // Five clients of the default tenant, even one without any scope, sign in three times each.
    let authority = api.service.authority();
    for n in 0..5 {
        let secret = format!("client-{n}-secret-long-enough-for-tests");
        authority
            .upsert_client(authority.management_client(
                format!("client-{n}"),
                hash_client_secret(&secret),
                if n == 0 {
                    vec![]
                } else {
                    vec!["read:network_acls"]
                },
            ))
            .unwrap();
        for _ in 0..3 {
            let answer = sign_in_at(&api, support::DOMAIN, &format!("client-{n}"), &secret).await;
            assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        }
    }
    assert_eq!(api.service.console_session_count(), 4, "the tenant's share");
    // Tenant acme signs in, and its session works.
    let answer = sign_in_at(&api, "acme.test", &acme_client, &acme_secret).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let cookie = cookie_of(&answer);
    assert_eq!(
        session_status(&api, "acme.test", &cookie).await,
        StatusCode::OK
    );
    // The default tenant goes on: its oldest sessions make room, acme's stays.
    let answer = sign_in_at(&api, support::DOMAIN, CLIENT, SECRET).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(
        session_status(&api, "acme.test", &cookie).await,
        StatusCode::OK
    );
    assert_eq!(api.service.console_session_count(), 5);
}

/// A tenant deleted loses its sessions at once, whether through the operator API or on the
/// store (as `netacl tenant delete` and other nodes do); a tenant created again on its domain
/// does not find them.
#[tokio::test]
async fn a_deleted_tenants_sessions_are_dropped() {
    let api = support::api_with(
        support::config()
            .with_operator_token(netacl_server::OperatorToken::new(OPERATOR.into()).unwrap()),
    )
    .await;
    let (client, secret) = create_tenant(&api, "acme", "acme.test").await;
    let mut cookies = Vec::new();
    for _ in 0..3 {
        let answer = sign_in_at(&api, "acme.test", &client, &secret).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        cookies.push(cookie_of(&answer));
    }
    let kept = cookie_of(&sign_in_at(&api, support::DOMAIN, CLIENT, SECRET).await);
    assert_eq!(api.service.console_session_count(), 4);

    let deleted = api
        .call(operator("DELETE", "/_netacl/v1/tenants/acme", None))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(
        api.service.console_session_count(),
        1,
        "acme's dropped at once"
    );
    // Created again on the same domain (same issuer): the old cookies open nothing.
    let (client, secret) = create_tenant(&api, "acme", "acme.test").await;
    for cookie in &cookies {
        assert_eq!(
            session_status(&api, "acme.test", cookie).await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        session_status(&api, support::DOMAIN, &kept).await,
        StatusCode::OK
    );

    // Deleted on the store, as `netacl tenant delete` does: dropped when the service notices.
    let answer = sign_in_at(&api, "acme.test", &client, &secret).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(api.service.console_session_count(), 2);
    let store: std::sync::Arc<dyn netacl_store::Store> = std::sync::Arc::new(
        netacl_store::SqliteStore::open(api.dir(), Default::default()).unwrap(),
    );
    netacl_server::provisioning::delete_tenant(&store, "acme")
        .await
        .unwrap();
    let start = std::time::Instant::now();
    while api.service.console_session_count() != 1 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "acme's session still held"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A sign-in request as a TLS-terminating proxy in front forwards it, from `peer`.
fn proxied_sign_in(peer: &str, proto: Option<&str>) -> Request<Body> {
    let mut builder = Request::post("/console/session")
        .header("content-type", "application/json")
        .extension(axum::extract::ConnectInfo(
            peer.parse::<std::net::SocketAddr>().unwrap(),
        ));
    if let Some(proto) = proto {
        builder = builder.header("x-forwarded-proto", proto);
    }
    builder
        .body(Body::from(
            json!({"client_id": CLIENT, "client_secret": SECRET}).to_string(),
        ))
        .unwrap()
}

fn is_secure(answer: &Answer) -> bool {
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer.headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("; Secure")
}

/// Behind a TLS-terminating proxy: `--public-url https://…` makes the cookie `Secure`, and so
/// does `X-Forwarded-Proto: https` from a `--trusted-proxy` peer, never from another peer.
#[tokio::test]
async fn behind_a_tls_terminating_proxy_the_cookie_is_secure() {
    let public = support::api_with(
        support::config().with_public_url("https://admin.example.com".parse().unwrap()),
    )
    .await;
    assert!(is_secure(
        &public.call(proxied_sign_in("10.0.0.2:4000", None)).await
    ));
    let plain = support::api_with(
        support::config().with_public_url("http://127.0.0.1:8080".parse().unwrap()),
    )
    .await;
    assert!(!is_secure(
        &plain.call(proxied_sign_in("127.0.0.1:4000", None)).await
    ));

    let trusted = netacl_model::TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
    let api = support::api_with(support::config().with_trusted_proxies(trusted)).await;
    let from_proxy = api
        .call(proxied_sign_in("10.0.0.2:4000", Some("https")))
        .await;
    assert!(is_secure(&from_proxy));
    // The nearest proxy's value counts (the last).
    assert!(is_secure(
        &api.call(proxied_sign_in("10.0.0.2:4000", Some("http, https")))
            .await
    ));
    assert!(!is_secure(
        &api.call(proxied_sign_in("10.0.0.2:4000", Some("http")))
            .await
    ));
    // Any other peer's header is ignored.
    assert!(!is_secure(
        &api.call(proxied_sign_in("192.0.2.7:4000", Some("https")))
            .await
    ));
    assert!(!is_secure(
        &api.call(proxied_sign_in("10.0.0.2:4000", None)).await
    ));
    // Sign-out clears the cookie with the same attribute.
    let out = api
        .call(
            Request::delete("/console/session")
                .header("cookie", cookie_of(&from_proxy))
                .header(
                    "x-csrf-token",
                    from_proxy.body["csrf_token"].as_str().unwrap(),
                )
                .header("x-forwarded-proto", "https")
                .extension(axum::extract::ConnectInfo(
                    "10.0.0.2:4000".parse::<std::net::SocketAddr>().unwrap(),
                ))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(out.status, StatusCode::NO_CONTENT);
    assert!(out.headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("; Secure"));
}

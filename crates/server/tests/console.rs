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

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

//! The served OpenAPI document, byte for byte: `GET /_netacl/v1/openapi.json` (the one document
//! the server serves; the operator API's operations are part of it) is compared with the copy in
//! `openapi.served.json` beside this file, so that a change of the document (a reordered key, a
//! moved schema, a changed description) is seen and made on purpose.
//!
//! When the API changes on purpose (or the workspace version moves, which the document's
//! `info.version` carries), regenerate the copy and review its diff:
//!
//! ```text
//! NETACL_BLESS_OPENAPI=1 cargo test --release --workspace --test server openapi_served
//! ```

use std::path::PathBuf;

use axum::body::Body;
use http::{Request, StatusCode};

use crate::support::{api, api_with, config};

/// The committed copy of the served document.
fn copy_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/server/openapi.served.json")
}

/// The document as a client without a token fetches it, raw bytes.
async fn served(api: &crate::support::Api) -> Vec<u8> {
    let answer = api
        .call(
            Request::get("/_netacl/v1/openapi.json")
                .header("host", crate::support::DOMAIN)
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(
        answer.content_type.as_deref(),
        Some("application/json; charset=utf-8")
    );
    answer.raw
}

/// The served document is byte-identical to the committed copy (regenerated with
/// `NETACL_BLESS_OPENAPI=1`), with and without the operator API configured.
#[tokio::test]
async fn served_openapi_document_is_byte_identical_to_the_copy() {
    let bytes = served(&api().await).await;
    if std::env::var_os("NETACL_BLESS_OPENAPI").is_some_and(|v| v == "1") {
        std::fs::write(copy_path(), &bytes).expect("write the copy");
    }
    let copy = std::fs::read(copy_path()).expect("tests/server/openapi.served.json");
    assert!(
        bytes == copy,
        "the served OpenAPI document differs from tests/server/openapi.served.json \
         ({} bytes served, {} in the copy); if the change is on purpose, regenerate it with \
         NETACL_BLESS_OPENAPI=1 and review the diff",
        bytes.len(),
        copy.len()
    );
    let with_operator = served(
        &api_with(
            config().with_operator_token(
                netacl_server::OperatorToken::new("operator-token-of-the-openapi-test-0123".into())
                    .expect("token"),
            ),
        )
        .await,
    )
    .await;
    assert!(
        with_operator == copy,
        "the document differs when the operator API is configured"
    );
}

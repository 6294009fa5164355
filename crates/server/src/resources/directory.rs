//! `POST /_netacl/v1/directory/import` (scope `create:users`): loads connections, users,
//! groups, members and sessions (the import file format of [`netacl_model::DirectoryData`]) in
//! one transaction, upserting by id. Answers `{"inserted", "updated", "unchanged"}`.
use axum::body::Body;
use axum::extract::RawQuery;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use netacl_model::DirectoryData;
use netacl_store::StoreError;

use crate::http::body::read_write_body;
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, CreateUsers};
use crate::AppState;

/// `POST /_netacl/v1/directory/import`.
pub(crate) async fn import(
    _: Authorized<CreateUsers>,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let _permit = state.expensive()?;
    let value = read_write_body(&state, raw.as_deref(), &headers, body, None).await?;
    let data = DirectoryData::from_json(&value)?;
    let tenant = &state.inner.tenant;
    let report = tenant
        .store()
        .import_directory(&tenant.id, &data)
        .await
        .map_err(|err| match err {
            StoreError::NameTaken(what) => ApiError::new(
                StatusCode::CONFLICT,
                Some("conflict"),
                format!("The import conflicts with stored data: {what}."),
            ),
            other => other.into(),
        })?;
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({
            "inserted": report.inserted,
            "updated": report.updated,
            "unchanged": report.unchanged,
        }),
    ))
}

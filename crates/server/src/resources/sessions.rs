//! `GET /api/v2/users/{user_id}/sessions`: cursor-paged.
use axum::extract::{Path, RawQuery};
use axum::response::Response;
use http::StatusCode;
use serde_json::{Map, Value};

use crate::http::cursor::{Family, DEFAULT_TAKE, MAX_TAKE};
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, ReadSessions};
use crate::http::query::Query;
use crate::AppState;

/// `GET /users/{user_id}/sessions?include_totals&from&take`: `{"sessions", "next"?, "total"?}`.
/// The user id arrives percent-encoded (`auth0%7C123`) and is decoded before use.
pub(crate) async fn list(
    _: Authorized<ReadSessions>,
    user_id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let Path(user_id) = user_id.map_err(|err| ApiError::invalid_uri(err.body_text(), "user_id"))?;
    let query = Query::parse(raw.as_deref(), &["include_totals", "from", "take"])?;
    let with_total = query.boolean("include_totals")?.unwrap_or(false);
    let take = query.integer("take", 1, MAX_TAKE)?.unwrap_or(DEFAULT_TAKE);
    let cursors = state.cursors();
    let after = query
        .string("from")
        .map(|text| cursors.decode_seq(Family::UserSessions, text))
        .transpose()?;
    let tenant = &state.inner.tenant;
    let page = tenant
        .store()
        .user_sessions(&tenant.id, &user_id, after, take as u32, with_total)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                Some("inexistent_user"),
                "The user does not exist.",
            )
        })?;
    let mut body = Map::new();
    body.insert("sessions".into(), Value::Array(page.items));
    if let Some(next) = page.next_after {
        body.insert(
            "next".into(),
            cursors.encode_seq(Family::UserSessions, next).into(),
        );
    }
    if let Some(total) = page.total {
        body.insert("total".into(), total.into());
    }
    Ok(json_response(StatusCode::OK, &Value::Object(body)))
}

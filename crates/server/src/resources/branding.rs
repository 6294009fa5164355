//! `GET` and `PATCH /api/v2/branding`: the tenant's login-page branding, kept in the store.
use axum::body::Body;
use axum::extract::RawQuery;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use netacl_model::BrandingPatch;

use crate::http::body::{read_write_body, FormShape};
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, ReadBranding, UpdateBranding};
use crate::http::query::Query;
use crate::AppState;

/// Form bodies: `colors[primary]=%23fff`, `font[url]=https...`, a gradient as
/// `colors[page_background][type]=linear-gradient&...&colors[page_background][angle_deg]=45`
/// (integer angles; forms cannot carry `null`).
pub(crate) const BRANDING_FORM: FormShape = FormShape {
    booleans: &[],
    integers: &["colors.page_background.angle_deg"],
    json_fields: &["colors", "font"],
};

/// `GET /branding`: the whole settings object (`{}` when never set).
pub(crate) async fn get(
    _: Authorized<ReadBranding>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    let settings = tenant.store().branding(&tenant.id).await?;
    Ok(json_response(StatusCode::OK, &settings.to_json()))
}

/// `PATCH /branding`: merges a non-empty body into the stored settings; 200 with the whole
/// result.
pub(crate) async fn update(
    _: Authorized<UpdateBranding>,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value =
        read_write_body(&state, raw.as_deref(), &headers, body, Some(&BRANDING_FORM)).await?;
    let patch = BrandingPatch::from_json(&value)?;
    let tenant = &state.inner.tenant;
    let settings = tenant.store().update_branding(&tenant.id, &patch).await?;
    Ok(json_response(StatusCode::OK, &settings.to_json()))
}

//! `/api/v2/network-acls`: list, create, get, replace, update, delete.
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use netacl_model::{AclId, NetworkAcl, NetworkAclPatch, NetworkAclSpec, Timestamp};
use rand::RngCore;

use crate::http::body::{read_write_body, FormShape};
use crate::http::error::{ApiError, JSON_UTF8};
use crate::http::guard::{
    Authorized, CreateNetworkAcls, DeleteNetworkAcls, ReadNetworkAcls, UpdateNetworkAcls,
};
use crate::http::query::Query;
use crate::http::request_context::RequestContext;
use crate::tenant::{Applied, Change, StoredAcl};
use crate::AppState;

/// The network ACL create/replace/update body.
pub(crate) const NETWORK_ACL_FORM: FormShape = FormShape {
    booleans: &[
        "active",
        "rule.action.block",
        "rule.action.allow",
        "rule.action.log",
        "rule.action.redirect",
        "rule.match_all",
    ],
    integers: &["priority", "rule.match.asns[]", "rule.not_match.asns[]"],
    json_fields: &["rule", "rule.action", "rule.match", "rule.not_match"],
};

/// Default and largest `per_page`.
pub(crate) const DEFAULT_PER_PAGE: u64 = 50;
pub(crate) const MAX_PER_PAGE: u64 = 100;

/// A network ACL id from the path: percent-decoded, then checked (400 `invalid_uri`).
pub(crate) struct AclPath(AclId);

impl<S: Send + Sync> FromRequestParts<S> for AclPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "id"))?;
        AclId::parse(&raw).map(AclPath).ok_or_else(|| {
            ApiError::invalid_uri(
                "String does not match pattern ^acl_[1-9A-HJ-NP-Za-km-z]{22}$",
                "id",
            )
        })
    }
}

fn json_bytes(status: StatusCode, body: impl Into<Body>) -> Response {
    let mut response = (status, body.into()).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
    response
}

fn record_response(status: StatusCode, stored: &StoredAcl) -> Response {
    json_bytes(status, stored.json.clone())
}

/// `GET /network-acls?page&per_page&include_totals`.
pub(crate) async fn list(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["page", "per_page", "include_totals"])?;
    let page = query.integer("page", 0, u64::from(u32::MAX))?.unwrap_or(0);
    let per_page = query
        .integer("per_page", 0, MAX_PER_PAGE)?
        .unwrap_or(DEFAULT_PER_PAGE);
    let include_totals = query.boolean("include_totals")?.unwrap_or(false);

    let snapshot = state.inner.tenant.snapshot();
    let start = page.saturating_mul(per_page);
    let from = usize::try_from(start).unwrap_or(usize::MAX);
    let to = from.saturating_add(per_page as usize);
    let array = snapshot.json_array(from, to);
    if !include_totals {
        return Ok(json_bytes(StatusCode::OK, array));
    }
    let mut body = Vec::with_capacity(array.len() + 96);
    body.extend_from_slice(b"{\"network_acls\":");
    body.extend_from_slice(&array);
    body.extend_from_slice(
        format!(
            ",\"start\":{start},\"limit\":{per_page},\"total\":{}}}",
            snapshot.ordered.len()
        )
        .as_bytes(),
    );
    Ok(json_bytes(StatusCode::OK, body))
}

/// `POST /network-acls`: 201 with the stored record.
pub(crate) async fn create(
    _: Authorized<CreateNetworkAcls>,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = acl_body(&state, raw, &headers, body).await?;
    let config = &state.inner.config;
    let spec = NetworkAclSpec::from_json(&value, &config.limits)?;
    let now = Timestamp::now();
    let acl = NetworkAcl {
        id: AclId::from_random(random_u128()),
        spec,
        created_at: now,
        updated_at: now,
    };
    let applied = state
        .inner
        .tenant
        .apply_as(Change::Create(Box::new(acl)), context.origin())
        .await?;
    applied_response(&state, StatusCode::CREATED, applied).await
}

/// `GET /network-acls/{id}`.
pub(crate) async fn get(
    _: Authorized<ReadNetworkAcls>,
    AclPath(id): AclPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let snapshot = state.inner.tenant.snapshot();
    let stored = snapshot
        .get(&id)
        .ok_or_else(ApiError::no_such_network_acl)?;
    Ok(record_response(StatusCode::OK, stored))
}

/// `PUT /network-acls/{id}`: the create body; 200 with the stored record.
pub(crate) async fn replace(
    _: Authorized<UpdateNetworkAcls>,
    AclPath(id): AclPath,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = acl_body(&state, raw, &headers, body).await?;
    let config = &state.inner.config;
    let spec = NetworkAclSpec::from_json(&value, &config.limits)?;
    let build = Box::new(move |old: &NetworkAcl| NetworkAcl {
        id: old.id.clone(),
        spec,
        created_at: old.created_at,
        updated_at: Timestamp::now().max(old.updated_at),
    });
    updated(&state, &context, id, build).await
}

/// `PATCH /network-acls/{id}`: any subset of the four fields; a `rule` replaces the whole rule.
pub(crate) async fn update(
    _: Authorized<UpdateNetworkAcls>,
    AclPath(id): AclPath,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = acl_body(&state, raw, &headers, body).await?;
    let config = &state.inner.config;
    let patch = NetworkAclPatch::from_json(&value, &config.limits)?;
    let build = Box::new(move |old: &NetworkAcl| NetworkAcl {
        id: old.id.clone(),
        spec: patch.apply(&old.spec),
        created_at: old.created_at,
        updated_at: Timestamp::now().max(old.updated_at),
    });
    updated(&state, &context, id, build).await
}

async fn updated(
    state: &AppState,
    context: &RequestContext,
    id: AclId,
    build: Box<dyn FnOnce(&NetworkAcl) -> NetworkAcl + Send>,
) -> Result<Response, ApiError> {
    let applied = state
        .inner
        .tenant
        .apply_as(Change::Replace { id, build }, context.origin())
        .await?;
    applied_response(state, StatusCode::OK, applied).await
}

/// A create, replace or update body (JSON or form); the endpoints take no query parameters.
async fn acl_body(
    state: &AppState,
    raw_query: Option<String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<serde_json::Value, ApiError> {
    read_write_body(
        state,
        raw_query.as_deref(),
        headers,
        body,
        Some(&NETWORK_ACL_FORM),
    )
    .await
}

/// The record a create or replace stored, with `status`, and the `Netacl-Findings` header when
/// the rule-set analysis has findings that concern it.
async fn applied_response(
    state: &AppState,
    status: StatusCode,
    applied: Applied,
) -> Result<Response, ApiError> {
    match applied.record {
        Some(stored) => {
            let response = record_response(status, &stored);
            Ok(crate::resources::analysis::with_findings(state, &stored.acl.id, response).await)
        }
        None => Err(ApiError::internal()),
    }
}

/// `DELETE /network-acls/{id}`: 204.
pub(crate) async fn delete(
    _: Authorized<DeleteNetworkAcls>,
    AclPath(id): AclPath,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    tenant
        .apply_as(Change::Delete(id), context.origin())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// 128 bits from the operating system's CSPRNG.
fn random_u128() -> u128 {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    u128::from_le_bytes(bytes)
}

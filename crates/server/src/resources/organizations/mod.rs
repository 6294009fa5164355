//! `/api/v2/organizations`: create, list, get (by id and by name), update, delete.
//!
//! Scopes: `create:organizations` for a create, which also requires
//! `create:organization_connections` when it enables connections (a non-empty
//! `enabled_connections`); `read:organizations`, `update:organizations`, `delete:organizations`
//! for the others. An organization's connections are `crate::resources::organizations::connections`.
use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use netacl_model::{
    Organization, OrganizationId, OrganizationPatch, OrganizationSpec, ValidationError,
};
use netacl_store::{OrganizationCursor, StoreError};
use rand::RngCore;

use crate::auth::Principal;
use crate::http::body::{read_write_body, FormShape};
use crate::http::cursor::Family;
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{
    Authorized, CreateOrganizations, DeleteOrganizations, ReadOrganizations, UpdateOrganizations,
};
use crate::http::paging::{self, Paging};
use crate::http::query::Query;
use crate::AppState;

pub(crate) mod connections;
pub(crate) mod schemas;

/// The extra scope a create that enables connections needs.
pub(crate) const CONNECTIONS_SCOPE: &str = "create:organization_connections";

/// Form bodies (create and update): nested objects by bracketed keys
/// (`branding[colors][primary]=%23fff`, `metadata[tier]=gold`,
/// `enabled_connections[0][connection_id]=con_...`), or any object member as JSON text
/// (`enabled_connections=[...]`).
pub(crate) const ORGANIZATION_FORM: FormShape = FormShape {
    booleans: &[
        "token_quota.client_credentials.enforce",
        "enabled_connections[].assign_membership_on_login",
        "enabled_connections[].show_as_button",
        "enabled_connections[].is_signup_enabled",
    ],
    integers: &[
        "token_quota.client_credentials.per_day",
        "token_quota.client_credentials.per_hour",
    ],
    json_fields: &[
        "branding",
        "branding.colors",
        "metadata",
        "enabled_connections",
        "enabled_connections[]",
        "token_quota",
        "token_quota.client_credentials",
    ],
};

/// `POST /organizations`: 201 with the stored organization.
pub(crate) async fn create(
    _: Authorized<CreateOrganizations>,
    Extension(principal): Extension<Principal>,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = read_write_body(
        &state,
        raw.as_deref(),
        &headers,
        body,
        Some(&ORGANIZATION_FORM),
    )
    .await?;
    let spec = OrganizationSpec::from_json(&value)?;
    if spec
        .enabled_connections
        .as_ref()
        .is_some_and(|c| !c.is_empty())
    {
        principal.require_any(&[CONNECTIONS_SCOPE])?;
    }
    let organization = Organization {
        id: OrganizationId::from_random(random_u128()),
        spec,
    };
    let tenant = &state.inner.tenant;
    let connections = tenant
        .store()
        .create_organization(&tenant.id, &organization)
        .await
        .map_err(|err| create_error(err, &organization))?;
    Ok(json_response(
        StatusCode::CREATED,
        &organization.to_json(&connections),
    ))
}

fn create_error(err: StoreError, organization: &Organization) -> ApiError {
    match err {
        StoreError::NameTaken(_) => name_taken(&organization.spec.name),
        StoreError::UnknownConnection(id) => {
            let position = organization
                .spec
                .enabled_connections
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .position(|c| c.connection_id == id)
                .unwrap_or(0);
            ValidationError::new(
                format!("enabled_connections[{position}].connection_id"),
                format!("Connection {id} does not exist"),
            )
            .into()
        }
        other => other.into(),
    }
}

/// 128 bits from the operating system's CSPRNG.
fn random_u128() -> u128 {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    u128::from_le_bytes(bytes)
}

/// An organization id from the path: percent-decoded, then checked (400 `invalid_uri`).
pub(crate) struct OrganizationPath(pub(crate) OrganizationId);

impl<S: Send + Sync> FromRequestParts<S> for OrganizationPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "id"))?;
        let raw = params.get("id").map(String::as_str).unwrap_or_default();
        OrganizationId::parse(raw)
            .map(OrganizationPath)
            .ok_or_else(|| {
                ApiError::invalid_uri(
                    format!("String does not match pattern {ORGANIZATION_ID_PATTERN}"),
                    "id",
                )
            })
    }
}

/// The pattern of organization ids.
pub(crate) const ORGANIZATION_ID_PATTERN: &str = "^org_[a-zA-Z0-9]{16}$";

/// The 409 of a name another organization holds.
fn name_taken(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        Some("conflict"),
        format!("An organization with the name {name} already exists."),
    )
}

/// `GET /organizations`: offset pages (`page`, `per_page`, `include_totals`: a bare array or
/// `{organizations, start, limit, total}`) or checkpoint pages (`from`, `take`:
/// `{organizations, next?}`), in creation order.
pub(crate) async fn list(
    _: Authorized<ReadOrganizations>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &paging::ALL_PARAMETERS)?;
    let tenant = &state.inner.tenant;
    let body = match Paging::from_query(&query)? {
        Paging::Offset(page) => {
            let found = tenant
                .store()
                .list_organizations(&tenant.id, page.offset(), page.per_page)
                .await?;
            let items = found.organizations.iter().map(Organization::record_json);
            page.answer("organizations", items.collect(), found.total.unwrap_or(0))
        }
        Paging::Checkpoint { from, take } => {
            let cursors = state.cursors();
            let after = from
                .map(|text| paging::open_checkpoint(&cursors, Family::Organizations, &text))
                .transpose()?
                .map(decode_cursor)
                .transpose()?;
            let found = tenant
                .store()
                .organizations_after(&tenant.id, after.as_ref(), take)
                .await?;
            let items = found.organizations.iter().map(Organization::record_json);
            let next = found.next.as_ref().map(encode_cursor);
            paging::checkpoint_answer(
                &cursors,
                Family::Organizations,
                "organizations",
                items.collect(),
                next.as_deref(),
            )
        }
    };
    Ok(json_response(StatusCode::OK, &body))
}

/// The checkpoint of an organization: its creation time (8 bytes, big-endian) and its id.
fn encode_cursor(cursor: &OrganizationCursor) -> Vec<u8> {
    let mut bytes = cursor.created_at_ms.to_be_bytes().to_vec();
    bytes.extend_from_slice(cursor.id.as_str().as_bytes());
    bytes
}

fn decode_cursor(bytes: Vec<u8>) -> Result<OrganizationCursor, ApiError> {
    let (time, id) = bytes
        .split_at_checked(8)
        .ok_or_else(paging::invalid_checkpoint)?;
    let created_at_ms =
        i64::from_be_bytes(time.try_into().map_err(|_| paging::invalid_checkpoint())?);
    let id = std::str::from_utf8(id)
        .ok()
        .and_then(OrganizationId::parse)
        .ok_or_else(paging::invalid_checkpoint)?;
    Ok(OrganizationCursor { created_at_ms, id })
}

/// `GET /organizations/{id}`.
pub(crate) async fn get(
    _: Authorized<ReadOrganizations>,
    OrganizationPath(id): OrganizationPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    let organization = tenant.store().organization(&tenant.id, &id).await?;
    Ok(json_response(StatusCode::OK, &organization.record_json()))
}

/// `GET /organizations/name/{name}`: a name that cannot be an organization's is a 400
/// `invalid_uri` naming why, an unknown one a 404.
pub(crate) async fn get_by_name(
    _: Authorized<ReadOrganizations>,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let Path(name) = name.map_err(|err| ApiError::invalid_uri(err.body_text(), "name"))?;
    // The create's own name rule, through the PATCH body that carries only a name.
    OrganizationPatch::from_json(&serde_json::json!({ "name": name }))
        .map_err(|err| ApiError::invalid_uri(err.reason, "name"))?;
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    let organization = tenant
        .store()
        .organization_by_name(&tenant.id, &name)
        .await?;
    Ok(json_response(StatusCode::OK, &organization.record_json()))
}

/// `PATCH /organizations/{id}`: 200 with the updated organization.
pub(crate) async fn update(
    _: Authorized<UpdateOrganizations>,
    OrganizationPath(id): OrganizationPath,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = read_write_body(
        &state,
        raw.as_deref(),
        &headers,
        body,
        Some(&ORGANIZATION_FORM),
    )
    .await?;
    let patch = OrganizationPatch::from_json(&value)?;
    let tenant = &state.inner.tenant;
    let updated = tenant
        .store()
        .update_organization(&tenant.id, &id, &patch)
        .await
        .map_err(|err| match err {
            StoreError::NameTaken(_) => name_taken(patch.name.as_deref().unwrap_or_default()),
            other => other.into(),
        })?;
    Ok(json_response(StatusCode::OK, &updated.record_json()))
}

/// `DELETE /organizations/{id}`: 204; the organization's connections go with it.
pub(crate) async fn delete(
    _: Authorized<DeleteOrganizations>,
    OrganizationPath(id): OrganizationPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    tenant.store().delete_organization(&tenant.id, &id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

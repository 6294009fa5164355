//! `POST /api/v2/organizations`.
//!
//! Scopes: `create:organizations` is required; a body that enables connections (a non-empty
//! `enabled_connections`) also requires `create:organization_connections`.
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::Extension;
use http::{HeaderMap, StatusCode};
use netacl_model::{Organization, OrganizationId, OrganizationSpec, ValidationError};
use netacl_store::StoreError;
use rand::RngCore;

use crate::auth::Principal;
use crate::body::{read_write_body, FormShape};
use crate::error::{json_response, ApiError};
use crate::guard::{Authorized, CreateOrganizations};
use crate::AppState;

/// The extra scope a create that enables connections needs.
pub(crate) const CONNECTIONS_SCOPE: &str = "create:organization_connections";

/// Form bodies: nested objects by bracketed keys (`branding[colors][primary]=%23fff`,
/// `metadata[tier]=gold`, `enabled_connections[0][connection_id]=con_...`), or any object
/// member as JSON text (`enabled_connections=[...]`).
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
    State(state): State<AppState>,
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
        StoreError::NameTaken(_) => ApiError::new(
            StatusCode::CONFLICT,
            Some("conflict"),
            format!(
                "An organization with the name {} already exists.",
                organization.spec.name
            ),
        ),
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

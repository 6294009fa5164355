//! An organization's connections, through their two views of the same rows:
//!
//! - `/organizations/{id}/enabled_connections[/{connection_id}]`: the connections whose
//!   `is_enabled` is true, with the create's members (`connection_id`,
//!   `assign_membership_on_login`, `show_as_button`, `is_signup_enabled`); a disabled connection
//!   is absent from this view (404), and adding it here again is a 409;
//! - `/organizations/{id}/connections[/{connection_id}]`: every connection of the organization,
//!   also with `is_enabled`, `organization_connection_name` and `organization_access_level`;
//!   the list takes an `is_enabled` filter.
//!
//! Both list in the order the connections were added, offset-paged (`page`, `per_page`,
//! `include_totals`: a bare array or `{enabled_connections | connections, start, limit,
//! total}`). Scopes: `read:`, `create:`, `update:`, `delete:organization_connections`.
use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use netacl_model::{
    ConnectionView, OrganizationConnection, OrganizationConnectionPatch, ValidationError,
};
use netacl_store::{OrganizationConnectionEntry, StoreError};

use crate::http::body::{read_write_body, FormShape};
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{
    Authorized, CreateOrganizationConnections, DeleteOrganizationConnections,
    ReadOrganizationConnections, UpdateOrganizationConnections,
};
use crate::http::paging::{self, OffsetPage};
use crate::http::query::Query;
use crate::resources::organizations::OrganizationPath;
use crate::AppState;

/// The longest connection id, as the create body has it.
const MAX_CONNECTION_ID: usize = 50;

/// Form bodies: the flags are booleans, the rest strings.
pub(crate) const CONNECTION_FORM: FormShape = FormShape {
    booleans: &[
        "assign_membership_on_login",
        "show_as_button",
        "is_signup_enabled",
        "is_enabled",
    ],
    integers: &[],
    json_fields: &[],
};

/// The connection id of the path (percent-decoded; 1..50 characters, else 400 `invalid_uri`).
pub(crate) struct ConnectionPath(String);

impl<S: Send + Sync> FromRequestParts<S> for ConnectionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "connection_id"))?;
        let id = params.get("connection_id").cloned().unwrap_or_default();
        let len = id.chars().count();
        if len > MAX_CONNECTION_ID {
            return Err(ApiError::invalid_uri(
                format!("String is too long ({len} chars), maximum {MAX_CONNECTION_ID}"),
                "connection_id",
            ));
        }
        Ok(Self(id))
    }
}

fn list_key(view: ConnectionView) -> &'static str {
    match view {
        ConnectionView::Enabled => "enabled_connections",
        _ => "connections",
    }
}

/// The view's 404 for a connection it does not hold.
fn not_in_view(view: ConnectionView) -> ApiError {
    let message = match view {
        ConnectionView::Enabled => "The connection is not enabled for the organization.",
        _ => "The connection is not a connection of the organization.",
    };
    ApiError::new(
        StatusCode::NOT_FOUND,
        Some("inexistent_connection"),
        message,
    )
}

fn store_error(err: StoreError, view: ConnectionView) -> ApiError {
    match err {
        StoreError::ConnectionNotInOrganization(_) => not_in_view(view),
        StoreError::UnknownConnection(id) => {
            ValidationError::new("connection_id", format!("Connection {id} does not exist")).into()
        }
        other => other.into(),
    }
}

fn entry_json(entry: &OrganizationConnectionEntry, view: ConnectionView) -> serde_json::Value {
    entry.settings.to_json(view, &entry.connection)
}

async fn list(
    state: &AppState,
    id: &netacl_model::OrganizationId,
    raw: Option<&str>,
    view: ConnectionView,
) -> Result<Response, ApiError> {
    let (query, enabled) = match view {
        ConnectionView::Enabled => (Query::parse(raw, &paging::OFFSET_PARAMETERS)?, Some(true)),
        _ => {
            let query = Query::parse(raw, &["page", "per_page", "include_totals", "is_enabled"])?;
            let enabled = query.boolean("is_enabled")?;
            (query, enabled)
        }
    };
    let page = OffsetPage::from_query(&query)?;
    let tenant = &state.inner.tenant;
    let found = tenant
        .store()
        .organization_connections(&tenant.id, id, enabled, page.offset(), page.per_page)
        .await?;
    let items = found.entries.iter().map(|e| entry_json(e, view)).collect();
    let body = page.answer(list_key(view), items, found.total);
    Ok(json_response(StatusCode::OK, &body))
}

async fn add(
    state: &AppState,
    id: &netacl_model::OrganizationId,
    raw: Option<&str>,
    headers: &HeaderMap,
    body: Body,
    view: ConnectionView,
) -> Result<Response, ApiError> {
    let value = read_write_body(state, raw, headers, body, Some(&CONNECTION_FORM)).await?;
    let settings = OrganizationConnection::from_json(&value, view)?;
    let tenant = &state.inner.tenant;
    let entry = tenant
        .store()
        .add_organization_connection(&tenant.id, id, &settings)
        .await
        .map_err(|err| store_error(err, view))?;
    Ok(json_response(
        StatusCode::CREATED,
        &entry_json(&entry, view),
    ))
}

async fn get_one(
    state: &AppState,
    id: &netacl_model::OrganizationId,
    connection_id: &str,
    raw: Option<&str>,
    view: ConnectionView,
) -> Result<Response, ApiError> {
    Query::parse(raw, &[])?;
    let tenant = &state.inner.tenant;
    let entry = tenant
        .store()
        .organization_connection(
            &tenant.id,
            id,
            connection_id,
            view == ConnectionView::Enabled,
        )
        .await
        .map_err(|err| store_error(err, view))?;
    Ok(json_response(StatusCode::OK, &entry_json(&entry, view)))
}

async fn update(
    state: &AppState,
    (id, connection_id): (&netacl_model::OrganizationId, &str),
    raw: Option<&str>,
    headers: &HeaderMap,
    body: Body,
    view: ConnectionView,
) -> Result<Response, ApiError> {
    let value = read_write_body(state, raw, headers, body, Some(&CONNECTION_FORM)).await?;
    let patch = OrganizationConnectionPatch::from_json(&value, view)?;
    let tenant = &state.inner.tenant;
    let entry = tenant
        .store()
        .update_organization_connection(
            &tenant.id,
            id,
            connection_id,
            &patch,
            view == ConnectionView::Enabled,
        )
        .await
        .map_err(|err| store_error(err, view))?;
    Ok(json_response(StatusCode::OK, &entry_json(&entry, view)))
}

async fn remove(
    state: &AppState,
    id: &netacl_model::OrganizationId,
    connection_id: &str,
    raw: Option<&str>,
    view: ConnectionView,
) -> Result<Response, ApiError> {
    Query::parse(raw, &[])?;
    let tenant = &state.inner.tenant;
    tenant
        .store()
        .remove_organization_connection(
            &tenant.id,
            id,
            connection_id,
            view == ConnectionView::Enabled,
        )
        .await
        .map_err(|err| store_error(err, view))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// One handler set per view.
macro_rules! view_handlers {
    ($module:ident, $view:expr) => {
        pub(crate) mod $module {
            use super::*;

            /// `GET` the list.
            pub(crate) async fn list(
                _: Authorized<ReadOrganizationConnections>,
                OrganizationPath(id): OrganizationPath,
                state: AppState,
                RawQuery(raw): RawQuery,
            ) -> Result<Response, ApiError> {
                super::list(&state, &id, raw.as_deref(), $view).await
            }

            /// `POST` a connection: 201 with it.
            pub(crate) async fn add(
                _: Authorized<CreateOrganizationConnections>,
                OrganizationPath(id): OrganizationPath,
                state: AppState,
                RawQuery(raw): RawQuery,
                headers: HeaderMap,
                body: Body,
            ) -> Result<Response, ApiError> {
                super::add(&state, &id, raw.as_deref(), &headers, body, $view).await
            }

            /// `GET` one connection.
            pub(crate) async fn get(
                _: Authorized<ReadOrganizationConnections>,
                OrganizationPath(id): OrganizationPath,
                ConnectionPath(connection_id): ConnectionPath,
                state: AppState,
                RawQuery(raw): RawQuery,
            ) -> Result<Response, ApiError> {
                super::get_one(&state, &id, &connection_id, raw.as_deref(), $view).await
            }

            /// `PATCH` one connection: 200 with it.
            pub(crate) async fn update(
                _: Authorized<UpdateOrganizationConnections>,
                OrganizationPath(id): OrganizationPath,
                ConnectionPath(connection_id): ConnectionPath,
                state: AppState,
                RawQuery(raw): RawQuery,
                headers: HeaderMap,
                body: Body,
            ) -> Result<Response, ApiError> {
                super::update(
                    &state,
                    (&id, &connection_id),
                    raw.as_deref(),
                    &headers,
                    body,
                    $view,
                )
                .await
            }

            /// `DELETE` one connection: 204.
            pub(crate) async fn remove(
                _: Authorized<DeleteOrganizationConnections>,
                OrganizationPath(id): OrganizationPath,
                ConnectionPath(connection_id): ConnectionPath,
                state: AppState,
                RawQuery(raw): RawQuery,
            ) -> Result<Response, ApiError> {
                super::remove(&state, &id, &connection_id, raw.as_deref(), $view).await
            }
        }
    };
}

view_handlers!(enabled, ConnectionView::Enabled);
view_handlers!(all, ConnectionView::All);

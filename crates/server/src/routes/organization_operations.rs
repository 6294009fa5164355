//! The route table's entries for organizations beyond create, an organization's connections
//! (both views) and client grants, and the tenant's connections, clients and client grants.
use axum::routing::{delete, get, patch, post};
use http::Method;

use super::route::{
    QueryParam, Route, CHECKPOINT_PAGING, FROM, INCLUDE_FIELDS, INCLUDE_TOTALS,
    OFFSET_INCLUDE_TOTALS, OFFSET_PAGE, OFFSET_PER_PAGE, PAGE, PAGING, PER_PAGE, TAKE,
};
use crate::openapi::{BodySchema, Operation};
use crate::resources::organizations::connections as org_connections;
use crate::resources::{clients, connections, organizations};

const ALL_CONNECTIONS_QUERY: &[QueryParam] = &[
    PAGE,
    PER_PAGE,
    INCLUDE_TOTALS,
    (
        "is_enabled",
        "boolean",
        "Only the connections whose is_enabled is this.",
    ),
];

const ORGANIZATION_GRANTS_QUERY: &[QueryParam] = &[
    PAGE,
    PER_PAGE,
    INCLUDE_TOTALS,
    ("audience", "string", "Only grants on this audience."),
    ("client_id", "string", "Only grants of this client."),
    ("grant_ids", "string", "Only the grant with this id."),
];

const CONNECTIONS_QUERY: &[QueryParam] = &[
    OFFSET_PAGE,
    OFFSET_PER_PAGE,
    OFFSET_INCLUDE_TOTALS,
    FROM,
    TAKE,
    ("strategy", "string", "Only connections of this strategy."),
    ("name", "string", "Only the connection with this name."),
    (
        "fields",
        "string",
        "Comma-separated fields among id, name, strategy.",
    ),
    INCLUDE_FIELDS,
];

const CLIENTS_QUERY: &[QueryParam] = &[
    PAGE,
    PER_PAGE,
    INCLUDE_TOTALS,
    (
        "fields",
        "string",
        "Comma-separated fields among client_id, name, app_type, grant_types, is_first_party.",
    ),
    INCLUDE_FIELDS,
];

const CLIENT_GRANTS_QUERY: &[QueryParam] = &[
    OFFSET_PAGE,
    OFFSET_PER_PAGE,
    OFFSET_INCLUDE_TOTALS,
    FROM,
    TAKE,
    ("audience", "string", "Only grants on this audience."),
    ("client_id", "string", "Only the grant of this client."),
];

/// The five operations of one view of an organization's connections.
macro_rules! connection_view {
    ($path:literal, $one:literal, $id:literal, $list_query:expr, $handlers:path,
     $add:ident, $update:ident, $what:literal) => {{
        use $handlers as h;
        [
            Route {
                operation: Operation {
                    method: Method::GET,
                    path: $path,
                    operation_id: concat!("get_", $id),
                    summary: concat!(
                        "List ",
                        $what,
                        " of an organization, in the order they were added"
                    ),
                    scope: Some("read:organization_connections"),
                    query: $list_query,
                    body: None,
                    form: false,
                    success: (
                        200,
                        concat!(
                            "A page of ",
                            $what,
                            " (bare array, or envelope with include_totals)"
                        ),
                    ),
                    errors: &[400, 404],
                },
                route: || get(h::list),
            },
            Route {
                operation: Operation {
                    method: Method::POST,
                    path: $path,
                    operation_id: concat!("post_", $id),
                    summary: concat!("Add a connection to an organization (", $what, " view)"),
                    scope: Some("create:organization_connections"),
                    query: &[],
                    body: Some(BodySchema::$add),
                    form: true,
                    success: (201, "The organization's connection"),
                    errors: &[400, 404, 409, 413, 415],
                },
                route: || post(h::add),
            },
            Route {
                operation: Operation {
                    method: Method::GET,
                    path: $one,
                    operation_id: concat!("get_", $id, "_by_connection_id"),
                    summary: concat!("Get one of the ", $what, " of an organization"),
                    scope: Some("read:organization_connections"),
                    query: &[],
                    body: None,
                    form: false,
                    success: (200, "The organization's connection"),
                    errors: &[400, 404],
                },
                route: || get(h::get),
            },
            Route {
                operation: Operation {
                    method: Method::PATCH,
                    path: $one,
                    operation_id: concat!("patch_", $id, "_by_connection_id"),
                    summary: concat!("Update one of the ", $what, " of an organization"),
                    scope: Some("update:organization_connections"),
                    query: &[],
                    body: Some(BodySchema::$update),
                    form: true,
                    success: (200, "The organization's connection"),
                    errors: &[400, 404, 413, 415],
                },
                route: || patch(h::update),
            },
            Route {
                operation: Operation {
                    method: Method::DELETE,
                    path: $one,
                    operation_id: concat!("delete_", $id, "_by_connection_id"),
                    summary: concat!("Remove one of the ", $what, " from an organization"),
                    scope: Some("delete:organization_connections"),
                    query: &[],
                    body: None,
                    form: false,
                    success: (204, "Removed"),
                    errors: &[400, 404],
                },
                route: || delete(h::remove),
            },
        ]
    }};
}

/// The operations of this module.
pub(super) fn operations() -> Vec<Route> {
    let mut operations = vec![
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/organizations",
                operation_id: "get_organizations",
                summary: "List organizations in creation order (offset or checkpoint paging)",
                scope: Some("read:organizations"),
                query: CHECKPOINT_PAGING,
                body: None,
                form: false,
                success: (
                    200,
                    "A bare array, {organizations, start, limit, total} or {organizations, next}",
                ),
                errors: &[400],
            },
            route: || get(organizations::list),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/organizations/{id}",
                operation_id: "get_organizations_by_id",
                summary: "Get an organization",
                scope: Some("read:organizations"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The organization"),
                errors: &[400, 404],
            },
            route: || get(organizations::get),
        },
        Route {
            operation: Operation {
                method: Method::PATCH,
                path: "/api/v2/organizations/{id}",
                operation_id: "patch_organizations_by_id",
                summary: "Update an organization (each member given replaces the stored one)",
                scope: Some("update:organizations"),
                query: &[],
                body: Some(BodySchema::OrganizationUpdate),
                form: true,
                success: (200, "The updated organization"),
                errors: &[400, 404, 409, 413, 415],
            },
            route: || patch(organizations::update),
        },
        Route {
            operation: Operation {
                method: Method::DELETE,
                path: "/api/v2/organizations/{id}",
                operation_id: "delete_organizations_by_id",
                summary: "Delete an organization and its connections",
                scope: Some("delete:organizations"),
                query: &[],
                body: None,
                form: false,
                success: (204, "Deleted"),
                errors: &[400, 404],
            },
            route: || delete(organizations::delete),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/organizations/name/{name}",
                operation_id: "get_name_by_name",
                summary: "Get an organization by its name",
                scope: Some("read:organizations"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The organization"),
                errors: &[400, 404],
            },
            route: || get(organizations::get_by_name),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/organizations/{id}/client-grants",
                operation_id: "get_organization_client_grants",
                summary:
                    "List the client grants of an organization (netacl keeps none: always empty)",
                scope: Some("read:organization_client_grants"),
                query: ORGANIZATION_GRANTS_QUERY,
                body: None,
                form: false,
                success: (200, "An empty array, or the envelope with include_totals"),
                errors: &[400, 404],
            },
            route: || get(clients::list_organization_grants),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/connections",
                operation_id: "get_connections",
                summary: "List the directory's connections, in id order",
                scope: Some("read:connections"),
                query: CONNECTIONS_QUERY,
                body: None,
                form: false,
                success: (
                    200,
                    "A bare array, {connections, start, limit, total} or {connections, next}",
                ),
                errors: &[400],
            },
            route: || get(connections::list),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/clients",
                operation_id: "get_clients",
                summary: "List the registered API clients (never a secret)",
                scope: Some("read:clients"),
                query: CLIENTS_QUERY,
                body: None,
                form: false,
                success: (200, "A bare array, or {clients, start, limit, total}"),
                errors: &[400],
            },
            route: || get(clients::list_clients),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/client-grants",
                operation_id: "get_client-grants",
                summary: "List the clients' grants on the management API",
                scope: Some("read:client_grants"),
                query: CLIENT_GRANTS_QUERY,
                body: None,
                form: false,
                success: (
                    200,
                    "A bare array, {client_grants, start, limit, total} or {client_grants, next}",
                ),
                errors: &[400],
            },
            route: || get(clients::list_grants),
        },
    ];
    operations.extend(connection_view!(
        "/api/v2/organizations/{id}/enabled_connections",
        "/api/v2/organizations/{id}/enabled_connections/{connection_id}",
        "enabled_connections",
        PAGING,
        org_connections::enabled,
        EnabledConnectionAdd,
        EnabledConnectionUpdate,
        "the enabled connections"
    ));
    operations.extend(connection_view!(
        "/api/v2/organizations/{id}/connections",
        "/api/v2/organizations/{id}/connections/{connection_id}",
        "organization_connections",
        ALL_CONNECTIONS_QUERY,
        org_connections::all,
        OrganizationConnectionAdd,
        OrganizationConnectionUpdate,
        "the connections (enabled or not)"
    ));
    operations
}

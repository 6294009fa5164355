//! The route table: one entry per operation. The router and the OpenAPI document are both built
//! from it, so they cannot drift apart.
mod organization_operations;
mod route;
use std::collections::BTreeMap;

use axum::middleware::from_fn;
use axum::routing::{delete, get, patch, post, put, MethodRouter};
use axum::Router;
use http::Method;

use crate::http::error::ApiError;
use crate::http::guard;
use crate::netacl_v1;
use crate::openapi::{self, BodySchema, Operation};
use crate::resources::{
    acl_keys, analysis, branding, directory, groups, history, managed_lists, network_acls,
    organizations, sessions, signing_keys,
};
use crate::AppState;
use axum::response::Response;
use http::StatusCode;
use netacl_model::Limits;
pub(crate) use route::Route;
use route::{INCLUDE_FIELDS, PAGING};
use serde_json::{Map, Value};

const WATCH: &[(&str, &str, &str)] = &[
    (
        "since",
        "integer",
        "The version the caller holds; absent: answer at once.",
    ),
    (
        "timeout_ms",
        "integer",
        "Longest wait for a change, 0..60000 (default 25000).",
    ),
    (
        "lists",
        "string",
        "The managed lists the caller holds, NAME:DIGEST,... (may be empty): the answer then carries managed_lists, with items only where the digest differs, and a list change also ends the wait.",
    ),
    (
        "keys",
        "string",
        "The caller's X25519 public key (base64url, 43 characters): the answer then carries network_acl_keys, the material of the keys live rules name sealed to it with HPKE, or network_acl_keys_withheld (scope or transport) when the caller lacks read:network_acl_key_material or the request came over plain HTTP from off loopback.",
    ),
];

const MEMBERS_QUERY: &[(&str, &str, &str)] = &[
    ("fields", "string", "Comma-separated fields among id, member_type, type, connection_id, created_at (max 256 chars)."),
    INCLUDE_FIELDS,
    ("from", "string", "The `next` cursor of the previous page."),
    ("take", "integer", "Members per page, 1..100 (default 50)."),
];

const SESSIONS_QUERY: &[(&str, &str, &str)] = &[
    (
        "include_totals",
        "boolean",
        "Also answer the user's session count as `total`.",
    ),
    (
        "from",
        "string",
        "The `next` cursor of the previous page (exclusive).",
    ),
    ("take", "integer", "Sessions per page, 1..100 (default 50)."),
];

/// Every operation the server answers.
pub(crate) fn operations() -> Vec<Route> {
    let mut operations = base_operations();
    operations.extend(organization_operations::operations());
    operations.extend(network_acl_key_operations());
    operations.extend(log_operations());
    operations.extend(history_operations());
    operations
}

const LOGS_QUERY: &[(&str, &str, &str)] = &[
    ("page", "integer", "Page index, from 0."),
    (
        "per_page",
        "integer",
        "Events per page, 0..100 (default 50).",
    ),
    (
        "include_totals",
        "boolean",
        "Answer an envelope with start, limit, length and total.",
    ),
    (
        "from",
        "string",
        "A log id: page forward from the event after it, by log id (with take).",
    ),
    (
        "take",
        "integer",
        "Events per page with from, 1..100 (default 50).",
    ),
    (
        "fields",
        "string",
        "Comma-separated members to include or exclude (max 256 chars).",
    ),
    (
        "include_fields",
        "boolean",
        "true (default): answer only the listed members; false: all but them.",
    ),
    (
        "sort",
        "string",
        "date:1 (oldest first) or date:-1 (newest first, the default).",
    ),
    (
        "q",
        "string",
        "Search: type:X, client_id:X, date:[A TO B], joined by AND.",
    ),
    (
        "search",
        "string",
        "The same as q (the Python SDK sends this name).",
    ),
];

/// `/api/v2/logs` and the edges' summaries (see [`crate::resources::logs`]).
fn log_operations() -> Vec<Route> {
    vec![
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/logs",
                operation_id: "get_logs",
                summary: "List the tenant's log events (management writes, edge summaries)",
                scope: Some("read:logs"),
                query: LOGS_QUERY,
                body: None,
                form: false,
                success: (
                    200,
                    "A page of log events (bare array, or envelope with include_totals)",
                ),
                errors: &[400],
            },
            route: || get(crate::resources::logs::list),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/logs/{id}",
                operation_id: "get_logs_by_id",
                summary: "Get a log event",
                scope: Some("read:logs"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The log event"),
                errors: &[400, 404],
            },
            route: || get(crate::resources::logs::get),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/_netacl/v1/edge/summaries",
                operation_id: "netacl_edge_summaries",
                summary:
                    "Record an edge's per-rule counts as acls_summary events in the tenant's logs",
                scope: Some("create:edge_summaries"),
                query: &[],
                body: Some(BodySchema::EdgeSummaries),
                form: false,
                success: (200, "How many events were recorded"),
                errors: &[400, 413, 415],
            },
            route: || post(crate::resources::logs::post_summaries),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/_netacl/v1/edge/sample",
                operation_id: "netacl_edge_sample",
                summary:
                    "Keep an edge's traffic sample (its last one replaced) for the impact preview",
                scope: Some("create:edge_summaries"),
                query: &[],
                body: Some(BodySchema::EdgeSample),
                form: false,
                success: (200, "How many requests were kept"),
                errors: &[400, 413, 415],
            },
            route: || post(crate::resources::logs::sample::post_sample),
        },
    ]
}

const VERSIONS_QUERY: &[(&str, &str, &str)] = &[
    (
        "from",
        "string",
        "The `next` of the previous page (a version number: list from it down).",
    ),
    ("take", "integer", "Versions per page, 1..100 (default 50)."),
];

const DIFF_QUERY: &[(&str, &str, &str)] = &[(
    "against",
    "integer",
    "The kept version to compare with (required).",
)];

/// `/_netacl/v1/network-acls/versions` and `/rollback` (see [`history`]).
fn history_operations() -> Vec<Route> {
    vec![
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/network-acls/versions",
                operation_id: "netacl_versions",
                summary: "The rule-set history, newest first: who changed what, when, in which request",
                scope: Some("read:network_acls"),
                query: VERSIONS_QUERY,
                body: None,
                form: false,
                success: (200, "A page of versions"),
                errors: &[400],
            },
            route: || get(history::list),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/network-acls/versions/{version}",
                operation_id: "netacl_version",
                summary: "The network ACLs of a kept version, with what that version changed",
                scope: Some("read:network_acls"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The version's network ACLs"),
                errors: &[400, 404],
            },
            route: || get(history::get),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/network-acls/versions/{version}/diff",
                operation_id: "netacl_version_diff",
                summary: "What differs between two kept versions (updated_at ignored)",
                scope: Some("read:network_acls"),
                query: DIFF_QUERY,
                body: None,
                form: false,
                success: (200, "Records added, removed and changed"),
                errors: &[400, 404],
            },
            route: || get(history::diff),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/_netacl/v1/network-acls/rollback",
                operation_id: "netacl_rollback",
                summary: "Restore the network ACLs of a kept version as a new version (also needs create:network_acls and delete:network_acls)",
                scope: Some("update:network_acls"),
                query: &[],
                body: Some(BodySchema::Rollback),
                form: false,
                success: (200, "The version in force and its network ACLs"),
                errors: &[400, 404, 409, 413, 415],
            },
            route: || post(history::rollback),
        },
    ]
}

/// `/api/v2/keys/network-acls` (see [`acl_keys`]).
fn network_acl_key_operations() -> Vec<Route> {
    vec![
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/keys/network-acls",
                operation_id: "get_network-acl-keys",
                summary: "List network ACL keys, newest first (never their material)",
                scope: Some("read:network_acl_keys"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The keys"),
                errors: &[400],
            },
            route: || get(acl_keys::list),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/api/v2/keys/network-acls",
                operation_id: "post_network-acl-keys",
                summary: "Create a network ACL key (HMAC-SHA256 material, write-only)",
                scope: Some("create:network_acl_keys"),
                query: &[],
                body: Some(BodySchema::NetworkAclKeyCreate),
                form: true,
                success: (201, "The stored key"),
                errors: &[400, 409, 413, 415],
            },
            route: || post(acl_keys::create),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/keys/network-acls/{id}",
                operation_id: "get_network-acl-keys_by_id",
                summary: "Get a network ACL key (never its material)",
                scope: Some("read:network_acl_keys"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The key"),
                errors: &[400, 404],
            },
            route: || get(acl_keys::get),
        },
        Route {
            operation: Operation {
                method: Method::DELETE,
                path: "/api/v2/keys/network-acls/{id}",
                operation_id: "delete_network-acl-keys_by_id",
                summary: "Delete a network ACL key (409 while a network ACL names it)",
                scope: Some("delete:network_acl_keys"),
                query: &[],
                body: None,
                form: false,
                success: (204, "Deleted"),
                errors: &[400, 404, 409],
            },
            route: || delete(acl_keys::delete),
        },
    ]
}

fn base_operations() -> Vec<Route> {
    vec![
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/network-acls",
                operation_id: "get_network-acls",
                summary: "List network ACLs, ascending by priority",
                scope: Some("read:network_acls"),
                query: PAGING,
                body: None,
                form: false,
                success: (
                    200,
                    "A page of network ACLs (bare array, or envelope with include_totals)",
                ),
                errors: &[400],
            },
            route: || get(network_acls::list),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/api/v2/network-acls",
                operation_id: "post_network-acls",
                summary: "Create a network ACL",
                scope: Some("create:network_acls"),
                query: &[],
                body: Some(BodySchema::NetworkAclCreate),
                form: true,
                success: (201, "The stored network ACL"),
                errors: &[400, 409, 413, 415],
            },
            route: || post(network_acls::create),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/network-acls/{id}",
                operation_id: "get_network-acls_by_id",
                summary: "Get a network ACL",
                scope: Some("read:network_acls"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The network ACL"),
                errors: &[400, 404],
            },
            route: || get(network_acls::get),
        },
        Route {
            operation: Operation {
                method: Method::PUT,
                path: "/api/v2/network-acls/{id}",
                operation_id: "put_network-acls_by_id",
                summary: "Replace a network ACL",
                scope: Some("update:network_acls"),
                query: &[],
                body: Some(BodySchema::NetworkAclCreate),
                form: true,
                success: (200, "The stored network ACL"),
                errors: &[400, 404, 409, 413, 415],
            },
            route: || put(network_acls::replace),
        },
        Route {
            operation: Operation {
                method: Method::PATCH,
                path: "/api/v2/network-acls/{id}",
                operation_id: "patch_network-acls_by_id",
                summary: "Update some fields of a network ACL (a given rule replaces the whole rule)",
                scope: Some("update:network_acls"),
                query: &[],
                body: Some(BodySchema::NetworkAclUpdate),
                form: true,
                success: (200, "The stored network ACL"),
                errors: &[400, 404, 409, 413, 415],
            },
            route: || patch(network_acls::update),
        },
        Route {
            operation: Operation {
                method: Method::DELETE,
                path: "/api/v2/network-acls/{id}",
                operation_id: "delete_network-acls_by_id",
                summary: "Delete a network ACL",
                scope: Some("delete:network_acls"),
                query: &[],
                body: None,
                form: false,
                success: (204, "Deleted"),
                errors: &[400, 404],
            },
            route: || delete(network_acls::delete),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/_netacl/v1/dry-run",
                operation_id: "netacl_dry_run",
                summary: "Evaluate request signals against the live rules or a rule set in the body",
                scope: Some("read:network_acls"),
                query: &[],
                body: Some(BodySchema::DryRun),
                form: false,
                success: (200, "The outcome and the policy version"),
                errors: &[400, 413, 415],
            },
            route: || post(netacl_v1::dry_run),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/_netacl/v1/network-acls/analyze",
                operation_id: "netacl_analyze",
                summary: "Shadowed, redundant and conflicting rules of the live rules or of the rule set in the body",
                scope: Some("read:network_acls"),
                query: &[],
                body: Some(BodySchema::Analyze),
                form: false,
                success: (200, "The findings and the rules left undecided"),
                errors: &[400, 413, 415],
            },
            route: || post(analysis::analyze),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/_netacl/v1/network-acls/preview",
                operation_id: "netacl_preview",
                summary: "Replay requests against the live rules and the rules after the proposed changes",
                scope: Some("read:network_acls"),
                query: &[],
                body: Some(BodySchema::Preview),
                form: false,
                success: (200, "How many decisions change, from what to what, by rule, with examples"),
                errors: &[400, 404, 413, 415],
            },
            route: || post(analysis::preview),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/status",
                operation_id: "netacl_status",
                summary: "The live policy: version, rule count, compile time, index sizes",
                scope: Some("read:network_acls"),
                query: &[],
                body: None,
                form: false,
                success: (200, "Policy status"),
                errors: &[400],
            },
            route: || get(netacl_v1::status),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/network-acls/counts",
                operation_id: "netacl_rule_counts",
                summary: "Per-rule matched and evaluated counts over the last minutes, from the edges' acls_summary events",
                scope: Some("read:network_acls"),
                query: &[(
                    "minutes",
                    "integer",
                    "The window, in minutes before now (1..1440, default 60), split into 12 buckets.",
                )],
                body: None,
                form: false,
                success: (200, "Counts per rule and bucket, with the tenant's totals"),
                errors: &[400],
            },
            route: || get(crate::resources::rule_counts::counts),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/network-acls/watch",
                operation_id: "netacl_watch",
                summary: "Long poll for a new version of the network ACLs",
                scope: Some("read:network_acls"),
                query: WATCH,
                body: None,
                form: false,
                success: (
                    200,
                    "The version and every network ACL (304 when nothing changed)",
                ),
                errors: &[304, 400],
            },
            route: || get(netacl_v1::watch),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/managed-lists",
                operation_id: "netacl_managed_lists",
                summary: "Every managed list: where its content comes from, its version and size",
                scope: Some("read:network_acls"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The managed lists"),
                errors: &[400],
            },
            route: || get(managed_lists::list),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/managed-lists/{name}",
                operation_id: "netacl_managed_list_get",
                summary: "A managed list's items and version",
                scope: Some("read:network_acls"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The managed list"),
                errors: &[400, 404],
            },
            route: || get(managed_lists::get),
        },
        Route {
            operation: Operation {
                method: Method::PUT,
                path: "/_netacl/v1/managed-lists/{name}",
                operation_id: "netacl_managed_list_put",
                summary: "Replace a managed list's content (409 when a file of this node supplies it)",
                scope: Some("update:network_acls"),
                query: &[],
                body: Some(BodySchema::ManagedListPut),
                form: true,
                success: (200, "The managed list as stored"),
                errors: &[400, 404, 409, 413, 415],
            },
            route: || put(managed_lists::put),
        },
        Route {
            operation: Operation {
                method: Method::DELETE,
                path: "/_netacl/v1/managed-lists/{name}",
                operation_id: "netacl_managed_list_delete",
                summary: "Remove a managed list's stored content (it becomes unconfigured)",
                scope: Some("update:network_acls"),
                query: &[],
                body: None,
                form: false,
                success: (204, "Removed"),
                errors: &[400, 404, 409],
            },
            route: || delete(managed_lists::delete),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/_netacl/v1/openapi.json",
                operation_id: "netacl_openapi",
                summary: "This OpenAPI 3.1 document",
                scope: None,
                query: &[],
                body: None,
                form: false,
                success: (200, "The document"),
                errors: &[],
            },
            route: || get(serve_openapi),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/api/v2/organizations",
                operation_id: "post_organizations",
                summary: "Create an organization (enabling connections also needs create:organization_connections)",
                scope: Some("create:organizations"),
                query: &[],
                body: Some(BodySchema::OrganizationCreate),
                form: true,
                success: (201, "The stored organization"),
                errors: &[400, 409, 413, 415],
            },
            route: || post(organizations::create),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/groups/{id}/members",
                operation_id: "get_group_members",
                summary: "List the members of a group, cursor-paged in insertion order",
                scope: Some("read:group_members"),
                query: MEMBERS_QUERY,
                body: None,
                form: false,
                success: (200, "A page of members"),
                errors: &[400, 404],
            },
            route: || get(groups::members),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/users/{user_id}/sessions",
                operation_id: "get_user_sessions",
                summary: "List the sessions of a user, cursor-paged in insertion order",
                scope: Some("read:sessions"),
                query: SESSIONS_QUERY,
                body: None,
                form: false,
                success: (200, "A page of sessions"),
                errors: &[400, 404],
            },
            route: || get(sessions::list),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/branding",
                operation_id: "get_branding",
                summary: "Get the branding settings",
                scope: Some("read:branding"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The branding settings"),
                errors: &[400],
            },
            route: || get(branding::get),
        },
        Route {
            operation: Operation {
                method: Method::PATCH,
                path: "/api/v2/branding",
                operation_id: "patch_branding",
                summary: "Update the branding settings (merged member-wise into the stored ones)",
                scope: Some("update:branding"),
                query: &[],
                body: Some(BodySchema::BrandingUpdate),
                form: true,
                success: (200, "The whole branding settings"),
                errors: &[400, 413, 415],
            },
            route: || patch(branding::update),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/keys/signing",
                operation_id: "get_signing_keys",
                summary: "List the signing keys (current, previous and revoked), newest first",
                scope: Some("read:signing_keys"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The signing keys (public parts only)"),
                errors: &[400],
            },
            route: || get(signing_keys::list),
        },
        Route {
            operation: Operation {
                method: Method::GET,
                path: "/api/v2/keys/signing/{kid}",
                operation_id: "get_signing_key",
                summary: "Get a signing key by its key id",
                scope: Some("read:signing_keys"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The signing key (public parts only)"),
                errors: &[400, 404],
            },
            route: || get(signing_keys::get),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/api/v2/keys/signing/rotate",
                operation_id: "post_signing_keys",
                summary: "Rotate the signing key: a new key becomes current, the current one previous",
                scope: Some("create:signing_keys"),
                query: &[],
                body: None,
                form: false,
                success: (201, "The new current key's certificate and key id"),
                errors: &[400, 409],
            },
            route: || post(signing_keys::rotate),
        },
        Route {
            operation: Operation {
                method: Method::PUT,
                path: "/api/v2/keys/signing/{kid}/revoke",
                operation_id: "put_signing_keys",
                summary: "Revoke a signing key that is not the current one: its tokens stop verifying at once",
                scope: Some("update:signing_keys"),
                query: &[],
                body: None,
                form: false,
                success: (200, "The revoked key's certificate and key id"),
                errors: &[400, 404, 409],
            },
            route: || put(signing_keys::revoke),
        },
        Route {
            operation: Operation {
                method: Method::POST,
                path: "/_netacl/v1/directory/import",
                operation_id: "netacl_directory_import",
                summary: "Import directory data (connections, users, groups, members, sessions), upserting by id",
                scope: Some("create:users"),
                query: &[],
                body: Some(BodySchema::DirectoryImport),
                form: false,
                success: (200, "What the import did"),
                errors: &[400, 409, 413, 415],
            },
            route: || post(directory::import),
        },
    ]
}

/// Every operation the server answers, as the OpenAPI document describes it.
pub(crate) fn described() -> Vec<Operation> {
    operations()
        .into_iter()
        .map(|route| route.operation)
        .collect()
}

/// `GET /_netacl/v1/openapi.json`.
async fn serve_openapi(state: AppState) -> Response {
    let config = &state.inner.config;
    crate::http::error::json_response(
        StatusCode::OK,
        &openapi::document(&config.tenant_domain, &config.limits, &described()),
    )
}

/// The component schemas of the document, built once (their types do not depend on the tenant
/// or the limits): what request bodies are read against (`crate::http::integral_numbers`).
pub(crate) fn body_components() -> &'static Map<String, Value> {
    static COMPONENTS: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    COMPONENTS.get_or_init(|| {
        openapi::document("localhost", &Limits::default(), &described())
            .pointer("/components/schemas")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    })
}

/// The router of every operation in the table (token and JWKS routes are merged by the caller).
pub(crate) fn router() -> Router {
    type PathMethods = (MethodRouter, bool, Vec<Method>);
    let mut by_path: BTreeMap<&'static str, PathMethods> = BTreeMap::new();
    for Route {
        operation: op,
        route,
    } in operations()
    {
        let guarded = op.scope.is_some();
        let entry = by_path
            .entry(op.path)
            .or_insert_with(|| (MethodRouter::new(), guarded, Vec::new()));
        debug_assert_eq!(
            entry.1, guarded,
            "mixed guarded and open methods on {}",
            op.path
        );
        let mut route = route();
        if let Some(body) = op.body {
            // A JSON body is read against this schema (`635.0` where it says integer).
            route = route.route_layer(axum::middleware::from_fn_with_state(
                openapi::schema_name(body),
                with_body_schema,
            ));
        }
        if guarded && crate::resources::logs::records(&op.method, op.operation_id) {
            // One event per management write in the tenant's logs (inside the guard: the
            // caller is known).
            let logged = crate::resources::logs::LoggedOperation {
                operation_id: op.operation_id,
                summary: op.summary,
            };
            route = route.route_layer(axum::middleware::from_fn_with_state(
                logged,
                crate::resources::logs::record,
            ));
        }
        entry.0 = std::mem::take(&mut entry.0).merge(route);
        entry.2.push(op.method.clone());
    }
    let mut router = Router::new();
    for (path, (methods, guarded, allowed)) in by_path {
        let allow = allow_header(&allowed);
        let methods = methods.fallback(move || async move { method_not_allowed(allow) });
        let methods = if guarded {
            methods.layer(from_fn(guard::guard))
        } else {
            methods
        };
        router = router.route(path, methods);
    }
    // Unknown paths under the API prefixes still pass the guard (rate-limit headers, 401).
    let unknown =
        || axum::routing::any(|| async { ApiError::no_such_route() }).layer(from_fn(guard::guard));
    router
        .route("/api/v2/{*rest}", unknown())
        .route("/_netacl/v1/{*rest}", unknown())
}

/// Serves the request with `name` as its body schema (see `crate::http::integral_numbers`).
async fn with_body_schema(
    axum::extract::State(name): axum::extract::State<&'static str>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    crate::http::integral_numbers::scope(body_components(), name, next.run(request)).await
}

/// `Allow` of a path: its methods, and `HEAD` where it has `GET` (answered like `GET`).
fn allow_header(methods: &[Method]) -> http::HeaderValue {
    let mut names: Vec<&str> = methods.iter().map(Method::as_str).collect();
    if methods.contains(&Method::GET) {
        names.push("HEAD");
    }
    http::HeaderValue::from_str(&names.join(", "))
        .unwrap_or_else(|_| http::HeaderValue::from_static(""))
}

/// 405 with the error body and the path's `Allow` header (RFC 9110).
fn method_not_allowed(allow: http::HeaderValue) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut response = ApiError::method_not_allowed().into_response();
    response.headers_mut().insert(http::header::ALLOW, allow);
    response
}

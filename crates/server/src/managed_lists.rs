//! `/_netacl/v1/managed-lists`: the content of the `auth0_managed` lists, per tenant.
//!
//! The platform's lists cannot ship with netacl: the operator supplies each list's content
//! with `--managed-list NAME=PATH` (a file of this node, read-only through the API) or here,
//! `PUT /_netacl/v1/managed-lists/{name}` with `{"items": [...]}` (stored, shared by every node
//! of the database). A write takes the tenant's write path: the lists are compiled once into
//! the evaluator's shared index, the rule set is compiled against them, the store bumps the
//! tenant's version, and the change is in force (here and at every edge following this node)
//! when the answer is sent.
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use netacl_model::{ManagedList, ManagedListName, Timestamp};
use serde_json::{json, Value};

use crate::body::{read_write_body, FormShape};
use crate::error::{json_response, ApiError};
use crate::guard::{Authorized, ReadNetworkAcls, UpdateNetworkAcls};
use crate::query::Query;
use crate::request_context::RequestContext;
use crate::tenant::{AclSnapshot, Change};
use crate::AppState;

/// The form shape of `{"items": [...]}`: `items[]=192.0.2.0/24&items[]=...`, or the whole
/// array as JSON text (`items=[]` for an empty list).
pub(crate) const MANAGED_LIST_FORM: FormShape = FormShape {
    booleans: &[],
    integers: &[],
    json_fields: &["items"],
};

/// A managed list name from the path (404 `inexistent_managed_list` for any other name).
pub(crate) struct ListPath(ManagedListName);

impl<S: Send + Sync> FromRequestParts<S> for ListPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "name"))?;
        ManagedListName::parse(&raw)
            .map(ListPath)
            .ok_or_else(|| ApiError::no_such_managed_list(Value::from(raw)))
    }
}

/// The description of `name` in `snapshot`, with its items when `items` is set.
pub(crate) fn describe(snapshot: &AclSnapshot, name: ManagedListName, items: bool) -> Value {
    let rules = snapshot
        .ordered
        .iter()
        .filter(|stored| {
            let rule = &stored.acl.spec.rule;
            rule.match_criteria()
                .into_iter()
                .chain(rule.not_match())
                .any(|c| c.auth0_managed().is_some_and(|names| names.contains(&name)))
        })
        .count();
    let mut out = match snapshot.lists.effective(name) {
        Some(entry) => {
            let counts = entry.list.counts();
            json!({
                "name": name.as_str(),
                "source": entry.source.as_str(),
                "version": entry.version,
                "digest": entry.list.digest(),
                "updated_at": Timestamp::from_unix_millis(entry.updated_at_ms).to_string(),
                "entries": entry.list.len(),
                "counts": {"ipv4": counts.ipv4, "ipv6": counts.ipv6, "ja3": counts.ja3, "ja4": counts.ja4},
                "rules": rules,
            })
        }
        None => json!({
            "name": name.as_str(), "source": "none", "version": 0, "entries": 0, "rules": rules,
        }),
    };
    if items {
        out["items"] = snapshot
            .lists
            .effective(name)
            .map_or_else(|| json!([]), |entry| entry.list.items_json());
    }
    out
}

/// `GET /_netacl/v1/managed-lists`: every name, where its content comes from, without items.
pub(crate) async fn list(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let snapshot = state.inner.tenant.snapshot();
    let lists: Vec<Value> = ManagedListName::ALL
        .into_iter()
        .map(|name| describe(&snapshot, name, false))
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"version": snapshot.version, "managed_lists": lists}),
    ))
}

/// `GET /_netacl/v1/managed-lists/{name}`: the items and the version.
pub(crate) async fn get(
    _: Authorized<ReadNetworkAcls>,
    ListPath(name): ListPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let snapshot = state.inner.tenant.snapshot();
    Ok(json_response(
        StatusCode::OK,
        &describe(&snapshot, name, true),
    ))
}

/// `PUT /_netacl/v1/managed-lists/{name}`: `{"items": [...]}` replaces the stored content.
pub(crate) async fn put(
    _: Authorized<UpdateNetworkAcls>,
    ListPath(name): ListPath,
    context: RequestContext,
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
        Some(&MANAGED_LIST_FORM),
    )
    .await?;
    let max = state.inner.config.limits.max_entries_per_set;
    // Validating a large list takes a while: off the async threads.
    let list = tokio::task::spawn_blocking(move || ManagedList::from_json(&value, max))
        .await
        .map_err(|_| ApiError::internal())??;
    let tenant = &state.inner.tenant;
    tenant
        .apply_as(
            Change::PutList(name, std::sync::Arc::new(list)),
            context.origin(),
        )
        .await?;
    let snapshot = tenant.snapshot();
    Ok(json_response(
        StatusCode::OK,
        &describe(&snapshot, name, true),
    ))
}

/// `DELETE /_netacl/v1/managed-lists/{name}`: the stored content is removed (the list becomes
/// unconfigured).
pub(crate) async fn delete(
    _: Authorized<UpdateNetworkAcls>,
    ListPath(name): ListPath,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    tenant
        .apply_as(Change::DeleteList(name), context.origin())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The OpenAPI pieces of these operations (kept here, next to the handlers).
pub(crate) mod openapi {
    use serde_json::{json, Value};

    use netacl_model::ManagedListName;

    /// The path parameter of `/_netacl/v1/managed-lists/{name}`.
    pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
        path.starts_with("/_netacl/v1/managed-lists/").then(|| {
            let names: Vec<&str> = ManagedListName::ALL.iter().map(|n| n.as_str()).collect();
            vec![json!({
                "name": "name", "in": "path", "required": true,
                "description": "A managed list's public name.",
                "schema": {"enum": names}
            })]
        })
    }

    /// The success schema of a managed-list operation.
    pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
        Some(match operation_id {
            "netacl_managed_lists" => json!({"type": "object",
            "required": ["version", "managed_lists"], "properties": {
                "version": {"type": "integer"},
                "managed_lists": {"type": "array", "items": {"$ref": "#/components/schemas/ManagedListInfo"}}
            }}),
            "netacl_managed_list_get" | "netacl_managed_list_put" => {
                json!({"$ref": "#/components/schemas/ManagedList"})
            }
            _ => return None,
        })
    }

    /// The component schemas.
    pub(crate) fn components() -> Vec<(&'static str, Value)> {
        let names: Vec<&str> = ManagedListName::ALL.iter().map(|n| n.as_str()).collect();
        let info = json!({"type": "object",
        "required": ["name", "source", "version", "entries", "rules"],
        "properties": {
            "name": {"enum": names},
            "source": {"enum": ["api", "file", "none"], "description": "api: stored through this API; file: a --managed-list file of the answering node (wins, read-only here); none: unconfigured."},
            "version": {"type": "integer", "description": "The tenant version the content took effect at; 0 when unconfigured."},
            "digest": {"type": "string", "description": "Lowercase hex of the first 16 bytes of the SHA-256 of the entries, each followed by a newline."},
            "updated_at": {"type": "string", "format": "date-time"},
            "entries": {"type": "integer"},
            "counts": {"type": "object", "properties": {
                "ipv4": {"type": "integer"}, "ipv6": {"type": "integer"},
                "ja3": {"type": "integer"}, "ja4": {"type": "integer"}}},
            "rules": {"type": "integer", "description": "Network ACLs naming the list."}
        }});
        let mut list = info.clone();
        list["required"] = json!(["name", "source", "version", "entries", "rules", "items"]);
        list["properties"]["items"] = json!({"type": "array", "items": {"type": "string"}});
        vec![
            ("ManagedListInfo", info),
            ("ManagedList", list),
            (
                "ManagedListPut",
                json!({"type": "object", "additionalProperties": false, "required": ["items"],
                "properties": {"items": {"$ref": "#/components/schemas/ManagedListItems"}}}),
            ),
        ]
    }
}

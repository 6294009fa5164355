//! `/_netacl/v1/network-acls/versions` and `/rollback`: a tenant's rule-set history, the rule
//! set of a kept version, the difference between two versions, and restoring one.
//!
//! The history itself is kept by the store (`netacl_store::HistoryStore`: one entry per version,
//! written in the transaction that bumps it). A rollback takes the tenant's write path like any
//! write: the restored rule set is compiled before it is committed, committed as one new version
//! conditioned on the version the caller saw, installed, then answered.
use std::collections::BTreeSet;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use netacl_model::{AclId, NetworkAcl, Timestamp, ValidationError};
use netacl_store::{RecordChange, VersionEntry};
use serde_json::{json, Map, Value};

use crate::http::body::read_write_body;
use crate::http::error::{json_response, ApiError, JSON_UTF8};
use crate::http::guard::{
    Authorized, CreateNetworkAcls, DeleteNetworkAcls, ReadNetworkAcls, UpdateNetworkAcls,
};
use crate::http::query::Query;
use crate::http::request_context::RequestContext;
use crate::tenant::Change;
use crate::AppState;

/// Default and largest `take` of the versions list.
const DEFAULT_TAKE: u64 = 50;
const MAX_TAKE: u64 = 100;

/// A version number from the path (400 `invalid_uri` when it is not one).
pub(crate) struct VersionPath(u64);

impl<S: Send + Sync> FromRequestParts<S> for VersionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "version"))?;
        raw.parse::<u64>()
            .ok()
            .filter(|v| i64::try_from(*v).is_ok())
            .map(VersionPath)
            .ok_or_else(|| {
                ApiError::invalid_uri("Expected a version number (an integer >= 0)", "version")
            })
    }
}

fn time(ms: i64) -> String {
    Timestamp::from_unix_millis(ms).to_string()
}

/// An entry as the list answers it: changes by kind, op and id only.
fn entry_summary(entry: &VersionEntry) -> Value {
    let changes: Vec<Value> = entry
        .changes
        .iter()
        .map(|c| json!({"op": c.op.as_str(), "type": c.kind.as_str(), "id": c.id}))
        .collect();
    json!({
        "version": entry.version,
        "created_at": time(entry.created_at_ms),
        "client_id": entry.client_id,
        "request_id": entry.request_id,
        "changes": changes,
    })
}

fn change_detail(change: &RecordChange) -> Value {
    json!({
        "op": change.op.as_str(),
        "type": change.kind.as_str(),
        "id": change.id,
        "before": change.before,
        "after": change.after,
    })
}

/// `GET /_netacl/v1/network-acls/versions?from&take`: newest first.
pub(crate) async fn list(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["from", "take"])?;
    let take = query.integer("take", 1, MAX_TAKE)?.unwrap_or(DEFAULT_TAKE);
    let from = match query.string("from") {
        None => None,
        // A version number; one past every version there can be lists from the newest.
        Some(text)
            if (1..=20).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Some(text.parse::<u64>().unwrap_or(u64::MAX))
        }
        Some(_) => {
            return Err(ApiError::invalid_query(
                "Invalid checkpoint: expected the next of a previous page (a version number)",
                Some("from"),
            ))
        }
    };
    let tenant = &state.inner.tenant;
    // One more than asked: whether there is a next page.
    let limit = u32::try_from(take + 1).unwrap_or(u32::MAX);
    let mut entries = tenant.store().versions(&tenant.id, from, limit).await?;
    let next = if entries.len() as u64 > take {
        entries.truncate(take as usize);
        entries.last().map(|e| (e.version - 1).to_string())
    } else {
        None
    };
    let versions: Vec<Value> = entries.iter().map(entry_summary).collect();
    let mut body = json!({ "versions": versions });
    if let Some(next) = next {
        body["next"] = next.into();
    }
    Ok(json_response(StatusCode::OK, &body))
}

/// `GET /_netacl/v1/network-acls/versions/{version}`: the rule set then, with the version's
/// entry when it is kept.
pub(crate) async fn get(
    _: Authorized<ReadNetworkAcls>,
    VersionPath(version): VersionPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    let store = tenant.store();
    let rules = store
        .network_acls_at(&tenant.id, version)
        .await?
        .ok_or_else(ApiError::no_such_version)?;
    let mut body = Map::new();
    body.insert("version".into(), version.into());
    if let Some(entry) = store.version_entry(&tenant.id, version).await? {
        body.insert("created_at".into(), time(entry.created_at_ms).into());
        body.insert("client_id".into(), entry.client_id.clone().into());
        body.insert("request_id".into(), entry.request_id.clone().into());
        let changes: Vec<Value> = entry.changes.iter().map(change_detail).collect();
        body.insert("changes".into(), changes.into());
    }
    let acls: Vec<Value> = rules.acls.iter().map(NetworkAcl::to_json).collect();
    body.insert("network_acls".into(), acls.into());
    Ok(json_response(StatusCode::OK, &Value::Object(body)))
}

/// `GET /_netacl/v1/network-acls/versions/{version}/diff?against=V`.
pub(crate) async fn diff(
    _: Authorized<ReadNetworkAcls>,
    VersionPath(version): VersionPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["against"])?;
    let against = query
        .integer("against", 0, i64::MAX as u64)?
        .ok_or_else(|| ApiError::invalid_query("Missing required property: against", None))?;
    let tenant = &state.inner.tenant;
    let store = tenant.store();
    let new = store
        .network_acls_at(&tenant.id, version)
        .await?
        .ok_or_else(ApiError::no_such_version)?;
    let old = store
        .network_acls_at(&tenant.id, against)
        .await?
        .ok_or_else(ApiError::no_such_version)?;
    Ok(json_response(
        StatusCode::OK,
        &difference(&old.acls, &new.acls),
    ))
}

/// `{"added", "removed", "changed"}` from `old` to `new`, `updated_at` ignored; each list in
/// priority order (`changed` in the new rule set's).
fn difference(old: &[NetworkAcl], new: &[NetworkAcl]) -> Value {
    let find = |set: &[NetworkAcl], id: &AclId| set.iter().position(|a| &a.id == id);
    let added: Vec<Value> = new
        .iter()
        .filter(|a| find(old, &a.id).is_none())
        .map(NetworkAcl::to_json)
        .collect();
    let removed: Vec<Value> = old
        .iter()
        .filter(|a| find(new, &a.id).is_none())
        .map(NetworkAcl::to_json)
        .collect();
    let mut changed = Vec::new();
    for after in new {
        let Some(index) = find(old, &after.id) else {
            continue;
        };
        let (before, after) = (old[index].to_json(), after.to_json());
        let names: BTreeSet<&String> = before
            .as_object()
            .into_iter()
            .chain(after.as_object())
            .flat_map(|o| o.keys())
            .filter(|k| k.as_str() != "updated_at")
            .collect();
        let fields: Vec<&String> = names
            .into_iter()
            .filter(|k| before.get(k.as_str()) != after.get(k.as_str()))
            .collect();
        if !fields.is_empty() {
            changed.push(json!({
                "id": after.get("id"), "fields": fields, "before": before, "after": after,
            }));
        }
    }
    json!({"added": added, "removed": removed, "changed": changed})
}

/// `POST /_netacl/v1/network-acls/rollback` `{"version", "expected_version"}`: 200
/// `{version, network_acls}`. Needs every network ACL write scope (a rollback may create,
/// update and delete records): `update:network_acls` is checked by the route, the other two
/// here.
#[allow(clippy::too_many_arguments)] // three scope guards, each an extractor
pub(crate) async fn rollback(
    _: Authorized<CreateNetworkAcls>,
    _: Authorized<UpdateNetworkAcls>,
    _: Authorized<DeleteNetworkAcls>,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = read_write_body(&state, raw.as_deref(), &headers, body, None).await?;
    let (version, expected_version) = rollback_body(&value)?;
    let applied = state
        .inner
        .tenant
        .apply_as(
            Change::Rollback {
                version,
                expected_version,
            },
            context.origin(),
        )
        .await?;
    let snapshot = &applied.snapshot;
    let mut body = format!("{{\"version\":{},\"network_acls\":", snapshot.version).into_bytes();
    body.extend_from_slice(&snapshot.json_array(0, snapshot.ordered.len()));
    body.push(b'}');
    let mut response = (StatusCode::OK, Body::from(body)).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(JSON_UTF8),
    );
    Ok(response)
}

/// `{"version": V, "expected_version": E}`, both integers >= 0, nothing else.
fn rollback_body(value: &Value) -> Result<(u64, u64), ApiError> {
    let object = value
        .as_object()
        .ok_or_else(|| ValidationError::new("", "Expected type object"))?;
    if let Some(extra) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "version" | "expected_version"))
    {
        return Err(ValidationError::new(
            "",
            format!("Additional properties not allowed: {extra}"),
        )
        .into());
    }
    let number = |name: &str| -> Result<u64, ApiError> {
        let member = object.get(name).ok_or_else(|| {
            ValidationError::new("", format!("Missing required property: {name}"))
        })?;
        member
            .as_u64()
            .filter(|v| i64::try_from(*v).is_ok())
            .ok_or_else(|| {
                ValidationError::new(name, "Expected an integer between 0 and 2^63 - 1").into()
            })
    };
    Ok((number("version")?, number("expected_version")?))
}

/// The OpenAPI pieces of these operations.
pub(crate) mod openapi {
    use serde_json::{json, Value};

    /// The path parameter of `/_netacl/v1/network-acls/versions/{version}[/diff]`.
    pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
        path.starts_with("/_netacl/v1/network-acls/versions/")
            .then(|| {
                vec![json!({
                    "name": "version", "in": "path", "required": true,
                    "description": "A rule-set version.",
                    "schema": {"type": "integer", "minimum": 0, "maximum": i64::MAX}
                })]
            })
    }

    /// The success schema of a history operation.
    pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
        let change = |detail: bool| {
            let mut properties = json!({
                "op": {"enum": ["create", "update", "delete", "reload"]},
                "type": {"enum": ["network_acl", "network_acl_key", "managed_list"]},
                "id": {"type": "string"}
            });
            let mut required = vec!["op", "type", "id"];
            if detail {
                properties["before"] = json!({"type": ["object", "null"]});
                properties["after"] = json!({"type": ["object", "null"]});
                required.extend(["before", "after"]);
            }
            json!({"type": "object", "additionalProperties": false,
                   "required": required, "properties": properties})
        };
        let acls = json!({"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}});
        let entry_fields = |detail: bool| {
            json!({
                "version": {"type": "integer", "minimum": 0},
                "created_at": {"type": "string", "format": "date-time"},
                "client_id": {"type": ["string", "null"]},
                "request_id": {"type": ["string", "null"]},
                "changes": {"type": "array", "items": change(detail)}
            })
        };
        Some(match operation_id {
            "netacl_versions" => json!({"type": "object", "additionalProperties": false,
            "required": ["versions"], "properties": {
                "versions": {"type": "array", "items": {"type": "object",
                    "additionalProperties": false,
                    "required": ["version", "created_at", "client_id", "request_id", "changes"],
                    "properties": entry_fields(false)}},
                "next": {"type": "string", "pattern": "^[0-9]+$",
                    "description": "Pass as from for the next (older) page; absent on the last page."}
            }}),
            "netacl_version" => {
                let mut properties = entry_fields(true);
                properties["network_acls"] = acls;
                json!({"type": "object", "additionalProperties": false,
                       "required": ["version", "network_acls"], "properties": properties})
            }
            "netacl_version_diff" => {
                let changed = json!({"type": "object", "additionalProperties": false,
                    "required": ["id", "fields", "before", "after"], "properties": {
                        "id": {"type": "string"},
                        "fields": {"type": "array", "items": {"type": "string"}},
                        "before": {"$ref": "#/components/schemas/NetworkAcl"},
                        "after": {"$ref": "#/components/schemas/NetworkAcl"}}});
                json!({"type": "object", "additionalProperties": false,
                    "required": ["added", "removed", "changed"], "properties": {
                        "added": acls.clone(), "removed": acls,
                        "changed": {"type": "array", "items": changed}}})
            }
            "netacl_rollback" => json!({"type": "object", "additionalProperties": false,
                "required": ["version", "network_acls"], "properties": {
                    "version": {"type": "integer", "minimum": 0}, "network_acls": acls}}),
            _ => return None,
        })
    }

    /// The component schemas.
    pub(crate) fn components() -> Vec<(&'static str, Value)> {
        vec![(
            "Rollback",
            json!({"type": "object", "additionalProperties": false,
            "required": ["version", "expected_version"], "properties": {
                "version": {"type": "integer", "minimum": 0, "maximum": i64::MAX,
                    "description": "The kept version whose network ACLs to restore."},
                "expected_version": {"type": "integer", "minimum": 0, "maximum": i64::MAX,
                    "description": "The version the caller saw (409 when the rule set moved since)."}
            }}),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(seed: u128, priority: u64, description: &str, updated: i64) -> NetworkAcl {
        let spec = netacl_model::NetworkAclSpec::from_json(
            &json!({"description": description, "active": true, "priority": priority,
                    "rule": {"action": {"block": true}, "scope": "tenant",
                             "match": {"ipv4_cidrs": ["192.0.2.1"]}}}),
            &netacl_model::Limits::default(),
        )
        .expect("spec");
        NetworkAcl {
            id: AclId::from_random(seed),
            spec,
            created_at: Timestamp::from_unix_millis(1),
            updated_at: Timestamp::from_unix_millis(updated),
        }
    }

    #[test]
    fn the_difference_ignores_updated_at_and_names_changed_fields() {
        let a = acl(1, 10, "a", 1);
        let b = acl(2, 20, "b", 1);
        let c = acl(3, 30, "c", 1);
        let a_touched = acl(1, 10, "a", 99);
        let b_changed = acl(2, 21, "b2", 5);
        let diff = difference(&[a, b.clone(), c.clone()], &[a_touched, b_changed.clone()]);
        assert_eq!(diff["added"], json!([]));
        assert_eq!(diff["removed"], json!([c.to_json()]));
        assert_eq!(
            diff["changed"],
            json!([{"id": b.id.to_string(), "fields": ["description", "priority"],
                    "before": b.to_json(), "after": b_changed.to_json()}])
        );
        let back = difference(
            std::slice::from_ref(&b_changed),
            &[b_changed.clone(), c.clone()],
        );
        assert_eq!(back["added"], json!([c.to_json()]));
    }

    #[test]
    fn rollback_bodies_are_checked() {
        assert_eq!(
            rollback_body(&json!({"version": 3, "expected_version": 7})).expect("ok"),
            (3, 7)
        );
        for (body, needle) in [
            (json!([]), "Expected type object"),
            (
                json!({"version": 3}),
                "Missing required property: expected_version",
            ),
            (
                json!({"version": -1, "expected_version": 1}),
                "on property version",
            ),
            (
                json!({"version": 1.5, "expected_version": 1}),
                "on property version",
            ),
            (
                json!({"version": "1", "expected_version": 1}),
                "on property version",
            ),
            (
                json!({"version": 1, "expected_version": 1, "x": 1}),
                "Additional properties",
            ),
        ] {
            let err = rollback_body(&body).expect_err("refused");
            assert_eq!(err.error_code(), Some("invalid_body"));
            assert!(err.message().contains(needle), "{body}: {}", err.message());
        }
    }
}

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
use netacl_model::{
    JsonTextError, ManagedList, ManagedListBodyError, ManagedListItems, ManagedListName, Timestamp,
};
use serde_json::{json, Value};

use crate::http::body::{read_body, BodyText, FormShape};
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, ReadNetworkAcls, UpdateNetworkAcls};
use crate::http::query::Query;
use crate::http::request_context::RequestContext;
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

/// The answer of `GET` and `PUT /_netacl/v1/managed-lists/{name}`: [`describe`] with the
/// items, written straight from the list's entries (a list of a million entries is not made
/// into a JSON value first).
pub(crate) fn describe_response(snapshot: &AclSnapshot, name: ManagedListName) -> Response {
    let head = describe(snapshot, name).to_string();
    let entries = snapshot
        .lists
        .effective(name)
        .map(|entry| entry.list.items())
        .unwrap_or_default();
    let size: usize = entries.iter().map(|e| e.text().len() + 3).sum();
    let mut text = Vec::with_capacity(head.len() + size + 16);
    // `{...}` becomes `{...,"items":[...]}`: the members `describe` writes, in its order.
    text.extend_from_slice(head.strip_suffix('}').unwrap_or(&head).as_bytes());
    text.extend_from_slice(b",\"items\":[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        // A string cannot fail to serialise into memory.
        let _ = serde_json::to_writer(&mut text, entry.text());
    }
    text.extend_from_slice(b"]}");
    crate::http::error::json_text_response(StatusCode::OK, text)
}

/// The description of `name` in `snapshot`, without its items.
pub(crate) fn describe(snapshot: &AclSnapshot, name: ManagedListName) -> Value {
    let rules = snapshot
        .ordered
        .iter()
        .filter(|stored| {
            stored
                .acl
                .spec
                .rule
                .criteria()
                .any(|c| c.auth0_managed().is_some_and(|names| names.contains(&name)))
        })
        .count();
    match snapshot.lists.effective(name) {
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
    }
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
        .map(|name| describe(&snapshot, name))
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
    Ok(describe_response(&snapshot, name))
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
    let _permit = state.expensive()?;
    Query::parse(raw.as_deref(), &[])?;
    let text = read_body(&headers, body, state.inner.config.body_limit, true).await?;
    let max = state.inner.config.limits.max_entries_per_set;
    // Validating a large list takes a while: off the async threads.
    let list = tokio::task::spawn_blocking(move || list_from_body(&text, max))
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
    Ok(describe_response(&snapshot, name))
}

/// The list a `PUT` body holds, read without a JSON value of the whole body where it can be:
/// JSON straight into the entries (`ManagedList::from_json_text`), a form of `items[]` fields
/// item by item, a form's `items=[...]` text straight into the entries; any other form (indexed
/// keys, other fields: refused or small) through the generic form reading. The answers are
/// those of reading the body into a value and validating that.
fn list_from_body(text: &BodyText, max: usize) -> Result<ManagedList, ApiError> {
    match text {
        BodyText::Json(bytes) => {
            crate::http::body::check_not_empty(bytes)?;
            ManagedList::from_json_text(bytes, max).map_err(|err| match err {
                ManagedListBodyError::Text(err) => crate::http::body::json_text_error(err),
                ManagedListBodyError::Invalid(err) => err.into(),
                other => ApiError::invalid_body(other.to_string()),
            })
        }
        BodyText::Form(bytes) => {
            let mut pairs = form_urlencoded::parse(bytes);
            let appended = pairs.clone().all(|(key, _)| key == "items[]");
            match (pairs.next(), pairs.next()) {
                (Some(_), _) if appended => {
                    let mut items = ManagedListItems::new(max);
                    items.reserve(bytes.iter().filter(|&&b| b == b'&').count() + 1);
                    for (_, value) in form_urlencoded::parse(bytes) {
                        items.push(Value::String(value.into_owned()));
                    }
                    Ok(items.finish()?)
                }
                (Some((key, value)), None) if key == "items" => {
                    // JSON text in the field, one level down in the body.
                    let room = netacl_model::MAX_NESTING_DEPTH - 1;
                    ManagedList::from_items_json_text(value.as_bytes(), room, max).map_err(|err| {
                        match err {
                            ManagedListBodyError::Text(JsonTextError::Syntax(err)) => {
                                ApiError::invalid_body(format!(
                                    "Payload validation error: 'Invalid JSON in form field: \
                                     {err}' on property items."
                                ))
                            }
                            ManagedListBodyError::Text(_) => crate::http::body::too_deep(),
                            ManagedListBodyError::Invalid(err) => err.into(),
                            other => ApiError::invalid_body(other.to_string()),
                        }
                    })
                }
                _ => {
                    let value = crate::http::body::form_to_json(bytes, &MANAGED_LIST_FORM)?;
                    Ok(ManagedList::from_json(&value, max)?)
                }
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The list (or the error) of reading the body into a value and validating that: what
    /// `PUT` answered before bodies were read straight into the entries.
    fn through_value(text: &BodyText, max: usize) -> Result<ManagedList, ApiError> {
        let value = match text {
            BodyText::Form(bytes) => crate::http::body::form_to_json(bytes, &MANAGED_LIST_FORM)?,
            BodyText::Json(bytes) => {
                crate::http::body::check_not_empty(bytes)?;
                netacl_model::parse_json(bytes, netacl_model::MAX_NESTING_DEPTH)
                    .map_err(crate::http::body::json_text_error)?
            }
        };
        Ok(ManagedList::from_json(&value, max)?)
    }

    #[test]
    fn bodies_read_straight_into_entries_answer_as_through_a_value() {
        let deep = format!("items={}", "%5B".repeat(40));
        let forms = [
            "items[]=192.0.2.0%2F24&items[]=2001%3Adb8%3A%3A%2F32",
            "items[]=10.0.0.1&items[]=10.0.0.1",
            "items[]=10.0.0.1&items[]=nope",
            "items[]=10.0.0.1&items[]=10.0.0.2&items[]=10.0.0.3&items[]=10.0.0.4",
            "items[]",
            "items[]=a+b",
            "items[]=10.0.0.1&&items[]=10.0.0.2",
            "items=%5B%5D",
            "items=%5B%2210.0.0.1%22%2C%2210.0.0.2%22%5D",
            "items=%5B%2210.0.0.1%22%2C%2210.0.0.1%22%5D",
            "items=%5B1%5D",
            "items=nope",
            "items=%7B%7D",
            deep.as_str(),
            "items[0]=10.0.0.1&items[1]=10.0.0.2",
            "items[]=10.0.0.1&extra=1",
            "items=%5B%5D&items[]=10.0.0.1",
            "",
        ];
        let jsons = [
            r#"{"items": ["10.0.0.1", "10.0.0.2"]}"#,
            r#"{"items": ["10.0.0.1", "10.0.0.1"]}"#,
            r#"{"items": [], "x": 1}"#,
            r#"{"items": ["10.0.0.1"#,
            "  ",
            "[]",
        ];
        let bodies = forms
            .iter()
            .map(|f| BodyText::Form(bytes::Bytes::from(f.to_string())))
            .chain(
                jsons
                    .iter()
                    .map(|j| BodyText::Json(bytes::Bytes::from(j.to_string()))),
            );
        for body in bodies {
            for max in [1, 3, 10] {
                let label = match &body {
                    BodyText::Form(b) | BodyText::Json(b) => {
                        String::from_utf8_lossy(b).into_owned()
                    }
                };
                assert_eq!(
                    list_from_body(&body, max),
                    through_value(&body, max),
                    "{label} (max {max})"
                );
            }
        }
    }
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

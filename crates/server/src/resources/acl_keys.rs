//! `/api/v2/keys/network-acls`: the network ACL keys (create, list, get, delete).
//!
//! A key is the shared HMAC-SHA256 secret a tenant's own proxy signs requests with (RFC 9421);
//! rules name it in `http_message_signature`. The material is write-only: it arrives in the
//! create body, is sealed with the server's key-encryption key (`netacl-secrets`) before it is
//! stored, and no answer, log line or metric carries it — only its SHA-256 fingerprint. A key
//! write takes the tenant's write path and bumps the rule-set version, like a rule write.
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use netacl_model::{NetworkAclKey, NetworkAclKeyId, NetworkAclKeySpec, Timestamp};
use rand::RngCore;
use serde_json::{json, Value};

use crate::http::body::{read_write_body, FormShape};
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{
    Authorized, CreateNetworkAclKeys, DeleteNetworkAclKeys, ReadNetworkAclKeys,
};
use crate::http::query::Query;
use crate::http::request_context::RequestContext;
use crate::tenant::Change;
use crate::AppState;

/// The create body as a form: `name=...&alg=hmac-sha256&value=...` (all strings).
pub(crate) const KEY_FORM: FormShape = FormShape {
    booleans: &[],
    integers: &[],
    json_fields: &[],
};

/// A key id from the path (404 `inexistent_network_acl_key` for anything that is not one).
pub(crate) struct KeyPath(NetworkAclKeyId);

impl<S: Send + Sync> FromRequestParts<S> for KeyPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "id"))?;
        NetworkAclKeyId::parse(&raw)
            .map(KeyPath)
            .ok_or_else(ApiError::no_such_network_acl_key)
    }
}

/// `GET /keys/network-acls`: `{"keys": [...]}`, newest first.
pub(crate) async fn list(
    _: Authorized<ReadNetworkAclKeys>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let snapshot = state.inner.tenant.snapshot();
    let keys: Vec<Value> = snapshot
        .keys
        .newest_first()
        .map(|key| key.record.to_json())
        .collect();
    Ok(json_response(StatusCode::OK, &json!({ "keys": keys })))
}

/// `GET /keys/network-acls/{id}`.
pub(crate) async fn get(
    _: Authorized<ReadNetworkAclKeys>,
    KeyPath(id): KeyPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let snapshot = state.inner.tenant.snapshot();
    let key = snapshot
        .keys
        .get(&id)
        .ok_or_else(ApiError::no_such_network_acl_key)?;
    Ok(json_response(StatusCode::OK, &key.record.to_json()))
}

/// `POST /keys/network-acls`: `{name, alg, value}`; 201 with the record (never the value).
pub(crate) async fn create(
    _: Authorized<CreateNetworkAclKeys>,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = read_write_body(&state, raw.as_deref(), &headers, body, Some(&KEY_FORM)).await?;
    let spec = NetworkAclKeySpec::from_json(&value)?;
    drop(value);
    let mut bits = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bits);
    let tenant = &state.inner.tenant;
    // Newest first must hold for keys created one after another within a millisecond: a new
    // key is stamped at least a millisecond after the newest one.
    let newest = tenant
        .snapshot()
        .keys
        .newest_first()
        .next()
        .map(|key| key.record.created_at.unix_millis());
    let now = match newest {
        Some(newest) if newest >= Timestamp::now().unix_millis() => {
            Timestamp::from_unix_millis(newest + 1)
        }
        _ => Timestamp::now(),
    };
    let record = NetworkAclKey {
        id: NetworkAclKeyId::from_random(u128::from_le_bytes(bits)),
        name: spec.name,
        fingerprint: spec.material.fingerprint(),
        created_at: now,
        updated_at: now,
    };
    tenant
        .apply_as(
            Change::CreateKey(Box::new((record.clone(), spec.material))),
            context.origin(),
        )
        .await?;
    Ok(json_response(StatusCode::CREATED, &record.to_json()))
}

/// `DELETE /keys/network-acls/{id}`: 204; 409 while a rule names the key.
pub(crate) async fn delete(
    _: Authorized<DeleteNetworkAclKeys>,
    KeyPath(id): KeyPath,
    context: RequestContext,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    tenant
        .apply_as(Change::DeleteKey(id), context.origin())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The OpenAPI pieces of these operations.
pub(crate) mod openapi {
    use serde_json::{json, Value};

    /// The path parameter of `/api/v2/keys/network-acls/{id}`.
    pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
        path.starts_with("/api/v2/keys/network-acls/").then(|| {
            vec![json!({
                "name": "id", "in": "path", "required": true,
                "description": "The network ACL key id.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 64,
                           "pattern": "^[A-Za-z0-9_.-]+$"}
            })]
        })
    }

    /// The success schema of a key operation.
    pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
        Some(match operation_id {
            "get_network-acl-keys" => json!({"type": "object", "required": ["keys"],
                "additionalProperties": false,
                "properties": {"keys": {"type": "array",
                    "items": {"$ref": "#/components/schemas/NetworkAclKey"}}}}),
            "post_network-acl-keys" | "get_network-acl-keys_by_id" => {
                json!({"$ref": "#/components/schemas/NetworkAclKey"})
            }
            _ => return None,
        })
    }

    /// The component schemas.
    pub(crate) fn components() -> Vec<(&'static str, Value)> {
        vec![
            (
                "NetworkAclKeyCreate",
                json!({"type": "object", "additionalProperties": false,
                "required": ["name", "alg", "value"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 255,
                             "description": "A label, unique within the tenant (409 otherwise)."},
                    "alg": {"enum": ["hmac-sha256"]},
                    "value": {"type": "string", "writeOnly": true,
                              "pattern": netacl_model::patterns::NETWORK_ACL_KEY_VALUE,
                              "description": "The key material, standard base64 (padding optional) of 32 to 64 bytes. Never returned."}
                }}),
            ),
            (
                "NetworkAclKey",
                json!({"type": "object", "additionalProperties": false,
                "required": ["id", "name", "alg", "fingerprint", "created_at", "updated_at"],
                "properties": {
                    "id": {"type": "string"},
                    "name": {"type": "string"},
                    "alg": {"enum": ["hmac-sha256"]},
                    "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{64}$",
                        "description": "Lowercase hex SHA-256 of the decoded key material."},
                    "created_at": {"type": "string", "format": "date-time"},
                    "updated_at": {"type": "string", "format": "date-time"}
                }}),
            ),
        ]
    }
}

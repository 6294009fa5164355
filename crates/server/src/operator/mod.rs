//! The operator API, `/_netacl/v1/tenants`: the tenants of the deployment, above tenants (served
//! whatever the host), guarded by the operator token (`--operator-token-file`), which is not a
//! tenant token: tenant tokens are refused here, and the operator token is refused by the tenant
//! API (it is no JWT).
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use http::{HeaderMap, StatusCode};
use netacl_store::TenantId;
use serde_json::{json, Value};

use crate::http::error::{json_response, ApiError};
use crate::http::query::Query;
use crate::provisioning::{self, tenant_json, ProvisionError};
use crate::tenancy::Registry;

pub(crate) mod edge;

/// Largest page of `GET /_netacl/v1/tenants`.
const MAX_TAKE: u32 = 100;
/// Default page.
const DEFAULT_TAKE: u32 = 50;

/// The operator routes, with their guard. `components` are the document's component schemas:
/// the edges' reports are read against theirs (`crate::http::integral_numbers`).
pub(crate) fn router(
    registry: Arc<Registry>,
    components: &'static serde_json::Map<String, Value>,
) -> Router {
    use axum::routing::{get, post};
    let read_as = |name: &'static str| {
        axum::middleware::from_fn(move |request: Request, next: Next| {
            crate::http::integral_numbers::scope(components, name, next.run(request))
        })
    };
    Router::new()
        .route("/_netacl/v1/tenants", get(list).post(create))
        .route("/_netacl/v1/tenants/watch", get(watch))
        .route(
            "/_netacl/v1/tenants/edge/summaries",
            post(crate::operator::edge::post_summaries)
                .route_layer(read_as("netacl_tenant_edge_summaries")),
        )
        .route(
            "/_netacl/v1/tenants/edge/sample",
            post(crate::operator::edge::post_sample)
                .route_layer(read_as("netacl_tenant_edge_sample")),
        )
        .route("/_netacl/v1/tenants/{id}", get(show).delete(delete))
        .route(
            "/_netacl/v1/tenants/{id}/edge-clients",
            post(create_edge_client),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&registry),
            guard,
        ))
        .with_state(registry)
}

fn unauthorized() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        Some("invalid_operator_token"),
        "The operator token is missing or wrong.",
    )
    .with_www_authenticate("Bearer realm=\"netacl operator\"")
}

async fn guard(State(registry): State<Arc<Registry>>, request: Request, next: Next) -> Response {
    let Some(expected) = registry.operator_token() else {
        return unauthorized().into_response();
    };
    let mut values = request
        .headers()
        .get_all(http::header::AUTHORIZATION)
        .iter();
    let presented = match (values.next(), values.next()) {
        (Some(value), None) => value.as_bytes(),
        _ => return unauthorized().into_response(),
    };
    let token = match presented.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case(b"bearer ") => &presented[7..],
        _ => return unauthorized().into_response(),
    };
    if !expected.matches(token) {
        return unauthorized().into_response();
    }
    next.run(request).await
}

fn provision_error(err: ProvisionError) -> ApiError {
    match err {
        ProvisionError::InvalidId | ProvisionError::DomainCount => {
            ApiError::invalid_body(format!("Payload validation error: {err}."))
        }
        ProvisionError::InvalidDomain { .. } => {
            ApiError::invalid_body(format!("Payload validation error: {err}."))
        }
        ProvisionError::TenantExists(_) => {
            ApiError::new(StatusCode::CONFLICT, Some("tenant_exists"), err.to_string())
        }
        ProvisionError::DomainTaken(_) => {
            ApiError::new(StatusCode::CONFLICT, Some("domain_taken"), err.to_string())
        }
        ProvisionError::NotFound(_) => no_such_tenant(),
        ProvisionError::DefaultTenant => ApiError::new(
            StatusCode::CONFLICT,
            Some("default_tenant"),
            "The default tenant cannot be deleted.",
        ),
        ProvisionError::Store(netacl_store::StoreError::Unavailable(reason)) => {
            tracing::warn!(%reason, "tenant operation: the database is unavailable");
            ApiError::unavailable()
        }
        other => {
            tracing::error!(error = %other, "tenant operation failed");
            ApiError::internal()
        }
    }
}

fn no_such_tenant() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        Some("inexistent_tenant"),
        "The tenant does not exist.",
    )
}

/// `GET /_netacl/v1/tenants?from=&take=`: tenants by id; `next` is the `from` of the next page.
async fn list(State(registry): State<Arc<Registry>>, RawQuery(raw): RawQuery) -> Response {
    match list_inner(&registry, raw.as_deref()).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn list_inner(registry: &Registry, raw: Option<&str>) -> Result<Response, ApiError> {
    let query = Query::parse(raw, &["from", "take"])?;
    let take = query
        .integer("take", 1, u64::from(MAX_TAKE))?
        .map_or(DEFAULT_TAKE, |t| t as u32);
    let from =
        match query.string("from") {
            None => None,
            Some(text) => Some(TenantId::new(text).ok_or_else(|| {
                ApiError::invalid_query("Not a cursor of this list", Some("from"))
            })?),
        };
    let mut records = registry
        .store()
        .list_tenants(from.as_ref(), take + 1)
        .await
        .map_err(|err| provision_error(err.into()))?;
    let next = if records.len() > take as usize {
        records.truncate(take as usize);
        records.last().map(|r| r.id.to_string())
    } else {
        None
    };
    let tenants: Vec<Value> = records.iter().map(tenant_json).collect();
    let mut body = json!({ "tenants": tenants });
    if let Some(next) = next {
        body["next"] = next.into();
    }
    Ok(json_response(StatusCode::OK, &body))
}

/// `POST /_netacl/v1/tenants` `{"tenant", "domains"}` → 201 with the bootstrap client's secret.
async fn create(
    State(registry): State<Arc<Registry>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match create_inner(&registry, raw.as_deref(), &headers, body).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn create_inner(
    registry: &Registry,
    raw: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    Query::parse(raw, &[])?;
    let value =
        crate::http::body::read_json_body(headers, body, registry.body_limit(), None).await?;
    let Value::Object(object) = &value else {
        return Err(ApiError::invalid_body(
            "Payload validation error: 'Expected type object but found type ".to_owned()
                + json_type(&value)
                + "'.",
        ));
    };
    if let Some(unknown) = object.keys().find(|k| *k != "tenant" && *k != "domains") {
        return Err(ApiError::invalid_body(format!(
            "Payload validation error: 'Additional properties not allowed: {unknown}'."
        )));
    }
    let id = match object.get("tenant") {
        Some(Value::String(id)) => id.clone(),
        Some(other) => {
            return Err(ApiError::invalid_body(format!(
                "Payload validation error: 'Expected type string but found type {}' on property tenant.",
                json_type(other)
            )))
        }
        None => {
            return Err(ApiError::invalid_body(
                "Payload validation error: 'Missing required property: tenant'.",
            ))
        }
    };
    let domains = match object.get("domains") {
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                match item {
                    Value::String(domain) => out.push(domain.clone()),
                    other => {
                        return Err(ApiError::invalid_body(format!(
                            "Payload validation error: 'Expected type string but found type {}' on property domains[{index}].",
                            json_type(other)
                        )))
                    }
                }
            }
            out
        }
        Some(other) => {
            return Err(ApiError::invalid_body(format!(
                "Payload validation error: 'Expected type array but found type {}' on property domains.",
                json_type(other)
            )))
        }
        None => {
            return Err(ApiError::invalid_body(
                "Payload validation error: 'Missing required property: domains'.",
            ))
        }
    };
    let created = provisioning::create_tenant(registry.store(), registry.kek(), &id, &domains)
        .await
        .map_err(provision_error)?;
    if let Err(err) = registry.add(&created.record).await {
        // Stored, but this node could not load it: the poll tries again.
        tracing::error!(tenant = %created.record.id, error = %err, "cannot serve the new tenant yet");
    }
    let mut response = json_response(StatusCode::CREATED, &created.to_json());
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `GET /_netacl/v1/tenants/{id}` (no secret).
async fn show(State(registry): State<Arc<Registry>>, Path(id): Path<String>) -> Response {
    let Some(id) = TenantId::new(&id) else {
        return no_such_tenant().into_response();
    };
    match registry.store().tenant_record(&id).await {
        Ok(Some(record)) => json_response(StatusCode::OK, &tenant_json(&record)),
        Ok(None) => no_such_tenant().into_response(),
        Err(err) => provision_error(err.into()).into_response(),
    }
}

/// `DELETE /_netacl/v1/tenants/{id}` → 204: the tenant and everything it owns; this node stops
/// serving it at once.
async fn delete(State(registry): State<Arc<Registry>>, Path(id): Path<String>) -> Response {
    match provisioning::delete_tenant(registry.store(), &id).await {
        Ok(()) => {
            if let Some(id) = TenantId::new(&id) {
                registry.remove(&id).await;
            }
            StatusCode::NO_CONTENT.into_response()
        }
        Err(err) => provision_error(err).into_response(),
    }
}

/// `POST /_netacl/v1/tenants/{id}/edge-clients` → 201 with the edge client's secret (shown
/// once): a client of the tenant holding the watch, key material and edge report scopes. This
/// node serves it at once; other nodes on the same database within their client refresh.
async fn create_edge_client(
    State(registry): State<Arc<Registry>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Err(err) = Query::parse(raw.as_deref(), &[]) {
        return err.into_response();
    }
    let created = match provisioning::create_edge_client(registry.store(), &id).await {
        Ok(created) => created,
        Err(err) => return provision_error(err).into_response(),
    };
    if let Some((state, _)) = registry.served(&created.tenant) {
        let authority = &state.inner.authority;
        let record = authority.management_client(
            created.client_id.clone(),
            created.secret_hash.clone(),
            created.scopes.iter().cloned(),
        );
        if let Err(err) = authority.upsert_client(record) {
            tracing::error!(tenant = %created.tenant, error = %err, "cannot serve the new edge client yet");
        }
    }
    let mut response = json_response(StatusCode::CREATED, &created.to_json());
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

/// A `since` cursor of the tenants watch, as read.
#[derive(Debug, PartialEq, Eq)]
enum WatchCursor {
    /// No cursor, another process's, or one too old: the full snapshot.
    Full,
    /// Changes after `since` (0: everything), continuing after tenant `after` of a pass that
    /// completes at `start`.
    Since {
        since: u64,
        start: Option<u64>,
        after: Option<TenantId>,
    },
}

fn invalid_cursor() -> ApiError {
    ApiError::invalid_query(
        "Invalid cursor: pass the `cursor` value of the previous answer",
        Some("since"),
    )
}

/// `INSTANCE.SEQ` or `INSTANCE.SINCE.START.AFTER_ID`; another instance's cursor is
/// [`WatchCursor::Full`]; a malformed one is a 400.
fn parse_watch_cursor(text: &str, instance: &str) -> Result<WatchCursor, ApiError> {
    let parts: Vec<&str> = text.split('.').collect();
    let number = |t: &str| -> Result<u64, ApiError> {
        if t.is_empty() || t.len() > 20 || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid_cursor());
        }
        t.parse().map_err(|_| invalid_cursor())
    };
    let shape_ok = parts[0].len() == 16 && parts[0].bytes().all(|b| b.is_ascii_hexdigit());
    let cursor = match parts.as_slice() {
        [_, seq] if shape_ok => WatchCursor::Since {
            since: number(seq)?,
            start: None,
            after: None,
        },
        [_, since, start, after] if shape_ok => {
            let since = number(since)?;
            let start = number(start)?;
            let after = TenantId::new(after).ok_or_else(invalid_cursor)?;
            if start < since {
                return Err(invalid_cursor());
            }
            WatchCursor::Since {
                since,
                start: Some(start),
                after: Some(after),
            }
        }
        _ => return Err(invalid_cursor()),
    };
    Ok(if parts[0] == instance {
        cursor
    } else {
        WatchCursor::Full
    })
}

/// `GET /_netacl/v1/tenants/watch?since=CURSOR&timeout_ms=N&lists=true&keys=X25519`: every
/// tenant that changed since the cursor (see [`crate::tenancy::feed`]), 304 after `timeout_ms`
/// without a change.
async fn watch(
    State(registry): State<Arc<Registry>>,
    parts: http::request::Parts,
    RawQuery(raw): RawQuery,
) -> Response {
    match watch_inner(&registry, &parts, raw.as_deref()).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn watch_inner(
    registry: &Registry,
    parts: &http::request::Parts,
    raw: Option<&str>,
) -> Result<Response, ApiError> {
    use crate::config::{DEFAULT_WATCH_TIMEOUT_MS, MAX_WATCH_TIMEOUT_MS};
    use netacl_secrets::transit::TransitPublicKey;

    let query = Query::parse(raw, &["since", "timeout_ms", "lists", "keys"])?;
    let timeout_ms = query
        .integer("timeout_ms", 0, MAX_WATCH_TIMEOUT_MS)?
        .unwrap_or(DEFAULT_WATCH_TIMEOUT_MS);
    let lists = query.boolean("lists")?.unwrap_or(false);
    let edge_key = query
        .string("keys")
        .map(|text| {
            TransitPublicKey::parse(text).ok_or_else(|| {
                ApiError::invalid_query(
                    "Expected an X25519 public key in base64url (43 characters)".to_owned(),
                    Some("keys"),
                )
            })
        })
        .transpose()?;
    let feed = registry.feed();
    let mut cursor = match query.string("since") {
        None => WatchCursor::Full,
        Some(text) => parse_watch_cursor(text, feed.instance())?,
    };
    if let WatchCursor::Since { since, .. } = cursor {
        if since != 0 && !feed.remembers(since) {
            cursor = WatchCursor::Full;
        }
    }
    let (since, start, after) = match cursor {
        WatchCursor::Full => (0, None, None),
        WatchCursor::Since {
            since,
            start,
            after,
        } => (since, start, after),
    };
    // Subscribe before reading, so that a change in between is not missed.
    let mut sequence = feed.subscribe();
    if since != 0 && start.is_none() && feed.seq() == since {
        let waited = tokio::time::timeout(
            std::time::Duration::from_millis(timeout_ms),
            sequence.wait_for(|seq| *seq != since),
        )
        .await;
        match waited {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(ApiError::unavailable()),
            Err(_) => return Ok(StatusCode::NOT_MODIFIED.into_response()),
        }
    }
    // The pass completes at the sequence read before any tenant is: a change after it is
    // shipped again by the next answer.
    let start = start.unwrap_or_else(|| feed.seq());
    let changes = feed.since(since, after.as_ref());
    let keys_allowed = edge_key
        .as_ref()
        .map(|_| crate::netacl_v1::key_transport_allowed(parts));
    let mut body: Vec<u8> = Vec::with_capacity(4096);
    body.extend_from_slice(b"{\"tenants\":[");
    let mut last: Option<&TenantId> = None;
    let mut more = false;
    let mut first = true;
    for (id, mark) in &changes.tenants {
        if body.len() >= feed.budget() && last.is_some() {
            more = true;
            break;
        }
        // Removed since it was recorded: its removal is in a later answer.
        let Some((state, domains)) = registry.served(id) else {
            continue;
        };
        let snapshot = state.inner.tenant.snapshot();
        if !first {
            body.push(b',');
        }
        first = false;
        body.extend_from_slice(b"{\"tenant\":");
        body.extend_from_slice(Value::from(id.as_str()).to_string().as_bytes());
        body.extend_from_slice(b",\"domains\":");
        body.extend_from_slice(json!(domains).to_string().as_bytes());
        body.extend_from_slice(
            format!(",\"version\":{},\"network_acls\":", snapshot.version).as_bytes(),
        );
        body.extend_from_slice(&snapshot.json_array(0, snapshot.ordered.len()));
        if lists {
            // The items of a list only when the edge may not hold them: a full answer, a
            // tenant added since the cursor, a list changed since it (or not recorded yet).
            let now = crate::tenancy::feed::ChangeFeed::digests_of(&snapshot);
            let send_all = since == 0 || mark.added > since;
            let entries = crate::netacl_v1::lists_json(&snapshot, |name, digest| {
                let i = name.index();
                !send_all
                    && mark.lists_changed[i] <= since
                    && now[i].as_deref() == Some(digest)
                    && mark.digests[i].as_deref() == Some(digest)
            });
            body.extend_from_slice(b",\"managed_lists\":");
            body.extend_from_slice(Value::Array(entries).to_string().as_bytes());
        }
        if let (Some(edge_key), Some(true)) = (&edge_key, keys_allowed) {
            let keys = crate::netacl_v1::seal_network_acl_keys(id.as_str(), &snapshot, edge_key)?;
            body.extend_from_slice(b",\"network_acl_keys\":");
            body.extend_from_slice(Value::Array(keys).to_string().as_bytes());
        }
        body.push(b'}');
        last = Some(id);
    }
    body.extend_from_slice(b"],\"removed\":");
    body.extend_from_slice(
        json!(changes
            .removed
            .iter()
            .map(TenantId::as_str)
            .collect::<Vec<_>>())
        .to_string()
        .as_bytes(),
    );
    let instance = feed.instance();
    let next = match (more, last) {
        (true, Some(last)) => format!("{instance}.{since}.{start}.{last}"),
        _ => format!("{instance}.{start}"),
    };
    body.extend_from_slice(
        format!(
            ",\"cursor\":\"{next}\",\"full\":{},\"more\":{more}",
            since == 0
        )
        .as_bytes(),
    );
    if keys_allowed == Some(false) {
        body.extend_from_slice(b",\"network_acl_keys_withheld\":\"transport\"");
    }
    body.push(b'}');
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(crate::http::error::JSON_UTF8),
    );
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

/// The operator operations in the OpenAPI document (security: the operator token).
pub(crate) fn extend_document(document: &mut Value) {
    let error = |description: &str| {
        json!({"description": description, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let unauthorized = json!({
        "description": "The operator token is missing or wrong.",
        "headers": {"WWW-Authenticate": {"required": true, "schema": {"type": "string", "pattern": "^Bearer"}}},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    });
    let tenant_ref = json!({"$ref": "#/components/schemas/netacl_tenant"});
    let id_parameter = json!({"name": "id", "in": "path", "required": true,
        "schema": {"type": "string"}});
    let security = json!([{"operatorToken": []}]);
    let paths = json!({
        "/_netacl/v1/tenants": {
            "get": {
                "operationId": "netacl_list_tenants",
                "summary": "List the tenants (operator API, served whatever the host)",
                "security": security,
                "parameters": [
                    {"name": "from", "in": "query", "required": false,
                     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}},
                    {"name": "take", "in": "query", "required": false,
                     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_TAKE}}
                ],
                "responses": {
                    "200": {"description": "One page of tenants, by id", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["tenants"], "additionalProperties": false,
                        "properties": {"tenants": {"type": "array", "items": tenant_ref},
                                       "next": {"type": "string"}}}}}},
                    "400": error("Bad query parameter"),
                    "401": unauthorized,
                    "503": error("The database is unavailable")
                }
            },
            "post": {
                "operationId": "netacl_create_tenant",
                "summary": "Create a tenant: signing key and bootstrap client (its secret shown once)",
                "security": security,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["tenant", "domains"], "additionalProperties": false,
                    "properties": {
                        "tenant": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                        "domains": {"type": "array", "minItems": 1, "maxItems": provisioning::MAX_TENANT_DOMAINS,
                                    "items": {"type": "string", "minLength": 1, "maxLength": 253}}
                    }}}}},
                "responses": {
                    "201": {"description": "The tenant, with the bootstrap client's secret", "content": {"application/json": {"schema": {
                        "allOf": [tenant_ref, {"type": "object", "required": ["client_id", "client_secret"],
                            "properties": {"client_id": {"type": "string"}, "client_secret": {"type": "string"}}}]}}}},
                    "400": error("Invalid id or domains (with the property path)"),
                    "401": unauthorized,
                    "409": error("The id or a domain is taken"),
                    "413": error("Body too large"),
                    "415": error("Not JSON"),
                    "503": error("The database is unavailable")
                }
            }
        },
        "/_netacl/v1/tenants/watch": {
            "get": {
                "operationId": "netacl_watch_tenants",
                "summary": "Long poll for every tenant's changes (remote multi-tenant edges): tenants added, removed, and each changed tenant's rules, lists and sealed keys",
                "security": security,
                "parameters": [
                    {"name": "since", "in": "query", "required": false,
                     "description": "The cursor of the previous answer; absent, another process's or too old: the full snapshot",
                     "schema": {"type": "string", "pattern": "^[0-9a-f]{16}\\.[0-9]{1,20}(\\.[0-9]{1,20}\\.[A-Za-z0-9_-]{1,64})?$"}},
                    {"name": "timeout_ms", "in": "query", "required": false,
                     "schema": {"type": "integer", "minimum": 0, "maximum": crate::config::MAX_WATCH_TIMEOUT_MS}},
                    {"name": "lists", "in": "query", "required": false,
                     "description": "true: each tenant's managed lists in force (items only where the edge may not hold them)",
                     "schema": {"type": "boolean"}},
                    {"name": "keys", "in": "query", "required": false,
                     "description": "The edge's X25519 public key (base64url): the network ACL keys live rules name, sealed to it (over TLS or loopback only)",
                     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$"}}
                ],
                "responses": {
                    "200": {"description": "What changed since the cursor", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["tenants", "removed", "cursor", "full", "more"],
                        "properties": {
                            "tenants": {"type": "array", "items": {"type": "object",
                                "required": ["tenant", "domains", "version", "network_acls"],
                                "properties": {
                                    "tenant": {"type": "string"},
                                    "domains": {"type": "array", "items": {"type": "string"}},
                                    "version": {"type": "integer", "minimum": 0},
                                    "network_acls": {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
                                    "managed_lists": {"type": "array", "items": {"type": "object"}},
                                    "network_acl_keys": {"type": "array", "items": {"type": "object",
                                        "required": ["id", "sealed"],
                                        "properties": {"id": {"type": "string"}, "sealed": {"type": "string"}}}}
                                }}},
                            "removed": {"type": "array", "items": {"type": "string"}},
                            "cursor": {"type": "string"},
                            "full": {"type": "boolean"},
                            "more": {"type": "boolean"},
                            "network_acl_keys_withheld": {"type": "string", "enum": ["transport"]}
                        }}}}},
                    "304": {"description": "Nothing changed within timeout_ms"},
                    "400": error("Bad query parameter (a malformed cursor, key or timeout)"),
                    "401": unauthorized,
                    "503": error("The service is stopping")
                }
            }
        },
        "/_netacl/v1/tenants/edge/summaries": {
            "post": {
                "operationId": "netacl_tenant_edge_summaries",
                "summary": "Record a multi-tenant edge's per-rule counts of one interval in each tenant's log (acls_summary events)",
                "description": "The report of a remote edge enforcing every tenant (netacl edge --platform-url), keyed by tenant id. Every member is checked before anything is recorded. A tenant this server does not serve, and a summary naming a rule-set version its tenant has not reached, are skipped (counted in skipped, named in unknown_tenants), never created.",
                "security": security,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/netacl_tenant_edge_summaries"}}}},
                "responses": {
                    "200": {"description": "What was recorded", "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "required": ["recorded", "skipped", "unknown_tenants"],
                        "properties": {
                            "recorded": {"type": "integer", "minimum": 0, "maximum": crate::operator::edge::MAX_PLATFORM_SUMMARIES},
                            "skipped": {"type": "integer", "minimum": 0, "maximum": crate::operator::edge::MAX_PLATFORM_SUMMARIES},
                            "unknown_tenants": {"type": "array", "items": {"type": "string"}}
                        }}}}},
                    "400": error("A member is invalid (with its property path); nothing recorded"),
                    "401": unauthorized,
                    "413": error("Body too large"),
                    "415": error("Not JSON"),
                    "500": error("The log could not be written"),
                    "503": error("The database is unavailable; nothing recorded")
                },
                "x-netacl-refusals-beyond-schema": [
                    {"message": "^Payload validation error: 'Too many items in all tenants together, maximum [0-9]+' on property tenants\\.$",
                     "why": "The bound is on the summaries of all tenants together."},
                    crate::http::integral_numbers::large_fraction_refusal()
                ]
            }
        },
        "/_netacl/v1/tenants/edge/sample": {
            "post": {
                "operationId": "netacl_tenant_edge_sample",
                "summary": "Keep a multi-tenant edge's traffic sample, per tenant, for the impact preview",
                "description": "Each tenant's requests replace that edge's last sample of the tenant (in memory). Every member is checked before anything is kept. A tenant this server does not serve is skipped (counted in skipped, named in unknown_tenants), never created.",
                "security": security,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/netacl_tenant_edge_sample"}}}},
                "responses": {
                    "200": {"description": "What was kept", "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "required": ["kept", "skipped", "unknown_tenants"],
                        "properties": {
                            "kept": {"type": "integer", "minimum": 0, "maximum": crate::resources::logs::sample::MAX_SAMPLE_REQUESTS},
                            "skipped": {"type": "integer", "minimum": 0, "maximum": crate::resources::logs::sample::MAX_SAMPLE_REQUESTS},
                            "unknown_tenants": {"type": "array", "items": {"type": "string"}}
                        }}}}},
                    "400": error("A member is invalid (with its property path); nothing kept"),
                    "401": unauthorized,
                    "413": error("Body too large"),
                    "415": error("Not JSON")
                },
                "x-netacl-refusals-beyond-schema": [
                    {"message": "^Payload validation error: 'Too many items in all tenants together, maximum [0-9]+' on property tenants\\.$",
                     "why": "The bound is on the requests of all tenants together."},
                    crate::http::integral_numbers::large_fraction_refusal()
                ]
            }
        },
        "/_netacl/v1/tenants/{id}": {
            "get": {
                "operationId": "netacl_get_tenant",
                "summary": "One tenant (no secret)",
                "security": security,
                "parameters": [id_parameter],
                "responses": {
                    "200": {"description": "The tenant", "content": {"application/json": {"schema": tenant_ref}}},
                    "401": unauthorized,
                    "404": error("No such tenant"),
                    "503": error("The database is unavailable")
                }
            },
            "delete": {
                "operationId": "netacl_delete_tenant",
                "summary": "Delete a tenant and everything it owns (the default tenant: 409)",
                "security": security,
                "parameters": [id_parameter],
                "responses": {
                    "204": {"description": "Deleted; its hosts answer 421 from now on"},
                    "401": unauthorized,
                    "404": error("No such tenant"),
                    "409": error("The default tenant cannot be deleted"),
                    "503": error("The database is unavailable")
                }
            }
        },
        "/_netacl/v1/tenants/{id}/edge-clients": {
            "post": {
                "operationId": "netacl_create_edge_client",
                "summary": "Create an edge client of the tenant (its secret shown once): the watch, network ACL key material sealed to the edge, the edge's reports",
                "description": "The only clients that receive network ACL key material are those created here (scopes read:network_acls, read:network_acl_key_material, create:edge_summaries): give its id and secret to netacl edge --rules-url. The default tenant's id is default.",
                "security": security,
                "parameters": [id_parameter],
                "responses": {
                    "201": {"description": "The edge client, with its secret", "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "required": ["tenant", "client_id", "client_secret", "scopes"],
                        "properties": {
                            "tenant": {"type": "string"},
                            "client_id": {"type": "string"},
                            "client_secret": {"type": "string"},
                            "scopes": {"type": "array", "items": {"type": "string"}}
                        }}}}},
                    "400": error("Bad query parameter"),
                    "401": unauthorized,
                    "404": error("No such tenant"),
                    "503": error("The database is unavailable")
                }
            }
        }
    });
    if let (Some(target), Value::Object(add)) = (
        document.get_mut("paths").and_then(Value::as_object_mut),
        paths,
    ) {
        target.extend(add);
    }
    if let Some(schemes) = document
        .pointer_mut("/components/securitySchemes")
        .and_then(Value::as_object_mut)
    {
        schemes.insert(
            "operatorToken".into(),
            json!({"type": "http", "scheme": "bearer",
                   "description": "The operator token (--operator-token-file), not a tenant token"}),
        );
    }
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        let report = |items: Value, max: usize| {
            json!({"type": "object", "additionalProperties": false, "required": ["edge", "tenants"],
            "properties": {
                "edge": {"type": "string", "pattern": crate::operator::edge::EDGE_NAME_PATTERN,
                         "description": "The reporting edge's name (netacl edge draws edge- and 16 hexadecimal digits at start)"},
                "tenants": {"type": "object", "maxProperties": crate::operator::edge::MAX_REPORTED_TENANTS,
                            "description": format!("Per tenant id, its items (at most {max} in all tenants together)"),
                            "propertyNames": {"pattern": crate::operator::edge::TENANT_ID_PATTERN},
                            "additionalProperties": {"type": "array", "maxItems": max, "items": items}}
            }})
        };
        schemas.insert(
            "netacl_tenant_edge_summaries".into(),
            report(
                crate::resources::logs::openapi::summary_schema(),
                crate::operator::edge::MAX_PLATFORM_SUMMARIES,
            ),
        );
        schemas.insert(
            "netacl_tenant_edge_sample".into(),
            report(
                json!({"$ref": "#/components/schemas/RequestInput"}),
                crate::resources::logs::sample::MAX_SAMPLE_REQUESTS,
            ),
        );
        schemas.insert(
            "netacl_tenant".into(),
            json!({"type": "object", "required": ["tenant", "domains", "issuer", "audience", "created_at"],
                   "properties": {
                       "tenant": {"type": "string"},
                       "domains": {"type": "array", "items": {"type": "string"}},
                       "issuer": {"type": "string"},
                       "audience": {"type": "string"},
                       "created_at": {"type": "string", "format": "date-time"}
                   }}),
        );
    }
}

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
pub(crate) mod openapi;

/// Largest page of `GET /_netacl/v1/tenants`.
pub(crate) const MAX_TAKE: u32 = 100;
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

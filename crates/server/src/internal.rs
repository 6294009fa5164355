//! Beyond the public API, under `/_netacl/v1` (a prefix the public API can never use): dry runs,
//! the live policy's status, the long-poll watch the edge follows, and the OpenAPI document.
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use netacl_model::{AclId, NetworkAcl, NetworkAclSpec, RuleSet, Timestamp, ValidationError};
use serde_json::{json, Value};

use crate::body::read_write_body;
use crate::config::{DEFAULT_WATCH_TIMEOUT_MS, MAX_WATCH_TIMEOUT_MS};
use crate::error::{json_response, ApiError, JSON_UTF8};
use crate::guard::{Authorized, ReadNetworkAcls};
use crate::policy::Policy;
use crate::query::Query;
use crate::AppState;

/// `POST /_netacl/v1/dry-run`: `{"request": {...}, "network_acls": [...]?}` →
/// `{"version", "source", "outcome"}`.
pub(crate) async fn dry_run(
    _: Authorized<ReadNetworkAcls>,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let value = read_write_body(&state, raw.as_deref(), &headers, body, None).await?;
    let config = &state.inner.config;
    let Value::Object(mut fields) = value else {
        return Err(ValidationError::new("", "Expected type object").into());
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| *k != "request" && *k != "network_acls")
    {
        return Err(ValidationError::new(
            "",
            format!("Additional properties not allowed: {unknown}"),
        )
        .into());
    }
    let request = fields
        .remove("request")
        .ok_or_else(|| ValidationError::new("", "Missing required property: request"))?;
    let (policy, source) = match fields.remove("network_acls") {
        None => (state.inner.tenant.policy(), "live"),
        Some(acls) => {
            let rules = rule_set_from_body(&acls, &config.limits)?;
            let limits = config.limits;
            let policy = tokio::task::spawn_blocking(move || Policy::compile(&rules, &limits))
                .await
                .map_err(|_| ApiError::internal())?
                .map_err(|err| {
                    ValidationError::new("network_acls", format!("Cannot compile: {err}"))
                })?;
            (Arc::new(policy), "body")
        }
    };
    let outcome = policy
        .dry_run(&request)
        .map_err(|err| ApiError::from(ValidationError::new("request", err.to_string())))?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"version": policy.version(), "source": source, "outcome": outcome}),
    ))
}

/// Records (with `id`) or create bodies (without; they get ids `acl_111…1`, `acl_111…2`, ... in
/// order) into a rule set at version 0.
fn rule_set_from_body(acls: &Value, limits: &netacl_model::Limits) -> Result<RuleSet, ApiError> {
    let Value::Array(items) = acls else {
        return Err(ValidationError::new("network_acls", "Expected type array").into());
    };
    let mut rules = RuleSet::default();
    for (index, item) in items.iter().enumerate() {
        let nest = |err: ValidationError| {
            let path = if err.path.is_empty() {
                format!("network_acls[{index}]")
            } else {
                format!("network_acls[{index}].{}", err.path)
            };
            ValidationError::new(path, err.reason)
        };
        let acl = if item.get("id").is_some() {
            NetworkAcl::from_json(item, limits).map_err(nest)?
        } else {
            let spec = NetworkAclSpec::from_json(item, limits).map_err(nest)?;
            let epoch = Timestamp::from_unix_millis(0);
            NetworkAcl {
                id: AclId::from_random(index as u128 + 1),
                spec,
                created_at: epoch,
                updated_at: epoch,
            }
        };
        rules.acls.push(acl);
    }
    Ok(rules)
}

/// `GET /_netacl/v1/status`: the live policy's figures.
pub(crate) async fn status(
    _: Authorized<ReadNetworkAcls>,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    let policy = tenant.policy();
    let snapshot = tenant.snapshot();
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "tenant": tenant.id.as_str(),
            "version": snapshot.version,
            "network_acls": snapshot.ordered.len(),
            "policy": policy.stats(),
        }),
    ))
}

/// `GET /_netacl/v1/network-acls/watch?since=V&timeout_ms=N`: 200 with the whole set as soon as
/// its version differs from `since`, or 304 after `timeout_ms` without a change.
pub(crate) async fn watch(
    _: Authorized<ReadNetworkAcls>,
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["since", "timeout_ms"])?;
    let since = query.integer("since", 0, u64::MAX)?;
    let timeout_ms = query
        .integer("timeout_ms", 0, MAX_WATCH_TIMEOUT_MS)?
        .unwrap_or(DEFAULT_WATCH_TIMEOUT_MS);
    let tenant = &state.inner.tenant;
    // Subscribe before reading, so a change in between is not missed.
    let mut installed = tenant.subscribe();
    if let Some(since) = since {
        if tenant.snapshot().version == since {
            let waited = tokio::time::timeout(
                Duration::from_millis(timeout_ms),
                installed.wait_for(|rules| rules.version != since),
            )
            .await;
            match waited {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return Err(ApiError::unavailable()),
                Err(_) => return Ok(StatusCode::NOT_MODIFIED.into_response()),
            }
        }
    }
    let snapshot = tenant.snapshot();
    let array = snapshot.json_array(0, snapshot.ordered.len());
    let mut body = Vec::with_capacity(array.len() + 48);
    body.extend_from_slice(
        format!("{{\"version\":{},\"network_acls\":", snapshot.version).as_bytes(),
    );
    body.extend_from_slice(&array);
    body.push(b'}');
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(JSON_UTF8),
    );
    Ok(response)
}

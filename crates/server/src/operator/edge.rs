//! The reports of remote multi-tenant edges, through the operator API.
//!
//! An edge enforcing every tenant of the platform (`netacl edge --platform-url`) holds the
//! operator token and no tenant's client, so it reports here, once per summary interval, for
//! every tenant at once:
//!
//! - `POST /_netacl/v1/tenants/edge/summaries` `{"edge": NAME, "tenants": {ID: [summaries]}}`:
//!   each tenant's per-rule counts, recorded as `acls_summary` events in that tenant's log
//!   (`details.edge` is `platform:NAME`; no client id), exactly as the single-tenant edges'
//!   summaries are (`/_netacl/v1/edge/summaries`). At most [`MAX_PLATFORM_SUMMARIES`] summaries
//!   in all and [`PLATFORM_SUMMARIES_BODY_LIMIT`] bytes.
//! - `POST /_netacl/v1/tenants/edge/sample` `{"edge": NAME, "tenants": {ID: [requests]}}`: each
//!   tenant's part of the edge's traffic sample, kept as that edge's last sample of the tenant
//!   (in memory, as the single-tenant `/_netacl/v1/edge/sample`). At most
//!   [`MAX_SAMPLE_REQUESTS`] requests in all and [`SAMPLE_BODY_LIMIT`] bytes.
//!
//! The whole body is checked before anything is kept (a bad member is a 400 naming its
//! property, `tenants.ID[3]`; nothing of the body is kept). A tenant id this server does not
//! serve (deleted, or never created) is **skipped**, not refused: an edge's report of an
//! interval in which a tenant was deleted must not lose every other tenant's counts, and a
//! skipped tenant creates nothing (the store refuses events for a tenant it does not hold, so
//! nothing of a deleted tenant comes back). A summary naming a rule-set version the tenant has
//! not reached is skipped too (counts of an earlier tenant of the same id). The answer says
//! what was kept: `{"recorded" | "kept": N, "skipped": M, "unknown_tenants": [...]}`. A store
//! failure before anything was recorded is a 503 (the edge tries again); after, the tenants
//! left are skipped and logged, so a report is never recorded twice.
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use netacl_store::{StoreError, TenantId};
use serde_json::{json, Map, Value};

use crate::http::error::{json_response, ApiError};
use crate::http::query::Query;
use crate::resources::logs::sample::{request_of, MAX_SAMPLE_REQUESTS, SAMPLE_BODY_LIMIT};
use crate::tenancy::Registry;

/// The most summaries one report carries, all tenants together.
pub(crate) const MAX_PLATFORM_SUMMARIES: usize = 10_000;
/// The largest summaries body, in bytes.
pub(crate) const PLATFORM_SUMMARIES_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// The most tenants one report names.
pub(crate) const MAX_REPORTED_TENANTS: usize = 10_000;
/// What an edge's name may be.
pub(crate) const EDGE_NAME_PATTERN: &str = "^[A-Za-z0-9._:-]{1,64}$";
/// What a tenant id may be.
pub(crate) const TENANT_ID_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";

fn edge_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

fn invalid(reason: &str, property: Option<&str>) -> ApiError {
    ApiError::invalid_body(match property {
        Some(property) => format!("Payload validation error: '{reason}' on property {property}."),
        None => format!("Payload validation error: '{reason}'."),
    })
}

/// A report body, its shape checked: the edge's name and, per tenant named, its items.
#[derive(Debug)]
struct Report {
    edge: String,
    tenants: Vec<(TenantId, Vec<Value>)>,
}

/// Checks the shape of a report (see the module docs): at most `max_items` items in all.
fn report_of(value: Value, max_items: usize) -> Result<Report, ApiError> {
    let Value::Object(mut body) = value else {
        return Err(invalid("Expected type object but found another type", None));
    };
    if let Some(unknown) = body.keys().find(|k| *k != "edge" && *k != "tenants") {
        return Err(invalid(
            &format!("Additional properties not allowed: {unknown}"),
            None,
        ));
    }
    let edge = match body.remove("edge") {
        Some(Value::String(edge)) if edge_name_ok(&edge) => edge,
        Some(_) => {
            return Err(invalid(
                &format!("Expected a string matching {EDGE_NAME_PATTERN}"),
                Some("edge"),
            ))
        }
        None => return Err(invalid("Missing required property: edge", None)),
    };
    let tenants: Map<String, Value> = match body.remove("tenants") {
        Some(Value::Object(tenants)) => tenants,
        Some(_) => {
            return Err(invalid(
                "Expected type object but found another type",
                Some("tenants"),
            ))
        }
        None => return Err(invalid("Missing required property: tenants", None)),
    };
    if tenants.len() > MAX_REPORTED_TENANTS {
        return Err(invalid(
            &format!(
                "Too many properties ({}), maximum {MAX_REPORTED_TENANTS}",
                tenants.len()
            ),
            Some("tenants"),
        ));
    }
    let mut total = 0usize;
    let mut out = Vec::with_capacity(tenants.len());
    for (name, items) in tenants {
        let Some(id) = TenantId::new(&name) else {
            return Err(invalid(
                "A member name is not a tenant id (1 to 64 ASCII letters, digits, - or _)",
                Some("tenants"),
            ));
        };
        let Value::Array(items) = items else {
            return Err(invalid(
                "Expected type array but found another type",
                Some(&format!("tenants.{id}")),
            ));
        };
        total = total.saturating_add(items.len());
        if total > max_items {
            return Err(invalid(
                &format!("Too many items in all tenants together, maximum {max_items}"),
                Some("tenants"),
            ));
        }
        out.push((id, items));
    }
    Ok(Report {
        edge: format!("platform:{edge}"),
        tenants: out,
    })
}

fn answer(kept_name: &str, kept: usize, skipped: usize, unknown: Vec<TenantId>) -> Response {
    let unknown: Vec<&str> = unknown.iter().map(TenantId::as_str).collect();
    json_response(
        StatusCode::OK,
        &json!({kept_name: kept, "skipped": skipped, "unknown_tenants": unknown}),
    )
}

/// `POST /_netacl/v1/tenants/edge/summaries` (see the module docs).
pub(crate) async fn post_summaries(
    State(registry): State<Arc<Registry>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match summaries_inner(&registry, raw.as_deref(), &headers, body).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn summaries_inner(
    registry: &Registry,
    raw: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    Query::parse(raw, &[])?;
    let value =
        crate::http::body::read_json_body(headers, body, PLATFORM_SUMMARIES_BODY_LIMIT, None)
            .await?;
    let report = report_of(value, MAX_PLATFORM_SUMMARIES)?;
    // Every member checked before anything is recorded.
    let mut checked = Vec::with_capacity(report.tenants.len());
    for (id, items) in report.tenants {
        let mut summaries = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            summaries.push(crate::resources::logs::summary_of(
                item,
                &format!("tenants.{id}[{index}]"),
            )?);
        }
        checked.push((id, summaries));
    }
    let (mut recorded, mut skipped, mut unknown) = (0usize, 0usize, Vec::new());
    for (id, summaries) in checked {
        if summaries.is_empty() {
            continue;
        }
        let Some((state, _)) = registry.served(&id) else {
            skipped += summaries.len();
            unknown.push(id);
            continue;
        };
        // Counts of a version this tenant never had are another tenant's of the same id.
        let version = state.inner.tenant.snapshot().version;
        let (kept, later): (Vec<_>, Vec<_>) = summaries
            .into_iter()
            .partition(|s| s.policy_version <= version);
        skipped += later.len();
        if kept.is_empty() {
            continue;
        }
        let events = crate::resources::logs::summary_events(&kept, None, &report.edge);
        let appended = registry
            .store()
            .append_log_events(&id, &events, state.inner.config.log_retention)
            .await;
        match appended {
            Ok(_) => recorded += kept.len(),
            Err(StoreError::NotFound(_)) => {
                // Deleted meanwhile: nothing created.
                skipped += kept.len();
                unknown.push(id);
            }
            Err(err) if recorded == 0 => {
                tracing::warn!(tenant = %id, error = %err, "edge summaries not recorded");
                return Err(match err {
                    StoreError::Unavailable(_) => ApiError::unavailable(),
                    _ => ApiError::internal(),
                });
            }
            Err(err) => {
                tracing::warn!(tenant = %id, error = %err, summaries = kept.len(),
                    "edge summaries of a tenant not recorded (the others of the report were)");
                skipped += kept.len();
            }
        }
    }
    Ok(answer("recorded", recorded, skipped, unknown))
}

/// `POST /_netacl/v1/tenants/edge/sample` (see the module docs).
pub(crate) async fn post_sample(
    State(registry): State<Arc<Registry>>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match sample_inner(&registry, raw.as_deref(), &headers, body).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

async fn sample_inner(
    registry: &Registry,
    raw: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    Query::parse(raw, &[])?;
    let value = crate::http::body::read_json_body(headers, body, SAMPLE_BODY_LIMIT, None).await?;
    let report = report_of(value, MAX_SAMPLE_REQUESTS)?;
    let mut checked = Vec::with_capacity(report.tenants.len());
    for (id, items) in report.tenants {
        let mut requests = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            requests.push(request_of(item, &format!("tenants.{id}[{index}]"))?);
        }
        checked.push((id, requests));
    }
    let (mut kept, mut skipped, mut unknown) = (0usize, 0usize, Vec::new());
    for (id, requests) in checked {
        if requests.is_empty() {
            continue;
        }
        match registry.served(&id) {
            Some((state, _)) => {
                kept += requests.len();
                state
                    .inner
                    .tenant
                    .posted_samples()
                    .put(report.edge.clone(), requests);
            }
            None => {
                skipped += requests.len();
                unknown.push(id);
            }
        }
    }
    Ok(answer("kept", kept, skipped, unknown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_checked_with_their_paths() {
        let good = json!({"edge": "edge-0123456789abcdef", "tenants": {"acme": [1, 2], "b_2": []}});
        let report = report_of(good, 3).expect("good");
        assert_eq!(report.edge, "platform:edge-0123456789abcdef");
        assert_eq!(report.tenants.len(), 2);
        let refused = |body: Value, max: usize| {
            report_of(body, max)
                .expect_err("refused")
                .message()
                .to_owned()
        };
        assert!(refused(json!({"edge": "e", "tenants": {"a": [1, 2]}}), 1).contains("maximum 1"));
        assert!(refused(json!({"edge": "e", "tenants": {"a b": []}}), 1).contains("tenant id"));
        assert!(refused(json!({"edge": "e", "tenants": {"a": {}}}), 1).contains("tenants.a"));
        assert!(refused(json!({"edge": "e e", "tenants": {}}), 1).contains("property edge"));
        assert!(refused(json!({"edge": "x".repeat(65), "tenants": {}}), 1).contains("edge"));
        assert!(refused(json!({"tenants": {}}), 1).contains("edge"));
        assert!(refused(json!({"edge": "e"}), 1).contains("tenants"));
        assert!(refused(json!({"edge": "e", "tenants": {}, "x": 1}), 1).contains("x"));
        assert!(refused(json!([]), 1).contains("object"));
        assert!(edge_name_ok("platform:edge-1.a_b"));
    }
}

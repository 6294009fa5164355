//! `GET /_netacl/v1/network-acls/counts?minutes=M`: per-rule matched and evaluated counts over
//! the last `M` minutes, summed over every edge from the tenant's `acls_summary` log events
//! (README, "Rule counts").
//!
//! - The window ends now and starts `M` minutes before (`1..=1440`, default 60); it is split
//!   into [`BUCKETS`] buckets of equal length (`M × 5` seconds), oldest first.
//! - An `acls_summary` event covers the `interval_s` seconds that end at its date; it is counted
//!   whole in the bucket of its date (and in the window when its date is), not spread over the
//!   interval it covers.
//! - `decisions` are the requests the edges saw: for each report (the events of one edge with one
//!   date) the largest `evaluated` among its rules, summed. An edge reports only the rules that
//!   matched something, so this is exact when the first rule in the order (for every scope) is
//!   among them, and a lower bound otherwise. `blocked` is the sum of the `matched` of the rules
//!   reported with the `block` action (a block rule decides every request it matches), and
//!   `blocked_share` is `blocked / decisions` (`null` without decisions, at most 1). Both have a
//!   series by bucket (`decisions_series`, `blocked_series`), so a bucket's rate and blocked
//!   share can be drawn.
//! - The store reads the window's events (one range of its `(tenant, date)` index) and sums them
//!   as it reads: the work is the window's events, bounded by the log's retention, never the
//!   whole log. Rules are answered by id.
use std::collections::HashMap;

use axum::extract::RawQuery;
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use netacl_model::Timestamp;
use netacl_store::CountWindow;
use serde::Serialize;
use serde_json::{json, Value};

use crate::http::error::{ApiError, JSON_UTF8};
use crate::http::guard::{Authorized, ReadNetworkAcls};
use crate::http::query::Query;
use crate::AppState;

/// Buckets a window is split into.
pub(crate) const BUCKETS: u32 = 12;
/// The longest window, in minutes (a day).
pub(crate) const MAX_MINUTES: u64 = 1440;
/// The window when the query names none, in minutes.
pub(crate) const DEFAULT_MINUTES: u64 = 60;

/// One rule's counts over the window, as answered.
#[derive(Serialize)]
struct RuleCounts {
    rule_id: String,
    action: String,
    evaluated: u64,
    matched: u64,
    evaluated_series: [u64; BUCKETS as usize],
    matched_series: [u64; BUCKETS as usize],
    /// The last bucket the action was seen in (the newest action wins).
    #[serde(skip)]
    action_bucket: Option<u32>,
}

#[derive(Serialize)]
struct Totals {
    decisions: u64,
    decisions_per_second: f64,
    matched: u64,
    blocked: u64,
    blocked_share: Option<f64>,
    decisions_series: [u64; BUCKETS as usize],
    blocked_series: [u64; BUCKETS as usize],
}

#[derive(Serialize)]
struct Answer {
    from: String,
    to: String,
    minutes: u64,
    bucket_seconds: u64,
    totals: Totals,
    network_acls: Vec<RuleCounts>,
}

fn total(series: &[u64]) -> u64 {
    series.iter().fold(0u64, |sum, n| sum.saturating_add(*n))
}

/// `GET /_netacl/v1/network-acls/counts`.
pub(crate) async fn counts(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["minutes"])?;
    let minutes = query
        .integer("minutes", 1, MAX_MINUTES)?
        .unwrap_or(DEFAULT_MINUTES);
    let span_ms = i64::try_from(minutes).unwrap_or(i64::MAX / 60_000) * 60_000;
    let to_ms = Timestamp::now().unix_millis();
    let window = CountWindow {
        from_ms: to_ms - span_ms,
        to_ms,
        buckets: BUCKETS,
    };
    let tenant = &state.inner.tenant;
    let sums = tenant
        .store()
        .acl_summary_counts(&tenant.id, window)
        .await?;
    let mut rules: HashMap<String, RuleCounts> = HashMap::new();
    let mut blocked_series = [0u64; BUCKETS as usize];
    for row in sums.rules {
        let slot = row.bucket.min(BUCKETS - 1) as usize;
        if row.action == "block" {
            blocked_series[slot] = blocked_series[slot].saturating_add(row.matched);
        }
        let counts = rules
            .entry(row.rule_id)
            .or_insert_with_key(|rule_id| RuleCounts {
                rule_id: rule_id.clone(),
                action: String::new(),
                evaluated: 0,
                matched: 0,
                evaluated_series: [0; BUCKETS as usize],
                matched_series: [0; BUCKETS as usize],
                action_bucket: None,
            });
        counts.evaluated_series[slot] = counts.evaluated_series[slot].saturating_add(row.evaluated);
        counts.matched_series[slot] = counts.matched_series[slot].saturating_add(row.matched);
        if counts.action_bucket.is_none_or(|b| b <= row.bucket) {
            counts.action = row.action;
            counts.action_bucket = Some(row.bucket);
        }
    }
    let mut network_acls: Vec<RuleCounts> = rules.into_values().collect();
    network_acls.sort_unstable_by(|a, b| a.rule_id.cmp(&b.rule_id));
    let mut matched = 0u64;
    for r in &mut network_acls {
        r.evaluated = total(&r.evaluated_series);
        r.matched = total(&r.matched_series);
        matched = matched.saturating_add(r.matched);
    }
    let mut decisions_series = [0u64; BUCKETS as usize];
    for (bucket, seen) in sums.requests {
        let slot = bucket.min(BUCKETS - 1) as usize;
        decisions_series[slot] = decisions_series[slot].saturating_add(seen);
    }
    let decisions = total(&decisions_series);
    let blocked = total(&blocked_series);
    let answer = Answer {
        from: Timestamp::from_unix_millis(window.from_ms).to_string(),
        to: Timestamp::from_unix_millis(window.to_ms).to_string(),
        minutes,
        bucket_seconds: minutes * 60 / u64::from(BUCKETS),
        totals: Totals {
            decisions,
            decisions_per_second: decisions as f64 / (minutes * 60) as f64,
            matched,
            blocked,
            blocked_share: (decisions > 0).then(|| (blocked as f64 / decisions as f64).min(1.0)),
            decisions_series,
            blocked_series,
        },
        network_acls,
    };
    let body = serde_json::to_vec(&answer).map_err(|_| ApiError::internal())?;
    let mut response = (StatusCode::OK, body).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
    Ok(response)
}

/// The success schema of the counts operation (OpenAPI).
pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
    if operation_id != "netacl_rule_counts" {
        return None;
    }
    let count = json!({"type": "integer", "minimum": 0});
    let series = json!({"type": "array", "items": count, "minItems": BUCKETS, "maxItems": BUCKETS,
        "description": "One count per bucket, oldest first."});
    Some(json!({"type": "object", "additionalProperties": false,
    "required": ["from", "to", "minutes", "bucket_seconds", "totals", "network_acls"],
    "properties": {
        "from": {"type": "string", "format": "date-time"},
        "to": {"type": "string", "format": "date-time"},
        "minutes": {"type": "integer", "minimum": 1, "maximum": MAX_MINUTES},
        "bucket_seconds": {"type": "integer", "minimum": 5},
        "totals": {"type": "object", "additionalProperties": false,
            "required": ["decisions", "decisions_per_second", "matched", "blocked",
                         "blocked_share", "decisions_series", "blocked_series"],
            "properties": {
                "decisions": count,
                "decisions_per_second": {"type": "number", "minimum": 0},
                "matched": count,
                "blocked": count,
                "blocked_share": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                "decisions_series": series,
                "blocked_series": series,
            }},
        "network_acls": {"type": "array", "items": {"type": "object",
            "additionalProperties": false,
            "required": ["rule_id", "action", "evaluated", "matched", "evaluated_series",
                         "matched_series"],
            "properties": {
                "rule_id": {"type": "string"},
                "action": {"type": "string"},
                "evaluated": count,
                "matched": count,
                "evaluated_series": series,
                "matched_series": series,
            }}},
    }}))
}

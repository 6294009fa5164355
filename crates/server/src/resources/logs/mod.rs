//! Tenant logs, as the public API has them: `GET /api/v2/logs`, `GET /api/v2/logs/{id}`.
//!
//! - **Events of management writes** are recorded by one middleware ([`record`]), set on every
//!   write operation of the route table inside the guard (so on every request whose token was
//!   verified): `sapi` when the answer is a success, `fapi` when it is a 4xx or 5xx. The event is
//!   appended (durably) after the answer is known and before it is sent, so an acknowledged write
//!   has its event. It carries the method, the path and the status, never a body nor a header
//!   but the user agent: no secret can reach it. Reads, `401` (no verified caller) and `429`
//!   (refused before any work) are not recorded: an unauthenticated or throttled caller cannot
//!   write into a tenant's log.
//! - **`acls_summary` events**: the per-rule counts of the edges, appended by
//!   [`AdminService::record_acl_summaries`](crate::AdminService::record_acl_summaries) (an edge
//!   in the same process) or `POST /_netacl/v1/edge/summaries` (a remote edge).
//! - **Ids** are the tenant's event numbers, 20 decimal digits (`00000000000000000042`), so they
//!   sort as they were recorded; `from` pages forward by id.
pub(crate) mod openapi;
pub(crate) mod sample;
pub(crate) mod search;

use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts, Path, RawQuery, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use netacl_model::{AclSummary, Timestamp};
use netacl_store::{LogOrder, LogRetention, NewLogEvent, StoredLogEvent};
use serde_json::{json, Map, Value};

use crate::auth::Principal;
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, CreateEdgeSummaries, ReadLogs};
use crate::http::paging::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::http::query::Query;
use crate::resources::groups::Projection;
use crate::AppState;

/// The members of an event, the only names `fields` may list.
pub(crate) const LOG_FIELDS: [&str; 10] = [
    "date",
    "type",
    "description",
    "client_id",
    "client_name",
    "ip",
    "user_agent",
    "hostname",
    "details",
    "log_id",
];

/// The pattern of a log id.
pub(crate) const LOG_ID_PATTERN: &str = "^[0-9]{20}$";

/// Default retention: events kept per tenant.
pub const DEFAULT_LOG_RETENTION_EVENTS: u64 = 100_000;
/// Default retention: days an event is kept.
pub const DEFAULT_LOG_RETENTION_DAYS: u64 = 30;

/// The default retention (see [`DEFAULT_LOG_RETENTION_EVENTS`], [`DEFAULT_LOG_RETENTION_DAYS`]).
pub fn default_log_retention() -> LogRetention {
    LogRetention {
        max_events: Some(DEFAULT_LOG_RETENTION_EVENTS),
        max_age_ms: Some(days_ms(DEFAULT_LOG_RETENTION_DAYS)),
    }
}

/// Days in milliseconds (saturating).
pub fn days_ms(days: u64) -> i64 {
    i64::try_from(days)
        .unwrap_or(i64::MAX)
        .saturating_mul(86_400_000)
}

/// The longest user agent kept, in characters.
const MAX_USER_AGENT_CHARS: usize = 512;
/// The most summaries one `POST /_netacl/v1/edge/summaries` carries.
pub(crate) const MAX_SUMMARIES: usize = 1_000;
/// The largest summaries body, in bytes.
const SUMMARIES_BODY_LIMIT: usize = 512 * 1024;

/// A log id as clients see it.
pub(crate) fn log_id(seq: u64) -> String {
    format!("{seq:020}")
}

/// The number of a log id; `None` when it is not one (20 digits). Twenty digits beyond the
/// largest number are after every event.
fn parse_log_id(text: &str) -> Option<u64> {
    if text.len() != 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().unwrap_or(u64::MAX))
}

/// The event as the API answers it.
fn render(event: StoredLogEvent) -> Value {
    let mut out = Map::new();
    out.insert(
        "date".into(),
        Timestamp::from_unix_millis(event.date_ms)
            .to_string()
            .into(),
    );
    out.insert("type".into(), event.event_type.into());
    if let Some(client_id) = event.client_id {
        out.insert("client_id".into(), client_id.into());
    }
    if let Value::Object(record) = event.record {
        for (key, value) in record {
            if LOG_FIELDS.contains(&key.as_str()) {
                out.entry(key).or_insert(value);
            }
        }
    }
    out.insert("log_id".into(), log_id(event.seq).into());
    Value::Object(out)
}

/// The retention cutoff for reads: events older than the configured age are not served even
/// before the next append removes them.
fn not_before(retention: LogRetention) -> Option<i64> {
    retention
        .max_age_ms
        .map(|age| Timestamp::now().unix_millis().saturating_sub(age))
}

/// `GET /api/v2/logs`.
pub(crate) async fn list(
    _: Authorized<ReadLogs>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(
        raw.as_deref(),
        &[
            "page",
            "per_page",
            "include_totals",
            "from",
            "take",
            "fields",
            "include_fields",
            "sort",
            "q",
            "search",
        ],
    )?;
    let projection = Projection::from_query(&query, &LOG_FIELDS)?;
    let retention = state.inner.config.log_retention;
    let tenant = &state.inner.tenant;
    let checkpoint = query.string("from").is_some() || query.string("take").is_some();
    if checkpoint {
        for name in ["page", "per_page"] {
            if query.string(name).is_some() {
                return Err(ApiError::invalid_query(
                    "page and per_page cannot be combined with from and take",
                    None,
                ));
            }
        }
        for name in ["q", "search", "sort"] {
            if query.string(name).is_some() {
                return Err(ApiError::invalid_query(
                    "from and take page by log id and take no search or sort",
                    Some(name),
                ));
            }
        }
        query.boolean("include_totals")?;
        let take = query
            .integer("take", 1, MAX_PAGE_SIZE)?
            .unwrap_or(DEFAULT_PAGE_SIZE);
        let after = match query.string("from") {
            None => 0,
            Some(text) => parse_log_id(text).ok_or_else(|| {
                ApiError::invalid_query("Expected a log id (20 digits)", Some("from"))
            })?,
        };
        let events = tenant
            .store()
            .log_events_after(&tenant.id, after, take as u32, not_before(retention))
            .await?;
        let last = events.last().map(|e| e.seq);
        let items: Vec<Value> = events
            .into_iter()
            .map(|e| projection.apply(render(e)))
            .collect();
        let mut response = json_response(StatusCode::OK, &Value::Array(items));
        if let Some(last) = last {
            let link = format!(
                "</api/v2/logs?from={}&take={take}>; rel=\"next\"",
                log_id(last)
            );
            if let Ok(value) = HeaderValue::from_str(&link) {
                response.headers_mut().insert(http::header::LINK, value);
            }
        }
        return Ok(response);
    }
    let page = query.integer("page", 0, u64::from(u32::MAX))?.unwrap_or(0);
    let per_page = query
        .integer("per_page", 0, MAX_PAGE_SIZE)?
        .unwrap_or(DEFAULT_PAGE_SIZE);
    let include_totals = query.boolean("include_totals")?.unwrap_or(false);
    let order = match query.string("sort") {
        None | Some("date:-1") => LogOrder::Descending,
        Some("date:1") => LogOrder::Ascending,
        Some(_) => {
            return Err(ApiError::invalid_query(
                "Expected date:1 or date:-1 (logs sort by date only)",
                Some("sort"),
            ))
        }
    };
    let (q, name) = match (query.string("q"), query.string("search")) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid_query(
                "q and search are the same parameter; give one",
                Some("search"),
            ))
        }
        (Some(q), None) => (Some(q), "q"),
        (None, search) => (search, "search"),
    };
    let search = match q {
        None => search::Search::default(),
        Some(text) => search::parse(text).map_err(|err| {
            ApiError::invalid_query(format!("Invalid search query {err}"), Some(name))
        })?,
    };
    let mut filter = search.filter;
    if let Some(cutoff) = not_before(retention) {
        filter.from_ms = Some(filter.from_ms.map_or(cutoff, |f| f.max(cutoff)));
    }
    let start = page.saturating_mul(per_page);
    let (events, total) = if search.matches_nothing {
        (Vec::new(), 0)
    } else {
        let page = tenant
            .store()
            .list_log_events(&tenant.id, &filter, order, start, per_page)
            .await?;
        (page.events, page.total)
    };
    let items: Vec<Value> = events
        .into_iter()
        .map(|e| projection.apply(render(e)))
        .collect();
    if !include_totals {
        return Ok(json_response(StatusCode::OK, &Value::Array(items)));
    }
    let body = json!({
        "start": start,
        "limit": per_page,
        "length": items.len(),
        "total": total,
        "logs": items,
    });
    Ok(json_response(StatusCode::OK, &body))
}

/// A log id from the path (400 `invalid_uri` when it is not one).
pub(crate) struct LogPath(u64);

impl<S: Send + Sync> FromRequestParts<S> for LogPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "id"))?;
        if let Some(seq) = parse_log_id(&raw) {
            return Ok(LogPath(seq));
        }
        Err(ApiError::invalid_uri(
            format!("String does not match pattern {LOG_ID_PATTERN}"),
            "id",
        ))
    }
}

/// 404 `inexistent_log`.
fn no_such_log() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        Some("inexistent_log"),
        "The log event does not exist.",
    )
}

/// `GET /api/v2/logs/{id}`.
pub(crate) async fn get(
    _: Authorized<ReadLogs>,
    LogPath(seq): LogPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    if seq == 0 || seq > i64::MAX as u64 {
        return Err(no_such_log());
    }
    let tenant = &state.inner.tenant;
    let event = tenant
        .store()
        .log_event(&tenant.id, seq)
        .await?
        .filter(|e| {
            not_before(state.inner.config.log_retention).is_none_or(|cutoff| e.date_ms >= cutoff)
        })
        .ok_or_else(no_such_log)?;
    Ok(json_response(StatusCode::OK, &render(event)))
}

/// The operation a [`record`] middleware stands in front of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoggedOperation {
    pub(crate) operation_id: &'static str,
    pub(crate) summary: &'static str,
}

/// Whether an operation's requests are recorded: every write (not `GET`) but those that change
/// nothing (dry run, analysis, preview), the edge summaries (recorded as what they carry) and
/// the edges' traffic samples (kept in memory, one every interval per edge).
pub(crate) fn records(method: &http::Method, operation_id: &str) -> bool {
    const NOT_WRITES: [&str; 5] = [
        "netacl_dry_run",
        "netacl_analyze",
        "netacl_preview",
        "netacl_edge_summaries",
        "netacl_edge_sample",
    ];
    *method != http::Method::GET
        && *method != http::Method::HEAD
        && !NOT_WRITES.contains(&operation_id)
}

/// The client address as the server sees it: the TCP peer (the admin API believes no
/// forwarding header), an IPv4-mapped IPv6 address as IPv4.
fn client_ip(request: &Request) -> Option<String> {
    let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
    let ip = match peer.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    Some(ip.to_string())
}

fn user_agent(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(http::header::USER_AGENT)?;
    let text = String::from_utf8_lossy(value.as_bytes());
    Some(text.chars().take(MAX_USER_AGENT_CHARS).collect())
}

/// The middleware recording one event per write (see the module docs).
pub(crate) async fn record(
    State(operation): State<LoggedOperation>,
    request: Request,
    next: Next,
) -> Response {
    let date = Timestamp::now();
    let Some(state) = request.extensions().get::<AppState>().cloned() else {
        return next.run(request).await;
    };
    let client_id = request
        .extensions()
        .get::<Principal>()
        .map(|p| p.client_id().to_owned());
    let method = request.method().as_str().to_ascii_lowercase();
    let path = request.uri().path().to_owned();
    // The id the answer carries in `X-Request-Id` (the caller's, or generated), as the
    // rule-set history records it.
    let request_id = request
        .extensions()
        .get::<crate::RequestContext>()
        .map(|context| context.request_id.clone());
    let ip = client_ip(&request);
    let agent = user_agent(request.headers());
    let response = next.run(request).await;
    let status = response.status();
    let success = status.is_success() || status.is_redirection();
    let reason = status.canonical_reason().unwrap_or("");
    let description = if success {
        operation.summary.to_owned()
    } else {
        format!("{}: {} {reason}", operation.summary, status.as_u16())
    };
    let mut record = Map::new();
    record.insert("description".into(), description.into());
    if let Some(client_id) = &client_id {
        // A client has no name of its own here (as in GET /clients): its id.
        record.insert("client_name".into(), client_id.clone().into());
    }
    if let Some(ip) = ip {
        record.insert("ip".into(), ip.into());
    }
    if let Some(agent) = agent {
        record.insert("user_agent".into(), agent.into());
    }
    record.insert(
        "hostname".into(),
        state.inner.config.tenant_domain.clone().into(),
    );
    let mut details = json!({
        "request": {"method": method, "path": path, "operation": operation.operation_id},
        "response": {"statusCode": status.as_u16()},
    });
    if let (Some(id), Value::Object(members)) = (request_id, &mut details) {
        members.insert("request_id".into(), id.into());
    }
    record.insert("details".into(), details);
    let event = NewLogEvent {
        date_ms: date.unix_millis(),
        event_type: if success { "sapi" } else { "fapi" }.into(),
        client_id,
        record: Value::Object(record),
    };
    append(&state, vec![event]).await;
    response
}

/// Appends events to the tenant's log; a failure is logged (the answer stands: the write it
/// describes is done).
async fn append(state: &AppState, events: Vec<NewLogEvent>) -> bool {
    let tenant = &state.inner.tenant;
    match tenant
        .store()
        .append_log_events(&tenant.id, &events, state.inner.config.log_retention)
        .await
    {
        Ok(_) => true,
        Err(err) => {
            tracing::warn!(tenant = %tenant.id, error = %err, "cannot record log events");
            false
        }
    }
}

/// `acls_summary` events for the summaries of one edge report, recorded at `now`.
pub(crate) fn summary_events(
    summaries: &[AclSummary],
    client_id: Option<&str>,
    edge: &str,
) -> Vec<NewLogEvent> {
    let date_ms = Timestamp::now().unix_millis();
    summaries
        .iter()
        .map(|s| NewLogEvent {
            date_ms,
            event_type: "acls_summary".into(),
            client_id: client_id.map(str::to_owned),
            record: json!({
                "description": format!(
                    "Network ACL {} ({}): {} matched of {} evaluated in {} s",
                    s.rule_id, s.action, s.matched, s.evaluated, s.interval_s
                ),
                "details": {
                    "edge": edge,
                    "rule_id": s.rule_id,
                    "action": s.action,
                    "scope": s.scope,
                    "policy_version": s.policy_version,
                    "interval_s": s.interval_s,
                    "evaluated": s.evaluated,
                    "matched": s.matched,
                    "connections_refused": s.connections_refused,
                },
            }),
        })
        .collect()
}

/// Records an in-process edge's summaries in `tenant`'s log.
pub(crate) async fn record_summaries(state: &AppState, summaries: &[AclSummary]) -> bool {
    if summaries.is_empty() {
        return true;
    }
    append(state, summary_events(summaries, None, "in-process")).await
}

/// `POST /_netacl/v1/edge/summaries`: `{"summaries": [...]}` from a remote edge (at most
/// [`MAX_SUMMARIES`], each checked); 200 `{"recorded": N}`.
pub(crate) async fn post_summaries(
    _: Authorized<CreateEdgeSummaries>,
    state: AppState,
    axum::Extension(principal): axum::Extension<Principal>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let limit = SUMMARIES_BODY_LIMIT.min(state.inner.config.body_limit);
    let value = crate::http::body::read_json_body(&headers, body, limit, None).await?;
    let summaries = summaries_of(value)?;
    let client_id = principal.client_id();
    let events = summary_events(&summaries, Some(client_id), &format!("remote:{client_id}"));
    let tenant = &state.inner.tenant;
    tenant
        .store()
        .append_log_events(&tenant.id, &events, state.inner.config.log_retention)
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"recorded": summaries.len()}),
    ))
}

/// The summaries of a body, each checked, with the property path of the first fault.
fn summaries_of(value: Value) -> Result<Vec<AclSummary>, ApiError> {
    let Value::Object(mut body) = value else {
        return Err(ApiError::invalid_body(
            "Payload validation error: 'Expected type object but found another type'.",
        ));
    };
    if let Some(unknown) = body.keys().find(|k| *k != "summaries") {
        return Err(ApiError::invalid_body(format!(
            "Payload validation error: 'Additional properties not allowed: {unknown}'."
        )));
    }
    let Some(Value::Array(items)) = body.remove("summaries") else {
        return Err(ApiError::invalid_body(
            "Payload validation error: 'Missing required property or not an array' on property summaries.",
        ));
    };
    if items.len() > MAX_SUMMARIES {
        return Err(ApiError::invalid_body(format!(
            "Payload validation error: 'Array is too long ({}), maximum {MAX_SUMMARIES}' on property summaries.",
            items.len()
        )));
    }
    let mut summaries = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        summaries.push(summary_of(item, &format!("summaries[{index}]"))?);
    }
    Ok(summaries)
}

/// One summary of a body, checked; a fault names `property`.
pub(crate) fn summary_of(item: Value, property: &str) -> Result<AclSummary, ApiError> {
    let fault = |err: String| {
        ApiError::invalid_body(format!(
            "Payload validation error: '{err}' on property {property}."
        ))
    };
    let summary: AclSummary = serde_json::from_value(item).map_err(|err| fault(err.to_string()))?;
    summary.check().map_err(fault)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ids_are_twenty_digits_that_sort_as_numbers() {
        assert_eq!(log_id(42), "00000000000000000042");
        assert!(log_id(9) < log_id(10));
        assert_eq!(parse_log_id(&log_id(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_log_id("99999999999999999999"), Some(u64::MAX));
        for bad in [
            "42",
            "0000000000000000004x",
            "000000000000000000042",
            "+0000000000000000042",
        ] {
            assert_eq!(parse_log_id(bad), None, "{bad}");
        }
        let pattern = regex::Regex::new(LOG_ID_PATTERN).expect("pattern");
        assert!(pattern.is_match(&log_id(7)));
    }

    #[test]
    fn only_writes_are_recorded() {
        use http::Method;
        assert!(records(&Method::POST, "post_network-acls"));
        assert!(records(&Method::DELETE, "delete_network-acls_by_id"));
        assert!(!records(&Method::GET, "get_network-acls"));
        assert!(!records(&Method::POST, "netacl_dry_run"));
        assert!(!records(&Method::POST, "netacl_edge_summaries"));
    }

    #[test]
    fn a_rendered_event_keeps_only_the_public_members() {
        let event = StoredLogEvent {
            seq: 3,
            date_ms: 1_767_225_600_000,
            event_type: "sapi".into(),
            client_id: Some("c".into()),
            record: json!({"description": "d", "details": {"x": 1}, "other": "dropped"}),
        };
        assert_eq!(
            render(event),
            json!({"date": "2026-01-01T00:00:00.000Z", "type": "sapi", "client_id": "c",
                   "description": "d", "details": {"x": 1}, "log_id": "00000000000000000003"})
        );
    }

    #[test]
    fn summary_bodies_are_checked_with_their_paths() {
        let good = json!({"rule_id": "acl_1111111111111111111111", "action": "block",
            "scope": "tenant", "policy_version": 1, "interval_s": 600, "evaluated": 5,
            "matched": 2, "connections_refused": 0});
        assert_eq!(
            summaries_of(json!({"summaries": [good.clone()]}))
                .expect("good")
                .len(),
            1
        );
        let mut bad = good.clone();
        bad["action"] = json!("deny");
        let err = summaries_of(json!({"summaries": [good.clone(), bad]})).expect_err("bad");
        assert!(err.message().contains("summaries[1]"), "{}", err.message());
        assert!(summaries_of(json!({"summaries": [good.clone()], "x": 1})).is_err());
        assert!(summaries_of(json!([])).is_err());
        let many = vec![good; MAX_SUMMARIES + 1];
        assert!(summaries_of(json!({ "summaries": many })).is_err());
    }
}

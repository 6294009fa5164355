//! Rule analysis and impact preview under `/_netacl/v1/network-acls`: `analyze` (shadowed,
//! redundant and conflicting rules of the live or a proposed rule set, `netacl-analysis`),
//! `preview` (a proposed change replayed over requests, or over the edges' traffic samples), and the `Netacl-Findings` header of
//! the ACL write answers.
use axum::body::Body;
use axum::extract::RawQuery;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode};
use netacl_eval::RequestInput;
use netacl_model::{
    AclId, NetworkAcl, NetworkAclPatch, NetworkAclSpec, RuleSet, Timestamp, ValidationError,
};
use serde_json::{Map, Value};

use crate::http::body::read_write_body;
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, ReadNetworkAcls};
use crate::http::query::Query;
use crate::http::work::CancelOnDrop;
use crate::tenant::policy::Policy;
use crate::AppState;

/// The response header carrying the findings that concern a written rule.
pub(crate) const FINDINGS_HEADER: &str = "netacl-findings";

/// The longest `Netacl-Findings` value (bytes; cut at a finding, ending `; ...`).
pub(crate) const MAX_FINDINGS_HEADER: usize = 1024;

/// The largest rule set `analyze` takes (active and inactive rules): the synthetic tenant
/// answers well within a second (0.2 to 0.35 s at 1,000 rules under load, with 45,000
/// findings, about 10 MB of JSON; 1 to 1.5 s and 40 MB at 2,000; at 10,000 rules 10 to 25 s
/// and 2.8 million findings, hundreds of MB: `netacl lint` is the tool for such sets; README,
/// Performance). Rule sets whose rules all overlap take far longer (minutes at 1,000 rules):
/// the analysis's budget and deadline bound what one call does (`crate::http::work`).
pub(crate) const MAX_ANALYZED_RULES: usize = 1_000;

/// The largest live rule set whose writes get the `Netacl-Findings` header: the analysis runs
/// on the write path, which must stay within about 20 ms (the synthetic tenant: about 1 ms at
/// 100 rules, 3 to 15 ms at 200 under load; README, Performance). Rules written through the
/// API alone are at most 100 (priorities 1..100, unique); larger live sets come from rule
/// files.
pub(crate) const MAX_HEADER_RULES: usize = 200;

/// The live rule set as a [`RuleSet`].
fn live_rules(state: &AppState) -> RuleSet {
    let snapshot = state.inner.tenant.snapshot();
    RuleSet {
        version: snapshot.version,
        acls: snapshot.ordered.iter().map(|s| s.acl.clone()).collect(),
    }
}

/// The body as an object with only `allowed` members; an empty body (`Content-Length: 0`) is
/// `{}`.
async fn object_body(
    state: &AppState,
    raw: Option<String>,
    headers: &HeaderMap,
    body: Body,
    allowed: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    let empty = headers
        .get(http::header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() == b"0");
    let value = if empty {
        Query::parse(raw.as_deref(), &[])?;
        Value::Object(Map::new())
    } else {
        read_write_body(state, raw.as_deref(), headers, body, None).await?
    };
    let Value::Object(fields) = value else {
        return Err(ValidationError::new("", "Expected type object").into());
    };
    if let Some(unknown) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ValidationError::new(
            "",
            format!("Additional properties not allowed: {unknown}"),
        )
        .into());
    }
    Ok(fields)
}

/// `POST /_netacl/v1/network-acls/analyze`: `{"network_acls": [...]?}` (records or create
/// bodies; absent: the live rule set) → `{"findings": [...], "undecided": [...]}`.
pub(crate) async fn analyze(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let permit = state.expensive()?;
    let mut fields = object_body(&state, raw, &headers, body, &["network_acls"]).await?;
    let rules = match fields.remove("network_acls") {
        Some(acls) => {
            crate::resources::rule_sets::rule_set_from_body(&acls, &state.inner.config.limits)?
        }
        None => live_rules(&state),
    };
    if rules.acls.len() > MAX_ANALYZED_RULES {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            Some("too_many_rules"),
            format!(
                "The analysis takes at most {MAX_ANALYZED_RULES} rules; this rule set has {}.",
                rules.acls.len()
            ),
        ));
    }
    // Dropped with this future when the client goes away: the analysis stops.
    let cancel = CancelOnDrop::default();
    let budget = state.inner.config.work.analysis_budget(cancel.flag());
    let rule_count = rules.acls.len();
    let (analysis, done) = tokio::task::spawn_blocking(move || {
        // The permit goes with the work: released when the analysis ends.
        let _permit = permit;
        netacl_analysis::analyze_within(&rules, &budget)
    })
    .await
    .map_err(|_| ApiError::internal())?;
    if let Some(stopped) = done.stopped {
        tracing::info!(
            tenant = %state.inner.tenant.id,
            rules = rule_count,
            work_units = done.units,
            stopped = stopped.as_str(),
            "analysis stopped before settling every rule"
        );
    }
    Ok(json_response(StatusCode::OK, &analysis.to_json()))
}

/// The `Netacl-Findings` value for the rule `id` of the live rule set: the findings that
/// concern it, `None` when there are none (or the rule is gone).
pub(crate) async fn findings_header(state: &AppState, id: &AclId) -> Option<HeaderValue> {
    let rules = live_rules(state);
    if rules.acls.len() > MAX_HEADER_RULES {
        return None;
    }
    let id = id.to_string();
    let budget = netacl_analysis::Budget::work(crate::http::work::FINDINGS_HEADER_WORK)
        .with_deadline(std::time::Instant::now() + state.inner.config.work.analysis_deadline);
    let summary = tokio::task::spawn_blocking(move || {
        netacl_analysis::analyze_within(&rules, &budget)
            .0
            .summary_for(&id, MAX_FINDINGS_HEADER)
    })
    .await
    .ok()??;
    HeaderValue::from_str(&summary).ok()
}

/// A property path under `prefix` (`changes[0].network_acl` + `rule.match` →
/// `changes[0].network_acl.rule.match`).
fn nested(prefix: &str, err: ValidationError) -> ValidationError {
    let path = if err.path.is_empty() {
        prefix.to_owned()
    } else {
        format!("{prefix}.{}", err.path)
    };
    ValidationError::new(path, err.reason)
}

fn member<'v>(
    change: &'v Map<String, Value>,
    name: &str,
    at: &str,
) -> Result<&'v Value, ValidationError> {
    change
        .get(name)
        .ok_or_else(|| ValidationError::new(at, format!("Missing required property: {name}")))
}

fn change_id(change: &Map<String, Value>, at: &str) -> Result<AclId, ApiError> {
    let value = member(change, "id", at)?;
    let Value::String(text) = value else {
        return Err(ValidationError::new(format!("{at}.id"), "Expected type string").into());
    };
    AclId::parse(text).ok_or_else(|| {
        ValidationError::new(
            format!("{at}.id"),
            "String does not match pattern ^acl_[1-9A-HJ-NP-Za-km-z]{22}$",
        )
        .into()
    })
}

/// Applies `changes` to `rules` in memory, in order. Created rules get the ids
/// `acl_1111111111111111111112`, `...3`, ... by their position among the changes (as the dry run
/// names rules given without id).
fn apply_changes(
    rules: &mut RuleSet,
    changes: &Value,
    limits: &netacl_model::Limits,
) -> Result<(), ApiError> {
    let Value::Array(changes) = changes else {
        return Err(ValidationError::new("changes", "Expected type array").into());
    };
    let now = Timestamp::from_unix_millis(0);
    for (index, change) in changes.iter().enumerate() {
        let at = format!("changes[{index}]");
        let Value::Object(change) = change else {
            return Err(ValidationError::new(at, "Expected type object").into());
        };
        let op = match member(change, "op", &at)? {
            Value::String(op) => op.as_str(),
            _ => {
                return Err(ValidationError::new(format!("{at}.op"), "Expected type string").into())
            }
        };
        let allowed: &[&str] = match op {
            "create" => &["op", "network_acl"],
            "replace" | "update" => &["op", "id", "network_acl"],
            "delete" => &["op", "id"],
            other => {
                return Err(ValidationError::new(
                    format!("{at}.op"),
                    format!("No enum match for: {other:?}"),
                )
                .into())
            }
        };
        if let Some(unknown) = change.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ValidationError::new(
                at,
                format!("Additional properties not allowed: {unknown}"),
            )
            .into());
        }
        let body_at = format!("{at}.network_acl");
        let position = |rules: &RuleSet, id: &AclId| {
            rules
                .acls
                .iter()
                .position(|a| a.id == *id)
                .ok_or_else(ApiError::no_such_network_acl)
        };
        match op {
            "create" => {
                let body = member(change, "network_acl", &at)?;
                let spec =
                    NetworkAclSpec::from_json(body, limits).map_err(|e| nested(&body_at, e))?;
                rules.acls.push(NetworkAcl {
                    id: AclId::from_random(index as u128 + 1),
                    spec,
                    created_at: now,
                    updated_at: now,
                });
            }
            "replace" => {
                let id = change_id(change, &at)?;
                let body = member(change, "network_acl", &at)?;
                let spec =
                    NetworkAclSpec::from_json(body, limits).map_err(|e| nested(&body_at, e))?;
                let i = position(rules, &id)?;
                rules.acls[i].spec = spec;
            }
            "update" => {
                let id = change_id(change, &at)?;
                let body = member(change, "network_acl", &at)?;
                let patch =
                    NetworkAclPatch::from_json(body, limits).map_err(|e| nested(&body_at, e))?;
                let i = position(rules, &id)?;
                rules.acls[i].spec = patch.apply(&rules.acls[i].spec);
            }
            _ => {
                let id = change_id(change, &at)?;
                let i = position(rules, &id)?;
                rules.acls.remove(i);
            }
        }
    }
    Ok(())
}

/// `POST /_netacl/v1/network-acls/preview`: `{"changes": [...], "requests": [...]?}` →
/// `{requests, changed, transitions, by_rule, examples}` (see `netacl_analysis::Preview`);
/// without `requests`, the union of the edges' traffic samples (`logs::sample`) is replayed and
/// the answer carries `"sample": {"edges", "requests"}` (no sample at all: 400
/// `no_traffic_sample`).
pub(crate) async fn preview(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let permit = state.expensive()?;
    let mut fields = object_body(&state, raw, &headers, body, &["changes", "requests"]).await?;
    let limits = state.inner.config.limits;
    let changes = fields
        .remove("changes")
        .ok_or_else(|| ValidationError::new("", "Missing required property: changes"))?;
    let mut rules = live_rules(&state);
    apply_changes(&mut rules, &changes, &limits)?;
    // The requests given, or the union of the edges' traffic samples.
    let (inputs, sample) = match fields.remove("requests") {
        Some(Value::Array(items)) => {
            let mut inputs = Vec::with_capacity(items.len());
            for (index, item) in items.into_iter().enumerate() {
                let at = || format!("requests[{index}]");
                let input: RequestInput = serde_json::from_value(item)
                    .map_err(|err| ValidationError::new(at(), err.to_string()))?;
                input
                    .to_request()
                    .map_err(|err| ValidationError::new(at(), err.to_string()))?;
                inputs.push(input);
            }
            (inputs, None)
        }
        Some(_) => return Err(ValidationError::new("requests", "Expected type array").into()),
        None => {
            let (inputs, edges) = crate::resources::logs::sample::edge_samples(&state);
            if inputs.is_empty() {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    Some("no_traffic_sample"),
                    "No edge has a traffic sample for this tenant yet (edges sample the requests \
                     they decide and report them every summary interval): give the requests to \
                     replay in requests.",
                ));
            }
            let replayed = inputs.len();
            (inputs, Some((edges, replayed)))
        }
    };
    let live = state.inner.tenant.policy();
    // Dropped with this future when the client goes away: the replay stops.
    let cancel = CancelOnDrop::default();
    let gone = cancel.flag();
    let preview = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let proposed = Policy::compile(&rules, &limits, live.managed_index()).map_err(|err| {
            ApiError::from(ValidationError::new(
                "changes",
                format!("Cannot compile: {err}"),
            ))
        })?;
        let mut comparison = netacl_analysis::Comparison::new(live.compiled(), proposed.compiled());
        for (n, input) in inputs.iter().enumerate() {
            if n % 1024 == 0 && gone.load(std::sync::atomic::Ordering::Relaxed) {
                // Nobody waits for the answer.
                return Err(ApiError::internal());
            }
            if let Ok(request) = input.to_request() {
                comparison.add(&request, || serde_json::to_value(input).unwrap_or_default());
            }
        }
        Ok::<_, ApiError>(comparison.finish())
    })
    .await
    .map_err(|_| ApiError::internal())??;
    let mut answer = preview.to_json();
    if let (Some((edges, requests)), Value::Object(members)) = (sample, &mut answer) {
        members.insert(
            "sample".to_owned(),
            serde_json::json!({"edges": edges, "requests": requests}),
        );
    }
    Ok(json_response(StatusCode::OK, &answer))
}

/// Adds `Netacl-Findings` to a write answer for rule `id` when findings concern it.
pub(crate) async fn with_findings(
    state: &AppState,
    id: &AclId,
    mut response: Response,
) -> Response {
    if let Some(value) = findings_header(state, id).await {
        response
            .headers_mut()
            .insert(http::HeaderName::from_static(FINDINGS_HEADER), value);
    }
    response
}

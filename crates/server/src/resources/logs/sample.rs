//! The edges' traffic samples, which the impact preview replays when it is given no `requests`.
//!
//! - An edge in this process hands its sample over on demand: [`LocalSamples`] holds the
//!   function that reads it (set by [`AdminService::set_edge_sample_source`]), shared by every
//!   tenant's configuration, asked with the tenant's id.
//! - A remote edge posts its sample (`POST /_netacl/v1/edge/sample`, scope
//!   `create:edge_summaries`, at most [`MAX_SAMPLE_REQUESTS`] requests, every member checked as
//!   a request object); each tenant keeps the last sample of each edge ([`PostedSamples`](crate::tenant::samples::PostedSamples): at
//!   most [`MAX_EDGES`](crate::tenant::samples::MAX_EDGES) edges, the one that posted least recently making room; samples older
//!   than [`SAMPLE_MAX_AGE`](crate::tenant::samples::SAMPLE_MAX_AGE) are not used). In memory only: a restart forgets them until the
//!   edges post again.
//!
//! [`AdminService::set_edge_sample_source`]: crate::AdminService::set_edge_sample_source
use std::sync::{Arc, PoisonError, RwLock};

use axum::body::Body;
use axum::extract::RawQuery;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use netacl_eval::RequestInput;
use serde_json::{json, Value};

use crate::auth::Principal;
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, CreateEdgeSummaries};
use crate::http::query::Query;
use crate::AppState;

/// The most requests one posted sample holds (and one edge's sample the server keeps).
pub(crate) const MAX_SAMPLE_REQUESTS: usize = 10_000;
/// The largest sample body, in bytes.
pub(crate) const SAMPLE_BODY_LIMIT: usize = 8 * 1024 * 1024;
/// Reads the sample of an edge running in this process for a tenant (by id); `None` when that
/// edge keeps none for it.
pub type EdgeSampleSource = Arc<dyn Fn(&str) -> Option<Vec<RequestInput>> + Send + Sync>;

/// Where the in-process edge's samples are read (one for the whole service).
#[derive(Clone, Default)]
pub(crate) struct LocalSamples(Arc<RwLock<Option<EdgeSampleSource>>>);

impl std::fmt::Debug for LocalSamples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalSamples")
    }
}

impl LocalSamples {
    pub(crate) fn set(&self, source: EdgeSampleSource) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(source);
    }

    /// The in-process edge's sample for `tenant`.
    pub(crate) fn get(&self, tenant: &str) -> Option<Vec<RequestInput>> {
        let source = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        source(tenant)
    }
}

/// The union of the edges' samples for the tenant of `state`: the requests and how many edges
/// contributed (an edge with an empty sample does not count).
pub(crate) fn edge_samples(state: &AppState) -> (Vec<RequestInput>, usize) {
    let tenant = &state.inner.tenant;
    let mut requests = Vec::new();
    let mut edges = 0;
    if let Some(local) = state.inner.config.local_samples.get(tenant.id.as_str()) {
        if !local.is_empty() {
            edges += 1;
            requests.extend(local);
        }
    }
    for sample in tenant.posted_samples().current() {
        if !sample.is_empty() {
            edges += 1;
            requests.extend(sample.iter().cloned());
        }
    }
    (requests, edges)
}

/// `POST /_netacl/v1/edge/sample`: `{"requests": [...]}` from a remote edge → `{"kept": N}`.
pub(crate) async fn post_sample(
    _: Authorized<CreateEdgeSummaries>,
    state: AppState,
    axum::Extension(principal): axum::Extension<Principal>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let value = crate::http::body::read_json_body(&headers, body, SAMPLE_BODY_LIMIT, None).await?;
    let requests = sample_of(value)?;
    let kept = requests.len();
    state
        .inner
        .tenant
        .posted_samples()
        .put(format!("remote:{}", principal.client_id()), requests);
    Ok(json_response(StatusCode::OK, &json!({ "kept": kept })))
}

/// The requests of a sample body, each checked as `netacl eval` checks a request line, with the
/// property path of the first fault.
fn sample_of(value: Value) -> Result<Vec<RequestInput>, ApiError> {
    let Value::Object(mut body) = value else {
        return Err(ApiError::invalid_body(
            "Payload validation error: 'Expected type object but found another type'.",
        ));
    };
    if let Some(unknown) = body.keys().find(|k| *k != "requests") {
        return Err(ApiError::invalid_body(format!(
            "Payload validation error: 'Additional properties not allowed: {unknown}'."
        )));
    }
    let Some(Value::Array(items)) = body.remove("requests") else {
        return Err(ApiError::invalid_body(
            "Payload validation error: 'Missing required property or not an array' on property requests.",
        ));
    };
    if items.len() > MAX_SAMPLE_REQUESTS {
        return Err(ApiError::invalid_body(format!(
            "Payload validation error: 'Array is too long ({}), maximum {MAX_SAMPLE_REQUESTS}' on property requests.",
            items.len()
        )));
    }
    let mut requests = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        requests.push(request_of(item, &format!("requests[{index}]"))?);
    }
    Ok(requests)
}

/// One request of a sample, checked as `netacl eval` checks a request line; a fault names
/// `property`.
pub(crate) fn request_of(item: Value, property: &str) -> Result<RequestInput, ApiError> {
    let fault = |err: String| {
        ApiError::invalid_body(format!(
            "Payload validation error: '{err}' on property {property}."
        ))
    };
    let input: RequestInput = serde_json::from_value(item).map_err(|err| fault(err.to_string()))?;
    input.to_request().map_err(|err| fault(err.to_string()))?;
    Ok(input)
}

//! Reporting an edge's per-rule `acls_summary` counts and its traffic sample to the admin
//! server it follows.
//!
//! - A single-tenant edge following a remote admin server (`--rules-url`) posts its summaries to
//!   `POST /_netacl/v1/edge/summaries` with a token of the edge's own client (client-credentials
//!   grant; the client needs `create:edge_summaries`, which the bootstrap client holds); the
//!   server records them in the tenant's logs. Its traffic sample goes to
//!   `POST /_netacl/v1/edge/sample` every summary interval (the newest [`MAX_POSTED_SAMPLE`]
//!   requests).
//! - A multi-tenant edge following a platform (`--platform-url`) holds only the operator token:
//!   it posts every tenant's summaries of an interval together to the operator API,
//!   `POST /_netacl/v1/tenants/edge/summaries` `{"edge", "tenants": {ID: [summaries]}}` (at most
//!   [`PLATFORM_BATCH`] summaries a request), and its shared sample, grouped by tenant, to
//!   `POST /_netacl/v1/tenants/edge/sample` `{"edge", "tenants": {ID: [requests]}}` (the newest
//!   [`MAX_POSTED_SAMPLE`] requests of all tenants together). `edge` names this edge
//!   ([`EdgeConfig::edge_name`](crate::EdgeConfig::edge_name), or `edge-` and 16 random hexadecimal digits drawn at start) so
//!   that the server keeps one sample per edge and tells the edges' reports apart. Only over
//!   `https://` or to loopback, as the tenants watch.
//!
//! Bounded: reports wait in a queue of [`QUEUE`] intervals; when the server cannot be reached a
//! batch is retried a few times, then dropped with a warning (the counts also went to the
//! edge's own log). Plain HTTP only where the rules source allows it (the same client, same
//! checks). Tokens are never logged.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::observe::metrics::SummarySink;
use crate::observe::sample::TrafficSample;
use crate::observe::tenant_counts::{
    TenantSummaries, TenantSummarySink, BUSY_CHECK, BUSY_REQUESTS,
};
use crate::origin::{is_loopback_url, OriginClient};
use crate::sources::source::RemoteRules;
use crate::sources::tenant_source::RemoteTenants;
use crate::tenants::TenantRouter;

/// Interval reports waiting to be sent at most.
const QUEUE: usize = 16;
/// Summaries per request (the server takes up to 1,000).
const BATCH: usize = 1_000;
/// Summaries per request to the platform (the server takes up to 10,000).
pub const PLATFORM_BATCH: usize = 5_000;
/// The operator API's summaries path.
const PLATFORM_SUMMARIES: &str = "/_netacl/v1/tenants/edge/summaries";
/// The operator API's sample path.
const PLATFORM_SAMPLE: &str = "/_netacl/v1/tenants/edge/sample";
/// Tries per batch.
const TRIES: u32 = 3;
/// The most requests of a sample posted at once (the server takes up to this many).
pub const MAX_POSTED_SAMPLE: usize = 10_000;
/// The longest answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// A reporter to the admin server `remote` names; `None` (logged) when its URL cannot be used.
fn reporter(remote: &RemoteRules, what: &str) -> Option<Reporter> {
    let client = match OriginClient::<Full<Bytes>>::new(
        &remote.url,
        &remote.trust,
        true,
        Duration::from_secs(3),
    ) {
        Ok(client) => client,
        Err(_) => {
            tracing::warn!(url = %remote.url, "edge {what} not reported: unusable URL");
            return None;
        }
    };
    let authority = remote
        .url
        .authority()
        .map(|a| a.as_str())
        .unwrap_or_default();
    let audience = remote
        .audience
        .clone()
        .unwrap_or_else(|| format!("https://{authority}/api/v2/"));
    Some(Reporter {
        client,
        credentials: Credentials::Client {
            client_id: remote.client_id.clone(),
            client_secret: remote.client_secret.clone(),
            audience,
            token: None,
        },
    })
}

/// A reporter to the platform `platform` names, with the operator token; `None` (logged) when
/// its URL cannot be used, or would carry the token in clear off loopback.
fn platform_reporter(platform: &RemoteTenants, what: &str) -> Option<Reporter> {
    let client = match OriginClient::<Full<Bytes>>::new(
        &platform.url,
        &platform.trust,
        true,
        Duration::from_secs(3),
    ) {
        Ok(client) if client.is_tls() || is_loopback_url(&platform.url) => client,
        _ => {
            tracing::warn!(url = %platform.url, "edge {what} not reported: unusable platform URL");
            return None;
        }
    };
    Some(Reporter {
        client,
        credentials: Credentials::Operator(platform.operator_token.clone()),
    })
}

/// One interval's posts: (path, body) each.
type Posts = Vec<(&'static str, Value)>;

/// Hands `posts` to the sending task (a full queue drops them, with a warning).
fn queue(sender: &mpsc::Sender<Posts>, posts: Posts) {
    if !posts.is_empty() && sender.try_send(posts).is_err() {
        tracing::warn!("edge summaries not reported: the queue to the admin server is full");
    }
}

/// A sink posting each interval's reports to the admin server `remote` names (see the module
/// docs); `None` (logged) when its URL cannot be used. Spawns the sending task.
pub(crate) fn remote_sink(remote: &RemoteRules) -> Option<SummarySink> {
    let reporter = reporter(remote, "summaries")?;
    let (sender, receiver) = mpsc::channel::<Posts>(QUEUE);
    tokio::spawn(reporter.run(receiver));
    Some(SummarySink::new(move |reports| {
        let posts = reports
            .chunks(BATCH)
            .map(|batch| ("/_netacl/v1/edge/summaries", json!({ "summaries": batch })))
            .collect();
        queue(&sender, posts);
    }))
}

/// The bodies of one interval's reports for the platform: `{"edge", "tenants": {ID: [...]}}`,
/// at most `batch` summaries each (a tenant with more is split over several).
fn platform_bodies(edge: &str, reports: &[TenantSummaries], batch: usize) -> Vec<Value> {
    let batch = batch.max(1);
    let mut bodies = Vec::new();
    let mut current: serde_json::Map<String, Value> = serde_json::Map::new();
    let mut in_current = 0;
    for report in reports {
        for chunk in report.summaries.chunks(batch) {
            if in_current + chunk.len() > batch && in_current > 0 {
                bodies.push(json!({"edge": edge, "tenants": std::mem::take(&mut current)}));
                in_current = 0;
            }
            let entry = current
                .entry(report.tenant.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(items) = entry {
                items.extend(chunk.iter().map(|s| json!(s)));
            }
            in_current += chunk.len();
        }
    }
    if in_current > 0 {
        bodies.push(json!({"edge": edge, "tenants": current}));
    }
    bodies
}

/// A sink posting each interval's reports of every tenant to the platform's operator API, as
/// edge `edge` (see the module docs); `None` (logged) when its URL cannot be used. Spawns the
/// sending task.
pub(crate) fn platform_sink(platform: &RemoteTenants, edge: String) -> Option<TenantSummarySink> {
    let reporter = platform_reporter(platform, "summaries")?;
    let (sender, receiver) = mpsc::channel::<Posts>(QUEUE);
    tokio::spawn(reporter.run(receiver));
    Some(TenantSummarySink::new(move |reports| {
        let posts = platform_bodies(&edge, &reports, PLATFORM_BATCH)
            .into_iter()
            .map(|body| (PLATFORM_SUMMARIES, body))
            .collect();
        queue(&sender, posts);
    }))
}

/// Posts the edge's traffic sample to the admin server `remote` names every `interval`
/// (`POST /_netacl/v1/edge/sample`, the newest [`MAX_POSTED_SAMPLE`] requests; nothing while
/// the sample is empty), with the same client as the summaries. One try per interval: the next
/// interval's sample replaces a lost one. `None` when the URL cannot be used.
pub(crate) fn spawn_sample_poster(
    remote: &RemoteRules,
    sample: Arc<TrafficSample>,
    interval: Duration,
) -> Option<tokio::task::JoinHandle<()>> {
    let reporter = reporter(remote, "sample")?;
    Some(spawn_poster(reporter, interval, move || {
        let mut requests = sample.requests();
        if requests.is_empty() {
            return None;
        }
        requests.truncate(MAX_POSTED_SAMPLE);
        Some(("/_netacl/v1/edge/sample", json!({ "requests": requests })))
    }))
}

/// The body of a multi-tenant edge's sample for the platform: the newest [`MAX_POSTED_SAMPLE`]
/// requests of the tenants `router` serves, grouped by tenant (newest first in each);
/// requests of a tenant no longer served are left out. `None` when there is none.
fn platform_sample(edge: &str, router: &TenantRouter, sample: &TrafficSample) -> Option<Value> {
    let keyed = sample.keyed_requests();
    if keyed.is_empty() {
        return None;
    }
    let ids: HashMap<u64, String> = router
        .tenants()
        .iter()
        .map(|t| (t.rule_counts().sample_key(), t.id().to_owned()))
        .collect();
    let mut tenants: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for (key, request) in keyed
        .iter()
        .filter(|(key, _)| ids.contains_key(key))
        .take(MAX_POSTED_SAMPLE)
    {
        if let Some(id) = ids.get(key) {
            tenants.entry(id.as_str()).or_default().push(json!(request));
        }
    }
    (!tenants.is_empty()).then(|| json!({"edge": edge, "tenants": tenants}))
}

/// Posts a multi-tenant edge's traffic sample to the platform every `interval` (see the module
/// docs and [`platform_sample`]), as edge `edge`, with the operator token. `None` when the
/// platform URL cannot be used.
pub(crate) fn spawn_platform_sample_poster(
    platform: &RemoteTenants,
    edge: String,
    router: Arc<TenantRouter>,
    sample: Arc<TrafficSample>,
    interval: Duration,
) -> Option<tokio::task::JoinHandle<()>> {
    let reporter = platform_reporter(platform, "sample")?;
    Some(spawn_poster(reporter, interval, move || {
        platform_sample(&edge, &router, &sample).map(|body| (PLATFORM_SAMPLE, body))
    }))
}

/// Every `interval`, posts what `next` gives (nothing when it gives `None`), one try each.
fn spawn_poster(
    mut reporter: Reporter,
    interval: Duration,
    next: impl Fn() -> Option<(&'static str, Value)> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(100)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let Some((path, body)) = next() else {
                continue;
            };
            if let Err(err) = reporter.post_json(path, &body).await {
                tracing::warn!(
                    origin = %reporter.client.origin(),
                    error = %err,
                    "edge traffic sample not reported this interval"
                );
            }
        }
    })
}

/// How a reporter authenticates.
enum Credentials {
    /// The edge's own client (client-credentials grant), its token cached.
    Client {
        client_id: String,
        client_secret: String,
        audience: String,
        token: Option<(String, Instant)>,
    },
    /// The platform's operator token.
    Operator(String),
}

struct Reporter {
    client: OriginClient<Full<Bytes>>,
    credentials: Credentials,
}

impl Reporter {
    async fn run(mut self, mut receiver: mpsc::Receiver<Posts>) {
        while let Some(posts) = receiver.recv().await {
            for (path, body) in posts {
                let mut sent = false;
                for attempt in 0..TRIES {
                    match self.post_json(path, &body).await {
                        Ok(()) => {
                            sent = true;
                            break;
                        }
                        Err(err) => {
                            tracing::debug!(attempt, error = %err, "edge summaries not sent yet");
                            tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                        }
                    }
                }
                if !sent {
                    tracing::warn!(
                        origin = %self.client.origin(),
                        path,
                        "edge summaries dropped: the admin server did not take them"
                    );
                }
            }
        }
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes), String> {
        let timeout = Duration::from_secs(10);
        let response = tokio::time::timeout(timeout, self.client.send(request))
            .await
            .map_err(|_| "no answer in time".to_owned())?
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = tokio::time::timeout(
            timeout,
            Limited::new(response.into_body(), MAX_ANSWER).collect(),
        )
        .await
        .map_err(|_| "body not received in time".to_owned())?
        .map_err(|e| e.to_string())?
        .to_bytes();
        Ok((status, body))
    }

    async fn token(&mut self) -> Result<String, String> {
        let (client_id, client_secret, audience) = match &self.credentials {
            Credentials::Operator(token) => return Ok(token.clone()),
            Credentials::Client {
                token: Some((token, until)),
                ..
            } if Instant::now() < *until => return Ok(token.clone()),
            Credentials::Client {
                client_id,
                client_secret,
                audience,
                ..
            } => (client_id.clone(), client_secret.clone(), audience.clone()),
        };
        let body = json!({
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client_secret,
            "audience": audience,
        });
        let request = Request::builder()
            .method(Method::POST)
            .uri("/oauth/token")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let (status, body) = self.send(request).await?;
        if status != StatusCode::OK {
            return Err(format!("/oauth/token answered {status}"));
        }
        let json: Value =
            serde_json::from_slice(&body).map_err(|_| "token answer is not JSON".to_owned())?;
        let token = json
            .get("access_token")
            .and_then(|v| v.as_str())
            .ok_or_else(|| "token answer without access_token".to_owned())?
            .to_owned();
        let lifetime = json
            .get("expires_in")
            .and_then(|v| v.as_u64())
            .unwrap_or(3600);
        let until = Instant::now() + Duration::from_secs(lifetime.saturating_mul(9) / 10);
        if let Credentials::Client { token: cached, .. } = &mut self.credentials {
            *cached = Some((token.clone(), until));
        }
        Ok(token)
    }

    async fn post_json(&mut self, path: &str, body: &Value) -> Result<(), String> {
        let token = self.token().await?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let (status, answer) = self.send(request).await?;
        match status {
            StatusCode::OK => Ok(()),
            StatusCode::UNAUTHORIZED => match &mut self.credentials {
                Credentials::Client { token, .. } => {
                    *token = None;
                    Err("the admin server refused the token".into())
                }
                Credentials::Operator(_) => Err("the platform refused the operator token".into()),
            },
            StatusCode::FORBIDDEN => {
                // Retrying will not help: say why once per batch.
                tracing::warn!(
                    path,
                    "edge report refused: the edge's client lacks create:edge_summaries"
                );
                Ok(())
            }
            other => Err(format!(
                "answered {other}: {}",
                String::from_utf8_lossy(&answer[..answer.len().min(200)])
            )),
        }
    }
}

// --- The multi-tenant edge's periodic task: every tenant's reports, and busy tenants spread ---

/// Takes every tenant's reports of the interval (see [`TenantRuleCounts::take_summaries`]) and
/// logs each report as an `acls_summary` event (target `netacl_edge::summary`, with the tenant).
pub(crate) fn collect_summaries(router: &TenantRouter, interval: Duration) -> Vec<TenantSummaries> {
    let mut out = Vec::new();
    for tenant in router.tenants() {
        let summaries = tenant.rule_counts().take_summaries(interval);
        if summaries.is_empty() {
            continue;
        }
        for s in &summaries {
            tracing::info!(
                target: "netacl_edge::summary",
                event = "acls_summary",
                tenant = tenant.id(),
                rule_id = %s.rule_id,
                action = %s.action,
                scope = %s.scope,
                policy_version = s.policy_version,
                interval_s = s.interval_s,
                evaluated = s.evaluated,
                matched = s.matched,
                connections_refused = s.connections_refused,
                "acls_summary"
            );
        }
        out.push(TenantSummaries {
            tenant: tenant.id().to_owned(),
            summaries,
        });
    }
    out
}

/// Spreads the counters of every tenant of `router` that became busy (see the module docs).
pub(crate) fn spread_busy_tenants(router: &TenantRouter) {
    for tenant in router.tenants() {
        tenant.rule_counts().spread_if_busy(BUSY_REQUESTS);
    }
}

/// Every `interval`, the reports of every tenant of `router` (see [`collect_summaries`]),
/// handed to `sink` when there are any, and every [`BUSY_CHECK`] the busy tenants' counters
/// spread, until the task is aborted.
pub(crate) fn spawn_tenant_summaries(
    router: Arc<TenantRouter>,
    interval: Duration,
    sink: Option<TenantSummarySink>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        let mut busy_check = tokio::time::interval(BUSY_CHECK);
        busy_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        busy_check.tick().await;
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    let reports = collect_summaries(&router, interval);
                    if let (Some(sink), false) = (&sink, reports.is_empty()) {
                        (sink.0)(reports);
                    }
                }
                _ = busy_check.tick() => spread_busy_tenants(&router),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use netacl_model::AclSummary;

    fn summary(n: u64) -> AclSummary {
        AclSummary {
            rule_id: "acl_1111111111111111111111".into(),
            action: "block".into(),
            scope: "tenant".into(),
            policy_version: 1,
            interval_s: 600,
            evaluated: n,
            matched: n,
            connections_refused: 0,
        }
    }

    fn report(tenant: &str, n: usize) -> TenantSummaries {
        TenantSummaries {
            tenant: tenant.into(),
            summaries: (0..n as u64).map(summary).collect(),
        }
    }

    #[test]
    fn platform_bodies_are_bounded_and_keyed_by_tenant() {
        let reports = [report("a", 3), report("b", 4), report("c", 1)];
        let bodies = platform_bodies("edge-1", &reports, 5);
        let sizes: Vec<Vec<(String, usize)>> = bodies
            .iter()
            .map(|b| {
                assert_eq!(b["edge"], "edge-1");
                b["tenants"]
                    .as_object()
                    .expect("tenants")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_array().expect("array").len()))
                    .collect()
            })
            .collect();
        assert_eq!(
            sizes,
            [
                vec![("a".to_owned(), 3)],
                vec![("b".to_owned(), 4), ("c".to_owned(), 1)]
            ]
        );
        // A tenant with more than a batch is split.
        let bodies = platform_bodies("edge-1", &[report("a", 12)], 5);
        let counts: Vec<usize> = bodies
            .iter()
            .map(|b| b["tenants"]["a"].as_array().expect("a").len())
            .collect();
        assert_eq!(counts, [5, 5, 2]);
        assert!(platform_bodies("edge-1", &[], 5).is_empty());
    }
}

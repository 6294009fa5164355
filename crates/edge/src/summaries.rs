//! Reporting the per-rule `acls_summary` counts of an edge that follows a remote admin server
//! (`--rules-url`) to that server: `POST /_netacl/v1/edge/summaries` with a token of the edge's
//! own client (client-credentials grant; the client needs `create:edge_summaries`, which the
//! bootstrap client holds). The server records them in the tenant's logs.
//!
//! The edge's traffic sample goes the same way, to `POST /_netacl/v1/edge/sample`, every
//! summary interval (the newest [`MAX_POSTED_SAMPLE`] requests).
//!
//! Bounded: reports wait in a queue of [`QUEUE`] intervals; when the server cannot be reached a
//! batch is retried a few times, then dropped with a warning (the counts also went to the
//! edge's own log and its Prometheus counters). Plain HTTP only where the rules source allows
//! it (the same client, same checks).
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use netacl_model::AclSummary;
use tokio::sync::mpsc;

use crate::metrics::SummarySink;
use crate::origin::OriginClient;
use crate::sample::TrafficSample;
use crate::source::RemoteRules;

/// Interval reports waiting to be sent at most.
const QUEUE: usize = 16;
/// Summaries per request (the server takes up to 1,000).
const BATCH: usize = 1_000;
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
        client_id: remote.client_id.clone(),
        client_secret: remote.client_secret.clone(),
        audience,
        token: None,
    })
}

/// A sink posting each interval's reports to the admin server `remote` names (see the module
/// docs); `None` (logged) when its URL cannot be used. Spawns the sending task.
pub(crate) fn remote_sink(remote: &RemoteRules) -> Option<SummarySink> {
    let reporter = reporter(remote, "summaries")?;
    let (sender, receiver) = mpsc::channel::<Vec<AclSummary>>(QUEUE);
    tokio::spawn(reporter.run(receiver));
    Some(SummarySink::new(move |reports| {
        if sender.try_send(reports).is_err() {
            tracing::warn!("edge summaries not reported: the queue to the admin server is full");
        }
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
    let mut reporter = reporter(remote, "sample")?;
    Some(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(100)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let mut requests = sample.requests();
            if requests.is_empty() {
                continue;
            }
            requests.truncate(MAX_POSTED_SAMPLE);
            let body = serde_json::json!({ "requests": requests });
            if let Err(err) = reporter.post_json("/_netacl/v1/edge/sample", &body).await {
                tracing::warn!(
                    origin = %reporter.client.origin(),
                    error = %err,
                    "edge traffic sample not reported this interval"
                );
            }
        }
    }))
}

struct Reporter {
    client: OriginClient<Full<Bytes>>,
    client_id: String,
    client_secret: String,
    audience: String,
    token: Option<(String, Instant)>,
}

impl Reporter {
    async fn run(mut self, mut receiver: mpsc::Receiver<Vec<AclSummary>>) {
        while let Some(reports) = receiver.recv().await {
            for batch in reports.chunks(BATCH) {
                let mut sent = false;
                for attempt in 0..TRIES {
                    match self.post(batch).await {
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
                        summaries = batch.len(),
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
        if let Some((token, until)) = &self.token {
            if Instant::now() < *until {
                return Ok(token.clone());
            }
        }
        let body = serde_json::json!({
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "audience": self.audience,
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
        let json: serde_json::Value =
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
        self.token = Some((token.clone(), until));
        Ok(token)
    }

    async fn post(&mut self, batch: &[AclSummary]) -> Result<(), String> {
        let body = serde_json::json!({ "summaries": batch });
        self.post_json("/_netacl/v1/edge/summaries", &body).await
    }

    async fn post_json(&mut self, path: &str, body: &serde_json::Value) -> Result<(), String> {
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
            StatusCode::UNAUTHORIZED => {
                self.token = None;
                Err("the admin server refused the token".into())
            }
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

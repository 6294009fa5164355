//! A remote edge enforcing every tenant of a platform: one subscription, the operator's tenants
//! watch (`GET /_netacl/v1/tenants/watch` of `netacl serve`, with the operator token), followed
//! into a [`TenantRouter`].
//!
//! Each answer names the tenants that changed since the previous one (added, removed, a new
//! version of their rules, lists or keys); they become one batch for [`TenantRouter::apply`],
//! which compiles those tenants only. A tenant whose version and domains the edge already holds
//! is not compiled again (a full snapshot after the server restarted, or from another node,
//! recompiles nothing that did not change). A full snapshot (`"full": true`, possibly over
//! several answers with `"more": true`) also removes the tenants it does not name. Rules that
//! do not validate or compile leave that tenant's policy in service; an unreachable or failing
//! server is retried with backoff (100 ms doubling to 5 s) while the last good state serves.
//!
//! The operator token opens every tenant's administration: it is sent only over `https://`
//! (the server's certificate verified against [`RemoteTenants::trust`]) or to a loopback
//! address; any other URL is refused when the source is created.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, StatusCode, Uri};
use http_body_util::Full;
use netacl_eval::{CompiledPolicy, ManagedIndex};
use netacl_model::{Limits, ManagedLists, RuleSet};
use netacl_secrets::transit::TransitKeyPair;
use netacl_tls::ClientTrust;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::origin::{is_loopback_url, OriginClient, OriginUrlError};
use crate::sources::source::{
    open_keys, parse_lists, send_bounded, KeysAnswer, SourceError, BACKOFF_MAX, BACKOFF_MIN,
};
use crate::tenants::{TenantChange, TenantChangeError, TenantRouter, TenantRules};

/// A platform (`netacl serve` with many tenants) to follow with the operator token
/// (`netacl edge --platform-url --operator-token-file`).
#[derive(Clone)]
#[non_exhaustive]
pub struct RemoteTenants {
    /// `https://HOST:PORT` of the admin server (`http://` on loopback only).
    pub url: Uri,
    /// Whom an `https://` server's certificate must chain to.
    pub trust: ClientTrust,
    /// The operator token (never logged).
    pub operator_token: String,
    /// How long one long poll may wait on the server (`timeout_ms`), 25 s by default.
    pub poll_timeout: Duration,
    /// How long the edge waits for the first complete snapshot before serving anyway, 10 s by
    /// default.
    pub initial_wait: Duration,
}

impl std::fmt::Debug for RemoteTenants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTenants")
            .field("url", &self.url)
            .field("trust", &self.trust)
            .field("operator_token", &"<redacted>")
            .field("poll_timeout", &self.poll_timeout)
            .field("initial_wait", &self.initial_wait)
            .finish()
    }
}

impl RemoteTenants {
    /// A platform source with the default timeouts, trusting the system's roots.
    pub fn new(url: Uri, operator_token: String) -> Self {
        Self {
            url,
            trust: ClientTrust::SystemRoots,
            operator_token,
            poll_timeout: Duration::from_secs(25),
            initial_wait: Duration::from_secs(10),
        }
    }
}

/// What the edge holds of one tenant.
struct Held {
    version: u64,
    domains: Vec<String>,
    /// The server's lists as last sent (what a later answer may send without items).
    lists: ManagedLists,
}

struct Follower {
    client: OriginClient<Full<Bytes>>,
    base: String,
    config: RemoteTenants,
    transit: TransitKeyPair,
    router: Arc<TenantRouter>,
    held: HashMap<String, Held>,
    /// The cursor of the last answer applied (`None`: ask for the full snapshot).
    cursor: Option<String>,
    /// The tenants named so far by a full snapshot spanning several answers.
    full_pass: Option<HashSet<String>>,
}

enum Answer {
    Unchanged,
    Unauthorized,
    Changed(serde_json::Value),
}

/// Whether an answer left the edge complete (the cursor moves) or asks for a new full pass.
struct Applied {
    complete: bool,
    resync: bool,
}

impl Follower {
    async fn poll(&self) -> Result<Answer, SourceError> {
        let timeout_ms = self.config.poll_timeout.as_millis();
        let mut uri = format!(
            "/_netacl/v1/tenants/watch?timeout_ms={timeout_ms}&lists=true&keys={}",
            self.transit.public_key().to_base64url()
        );
        if let Some(cursor) = &self.cursor {
            uri.push_str("&since=");
            uri.push_str(cursor);
        }
        let request = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.config.operator_token),
            )
            .body(Full::new(Bytes::new()))
            .map_err(|e| SourceError::Remote(e.to_string()))?;
        let (status, body) = send_bounded(
            &self.client,
            &self.base,
            request,
            self.config.poll_timeout + Duration::from_secs(30),
        )
        .await?;
        match status {
            StatusCode::NOT_MODIFIED => Ok(Answer::Unchanged),
            StatusCode::UNAUTHORIZED => Ok(Answer::Unauthorized),
            StatusCode::OK => serde_json::from_slice(&body)
                .map(Answer::Changed)
                .map_err(|e| SourceError::Json {
                    origin: format!("{}/_netacl/v1/tenants/watch", self.base),
                    reason: e.to_string(),
                }),
            other => Err(SourceError::Remote(format!(
                "{}: tenants watch answered {other}",
                self.base
            ))),
        }
    }

    /// Turns one answer into one batch and applies it (compiling off the async threads).
    async fn apply(&mut self, answer: serde_json::Value) -> Result<Applied, SourceError> {
        let origin = format!("{}/_netacl/v1/tenants/watch", self.base);
        let invalid = |what: &str| SourceError::Remote(format!("{origin}: {what}"));
        let full = answer
            .get("full")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let more = answer
            .get("more")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let cursor = answer
            .get("cursor")
            .and_then(|v| v.as_str())
            .ok_or_else(|| invalid("answer without a cursor"))?
            .to_owned();
        let tenants = answer
            .get("tenants")
            .and_then(|v| v.as_array())
            .ok_or_else(|| invalid("answer without tenants"))?;
        if let Some(reason) = answer
            .get("network_acl_keys_withheld")
            .and_then(|v| v.as_str())
        {
            tracing::warn!(source = %self.base, reason, "the platform withheld network ACL key material (plain HTTP off loopback)");
        }
        if full && self.full_pass.is_none() {
            self.full_pass = Some(HashSet::new());
        }
        let mut resync = false;
        let mut changes = Vec::new();
        let mut pending: HashMap<String, Held> = HashMap::new();
        for (i, tenant) in tenants.iter().enumerate() {
            let Some(id) = tenant.get("tenant").and_then(|v| v.as_str()) else {
                return Err(invalid(&format!("tenants[{i}]: no tenant id")));
            };
            if let Some(seen) = &mut self.full_pass {
                seen.insert(id.to_owned());
            }
            let domains: Vec<String> = tenant
                .get("domains")
                .and_then(|v| v.as_array())
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|d| d.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let Some(version) = tenant.get("version").and_then(|v| v.as_u64()) else {
                return Err(invalid(&format!("tenants[{i}]: no version")));
            };
            let held = self.held.get(id);
            if held.is_some_and(|h| h.version == version && h.domains == domains) {
                continue;
            }
            let tenant_origin = format!("{origin} (tenant {id})");
            let rules = match tenant
                .get("network_acls")
                .ok_or_else(|| invalid(&format!("tenants[{i}]: no network_acls")))
                .and_then(|acls| {
                    RuleSet::from_json(acls, version, &Limits::default()).map_err(|source| {
                        SourceError::Invalid {
                            origin: tenant_origin.clone(),
                            source,
                        }
                    })
                }) {
                Ok(rules) => rules,
                Err(err) => {
                    tracing::error!(tenant = id, error = %err, "tenant's rules rejected; its policy in service stays");
                    continue;
                }
            };
            let empty = ManagedLists::new();
            let lists = match tenant.get("managed_lists") {
                Some(value) => {
                    match parse_lists(value, held.map_or(&empty, |h| &h.lists), &tenant_origin) {
                        Ok(lists) => lists,
                        Err(err) => {
                            // Items missing for a list this edge does not hold: ask again for
                            // everything.
                            tracing::warn!(tenant = id, error = %err, "tenant's lists incomplete; asking for a full snapshot");
                            resync = true;
                            continue;
                        }
                    }
                }
                None => ManagedLists::new(),
            };
            let keys = match open_keys(tenant, &self.transit, &tenant_origin)? {
                KeysAnswer::Keys(keys) => Some(keys),
                KeysAnswer::Withheld(_) | KeysAnswer::None => None,
            };
            let managed = if lists.is_empty() {
                Arc::clone(CompiledPolicy::empty().managed_index())
            } else {
                let lists = lists.clone();
                tokio::task::spawn_blocking(move || Arc::new(ManagedIndex::build(&lists)))
                    .await
                    .map_err(|e| SourceError::Remote(e.to_string()))?
            };
            changes.push(TenantChange::Put {
                id: id.to_owned(),
                domains: domains.clone(),
                rules: TenantRules::Compile {
                    rules,
                    managed,
                    keys,
                },
            });
            pending.insert(
                id.to_owned(),
                Held {
                    version,
                    domains,
                    lists,
                },
            );
        }
        let mut removed: Vec<String> = answer
            .get("removed")
            .and_then(|v| v.as_array())
            .map(|items| {
                items
                    .iter()
                    .filter_map(|d| d.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if full && !more {
            if let Some(seen) = self.full_pass.take() {
                removed.extend(self.held.keys().filter(|id| !seen.contains(*id)).cloned());
            }
        }
        for id in &removed {
            changes.push(TenantChange::remove(id));
        }
        let router = Arc::clone(&self.router);
        let count = changes.len();
        let report = tokio::task::spawn_blocking(move || router.apply(changes))
            .await
            .map_err(|e| SourceError::Remote(e.to_string()))?;
        for failed in &report.failed {
            tracing::error!(error = %failed, "a tenant's change was not applied; its policy in service stays");
            let tenant = match failed {
                TenantChangeError::Compile { tenant, .. }
                | TenantChangeError::InvalidDomain { tenant, .. }
                | TenantChangeError::DomainTaken { tenant, .. } => tenant,
            };
            pending.remove(tenant);
        }
        for id in &removed {
            self.held.remove(id);
        }
        self.held.extend(pending);
        if count > 0 {
            tracing::info!(
                compiled = report.compiled,
                added = report.added,
                removed = report.removed,
                failed = report.failed.len(),
                tenants = self.held.len(),
                "tenants updated"
            );
        }
        self.cursor = Some(cursor);
        Ok(Applied {
            complete: !more,
            resync,
        })
    }
}

/// Follows a platform's tenants watch into `router` in a background task (see the module docs).
/// The returned receiver counts the complete states applied (0 until the first full snapshot
/// is in).
pub fn spawn_tenant_source(
    router: Arc<TenantRouter>,
    config: RemoteTenants,
) -> Result<(JoinHandle<()>, watch::Receiver<u64>), SourceError> {
    let url = &config.url;
    let client = OriginClient::new(url, &config.trust, true, Duration::from_secs(3)).map_err(
        |err| match err {
            OriginUrlError::Shape => SourceError::InvalidUrl(url.to_string()),
            OriginUrlError::Tls(err) => SourceError::Tls(err),
        },
    )?;
    if !client.is_tls() && !is_loopback_url(url) {
        return Err(SourceError::InsecurePlatformUrl(client.origin()));
    }
    let mut follower = Follower {
        base: client.origin(),
        client,
        config,
        transit: TransitKeyPair::generate(),
        router,
        held: HashMap::new(),
        cursor: None,
        full_pass: None,
    };
    let (applied, applied_rx) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        let mut backoff = BACKOFF_MIN;
        let mut in_sync = false;
        loop {
            match follower.poll().await {
                Ok(Answer::Unchanged) => {}
                Ok(Answer::Changed(answer)) => match follower.apply(answer).await {
                    Ok(outcome) => {
                        if outcome.resync {
                            follower.cursor = None;
                            follower.full_pass = None;
                        } else if outcome.complete {
                            applied.send_modify(|n| *n += 1);
                        }
                    }
                    Err(err) => {
                        tracing::error!(error = %err, retry_in = ?backoff, "tenants watch answer rejected; the tenants in service stay");
                        follower.cursor = None;
                        follower.full_pass = None;
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                        continue;
                    }
                },
                Ok(Answer::Unauthorized) => {
                    tracing::warn!(source = %follower.base, retry_in = ?backoff, "the platform refused the operator token");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
                Err(err) => {
                    if in_sync {
                        tracing::warn!(error = %err, retry_in = ?backoff, "platform unavailable; enforcing the last tenants");
                    }
                    in_sync = false;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            }
            in_sync = true;
            backoff = BACKOFF_MIN;
        }
    });
    Ok((task, applied_rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(url: &'static str) -> Result<(), SourceError> {
        let router = Arc::new(TenantRouter::new());
        spawn_tenant_source(
            router,
            RemoteTenants::new(Uri::from_static(url), "operator-token".into()),
        )
        .map(|(task, _)| task.abort())
    }

    #[tokio::test]
    async fn the_operator_token_goes_only_over_https_or_to_loopback() {
        source("http://127.0.0.1:1").expect("loopback");
        source("http://localhost:1").expect("loopback by name");
        let err = source("http://10.1.2.3:8080").expect_err("plain HTTP off loopback");
        assert!(matches!(err, SourceError::InsecurePlatformUrl(_)), "{err}");
        assert!(!err.to_string().contains("operator-token"), "{err}");
        assert!(matches!(
            source("ftp://example.com"),
            Err(SourceError::InvalidUrl(_))
        ));
    }

    #[test]
    fn debug_output_never_shows_the_token() {
        let shown = format!(
            "{:?}",
            RemoteTenants::new(Uri::from_static("https://p.example"), "s3cr3t".into())
        );
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
}

//! Where an edge's rules come from when it does not share an engine with `netacl serve`: a rule
//! file watched for changes, or a remote `netacl serve` followed through its watch long-poll.
//!
//! Both keep the last good policy when something goes wrong: a rule file that does not parse,
//! validate or compile is logged and ignored until it changes again; an admin server that is
//! unreachable or answers errors is retried with backoff (100 ms doubling to 5 s) while the
//! edge keeps enforcing what it has.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{header, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use netacl_model::{parse_json, Limits, RuleSet, MAX_NESTING_DEPTH};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::enforce::Enforcer;

/// Largest rule-set document accepted (file or remote), 512 MiB.
pub const MAX_RULES_BYTES: usize = 512 << 20;

/// Why rules could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The rule file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The document is not JSON.
    #[error("{origin}: not JSON: {reason}")]
    Json {
        /// File path or URL.
        origin: String,
        /// The parser's message.
        reason: String,
    },
    /// The rules do not validate.
    #[error("{origin}: {source}")]
    Invalid {
        /// File path or URL.
        origin: String,
        /// The validation error, with the property path.
        #[source]
        source: netacl_model::ValidationError,
    },
    /// The rules do not compile.
    #[error("{origin}: {source}")]
    Compile {
        /// File path or URL.
        origin: String,
        /// The compiler's error.
        #[source]
        source: netacl_eval::CompileError,
    },
    /// The rules URL is not `http://HOST[:PORT]`.
    #[error("invalid rules URL {0:?}: expected http://HOST[:PORT]")]
    InvalidUrl(String),
    /// The admin server could not be reached or answered something unexpected.
    #[error("{0}")]
    Remote(String),
}

fn parse_rules(bytes: &[u8], version: u64, origin: &str) -> Result<RuleSet, SourceError> {
    let value = parse_json(bytes, MAX_NESTING_DEPTH).map_err(|e| SourceError::Json {
        origin: origin.to_owned(),
        reason: e.to_string(),
    })?;
    RuleSet::from_json(&value, version, &Limits::default()).map_err(|source| SourceError::Invalid {
        origin: origin.to_owned(),
        source,
    })
}

/// Compiles and installs `rules` off the async threads (compiling a big set takes a while).
async fn install(
    enforcer: &Arc<Enforcer>,
    rules: RuleSet,
    origin: &str,
) -> Result<(), SourceError> {
    let enforcer = enforcer.clone();
    let joined = tokio::task::spawn_blocking(move || enforcer.apply_rules(&rules)).await;
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(SourceError::Compile {
            origin: origin.to_owned(),
            source,
        }),
        Err(err) => Err(SourceError::Remote(format!("compiling {origin}: {err}"))),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(&meta),
    })
}

async fn load_file(
    enforcer: &Arc<Enforcer>,
    path: &Path,
    version: u64,
) -> Result<usize, SourceError> {
    let origin = path.display().to_string();
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|source| SourceError::Read {
            path: path.to_owned(),
            source,
        })?;
    let rules = parse_rules(&bytes, version, &origin)?;
    let count = rules.acls.len();
    install(enforcer, rules, &origin).await?;
    Ok(count)
}

/// Loads `path` now (an error here is returned: an edge must not start without its rules),
/// then polls its mtime, length and inode every `interval` and reloads it when they change.
/// Each successful load gets the next version (1, 2, ...).
pub async fn spawn_file_source(
    enforcer: Arc<Enforcer>,
    path: PathBuf,
    interval: Duration,
) -> Result<JoinHandle<()>, SourceError> {
    let mut seen = stamp(&path);
    let mut version = 1;
    let count = load_file(&enforcer, &path, version).await?;
    tracing::info!(path = %path.display(), rules = count, version, "rules loaded");
    Ok(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let now = stamp(&path);
            if now == seen {
                continue;
            }
            seen = now;
            match load_file(&enforcer, &path, version + 1).await {
                Ok(count) => {
                    version += 1;
                    tracing::info!(path = %path.display(), rules = count, version, "rules reloaded");
                }
                Err(err) => {
                    enforcer.metrics().record_rule_source_error();
                    tracing::error!(error = %err, "rule file not reloaded; the previous rules stay in force");
                }
            }
        }
    }))
}

/// A remote `netacl serve` to follow (`--rules-url`, `--client-id`, `--client-secret`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RemoteRules {
    /// `http://HOST:PORT` of the admin server.
    pub url: Uri,
    /// Client id (client-credentials grant).
    pub client_id: String,
    /// Client secret.
    pub client_secret: String,
    /// The token audience; `https://HOST:PORT/api/v2/` of `url` by default.
    pub audience: Option<String>,
    /// How long one long poll may wait on the server (`timeout_ms`), 25 s by default.
    pub poll_timeout: Duration,
    /// How long [`start_edge`](crate::start_edge) waits for the first rule set before it starts
    /// serving anyway (with no rules, logging an error), 10 s by default.
    pub initial_wait: Duration,
}

impl RemoteRules {
    /// A remote source with the default audience and poll timeout.
    pub fn new(url: Uri, client_id: String, client_secret: String) -> Self {
        Self {
            url,
            client_id,
            client_secret,
            audience: None,
            poll_timeout: Duration::from_secs(25),
            initial_wait: Duration::from_secs(10),
        }
    }
}

struct Token {
    value: String,
    /// Refresh a little before the server's expiry.
    refresh_at: Instant,
}

struct RemoteClient {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    config: RemoteRules,
    audience: String,
}

enum Poll {
    Changed(RuleSet),
    Unchanged,
    Unauthorized,
}

impl RemoteClient {
    fn new(config: RemoteRules) -> Result<Self, SourceError> {
        let url = &config.url;
        let authority = match (url.scheme_str(), url.authority()) {
            (Some("http"), Some(authority)) => authority.as_str().to_owned(),
            _ => return Err(SourceError::InvalidUrl(url.to_string())),
        };
        let audience = config
            .audience
            .clone()
            .unwrap_or_else(|| format!("https://{authority}/api/v2/"));
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(3)));
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            base: format!("http://{authority}"),
            config,
            audience,
        })
    }

    async fn send(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), SourceError> {
        let response = tokio::time::timeout(timeout, self.client.request(request))
            .await
            .map_err(|_| {
                SourceError::Remote(format!("{}: no answer within {timeout:?}", self.base))
            })?
            .map_err(|e| SourceError::Remote(format!("{}: {e}", self.base)))?;
        let status = response.status();
        let body = tokio::time::timeout(
            timeout,
            Limited::new(response.into_body(), MAX_RULES_BYTES).collect(),
        )
        .await
        .map_err(|_| SourceError::Remote(format!("{}: body not received in time", self.base)))?
        .map_err(|e| SourceError::Remote(format!("{}: reading the body: {e}", self.base)))?
        .to_bytes();
        Ok((status, body))
    }

    async fn fetch_token(&self) -> Result<Token, SourceError> {
        let body = serde_json::json!({
            "grant_type": "client_credentials",
            "client_id": self.config.client_id,
            "client_secret": self.config.client_secret,
            "audience": self.audience,
        });
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/oauth/token", self.base))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| SourceError::Remote(e.to_string()))?;
        let (status, body) = self.send(request, Duration::from_secs(10)).await?;
        if status != StatusCode::OK {
            return Err(SourceError::Remote(format!(
                "{}/oauth/token answered {status}",
                self.base
            )));
        }
        let json: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| SourceError::Remote(format!("token response is not JSON: {e}")))?;
        let value = json
            .get("access_token")
            .and_then(|v| v.as_str())
            .ok_or_else(|| SourceError::Remote("token response without access_token".into()))?
            .to_owned();
        let expires_in = json
            .get("expires_in")
            .and_then(|v| v.as_u64())
            .unwrap_or(3600);
        // Refresh at 90% of the lifetime (at least 1 s ahead).
        let lifetime = Duration::from_secs(expires_in);
        let refresh_after = lifetime.saturating_sub((lifetime / 10).max(Duration::from_secs(1)));
        Ok(Token {
            value,
            refresh_at: Instant::now() + refresh_after,
        })
    }

    async fn poll(&self, token: &str, since: Option<u64>) -> Result<Poll, SourceError> {
        let timeout_ms = self.config.poll_timeout.as_millis();
        let uri = match since {
            Some(v) => format!(
                "{}/_netacl/v1/network-acls/watch?since={v}&timeout_ms={timeout_ms}",
                self.base
            ),
            None => format!(
                "{}/_netacl/v1/network-acls/watch?timeout_ms={timeout_ms}",
                self.base
            ),
        };
        let request = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| SourceError::Remote(e.to_string()))?;
        let (status, body) = self
            .send(request, self.config.poll_timeout + Duration::from_secs(10))
            .await?;
        match status {
            StatusCode::NOT_MODIFIED => Ok(Poll::Unchanged),
            StatusCode::UNAUTHORIZED => Ok(Poll::Unauthorized),
            StatusCode::OK => {
                let origin = format!("{}/_netacl/v1/network-acls/watch", self.base);
                let json: serde_json::Value =
                    serde_json::from_slice(&body).map_err(|e| SourceError::Json {
                        origin: origin.clone(),
                        reason: e.to_string(),
                    })?;
                let version = json
                    .get("version")
                    .and_then(|v| v.as_u64())
                    .ok_or_else(|| {
                        SourceError::Remote(format!("{origin}: answer without a version"))
                    })?;
                let acls = json.get("network_acls").ok_or_else(|| {
                    SourceError::Remote(format!("{origin}: answer without network_acls"))
                })?;
                let rules = RuleSet::from_json(acls, version, &Limits::default())
                    .map_err(|source| SourceError::Invalid { origin, source })?;
                Ok(Poll::Changed(rules))
            }
            other => Err(SourceError::Remote(format!(
                "{}: watch answered {other}",
                self.base
            ))),
        }
    }
}

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Follows a remote admin server's watch long-poll in a background task: every new version is
/// compiled and swapped in (on a compile or validation error the previous rules stay and the
/// version is skipped); failures are retried with backoff; the token is fetched again before it
/// expires and whenever the server answers 401.
///
/// The returned receiver holds the version last installed (`None` until the first one).
pub fn spawn_remote_source(
    enforcer: Arc<Enforcer>,
    config: RemoteRules,
) -> Result<(JoinHandle<()>, watch::Receiver<Option<u64>>), SourceError> {
    let remote = RemoteClient::new(config)?;
    let (installed, installed_rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        let mut token: Option<Token> = None;
        let mut since: Option<u64> = None;
        let mut backoff = BACKOFF_MIN;
        let mut refused_before = false;
        loop {
            let result = async {
                let fresh = token
                    .as_ref()
                    .is_some_and(|t| Instant::now() < t.refresh_at);
                if !fresh {
                    token = Some(remote.fetch_token().await?);
                }
                let value = token.as_ref().map(|t| t.value.clone()).unwrap_or_default();
                remote.poll(&value, since).await
            }
            .await;
            match result {
                Ok(Poll::Changed(rules)) => {
                    let version = rules.version;
                    let count = rules.acls.len();
                    since = Some(version);
                    match install(&enforcer, rules, &remote.base).await {
                        Ok(()) => {
                            installed.send_replace(Some(version));
                            tracing::info!(version, rules = count, source = %remote.base, "rules updated");
                        }
                        Err(err) => {
                            enforcer.metrics().record_rule_source_error();
                            tracing::error!(error = %err, version, "remote rules not installed; the previous rules stay in force");
                        }
                    }
                }
                Ok(Poll::Unchanged) => {}
                Ok(Poll::Unauthorized) => {
                    // The token was revoked or expired early: get a new one; back off if the
                    // new one is refused too.
                    token = None;
                    if !refused_before {
                        refused_before = true;
                        continue;
                    }
                    enforcer.metrics().record_rule_source_error();
                    tracing::warn!(source = %remote.base, "the admin server refused the token");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
                Err(err) => {
                    enforcer.metrics().record_rule_source_error();
                    if matches!(err, SourceError::Invalid { .. } | SourceError::Json { .. }) {
                        tracing::error!(error = %err, "remote rules rejected; the previous rules stay in force");
                    } else {
                        tracing::warn!(error = %err, retry_in = ?backoff, "admin server unavailable; enforcing the last rules");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            }
            refused_before = false;
            backoff = BACKOFF_MIN;
        }
    });
    Ok((task, installed_rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_plain_http() {
        let bad = RemoteRules::new(
            Uri::from_static("https://example.com"),
            "id".into(),
            "secret".into(),
        );
        assert!(matches!(
            RemoteClient::new(bad),
            Err(SourceError::InvalidUrl(_))
        ));
        let good = RemoteRules::new(
            Uri::from_static("http://127.0.0.1:8080"),
            "id".into(),
            "secret".into(),
        );
        let client = RemoteClient::new(good).unwrap();
        assert_eq!(client.audience, "https://127.0.0.1:8080/api/v2/");
    }

    #[test]
    fn bad_documents_are_errors() {
        assert!(matches!(
            parse_rules(b"{", 1, "f"),
            Err(SourceError::Json { .. })
        ));
        assert!(matches!(
            parse_rules(b"[{\"id\": 1}]", 1, "f"),
            Err(SourceError::Invalid { .. })
        ));
        assert_eq!(parse_rules(b"[]", 7, "f").unwrap().version, 7);
        let deep = format!("{}{}", "[".repeat(50_000), "]".repeat(50_000));
        match parse_rules(deep.as_bytes(), 1, "f") {
            Err(SourceError::Json { reason, .. }) => assert_eq!(
                reason,
                "Nested deeper than the limit of 32 levels of arrays and objects"
            ),
            other => panic!("{other:?}"),
        }
    }
}

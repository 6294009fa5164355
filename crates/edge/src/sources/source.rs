//! Where an edge's rules come from when it does not share an engine with `netacl serve`: a rule
//! file watched for changes, or a remote `netacl serve` followed through its watch long-poll.
//!
//! Both keep the last good policy when something goes wrong: a rule file that does not parse,
//! validate or compile is logged and ignored until it changes again; an admin server that is
//! unreachable or answers errors is retried with backoff (100 ms doubling to 5 s) while the
//! edge keeps enforcing what it has.
//!
//! The admin server is reached over `https://` (its certificate verified against
//! [`RemoteRules::trust`]: the system's roots or one CA file) or, since the client secret
//! travels with every token request, over plain `http://` only on a loopback address, unless
//! [`RemoteRules::allow_insecure_http`] says otherwise.
//!
//! The remote source also follows the server's managed lists: each poll names the lists the
//! edge holds (`lists=NAME:DIGEST,...`), the answer carries every list in force on the server,
//! with its items only where the digest differs, so a list of a million entries crosses the
//! network when it changes, not with every rule change. A server older than this edge refuses
//! the parameter (400): the edge then polls without it and gets no list from that server.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use netacl_model::{
    parse_json, Limits, ManagedList, ManagedListName, ManagedLists, RuleSet, MAX_NESTING_DEPTH,
};
use netacl_tls::ClientTrust;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::enforce::Enforcer;
use crate::file_stamp::FileStamp;
use crate::origin::{is_loopback_url, OriginClient, OriginUrlError};
use crate::signals::httpsig::SigningKeys;
use crate::sources::policy_sources::PolicySources;
pub use crate::sources::source_error::SourceError;
use netacl_secrets::transit::TransitKeyPair;
use netacl_secrets::SecretContext;

/// Largest rule-set document accepted (file or remote), 512 MiB.
pub const MAX_RULES_BYTES: usize = 512 << 20;

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

async fn load_file(
    inputs: &PolicySources,
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
    inputs.set_rules(rules, &origin).await?;
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
    let inputs = Arc::new(PolicySources::new(enforcer, ManagedLists::new()));
    spawn_file_source_with(inputs, path, interval).await
}

/// [`spawn_file_source`] installing through `inputs` (with the edge's managed lists).
pub async fn spawn_file_source_with(
    inputs: Arc<PolicySources>,
    path: PathBuf,
    interval: Duration,
) -> Result<JoinHandle<()>, SourceError> {
    let enforcer = Arc::clone(inputs.enforcer());
    let mut seen = FileStamp::of(&path).ok();
    let mut version = 1;
    let count = load_file(&inputs, &path, version).await?;
    tracing::info!(path = %path.display(), rules = count, version, "rules loaded");
    Ok(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let now = FileStamp::of(&path).ok();
            if now == seen {
                continue;
            }
            seen = now;
            match load_file(&inputs, &path, version + 1).await {
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
#[derive(Clone)]
#[non_exhaustive]
pub struct RemoteRules {
    /// `https://HOST:PORT` of the admin server (`http://` on loopback, or with
    /// `allow_insecure_http`).
    pub url: Uri,
    /// Whom an `https://` admin server's certificate must chain to: the system's roots
    /// (default) or one CA file (`--rules-ca`).
    pub trust: ClientTrust,
    /// Send the client secret to a plain-HTTP URL that is not loopback
    /// (`--allow-insecure-rules-url`); `false` by default: such a URL is refused.
    pub allow_insecure_http: bool,
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

impl std::fmt::Debug for RemoteRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("RemoteRules")
            .field("url", &self.url)
            .field("trust", &self.trust)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("audience", &self.audience)
            .field("poll_timeout", &self.poll_timeout)
            .field("initial_wait", &self.initial_wait)
            .finish()
    }
}

impl RemoteRules {
    /// A remote source with the default audience and poll timeout, trusting the system's
    /// roots, refusing plain HTTP off loopback.
    pub fn new(url: Uri, client_id: String, client_secret: String) -> Self {
        Self {
            url,
            trust: ClientTrust::SystemRoots,
            allow_insecure_http: false,
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
    client: OriginClient<Full<Bytes>>,
    base: String,
    config: RemoteRules,
    audience: String,
    /// This process's key pair: the server seals network ACL key material to its public half.
    transit: TransitKeyPair,
}

enum Poll {
    /// A new rule set, the server's managed lists when it sent them, and the network ACL keys.
    Changed(RuleSet, Option<ManagedLists>, KeysAnswer),
    Unchanged,
    Unauthorized,
    /// The server refused the `lists` parameter (a server older than this edge).
    ListsRefused,
    /// The server refused the `keys` parameter (a server older than this edge).
    KeysRefused,
}

/// What a watch answer says about network ACL key material.
pub(crate) enum KeysAnswer {
    /// Not asked, or the answer has nothing about keys.
    None,
    /// The server withheld it (`scope`: the client lacks `read:network_acl_key_material`;
    /// `transport`: plain HTTP off loopback).
    Withheld(String),
    /// The keys live rules name, opened with this process's key pair.
    Keys(Arc<SigningKeys>),
}

/// The `network_acl_keys` of a watch answer, opened: `(id, sealed)` pairs, each bound to the
/// answer's tenant and the key id. A key that does not open is left out (its signal will be
/// missing) and logged by id.
pub(crate) fn open_keys(
    json: &serde_json::Value,
    transit: &TransitKeyPair,
    origin: &str,
) -> Result<KeysAnswer, SourceError> {
    if let Some(reason) = json.get("network_acl_keys_withheld") {
        return Ok(KeysAnswer::Withheld(
            reason.as_str().unwrap_or("unknown").to_owned(),
        ));
    }
    let Some(entries) = json.get("network_acl_keys") else {
        return Ok(KeysAnswer::None);
    };
    let invalid =
        |reason: String| SourceError::Remote(format!("{origin}: network_acl_keys: {reason}"));
    let tenant = json
        .get("tenant")
        .and_then(|t| t.as_str())
        .ok_or_else(|| invalid("answer without tenant".into()))?;
    let entries = entries
        .as_array()
        .ok_or_else(|| invalid("not an array".into()))?;
    let mut opened = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let (Some(id), Some(sealed)) = (
            entry.get("id").and_then(|v| v.as_str()),
            entry.get("sealed").and_then(|v| v.as_str()),
        ) else {
            return Err(invalid(format!("[{i}]: expected id and sealed")));
        };
        let context = SecretContext::new(tenant, "network_acl_key", id);
        match transit.open(&context, sealed) {
            Ok(material) => opened.push((id.to_owned(), material)),
            Err(err) => {
                tracing::error!(key_id = id, error = %err, source = origin, "network ACL key material does not open: requests signed with this key will count as unsigned");
            }
        }
    }
    Ok(KeysAnswer::Keys(Arc::new(SigningKeys::new(
        opened.iter().map(|(id, m)| (id.as_str(), m.expose())),
    ))))
}

/// `NAME:DIGEST,...` of the lists held.
fn held_param(held: &ManagedLists) -> String {
    held.iter()
        .map(|(name, list)| format!("{name}:{}", list.digest()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The `managed_lists` of a watch answer: every list in force on the server; one without
/// `items` is one the edge holds with that digest.
pub(crate) fn parse_lists(
    value: &serde_json::Value,
    held: &ManagedLists,
    origin: &str,
) -> Result<ManagedLists, SourceError> {
    let invalid =
        |reason: String| SourceError::Remote(format!("{origin}: managed_lists: {reason}"));
    let items = value
        .as_array()
        .ok_or_else(|| invalid("not an array".into()))?;
    let mut lists = ManagedLists::new();
    for (i, entry) in items.iter().enumerate() {
        let name = entry
            .get("name")
            .and_then(|n| n.as_str())
            .and_then(ManagedListName::parse)
            .ok_or_else(|| invalid(format!("[{i}]: no known name")))?;
        let digest = entry
            .get("digest")
            .and_then(|d| d.as_str())
            .ok_or_else(|| invalid(format!("[{i}]: no digest")))?;
        let list = match entry.get("items") {
            Some(items) => {
                let path = format!("managed_lists[{i}].items");
                let list =
                    ManagedList::from_json_items(items, &path, usize::MAX).map_err(|source| {
                        SourceError::Invalid {
                            origin: origin.to_owned(),
                            source,
                        }
                    })?;
                if list.digest() != digest {
                    return Err(invalid(format!("[{i}]: the items do not have the digest")));
                }
                Arc::new(list)
            }
            None => held
                .get(name)
                .filter(|l| l.digest() == digest)
                .cloned()
                .ok_or_else(|| invalid(format!("[{i}]: no items for a list not held")))?,
        };
        lists.set(name, Some(list));
    }
    Ok(lists)
}

impl RemoteClient {
    fn new(config: RemoteRules) -> Result<Self, SourceError> {
        let url = &config.url;
        let client =
            OriginClient::new(url, &config.trust, true, Duration::from_secs(3)).map_err(|err| {
                match err {
                    OriginUrlError::Shape => SourceError::InvalidUrl(url.to_string()),
                    OriginUrlError::Tls(err) => SourceError::Tls(err),
                }
            })?;
        if !client.is_tls() && !is_loopback_url(url) {
            if !config.allow_insecure_http {
                return Err(SourceError::InsecureUrl(client.origin()));
            }
            tracing::warn!(
                url = %client.origin(),
                "the client secret and tokens go to the admin server in clear \
                 (--allow-insecure-rules-url)"
            );
        }
        let authority = url.authority().map(|a| a.as_str()).unwrap_or_default();
        let audience = config
            .audience
            .clone()
            .unwrap_or_else(|| format!("https://{authority}/api/v2/"));
        Ok(Self {
            base: client.origin(),
            client,
            config,
            audience,
            transit: TransitKeyPair::generate(),
        })
    }

    async fn send(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), SourceError> {
        send_bounded(&self.client, &self.base, request, timeout).await
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
            .uri("/oauth/token")
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

    /// One long poll; `held` (the server's lists this edge holds) asks for managed lists.
    async fn poll(
        &self,
        token: &str,
        since: Option<u64>,
        held: Option<&ManagedLists>,
        ask_keys: bool,
    ) -> Result<Poll, SourceError> {
        let timeout_ms = self.config.poll_timeout.as_millis();
        let mut uri = match since {
            Some(v) => format!("/_netacl/v1/network-acls/watch?since={v}&timeout_ms={timeout_ms}"),
            None => format!("/_netacl/v1/network-acls/watch?timeout_ms={timeout_ms}"),
        };
        if let Some(held) = held {
            uri.push_str("&lists=");
            uri.push_str(&held_param(held));
        }
        if ask_keys {
            uri.push_str("&keys=");
            uri.push_str(&self.transit.public_key().to_base64url());
        }
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
            // An older server names the first parameter it does not know ("Additional
            // properties not allowed: lists"); `lists` comes first in the query.
            StatusCode::BAD_REQUEST
                if held.is_some() && String::from_utf8_lossy(&body).contains("lists") =>
            {
                Ok(Poll::ListsRefused)
            }
            StatusCode::BAD_REQUEST if ask_keys => Ok(Poll::KeysRefused),
            StatusCode::BAD_REQUEST if held.is_some() => Ok(Poll::ListsRefused),
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
                let lists = match (json.get("managed_lists"), held) {
                    (Some(lists), Some(held)) => Some(parse_lists(lists, held, &origin)?),
                    _ => None,
                };
                let keys = if ask_keys {
                    open_keys(&json, &self.transit, &origin)?
                } else {
                    KeysAnswer::None
                };
                let rules = RuleSet::from_json(acls, version, &Limits::default())
                    .map_err(|source| SourceError::Invalid { origin, source })?;
                Ok(Poll::Changed(rules, lists, keys))
            }
            other => Err(SourceError::Remote(format!(
                "{}: watch answered {other}",
                self.base
            ))),
        }
    }
}

/// Sends `request` to an admin server and reads the whole answer (at most
/// [`MAX_RULES_BYTES`]), both within `timeout`.
pub(crate) async fn send_bounded(
    client: &OriginClient<Full<Bytes>>,
    base: &str,
    request: Request<Full<Bytes>>,
    timeout: Duration,
) -> Result<(StatusCode, Bytes), SourceError> {
    let response = tokio::time::timeout(timeout, client.send(request))
        .await
        .map_err(|_| SourceError::Remote(format!("{base}: no answer within {timeout:?}")))?
        .map_err(|e| SourceError::Remote(format!("{base}: {e}")))?;
    let status = response.status();
    let body = tokio::time::timeout(
        timeout,
        Limited::new(response.into_body(), MAX_RULES_BYTES).collect(),
    )
    .await
    .map_err(|_| SourceError::Remote(format!("{base}: body not received in time")))?
    .map_err(|e| SourceError::Remote(format!("{base}: reading the body: {e}")))?
    .to_bytes();
    Ok((status, body))
}

pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(5);

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
    let inputs = Arc::new(PolicySources::new(enforcer, ManagedLists::new()));
    spawn_remote_source_with(inputs, config)
}

/// [`spawn_remote_source`] installing through `inputs` (with the edge's own managed lists,
/// which win over the server's for their names).
pub fn spawn_remote_source_with(
    inputs: Arc<PolicySources>,
    config: RemoteRules,
) -> Result<(JoinHandle<()>, watch::Receiver<Option<u64>>), SourceError> {
    let enforcer = Arc::clone(inputs.enforcer());
    let remote = RemoteClient::new(config)?;
    let (installed, installed_rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        let mut token: Option<Token> = None;
        let mut since: Option<u64> = None;
        let mut backoff = BACKOFF_MIN;
        let mut refused_before = false;
        // The server's lists as last sent (what the next poll says the edge holds); `None` once
        // the server refused the parameter.
        let mut held: Option<ManagedLists> = Some(ManagedLists::new());
        // Whether to ask for network ACL key material (until a server refuses the parameter).
        let mut ask_keys = true;
        loop {
            let result = async {
                let fresh = token
                    .as_ref()
                    .is_some_and(|t| Instant::now() < t.refresh_at);
                if !fresh {
                    token = Some(remote.fetch_token().await?);
                }
                let value = token.as_ref().map(|t| t.value.clone()).unwrap_or_default();
                remote.poll(&value, since, held.as_ref(), ask_keys).await
            }
            .await;
            match result {
                Ok(Poll::ListsRefused) => {
                    tracing::warn!(source = %remote.base, "the admin server does not send managed lists (an older version); following its rules only");
                    held = None;
                    continue;
                }
                Ok(Poll::KeysRefused) => {
                    tracing::warn!(source = %remote.base, "the admin server does not send network ACL key material (an older version); rules naming http_message_signature will see no signature");
                    ask_keys = false;
                    continue;
                }
                Ok(Poll::Changed(rules, lists, keys)) => {
                    let version = rules.version;
                    let count = rules.acls.len();
                    since = Some(version);
                    let origin = remote.base.clone();
                    if let Some(lists) = &lists {
                        // Held from now on even if the rules do not install, so that the
                        // server does not answer the next poll at once for them.
                        held = Some(lists.clone());
                    }
                    let keys = match keys {
                        KeysAnswer::Keys(keys) => Some(keys),
                        KeysAnswer::Withheld(reason) => {
                            if !rules.message_signature_keys().is_empty() {
                                tracing::warn!(source = %remote.base, reason, "the admin server withheld network ACL key material (reason scope: this edge's client lacks read:network_acl_key_material; transport: plain HTTP off loopback)");
                            }
                            None
                        }
                        KeysAnswer::None => None,
                    };
                    let outcome = inputs.set_remote(rules, lists, keys, &origin).await;
                    match outcome {
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
                    if let (SourceError::Remote(message), Some(_)) = (&err, &held) {
                        if message.contains("managed_lists") {
                            // Lists that do not check out: ask for all of them again.
                            held = Some(ManagedLists::new());
                        }
                    }
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

    fn remote(url: &'static str) -> RemoteRules {
        RemoteRules::new(Uri::from_static(url), "id".into(), "secret".into())
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let shown = format!("{:?}", remote("https://admin.example.com"));
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(!shown.contains("\"secret\""), "{shown}");
    }

    #[tokio::test]
    async fn plain_http_only_on_loopback_unless_allowed() {
        let client = RemoteClient::new(remote("http://127.0.0.1:8080")).unwrap();
        assert_eq!(client.audience, "https://127.0.0.1:8080/api/v2/");
        assert!(RemoteClient::new(remote("http://localhost:8080")).is_ok());

        let err = RemoteClient::new(remote("http://10.1.2.3:8080"))
            .err()
            .unwrap();
        assert!(matches!(err, SourceError::InsecureUrl(_)), "{err}");
        let message = err.to_string();
        assert!(message.contains("http://10.1.2.3:8080"), "{message}");
        assert!(message.contains("--allow-insecure-rules-url"), "{message}");
        assert!(!message.contains("secret\""), "{message}");

        let mut allowed = remote("http://10.1.2.3:8080");
        allowed.allow_insecure_http = true;
        assert!(RemoteClient::new(allowed).is_ok());

        assert!(matches!(
            RemoteClient::new(remote("ftp://example.com")),
            Err(SourceError::InvalidUrl(_))
        ));
        assert!(matches!(
            RemoteClient::new(remote("http://127.0.0.1:8080/prefix")),
            Err(SourceError::InvalidUrl(_))
        ));
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

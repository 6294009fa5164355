//! The tenant's token authority: who may get a token, what it says, and issuing it.

use super::client::{verify_client_secret, ClientRecord, DUMMY_SECRET_HASH};
use super::key::SigningKey;
use jsonwebtoken::{Algorithm, Validation};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// Default access-token lifetime: one day, as the hosted service issues.
pub const DEFAULT_TOKEN_LIFETIME_SECS: u64 = 86_400;
/// Default clock-skew allowance applied to `exp`, `nbf` and `iat`.
pub const DEFAULT_LEEWAY_SECS: u64 = 30;
/// Longest accepted token lifetime (30 days).
pub const MAX_TOKEN_LIFETIME_SECS: u64 = 30 * 86_400;
/// Largest accepted leeway (5 minutes).
pub const MAX_LEEWAY_SECS: u64 = 300;
/// The only grant type the token endpoint serves.
pub const CLIENT_CREDENTIALS: &str = "client_credentials";

/// Settings of a [`TenantAuthority`]; everything but the domain has a default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthorityConfig {
    /// The tenant host as clients address it, `host` or `host:port`
    /// (`localhost:8080` → issuer `https://localhost:8080/`,
    /// audience `https://localhost:8080/api/v2/`).
    pub domain: String,
    /// Lifetime of issued tokens in seconds (`expires_in`); 1..=30 days, default 86400.
    pub token_lifetime_secs: u64,
    /// Clock-skew allowance in seconds for `exp`, `nbf` and `iat`; at most 300, default 30.
    pub leeway_secs: u64,
}

impl AuthorityConfig {
    /// The defaults for a tenant domain.
    pub fn new(domain: impl Into<String>) -> Self {
        Self {
            domain: domain.into(),
            token_lifetime_secs: DEFAULT_TOKEN_LIFETIME_SECS,
            leeway_secs: DEFAULT_LEEWAY_SECS,
        }
    }

    /// Replace the token lifetime.
    pub fn with_token_lifetime_secs(mut self, secs: u64) -> Self {
        self.token_lifetime_secs = secs;
        self
    }

    /// Replace the leeway.
    pub fn with_leeway_secs(mut self, secs: u64) -> Self {
        self.leeway_secs = secs;
        self
    }
}

/// Why an authority could not be built or a client record was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorityConfigError {
    /// The domain is not `host` or `host:port` (no scheme, path, user info or whitespace).
    #[error("invalid tenant domain {domain:?}: expected `host` or `host:port`")]
    InvalidDomain {
        /// The refused value.
        domain: String,
    },
    /// The token lifetime is 0 or above [`MAX_TOKEN_LIFETIME_SECS`].
    #[error("token lifetime {secs} s is outside 1..={MAX_TOKEN_LIFETIME_SECS}")]
    InvalidTokenLifetime {
        /// The refused value.
        secs: u64,
    },
    /// The leeway is above [`MAX_LEEWAY_SECS`].
    #[error("leeway {secs} s is above {MAX_LEEWAY_SECS}")]
    InvalidLeeway {
        /// The refused value.
        secs: u64,
    },
    /// A client record is unusable (empty or non-printable id, a scope with whitespace).
    #[error("client {client_id:?}: {reason}")]
    InvalidClient {
        /// The record's client id.
        client_id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The parameters of a token request, from a JSON or form body (plus HTTP Basic
/// credentials, which the endpoint folds in).
///
/// All fields are optional at this stage so that a missing one gets the OAuth
/// `invalid_request` answer rather than a parser error. Unknown parameters are ignored,
/// as RFC 6749 §3.2 requires; a repeated parameter is a malformed body.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct TokenRequest {
    /// Must be `client_credentials`.
    #[serde(default)]
    pub grant_type: Option<String>,
    /// The client id.
    #[serde(default)]
    pub client_id: Option<String>,
    /// The client secret.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The API identifier the token is for: the management API's.
    #[serde(default)]
    pub audience: Option<String>,
    /// Optional space-separated subset of the client's scopes to request.
    #[serde(default)]
    pub scope: Option<String>,
    /// Optional organization (string or JSON null); accepted and ignored for this grant.
    #[serde(default)]
    pub organization: Option<String>,
}

impl TokenRequest {
    /// A complete client-credentials request.
    pub fn client_credentials(
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        audience: impl Into<String>,
    ) -> Self {
        Self {
            grant_type: Some(CLIENT_CREDENTIALS.to_owned()),
            client_id: Some(client_id.into()),
            client_secret: Some(client_secret.into()),
            audience: Some(audience.into()),
            scope: None,
            organization: None,
        }
    }
}

impl fmt::Debug for TokenRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRequest")
            .field("grant_type", &self.grant_type)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .field("organization", &self.organization)
            .finish()
    }
}

/// A successful token answer: `{"access_token", "token_type": "Bearer", "expires_in", "scope"}`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenResponse {
    /// The signed JWT.
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: String,
    /// Seconds until the token expires.
    pub expires_in: u64,
    /// The granted scopes, space-separated.
    pub scope: String,
}

impl fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenResponse")
            .field("access_token", &"<redacted>")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish()
    }
}

/// A refused token request, answered in the OAuth shape
/// `{"error": "...", "error_description": "..."}`. Descriptions are fixed texts: they never
/// echo the request or say whether a client id exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// 400 `invalid_request`: the body is malformed, incomplete or of an unknown content
    /// type, or the client authenticated in two ways at once.
    #[error("{0}")]
    InvalidRequest(&'static str),
    /// 413 `invalid_request`: the body is larger than the endpoint accepts.
    #[error("Request body too large")]
    BodyTooLarge,
    /// 400 `unsupported_grant_type`: a grant other than `client_credentials`.
    #[error("Unsupported grant type")]
    UnsupportedGrantType,
    /// 401 `access_denied`: unknown client or wrong secret (indistinguishable on purpose).
    #[error("Unauthorized")]
    AccessDenied,
    /// 403 `unauthorized_client`: the client may not request tokens for that audience.
    #[error("Client is not authorized to access the requested audience")]
    UnauthorizedClient,
    /// 403 `access_denied`: the request names a scope the client has not been granted.
    #[error("Client has not been granted the requested scopes")]
    ScopeNotGranted,
    /// 500 `server_error`: signing failed.
    #[error("The token could not be issued")]
    ServerError,
}

impl OAuthError {
    /// The HTTP status.
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode as S;
        match self {
            Self::InvalidRequest(_) | Self::UnsupportedGrantType => S::BAD_REQUEST,
            Self::BodyTooLarge => S::PAYLOAD_TOO_LARGE,
            Self::AccessDenied => S::UNAUTHORIZED,
            Self::UnauthorizedClient | Self::ScopeNotGranted => S::FORBIDDEN,
            Self::ServerError => S::INTERNAL_SERVER_ERROR,
        }
    }

    /// The OAuth `error` code.
    pub fn error_code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) | Self::BodyTooLarge => "invalid_request",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::AccessDenied | Self::ScopeNotGranted => "access_denied",
            Self::UnauthorizedClient => "unauthorized_client",
            Self::ServerError => "server_error",
        }
    }

    /// The response body `{"error", "error_description"}`.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.error_code(), "error_description": self.to_string() })
    }
}

/// The token authority of one tenant: issues RS256 access tokens to registered clients
/// with the client-credentials grant and verifies bearer tokens on the management API.
///
/// Built once from an [`AuthorityConfig`], the [`SigningKey`] and the stored clients (both
/// persisted by the store, not here); share it as `Arc<TenantAuthority>`. Clients can be
/// added or removed at run time ([`upsert_client`](Self::upsert_client)); the map sits
/// behind a `RwLock` that is only held for a lookup or an insert, never across an await.
pub struct TenantAuthority {
    pub(crate) issuer: String,
    pub(crate) audience: String,
    keys: arc_swap::ArcSwap<KeyRing>,
    /// Bumped each time the key ring is replaced (caches of verified tokens compare it).
    key_generation: AtomicU64,
    pub(crate) token_lifetime_secs: u64,
    pub(crate) leeway_secs: u64,
    pub(crate) validation: Validation,
    clients: RwLock<HashMap<String, Arc<ClientRecord>>>,
}

impl fmt::Debug for TenantAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantAuthority")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("keys", &self.keys.load())
            .field("token_lifetime_secs", &self.token_lifetime_secs)
            .field("leeway_secs", &self.leeway_secs)
            .field("clients", &self.client_count())
            .finish()
    }
}

#[derive(Serialize)]
struct IssuedClaims<'a> {
    iss: &'a str,
    sub: String,
    aud: &'a str,
    azp: &'a str,
    iat: u64,
    exp: u64,
    scope: &'a str,
    gty: &'static str,
}

impl TenantAuthority {
    /// Build the authority. Fails on a malformed domain, an out-of-range lifetime or
    /// leeway, or an unusable client record.
    pub fn new(
        config: AuthorityConfig,
        key: SigningKey,
        clients: impl IntoIterator<Item = ClientRecord>,
    ) -> Result<Self, AuthorityConfigError> {
        let domain = parse_domain(&config.domain)?;
        if config.token_lifetime_secs == 0 || config.token_lifetime_secs > MAX_TOKEN_LIFETIME_SECS {
            return Err(AuthorityConfigError::InvalidTokenLifetime {
                secs: config.token_lifetime_secs,
            });
        }
        if config.leeway_secs > MAX_LEEWAY_SECS {
            return Err(AuthorityConfigError::InvalidLeeway {
                secs: config.leeway_secs,
            });
        }
        let issuer = format!("https://{domain}/");
        let audience = format!("https://{domain}/api/v2/");
        let mut validation = Validation::new(Algorithm::RS256);
        validation.algorithms = vec![Algorithm::RS256];
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_issuer(&[&issuer]);
        validation.set_audience(&[&audience]);
        validation.leeway = config.leeway_secs;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        let authority = Self {
            issuer,
            audience,
            keys: arc_swap::ArcSwap::from_pointee(KeyRing::new(Arc::new(key), [])),
            key_generation: AtomicU64::new(0),
            token_lifetime_secs: config.token_lifetime_secs,
            leeway_secs: config.leeway_secs,
            validation,
            clients: RwLock::new(HashMap::new()),
        };
        for client in clients {
            authority.upsert_client(client)?;
        }
        Ok(authority)
    }

    /// The `iss` of issued tokens: `https://<domain>/`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The management API identifier and token audience: `https://<domain>/api/v2/`.
    pub fn management_audience(&self) -> &str {
        &self.audience
    }

    /// The current signing key (the one new tokens are signed with).
    pub fn signing_key(&self) -> Arc<SigningKey> {
        Arc::clone(&self.keys.load().current)
    }

    /// The keys in force: the current one and the previous ones not revoked.
    pub fn key_ring(&self) -> Arc<KeyRing> {
        self.keys.load_full()
    }

    /// Puts a new key ring in force at once: tokens are signed with its current key from now
    /// on, and only tokens of its keys verify (a key left out, a revoked one, stops verifying).
    pub fn install_keys(&self, ring: KeyRing) {
        self.keys.store(Arc::new(ring));
        self.key_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Changes each time [`install_keys`](Self::install_keys) is called.
    pub fn key_generation(&self) -> u64 {
        self.key_generation.load(Ordering::Acquire)
    }

    /// The JSON Web Key Set of the keys in force (current first), served at
    /// `/.well-known/jwks.json`.
    pub fn jwks(&self) -> serde_json::Value {
        self.keys.load().jwks()
    }

    /// The lifetime of issued tokens in seconds.
    pub fn token_lifetime_secs(&self) -> u64 {
        self.token_lifetime_secs
    }

    /// The clock-skew allowance in seconds.
    pub fn leeway_secs(&self) -> u64 {
        self.leeway_secs
    }

    /// A record for a client of the management API with the given scopes (its only allowed
    /// audience is [`management_audience`](Self::management_audience)).
    pub fn management_client(
        &self,
        client_id: impl Into<String>,
        secret_hash: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> ClientRecord {
        ClientRecord {
            client_id: client_id.into(),
            secret_hash: secret_hash.into(),
            scopes: scopes.into_iter().map(Into::into).collect(),
            allowed_audiences: vec![self.audience.clone()],
        }
    }

    /// Add a client or replace the one with the same id; returns the replaced record.
    pub fn upsert_client(
        &self,
        record: ClientRecord,
    ) -> Result<Option<ClientRecord>, AuthorityConfigError> {
        check_client(&record)?;
        let mut clients = self.clients.write().unwrap_or_else(PoisonError::into_inner);
        let previous = clients.insert(record.client_id.clone(), Arc::new(record));
        Ok(previous.map(Arc::unwrap_or_clone))
    }

    /// Remove a client; its tokens already issued stay valid until they expire.
    pub fn remove_client(&self, client_id: &str) -> Option<ClientRecord> {
        let mut clients = self.clients.write().unwrap_or_else(PoisonError::into_inner);
        clients.remove(client_id).map(Arc::unwrap_or_clone)
    }

    /// The record of a client, if registered.
    pub fn client(&self, client_id: &str) -> Option<Arc<ClientRecord>> {
        let clients = self.clients.read().unwrap_or_else(PoisonError::into_inner);
        clients.get(client_id).cloned()
    }

    /// How many clients are registered.
    pub fn client_count(&self) -> usize {
        self.clients
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Serve a client-credentials request: authenticate the client, check the audience and
    /// the requested scopes, and sign an RS256 access token.
    ///
    /// Checks run in this order: grant type, required parameters, client authentication
    /// (an unknown id costs the same hash work as a wrong secret), audience, scopes.
    pub fn issue_client_credentials(
        &self,
        request: &TokenRequest,
    ) -> Result<TokenResponse, OAuthError> {
        match request.grant_type.as_deref() {
            None | Some("") => {
                return Err(OAuthError::InvalidRequest(
                    "Missing required parameter: grant_type",
                ))
            }
            Some(CLIENT_CREDENTIALS) => {}
            Some(_) => return Err(OAuthError::UnsupportedGrantType),
        }
        let client_id = non_empty(&request.client_id).ok_or(OAuthError::InvalidRequest(
            "Missing required parameter: client_id",
        ))?;
        let secret = non_empty(&request.client_secret).ok_or(OAuthError::InvalidRequest(
            "Missing required parameter: client_secret",
        ))?;
        let audience = non_empty(&request.audience).ok_or(OAuthError::InvalidRequest(
            "Missing required parameter: audience",
        ))?;

        let client = self.client(client_id);
        let hash = client
            .as_ref()
            .map_or(DUMMY_SECRET_HASH, |c| c.secret_hash.as_str());
        let secret_ok = verify_client_secret(secret, hash);
        let client = match client {
            Some(client) if secret_ok => client,
            _ => return Err(OAuthError::AccessDenied),
        };

        if audience != self.audience || !client.allowed_audiences.iter().any(|a| a == audience) {
            return Err(OAuthError::UnauthorizedClient);
        }

        let scope = match non_empty(&request.scope) {
            None => client.scopes.join(" "),
            Some(requested) => {
                let mut granted: Vec<&str> = Vec::new();
                for wanted in requested.split(' ').filter(|s| !s.is_empty()) {
                    if !client.scopes.iter().any(|s| s == wanted) {
                        return Err(OAuthError::ScopeNotGranted);
                    }
                    if !granted.contains(&wanted) {
                        granted.push(wanted);
                    }
                }
                granted.join(" ")
            }
        };

        let now = unix_now();
        let claims = IssuedClaims {
            iss: &self.issuer,
            sub: format!("{}@clients", client.client_id),
            aud: &self.audience,
            azp: &client.client_id,
            iat: now,
            exp: now.saturating_add(self.token_lifetime_secs),
            scope: &scope,
            gty: "client-credentials",
        };
        let access_token = self
            .keys
            .load()
            .current
            .sign_jwt(&claims)
            .map_err(|_| OAuthError::ServerError)?;
        Ok(TokenResponse {
            access_token,
            token_type: "Bearer".to_owned(),
            expires_in: self.token_lifetime_secs,
            scope,
        })
    }
}

/// The signing keys in force: the current key (signs new tokens) and the previous keys not
/// revoked (their tokens verify until they expire). Replaced whole
/// ([`TenantAuthority::install_keys`]).
pub struct KeyRing {
    current: Arc<SigningKey>,
    previous: Vec<Arc<SigningKey>>,
}

impl KeyRing {
    /// A ring of `current` and `previous` (a previous key with the current key's kid is dropped).
    pub fn new(
        current: Arc<SigningKey>,
        previous: impl IntoIterator<Item = Arc<SigningKey>>,
    ) -> Self {
        let previous = previous
            .into_iter()
            .filter(|k| k.kid() != current.kid())
            .collect();
        Self { current, previous }
    }

    /// The current key.
    pub fn current(&self) -> &Arc<SigningKey> {
        &self.current
    }

    /// The key a token's `kid` names, if it is in force.
    pub fn get(&self, kid: &str) -> Option<&Arc<SigningKey>> {
        std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.kid() == kid)
    }

    /// The kids in force, current first.
    pub fn kids(&self) -> impl Iterator<Item = &str> + '_ {
        std::iter::once(&self.current)
            .chain(&self.previous)
            .map(|k| k.kid())
    }

    /// `{"keys": [...]}`: every key in force, current first.
    pub fn jwks(&self) -> serde_json::Value {
        let keys: Vec<serde_json::Value> = std::iter::once(&self.current)
            .chain(&self.previous)
            .map(|k| k.jwk())
            .collect();
        serde_json::json!({ "keys": keys })
    }
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("current", &self.current.kid())
            .field(
                "previous",
                &self.previous.iter().map(|k| k.kid()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// Seconds since the UNIX epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn parse_domain(domain: &str) -> Result<String, AuthorityConfigError> {
    let invalid = || AuthorityConfigError::InvalidDomain {
        domain: domain.to_owned(),
    };
    let (host, port) = match domain.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        Some(_) => return Err(invalid()),
        None => (domain, None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && !host.starts_with(['.', '-'])
        && !host.ends_with('-')
        && !host.contains("..")
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let port_ok = port.is_none_or(|p| !p.starts_with('0') && p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok {
        Ok(domain.to_ascii_lowercase())
    } else {
        Err(invalid())
    }
}

fn check_client(record: &ClientRecord) -> Result<(), AuthorityConfigError> {
    let invalid = |reason| AuthorityConfigError::InvalidClient {
        client_id: record.client_id.clone(),
        reason,
    };
    if record.client_id.is_empty() || record.client_id.len() > 128 {
        return Err(invalid("the client id must have 1 to 128 characters"));
    }
    if !record.client_id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(
            "the client id must be printable ASCII without spaces",
        ));
    }
    if record
        .scopes
        .iter()
        .any(|s| s.is_empty() || s.contains(char::is_whitespace))
    {
        return Err(invalid("a scope is empty or contains whitespace"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        for good in [
            "localhost:8080",
            "tenant.example.com",
            "Tenant.Example.com:443",
            "127.0.0.1:3000",
        ] {
            assert!(parse_domain(good).is_ok(), "{good}");
        }
        assert_eq!(
            parse_domain("LocalHost:8080").ok().as_deref(),
            Some("localhost:8080")
        );
        for bad in [
            "",
            "https://tenant.example.com",
            "tenant.example.com/",
            "tenant example",
            "host:0",
            "host:65536",
            "host:",
            "host:080",
            ":80",
            "a..b",
            "user@host",
            "[::1]:80",
        ] {
            assert!(parse_domain(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn oauth_errors_have_the_documented_status_and_code() {
        let cases = [
            (OAuthError::InvalidRequest("x"), 400, "invalid_request"),
            (OAuthError::BodyTooLarge, 413, "invalid_request"),
            (
                OAuthError::UnsupportedGrantType,
                400,
                "unsupported_grant_type",
            ),
            (OAuthError::AccessDenied, 401, "access_denied"),
            (OAuthError::UnauthorizedClient, 403, "unauthorized_client"),
            (OAuthError::ScopeNotGranted, 403, "access_denied"),
            (OAuthError::ServerError, 500, "server_error"),
        ];
        for (error, status, code) in cases {
            assert_eq!(error.status().as_u16(), status, "{error:?}");
            assert_eq!(error.body()["error"], code, "{error:?}");
            assert!(error.body()["error_description"].is_string());
        }
    }

    #[test]
    fn token_request_debug_redacts_the_secret() {
        let request = TokenRequest::client_credentials("id", "hunter2-secret", "aud");
        assert!(!format!("{request:?}").contains("hunter2"));
    }
}

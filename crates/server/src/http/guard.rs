//! In front of every authenticated route: verify the bearer token, take one request from the
//! caller's rate-limit bucket (keyed by client id, or by peer address without a valid token),
//! and stamp the rate-limit headers on whatever the route answers. The operation's scope is
//! checked by the [`Authorized`] extractor of each handler.
//!
//! `POST /oauth/token` (a target for guessing client secrets) takes one request from a bucket
//! of its own per peer address ([`limit_token_requests`]), with the same limits.
//!
//! A peer address is keyed by [`peer_key`]: IPv4 by the address, IPv6 by its /64 (one host
//! usually holds a whole /64, so cycling through it must not buy fresh buckets), and an
//! IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, a dual-stack socket) as the IPv4 address.
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::request::Parts;

use crate::auth::{AuthError, Principal};
use crate::http::error::ApiError;
use crate::http::request_context::RequestContext;
use crate::AppState;

/// The middleware (see the module docs).
pub(crate) async fn guard(state: AppState, mut request: Request, next: Next) -> Response {
    let generation = state.inner.authority.key_generation();
    let mut verified = verify(&state, request.headers());
    if matches!(verified, Err(AuthError::UnknownKey)) {
        // Perhaps a key another node just made current: reload (rate limited), then try again
        // if the keys were read or replaced meanwhile.
        let reloaded = state.inner.signing_keys.reload_for_unknown_kid().await;
        if reloaded || state.inner.authority.key_generation() != generation {
            verified = verify(&state, request.headers());
        }
    }
    let key = match &verified {
        Ok(principal) => format!("client:{}", principal.client_id()),
        Err(_) => format!("peer:{}", peer_key(peer_ip(&request))),
    };
    let decision = state.inner.limiter.check(&key);
    let mut response = if !decision.allowed {
        ApiError::too_many_requests().into_response()
    } else {
        match verified {
            Ok(principal) => {
                let context = request
                    .extensions_mut()
                    .get_mut::<RequestContext>()
                    .map(|context| {
                        context.client_id = Some(principal.client_id().to_owned());
                        context.clone()
                    });
                request.extensions_mut().insert(principal);
                let mut response = next.run(request).await;
                if let Some(context) = context {
                    response.extensions_mut().insert(context);
                }
                response
            }
            Err(err) => {
                tracing::debug!(error = ?err, "authentication failed");
                ApiError::from(err).into_response()
            }
        }
    };
    decision.apply_headers(response.headers_mut());
    response
}

/// The middleware in front of `POST /oauth/token`: one request from the peer's token bucket
/// (separate from its API bucket), or `429` in the OAuth error shape with `Retry-After`. The
/// rate-limit headers are stamped on every answer while limiting is on.
pub(crate) async fn limit_token_requests(
    state: AppState,
    request: Request,
    next: Next,
) -> Response {
    let key = format!("token:{}", peer_key(peer_ip(&request)));
    let decision = state.inner.limiter.check(&key);
    let mut response = if decision.allowed {
        next.run(request).await
    } else {
        oauth_too_many_requests()
    };
    decision.apply_headers(response.headers_mut());
    response
}

/// `429 {"error":"too_many_requests","error_description":...}`, not cacheable.
fn oauth_too_many_requests() -> Response {
    let body = serde_json::json!({
        "error": "too_many_requests",
        "error_description": "Too many token requests from this address; retry after the \
                              number of seconds in Retry-After.",
    });
    let mut response = (http::StatusCode::TOO_MANY_REQUESTS, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json; charset=utf-8"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

/// The peer's address, when the server was started with connection info.
fn peer_ip(request: &Request) -> Option<IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip())
}

/// The rate-limit key of a peer address (see the module docs): `192.0.2.1`,
/// `2001:db8:1:2::/64`, `unknown` without one.
pub(crate) fn peer_key(peer: Option<IpAddr>) -> String {
    match peer {
        None => "unknown".to_owned(),
        Some(IpAddr::V4(v4)) => v4.to_string(),
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let prefix = u128::from(v6) & !u128::from(u64::MAX);
                format!("{}/64", Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Verifies the bearer token, through the cache of recently verified tokens.
fn verify(state: &AppState, headers: &http::HeaderMap) -> Result<Principal, AuthError> {
    let authority = &state.inner.authority;
    let single = {
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => value.to_str().ok(),
            _ => None,
        }
    };
    let now = unix_now();
    let generation = authority.key_generation();
    if let Some(principal) =
        single.and_then(|value| state.inner.verified.get(value, now, generation))
    {
        return Ok(principal);
    }
    let principal = authority.verify_headers(headers)?;
    if let Some(value) = single {
        if let Some(exp) = token_expiry(value) {
            let until = exp
                .saturating_add(authority.leeway_secs())
                .min(now.saturating_add(VerifiedTokens::MAX_AGE_SECS));
            state
                .inner
                .verified
                .put(value, principal.clone(), until, generation);
        }
    }
    Ok(principal)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The `exp` claim of a token that has just been verified (so its claims are authentic).
fn token_expiry(authorization: &str) -> Option<u64> {
    use base64::Engine as _;
    let (scheme, token) = authorization.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let payload = token.trim().split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("exp")?.as_u64()
}

/// Header value → (caller, trusted until (UNIX seconds), key-ring generation verified under).
type TokenShard = std::collections::HashMap<Box<str>, (Principal, u64, u64)>;

/// Recently verified `Authorization` values and their callers, so that a client reusing its
/// token (the common case) costs a hash lookup instead of an RSA verification per request.
///
/// Only successful verifications are kept, each until the token's `exp` plus the verifier's
/// leeway, and never longer than [`Self::MAX_AGE_SECS`]. The key is the exact header value, so
/// a cached entry answers exactly what the verifier answered for the same bytes. Bounded: a full
/// shard is emptied before it takes a new entry. An entry counts only under the key ring it was
/// verified with ([`TenantAuthority::key_generation`](crate::auth::TenantAuthority::key_generation)):
/// after a rotation or a revocation every token is verified again.
pub(crate) struct VerifiedTokens {
    shards: Box<[std::sync::Mutex<TokenShard>]>,
    hasher: std::collections::hash_map::RandomState,
}

impl VerifiedTokens {
    /// Longest time an entry is trusted, in seconds.
    pub(crate) const MAX_AGE_SECS: u64 = 300;
    const SHARDS: usize = 16;
    const PER_SHARD: usize = 256;

    pub(crate) fn new() -> Self {
        Self {
            shards: (0..Self::SHARDS)
                .map(|_| std::sync::Mutex::new(std::collections::HashMap::new()))
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    fn shard(&self, key: &str) -> std::sync::MutexGuard<'_, TokenShard> {
        use std::hash::BuildHasher;
        let index = (self.hasher.hash_one(key) as usize) % Self::SHARDS;
        self.shards[index]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, key: &str, now: u64, generation: u64) -> Option<Principal> {
        let mut shard = self.shard(key);
        match shard.get(key) {
            Some((principal, until, verified_under))
                if *until >= now && *verified_under == generation =>
            {
                Some(principal.clone())
            }
            Some(_) => {
                shard.remove(key);
                None
            }
            None => None,
        }
    }

    fn put(&self, key: &str, principal: Principal, until: u64, generation: u64) {
        let mut shard = self.shard(key);
        if shard.len() >= Self::PER_SHARD {
            shard.clear();
        }
        shard.insert(key.into(), (principal, until, generation));
    }
}

/// A scope an operation requires.
pub(crate) trait RequiredScope {
    /// The scope, e.g. `read:network_acls`.
    const SCOPE: &'static str;
}

macro_rules! scopes {
    ($($name:ident => $scope:literal),* $(,)?) => {$(
        #[doc = concat!("The `", $scope, "` scope.")]
        pub(crate) struct $name;
        impl RequiredScope for $name {
            const SCOPE: &'static str = $scope;
        }
    )*};
}

scopes! {
    ReadNetworkAcls => "read:network_acls",
    CreateNetworkAcls => "create:network_acls",
    UpdateNetworkAcls => "update:network_acls",
    DeleteNetworkAcls => "delete:network_acls",
    CreateNetworkAclKeys => "create:network_acl_keys",
    ReadNetworkAclKeys => "read:network_acl_keys",
    DeleteNetworkAclKeys => "delete:network_acl_keys",
    CreateOrganizations => "create:organizations",
    ReadOrganizations => "read:organizations",
    UpdateOrganizations => "update:organizations",
    DeleteOrganizations => "delete:organizations",
    CreateOrganizationConnections => "create:organization_connections",
    ReadOrganizationConnections => "read:organization_connections",
    UpdateOrganizationConnections => "update:organization_connections",
    DeleteOrganizationConnections => "delete:organization_connections",
    ReadOrganizationClientGrants => "read:organization_client_grants",
    ReadConnections => "read:connections",
    ReadClients => "read:clients",
    ReadClientGrants => "read:client_grants",
    ReadGroupMembers => "read:group_members",
    ReadSessions => "read:sessions",
    ReadBranding => "read:branding",
    UpdateBranding => "update:branding",
    CreateUsers => "create:users",
    ReadSigningKeys => "read:signing_keys",
    CreateSigningKeys => "create:signing_keys",
    UpdateSigningKeys => "update:signing_keys",
    ReadLogs => "read:logs",
    CreateEdgeSummaries => "create:edge_summaries",
}

/// Extracts the verified caller and requires scope `S` (403 `insufficient_scope` otherwise).
pub(crate) struct Authorized<S>(PhantomData<S>);

impl<S: RequiredScope, St: Send + Sync> FromRequestParts<St> for Authorized<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &St) -> Result<Self, ApiError> {
        let principal = parts
            .extensions
            .get::<Principal>()
            .ok_or(AuthError::MissingAuthentication)?;
        principal.require_any(&[S::SCOPE])?;
        Ok(Self(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_callers_expire_and_the_cache_stays_bounded() {
        let cache = VerifiedTokens::new();
        let principal = Principal::new("client", ["read:network_acls"]);
        cache.put("Bearer a", principal.clone(), 100, 0);
        assert_eq!(cache.get("Bearer a", 100, 0), Some(principal.clone()));
        assert_eq!(
            cache.get("Bearer a", 100, 1),
            None,
            "another key ring: verify again"
        );
        cache.put("Bearer a", principal.clone(), 100, 0);
        assert_eq!(cache.get("Bearer a", 101, 0), None);
        assert_eq!(
            cache.get("Bearer a", 50, 0),
            None,
            "an expired entry is dropped"
        );
        assert_eq!(cache.get("Bearer b", 0, 0), None);
        for i in 0..VerifiedTokens::SHARDS * VerifiedTokens::PER_SHARD * 2 {
            cache.put(&format!("Bearer {i}"), principal.clone(), 100, 0);
        }
        let held: usize = cache
            .shards
            .iter()
            .map(|s| s.lock().map(|m| m.len()).unwrap_or(0))
            .sum();
        assert!(held <= VerifiedTokens::SHARDS * VerifiedTokens::PER_SHARD);
    }

    #[test]
    fn peers_are_keyed_by_ipv4_address_and_ipv6_slash_64() {
        let key = |s: &str| peer_key(Some(s.parse().expect("address")));
        assert_eq!(key("192.0.2.1"), "192.0.2.1");
        assert_ne!(key("192.0.2.1"), key("192.0.2.2"));
        // IPv4-mapped IPv6 (a dual-stack listener) shares the IPv4 address's bucket.
        assert_eq!(key("::ffff:192.0.2.1"), "192.0.2.1");
        // Every address of one /64 is one key; the neighbouring /64 is another.
        assert_eq!(key("2001:db8:1:2::1"), "2001:db8:1:2::/64");
        assert_eq!(
            key("2001:db8:1:2:ffff:ffff:ffff:ffff"),
            key("2001:db8:1:2:abcd::9")
        );
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::1"), "::/64");
        // Only the mapped form is IPv4; IPv4-compatible and NAT64 addresses stay IPv6.
        assert_eq!(key("::192.0.2.1"), "::/64");
        assert_eq!(key("64:ff9b::c000:201"), "64:ff9b::/64");
        assert_eq!(peer_key(None), "unknown");
    }

    #[test]
    fn one_slash_64_shares_one_bucket() {
        let limiter =
            crate::http::rate_limit::RateLimiter::new(crate::http::rate_limit::RateLimitConfig {
                burst: 2,
                per_second: 0.001,
            })
            .expect("limiter");
        let check = |s: &str| {
            let key = format!("peer:{}", peer_key(Some(s.parse().expect("address"))));
            limiter.check(&key).allowed
        };
        assert!(check("2001:db8::1"));
        assert!(check("2001:db8::2"));
        assert!(
            !check("2001:db8::3"),
            "a third address of the /64 is refused"
        );
        assert!(!check("2001:db8:0:0:8000::1"));
        assert!(check("2001:db8:0:1::1"), "another /64 has its own bucket");
        assert!(check("192.0.2.1"));
        assert!(check("::ffff:192.0.2.1"));
        assert!(!check("192.0.2.1"), "mapped and plain IPv4 share a bucket");
    }

    #[test]
    fn expiry_is_read_from_the_payload() {
        use base64::Engine as _;
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let token = format!(
            "{}.{}.sig",
            b64(r#"{"alg":"RS256"}"#),
            b64(r#"{"exp":1234}"#)
        );
        assert_eq!(token_expiry(&format!("Bearer {token}")), Some(1234));
        assert_eq!(token_expiry(&format!("bearer {token}")), Some(1234));
        assert_eq!(token_expiry(&format!("Basic {token}")), None);
        assert_eq!(token_expiry("Bearer a.b"), None);
    }
}

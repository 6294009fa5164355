//! In front of every authenticated route: verify the bearer token, take one request from the
//! caller's rate-limit bucket (keyed by client id, or by peer address without a valid token),
//! and stamp the rate-limit headers on whatever the route answers. The operation's scope is
//! checked by the [`Authorized`] extractor of each handler.
use std::marker::PhantomData;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::request::Parts;

use crate::auth::{AuthError, Principal};
use crate::error::ApiError;
use crate::AppState;

/// The middleware (see the module docs).
pub(crate) async fn guard(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let verified = verify(&state, request.headers());
    let key = match &verified {
        Ok(principal) => format!("client:{}", principal.client_id()),
        Err(_) => match request.extensions().get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => format!("peer:{}", peer.ip()),
            None => "peer:unknown".to_owned(),
        },
    };
    let decision = state.inner.limiter.check(&key);
    let mut response = if !decision.allowed {
        ApiError::too_many_requests().into_response()
    } else {
        match verified {
            Ok(principal) => {
                request.extensions_mut().insert(principal);
                next.run(request).await
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
    if let Some(principal) = single.and_then(|value| state.inner.verified.get(value, now)) {
        return Ok(principal);
    }
    let principal = authority.verify_headers(headers)?;
    if let Some(value) = single {
        if let Some(exp) = token_expiry(value) {
            let until = exp
                .saturating_add(authority.leeway_secs())
                .min(now.saturating_add(VerifiedTokens::MAX_AGE_SECS));
            state.inner.verified.put(value, principal.clone(), until);
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

/// Header value → (caller, trusted until, UNIX seconds).
type TokenShard = std::collections::HashMap<Box<str>, (Principal, u64)>;

/// Recently verified `Authorization` values and their callers, so that a client reusing its
/// token (the common case) costs a hash lookup instead of an RSA verification per request.
///
/// Only successful verifications are kept, each until the token's `exp` plus the verifier's
/// leeway, and never longer than [`Self::MAX_AGE_SECS`]. The key is the exact header value, so
/// a cached entry answers exactly what the verifier answered for the same bytes. Bounded: a full
/// shard is emptied before it takes a new entry.
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

    fn get(&self, key: &str, now: u64) -> Option<Principal> {
        let mut shard = self.shard(key);
        match shard.get(key) {
            Some((principal, until)) if *until >= now => Some(principal.clone()),
            Some(_) => {
                shard.remove(key);
                None
            }
            None => None,
        }
    }

    fn put(&self, key: &str, principal: Principal, until: u64) {
        let mut shard = self.shard(key);
        if shard.len() >= Self::PER_SHARD {
            shard.clear();
        }
        shard.insert(key.into(), (principal, until));
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
    CreateOrganizations => "create:organizations",
    ReadGroupMembers => "read:group_members",
    ReadSessions => "read:sessions",
    ReadBranding => "read:branding",
    UpdateBranding => "update:branding",
    CreateUsers => "create:users",
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
        cache.put("Bearer a", principal.clone(), 100);
        assert_eq!(cache.get("Bearer a", 100), Some(principal.clone()));
        assert_eq!(cache.get("Bearer a", 101), None);
        assert_eq!(
            cache.get("Bearer a", 50),
            None,
            "an expired entry is dropped"
        );
        assert_eq!(cache.get("Bearer b", 0), None);
        for i in 0..VerifiedTokens::SHARDS * VerifiedTokens::PER_SHARD * 2 {
            cache.put(&format!("Bearer {i}"), principal.clone(), 100);
        }
        let held: usize = cache
            .shards
            .iter()
            .map(|s| s.lock().map(|m| m.len()).unwrap_or(0))
            .sum();
        assert!(held <= VerifiedTokens::SHARDS * VerifiedTokens::PER_SHARD);
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

//! Console sessions: opaque random ids mapped, in this process's memory, to the access token
//! the sign-in obtained. The token never leaves the server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::HeaderMap;
use rand::RngCore;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// How many sessions a process keeps at most (expired ones are dropped first).
pub(crate) const MAX_SESSIONS: usize = 10_000;

/// Why a console request has no usable session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SessionError {
    /// No session cookie, an unknown id, or a session of another tenant.
    #[error("Sign in to the console first.")]
    Missing,
    /// The session's token has expired.
    #[error("The console session has expired: sign in again.")]
    Expired,
    /// `X-CSRF-Token` missing or not the session's.
    #[error("Missing or wrong X-CSRF-Token.")]
    Csrf,
    /// A browser request from another site.
    #[error("Cross-site requests to the console are refused.")]
    CrossSite,
    /// [`MAX_SESSIONS`] live sessions.
    #[error("Too many console sessions: try again later.")]
    Full,
}

/// One signed-in console.
pub(crate) struct Session {
    id: String,
    issuer: String,
    client_id: String,
    scopes: Vec<String>,
    token: Zeroizing<String>,
    csrf: String,
    expires: Instant,
    expires_in: Duration,
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Session {
    /// A session of `client_id` at the tenant of `issuer`, holding `token` for `lifetime`.
    pub(crate) fn new(
        issuer: String,
        client_id: String,
        scopes: Vec<String>,
        token: String,
        lifetime: Duration,
    ) -> Self {
        Self {
            id: String::new(),
            issuer,
            client_id,
            scopes,
            token: Zeroizing::new(token),
            csrf: random_token(),
            expires: Instant::now() + lifetime,
            expires_in: lifetime,
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// What the console's script may know: client, scopes, CSRF token, seconds left.
    pub(crate) fn info(&self) -> serde_json::Value {
        let left = self
            .expires
            .saturating_duration_since(Instant::now())
            .as_secs()
            .min(self.expires_in.as_secs());
        serde_json::json!({
            "client_id": self.client_id,
            "scopes": self.scopes,
            "csrf_token": self.csrf,
            "expires_in": left,
        })
    }

    /// The request's `X-CSRF-Token` is this session's (compared in constant time).
    pub(crate) fn check_csrf(&self, headers: &HeaderMap) -> Result<(), SessionError> {
        let sent = headers
            .get("x-csrf-token")
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if bool::from(sent.ct_eq(self.csrf.as_bytes())) {
            Ok(())
        } else {
            Err(SessionError::Csrf)
        }
    }
}

/// Every live session of this process.
#[derive(Default)]
pub(crate) struct Sessions {
    by_id: Mutex<HashMap<String, Arc<Session>>>,
}

impl Sessions {
    /// Keeps `session` under a new random id, returned.
    pub(crate) fn insert(&self, mut session: Session) -> Result<String, SessionError> {
        let id = random_token();
        session.id = id.clone();
        let mut map = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_SESSIONS {
            let now = Instant::now();
            map.retain(|_, s| s.expires > now);
            if map.len() >= MAX_SESSIONS {
                return Err(SessionError::Full);
            }
        }
        map.insert(id.clone(), Arc::new(session));
        Ok(id)
    }

    /// The live session `id` of the tenant of `issuer`.
    pub(crate) fn get(&self, id: &str, issuer: &str) -> Result<Arc<Session>, SessionError> {
        let mut map = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let session = map.get(id).ok_or(SessionError::Missing)?;
        if session.issuer != issuer {
            return Err(SessionError::Missing);
        }
        if session.expires <= Instant::now() {
            map.remove(id);
            return Err(SessionError::Expired);
        }
        Ok(Arc::clone(session))
    }

    /// Ends session `id`.
    pub(crate) fn remove(&self, id: &str) {
        self.by_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(issuer: &str, lifetime: Duration) -> Session {
        Session::new(
            issuer.into(),
            "c".into(),
            vec!["read:network_acls".into()],
            "token".into(),
            lifetime,
        )
    }

    #[test]
    fn a_session_is_found_by_its_id_at_its_own_tenant_only() {
        let sessions = Sessions::default();
        let id = sessions
            .insert(session("https://a.test/", Duration::from_secs(60)))
            .unwrap();
        assert_eq!(
            sessions.get(&id, "https://a.test/").unwrap().token(),
            "token"
        );
        assert_eq!(
            sessions.get(&id, "https://b.test/").err(),
            Some(SessionError::Missing)
        );
        assert_eq!(
            sessions.get("nope", "https://a.test/").err(),
            Some(SessionError::Missing)
        );
        sessions.remove(&id);
        assert_eq!(
            sessions.get(&id, "https://a.test/").err(),
            Some(SessionError::Missing)
        );
    }

    #[test]
    fn an_expired_session_is_refused_and_dropped() {
        let sessions = Sessions::default();
        let id = sessions
            .insert(session("https://a.test/", Duration::ZERO))
            .unwrap();
        assert_eq!(
            sessions.get(&id, "https://a.test/").err(),
            Some(SessionError::Expired)
        );
        assert_eq!(
            sessions.get(&id, "https://a.test/").err(),
            Some(SessionError::Missing)
        );
    }

    #[test]
    fn the_csrf_token_must_be_the_sessions() {
        let s = session("https://a.test/", Duration::from_secs(60));
        let mut headers = HeaderMap::new();
        assert_eq!(s.check_csrf(&headers), Err(SessionError::Csrf));
        headers.insert("x-csrf-token", "wrong".parse().unwrap());
        assert_eq!(s.check_csrf(&headers), Err(SessionError::Csrf));
        headers.insert("x-csrf-token", s.csrf.parse().unwrap());
        assert_eq!(s.check_csrf(&headers), Ok(()));
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::default();
        for _ in 0..MAX_SESSIONS {
            sessions
                .insert(session("https://a.test/", Duration::from_secs(60)))
                .unwrap();
        }
        assert_eq!(
            sessions
                .insert(session("https://a.test/", Duration::from_secs(60)))
                .err(),
            Some(SessionError::Full)
        );
    }
}

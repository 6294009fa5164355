//! Bearer-token verification for the management API.

use super::authority::{unix_now, TenantAuthority};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, StatusCode};
use jsonwebtoken::errors::ErrorKind;
use serde::Deserialize;

/// Longest bearer token looked at; anything longer is refused before any parsing. A token
/// carrying all 242 management scopes is about 8 KiB, so this leaves room for long
/// domains while bounding the work an anonymous caller can cause.
const MAX_TOKEN_LEN: usize = 32 * 1024;

/// Why a request was not authenticated (401) or not authorised (403).
///
/// `Display` is the short public message for the error body; it never says more than
/// `Invalid token` about a bad token, except `Expired token`. The variant (visible in
/// `Debug`) tells the operator's log what exactly failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("Missing authentication")]
    MissingAuthentication,
    /// The `Authorization` header is not `Bearer <token>` (another scheme, no token,
    /// several headers, or bytes that are not visible ASCII).
    #[error("Bad HTTP authentication header format")]
    BadAuthorizationHeader,
    /// The token is not three base64url segments with a JSON header and claims of the
    /// expected types (a time claim that is not a number, a `null` member, a number out of
    /// range, a repeated member, ...), or is too long.
    #[error("Invalid token")]
    MalformedToken,
    /// The header's `alg` is not `RS256` (this includes `none` and every HMAC algorithm),
    /// or the header carries `crit` or a `typ` other than `JWT` or `at+jwt`.
    #[error("Invalid token")]
    UnsupportedAlgorithm,
    /// The header has no `kid`, or one that names none of the tenant's signing keys.
    #[error("Invalid token")]
    UnknownKey,
    /// The signature does not verify with our key.
    #[error("Invalid token")]
    BadSignature,
    /// `exp` is in the past (beyond the leeway).
    #[error("Expired token")]
    Expired,
    /// `nbf` or `iat` is in the future (beyond the leeway).
    #[error("Invalid token")]
    NotYetValid,
    /// `iss` is not exactly our issuer.
    #[error("Invalid token")]
    WrongIssuer,
    /// `aud` neither is nor contains the management API identifier.
    #[error("Invalid token")]
    WrongAudience,
    /// `exp`, `iat`, `iss`, `aud` or `sub` is missing, or the client id is empty.
    #[error("Invalid token")]
    MissingClaim,
    /// The token is valid but grants none of the scopes the operation accepts.
    #[error("Insufficient scope, expected any of: {expected}")]
    InsufficientScope {
        /// The accepted scopes, comma-separated.
        expected: String,
    },
}

impl AuthError {
    /// 401 for every authentication failure, 403 for [`AuthError::InsufficientScope`].
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InsufficientScope { .. } => StatusCode::FORBIDDEN,
            _ => StatusCode::UNAUTHORIZED,
        }
    }

    /// The `errorCode` of the error body: `insufficient_scope` for 403; none for 401, as the
    /// hosted API sends none there.
    pub fn error_code(&self) -> Option<&'static str> {
        match self {
            Self::InsufficientScope { .. } => Some("insufficient_scope"),
            _ => None,
        }
    }

    /// The public message (same as `Display`).
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// The `WWW-Authenticate` value for this error (RFC 6750 §3): `Bearer` alone when no
    /// credentials were sent, `Bearer error="invalid_request"` for a malformed header,
    /// `Bearer error="invalid_token", error_description="..."` for a rejected token and
    /// `Bearer error="insufficient_scope"` for a 403.
    pub fn www_authenticate(&self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Self::MissingAuthentication => "Bearer",
            Self::BadAuthorizationHeader => {
                r#"Bearer error="invalid_request", error_description="Bad HTTP authentication header format""#
            }
            Self::Expired => r#"Bearer error="invalid_token", error_description="Expired token""#,
            Self::InsufficientScope { .. } => r#"Bearer error="insufficient_scope""#,
            _ => r#"Bearer error="invalid_token", error_description="Invalid token""#,
        })
    }
}

/// The authenticated caller of a management request: the client and its granted scopes.
///
/// Keeps the token's `scope` claim as one string and compares items in place, so that a
/// token carrying all 242 management scopes costs one allocation, not 242.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    client_id: String,
    scope: String,
}

impl Principal {
    /// A principal from its parts (for handlers' tests and internal callers).
    pub fn new(
        client_id: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let scope: Vec<String> = scopes.into_iter().map(Into::into).collect();
        Self {
            client_id: client_id.into(),
            scope: scope.join(" "),
        }
    }

    /// The client the token was issued to (`azp`, else `sub` without `@clients`). This is
    /// the rate-limit key.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The granted scopes, in token order.
    pub fn scopes(&self) -> impl Iterator<Item = &str> + '_ {
        self.scope.split(' ').filter(|s| !s.is_empty())
    }

    /// Whether `scope` is granted: a whole-item exact comparison, so `create:network_aclsX`
    /// does not grant `create:network_acls`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes().any(|s| s == scope)
    }

    /// `Ok` when any of `accepted` is granted; otherwise the 403
    /// `Insufficient scope, expected any of: a,b`.
    pub fn require_any(&self, accepted: &[&str]) -> Result<(), AuthError> {
        if accepted.iter().any(|s| self.has_scope(s)) {
            Ok(())
        } else {
            Err(AuthError::InsufficientScope {
                expected: accepted.join(","),
            })
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AudienceClaim {
    One(String),
    Many(Vec<String>),
}

/// A time claim (RFC 7519 NumericDate): a JSON number of seconds since the UNIX epoch,
/// integer or not. Anything else (a string, `null`, an array, a number too large for a
/// double such as `1e400`, which the JSON parser refuses) makes the token malformed. A
/// fraction is rounded the strict way for each use: [`NumericDate::not_after`] (for `exp`)
/// down, [`NumericDate::not_before`] (for `nbf` and `iat`) up; negative times count as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NumericDate {
    floor: u64,
    ceil: u64,
}

impl NumericDate {
    fn not_after(self) -> u64 {
        self.floor
    }

    fn not_before(self) -> u64 {
        self.ceil
    }
}

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = NumericDate;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a NumericDate (a JSON number)")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<NumericDate, E> {
                Ok(NumericDate { floor: v, ceil: v })
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<NumericDate, E> {
                let v = u64::try_from(v).unwrap_or(0);
                Ok(NumericDate { floor: v, ceil: v })
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<NumericDate, E> {
                if !v.is_finite() {
                    return Err(E::custom("a NumericDate must be finite"));
                }
                // `as` saturates: negative times become 0, huge ones u64::MAX.
                Ok(NumericDate {
                    floor: v.floor() as u64,
                    ceil: v.ceil() as u64,
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A member that is absent is `None`; a member that is present must have the member's type,
/// so `null` is refused rather than taken for absent.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// The claims we read. Types are strict (see [`NumericDate`] for the times; `iss`, `sub`,
/// `azp` and `scope` are strings, `aud` a string or an array of strings); a member present
/// with another type, `null` included, makes the token malformed. Whether a member is
/// required is checked after parsing.
#[derive(Deserialize)]
struct VerifiedClaims {
    #[serde(default, deserialize_with = "present")]
    iss: Option<String>,
    #[serde(default, deserialize_with = "present")]
    aud: Option<AudienceClaim>,
    #[serde(default, deserialize_with = "present")]
    exp: Option<NumericDate>,
    #[serde(default, deserialize_with = "present")]
    nbf: Option<NumericDate>,
    #[serde(default, deserialize_with = "present")]
    iat: Option<NumericDate>,
    #[serde(default, deserialize_with = "present")]
    sub: Option<String>,
    #[serde(default, deserialize_with = "present")]
    azp: Option<String>,
    #[serde(default, deserialize_with = "present")]
    scope: Option<String>,
}

/// The JOSE header members we check, with the same strictness as the claims.
#[derive(Deserialize)]
struct JoseHeader {
    alg: String,
    #[serde(default, deserialize_with = "present")]
    kid: Option<String>,
    #[serde(default, deserialize_with = "present")]
    typ: Option<String>,
    #[serde(default, deserialize_with = "present")]
    crit: Option<serde_json::Value>,
}

impl TenantAuthority {
    /// Verify the `Authorization` header value of a management request.
    ///
    /// Accepts `Bearer <jwt>` (scheme case-insensitive) where the JWT is RS256 (`typ`, if
    /// present, `JWT` or `at+jwt`; no `crit`), names the `kid` of one of the tenant's keys and
    /// is signed by it, has `iss` exactly our issuer, `aud` equal to (or an array containing)
    /// the management audience, a `sub`, a numeric `exp` in the future, a numeric `iat` and
    /// (when present) `nbf` not in the future, all with the configured leeway.
    pub fn verify_bearer(&self, authorization: Option<&str>) -> Result<Principal, AuthError> {
        let value = authorization.ok_or(AuthError::MissingAuthentication)?;
        let (scheme, token) = value
            .split_once(' ')
            .ok_or(AuthError::BadAuthorizationHeader)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::BadAuthorizationHeader);
        }
        let token = token.trim_matches(' ');
        if token.is_empty() || token.contains(' ') {
            return Err(AuthError::BadAuthorizationHeader);
        }
        self.verify_token(token)
    }

    /// Verify the request's `Authorization` header(s): exactly one, visible ASCII, then as
    /// [`verify_bearer`](Self::verify_bearer).
    pub fn verify_headers(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let Some(first) = values.next() else {
            return Err(AuthError::MissingAuthentication);
        };
        if values.next().is_some() {
            return Err(AuthError::BadAuthorizationHeader);
        }
        let value = first
            .to_str()
            .map_err(|_| AuthError::BadAuthorizationHeader)?;
        self.verify_bearer(Some(value))
    }

    /// Verify a compact JWT (without the `Bearer ` prefix).
    pub fn verify_token(&self, token: &str) -> Result<Principal, AuthError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::MalformedToken);
        }
        let mut segments = token.split('.');
        let (Some(header), Some(_), Some(_), None) = (
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
        ) else {
            return Err(AuthError::MalformedToken);
        };
        if token
            .split('.')
            .any(|s| s.is_empty() || !s.bytes().all(is_base64url_byte))
        {
            return Err(AuthError::MalformedToken);
        }

        // Our own header checks first: the library would accept `crit`, any `typ`, any kid.
        let header_json = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| AuthError::MalformedToken)?;
        let header: JoseHeader =
            serde_json::from_slice(&header_json).map_err(|_| AuthError::MalformedToken)?;
        if header.alg != "RS256" || header.crit.is_some() {
            return Err(AuthError::UnsupportedAlgorithm);
        }
        if let Some(typ) = &header.typ {
            if !typ.eq_ignore_ascii_case("JWT") && !typ.eq_ignore_ascii_case("at+jwt") {
                return Err(AuthError::UnsupportedAlgorithm);
            }
        }
        let ring = self.key_ring();
        let key = header
            .kid
            .as_deref()
            .and_then(|kid| ring.get(kid))
            .ok_or(AuthError::UnknownKey)?;

        let data =
            jsonwebtoken::decode::<VerifiedClaims>(token, key.decoding_key(), &self.validation)
                .map_err(|e| match e.kind() {
                    ErrorKind::InvalidSignature => AuthError::BadSignature,
                    ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
                        AuthError::UnsupportedAlgorithm
                    }
                    ErrorKind::ExpiredSignature => AuthError::Expired,
                    ErrorKind::ImmatureSignature => AuthError::NotYetValid,
                    ErrorKind::InvalidIssuer => AuthError::WrongIssuer,
                    ErrorKind::InvalidAudience => AuthError::WrongAudience,
                    ErrorKind::MissingRequiredClaim(_) => AuthError::MissingClaim,
                    _ => AuthError::MalformedToken,
                })?;
        let claims = data.claims;

        // Explicit re-checks, independent of the library's defaults.
        if claims.iss.as_deref() != Some(self.issuer.as_str()) {
            return Err(AuthError::WrongIssuer);
        }
        let audience_ok = match &claims.aud {
            Some(AudienceClaim::One(aud)) => *aud == self.audience,
            Some(AudienceClaim::Many(auds)) => auds.contains(&self.audience),
            None => return Err(AuthError::MissingClaim),
        };
        if !audience_ok {
            return Err(AuthError::WrongAudience);
        }
        let now = unix_now();
        let exp = claims.exp.ok_or(AuthError::MissingClaim)?;
        let iat = claims.iat.ok_or(AuthError::MissingClaim)?;
        let sub = claims.sub.ok_or(AuthError::MissingClaim)?;
        if exp.not_after().saturating_add(self.leeway_secs) < now {
            return Err(AuthError::Expired);
        }
        let latest_start = now.saturating_add(self.leeway_secs);
        if claims
            .nbf
            .is_some_and(|nbf| nbf.not_before() > latest_start)
            || iat.not_before() > latest_start
        {
            return Err(AuthError::NotYetValid);
        }

        let client_id = match claims.azp {
            Some(azp) if !azp.is_empty() => azp,
            _ => match sub.strip_suffix("@clients") {
                Some(id) if !id.is_empty() => id.to_owned(),
                _ => sub,
            },
        };
        if client_id.is_empty() {
            return Err(AuthError::MissingClaim);
        }
        Ok(Principal {
            client_id,
            scope: claims.scope.unwrap_or_default(),
        })
    }
}

fn is_base64url_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_comparison_is_exact_per_item() {
        let p = Principal::new("c", ["create:network_aclsX", "read:network_acls"]);
        assert!(!p.has_scope("create:network_acls"));
        assert!(p.has_scope("read:network_acls"));
        assert!(!p.has_scope("read:network_acl"));
        assert!(p
            .require_any(&["update:network_acls", "read:network_acls"])
            .is_ok());
        let err = p
            .require_any(&["create:network_acls"])
            .expect_err("not granted");
        assert_eq!(err.status(), StatusCode::FORBIDDEN);
        assert_eq!(err.error_code(), Some("insufficient_scope"));
        assert_eq!(
            err.message(),
            "Insufficient scope, expected any of: create:network_acls"
        );
        let err = p
            .require_any(&["create:organizations", "create:organization_connections"])
            .expect_err("not granted");
        assert_eq!(
            err.message(),
            "Insufficient scope, expected any of: create:organizations,create:organization_connections"
        );
    }

    #[test]
    fn numeric_dates_are_numbers_rounded_the_strict_way() {
        let date = |text: &str| serde_json::from_str::<NumericDate>(text).map_err(|_| ());
        assert_eq!(
            date("1767225600"),
            Ok(NumericDate {
                floor: 1_767_225_600,
                ceil: 1_767_225_600
            })
        );
        assert_eq!(
            date("1767225600.5"),
            Ok(NumericDate {
                floor: 1_767_225_600,
                ceil: 1_767_225_601
            })
        );
        assert_eq!(
            date("1.7672256e9"),
            Ok(NumericDate {
                floor: 1_767_225_600,
                ceil: 1_767_225_600
            })
        );
        assert_eq!(date("-5"), Ok(NumericDate { floor: 0, ceil: 0 }));
        assert_eq!(
            date("1e300"),
            Ok(NumericDate {
                floor: u64::MAX,
                ceil: u64::MAX
            })
        );
        for bad in ["\"1767225600\"", "null", "1e400", "[1]", "{}", "true"] {
            assert_eq!(date(bad), Err(()), "{bad}");
        }
        // `null` is not "absent" for an optional claim.
        let claims = |text: &str| serde_json::from_str::<VerifiedClaims>(text).map(|c| c.nbf);
        assert!(matches!(claims("{}"), Ok(None)));
        assert!(claims(r#"{"nbf":null}"#).is_err());
        assert!(claims(r#"{"nbf":1,"nbf":2}"#).is_err());
    }

    #[test]
    fn authentication_errors_are_401_without_detail() {
        for e in [
            AuthError::MalformedToken,
            AuthError::UnsupportedAlgorithm,
            AuthError::UnknownKey,
            AuthError::BadSignature,
            AuthError::NotYetValid,
            AuthError::WrongIssuer,
            AuthError::WrongAudience,
            AuthError::MissingClaim,
        ] {
            assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(e.message(), "Invalid token");
            assert_eq!(e.error_code(), None);
            assert!(e
                .www_authenticate()
                .to_str()
                .is_ok_and(|v| v.contains("invalid_token")));
        }
        assert_eq!(AuthError::Expired.message(), "Expired token");
        assert_eq!(
            AuthError::MissingAuthentication.www_authenticate(),
            "Bearer"
        );
    }
}

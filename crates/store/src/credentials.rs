use std::fmt;

/// A tenant's token signing key, as stored. The private key never appears in `Debug` output.
///
/// The private key is kept sealed with the server's key-encryption key (`netacl-secrets`): the
/// store never sees it in clear. A database written before schema version 5 holds the PKCS#8
/// PEM itself in [`private_key`](Self::private_key) until the server's first start with a
/// key-encryption key seals it ([`CredentialStore::seal_signing_key`](crate::CredentialStore::seal_signing_key)).
///
/// The current key is the one not revoked, without `current_until`, with the latest
/// `current_since`; keys that were current and are not revoked are the previous keys.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSigningKey {
    /// The key id (`kid` of the JWT header and the JWKS).
    pub kid: String,
    /// The private key, sealed (`sealed-v1:...`); PKCS#8 PEM in rows from before schema 5.
    pub private_key: String,
    /// The public certificate (PEM); `None` in rows from before schema 5 until first start.
    pub cert_pem: Option<String>,
    /// When it was created (UNIX milliseconds).
    pub created_at_ms: i64,
    /// When it became the current key (UNIX milliseconds).
    pub current_since_ms: Option<i64>,
    /// When it stopped being the current key (UNIX milliseconds).
    pub current_until_ms: Option<i64>,
    /// When it was revoked (UNIX milliseconds); its tokens are refused from then on.
    pub revoked_at_ms: Option<i64>,
}

impl StoredSigningKey {
    /// A key that is current from its creation, not revoked, without a certificate yet.
    pub fn new(kid: impl Into<String>, private_key: impl Into<String>, created_at_ms: i64) -> Self {
        Self {
            kid: kid.into(),
            private_key: private_key.into(),
            cert_pem: None,
            created_at_ms,
            current_since_ms: Some(created_at_ms),
            current_until_ms: None,
            revoked_at_ms: None,
        }
    }

    /// Whether this is a current key (not revoked, no end of currency). Among several (there
    /// is one but for a race), the one with the latest `current_since` is in use.
    pub fn is_current(&self) -> bool {
        self.revoked_at_ms.is_none()
            && self.current_until_ms.is_none()
            && self.current_since_ms.is_some()
    }
}

/// What a rotation changes: the keys that stop being current, and whether `next` exists.
pub(crate) struct RotationPlan {
    pub(crate) retire: Vec<String>,
    pub(crate) exists: bool,
}

/// Checks a rotation against the stored keys (the same rules for every backend).
pub(crate) fn plan_rotation(
    keys: &[StoredSigningKey],
    expected_current: &str,
    next: &str,
) -> Result<RotationPlan, crate::StoreError> {
    let current = crate::current_key(keys).map(|k| k.kid.as_str());
    if current != Some(expected_current) {
        return Err(crate::StoreError::KeyConflict(
            "the current signing key changed concurrently".to_owned(),
        ));
    }
    let existing = keys.iter().find(|k| k.kid == next);
    if existing.is_some_and(|k| k.revoked_at_ms.is_some()) {
        return Err(crate::StoreError::KeyConflict(format!(
            "signing key {next} is revoked"
        )));
    }
    Ok(RotationPlan {
        retire: keys
            .iter()
            .filter(|k| k.is_current() && k.kid != next)
            .map(|k| k.kid.clone())
            .collect(),
        exists: existing.is_some(),
    })
}

/// Checks a revocation against the stored keys.
pub(crate) fn check_revocation(
    keys: &[StoredSigningKey],
    kid: &str,
) -> Result<(), crate::StoreError> {
    if !keys.iter().any(|k| k.kid == kid) {
        return Err(crate::StoreError::NotFound(format!("signing key {kid}")));
    }
    if crate::current_key(keys).is_some_and(|k| k.kid == kid) {
        return Err(crate::StoreError::KeyConflict(
            "the current signing key cannot be revoked".to_owned(),
        ));
    }
    Ok(())
}

impl fmt::Debug for StoredSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredSigningKey")
            .field("kid", &self.kid)
            .field("private_key", &"<redacted>")
            .field("created_at_ms", &self.created_at_ms)
            .field("current_since_ms", &self.current_since_ms)
            .field("current_until_ms", &self.current_until_ms)
            .field("revoked_at_ms", &self.revoked_at_ms)
            .finish_non_exhaustive()
    }
}

/// A registered API client (client-credentials grant), as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredClient {
    /// The client id.
    pub client_id: String,
    /// The hash of its secret (never the secret itself).
    pub secret_hash: String,
    /// The scopes it is granted.
    pub scopes: Vec<String>,
    /// When it was created (UNIX milliseconds).
    pub created_at_ms: i64,
}

impl fmt::Debug for StoredClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredClient")
            .field("client_id", &self.client_id)
            .field("secret_hash", &"<redacted>")
            .field("scopes", &self.scopes)
            .field("created_at_ms", &self.created_at_ms)
            .finish()
    }
}

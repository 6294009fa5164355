//! The operator token (`--operator-token-file`): the credential of the operator API
//! (`/_netacl/v1/tenants`), which is not a tenant token.
use subtle::ConstantTimeEq;

/// The operator token: at least 256 random bits, base64url. Compared in constant time; never
/// logged (`Debug` is redacted).
#[derive(Clone)]
pub struct OperatorToken(zeroize::Zeroizing<String>);

impl OperatorToken {
    /// Wraps a token read from the operator token file. `None` when shorter than 32 characters.
    pub fn new(token: String) -> Option<Self> {
        (token.len() >= 32).then(|| Self(zeroize::Zeroizing::new(token)))
    }

    /// A fresh token: 256 random bits, base64url without padding (43 characters).
    pub fn generate() -> Self {
        use base64::Engine;
        use rand::RngCore;
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(zeroize::Zeroizing::new(
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
        ))
    }

    /// The token's text (to write it to its file).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(presented).into()
    }
}

impl std::fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorToken(<redacted>)")
    }
}

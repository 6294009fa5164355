use std::fmt;

/// A tenant's token signing key, as stored. The private key never appears in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSigningKey {
    /// The key id (`kid` of the JWT header and the JWKS).
    pub kid: String,
    /// The private key, PKCS#8 PEM.
    pub private_key_pem: String,
    /// When it was created (UNIX milliseconds).
    pub created_at_ms: i64,
}

impl fmt::Debug for StoredSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredSigningKey")
            .field("kid", &self.kid)
            .field("private_key_pem", &"<redacted>")
            .field("created_at_ms", &self.created_at_ms)
            .finish()
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

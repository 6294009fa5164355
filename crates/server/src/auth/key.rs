//! The tenant's token-signing key.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{DecodingKey, EncodingKey};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
use rsa::pkcs8::der::zeroize::Zeroizing;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::RsaPrivateKey;
use sha2::{Digest, Sha256};
use std::fmt;

/// Size of a freshly generated key, in bits.
pub const GENERATED_KEY_BITS: usize = 2048;

/// Smallest key accepted by [`SigningKey::from_pem`], in bits.
pub const MIN_KEY_BITS: usize = 2048;

/// Why a signing key could not be created, loaded or exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Key generation failed (the operating system's random source or the RSA library).
    #[error("RSA key generation failed")]
    Generate,
    /// The PEM text is neither a PKCS#8 (`PRIVATE KEY`) nor a PKCS#1 (`RSA PRIVATE KEY`)
    /// RSA private key. The parser's detail is not kept: it could echo key material.
    #[error("not a PKCS#8 or PKCS#1 PEM-encoded RSA private key")]
    Parse,
    /// The key parsed but is internally inconsistent.
    #[error("the RSA private key is inconsistent")]
    Invalid,
    /// The key is shorter than [`MIN_KEY_BITS`].
    #[error("the RSA key has {bits} bits; at least {MIN_KEY_BITS} are required")]
    TooShort {
        /// The key's modulus size.
        bits: usize,
    },
    /// The key could not be encoded (PKCS#1 DER or PKCS#8 PEM).
    #[error("the RSA key could not be encoded")]
    Encode,
}

/// The RSA key that signs the tenant's access tokens (RS256).
///
/// Holds the private key, the derived `jsonwebtoken` encoding and decoding keys, the key id
/// (`kid`, the RFC 7638 JWK thumbprint of the public key, so it is stable across restarts
/// and identical for identical keys) and the public JWK parameters. `Debug` prints the
/// `kid` and the size only, never key material. Persisting the key is the store's job:
/// export it with [`to_pem`](Self::to_pem) and load it back with
/// [`from_pem`](Self::from_pem).
pub struct SigningKey {
    private: RsaPrivateKey,
    encoding: EncodingKey,
    decoding: DecodingKey,
    kid: String,
    n: String,
    e: String,
    bits: usize,
}

impl SigningKey {
    /// Generate a new 2048-bit key from the operating system's random source.
    ///
    /// This takes a noticeable fraction of a second even in optimised builds: do it once
    /// at first start and store the result.
    pub fn generate() -> Result<Self, KeyError> {
        let mut rng = rand::rngs::OsRng;
        let private =
            RsaPrivateKey::new(&mut rng, GENERATED_KEY_BITS).map_err(|_| KeyError::Generate)?;
        Self::from_private(private)
    }

    /// Load a key from PEM: PKCS#8 (`-----BEGIN PRIVATE KEY-----`, what
    /// [`to_pem`](Self::to_pem) writes) or PKCS#1 (`-----BEGIN RSA PRIVATE KEY-----`).
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let private = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem))
            .map_err(|_| KeyError::Parse)?;
        Self::from_private(private)
    }

    fn from_private(private: RsaPrivateKey) -> Result<Self, KeyError> {
        private.validate().map_err(|_| KeyError::Invalid)?;
        let bits = private.size() * 8;
        if bits < MIN_KEY_BITS {
            return Err(KeyError::TooShort { bits });
        }
        let der = private.to_pkcs1_der().map_err(|_| KeyError::Encode)?;
        let encoding = EncodingKey::from_rsa_der(der.as_bytes());
        let n_bytes = private.n().to_bytes_be();
        let e_bytes = private.e().to_bytes_be();
        let decoding = DecodingKey::from_rsa_raw_components(&n_bytes, &e_bytes);
        let n = URL_SAFE_NO_PAD.encode(&n_bytes);
        let e = URL_SAFE_NO_PAD.encode(&e_bytes);
        // RFC 7638: SHA-256 over the required members in lexicographic order, no whitespace.
        let thumbprint_input = format!(r#"{{"e":"{e}","kty":"RSA","n":"{n}"}}"#);
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(thumbprint_input.as_bytes()));
        Ok(Self {
            private,
            encoding,
            decoding,
            kid,
            n,
            e,
            bits,
        })
    }

    /// The private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, LF line endings).
    /// The text is wiped from memory when the returned value is dropped.
    pub fn to_pem(&self) -> Result<Zeroizing<String>, KeyError> {
        self.private
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|_| KeyError::Encode)
    }

    /// The key id: the base64url RFC 7638 thumbprint of the public key (43 characters).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The modulus size in bits.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// The public key as a JSON Web Key Set, the document served at
    /// `/.well-known/jwks.json`: `{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid","n","e"}]}`.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({
            "keys": [{
                "kty": "RSA",
                "use": "sig",
                "alg": "RS256",
                "kid": self.kid,
                "n": self.n,
                "e": self.e,
            }]
        })
    }

    pub(crate) fn encoding_key(&self) -> &EncodingKey {
        &self.encoding
    }

    pub(crate) fn decoding_key(&self) -> &DecodingKey {
        &self.decoding
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .field("bits", &self.bits)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// One key per test binary: 2048-bit generation is slow.
    pub(crate) fn test_key_pem() -> &'static str {
        static PEM: OnceLock<String> = OnceLock::new();
        PEM.get_or_init(|| {
            let key = SigningKey::generate().expect("key generation");
            key.to_pem().expect("export").to_string()
        })
    }

    #[test]
    fn pem_round_trip_keeps_the_kid_and_jwks() {
        let pem = test_key_pem();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        let a = SigningKey::from_pem(pem).expect("load");
        let b = SigningKey::from_pem(&a.to_pem().expect("export")).expect("reload");
        assert_eq!(a.kid(), b.kid());
        assert_eq!(a.kid().len(), 43);
        assert_eq!(a.bits(), 2048);
        assert_eq!(a.jwks(), b.jwks());
        let jwk = &a.jwks()["keys"][0];
        assert_eq!(jwk["kty"], "RSA");
        assert_eq!(jwk["alg"], "RS256");
        assert_eq!(jwk["use"], "sig");
        assert_eq!(jwk["kid"], a.kid());
        assert_eq!(jwk["e"], "AQAB");
        assert_eq!(jwk["n"].as_str().map(str::len), Some(342));
    }

    #[test]
    fn pkcs1_pem_is_accepted_too() {
        let a = SigningKey::from_pem(test_key_pem()).expect("load");
        let pkcs1 = a
            .private
            .to_pkcs1_pem(LineEnding::LF)
            .expect("pkcs1 export");
        let b = SigningKey::from_pem(&pkcs1).expect("pkcs1 load");
        assert_eq!(a.kid(), b.kid());
    }

    #[test]
    fn garbage_and_short_keys_are_refused() {
        assert!(matches!(SigningKey::from_pem(""), Err(KeyError::Parse)));
        assert!(matches!(
            SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
            Err(KeyError::Parse)
        ));
        let short = RsaPrivateKey::new(&mut rand::rngs::OsRng, 1024).expect("1024-bit key");
        let pem = short.to_pkcs8_pem(LineEnding::LF).expect("export");
        assert!(matches!(
            SigningKey::from_pem(&pem),
            Err(KeyError::TooShort { bits: 1024 })
        ));
    }

    #[test]
    fn debug_shows_no_key_material() {
        let key = SigningKey::from_pem(test_key_pem()).expect("load");
        let shown = format!("{key:?}");
        assert!(shown.contains(key.kid()));
        let n = key.jwks()["keys"][0]["n"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(!shown.contains(&n[..20]));
        assert!(!shown.contains("PRIVATE"));
    }
}

//! The tenant's token-signing key.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use jsonwebtoken::DecodingKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use sha2::{Digest, Sha256};
use std::fmt;
use zeroize::Zeroizing;

/// Size of a freshly generated key, in bits.
pub const GENERATED_KEY_BITS: usize = 2048;

/// Smallest key accepted by [`SigningKey::from_pem`], in bits.
pub const MIN_KEY_BITS: usize = 2048;

/// Largest key accepted by [`SigningKey::from_pem`], in bits.
pub const MAX_KEY_BITS: usize = 8192;

/// Why a signing key could not be created, loaded, used or exported.
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
    #[error("the RSA key is shorter than {MIN_KEY_BITS} bits")]
    TooShort,
    /// The key is longer than [`MAX_KEY_BITS`].
    #[error("the RSA key is longer than {MAX_KEY_BITS} bits")]
    TooLong,
    /// The key could not be encoded (PKCS#8 PEM).
    #[error("the RSA key could not be encoded")]
    Encode,
    /// Signing failed (the RSA library).
    #[error("RSA signing failed")]
    Sign,
}

/// The RSA key that signs the tenant's access tokens (RS256).
///
/// The private key lives in AWS-LC (`aws-lc-rs`): generation, parsing and signing are its
/// constant-time, blinded RSA; the key material is wiped when the key is dropped. Beside it
/// are the `jsonwebtoken` decoding key (the public modulus and exponent, used to verify
/// tokens), the key id (`kid`, the RFC 7638 JWK thumbprint of the public key, so it is stable
/// across restarts and identical for identical keys) and the public JWK parameters. `Debug`
/// prints the `kid` and the size only, never key material. Persisting the key is the store's
/// job: export it with [`to_pem`](Self::to_pem) and load it back with
/// [`from_pem`](Self::from_pem).
pub struct SigningKey {
    key_pair: KeyPair,
    decoding: DecodingKey,
    kid: String,
    n: String,
    e: String,
    bits: usize,
}

impl SigningKey {
    /// Generate a new 2048-bit key from the operating system's random source.
    ///
    /// This takes a noticeable fraction of a second: do it once at first start and store the
    /// result.
    pub fn generate() -> Result<Self, KeyError> {
        let key_pair = KeyPair::generate(KeySize::Rsa2048).map_err(|_| KeyError::Generate)?;
        Self::from_key_pair(key_pair)
    }

    /// Load a key from PEM: PKCS#8 (`-----BEGIN PRIVATE KEY-----`, what
    /// [`to_pem`](Self::to_pem) writes, and what every version of netacl has stored) or PKCS#1
    /// (`-----BEGIN RSA PRIVATE KEY-----`). The first private key in the text is used. The key
    /// must be consistent (checked by AWS-LC) and have [`MIN_KEY_BITS`] to [`MAX_KEY_BITS`] bits.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let der = PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|_| KeyError::Parse)?;
        let parsed = match &der {
            PrivateKeyDer::Pkcs8(der) => KeyPair::from_pkcs8(der.secret_pkcs8_der()),
            PrivateKeyDer::Pkcs1(der) => KeyPair::from_der(der.secret_pkcs1_der()),
            _ => return Err(KeyError::Parse),
        };
        let key_pair = parsed.map_err(|rejected| match rejected.description_() {
            "TooSmall" => KeyError::TooShort,
            "TooLarge" => KeyError::TooLong,
            "WrongAlgorithm" | "InvalidEncoding" => KeyError::Parse,
            _ => KeyError::Invalid,
        })?;
        Self::from_key_pair(key_pair)
    }

    fn from_key_pair(key_pair: KeyPair) -> Result<Self, KeyError> {
        let bits = key_pair.public_modulus_len() * 8;
        if bits < MIN_KEY_BITS {
            return Err(KeyError::TooShort);
        }
        if bits > MAX_KEY_BITS {
            return Err(KeyError::TooLong);
        }
        let public = key_pair.public_key();
        let n_bytes = public.modulus().big_endian_without_leading_zero();
        let e_bytes = public.exponent().big_endian_without_leading_zero();
        let decoding = DecodingKey::from_rsa_raw_components(n_bytes, e_bytes);
        let n = URL_SAFE_NO_PAD.encode(n_bytes);
        let e = URL_SAFE_NO_PAD.encode(e_bytes);
        // RFC 7638: SHA-256 over the required members in lexicographic order, no whitespace.
        let thumbprint_input = format!(r#"{{"e":"{e}","kty":"RSA","n":"{n}"}}"#);
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(thumbprint_input.as_bytes()));
        Ok(Self {
            key_pair,
            decoding,
            kid,
            n,
            e,
            bits,
        })
    }

    /// The private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, LF line endings, 64
    /// characters a line, RFC 7468). The text and every intermediate copy are wiped from
    /// memory when dropped.
    pub fn to_pem(&self) -> Result<Zeroizing<String>, KeyError> {
        const BEGIN: &str = "-----BEGIN PRIVATE KEY-----\n";
        const END: &str = "-----END PRIVATE KEY-----\n";
        let der = self.key_pair.as_der().map_err(|_| KeyError::Encode)?;
        let base64 = Zeroizing::new(STANDARD.encode(der.as_ref()));
        // Sized up front, so the text is never reallocated (which would leave a copy behind).
        let mut pem = Zeroizing::new(String::with_capacity(
            BEGIN.len() + base64.len() + base64.len().div_ceil(64) + END.len(),
        ));
        pem.push_str(BEGIN);
        for line in base64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).map_err(|_| KeyError::Encode)?);
            pem.push('\n');
        }
        pem.push_str(END);
        Ok(pem)
    }

    /// The RS256 signature (RSASSA-PKCS1-v1_5 with SHA-256) of `message`, for a JWS: the
    /// message is the ASCII `BASE64URL(header) || '.' || BASE64URL(payload)`.
    pub fn sign_rs256(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let mut signature = vec![0; self.key_pair.public_modulus_len()];
        self.key_pair
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                message,
                &mut signature,
            )
            .map_err(|_| KeyError::Sign)?;
        Ok(signature)
    }

    /// A compact RS256 JWT of `claims`, with the header `{"alg":"RS256","typ":"JWT","kid":...}`.
    pub(crate) fn sign_jwt<T: serde::Serialize>(&self, claims: &T) -> Result<String, KeyError> {
        #[derive(serde::Serialize)]
        struct JwsHeader<'a> {
            alg: &'static str,
            typ: &'static str,
            kid: &'a str,
        }
        let header = serde_json::to_vec(&JwsHeader {
            alg: "RS256",
            typ: "JWT",
            kid: &self.kid,
        })
        .map_err(|_| KeyError::Encode)?;
        let claims = serde_json::to_vec(claims).map_err(|_| KeyError::Encode)?;
        let mut token = URL_SAFE_NO_PAD.encode(header);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(claims, &mut token);
        let signature = self.sign_rs256(token.as_bytes())?;
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        Ok(token)
    }

    /// The key id: the base64url RFC 7638 thumbprint of the public key (43 characters).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The modulus size in bits.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// The public key as a JSON Web Key Set:
    /// `{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid","n","e"}]}`.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({ "keys": [self.jwk()] })
    }

    /// The public key as one JSON Web Key: `{"kty":"RSA","use":"sig","alg":"RS256","kid","n","e"}`.
    pub fn jwk(&self) -> serde_json::Value {
        serde_json::json!({
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.kid,
            "n": self.n,
            "e": self.e,
        })
    }

    /// A self-signed X.509 certificate of the public key (PEM), subject `CN=<common_name>`,
    /// valid for ten years from now: the `cert` of the signing-keys API. The key pair is
    /// handed to `rcgen` as PKCS#8 for the signature only; the copy is wiped when dropped.
    pub fn self_signed_certificate(&self, common_name: &str) -> Result<String, KeyError> {
        let pem = self.to_pem()?;
        let pair = rcgen::KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256)
            .map_err(|_| KeyError::Encode)?;
        let mut params =
            rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|_| KeyError::Encode)?;
        let mut name = rcgen::DistinguishedName::new();
        name.push(rcgen::DnType::CommonName, common_name);
        params.distinguished_name = name;
        let now = std::time::SystemTime::now();
        params.not_before = now.into();
        params.not_after = (now + std::time::Duration::from_secs(10 * 365 * 86_400)).into();
        let mut serial = [0u8; 16];
        aws_lc_rs::rand::fill(&mut serial).map_err(|_| KeyError::Generate)?;
        serial[0] &= 0x7f;
        params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
        let cert = params.self_signed(&pair).map_err(|_| KeyError::Encode)?;
        Ok(cert.pem())
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

    /// A key written by netacl before the move to AWS-LC (the `rsa` crate's PKCS#8 PEM, as
    /// stored in existing databases), the same key as PKCS#1, and the JWKS that code served.
    const LEGACY_PKCS8: &str = include_str!("../../../../testdata/keys/legacy-pkcs8.pem");
    const LEGACY_PKCS1: &str = include_str!("../../../../testdata/keys/legacy-pkcs1.pem");
    const LEGACY_JWKS: &str = include_str!("../../../../testdata/keys/legacy-jwks.json");
    const SHORT_1024: &str = include_str!("../../../../testdata/keys/short-1024-pkcs8.pem");

    #[test]
    fn pem_round_trip_keeps_the_kid_and_jwks() {
        let pem = test_key_pem();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        assert!(pem.ends_with("\n-----END PRIVATE KEY-----\n"));
        assert!(pem.lines().all(|line| line.len() <= 64));
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
    fn keys_stored_by_earlier_versions_load_with_their_kid_and_jwks() {
        let legacy_jwks: serde_json::Value = serde_json::from_str(LEGACY_JWKS).expect("json");
        for pem in [LEGACY_PKCS8, LEGACY_PKCS1] {
            let key = SigningKey::from_pem(pem).expect("legacy key loads");
            assert_eq!(key.jwks(), legacy_jwks);
            assert_eq!(key.kid(), legacy_jwks["keys"][0]["kid"]);
            assert_eq!(key.bits(), 2048);
        }
        // Exported again, it is PKCS#8 and still the same key.
        let key = SigningKey::from_pem(LEGACY_PKCS8).expect("load");
        let again = SigningKey::from_pem(&key.to_pem().expect("export")).expect("reload");
        assert_eq!(again.jwks(), legacy_jwks);
    }

    #[test]
    fn signatures_verify_with_the_published_jwk() {
        for pem in [test_key_pem(), LEGACY_PKCS8] {
            let key = SigningKey::from_pem(pem).expect("load");
            let header = URL_SAFE_NO_PAD.encode(format!(
                r#"{{"alg":"RS256","typ":"JWT","kid":"{}"}}"#,
                key.kid()
            ));
            let claims = URL_SAFE_NO_PAD.encode(r#"{"sub":"x","exp":4102444800}"#);
            let message = format!("{header}.{claims}");
            let signature = key.sign_rs256(message.as_bytes()).expect("sign");
            assert_eq!(signature.len(), 256);
            let token = format!("{message}.{}", URL_SAFE_NO_PAD.encode(&signature));
            // Verified from the JWKS alone, as a third party would.
            let jwk = &key.jwks()["keys"][0];
            let public = DecodingKey::from_rsa_components(
                jwk["n"].as_str().unwrap_or_default(),
                jwk["e"].as_str().unwrap_or_default(),
            )
            .expect("public key");
            let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
            validation.required_spec_claims.clear();
            validation.validate_aud = false;
            let decoded = jsonwebtoken::decode::<serde_json::Value>(&token, &public, &validation)
                .expect("verifies");
            assert_eq!(decoded.claims["sub"], "x");
            // One bit changed in the message: refused.
            let tampered = format!(
                "{header}.{}X.{}",
                claims,
                URL_SAFE_NO_PAD.encode(&signature)
            );
            assert!(
                jsonwebtoken::decode::<serde_json::Value>(&tampered, &public, &validation).is_err()
            );
        }
    }

    #[test]
    fn garbage_short_and_inconsistent_keys_are_refused() {
        assert!(matches!(SigningKey::from_pem(""), Err(KeyError::Parse)));
        assert!(matches!(
            SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
            Err(KeyError::Parse)
        ));
        assert!(matches!(
            SigningKey::from_pem(SHORT_1024),
            Err(KeyError::TooShort)
        ));
        // The legacy PKCS#1 key with its last CRT coefficient byte changed: it still parses
        // as DER, but the components no longer agree.
        let body: String = LEGACY_PKCS1
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        let mut der = STANDARD.decode(body).expect("base64");
        if let Some(last) = der.last_mut() {
            *last ^= 0x01;
        }
        let tampered = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n",
            STANDARD.encode(&der)
        );
        assert!(matches!(
            SigningKey::from_pem(&tampered),
            Err(KeyError::Invalid)
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

//! Registered clients (machine-to-machine applications) and their secrets.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::RngCore as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// Bytes of randomness in a generated client secret (384 bits; 64 base64url characters).
const SECRET_BYTES: usize = 48;
/// Length of a generated client id.
const CLIENT_ID_LEN: usize = 32;
/// Bytes of salt in a secret hash.
const SALT_BYTES: usize = 16;
/// Prefix naming the hash scheme, so that a stronger one can be added later.
const HASH_SCHEME: &str = "sha256";

/// A client allowed to obtain tokens with the client-credentials grant.
///
/// The store persists these (serde); the authority only reads them. `secret_hash` is the
/// output of [`hash_client_secret`], never the secret itself. `scopes` are the scopes the
/// client is granted; `allowed_audiences` are the API identifiers it may request tokens for
/// (the authority additionally refuses every audience other than the management API's).
/// `Debug` leaves out the secret hash.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRecord {
    /// The public client identifier (`client_id`).
    pub client_id: String,
    /// The salted hash of the client secret, as made by [`hash_client_secret`].
    pub secret_hash: String,
    /// The granted scopes, e.g. `create:network_acls`.
    pub scopes: Vec<String>,
    /// The audiences this client may request, e.g. `https://tenant.example/api/v2/`.
    pub allowed_audiences: Vec<String>,
}

impl fmt::Debug for ClientRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRecord")
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("allowed_audiences", &self.allowed_audiences)
            .finish_non_exhaustive()
    }
}

/// Hash a client secret for storage: `sha256$<salt>$<digest>` with a fresh random 128-bit
/// salt, both parts base64url, digest = SHA-256(salt ‖ secret).
///
/// A fast salted hash is enough here because the secrets this service issues
/// ([`generate_client_secret`]) carry 384 bits of randomness: no dictionary applies and no
/// work factor would make a brute force any less hopeless. Do not use this for
/// human-chosen passwords.
pub fn hash_client_secret(secret: &str) -> String {
    let mut salt = [0u8; SALT_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    let digest = salted_digest(&salt, secret);
    format!(
        "{HASH_SCHEME}${}${}",
        URL_SAFE_NO_PAD.encode(salt),
        URL_SAFE_NO_PAD.encode(digest)
    )
}

/// Check `secret` against a hash made by [`hash_client_secret`], in time independent of
/// where the digests differ. A malformed hash never verifies.
pub fn verify_client_secret(secret: &str, secret_hash: &str) -> bool {
    let mut parts = secret_hash.split('$');
    let (Some(HASH_SCHEME), Some(salt), Some(digest), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Ok(salt), Ok(expected)) = (URL_SAFE_NO_PAD.decode(salt), URL_SAFE_NO_PAD.decode(digest))
    else {
        return false;
    };
    let actual = salted_digest(&salt, secret);
    constant_time_eq(&actual, &expected)
}

/// A hash that matches no secret, used to spend the same work on an unknown client id as
/// on a known one.
pub(crate) const DUMMY_SECRET_HASH: &str =
    "sha256$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// A new client secret: 384 random bits from the operating system, base64url without
/// padding (64 characters).
pub fn generate_client_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A new client id: 32 characters of `[A-Za-z0-9]` (about 190 random bits), the shape of
/// the ids the official tooling prints.
pub fn generate_client_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::with_capacity(CLIENT_ID_LEN);
    let mut rng = rand::rngs::OsRng;
    while out.len() < CLIENT_ID_LEN {
        let mut byte = [0u8; 1];
        rng.fill_bytes(&mut byte);
        // Rejection sampling keeps the distribution uniform: 248 = 4 * 62.
        if byte[0] < 248 {
            out.push(char::from(ALPHABET[usize::from(byte[0] % 62)]));
        }
    }
    out
}

fn salted_digest(salt: &[u8], secret: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(secret.as_bytes());
    hasher.finalize().into()
}

/// Compare two byte strings without an early exit on the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_verifies_only_the_right_secret() {
        let secret = generate_client_secret();
        let hash = hash_client_secret(&secret);
        assert!(hash.starts_with("sha256$"));
        assert!(!hash.contains(&secret));
        assert!(verify_client_secret(&secret, &hash));
        assert!(!verify_client_secret(&format!("{secret}x"), &hash));
        assert!(!verify_client_secret("", &hash));
        // Fresh salt every time.
        assert_ne!(hash, hash_client_secret(&secret));
    }

    #[test]
    fn malformed_hashes_never_verify() {
        for bad in [
            "",
            "sha256",
            "sha256$$",
            "md5$AAAA$AAAA",
            "sha256$!!$AAAA",
            "sha256$AAAA$AAAA$AAAA",
            DUMMY_SECRET_HASH,
        ] {
            assert!(!verify_client_secret("anything", bad), "{bad}");
            assert!(!verify_client_secret("", bad), "{bad}");
        }
    }

    #[test]
    fn generated_values_have_the_documented_shape() {
        let secret = generate_client_secret();
        assert_eq!(secret.len(), 64);
        assert_eq!(
            URL_SAFE_NO_PAD.decode(&secret).map(|b| b.len()).ok(),
            Some(48)
        );
        assert_ne!(secret, generate_client_secret());
        let id = generate_client_id();
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(id, generate_client_id());
    }

    #[test]
    fn debug_hides_the_secret_hash() {
        let record = ClientRecord {
            client_id: "abc".into(),
            secret_hash: hash_client_secret("s3cret"),
            scopes: vec!["read:network_acls".into()],
            allowed_audiences: vec![],
        };
        let shown = format!("{record:?}");
        assert!(shown.contains("abc"));
        assert!(!shown.contains("sha256$"));
    }
}

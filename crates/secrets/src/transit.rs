//! Secrets in transit to an edge: HPKE (RFC 9180) base mode, sealed by the admin server to a key
//! pair the edge made for this process.
//!
//! The suite is DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and ChaCha20-Poly1305 (the `hpke`
//! crate, rust-hpke). The edge generates a [`TransitKeyPair`] when it starts (never stored, gone
//! with the process) and sends its [`TransitPublicKey`] with each watch request; the server seals
//! each secret to it with [`TransitPublicKey::seal`], bound to a [`SecretContext`] (tenant,
//! purpose, record id) as associated data, so a sealed value moved onto another key id or
//! another tenant does not open. A sealed value reveals the secret's length and nothing else;
//! a recording of the wire (inside TLS or not) without the edge's private key gives no secret.
//!
//! ```
//! use netacl_secrets::{transit::{TransitKeyPair, TransitPublicKey}, SecretContext};
//!
//! let edge = TransitKeyPair::generate();
//! // The edge sends this text; the server parses it back.
//! let public = TransitPublicKey::parse(&edge.public_key().to_base64url()).unwrap();
//! let here = SecretContext::new("tenant-a", "network_acl_key", "nak_1");
//! let sealed = public.seal(&here, &[7u8; 32]).unwrap();
//! assert_eq!(edge.open(&here, &sealed).unwrap().expose(), &[7u8; 32]);
//! // Bound to its context: another key id does not open.
//! let elsewhere = SecretContext::new("tenant-a", "network_acl_key", "nak_2");
//! assert!(edge.open(&elsewhere, &sealed).is_err());
//! ```
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hpke::aead::ChaCha20Poly1305;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem as _, OpModeR, OpModeS, Serializable};
use zeroize::Zeroizing;

use crate::{SecretBytes, SecretContext};

type Kem = X25519HkdfSha256;

/// The prefix of a sealed value (the format's version).
const PREFIX: &str = "hpke-v1:";
/// HPKE's `info`: what the key schedule is for.
const INFO: &[u8] = b"netacl network ACL key material in transit v1";
/// Length of an X25519 public key (and of the encapsulated key).
const KEY_LEN: usize = 32;
/// The longest secret sealed (a network ACL key is at most 64 bytes).
pub const MAX_TRANSIT_SECRET: usize = 1024;

/// Why a value could not be sealed or opened. Never names the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitError {
    /// The sealed text is not `hpke-v1:<base64url>` of the right length.
    #[error("sealed value is malformed")]
    Malformed,
    /// The value does not open with this key pair and context (another edge's key, another
    /// record, or a tampered value).
    #[error("sealed value does not open with this key pair and context")]
    Open,
    /// The secret is longer than [`MAX_TRANSIT_SECRET`].
    #[error("secret too long to seal")]
    TooLong,
    /// The HPKE implementation refused to seal.
    #[error("sealing failed")]
    Seal,
}

/// An edge's public key, as it travels in the watch request (`base64url`, 43 characters).
#[derive(Clone)]
pub struct TransitPublicKey(<Kem as hpke::Kem>::PublicKey);

impl PartialEq for TransitPublicKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bytes() == other.0.to_bytes()
    }
}

impl Eq for TransitPublicKey {}

impl std::fmt::Debug for TransitPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TransitPublicKey({})", self.to_base64url())
    }
}

impl TransitPublicKey {
    /// Parses the base64url text (no padding) of an X25519 public key; `None` when it is not
    /// 32 bytes or not a valid point encoding.
    pub fn parse(text: &str) -> Option<TransitPublicKey> {
        if text.len() > 64 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() != KEY_LEN {
            return None;
        }
        let key = <Kem as hpke::Kem>::PublicKey::from_bytes(&bytes).ok()?;
        // A low-order point (all zeros, ...) gives an all-zero shared secret, which RFC 9180
        // refuses: found out here, with one trial encapsulation, not when sealing.
        Kem::encap(&key, None).ok()?;
        Some(TransitPublicKey(key))
    }

    /// The base64url text (no padding).
    pub fn to_base64url(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.to_bytes())
    }

    /// Seals `secret` to this key, bound to `context`: `hpke-v1:<base64url(enc ‖ ciphertext ‖
    /// tag)>`. Each call uses a fresh encapsulation, so two seals of one secret differ.
    pub fn seal(&self, context: &SecretContext<'_>, secret: &[u8]) -> Result<String, TransitError> {
        if secret.len() > MAX_TRANSIT_SECRET {
            return Err(TransitError::TooLong);
        }
        let (enc, ciphertext) = hpke::single_shot_seal::<ChaCha20Poly1305, HkdfSha256, Kem>(
            &OpModeS::Base,
            &self.0,
            INFO,
            secret,
            &context.transit_aad(),
        )
        .map_err(|_| TransitError::Seal)?;
        let mut out = Vec::with_capacity(KEY_LEN + ciphertext.len());
        out.extend_from_slice(&enc.to_bytes());
        out.extend_from_slice(&ciphertext);
        Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(out)))
    }
}

/// The key pair an edge makes for its process: the private half never leaves memory and is
/// zeroed when dropped (by the `hpke` crate); `Debug` shows only the public half.
pub struct TransitKeyPair {
    private: <Kem as hpke::Kem>::PrivateKey,
    public: TransitPublicKey,
}

impl std::fmt::Debug for TransitKeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransitKeyPair")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl TransitKeyPair {
    /// A fresh key pair from AWS-LC's random generator (RFC 9180 `DeriveKeyPair` over 32
    /// random bytes).
    pub fn generate() -> TransitKeyPair {
        let mut ikm = Zeroizing::new([0u8; KEY_LEN]);
        // AWS-LC's generator does not fail on the platforms it builds for; should it, the
        // derived key would be predictable, so refuse to go on rather than serve with it.
        if aws_lc_rs::rand::fill(ikm.as_mut_slice()).is_err() {
            std::process::abort();
        }
        let (private, public) = Kem::derive_keypair(ikm.as_slice());
        TransitKeyPair {
            private,
            public: TransitPublicKey(public),
        }
    }

    /// The public half.
    pub fn public_key(&self) -> &TransitPublicKey {
        &self.public
    }

    /// Opens a value [sealed](TransitPublicKey::seal) to this key pair under `context`.
    pub fn open(
        &self,
        context: &SecretContext<'_>,
        sealed: &str,
    ) -> Result<SecretBytes, TransitError> {
        let text = sealed.strip_prefix(PREFIX).ok_or(TransitError::Malformed)?;
        if text.len() > (KEY_LEN + MAX_TRANSIT_SECRET + 16) * 4 / 3 + 4 {
            return Err(TransitError::Malformed);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| TransitError::Malformed)?;
        if bytes.len() < KEY_LEN + 16 {
            return Err(TransitError::Malformed);
        }
        let (enc, ciphertext) = bytes.split_at(KEY_LEN);
        let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(enc)
            .map_err(|_| TransitError::Malformed)?;
        let plain = hpke::single_shot_open::<ChaCha20Poly1305, HkdfSha256, Kem>(
            &OpModeR::Base,
            &self.private,
            &enc,
            INFO,
            ciphertext,
            &context.transit_aad(),
        )
        .map_err(|_| TransitError::Open)?;
        Ok(SecretBytes::new(plain))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_pair_and_context() {
        let edge = TransitKeyPair::generate();
        let other = TransitKeyPair::generate();
        let here = SecretContext::new("t", "network_acl_key", "nak_1");
        let secret = [0x5au8; 48];
        let sealed = edge.public_key().seal(&here, &secret).unwrap();
        assert!(sealed.starts_with(PREFIX));
        assert_eq!(edge.open(&here, &sealed).unwrap().expose(), &secret);
        assert_eq!(other.open(&here, &sealed).err(), Some(TransitError::Open));
        for context in [
            SecretContext::new("u", "network_acl_key", "nak_1"),
            SecretContext::new("t", "signing_key", "nak_1"),
            SecretContext::new("t", "network_acl_key", "nak_2"),
        ] {
            assert_eq!(edge.open(&context, &sealed).err(), Some(TransitError::Open));
        }
        // Fresh encapsulation per seal.
        assert_ne!(sealed, edge.public_key().seal(&here, &secret).unwrap());
        // Tampering with any byte fails.
        let mut bytes = URL_SAFE_NO_PAD.decode(&sealed[PREFIX.len()..]).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let tampered = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&bytes));
        assert_eq!(edge.open(&here, &tampered).err(), Some(TransitError::Open));
    }

    #[test]
    fn malformed_input_is_refused_without_panicking() {
        let edge = TransitKeyPair::generate();
        let here = SecretContext::new("t", "p", "r");
        for text in [
            "",
            "hpke-v1:",
            "hpke-v1:!!",
            "sealed-v1:abc",
            "hpke-v1:AAAA",
        ] {
            assert_eq!(
                edge.open(&here, text).err(),
                Some(TransitError::Malformed),
                "{text}"
            );
        }
        let huge = format!("{PREFIX}{}", "A".repeat(10_000));
        assert_eq!(edge.open(&here, &huge).err(), Some(TransitError::Malformed));
        assert!(TransitPublicKey::parse("").is_none());
        assert!(TransitPublicKey::parse("AAAA").is_none());
        assert!(TransitPublicKey::parse(&"A".repeat(100)).is_none());
        // The all-zero point is of low order: refused.
        assert!(TransitPublicKey::parse(&"A".repeat(43)).is_none());
        let text = edge.public_key().to_base64url();
        assert_eq!(text.len(), 43);
        assert_eq!(
            TransitPublicKey::parse(&text).as_ref(),
            Some(edge.public_key())
        );
        let huge_secret = vec![0u8; MAX_TRANSIT_SECRET + 1];
        assert_eq!(
            edge.public_key().seal(&here, &huge_secret),
            Err(TransitError::TooLong)
        );
    }
}

//! Sealing: AES-256-GCM, a random nonce per seal, the record's context as associated data.

use std::fmt;

use aws_lc_rs::aead::{Aad, Nonce, NONCE_LEN};
use base64::Engine as _;

use crate::{Kek, KekId, SecretBytes, SecretsError};

/// The prefix of every sealed value of this version.
const PREFIX: &str = "sealed-v1:";
const TAG_LEN: usize = 16;

/// What a secret is: the associated data of its seal. A sealed value opens only under the same
/// tenant, purpose and record id it was sealed with, so a value copied onto another record (a
/// previous key's row, another tenant's row) is refused instead of being used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretContext<'a> {
    tenant: &'a str,
    purpose: &'a str,
    record_id: &'a str,
}

impl<'a> SecretContext<'a> {
    /// The tenant the secret belongs to, what it is (`"signing_key"`, `"network_acl_key"`, ...),
    /// and the id of its record (a `kid`, a key id).
    pub fn new(tenant: &'a str, purpose: &'a str, record_id: &'a str) -> SecretContext<'a> {
        SecretContext {
            tenant,
            purpose,
            record_id,
        }
    }

    /// The associated data: a domain tag, the KEK id, then each field length-prefixed, so that
    /// no two distinct contexts encode alike.
    fn aad(&self, kek: KekId) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(32 + self.tenant.len() + self.purpose.len() + self.record_id.len());
        out.extend_from_slice(b"netacl-secrets sealed-v1\0");
        out.extend_from_slice(&kek.0);
        for field in [self.tenant, self.purpose, self.record_id] {
            out.extend_from_slice(&(field.len() as u64).to_be_bytes());
            out.extend_from_slice(field.as_bytes());
        }
        out
    }

    /// The associated data of a value sealed in transit ([`crate::transit`]): another domain
    /// tag, then each field length-prefixed.
    pub(crate) fn transit_aad(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(32 + self.tenant.len() + self.purpose.len() + self.record_id.len());
        out.extend_from_slice(b"netacl-secrets transit-v1\0");
        for field in [self.tenant, self.purpose, self.record_id] {
            out.extend_from_slice(&(field.len() as u64).to_be_bytes());
            out.extend_from_slice(field.as_bytes());
        }
        out
    }
}

/// A sealed secret as stored: `sealed-v1:<kek id>:<base64url(nonce ‖ ciphertext ‖ tag)>`.
/// Safe to store and to log (it reveals the length of the secret and the KEK's id, nothing else).
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret(String);

impl SealedSecret {
    /// The stored text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The stored text, owned.
    pub fn into_string(self) -> String {
        self.0
    }

    /// The id of the key-encryption key that sealed a stored value, if it is a sealed value.
    pub fn kek_id(stored: &str) -> Option<KekId> {
        split(stored).map(|(id, _)| id)
    }
}

impl fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match split(&self.0) {
            Some((id, _)) => write!(f, "SealedSecret(kek {id})"),
            None => f.write_str("SealedSecret(?)"),
        }
    }
}

/// Whether a stored value is sealed (as opposed to the plaintext an older database kept).
/// A sealed value starts with `sealed-v1:`; a PEM starts with `-----BEGIN`.
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

fn split(stored: &str) -> Option<(KekId, &str)> {
    let rest = stored.strip_prefix(PREFIX)?;
    let (id, payload) = rest.split_once(':')?;
    Some((KekId::parse(id)?, payload))
}

impl Kek {
    /// Seals `secret` for the record `context` names.
    pub fn seal(
        &self,
        context: &SecretContext<'_>,
        secret: &[u8],
    ) -> Result<SealedSecret, SecretsError> {
        let mut buf = Vec::with_capacity(NONCE_LEN + secret.len() + TAG_LEN);
        buf.extend_from_slice(&[0u8; NONCE_LEN]);
        buf.extend_from_slice(secret);
        let (nonce, tag) = self
            .cipher
            .seal_in_place_separate_tag(Aad::from(context.aad(self.id)), &mut buf[NONCE_LEN..])
            .map_err(|_| SecretsError::Crypto)?;
        buf[..NONCE_LEN].copy_from_slice(nonce.as_ref());
        buf.extend_from_slice(tag.as_ref());
        let mut text = String::with_capacity(PREFIX.len() + 17 + buf.len() * 4 / 3 + 4);
        text.push_str(PREFIX);
        text.push_str(&self.id.to_string());
        text.push(':');
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(&buf, &mut text);
        Ok(SealedSecret(text))
    }

    /// Opens a stored sealed value for the record `context` names.
    ///
    /// Refused: a value that is not sealed ([`SecretsError::Malformed`]), one sealed by another
    /// KEK ([`SecretsError::WrongKek`]), one altered or sealed for another record
    /// ([`SecretsError::Open`]).
    pub fn open(
        &self,
        context: &SecretContext<'_>,
        stored: &str,
    ) -> Result<SecretBytes, SecretsError> {
        let (id, payload) = split(stored).ok_or(SecretsError::Malformed)?;
        if id != self.id {
            return Err(SecretsError::WrongKek {
                sealed_with: id,
                loaded: self.id,
            });
        }
        let mut buf = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| SecretsError::Malformed)?;
        if buf.len() < NONCE_LEN + TAG_LEN {
            return Err(SecretsError::Malformed);
        }
        let nonce = Nonce::try_assume_unique_for_key(&buf[..NONCE_LEN])
            .map_err(|_| SecretsError::Malformed)?;
        let opened = self.cipher.open_in_place(
            nonce,
            Aad::from(context.aad(self.id)),
            &mut buf[NONCE_LEN..],
        );
        let len = match opened {
            Ok(plain) => plain.len(),
            Err(_) => {
                zeroize::Zeroize::zeroize(&mut buf);
                return Err(SecretsError::Open);
            }
        };
        buf.copy_within(NONCE_LEN..NONCE_LEN + len, 0);
        // The tail (a second copy of the plaintext's end, and the tag) is cleared before it is cut.
        zeroize::Zeroize::zeroize(&mut buf[len..]);
        buf.truncate(len);
        Ok(SecretBytes::new(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(record: &str) -> SecretContext<'_> {
        SecretContext::new("t", "signing_key", record)
    }

    #[test]
    fn seals_open_only_in_their_context() {
        let kek = Kek::generate().unwrap();
        let sealed = kek.seal(&ctx("a"), b"secret").unwrap();
        assert_eq!(
            kek.open(&ctx("a"), sealed.as_str()).unwrap().expose(),
            b"secret"
        );
        assert!(matches!(
            kek.open(&ctx("b"), sealed.as_str()),
            Err(SecretsError::Open)
        ));
        let other_tenant = SecretContext::new("u", "signing_key", "a");
        assert!(matches!(
            kek.open(&other_tenant, sealed.as_str()),
            Err(SecretsError::Open)
        ));
        let other_purpose = SecretContext::new("t", "network_acl_key", "a");
        assert!(matches!(
            kek.open(&other_purpose, sealed.as_str()),
            Err(SecretsError::Open)
        ));
        // Field boundaries count: ("ab", "c") is not ("a", "bc").
        let sealed = kek.seal(&SecretContext::new("ab", "c", "d"), b"x").unwrap();
        let shifted = SecretContext::new("a", "bc", "d");
        assert!(kek.open(&shifted, sealed.as_str()).is_err());
    }

    #[test]
    fn every_seal_has_its_own_nonce() {
        let kek = Kek::generate().unwrap();
        let a = kek.seal(&ctx("a"), b"same").unwrap();
        let b = kek.seal(&ctx("a"), b"same").unwrap();
        assert_ne!(a, b);
        assert!(!a.as_str().contains("same"));
    }

    #[test]
    fn altered_or_foreign_values_are_refused() {
        let kek = Kek::generate().unwrap();
        let other = Kek::generate().unwrap();
        let sealed = kek.seal(&ctx("a"), b"secret").unwrap().into_string();
        match other.open(&ctx("a"), &sealed) {
            Err(SecretsError::WrongKek {
                sealed_with,
                loaded,
            }) => {
                assert_eq!(sealed_with, kek.id());
                assert_eq!(loaded, other.id());
            }
            r => panic!("{r:?}"),
        }
        // Every byte of the payload flipped in turn is refused.
        let head = sealed.rfind(':').unwrap() + 1;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&sealed[head..])
            .unwrap();
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 1;
            let text = format!(
                "{}{}",
                &sealed[..head],
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bad)
            );
            assert!(
                matches!(kek.open(&ctx("a"), &text), Err(SecretsError::Open)),
                "byte {i}"
            );
        }
        for bad in [
            "",
            "-----BEGIN PRIVATE KEY-----",
            "sealed-v1:",
            "sealed-v1:zz:AAAA",
            &format!("sealed-v1:{}:", kek.id()),
            &format!("sealed-v1:{}:AAAA", kek.id()),
            &format!("sealed-v1:{}:!!!!", kek.id()),
            &format!("sealed-v2:{}", &sealed[10..]),
        ] {
            assert!(
                matches!(
                    kek.open(&ctx("a"), bad),
                    Err(SecretsError::Malformed | SecretsError::WrongKek { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn nothing_secret_in_debug_or_errors() {
        let kek = Kek::from_bytes(&[0x41; 32]).unwrap();
        let shown = format!("{kek:?}");
        assert!(shown.contains(&kek.id().to_string()));
        assert!(!shown.contains("AAAA") && !shown.contains("65, 65"));
        let sealed = kek.seal(&ctx("a"), b"hunter2").unwrap();
        let opened = kek.open(&ctx("a"), sealed.as_str()).unwrap();
        assert_eq!(format!("{opened:?}"), "SecretBytes([redacted])");
        assert!(!format!("{sealed:?}").contains(sealed.as_str()));
        let err = kek
            .open(&ctx("b"), sealed.as_str())
            .unwrap_err()
            .to_string();
        assert!(!err.contains(sealed.as_str()) && !err.contains("hunter2"));
    }

    #[test]
    fn sealed_values_say_which_kek() {
        let kek = Kek::generate().unwrap();
        let sealed = kek.seal(&ctx("a"), b"").unwrap();
        assert!(is_sealed(sealed.as_str()));
        assert_eq!(SealedSecret::kek_id(sealed.as_str()), Some(kek.id()));
        assert_eq!(kek.open(&ctx("a"), sealed.as_str()).unwrap().expose(), b"");
        assert!(!is_sealed("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(SealedSecret::kek_id("-----BEGIN"), None);
    }
}

//! Network ACL keys prepared for verifying HMAC-SHA256 tags: the key schedule is computed once
//! per key (when the keys in force change), not per request, and compared in constant time.
use std::collections::HashMap;

use aws_lc_rs::hmac;

/// Why a tag does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MacError {
    /// No key has this id.
    #[error("unknown key")]
    UnknownKey,
    /// The tag is not the MAC of the message under the key.
    #[error("tag mismatch")]
    Mismatch,
}

/// Key id → prepared HMAC-SHA256 key. `Debug` shows only the ids; the material is held by
/// AWS-LC (its key schedule, cleared when dropped) and cannot be read back.
#[derive(Default)]
pub struct MacKeys {
    keys: HashMap<Box<str>, hmac::Key>,
}

impl std::fmt::Debug for MacKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.keys.keys()).finish()
    }
}

impl MacKeys {
    /// Keys from `(id, material)` pairs (a repeated id keeps the last).
    pub fn new<'a>(keys: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        Self {
            keys: keys
                .into_iter()
                .map(|(id, material)| (Box::from(id), hmac::Key::new(hmac::HMAC_SHA256, material)))
                .collect(),
        }
    }

    /// Whether there is no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether a key has this id.
    pub fn contains(&self, id: &str) -> bool {
        self.keys.contains_key(id)
    }

    /// The key ids, in no particular order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(|k| &**k)
    }

    /// Verifies that `tag` is the HMAC-SHA256 of `message` under key `id` (constant-time
    /// comparison); the id as held here.
    pub fn verify(&self, id: &str, message: &[u8], tag: &[u8]) -> Result<&str, MacError> {
        let (held, key) = self.keys.get_key_value(id).ok_or(MacError::UnknownKey)?;
        hmac::verify(key, message, tag).map_err(|_| MacError::Mismatch)?;
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_with_the_named_key_only() {
        let keys = MacKeys::new([("a", &[1u8; 32][..]), ("b", &[2u8; 32][..])]);
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &[1u8; 32]), b"m");
        assert_eq!(keys.verify("a", b"m", tag.as_ref()), Ok("a"));
        assert_eq!(
            keys.verify("b", b"m", tag.as_ref()),
            Err(MacError::Mismatch)
        );
        assert_eq!(
            keys.verify("a", b"n", tag.as_ref()),
            Err(MacError::Mismatch)
        );
        assert_eq!(
            keys.verify("c", b"m", tag.as_ref()),
            Err(MacError::UnknownKey)
        );
        assert_eq!(format!("{keys:?}").len(), "{\"a\", \"b\"}".len());
        assert!(!format!("{keys:?}").contains("1, 1"));
    }
}

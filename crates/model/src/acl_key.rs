//! Network ACL keys (`/api/v2/keys/network-acls`): the shared HMAC secrets a tenant's own proxy
//! signs requests with (RFC 9421), named by rules in `http_message_signature`.
//!
//! The material is write-only: it enters in a create body, is validated here into
//! [`KeyMaterial`] (which never prints itself and is wiped when dropped), and leaves the model
//! only as its [fingerprint](KeyMaterial::fingerprint). No error message quotes it.
use std::fmt;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::schema::{ObjectReader, ObjectSchema, StringRule};
use crate::{Timestamp, ValidationError};

/// The only algorithm a network ACL key has.
pub const NETWORK_ACL_KEY_ALG: &str = "hmac-sha256";
/// The fewest bytes a key's decoded material may hold (the HMAC-SHA256 output size).
pub const MIN_KEY_BYTES: usize = 32;
/// The most bytes a key's decoded material may hold (the HMAC-SHA256 block size: longer keys
/// are hashed first by HMAC and gain nothing).
pub const MAX_KEY_BYTES: usize = 64;
/// The longest key id a rule may name.
pub const MAX_KEY_ID_LEN: usize = 64;

const CREATE: ObjectSchema<'static> = ObjectSchema {
    allowed: &["name", "alg", "value"],
    required: &["name", "alg", "value"],
    min_properties: 0,
};

const NAME: StringRule = StringRule::between(1, 255);

/// The id of a network ACL key, as a rule names it: 1 to 64 characters of `A-Z a-z 0-9 _ - .`.
/// The server gives new keys `nak_` and 22 base58 digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetworkAclKeyId(String);

impl NetworkAclKeyId {
    /// Parses an id; `None` when it is empty, too long or holds another character.
    pub fn parse(text: &str) -> Option<Self> {
        let ok = !text.is_empty()
            && text.len() <= MAX_KEY_ID_LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        ok.then(|| Self(text.to_owned()))
    }

    /// The id that 128 random bits spell: `nak_` and 22 base58 digits.
    pub fn from_random(mut bits: u128) -> Self {
        const BASE58: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        let mut digits = [b'1'; 22];
        for digit in digits.iter_mut().rev() {
            *digit = BASE58[(bits % 58) as usize];
            bits /= 58;
        }
        let mut text = String::with_capacity(26);
        text.push_str("nak_");
        text.extend(digits.iter().map(|&d| char::from(d)));
        Self(text)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NetworkAclKeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A key's secret bytes (32 to 64). `Debug` shows only the length; the bytes are overwritten
/// with zeros when the value is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyMaterial(Vec<u8>);

impl KeyMaterial {
    /// Material from raw bytes; `None` outside [`MIN_KEY_BYTES`]..=[`MAX_KEY_BYTES`].
    pub fn from_bytes(bytes: Vec<u8>) -> Option<Self> {
        if (MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&bytes.len()) {
            Some(Self(bytes))
        } else {
            let mut bytes = bytes;
            wipe(&mut bytes);
            None
        }
    }

    /// The secret bytes (for the MAC and for sealing only).
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// The fingerprint: the lowercase hex SHA-256 of the decoded bytes (64 characters).
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(&self.0);
        let mut out = String::with_capacity(64);
        for byte in digest {
            out.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
            out.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
        }
        out
    }
}

fn wipe(bytes: &mut Vec<u8>) {
    zeroize::Zeroize::zeroize(bytes);
}

impl Drop for KeyMaterial {
    fn drop(&mut self) {
        wipe(&mut self.0);
    }
}

impl fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyMaterial({} bytes, redacted)", self.0.len())
    }
}

/// A validated create body: `{name, alg, value}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkAclKeySpec {
    /// The label, unique within the tenant (1 to 255 characters).
    pub name: String,
    /// The decoded material.
    pub material: KeyMaterial,
}

impl NetworkAclKeySpec {
    /// Validates a create body. `value` is standard base64 (padding optional) of 32 to 64
    /// bytes; no error quotes it.
    pub fn from_json(body: &Value) -> Result<Self, ValidationError> {
        let object = ObjectReader::new(body, "", &CREATE)?;
        let name = object.required("name", object.string("name", NAME)?)?;
        object.required("alg", object.enum_string("alg", &[NETWORK_ACL_KEY_ALG])?)?;
        // The value's type is checked without quoting it.
        let value = match object.get("value") {
            Some(Value::String(text)) => text,
            Some(other) => {
                return Err(ValidationError::new(
                    "value",
                    crate::schema::type_error("string", other),
                ))
            }
            None => return Err(object.error(crate::schema::missing_property("value"))),
        };
        let material = decode_material(value)?;
        Ok(Self {
            name: name.to_owned(),
            material,
        })
    }
}

/// Decodes base64 key material: standard alphabet, `=` padding optional, no whitespace.
fn decode_material(text: &str) -> Result<KeyMaterial, ValidationError> {
    let bytes = decode_base64(text.as_bytes()).ok_or_else(|| {
        ValidationError::new(
            "value",
            "Object didn't pass validation for format base64 (the value is not shown)",
        )
    })?;
    let len = bytes.len();
    KeyMaterial::from_bytes(bytes).ok_or_else(|| {
        ValidationError::new(
            "value",
            format!("Decoded key is {len} bytes, must be {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes"),
        )
    })
}

/// Standard base64, `=` padding optional, no whitespace, no
/// non-zero trailing bits.
fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const STANDARD_ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    STANDARD_ANY_PADDING.decode(text).ok()
}

/// A stored key as the API answers it: exactly `id`, `name`, `alg`, `fingerprint`,
/// `created_at`, `updated_at` (never the material).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkAclKey {
    /// The id rules name.
    pub id: NetworkAclKeyId,
    /// The label.
    pub name: String,
    /// The lowercase hex SHA-256 of the material.
    pub fingerprint: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed (keys are immutable: equal to `created_at`).
    pub updated_at: Timestamp,
}

impl NetworkAclKey {
    /// The record as the API answers it.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("id".into(), self.id.as_str().into());
        out.insert("name".into(), self.name.as_str().into());
        out.insert("alg".into(), NETWORK_ACL_KEY_ALG.into());
        out.insert("fingerprint".into(), self.fingerprint.as_str().into());
        out.insert("created_at".into(), self.created_at.to_string().into());
        out.insert("updated_at".into(), self.updated_at.to_string().into());
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str =
        "uzvJfB4u3N0Jy4T7NZ75MDVcr8zSTInedJtkgcu46YW4XByzNJjxBdtjUkdJPBtbmHhIDi6pcl8jsasjlTMtDQ==";

    #[test]
    fn create_bodies() {
        let spec = NetworkAclKeySpec::from_json(
            &json!({"name": "proxy", "alg": "hmac-sha256", "value": SECRET}),
        )
        .unwrap();
        assert_eq!(spec.material.expose().len(), 64);
        assert_eq!(spec.material.fingerprint().len(), 64);
        let unpadded = SECRET.trim_end_matches('=');
        let again = NetworkAclKeySpec::from_json(
            &json!({"name": "proxy", "alg": "hmac-sha256", "value": unpadded}),
        )
        .unwrap();
        assert_eq!(again.material, spec.material);
        assert!(!format!("{spec:?}").contains(&SECRET[..20]));
        let cases = [
            (
                json!({"name": "p", "alg": "hmac-sha256"}),
                "",
                "Missing required property: value",
            ),
            (
                json!({"name": "p", "alg": "hs256", "value": SECRET}),
                "alg",
                "No enum match for: \"hs256\"",
            ),
            (
                json!({"name": "", "alg": "hmac-sha256", "value": SECRET}),
                "name",
                "String is too short (0 chars), minimum 1",
            ),
            (
                json!({"name": "p", "alg": "hmac-sha256", "value": 5}),
                "value",
                "Expected type string but found type integer",
            ),
            (
                json!({"name": "p", "alg": "hmac-sha256", "value": "c2hvcnQ="}),
                "value",
                "Decoded key is 5 bytes, must be 32 to 64 bytes",
            ),
            (
                json!({"name": "p", "alg": "hmac-sha256", "value": "not base64!"}),
                "value",
                "Object didn't pass validation for format base64 (the value is not shown)",
            ),
            (
                json!({"name": "p", "alg": "hmac-sha256", "value": SECRET, "x": 1}),
                "",
                "Additional properties not allowed: x",
            ),
        ];
        for (body, path, reason) in cases {
            let err = NetworkAclKeySpec::from_json(&body).unwrap_err();
            assert_eq!(
                (err.path.as_str(), err.reason.as_str()),
                (path, reason),
                "{body}"
            );
        }
    }

    #[test]
    fn base64_decoding_is_strict() {
        assert_eq!(decode_base64(b"TWFu").unwrap(), b"Man");
        assert_eq!(decode_base64(b"TWE=").unwrap(), b"Ma");
        assert_eq!(decode_base64(b"TWE").unwrap(), b"Ma");
        assert_eq!(decode_base64(b"TQ==").unwrap(), b"M");
        assert!(
            decode_base64(b"TR==").is_none(),
            "non-canonical trailing bits"
        );
        assert!(decode_base64(b"TWE=TWE=").is_none());
        assert!(decode_base64(b"T").is_none());
        assert!(decode_base64(b"TW-_").is_none());
    }

    #[test]
    fn ids() {
        let id = NetworkAclKeyId::from_random(u128::MAX);
        assert!(id.as_str().starts_with("nak_") && id.as_str().len() == 26);
        assert_eq!(NetworkAclKeyId::parse(id.as_str()), Some(id));
        assert!(NetworkAclKeyId::parse("").is_none());
        assert!(NetworkAclKeyId::parse("a b").is_none());
        assert!(NetworkAclKeyId::parse(&"a".repeat(65)).is_none());
        assert!(NetworkAclKeyId::parse("test-shared-secret").is_some());
    }
}

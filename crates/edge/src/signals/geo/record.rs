//! The few fields enrichment decodes from a MaxMind record, borrowed from the loaded database:
//! no allocation, and only the parts of the record that are asked for.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// An ISO 3166-2 subdivision code such as `US-NY` or `GB-ENG`: the country code, `-`, and the
/// database's subdivision code (one to three letters or digits), uppercase. Stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubdivisionCode {
    bytes: [u8; 6],
    len: u8,
}

impl SubdivisionCode {
    /// Builds `CC-XXX` from a country code and a subdivision code. `None` unless the country
    /// code is two ASCII letters and the subdivision code one to three ASCII letters or digits.
    pub fn new(country: [u8; 2], subdivision: &str) -> Option<SubdivisionCode> {
        let code = subdivision.as_bytes();
        if !country.iter().all(u8::is_ascii_alphabetic)
            || code.is_empty()
            || code.len() > 3
            || !code.iter().all(u8::is_ascii_alphanumeric)
        {
            return None;
        }
        let mut bytes = [0u8; 6];
        bytes[0] = country[0].to_ascii_uppercase();
        bytes[1] = country[1].to_ascii_uppercase();
        bytes[2] = b'-';
        for (slot, byte) in bytes[3..].iter_mut().zip(code) {
            *slot = byte.to_ascii_uppercase();
        }
        Some(SubdivisionCode {
            bytes,
            len: 3 + code.len() as u8,
        })
    }

    /// The code as text, e.g. `US-NY`.
    pub fn as_str(&self) -> &str {
        let bytes = self.bytes.get(..usize::from(self.len)).unwrap_or_default();
        // Only ASCII is ever stored.
        std::str::from_utf8(bytes).unwrap_or_default()
    }
}

impl Deref for SubdivisionCode {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for SubdivisionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SubdivisionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SubdivisionCode({:?})", self.as_str())
    }
}

/// An ISO 3166-1 alpha-2 code from a record: two ASCII letters, uppercased.
pub(crate) fn country_code(iso: &str) -> Option<[u8; 2]> {
    match iso.as_bytes() {
        [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
            Some([a.to_ascii_uppercase(), b.to_ascii_uppercase()])
        }
        _ => None,
    }
}

/// The decoded part of a City or Country record: the country's ISO code and, when
/// `WITH_SUBDIVISION`, the first subdivision's.
#[derive(Debug, Default)]
pub(crate) struct Location<'a, const WITH_SUBDIVISION: bool> {
    pub(crate) country: Option<&'a str>,
    pub(crate) subdivision: Option<&'a str>,
}

impl<'de, const WITH_SUBDIVISION: bool> Deserialize<'de> for Location<'de, WITH_SUBDIVISION> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LocationVisitor::<WITH_SUBDIVISION>)
    }
}

struct LocationVisitor<const WITH_SUBDIVISION: bool>;

impl<'de, const WITH_SUBDIVISION: bool> Visitor<'de> for LocationVisitor<WITH_SUBDIVISION> {
    type Value = Location<'de, WITH_SUBDIVISION>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a City or Country record (a map)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut location = Location::default();
        let mut seen_country = false;
        let mut seen_subdivisions = !WITH_SUBDIVISION;
        // Stop as soon as the wanted keys are decoded. Only this outermost map may stop early:
        // the reader discards the rest of the record, while a nested value cut short would
        // leave the decoder in the middle of it.
        while !(seen_country && seen_subdivisions) {
            let Some(key) = map.next_key::<&'de str>()? else {
                break;
            };
            match key {
                "country" => {
                    location.country = map.next_value::<IsoCode<'de>>()?.iso_code;
                    seen_country = true;
                }
                "subdivisions" if WITH_SUBDIVISION => {
                    location.subdivision = map
                        .next_value::<First<IsoCode<'de>>>()?
                        .0
                        .and_then(|s| s.iso_code);
                    seen_subdivisions = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(location)
    }
}

/// `{"iso_code": ...}` of a country or subdivision; other keys are skipped. (Nested values are
/// read to their end, so that the enclosing map can go on.)
#[derive(Debug, Deserialize)]
pub(crate) struct IsoCode<'a> {
    #[serde(borrow, default)]
    pub(crate) iso_code: Option<&'a str>,
}

/// The first element of an array; the rest is skipped.
pub(crate) struct First<T>(pub(crate) Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FirstVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for FirstVisitor<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<T>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        deserializer.deserialize_seq(FirstVisitor(PhantomData))
    }
}

/// The decoded part of an ASN record.
#[derive(Debug, Deserialize)]
pub(crate) struct AsnRecord {
    #[serde(default)]
    pub(crate) autonomous_system_number: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdivision_codes() {
        assert_eq!(
            SubdivisionCode::new(*b"US", "NY").unwrap().as_str(),
            "US-NY"
        );
        assert_eq!(
            SubdivisionCode::new(*b"gb", "eng").unwrap().as_str(),
            "GB-ENG"
        );
        assert_eq!(&*SubdivisionCode::new(*b"FR", "75").unwrap(), "FR-75");
        assert!(SubdivisionCode::new(*b"US", "").is_none());
        assert!(SubdivisionCode::new(*b"US", "ABCD").is_none());
        assert!(SubdivisionCode::new(*b"US", "N-Y").is_none());
        assert!(SubdivisionCode::new(*b"U1", "NY").is_none());
    }

    #[test]
    fn country_codes() {
        assert_eq!(country_code("de"), Some(*b"DE"));
        assert_eq!(country_code("DEU"), None);
        assert_eq!(country_code("1A"), None);
        assert_eq!(country_code("é"), None);
    }
}

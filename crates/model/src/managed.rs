//! Managed lists (`auth0_managed`): curated lists of addresses and TLS fingerprints that rules
//! name instead of listing the entries themselves.
//!
//! The platform's own lists cannot ship with netacl; the operator supplies each list's content
//! (a file, or the admin API), and it is validated here, once, into a [`ManagedList`]. A rule
//! names lists by their public names ([`ManagedListName`]); the evaluator compiles every list
//! once into shared indexes, however many rules name it.
use std::fmt;
use std::sync::Arc;

use ipnet::{Ipv4Net, Ipv6Net};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::criteria::{CidrEntry, FingerprintJa3, FingerprintJa4};
use crate::formats;
use crate::schema::{
    check_array, check_string, format_error, ArrayRule, AtPath, ObjectReader, ObjectSchema, Reason,
    StringRule,
};
use crate::ValidationError;

/// The public names of the managed lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ManagedListName {
    /// `auth0.low_reputation`: addresses with a poor reputation.
    LowReputation,
    /// `auth0.tor`: Tor exit nodes.
    Tor,
    /// `auth0.proxy`: open and commercial proxies.
    Proxy,
    /// `auth0.vpn`: VPN exits.
    Vpn,
    /// `auth0.icloud_relay_proxy`: iCloud Private Relay egress addresses.
    IcloudRelayProxy,
}

impl ManagedListName {
    /// Every name, in the public documentation's order.
    pub const ALL: [ManagedListName; 5] = [
        ManagedListName::LowReputation,
        ManagedListName::Tor,
        ManagedListName::Proxy,
        ManagedListName::Vpn,
        ManagedListName::IcloudRelayProxy,
    ];

    /// The public name (`auth0.tor`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ManagedListName::LowReputation => "auth0.low_reputation",
            ManagedListName::Tor => "auth0.tor",
            ManagedListName::Proxy => "auth0.proxy",
            ManagedListName::Vpn => "auth0.vpn",
            ManagedListName::IcloudRelayProxy => "auth0.icloud_relay_proxy",
        }
    }

    /// Parses a public name (exactly, case included).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|name| name.as_str() == text)
    }

    /// The position in [`ManagedListName::ALL`] (0..5).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ManagedListName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a managed list: an address range or a TLS fingerprint, with the text as it was
/// accepted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ManagedEntry {
    /// An IPv4 address or CIDR (matched against the client address).
    Ipv4(CidrEntry<Ipv4Net>),
    /// An IPv6 address or CIDR (matched against the client address).
    Ipv6(CidrEntry<Ipv6Net>),
    /// A JA3 fingerprint (32 lowercase hex digits).
    Ja3(FingerprintJa3),
    /// A JA4 fingerprint (any case).
    Ja4(FingerprintJa4),
}

impl ManagedEntry {
    /// The entry exactly as it was accepted.
    pub fn text(&self) -> &str {
        match self {
            ManagedEntry::Ipv4(e) => e.text(),
            ManagedEntry::Ipv6(e) => e.text(),
            ManagedEntry::Ja3(f) => f.text(),
            ManagedEntry::Ja4(f) => f.text(),
        }
    }

    /// Parses one entry. The kind follows from the text's shape: a `:` makes it IPv6, a `.` or
    /// `/` IPv4, 32 hex digits JA3, anything else must be a JA4 fingerprint.
    pub(crate) fn parse(text: &str) -> Result<Self, Reason> {
        if text.contains(':') {
            formats::ipv6_cidr(text, "this list").map(ManagedEntry::Ipv6)
        } else if text.contains('.') || text.contains('/') {
            formats::ipv4_cidr(text).map(ManagedEntry::Ipv4)
        } else if text.len() == 32 && text.bytes().all(|c| c.is_ascii_hexdigit()) {
            formats::ja3(text).map(ManagedEntry::Ja3)
        } else if text.contains('_') {
            formats::ja4(text).map(ManagedEntry::Ja4)
        } else {
            Err(format_error("ip-cidr-or-tls-fingerprint", text))
        }
    }
}

/// How many entries of each kind a list holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ManagedListCounts {
    /// IPv4 addresses and CIDRs.
    pub ipv4: usize,
    /// IPv6 addresses and CIDRs.
    pub ipv6: usize,
    /// JA3 fingerprints.
    pub ja3: usize,
    /// JA4 fingerprints.
    pub ja4: usize,
}

/// The validated content of one managed list: its entries in the order they were accepted, and
/// a digest of that content (to tell two versions apart without comparing them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedList {
    items: Vec<ManagedEntry>,
    digest: String,
}

/// `{"items": [...]}`, the body of `PUT /_netacl/v1/managed-lists/{name}`.
const BODY: ObjectSchema<'static> = ObjectSchema {
    allowed: &["items"],
    required: &["items"],
    min_properties: 0,
};

/// Why a list file was refused: the line (from 1) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ManagedListFileError {
    /// The line, counted from 1.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl ManagedList {
    /// A list from validated entries.
    pub(crate) fn new(items: Vec<ManagedEntry>) -> Self {
        let mut hash = Sha256::new();
        for item in &items {
            hash.update(item.text().as_bytes());
            hash.update(b"\n");
        }
        let digest = hash.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Self { items, digest }
    }

    /// An empty list.
    pub fn empty() -> Self {
        Self::new(Vec::new())
    }

    /// Validates the admin API's body `{"items": [...]}`: `items` an array (possibly empty) of
    /// at most `max_items` unique strings, each an IPv4 or IPv6 address or CIDR, a JA3 or a JA4
    /// fingerprint. Errors carry the property path (`items[3]`).
    pub fn from_json(body: &Value, max_items: usize) -> Result<Self, ValidationError> {
        let object = ObjectReader::new(body, "", &BODY)?;
        let list = ArrayRule {
            min_items: 0,
            max_items: Some(max_items),
            unique: true,
        };
        let items = object.required("items", object.array("items", list)?)?;
        let items = crate::schema::each_item(items, "items", |v| {
            ManagedEntry::parse(check_string(v, StringRule::ANY)?)
        })?;
        Ok(Self::new(items))
    }

    /// Validates a list as a JSON array of entry strings (what a list's `items` member holds),
    /// with errors at `path[i]`.
    pub fn from_json_items(
        items: &Value,
        path: &str,
        max_items: usize,
    ) -> Result<Self, ValidationError> {
        let rule = ArrayRule {
            min_items: 0,
            max_items: Some(max_items),
            unique: true,
        };
        let items = check_array(items, rule).at(path)?;
        let items = crate::schema::each_item(items, path, |v| {
            ManagedEntry::parse(check_string(v, StringRule::ANY)?)
        })?;
        Ok(Self::new(items))
    }

    /// Parses a list file: one entry a line; blank lines, whole-line `#` comments and trailing
    /// `# ...` comments are ignored; surrounding spaces are trimmed. An entry repeated on
    /// another line is kept (it means the same). At most `max_items` entries.
    pub fn from_lines(text: &str, max_items: usize) -> Result<Self, ManagedListFileError> {
        let mut items = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let entry = line.split('#').next().unwrap_or("").trim();
            if entry.is_empty() {
                continue;
            }
            if items.len() == max_items {
                return Err(ManagedListFileError {
                    line: index + 1,
                    reason: format!("too many entries, maximum {max_items}"),
                });
            }
            let parsed = ManagedEntry::parse(entry).map_err(|reason| ManagedListFileError {
                line: index + 1,
                reason,
            })?;
            items.push(parsed);
        }
        Ok(Self::new(items))
    }

    /// The entries, in the order they were accepted.
    pub fn items(&self) -> &[ManagedEntry] {
        &self.items
    }

    /// How many entries the list holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list holds no entry.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many entries of each kind the list holds.
    pub fn counts(&self) -> ManagedListCounts {
        let mut counts = ManagedListCounts::default();
        for item in &self.items {
            match item {
                ManagedEntry::Ipv4(_) => counts.ipv4 += 1,
                ManagedEntry::Ipv6(_) => counts.ipv6 += 1,
                ManagedEntry::Ja3(_) => counts.ja3 += 1,
                ManagedEntry::Ja4(_) => counts.ja4 += 1,
            }
        }
        counts
    }

    /// The first 16 bytes of the SHA-256 of the entries (each followed by a newline), in
    /// lowercase hex: equal for equal content, on every node and in every version of netacl.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The entries as a JSON array of the accepted texts.
    pub fn items_json(&self) -> Value {
        Value::Array(
            self.items
                .iter()
                .map(|item| Value::from(item.text()))
                .collect(),
        )
    }
}

/// The content of every managed list that has one: what a rule naming a list is matched
/// against. A name without content is *unconfigured* (see the crate's README on what a rule
/// naming it means).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManagedLists {
    lists: [Option<Arc<ManagedList>>; 5],
}

impl ManagedLists {
    /// No list configured.
    pub fn new() -> Self {
        Self::default()
    }

    /// The content of `name`, if configured.
    pub fn get(&self, name: ManagedListName) -> Option<&Arc<ManagedList>> {
        self.lists[name.index()].as_ref()
    }

    /// Sets (or, with `None`, removes) the content of `name`.
    pub fn set(&mut self, name: ManagedListName, list: Option<Arc<ManagedList>>) {
        self.lists[name.index()] = list;
    }

    /// The configured lists, in [`ManagedListName::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (ManagedListName, &Arc<ManagedList>)> {
        ManagedListName::ALL
            .into_iter()
            .filter_map(|name| self.get(name).map(|list| (name, list)))
    }

    /// Whether no list is configured.
    pub fn is_empty(&self) -> bool {
        self.lists.iter().all(Option::is_none)
    }

    /// Whether both hold the same content under the same names.
    pub fn same_content(&self, other: &ManagedLists) -> bool {
        self.lists
            .iter()
            .zip(&other.lists)
            .all(|(a, b)| match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a.digest() == b.digest(),
                _ => false,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_round_trip() {
        for name in ManagedListName::ALL {
            assert_eq!(ManagedListName::parse(name.as_str()), Some(name));
            assert_eq!(ManagedListName::ALL[name.index()], name);
        }
        assert_eq!(ManagedListName::parse("auth0.TOR"), None);
        assert_eq!(ManagedListName::parse("tor"), None);
    }

    #[test]
    fn entries_are_told_apart_by_shape() {
        let list = ManagedList::from_json(
            &json!({"items": ["192.0.2.0/24", "198.51.100.7", "2001:db8::/32",
                              "e7d705a3286e19ea42f587b344ee6865",
                              "t13d1516h2_8daaf6152771_b186095e22b6"]}),
            10,
        )
        .unwrap();
        assert_eq!(
            list.counts(),
            ManagedListCounts {
                ipv4: 2,
                ipv6: 1,
                ja3: 1,
                ja4: 1
            }
        );
        assert_eq!(list.items()[1].text(), "198.51.100.7");
        assert_eq!(list.digest().len(), 32);
        assert_eq!(list.items_json()[2], json!("2001:db8::/32"));
    }

    #[test]
    fn bad_bodies_name_the_item() {
        let err = |body: Value| ManagedList::from_json(&body, 3).unwrap_err().to_string();
        assert_eq!(
            err(json!({"items": ["10.0.0.0/8", "10.0.0.256"]})),
            "Payload validation error: 'Object didn't pass validation for format ipv4-cidr: 10.0.0.256' on property items[1]."
        );
        assert_eq!(
            err(json!({"items": ["10.0.0.1", "10.0.0.1"]})),
            "Payload validation error: 'Array items are not unique (indexes 0 and 1)' on property items."
        );
        assert_eq!(
            err(json!({"items": [1, 2]})),
            "Payload validation error: 'Expected type string but found type integer' on property items[0]."
        );
        assert_eq!(
            err(json!({"items": ["a", "b", "c", "d"]})),
            "Payload validation error: 'Array is too long (4), maximum 3' on property items."
        );
        assert_eq!(
            err(json!({"items": [], "name": "x"})),
            "Payload validation error: 'Additional properties not allowed: name'."
        );
        assert_eq!(
            err(json!({})),
            "Payload validation error: 'Missing required property: items'."
        );
        assert!(err(json!({"items": ["::ffff:192.0.2.1"]})).contains("192.0.2.1"));
        assert!(err(json!({"items": ["nope"]})).contains("ip-cidr-or-tls-fingerprint: nope"));
        assert!(err(json!({"items": ["E7D705A3286E19EA42F587B344EE6865"]})).contains("ja3"));
        assert!(ManagedList::from_json(&json!({"items": []}), 3)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn files_skip_blanks_and_comments_and_name_the_bad_line() {
        let text = "# Tor exits\n\n192.0.2.1\n  198.51.100.0/24   # a trailing comment\n\t\n2001:db8::1#x\n";
        let list = ManagedList::from_lines(text, 10).unwrap();
        let texts: Vec<&str> = list.items().iter().map(ManagedEntry::text).collect();
        assert_eq!(texts, ["192.0.2.1", "198.51.100.0/24", "2001:db8::1"]);
        let err = ManagedList::from_lines("192.0.2.1\n# c\n192.0.2.300 # bad\n", 10).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.reason.contains("192.0.2.300"), "{err}");
        assert_eq!(
            ManagedList::from_lines("1.1.1.1\n2.2.2.2\n", 1)
                .unwrap_err()
                .line,
            2
        );
        // The same content gives the same digest, whatever the comments.
        let a = ManagedList::from_lines("192.0.2.1\n", 10).unwrap();
        let b = ManagedList::from_lines("# x\n192.0.2.1 # y\n", 10).unwrap();
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), ManagedList::empty().digest());
    }
}

//! Host names as tenants are looked up by: the normal form of a host ([`tenant_host`]) and a
//! case-insensitive table keyed by it ([`HostMap`]).
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use hashbrown::HashTable;

/// The most bytes of a host name that are looked up (DNS names are at most 253); a longer
/// `Host` names no tenant.
pub(super) const MAX_HOST: usize = 253;

/// A host name as tenants are looked up by: surrounding ASCII white space trimmed (space, tab,
/// CR, LF, form feed; any other character, a non-ASCII space included, is part of the name,
/// which then names no tenant), the port removed (`acme.test:8443` → `acme.test`,
/// `[2001:db8::1]:443` → `2001:db8::1`), one trailing dot removed. Case is left as it is
/// (lookups ignore ASCII case). `None` for an empty or overlong name.
pub fn tenant_host(value: &str) -> Option<&str> {
    let value = value.trim_ascii();
    let host = if let Some(rest) = value.strip_prefix('[') {
        rest.split_once(']').map(|(h, _)| h)?
    } else {
        // A port is the digits after the last `:`: scanned from the end, so a name without one
        // (the common case: it ends in a letter) costs one comparison.
        let bytes = value.as_bytes();
        let mut end = bytes.len();
        while end > 0 && bytes[end - 1].is_ascii_digit() {
            end -= 1;
        }
        match end.checked_sub(1) {
            Some(colon) if bytes[colon] == b':' => &value[..colon],
            _ => value,
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    (!host.is_empty() && host.len() <= MAX_HOST).then_some(host)
}

/// A table from host names to values, case-insensitive (ASCII), keyed hashing (a per-table
/// random seed, so that hosts a client chooses cannot be made to collide), lookups without
/// allocation.
pub(crate) struct HostMap<V> {
    pub(super) state: foldhash::quality::RandomState,
    pub(super) entries: HashTable<(Arc<str>, V)>,
}

impl<V: Clone> Clone for HostMap<V> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            entries: self.entries.clone(),
        }
    }
}

impl<V> Default for HostMap<V> {
    fn default() -> Self {
        Self {
            state: foldhash::quality::RandomState::default(),
            entries: HashTable::new(),
        }
    }
}

impl<V> HostMap<V> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            state: foldhash::quality::RandomState::default(),
            entries: HashTable::with_capacity(capacity),
        }
    }

    /// The hash of `host`'s ASCII-lowercased bytes, folded 32 bytes at a time on the stack.
    pub(super) fn hash(&self, host: &str) -> u64 {
        let mut hasher = self.state.build_hasher();
        let mut buf = [0u8; 32];
        for chunk in host.as_bytes().chunks(buf.len()) {
            let folded = &mut buf[..chunk.len()];
            for (d, s) in folded.iter_mut().zip(chunk) {
                *d = s.to_ascii_lowercase();
            }
            hasher.write(folded);
        }
        hasher.write_usize(host.len());
        hasher.finish()
    }

    /// The value for `host` (any ASCII case).
    pub(crate) fn get(&self, host: &str) -> Option<&V> {
        let hash = self.hash(host);
        self.entries
            .find(hash, |(k, _)| k.eq_ignore_ascii_case(host))
            .map(|(_, v)| v)
    }

    /// Inserts `host` (stored lowercased); gives back the value it held.
    pub(crate) fn insert(&mut self, host: &str, value: V) -> Option<V> {
        let hash = self.hash(host);
        let state = &self.state;
        match self.entries.entry(
            hash,
            |(k, _)| k.eq_ignore_ascii_case(host),
            |(k, _)| {
                let mut hasher = state.build_hasher();
                let mut buf = [0u8; 32];
                for chunk in k.as_bytes().chunks(buf.len()) {
                    let folded = &mut buf[..chunk.len()];
                    for (d, s) in folded.iter_mut().zip(chunk) {
                        *d = s.to_ascii_lowercase();
                    }
                    hasher.write(folded);
                }
                hasher.write_usize(k.len());
                hasher.finish()
            },
        ) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                Some(std::mem::replace(&mut e.get_mut().1, value))
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert((Arc::from(host.to_ascii_lowercase()), value));
                None
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }
}

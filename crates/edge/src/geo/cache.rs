//! A small lock-free cache of decoded locations, per database network.
//!
//! Decoding a City record costs far more than finding it: the reader must step over every
//! field stored before `country` (city and continent names in eight languages) to reach it.
//! The tree walk tells which network an address falls in; the cache maps that network to its
//! decoded country and subdivision, so a record is decoded once per network while it stays in
//! the cache, not once per request.
//!
//! It is direct-mapped, and each slot is a sequence lock made of atomics: a reader that races a
//! writer sees a changed sequence number and treats the slot as a miss; a writer that finds the
//! slot busy skips filling it. No locks, no allocation, no `unsafe`. The cache belongs to one
//! loaded database, so a reload starts with an empty one.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Slots in the cache (a power of two): 16,384 × 32 bytes = 512 KiB per location database.
const SLOTS: usize = 1 << 14;

/// A network of the database: the address masked to its prefix, the prefix length and the
/// family (IPv4 lookups are keyed apart from IPv6 ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetworkKey {
    pub(crate) masked: u128,
    pub(crate) prefix_len: u8,
    pub(crate) v6: bool,
}

/// A decoded location, packed: country (2 bytes, 0 if none), subdivision code (up to 3 bytes)
/// and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PackedLocation {
    pub(crate) country: Option<[u8; 2]>,
    pub(crate) subdivision: Option<([u8; 3], u8)>,
}

#[derive(Debug, Default)]
struct Slot {
    sequence: AtomicU64,
    masked_high: AtomicU64,
    masked_low: AtomicU64,
    /// Packed location, prefix length, family and a validity bit.
    word: AtomicU64,
}

const VALID: u64 = 1 << 63;
const V6: u64 = 1 << 62;

fn pack(key: NetworkKey, location: PackedLocation) -> u64 {
    let mut word = VALID | u64::from(key.prefix_len) << 48;
    if key.v6 {
        word |= V6;
    }
    if let Some([a, b]) = location.country {
        word |= u64::from(a) << 8 | u64::from(b);
    }
    if let Some(([x, y, z], len)) = location.subdivision {
        word |= u64::from(len & 0x3) << 40
            | u64::from(x) << 32
            | u64::from(y) << 24
            | u64::from(z) << 16;
    }
    word
}

fn unpack(word: u64) -> (u8, bool, PackedLocation) {
    let byte = |shift: u32| (word >> shift) as u8;
    let country = match (byte(8), byte(0)) {
        (0, _) | (_, 0) => None,
        (a, b) => Some([a, b]),
    };
    let len = byte(40) & 0x3;
    let subdivision = (len > 0).then(|| ([byte(32), byte(24), byte(16)], len));
    (
        byte(48),
        word & V6 != 0,
        PackedLocation {
            country,
            subdivision,
        },
    )
}

/// The cache. See the module documentation.
#[derive(Debug)]
pub(crate) struct LocationCache {
    slots: Box<[Slot]>,
}

impl LocationCache {
    pub(crate) fn new() -> Self {
        LocationCache {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
        }
    }

    fn slot(&self, key: &NetworkKey) -> Option<&Slot> {
        // Fibonacci hashing of the network's bits and length.
        let mixed = (key.masked as u64)
            ^ ((key.masked >> 64) as u64).rotate_left(29)
            ^ u64::from(key.prefix_len) << 56;
        let index = (mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 50) as usize;
        self.slots.get(index & (SLOTS - 1))
    }

    /// The cached location of `key`, if the slot holds it and no writer raced the read.
    pub(crate) fn get(&self, key: &NetworkKey) -> Option<PackedLocation> {
        let slot = self.slot(key)?;
        let before = slot.sequence.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let high = slot.masked_high.load(Ordering::Relaxed);
        let low = slot.masked_low.load(Ordering::Relaxed);
        let word = slot.word.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if slot.sequence.load(Ordering::Relaxed) != before || word & VALID == 0 {
            return None;
        }
        let (prefix_len, v6, location) = unpack(word);
        let masked = u128::from(high) << 64 | u128::from(low);
        (masked == key.masked && prefix_len == key.prefix_len && v6 == key.v6).then_some(location)
    }

    /// Stores `location` for `key`, unless another writer holds the slot.
    pub(crate) fn put(&self, key: &NetworkKey, location: PackedLocation) {
        let Some(slot) = self.slot(key) else {
            return;
        };
        let before = slot.sequence.load(Ordering::Relaxed);
        if before & 1 == 1
            || slot
                .sequence
                .compare_exchange(before, before + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        fence(Ordering::Release);
        slot.masked_high
            .store((key.masked >> 64) as u64, Ordering::Relaxed);
        slot.masked_low.store(key.masked as u64, Ordering::Relaxed);
        slot.word.store(pack(*key, location), Ordering::Relaxed);
        slot.sequence.store(before + 2, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(masked: u128, prefix_len: u8, v6: bool) -> NetworkKey {
        NetworkKey {
            masked,
            prefix_len,
            v6,
        }
    }

    #[test]
    fn packing_round_trips() {
        let cases = [
            PackedLocation::default(),
            PackedLocation {
                country: Some(*b"US"),
                subdivision: Some((*b"NY\0", 2)),
            },
            PackedLocation {
                country: Some(*b"GB"),
                subdivision: Some((*b"ENG", 3)),
            },
            PackedLocation {
                country: Some(*b"ES"),
                subdivision: Some((*b"M\0\0", 1)),
            },
        ];
        for location in cases {
            for k in [key(0xc000_0200, 24, false), key(u128::MAX, 128, true)] {
                let (prefix_len, v6, back) = unpack(pack(k, location));
                assert_eq!((prefix_len, v6, back), (k.prefix_len, k.v6, location));
            }
        }
    }

    #[test]
    fn a_slot_answers_only_for_its_own_network() {
        let cache = LocationCache::new();
        let a = key(0xc000_0200, 24, false);
        let us = PackedLocation {
            country: Some(*b"US"),
            subdivision: None,
        };
        assert_eq!(cache.get(&a), None);
        cache.put(&a, us);
        assert_eq!(cache.get(&a), Some(us));
        assert_eq!(cache.get(&key(0xc000_0200, 25, false)), None);
        assert_eq!(cache.get(&key(0xc000_0200, 24, true)), None);
        assert_eq!(cache.get(&key(0xc000_0300, 24, false)), None);
    }

    #[test]
    fn concurrent_readers_never_see_a_torn_entry() {
        let cache = std::sync::Arc::new(LocationCache::new());
        // Keys colliding in one slot would be ideal; many keys over few slots is close enough.
        let location_of = |i: u128| PackedLocation {
            country: Some([b'A' + (i % 26) as u8, b'A' + (i / 26 % 26) as u8]),
            subdivision: Some(([b'0' + (i % 10) as u8, b'X', b'Y'], 3)),
        };
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    for round in 0..20_000u128 {
                        let i = (round * 7 + t) % 64;
                        let k = key(i << 8, 24, false);
                        if round % 3 == 0 {
                            cache.put(&k, location_of(i));
                        } else if let Some(found) = cache.get(&k) {
                            assert_eq!(found, location_of(i));
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }
}

/// Slots of the per-address cache: 16,384 × 40 bytes = 640 KiB per enricher.
const ADDRESS_SLOTS: usize = 1 << 14;

/// What the per-address cache knows about one address: the location (when `location_known`)
/// and the ASN (when `asn_known`), as of one generation of the databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AddressEntry {
    pub(crate) location_known: bool,
    pub(crate) location: PackedLocation,
    pub(crate) asn_known: bool,
    pub(crate) asn: Option<u32>,
}

#[derive(Debug, Default)]
struct AddressSlot {
    sequence: AtomicU64,
    address_high: AtomicU64,
    address_low: AtomicU64,
    /// Validity, family, knowledge bits and the packed location.
    word: AtomicU64,
    /// Generation (high half) and ASN (low half).
    generation_asn: AtomicU64,
}

const LOCATION_KNOWN: u64 = 1 << 61;
const ASN_KNOWN: u64 = 1 << 60;
const HAS_ASN: u64 = 1 << 59;

/// Answers per client address, in front of the tree walks: clients repeat, and a hit costs a
/// few atomic loads instead of one or two walks down trees of millions of nodes (cache misses
/// all the way on a large database). Entries carry the generation of the databases they were
/// computed from; a reload bumps the generation, so older entries stop matching.
#[derive(Debug)]
pub(crate) struct AddressCache {
    slots: Box<[AddressSlot]>,
}

impl AddressCache {
    pub(crate) fn new() -> Self {
        AddressCache {
            slots: (0..ADDRESS_SLOTS).map(|_| AddressSlot::default()).collect(),
        }
    }

    fn slot(&self, address: u128, v6: bool) -> Option<&AddressSlot> {
        let mixed = (address as u64) ^ ((address >> 64) as u64).rotate_left(31) ^ u64::from(v6);
        let index = (mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 50) as usize;
        self.slots.get(index & (ADDRESS_SLOTS - 1))
    }

    pub(crate) fn get(&self, address: u128, v6: bool, generation: u32) -> Option<AddressEntry> {
        let slot = self.slot(address, v6)?;
        let before = slot.sequence.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let high = slot.address_high.load(Ordering::Relaxed);
        let low = slot.address_low.load(Ordering::Relaxed);
        let word = slot.word.load(Ordering::Relaxed);
        let generation_asn = slot.generation_asn.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if slot.sequence.load(Ordering::Relaxed) != before
            || word & VALID == 0
            || (word & V6 != 0) != v6
            || (generation_asn >> 32) as u32 != generation
            || (u128::from(high) << 64 | u128::from(low)) != address
        {
            return None;
        }
        let (_, _, location) = unpack(word & !(LOCATION_KNOWN | ASN_KNOWN | HAS_ASN));
        Some(AddressEntry {
            location_known: word & LOCATION_KNOWN != 0,
            location,
            asn_known: word & ASN_KNOWN != 0,
            asn: (word & HAS_ASN != 0).then_some(generation_asn as u32),
        })
    }

    pub(crate) fn put(&self, address: u128, v6: bool, generation: u32, entry: AddressEntry) {
        let Some(slot) = self.slot(address, v6) else {
            return;
        };
        let before = slot.sequence.load(Ordering::Relaxed);
        if before & 1 == 1
            || slot
                .sequence
                .compare_exchange(before, before + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        fence(Ordering::Release);
        let key = NetworkKey {
            masked: 0,
            prefix_len: 0,
            v6,
        };
        let mut word = pack(key, entry.location);
        if entry.location_known {
            word |= LOCATION_KNOWN;
        }
        if entry.asn_known {
            word |= ASN_KNOWN;
        }
        if entry.asn.is_some() {
            word |= HAS_ASN;
        }
        slot.address_high
            .store((address >> 64) as u64, Ordering::Relaxed);
        slot.address_low.store(address as u64, Ordering::Relaxed);
        slot.word.store(word, Ordering::Relaxed);
        slot.generation_asn.store(
            u64::from(generation) << 32 | u64::from(entry.asn.unwrap_or(0)),
            Ordering::Relaxed,
        );
        slot.sequence.store(before + 2, Ordering::Release);
    }
}

#[cfg(test)]
mod address_tests {
    use super::*;

    #[test]
    fn entries_match_address_family_and_generation() {
        let cache = AddressCache::new();
        let entry = AddressEntry {
            location_known: true,
            location: PackedLocation {
                country: Some(*b"FR"),
                subdivision: Some((*b"IDF", 3)),
            },
            asn_known: true,
            asn: Some(4_200_000_000),
        };
        cache.put(0xc000_0201, false, 7, entry);
        assert_eq!(cache.get(0xc000_0201, false, 7), Some(entry));
        assert_eq!(cache.get(0xc000_0201, false, 8), None);
        assert_eq!(cache.get(0xc000_0201, true, 7), None);
        assert_eq!(cache.get(0xc000_0202, false, 7), None);
        let partial = AddressEntry {
            asn_known: true,
            ..AddressEntry::default()
        };
        cache.put(0xc000_0201, false, 8, partial);
        assert_eq!(cache.get(0xc000_0201, false, 8), Some(partial));
    }
}

//! Small lock-free caches: decoded locations per database record, and answers per address.
//!
//! Decoding a City record costs far more than finding it: the reader must step over every
//! field stored before `country` (city and continent names in eight languages) to reach it.
//! The tree walk tells which record an address leads to (its offset in the data section, which
//! every network sharing the record shares); the cache maps that record to its decoded country
//! and subdivision, so a record is decoded once while it stays in the cache, not once per
//! request.
//!
//! Both are direct-mapped, and each slot is a sequence lock made of atomics: a reader that races
//! a writer sees a changed sequence number and treats the slot as a miss; a writer that finds the
//! slot busy skips filling it. No locks, no allocation, no `unsafe`. A location cache belongs to
//! one loaded database, so a reload starts with an empty one.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Slots in the cache (a power of two): 16,384 × 24 bytes = 384 KiB per location database.
const SLOTS: usize = 1 << 14;

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
    /// The record's offset in the data section.
    record: AtomicU64,
    /// Packed location and a validity bit.
    word: AtomicU64,
}

const VALID: u64 = 1 << 63;
const V6: u64 = 1 << 62;

fn pack(location: PackedLocation) -> u64 {
    let mut word = VALID;
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

fn unpack(word: u64) -> PackedLocation {
    let byte = |shift: u32| (word >> shift) as u8;
    let country = match (byte(8), byte(0)) {
        (0, _) | (_, 0) => None,
        (a, b) => Some([a, b]),
    };
    let len = byte(40) & 0x3;
    let subdivision = (len > 0).then(|| ([byte(32), byte(24), byte(16)], len));
    PackedLocation {
        country,
        subdivision,
    }
}

/// The cache of decoded records. See the module documentation.
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

    fn slot(&self, record: u64) -> Option<&Slot> {
        // Fibonacci hashing of the offset.
        let index = (record.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 50) as usize;
        self.slots.get(index & (SLOTS - 1))
    }

    /// The cached location of the record at `record`, if the slot holds it and no writer raced
    /// the read.
    pub(crate) fn get(&self, record: u64) -> Option<PackedLocation> {
        let slot = self.slot(record)?;
        let before = slot.sequence.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let stored = slot.record.load(Ordering::Relaxed);
        let word = slot.word.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if slot.sequence.load(Ordering::Relaxed) != before || word & VALID == 0 {
            return None;
        }
        (stored == record).then(|| unpack(word))
    }

    /// Stores `location` for the record at `record`, unless another writer holds the slot.
    pub(crate) fn put(&self, record: u64, location: PackedLocation) {
        let Some(slot) = self.slot(record) else {
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
        slot.record.store(record, Ordering::Relaxed);
        slot.word.store(pack(location), Ordering::Relaxed);
        slot.sequence.store(before + 2, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(unpack(pack(location)), location);
            assert_eq!(unpack(pack(location) | V6), location);
        }
    }

    #[test]
    fn a_slot_answers_only_for_its_own_record() {
        let cache = LocationCache::new();
        let us = PackedLocation {
            country: Some(*b"US"),
            subdivision: None,
        };
        assert_eq!(cache.get(1234), None);
        cache.put(1234, us);
        assert_eq!(cache.get(1234), Some(us));
        assert_eq!(cache.get(1235), None);
        assert_eq!(cache.get(0), None);
        // Offsets that share a slot evict each other and never answer for each other.
        let same_slot = (1..u64::MAX)
            .map(|k| 1234 + k)
            .find(|k| std::ptr::eq(cache.slot(*k).unwrap(), cache.slot(1234).unwrap()))
            .unwrap();
        assert_eq!(cache.get(same_slot), None);
        cache.put(same_slot, PackedLocation::default());
        assert_eq!(cache.get(1234), None);
        assert_eq!(cache.get(same_slot), Some(PackedLocation::default()));
    }

    #[test]
    fn concurrent_readers_never_see_a_torn_entry() {
        let cache = std::sync::Arc::new(LocationCache::new());
        // Keys colliding in one slot would be ideal; many keys over few slots is close enough.
        let location_of = |i: u64| PackedLocation {
            country: Some([b'A' + (i % 26) as u8, b'A' + (i / 26 % 26) as u8]),
            subdivision: Some(([b'0' + (i % 10) as u8, b'X', b'Y'], 3)),
        };
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    for round in 0..20_000u64 {
                        let i = (round * 7 + t) % 64;
                        let record = i << 8;
                        if round % 3 == 0 {
                            cache.put(record, location_of(i));
                        } else if let Some(found) = cache.get(record) {
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
        let location = unpack(word & !(V6 | LOCATION_KNOWN | ASN_KNOWN | HAS_ASN));
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
        let mut word = pack(entry.location);
        if v6 {
            word |= V6;
        }
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

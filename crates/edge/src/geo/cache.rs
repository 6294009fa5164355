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

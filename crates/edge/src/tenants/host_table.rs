//! Host names to tenants, one pair of cache lines a host: the per-request selection of
//! [`TenantRouter`](crate::TenantRouter).
//!
//! At thousands of tenants, the table entry a request needs is rarely in cache: a request for
//! another tenant than the previous thousands of requests finds it in memory. A general hash
//! table then costs three dependent memory accesses before the tenant is known (its control
//! bytes, the bucket, the key's string elsewhere on the heap). Here the hash picks a slot by
//! indexing, and the slot holds the whole answer: the keyed hash, the host's length and its
//! first [`INLINE`] bytes (lowercased) to compare, and the value. A slot is two adjacent cache
//! lines, requested together, so a lookup is one memory access; a host longer than [`INLINE`]
//! bytes (rare: most names are far shorter) also compares its rest, kept out of line.
//!
//! The slot's value usually points elsewhere (a tenant's policy), and that line is the next
//! memory access, which could only start once the slot had arrived. So the table also keeps,
//! by each host's first slot, a hint: the address of the line its value points to, recorded by
//! the owner ([`HostTable::hint`]) and requested from the processor (a prefetch, never read)
//! while the slot is read, so that the two accesses overlap. The hints are one word a slot, an
//! array sixteen times smaller than the slots and so far more often in cache. A hint is only a
//! hint: hosts sharing a first slot share it (the last recorded wins), and a stale one costs
//! only the request.
//!
//! Open addressing with linear probing, at most half full (a miss ends at the first empty
//! slot, most probes read one slot). The hash is keyed (a per-table random seed), so hosts a
//! client chooses cannot be made to collide. Lookups take no lock and allocate nothing.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Host bytes held in the slot itself.
pub(crate) const INLINE: usize = 72;

/// One host and its value: 128 bytes, two cache lines aligned together.
#[repr(C, align(128))]
struct Slot<V> {
    /// The host's keyed hash, never 0; 0 marks an empty slot.
    hash: u64,
    value: Option<V>,
    /// The host's length in bytes.
    len: u32,
    /// Its first bytes, lowercased (the rest of the array is zero), compared a word at a time.
    inline: [u8; INLINE],
    /// The whole host, lowercased, when it is longer than [`INLINE`].
    long: Option<Arc<str>>,
}

impl<V> Slot<V> {
    const EMPTY: Self = Slot {
        hash: 0,
        value: None,
        len: 0,
        inline: [0; INLINE],
        long: None,
    };

    /// Whether the slot holds `host` (any ASCII case): its length, its inline bytes (a word at
    /// a time, the host's words lowercased exactly: `A`-`Z` only), and for a long host the
    /// rest.
    #[inline]
    fn holds(&self, host: &str) -> bool {
        let bytes = host.as_bytes();
        let n = bytes.len();
        if self.len as usize != n {
            return false;
        }
        if !(8..=INLINE).contains(&n) {
            return self.holds_rare(bytes);
        }
        // The words at 0, 8, ... before the last, then the last 8 bytes (overlapping the
        // word before when the length is not a multiple of 8): every byte compared, no
        // partial word to assemble. The stored bytes are read at the same offsets.
        let mut at = 0;
        while at + 8 < n {
            if ascii_lowercase(read(bytes, at)) != read(&self.inline, at) {
                return false;
            }
            at += 8;
        }
        ascii_lowercase(read(bytes, n - 8)) == read(&self.inline, n - 8)
    }

    /// [`holds`](Self::holds) for a host shorter than a word or longer than the inline bytes
    /// (its length already compared).
    #[cold]
    #[inline(never)]
    fn holds_rare(&self, bytes: &[u8]) -> bool {
        let head = bytes.len().min(INLINE);
        if !self.inline[..head].eq_ignore_ascii_case(&bytes[..head]) {
            return false;
        }
        match &self.long {
            None => bytes.len() <= INLINE,
            Some(long) => long.as_bytes()[INLINE..].eq_ignore_ascii_case(&bytes[INLINE..]),
        }
    }
}

/// Requests the cache line holding `address` (0: none). Only a hint to the processor: nothing is
/// read, and a stale address costs only the request.
#[inline(always)]
fn prefetch_address(address: usize) {
    static ANCHOR: u8 = 0;
    if address != 0 {
        // `prefetch_index` forms its address by wrapping arithmetic from the slice's start and
        // never reads it.
        let anchor = std::ptr::addr_of!(ANCHOR) as usize;
        prefetch_index::prefetch_index(std::slice::from_ref(&ANCHOR), address.wrapping_sub(anchor));
    }
}

/// The 8 bytes of `bytes` from `at` (`at + 8 <= bytes.len()`) as a little-endian word.
#[inline(always)]
fn read(bytes: &[u8], at: usize) -> u64 {
    match bytes.get(at..at + 8).and_then(|b| b.first_chunk::<8>()) {
        Some(chunk) => u64::from_le_bytes(*chunk),
        None => 0,
    }
}

/// The 8 bytes of `bytes` from `at`, zero-padded past its end, as a little-endian word.
#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u64 {
    let rest = &bytes[at.min(bytes.len())..];
    match rest.first_chunk::<8>() {
        Some(chunk) => u64::from_le_bytes(*chunk),
        None => {
            let mut buf = [0u8; 8];
            for (d, s) in buf.iter_mut().zip(rest) {
                *d = *s;
            }
            u64::from_le_bytes(buf)
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Each byte of `w` that is an ASCII capital (`A`-`Z`) made lowercase, the others unchanged.
#[inline(always)]
fn ascii_lowercase(w: u64) -> u64 {
    let low = w & !HIGH;
    // Per byte, the high bit set where the byte's low 7 bits are at least `A`, then above `Z`
    // (no carry crosses a byte: at most 0x7f + 0x3f).
    let from_a = low + ONES * (0x80 - u64::from(b'A'));
    let past_z = low + ONES * (0x80 - u64::from(b'Z') - 1);
    let capital = from_a & !past_z & !w & HIGH;
    w | (capital >> 2)
}

/// The bytes of one slot holding `V` (a table's memory is this times its slots).
#[cfg(test)]
pub(crate) const fn slot_bytes<V>() -> usize {
    std::mem::size_of::<Slot<V>>()
}

impl<V: Clone> Clone for Slot<V> {
    fn clone(&self) -> Self {
        Slot {
            hash: self.hash,
            value: self.value.clone(),
            len: self.len,
            inline: self.inline,
            long: self.long.clone(),
        }
    }
}

/// A table from host names to values, case-insensitive (ASCII), built by inserting and then
/// read without changes (the router replaces whole tables).
pub(crate) struct HostTable<V> {
    state: foldhash::quality::RandomState,
    slots: Box<[Slot<V>]>,
    /// By a host's first slot: an address to request while its slot is read.
    hints: Box<[AtomicUsize]>,
    len: usize,
}

impl<V: Clone> Clone for HostTable<V> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            slots: self.slots.clone(),
            hints: self
                .hints
                .iter()
                .map(|h| AtomicUsize::new(h.load(Relaxed)))
                .collect(),
            len: self.len,
        }
    }
}

impl<V> Default for HostTable<V> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

fn slots_for(capacity: usize) -> usize {
    (capacity.max(4) * 2).next_power_of_two()
}

impl<V> HostTable<V> {
    /// A table for `capacity` hosts before it grows.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self::with_state(
            foldhash::quality::RandomState::default(),
            slots_for(capacity),
        )
    }

    fn with_state(state: foldhash::quality::RandomState, slots: usize) -> Self {
        Self {
            state,
            slots: (0..slots).map(|_| Slot::EMPTY).collect(),
            hints: (0..slots).map(|_| AtomicUsize::new(0)).collect(),
            len: 0,
        }
    }

    /// The keyed hash of `host` with its case folded, a word at a time (each byte ORed with
    /// 0x20: every case of a name hashes alike; a few other bytes fold together too, which the
    /// exact comparison tells apart), never 0. The words are those [`Slot::holds`] compares:
    /// at 0, 8, ... before the last, then the last 8 bytes; a host shorter than a word is
    /// hashed zero-padded.
    #[inline]
    fn hash(&self, host: &str) -> u64 {
        let bytes = host.as_bytes();
        let n = bytes.len();
        let mut hasher = self.state.build_hasher();
        if n < 8 {
            hasher.write_u64(word(bytes, 0) | (ONES * 0x20));
        } else {
            let mut at = 0;
            while at + 8 < n {
                hasher.write_u64(read(bytes, at) | (ONES * 0x20));
                at += 8;
            }
            hasher.write_u64(read(bytes, n - 8) | (ONES * 0x20));
        }
        hasher.write_usize(n);
        hasher.finish() | 1
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot of `host`, or the empty slot where it would go.
    #[inline]
    fn find(&self, hash: u64, host: &str) -> usize {
        let mask = self.mask();
        let mut i = (hash >> 7) as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.hash == 0 || (slot.hash == hash && slot.holds(host)) {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// Records `address` as the line to request whenever `host` is looked up, while its slot
    /// is read (a hint: hosts sharing a first slot share it, the last recorded wins).
    pub(crate) fn hint(&self, host: &str, address: usize) {
        let home = (self.hash(host) >> 7) as usize & self.mask();
        self.hints[home].store(address, Relaxed);
    }

    /// The value for `host` (any ASCII case).
    #[inline]
    pub(crate) fn get(&self, host: &str) -> Option<&V> {
        let hash = self.hash(host);
        prefetch_address(self.hints[(hash >> 7) as usize & self.mask()].load(Relaxed));
        let slot = &self.slots[self.find(hash, host)];
        if slot.hash == 0 {
            return None;
        }
        slot.value.as_ref()
    }

    /// Inserts `host` (stored lowercased); gives back the value it held.
    pub(crate) fn insert(&mut self, host: &str, value: V) -> Option<V> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let hash = self.hash(host);
        let i = self.find(hash, host);
        let slot = &mut self.slots[i];
        if slot.hash != 0 {
            return slot.value.replace(value);
        }
        let lower = host.to_ascii_lowercase();
        let head = lower.len().min(INLINE);
        slot.inline[..head].copy_from_slice(&lower.as_bytes()[..head]);
        slot.len = lower.len() as u32;
        slot.long = (lower.len() > INLINE).then(|| Arc::from(lower));
        slot.hash = hash;
        slot.value = Some(value);
        self.len += 1;
        None
    }

    /// Twice the slots, every host moved (same seed, so the same hashes).
    fn grow(&mut self) {
        let mut next = Self::with_state(self.state.clone(), self.slots.len() * 2);
        for slot in std::mem::take(&mut self.slots).into_vec() {
            if slot.hash == 0 {
                continue;
            }
            let i = (slot.hash >> 7) as usize & next.mask();
            let mut j = i;
            while next.slots[j].hash != 0 {
                j = (j + 1) & next.mask();
            }
            next.slots[j] = slot;
            next.len += 1;
        }
        *self = next;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The hint requested with `host`'s slot; `None` when another host of the table has the
    /// same first slot (which of the two recorded it last is not this host's business).
    #[cfg(test)]
    pub(crate) fn hint_of(&self, host: &str) -> Option<usize> {
        let home = |hash: u64| (hash >> 7) as usize & self.mask();
        let mine = home(self.hash(host));
        let sharing = self
            .slots
            .iter()
            .filter(|s| s.hash != 0 && home(s.hash) == mine)
            .count();
        (sharing == 1).then(|| self.hints[mine].load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercased_exactly_as_ascii_says() {
        // Every byte value in every position, and words mixing them.
        for b in 0..=255u8 {
            for lane in 0..8 {
                let w = u64::from(b) << (8 * lane);
                assert_eq!(
                    ascii_lowercase(w),
                    u64::from(b.to_ascii_lowercase()) << (8 * lane),
                    "{b:#x} in lane {lane}"
                );
            }
        }
        let mut state = 0x243f_6a88_85a3_08d3u64;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut bytes = state.to_le_bytes();
            let w = u64::from_le_bytes(bytes);
            bytes.make_ascii_lowercase();
            assert_eq!(ascii_lowercase(w), u64::from_le_bytes(bytes), "{w:#x}");
        }
        assert_eq!(word(b"abc", 0), u64::from_le_bytes(*b"abc\0\0\0\0\0"));
        assert_eq!(
            word(b"abcdefghij", 8),
            u64::from_le_bytes(*b"ij\0\0\0\0\0\0")
        );
        assert_eq!(word(b"abcdefgh", 8), 0);
    }

    #[test]
    fn a_slot_is_two_cache_lines() {
        assert_eq!(std::mem::size_of::<Slot<(Arc<u8>, Arc<u8>)>>(), 128);
        assert_eq!(std::mem::align_of::<Slot<(Arc<u8>, Arc<u8>)>>(), 128);
    }

    #[test]
    fn hosts_of_every_length_any_case_and_growth() {
        let mut table: HostTable<usize> = HostTable::with_capacity(2);
        let host = |i: usize| {
            // Lengths from 6 to 253 bytes, crossing the inline size; distinct by the number.
            let mut h = format!("{}t{i}.test", "a".repeat((i * 37) % 240));
            if i.is_multiple_of(3) {
                h = h.to_ascii_uppercase();
            }
            h
        };
        for i in 0..5_000 {
            assert_eq!(table.insert(&host(i), i), None);
        }
        assert_eq!(table.len(), 5_000);
        assert!(table.slots.len() >= 10_000);
        for i in 0..5_000 {
            let h = host(i);
            assert_eq!(table.get(&h), Some(&i), "{h}");
            assert_eq!(table.get(&h.to_ascii_lowercase()), Some(&i));
            assert_eq!(table.get(&h.to_ascii_uppercase()), Some(&i));
            // One byte more or less, or one byte changed (at the start, inside the inline
            // part and past it), names no host.
            assert_eq!(table.get(&format!("{h}x")), None);
            assert_eq!(table.get(&h[..h.len() - 1]), None);
            let mut changed = h.clone().into_bytes();
            let at = changed.len() - 1;
            changed[at] = b'#';
            assert_eq!(table.get(std::str::from_utf8(&changed).unwrap()), None);
        }
        assert_eq!(table.insert(&host(7).to_ascii_uppercase(), 70), Some(7));
        assert_eq!(table.get(&host(7)), Some(&70));
        assert_eq!(table.len(), 5_000);
    }

    #[test]
    fn every_length_every_byte_position_and_case() {
        // Every length from 1 to past the inline bytes: the host is found in any case, and a
        // host differing from it in any one byte (or by one byte more or less) is not, whether
        // the byte falls in a whole word, in the last word that overlaps the one before it, or
        // past the inline bytes.
        let mut table = HostTable::with_capacity(4);
        let host = |n: usize| -> String {
            (0..n)
                .map(|i| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789.-"[(i * 7 + n) % 38]))
                .collect()
        };
        for n in 1..=INLINE + 20 {
            table.insert(&host(n), n);
        }
        for n in 1..=INLINE + 20 {
            let h = host(n);
            assert_eq!(table.get(&h), Some(&n), "{h}");
            assert_eq!(table.get(&h.to_ascii_uppercase()), Some(&n), "{h}");
            for at in 0..n {
                let original = h.as_bytes()[at];
                // Another letter or digit, and the byte that folds with it in the hash (bit
                // 0x20 flipped: `a` and `A` are one name, `1` and `\x11` are not).
                for changed in [if original == b'z' { b'y' } else { b'z' }, original ^ 0x20] {
                    if changed.eq_ignore_ascii_case(&original) {
                        continue;
                    }
                    let mut other = h.clone().into_bytes();
                    other[at] = changed;
                    let other = String::from_utf8(other).unwrap();
                    assert_eq!(table.get(&other), None, "{h} changed at {at}: {other:?}");
                }
            }
            assert_eq!(table.get(&format!("{h}a")), None, "{h}");
            let shorter = table.get(&h[..n - 1]).copied();
            let expected = (n > 1 && host(n - 1) == h[..n - 1]).then_some(n - 1);
            assert_eq!(shorter, expected, "{h}");
        }
    }

    #[test]
    fn a_long_host_differing_only_past_the_inline_bytes_is_another_host() {
        let mut table = HostTable::with_capacity(4);
        let a = format!("{}.a.example", "x".repeat(INLINE));
        let b = format!("{}.b.example", "x".repeat(INLINE));
        table.insert(&a, 1);
        assert_eq!(table.get(&a), Some(&1));
        assert_eq!(table.get(&b), None);
        table.insert(&b, 2);
        assert_eq!(table.get(&b.to_ascii_uppercase()), Some(&2));
        assert_eq!(table.get(&a), Some(&1));
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let table: HostTable<u8> = HostTable::default();
        assert_eq!(table.get("a.example"), None);
        assert_eq!(table.get(""), None);
        assert_eq!(table.len(), 0);
    }
}

//! Static hash tables built once at compile time and probed on the hot path.
//!
//! The keys come from the rule set (an administrator's values), the probes from requests. The
//! tables are two-choice cuckoo tables (see [`cuckoo_layout`]) keyed by a folded-multiply hash
//! with a per-policy random seed, so that a rule author cannot arrange keys to collide by
//! knowing the hash function.

use std::hash::BuildHasher;
use std::hint::select_unpredictable;

const K0: u64 = 0x243f_6a88_85a3_08d3;
const K1: u64 = 0x1319_8a2e_0370_7344;
const K2: u64 = 0xa409_3822_299f_31d0;
const K3: u64 = 0x082e_fa98_ec4e_6c89;

/// Marks an empty slot, and the answer "absent" (the same value as [`crate::range::NONE`],
/// "no posting").
pub(crate) const EMPTY: u32 = crate::range::NONE;

#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// A fresh random seed (from the standard library's per-process random keys).
pub(crate) fn random_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(0x6e65_7461_636cu64)
}

/// The last `bytes.len() < 8` bytes of a string as a zero-padded little-endian word, read with
/// fixed-size loads (a variable-length copy would cost a call and a store-forwarding stall).
#[inline(always)]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    if n >= 4 {
        let low = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let high = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
        // The two loads overlap on identical bytes, so OR-ing them is exact.
        u64::from(low) | (u64::from(high) << (8 * (n - 4)))
    } else if n > 0 {
        u64::from(rest[0])
            | (u64::from(rest[n / 2]) << (8 * (n / 2)))
            | (u64::from(rest[n - 1]) << (8 * (n - 1)))
    } else {
        0
    }
}

/// Hashes one 64-bit word: one folded multiply (both halves of the product depend on every
/// bit of the word; the table uses the low bits for a bucket and the high ones for the other).
#[inline(always)]
pub(crate) fn hash_word(seed: u64, word: u64) -> u64 {
    fold_mul(word ^ seed, K0)
}

/// Hashes a byte string.
#[inline(always)]
pub(crate) fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    hash_words::<0>(seed, bytes)
}

/// Bit 5 of every byte: ASCII upper and lower case differ only there.
const CASE_BITS: u64 = 0x2020_2020_2020_2020;

/// A case-insensitive hash: the hash of the bytes with bit 5 set in each, so that `A` and `a`
/// hash alike (and so do a few pairs of other bytes, such as `@` and `` ` ``, which the key
/// comparison then tells apart). One `or` a word instead of a lowercase conversion.
#[inline(always)]
pub(crate) fn hash_bytes_caseless(seed: u64, bytes: &[u8]) -> u64 {
    hash_words::<CASE_BITS>(seed, bytes)
}

/// The eight bytes of `chunk` from `at` as a little-endian word.
#[inline(always)]
fn word_at(chunk: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&chunk[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Hashes a byte string sixteen bytes a multiply, each word OR-ed with `BLUR` first: the two
/// words of a chunk, each xor-ed with a key and one of them with the running state, are
/// multiplied and the 128-bit product folded (the mixing step of wyhash). A 36-byte JA4 costs
/// four dependent multiplies, a 110-byte user agent eight.
#[inline(always)]
fn hash_words<const BLUR: u64>(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K2);
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        let (x, y) = (word_at(chunk, 0) | BLUR, word_at(chunk, 8) | BLUR);
        h = fold_mul(x ^ K0, y ^ h);
    }
    let rest = chunks.remainder();
    let (x, y) = if rest.len() > 8 {
        (word_at(rest, 0), tail_word(&rest[8..]))
    } else {
        (tail_word(rest), 0)
    };
    fold_mul(fold_mul((x | BLUR) ^ K1, (y | BLUR) ^ h) ^ K3, K2 ^ h)
}

/// ASCII-lowercases the eight bytes of a word at once (bytes >= 0x80 are left alone).
#[inline(always)]
fn lower8(x: u64) -> u64 {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let ascii = !x & HIGH;
    let heptets = x & !HIGH;
    let at_least_a = heptets.wrapping_add(0x3f3f_3f3f_3f3f_3f3f);
    let above_z = heptets.wrapping_add(0x2525_2525_2525_2525);
    x | ((at_least_a & !above_z & ascii) >> 2)
}

/// Whether `key` folded to ASCII lowercase equals `stored` (already lowercase): eight bytes
/// at a time, the same answer as `stored.eq_ignore_ascii_case(key)` for a lowercase `stored`.
/// Out of line: it runs only on a tag match, and inlined its set-up would be hoisted into
/// every probe.
#[inline(never)]
fn eq_folded(stored: &[u8], key: &[u8]) -> bool {
    if stored.len() != key.len() {
        return false;
    }
    let mut a = stored.chunks_exact(8);
    let mut b = key.chunks_exact(8);
    for (x, y) in (&mut a).zip(&mut b) {
        let mut xw = [0u8; 8];
        let mut yw = [0u8; 8];
        xw.copy_from_slice(x);
        yw.copy_from_slice(y);
        if u64::from_le_bytes(xw) != lower8(u64::from_le_bytes(yw)) {
            return false;
        }
    }
    tail_word(a.remainder()) == lower8(tail_word(b.remainder()))
}

/// A key of fixed size that hashes to one word.
pub(crate) trait FixedKey: Copy + Ord + Default {
    fn hash(self, seed: u64) -> u64;
}

impl FixedKey for u32 {
    #[inline]
    fn hash(self, seed: u64) -> u64 {
        hash_word(seed, u64::from(self))
    }
}

impl FixedKey for u64 {
    #[inline]
    fn hash(self, seed: u64) -> u64 {
        hash_word(seed, self)
    }
}

/// A short string (at most seven bytes, such as an ISO 3166-2 subdivision code) as one word:
/// its ASCII-lowercase bytes, little-endian, and its length in the top byte. `None` for a
/// longer string, which no such key equals.
#[inline(always)]
pub(crate) fn short_key_caseless(bytes: &[u8]) -> Option<u64> {
    if bytes.len() > 7 {
        return None;
    }
    Some(lower8(tail_word(bytes)) | ((bytes.len() as u64) << 56))
}

/// A 16-byte key (a JA3 fingerprint) as two words: 8-byte aligned, so a slot takes 24 bytes
/// (a `u128` key would be aligned, and its slot padded, to 32).
impl FixedKey for [u64; 2] {
    #[inline]
    fn hash(self, seed: u64) -> u64 {
        fold_mul(self[0] ^ seed, self[1] ^ K1)
    }
}

/// The 16 bytes of a JA3 fingerprint as a [`FixedKey`].
#[inline(always)]
pub(crate) fn ja3_key(bytes: [u8; 16]) -> [u64; 2] {
    let mut low = [0u8; 8];
    let mut high = [0u8; 8];
    low.copy_from_slice(&bytes[..8]);
    high.copy_from_slice(&bytes[8..]);
    [u64::from_le_bytes(low), u64::from_le_bytes(high)]
}

/// Tables whose slots take fewer bytes than this get no [`Filter`]: they stay in cache anyway.
const FILTER_MIN_BYTES: usize = 16 * 1024;

/// A membership filter in front of a large table: one bit array of about 8 bits a key (a few
/// KB where the table takes hundreds), in which each key sets two bits of one 64-bit word. A
/// request value whose two bits are not both set is definitely absent, and the probe ends
/// without touching the table (most request values are absent: a miss then costs a read from
/// a small, cache-resident array instead of a cache miss in the table). False positives
/// (about 5%) go on to the table as before.
#[derive(Debug, Clone)]
struct Filter {
    words: Vec<u64>,
    mask: usize,
}

impl Filter {
    /// A filter for `keys` keys, or `None` when the table is small (`slot_bytes` in all).
    fn for_table(keys: usize, slot_bytes: usize) -> Option<Filter> {
        if slot_bytes < FILTER_MIN_BYTES {
            return None;
        }
        // 8 bits a key: `keys / 8` words, a power of two.
        let words = (keys / 8).max(1).next_power_of_two();
        Some(Filter {
            words: vec![0; words],
            mask: words - 1,
        })
    }

    /// The word and the two bits of a hash (the table uses its low bits for the slot and its
    /// high half as a tag; the filter takes the word from the high half and the bits from
    /// its top, so its answers are independent of the slot).
    #[inline(always)]
    fn position(&self, h: u64) -> (usize, u64) {
        let word = (h >> 32) as usize & self.mask;
        let bits = (1u64 << ((h >> 58) & 63)) | (1u64 << ((h >> 52) & 63));
        (word, bits)
    }

    fn insert(&mut self, h: u64) {
        let (word, bits) = self.position(h);
        self.words[word] |= bits;
    }

    /// Whether a key with hash `h` may be in the table.
    #[inline(always)]
    fn may_contain(&self, h: u64) -> bool {
        let (word, bits) = self.position(h);
        self.words[word] & bits == bits
    }

    fn bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

/// Whether a key with hash `h` may be in a table behind `filter` (always, without one).
#[inline(always)]
fn admits(filter: &Option<Filter>, h: u64) -> bool {
    filter.as_ref().is_none_or(|f| f.may_contain(h))
}

/// Slots per bucket.
const BUCKET: usize = 2;

/// How many keys one insertion may displace before the placement gives up.
const MAX_KICKS: usize = 500;

/// The two buckets of a key with hash `h` in a table of `mask + 1` buckets: the low bits of
/// the hash, and those xor-ed with a spread of its high half made odd, so that the two differ
/// whenever there are two buckets or more.
#[inline(always)]
fn buckets_of(h: u64, mask: usize) -> (usize, usize) {
    let first = h as usize & mask;
    let spread = ((h >> 32).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize | 1;
    (first, (first ^ spread) & mask)
}

/// Where the keys of a cuckoo table sit.
struct Layout {
    seed: u64,
    mask: usize,
    /// Per slot (`bucket * BUCKET + i`): the index of the key there, or [`EMPTY`].
    slots: Vec<u32>,
}

/// Places `n` distinct keys so that each sits in one of the two buckets of its hash
/// (`hash(seed, key index)`): two-choice cuckoo hashing with buckets of two slots, at a load of
/// at most three quarters, below the point (about 0.89) where placement starts to fail. Should a
/// placement fail anyway, another seed is tried, and every fourth attempt the table doubles.
/// The seed is the policy's random seed (and its derivatives): a rule author who does not know
/// it cannot choose keys that collide.
fn cuckoo_layout(n: usize, seed: u64, hash: impl Fn(u64, usize) -> u64) -> Layout {
    // At most three keys in four slots (two-choice tables of two-slot buckets fill to about
    // 89% before placement fails), at least three in eight.
    let mut buckets = (n * 2).div_ceil(3).max(1).next_power_of_two();
    let mut seed = seed;
    let mut attempt = 0u64;
    loop {
        if let Some(slots) = try_place(n, buckets - 1, |i| hash(seed, i)) {
            return Layout {
                seed,
                mask: buckets - 1,
                slots,
            };
        }
        attempt += 1;
        seed = hash_word(seed, attempt);
        if attempt.is_multiple_of(4) {
            buckets *= 2;
        }
    }
}

/// One placement attempt (random-walk eviction): `None` when some key found no slot.
fn try_place(n: usize, mask: usize, hash_of: impl Fn(usize) -> u64) -> Option<Vec<u32>> {
    let hashes: Vec<u64> = (0..n).map(hash_of).collect();
    let mut slots = vec![EMPTY; (mask + 1) * BUCKET];
    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ n as u64;
    for key in 0..n {
        let mut homeless = key as u32;
        let mut placed = false;
        for _ in 0..MAX_KICKS {
            let (a, b) = buckets_of(hashes[homeless as usize], mask);
            let choices = [a * BUCKET, a * BUCKET + 1, b * BUCKET, b * BUCKET + 1];
            if let Some(&free) = choices.iter().find(|&&slot| slots[slot] == EMPTY) {
                slots[free] = homeless;
                placed = true;
                break;
            }
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            std::mem::swap(&mut slots[choices[(rng % 4) as usize]], &mut homeless);
        }
        if !placed {
            return None;
        }
    }
    Some(slots)
}

/// An immutable map from a fixed-size key to a `u32` (never [`EMPTY`]), laid out by
/// [`cuckoo_layout`]: a lookup reads the two buckets of the key's hash (independent loads that
/// overlap) and selects the value without a branch, so whether a request value is present
/// costs no misprediction.
#[derive(Debug, Clone)]
pub(crate) struct FixedMap<K> {
    seed: u64,
    mask: usize,
    /// `(key, value)` slots; a free slot holds `(K::default(), EMPTY)`.
    buckets: Vec<[(K, u32); BUCKET]>,
    len: usize,
    filter: Option<Filter>,
}

impl<K: FixedKey> FixedMap<K> {
    /// Builds the map; keys must be unique (a later duplicate is ignored).
    pub(crate) fn build(seed: u64, entries: &[(K, u32)]) -> Self {
        let mut distinct: Vec<(K, u32)> = Vec::with_capacity(entries.len());
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by(|&a, &b| entries[a].0.cmp(&entries[b].0).then(a.cmp(&b)));
        for (i, &at) in order.iter().enumerate() {
            if i == 0 || entries[order[i - 1]].0 != entries[at].0 {
                distinct.push(entries[at]);
            }
        }
        let layout = cuckoo_layout(distinct.len(), seed, |seed, i| distinct[i].0.hash(seed));
        let mut filter = Filter::for_table(
            distinct.len(),
            layout.slots.len() * std::mem::size_of::<(K, u32)>(),
        );
        let mut buckets = vec![[(K::default(), EMPTY); BUCKET]; layout.mask + 1];
        for (slot, &key) in layout.slots.iter().enumerate() {
            if key != EMPTY {
                buckets[slot / BUCKET][slot % BUCKET] = distinct[key as usize];
            }
        }
        if let Some(filter) = &mut filter {
            for &(key, _) in &distinct {
                filter.insert(key.hash(layout.seed));
            }
        }
        Self {
            seed: layout.seed,
            mask: layout.mask,
            buckets,
            len: distinct.len(),
            filter,
        }
    }

    /// The value stored for `key`, or [`EMPTY`]: the two buckets are read and the value
    /// selected without branching on the outcome (only the filter in front of a large table
    /// may end the lookup early).
    #[inline(always)]
    pub(crate) fn find(&self, key: K) -> u32 {
        let h = key.hash(self.seed);
        if !admits(&self.filter, h) {
            return EMPTY;
        }
        let (a, b) = buckets_of(h, self.mask);
        let (first, second) = (self.buckets[a], self.buckets[b]);
        // A free slot holds EMPTY, the largest value: the minimum is the match, if any.
        let pick = |(k, v): (K, u32)| select_unpredictable(k == key, v, EMPTY);
        pick(first[0])
            .min(pick(first[1]))
            .min(pick(second[0]))
            .min(pick(second[1]))
    }

    /// The value stored for `key`.
    #[cfg(test)]
    pub(crate) fn get(&self, key: K) -> Option<u32> {
        Some(self.find(key)).filter(|&v| v != EMPTY)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<[(K, u32); BUCKET]>()
            + self.filter.as_ref().map_or(0, Filter::bytes)
    }

    #[cfg(test)]
    fn has_filter(&self) -> bool {
        self.filter.is_some()
    }
}

/// Country codes (two ASCII letters, upper case) to postings: a table of 26 × 26 entries
/// indexed by the letters, no hashing.
#[derive(Debug, Clone)]
pub(crate) struct CountryTable {
    postings: Box<[u32]>,
    len: usize,
}

impl CountryTable {
    /// The slot of a code, `None` when it is not two upper-case ASCII letters.
    #[inline(always)]
    fn slot(code: [u8; 2]) -> Option<usize> {
        let [a, b] = code.map(|c| usize::from(c.wrapping_sub(b'A')));
        (a < 26 && b < 26).then_some(a * 26 + b)
    }

    /// Builds the table from distinct codes (a code that is not two upper-case letters, which
    /// validation does not let through, is left out).
    pub(crate) fn build(entries: &[([u8; 2], u32)]) -> Self {
        let mut postings = vec![EMPTY; 26 * 26].into_boxed_slice();
        let mut len = 0;
        for &(code, posting) in entries {
            if let Some(slot) = Self::slot(code) {
                len += usize::from(postings[slot] == EMPTY);
                postings[slot] = posting;
            }
        }
        Self { postings, len }
    }

    /// The posting of `code`, or [`EMPTY`].
    #[inline(always)]
    pub(crate) fn find(&self, code: [u8; 2]) -> u32 {
        Self::slot(code).map_or(EMPTY, |slot| self.postings[slot])
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn bytes(&self) -> usize {
        self.postings.len() * 4
    }
}

/// An immutable map from a byte string to a `u32`, laid out by [`cuckoo_layout`]. Slots hold
/// a 32-bit hash tag and an entry index; the key bytes live in one arena. A lookup reads the
/// two buckets, selects the slot whose tag matches without branching, and compares the key
/// once.
#[derive(Debug, Clone)]
pub(crate) struct ByteMap {
    seed: u64,
    /// Keys are lowercase and hashed case-insensitively ([`ByteMap::build_caseless`]).
    caseless: bool,
    mask: usize,
    /// `(tag, entry)` slots; a free slot holds `(0, EMPTY)`.
    buckets: Vec<[(u32, u32); BUCKET]>,
    entries: Vec<ByteEntry>,
    arena: Vec<u8>,
    max_len: usize,
    filter: Option<Filter>,
}

#[derive(Debug, Clone, Copy)]
struct ByteEntry {
    start: u32,
    len: u32,
    value: u32,
}

impl ByteMap {
    /// Builds the map from byte-string keys, compared exactly; a later duplicate key is
    /// ignored.
    pub(crate) fn build<'k>(seed: u64, entries: impl IntoIterator<Item = (&'k [u8], u32)>) -> Self {
        Self::build_with(seed, false, entries)
    }

    /// Builds the map from ASCII-lowercase keys, for [`ByteMap::get_caseless`] (and exact
    /// [`ByteMap::get`]).
    pub(crate) fn build_caseless<'k>(
        seed: u64,
        entries: impl IntoIterator<Item = (&'k [u8], u32)>,
    ) -> Self {
        Self::build_with(seed, true, entries)
    }

    #[inline]
    fn hash_with(caseless: bool, seed: u64, key: &[u8]) -> u64 {
        if caseless {
            hash_bytes_caseless(seed, key)
        } else {
            hash_bytes(seed, key)
        }
    }

    fn build_with<'k>(
        seed: u64,
        caseless: bool,
        entries: impl IntoIterator<Item = (&'k [u8], u32)>,
    ) -> Self {
        let mut seen = std::collections::HashSet::new();
        let entries: Vec<(&[u8], u32)> = entries
            .into_iter()
            .filter(|(key, _)| seen.insert(*key))
            .collect();
        debug_assert!(
            !caseless
                || entries
                    .iter()
                    .all(|(k, _)| !k.iter().any(u8::is_ascii_uppercase))
        );
        let layout = cuckoo_layout(entries.len(), seed, |seed, i| {
            Self::hash_with(caseless, seed, entries[i].0)
        });
        let mut filter = Filter::for_table(entries.len(), layout.slots.len() * 8);
        let mut buckets = vec![[(0, EMPTY); BUCKET]; layout.mask + 1];
        for (slot, &key) in layout.slots.iter().enumerate() {
            if key != EMPTY {
                let h = Self::hash_with(caseless, layout.seed, entries[key as usize].0);
                buckets[slot / BUCKET][slot % BUCKET] = ((h >> 32) as u32, key);
            }
        }
        let mut map = Self {
            seed: layout.seed,
            caseless,
            mask: layout.mask,
            buckets,
            entries: Vec::with_capacity(entries.len()),
            arena: Vec::with_capacity(entries.iter().map(|(k, _)| k.len()).sum()),
            max_len: 0,
            filter: None,
        };
        for &(key, value) in &entries {
            if let Some(filter) = &mut filter {
                filter.insert(Self::hash_with(caseless, map.seed, key));
            }
            map.entries.push(ByteEntry {
                start: map.arena.len() as u32,
                len: key.len() as u32,
                value,
            });
            map.arena.extend_from_slice(key);
            map.max_len = map.max_len.max(key.len());
        }
        map.filter = filter;
        map
    }

    #[inline]
    fn key(&self, index: usize) -> &[u8] {
        let e = self.entries[index];
        &self.arena[e.start as usize..(e.start + e.len) as usize]
    }

    /// The entry whose tag matches `h` in the key's two buckets and whose key satisfies `eq`,
    /// or [`EMPTY`]. The slot is selected without a branch; only when two candidate slots
    /// share the tag (one key in four billion) and the first is not the key are the four
    /// checked one by one.
    #[inline]
    fn find_entry(&self, h: u64, eq: impl Fn(&[u8]) -> bool) -> u32 {
        let tag = (h >> 32) as u32;
        let (a, b) = buckets_of(h, self.mask);
        let (first, second) = (self.buckets[a], self.buckets[b]);
        let pick = |(t, index): (u32, u32)| select_unpredictable(t == tag, index, EMPTY);
        let index = pick(first[0])
            .min(pick(first[1]))
            .min(pick(second[0]))
            .min(pick(second[1]));
        if index == EMPTY || eq(self.key(index as usize)) {
            return index;
        }
        [first[0], first[1], second[0], second[1]]
            .into_iter()
            .find(|&(t, i)| t == tag && i != EMPTY && eq(self.key(i as usize)))
            .map_or(EMPTY, |(_, i)| i)
    }

    /// The value stored for `key` (compared byte for byte).
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Option<u32> {
        if key.len() > self.max_len {
            return None;
        }
        let h = Self::hash_with(self.caseless, self.seed, key);
        if !admits(&self.filter, h) {
            return None;
        }
        let index = self.find_entry(h, |stored| stored == key);
        self.entries.get(index as usize).map(|e| e.value)
    }

    /// The value stored for the ASCII-lowercase form of `key`, or [`EMPTY`] (folded while
    /// hashing and comparing, no copy); the keys must have been stored lowercase.
    #[inline]
    pub(crate) fn find_caseless(&self, key: &[u8]) -> u32 {
        if key.len() > self.max_len {
            return EMPTY;
        }
        debug_assert!(self.caseless, "find_caseless on a case-sensitive map");
        let h = hash_bytes_caseless(self.seed, key);
        if !admits(&self.filter, h) {
            return EMPTY;
        }
        let index = self.find_entry(h, |stored| eq_folded(stored, key));
        self.entries.get(index as usize).map_or(EMPTY, |e| e.value)
    }

    /// The value stored for the ASCII-lowercase form of `key`.
    #[cfg(test)]
    pub(crate) fn get_caseless(&self, key: &[u8]) -> Option<u32> {
        Some(self.find_caseless(key)).filter(|&v| v != EMPTY)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn max_len(&self) -> usize {
        self.max_len
    }

    pub(crate) fn bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<[(u32, u32); BUCKET]>()
            + self.entries.capacity() * std::mem::size_of::<ByteEntry>()
            + self.arena.capacity()
            + self.filter.as_ref().map_or(0, Filter::bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq_folded_agrees_with_eq_ignore_ascii_case_on_lowercase_keys() {
        // Every byte value at every position of keys of lengths 0..=19 (chunk and tail paths).
        for len in 0..20usize {
            let stored: Vec<u8> = (0..len).map(|i| b"abcdefghij0123-._xyz"[i]).collect();
            assert!(eq_folded(&stored, &stored.to_ascii_uppercase()));
            assert!(!eq_folded(&stored, &[stored.as_slice(), b"a"].concat()));
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut key = stored.clone();
                    key[at] = byte;
                    assert_eq!(
                        eq_folded(&stored, &key),
                        stored.eq_ignore_ascii_case(&key),
                        "len {len} at {at} byte {byte:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn fixed_map_finds_every_key_and_nothing_else() {
        let entries: Vec<(u32, u32)> = (0..1000u32).map(|k| (k * 7919, k)).collect();
        let map = FixedMap::build(random_seed(), &entries);
        assert_eq!(map.len(), 1000);
        for &(k, v) in &entries {
            assert_eq!(map.get(k), Some(v));
        }
        assert_eq!(map.get(1), None);
        assert_eq!(FixedMap::<u32>::build(1, &[]).get(0), None);
        let wide = FixedMap::build(3, &[([u64::MAX; 2], 1), ([0, 0], 2), ([0, 1], 3)]);
        assert_eq!(wide.get([u64::MAX; 2]), Some(1));
        assert_eq!(wide.get([0, 0]), Some(2));
        assert_eq!(wide.get([0, 1]), Some(3));
        assert_eq!(wide.get([1, 0]), None);
    }

    #[test]
    fn large_tables_filter_out_absent_keys_and_keep_present_ones() {
        let seed = random_seed();
        let entries: Vec<(u32, u32)> = (0..20_000u32).map(|k| (k * 2 + 1, k)).collect();
        let map = FixedMap::build(seed, &entries);
        assert!(map.has_filter());
        assert!(!FixedMap::build(seed, &entries[..100]).has_filter());
        for &(k, v) in &entries {
            assert_eq!(map.get(k), Some(v), "{k}");
        }
        // Absent keys: none found, and most stopped by the filter.
        let filter = map.filter.as_ref().expect("a filter");
        let mut passed = 0;
        for k in 0..20_000u32 {
            let absent = k * 2;
            assert_eq!(map.get(absent), None);
            passed += usize::from(filter.may_contain(absent.hash(seed)));
        }
        assert!(
            passed < 2_000,
            "{passed} of 20000 absent keys pass the filter"
        );

        let keys: Vec<String> = (0..5_000).map(|i| format!("host{i}.example.com")).collect();
        let bytes = ByteMap::build_caseless(
            seed,
            keys.iter()
                .enumerate()
                .map(|(i, k)| (k.as_bytes(), i as u32)),
        );
        assert!(bytes.filter.is_some());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(bytes.get(k.as_bytes()), Some(i as u32));
            assert_eq!(
                bytes.get_caseless(k.to_ascii_uppercase().as_bytes()),
                Some(i as u32)
            );
        }
        for i in 5_000..10_000 {
            let absent = format!("host{i}.example.com");
            assert_eq!(bytes.get(absent.as_bytes()), None);
            assert_eq!(bytes.get_caseless(absent.as_bytes()), None);
        }
    }

    #[test]
    fn byte_map_exact_and_caseless() {
        let keys = [
            "login.example.com",
            "a",
            "",
            "x".repeat(300).leak(),
            "@[",
            "`{",
        ];
        let map = ByteMap::build_caseless(
            random_seed(),
            keys.iter()
                .enumerate()
                .map(|(i, k)| (k.as_bytes(), i as u32)),
        );
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(map.get(k.as_bytes()), Some(i as u32));
        }
        assert_eq!(map.get(b"login.example.co"), None);
        assert_eq!(map.get_caseless(b"LOGIN.Example.COM"), Some(0));
        assert_eq!(map.get(b"LOGIN.Example.COM"), None);
        assert_eq!(map.get_caseless("X".repeat(300).as_bytes()), Some(3));
        assert_eq!(
            map.get_caseless(b"@["),
            Some(4),
            "same case-insensitive hash"
        );
        assert_eq!(
            map.get_caseless(b"`{"),
            Some(5),
            "same case-insensitive hash"
        );
        assert_eq!(map.get_caseless(b"@{"), None);
        assert_eq!(map.max_len(), 300);
        let exact = ByteMap::build(2, [(&b"Agent/1.0"[..], 7)]);
        assert_eq!(exact.get(b"Agent/1.0"), Some(7));
        assert_eq!(exact.get(b"agent/1.0"), None);
        assert_eq!(ByteMap::build(1, []).get(b""), None);
    }

    #[test]
    fn caseless_hash_equals_hash_of_the_lowercase_form() {
        let samples: [&[u8]; 6] = [
            b"",
            b"A",
            b"Login.EXAMPLE.com",
            b"@[`{AZaz09-_.",
            "Ünïcode-MIXED-Case-0123456789".as_bytes(),
            &[0xc0, 0xc1, 0xda, 0xdb, 0x41, 0x5a, 0x80, 0xff, 0x7f],
        ];
        for s in samples {
            assert_eq!(
                hash_bytes_caseless(5, s),
                hash_bytes_caseless(5, &s.to_ascii_lowercase()),
                "{s:?}"
            );
            assert_eq!(
                hash_bytes_caseless(5, s),
                hash_bytes_caseless(5, &s.to_ascii_uppercase()),
                "{s:?}"
            );
        }
        assert_ne!(
            hash_bytes_caseless(5, b"abc"),
            hash_bytes_caseless(5, b"abd")
        );
        for b in 0u8..=255 {
            let word = u64::from_le_bytes([b; 8]);
            assert_eq!(
                lower8(word),
                u64::from_le_bytes([b.to_ascii_lowercase(); 8]),
                "{b}"
            );
        }
    }

    #[test]
    fn short_keys_fold_case_and_keep_the_length() {
        assert_eq!(short_key_caseless(b"US-NY"), short_key_caseless(b"us-ny"));
        assert_eq!(short_key_caseless(b"Fr-75c"), short_key_caseless(b"FR-75C"));
        assert_ne!(short_key_caseless(b"US-N"), short_key_caseless(b"US-N\0"));
        assert_ne!(short_key_caseless(b"US-NY"), short_key_caseless(b"US-NZ"));
        assert_ne!(short_key_caseless(b""), None);
        assert_eq!(
            short_key_caseless(b"GB-ENGX"),
            short_key_caseless(b"gb-engx")
        );
        assert_eq!(short_key_caseless(b"GB-ENGXX"), None);
    }

    #[test]
    fn tail_words_are_zero_padded_little_endian() {
        let bytes = [0x11u8, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77];
        for n in 0..8 {
            let mut padded = [0u8; 8];
            padded[..n].copy_from_slice(&bytes[..n]);
            assert_eq!(tail_word(&bytes[..n]), u64::from_le_bytes(padded), "{n}");
        }
    }

    #[test]
    fn hashes_depend_on_every_byte_and_the_length() {
        let a = hash_bytes(9, b"abcdefghij");
        assert_ne!(a, hash_bytes(9, b"abcdefghik"));
        assert_ne!(hash_bytes(9, b"abc"), hash_bytes(9, b"abc\0"));
        assert_ne!(a, hash_bytes(10, b"abcdefghij"));
    }
}

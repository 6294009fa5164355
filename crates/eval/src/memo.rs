//! A per-thread memo of user-agent match results.
//!
//! Finding the wildcard patterns a user agent matches means scanning the whole string (a SIMD
//! search for the inner literals, the prefix and suffix tries), about a third of a decision's
//! work. Traffic repeats user agents heavily (a few browser strings carry most requests), so
//! the result for a string is remembered: a direct-mapped table of 256 slots per thread, each
//! holding a copy of the string (so a hit is exact, never a hash collision), the postings it
//! matched and the id of the index that matched it (each compiled index gets a new id, so a
//! policy never sees another policy's results). The table lives in the thread's static storage:
//! no heap allocation, no lock, no atomic on the hot path. Strings longer than
//! [`MAX_BYTES`] and results of more than [`MAX_POSTINGS`] postings are not remembered.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots per thread.
const SLOTS: usize = 256;
/// The longest string remembered.
pub(crate) const MAX_BYTES: usize = 224;
/// The most postings a remembered result holds.
const MAX_POSTINGS: usize = 4;

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A new owner id for an index whose results are remembered (never 0, the empty slot's).
pub(crate) fn new_owner() -> u64 {
    NEXT_OWNER.fetch_add(1, Ordering::Relaxed)
}

#[derive(Clone, Copy)]
struct Slot {
    owner: u64,
    hash: u64,
    len: u16,
    count: u16,
    postings: [u32; MAX_POSTINGS],
    bytes: [u8; MAX_BYTES],
}

impl Slot {
    const EMPTY: Slot = Slot {
        owner: 0,
        hash: 0,
        len: 0,
        count: 0,
        postings: [0; MAX_POSTINGS],
        bytes: [0; MAX_BYTES],
    };
}

thread_local! {
    static MEMO: RefCell<[Slot; SLOTS]> = const { RefCell::new([Slot::EMPTY; SLOTS]) };
}

/// Calls `found` with every posting `text` matches for the index `owner`: the remembered
/// result when there is one, otherwise `compute`'s (remembered for next time). `hash` is any
/// good hash of `text` (it picks the slot and is compared before the bytes).
#[inline]
pub(crate) fn remembered(
    owner: u64,
    hash: u64,
    text: &[u8],
    found: &mut impl FnMut(u32),
    compute: impl FnOnce(&mut dyn FnMut(u32)),
) {
    if text.len() > MAX_BYTES {
        return compute(found);
    }
    let at = hash as usize % SLOTS;
    let hit = MEMO
        .try_with(|memo| {
            let memo = memo.try_borrow().ok()?;
            let slot = &memo[at];
            (slot.owner == owner
                && slot.hash == hash
                && usize::from(slot.len) == text.len()
                && slot.bytes[..text.len()] == *text)
                .then_some((slot.count, slot.postings))
        })
        .ok()
        .flatten();
    if let Some((count, postings)) = hit {
        for &posting in &postings[..usize::from(count)] {
            found(posting);
        }
        return;
    }
    let mut postings = [0u32; MAX_POSTINGS];
    let mut count = 0usize;
    compute(&mut |posting| {
        if let Some(slot) = postings.get_mut(count) {
            *slot = posting;
        }
        count += 1;
        found(posting);
    });
    if count <= MAX_POSTINGS {
        // Unavailable only while the thread is being torn down: then nothing is remembered.
        let _ = MEMO.try_with(|memo| {
            if let Ok(mut memo) = memo.try_borrow_mut() {
                let slot = &mut memo[at];
                slot.owner = owner;
                slot.hash = hash;
                slot.len = text.len() as u16;
                slot.count = count as u16;
                slot.postings = postings;
                slot.bytes[..text.len()].copy_from_slice(text);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in matcher: postings are the positions of `x` in the text, counted per call.
    fn lookup(owner: u64, text: &[u8], calls: &mut usize) -> Vec<u32> {
        let mut out = Vec::new();
        let hash = crate::hash::hash_bytes(7, text);
        remembered(owner, hash, text, &mut |p| out.push(p), |found| {
            *calls += 1;
            for (i, &b) in text.iter().enumerate() {
                if b == b'x' {
                    found(i as u32);
                }
            }
        });
        out
    }

    #[test]
    fn results_are_remembered_per_owner_and_exact() {
        let (a, b) = (new_owner(), new_owner());
        let mut calls = 0;
        assert_eq!(lookup(a, b"axbx", &mut calls), vec![1, 3]);
        assert_eq!(lookup(a, b"axbx", &mut calls), vec![1, 3]);
        assert_eq!(calls, 1, "the second lookup is remembered");
        // Another owner, and another string, compute their own.
        assert_eq!(lookup(b, b"axbx", &mut calls), vec![1, 3]);
        assert_eq!(lookup(a, b"axby", &mut calls), vec![1]);
        assert_eq!(calls, 3);
        // No match is remembered too.
        assert_eq!(lookup(a, b"nothing", &mut calls), Vec::<u32>::new());
        assert_eq!(lookup(a, b"nothing", &mut calls), Vec::<u32>::new());
        assert_eq!(calls, 4);
        // More postings than a slot holds, and strings too long: computed every time.
        assert_eq!(lookup(a, b"xxxxx", &mut calls), vec![0, 1, 2, 3, 4]);
        assert_eq!(lookup(a, b"xxxxx", &mut calls), vec![0, 1, 2, 3, 4]);
        let long = vec![b'x'; MAX_BYTES + 1];
        assert_eq!(lookup(a, &long, &mut calls).len(), MAX_BYTES + 1);
        assert_eq!(calls, 7);
    }

    #[test]
    fn strings_sharing_a_slot_never_answer_for_each_other() {
        let owner = new_owner();
        let mut calls = 0;
        // Many distinct strings through 256 slots: every answer is that string's own.
        for round in 0..3 {
            for i in 0..2_000u32 {
                let text = format!("agent {i} {}", "x".repeat((i % 3) as usize));
                let expected: Vec<u32> = (0..(i % 3))
                    .map(|k| (text.len() as u32) - (i % 3) + k)
                    .collect();
                assert_eq!(
                    lookup(owner, text.as_bytes(), &mut calls),
                    expected,
                    "round {round} {text}"
                );
            }
        }
    }
}

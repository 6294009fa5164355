//! Searches of sorted slices without data-dependent branches.
//!
//! Whether a request's value is in a list is data: a branch on it is mispredicted about as
//! often as the answer changes, at some twenty cycles each time. These searches run a fixed
//! number of steps for a given length (the loop is as predictable as the length) and choose
//! with conditional moves ([`std::hint::select_unpredictable`]).

use std::hint::select_unpredictable;

/// How many leading elements of `items` satisfy `below` (which must hold for a prefix of
/// `items` and fail for the rest), like [`slice::partition_point`].
#[inline(always)]
pub(crate) fn partition_point<T>(items: &[T], below: impl Fn(&T) -> bool) -> usize {
    let mut size = items.len();
    if size == 0 {
        return 0;
    }
    // Invariant: every element before `base` satisfies `below`, and the answer lies in
    // `base..=base + size`.
    let mut base = 0;
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = select_unpredictable(below(&items[mid]), mid, base);
        size -= half;
    }
    base + usize::from(below(&items[base]))
}

/// Whether the ascending `items` hold `value`.
#[inline(always)]
pub(crate) fn contains_sorted(items: &[u32], value: u32) -> bool {
    let at = partition_point(items, |&x| x < value);
    items.get(at) == Some(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_standard_library_on_every_position_and_length() {
        for len in 0..40u32 {
            let items: Vec<u32> = (0..len).map(|i| i * 3 + 1).collect();
            for value in 0..len * 3 + 3 {
                assert_eq!(
                    partition_point(&items, |&x| x <= value),
                    items.partition_point(|&x| x <= value),
                    "len {len} value {value}"
                );
                assert_eq!(
                    contains_sorted(&items, value),
                    items.binary_search(&value).is_ok(),
                    "len {len} value {value}"
                );
            }
        }
        let repeated = [1u32, 2, 2, 2, 5];
        assert_eq!(partition_point(&repeated, |&x| x < 2), 1);
        assert_eq!(partition_point(&repeated, |&x| x <= 2), 4);
        assert!(contains_sorted(&repeated, 2));
        assert!(!contains_sorted(&repeated, 3));
    }
}

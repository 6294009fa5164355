//! Large IPv4 tables of disjoint ranges with small values, one cache line per block of
//! addresses: the layout of a [`GeoTable`](crate::GeoTable)'s IPv4 ranges.
//!
//! [`RangeTable`](crate::range::RangeTable)'s blocks hold five intervals in half a cache line,
//! sized for block lists, whose networks are spread over the address space. A GeoIP database is
//! dense where addresses are allocated: every /24 of a provider's range can be a network of its
//! own (with a gap, or another answer, after it), so most of its blocks hold more than five
//! intervals and a lookup follows the block to a spill list, a second memory access that cannot
//! be prefetched. Here a block is a whole cache line (64 bytes, found by indexing) holding up to
//! 16 intervals with 16-bit values, 13 with 24-bit values (an ASN) or 10 with 32-bit values,
//! and the number of address bits
//! that select a block (16 to 20) is the smallest for which at most one block in a hundred of
//! those with several intervals spills: a lookup reads one line, which the caller prefetches.

use crate::pages::PageBytes;
use crate::range::NONE;
use crate::search::partition_point;

/// Bytes of a line.
const LINE: usize = 64;
/// In a line: set when its intervals did not fit (then bytes 0..4 hold where they begin in
/// the spill list, bytes 4..8 how many there are).
const SPILLED: usize = 63;
/// In a line of 16-bit values: no range.
const NONE16: u16 = u16::MAX;
/// In a line of 24-bit values: no range.
const NONE24: u32 = (1 << 24) - 1;

/// How a line stores its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Width {
    /// Up to 16 intervals, values below `u16::MAX`.
    U16,
    /// Up to 13 intervals, values below `2^24 - 1`.
    U24,
    /// Up to 10 intervals, any value.
    U32,
}

impl Width {
    /// The narrowest width holding every value in `values`.
    pub(crate) fn for_values(values: impl Iterator<Item = u32>) -> Width {
        let largest = values.max().unwrap_or(0);
        if largest < u32::from(NONE16) {
            Width::U16
        } else if largest < NONE24 {
            Width::U24
        } else {
            Width::U32
        }
    }

    const fn per_line(self) -> usize {
        match self {
            Width::U16 => 16,
            Width::U24 => 13,
            Width::U32 => 10,
        }
    }

    /// Where the values begin (after `per_line - 1` starts).
    const fn values_at(self) -> usize {
        2 * (self.per_line() - 1)
    }
}

/// The elementary intervals of disjoint, sorted IPv4 ranges `(first, last, value)`: the
/// address space cut where the value changes, `starts[i]..starts[i + 1]` holding `values[i]`
/// (`NONE` in a gap). `starts[0]` is 0; neighbours never hold the same value.
pub(crate) fn elementary_intervals(ranges: &[(u32, u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    let mut starts: Vec<u32> = Vec::with_capacity(2 * ranges.len() + 1);
    let mut values: Vec<u32> = Vec::with_capacity(2 * ranges.len() + 1);
    starts.push(0);
    values.push(NONE);
    let mut push = |start: u32, value: u32| {
        if starts.last() == Some(&start) {
            if let Some(last) = values.last_mut() {
                *last = value;
            }
        } else if values.last() != Some(&value) {
            starts.push(start);
            values.push(value);
        }
    };
    for &(first, last, value) in ranges {
        push(first, value);
        if let Some(next) = last.checked_add(1) {
            push(next, NONE);
        }
    }
    (starts, values)
}

/// Disjoint IPv4 ranges, each with a value (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct LineTable {
    bits: u32,
    width: Width,
    lines: PageBytes,
    /// The intervals of the lines that did not fit, by line: `(offset in the block, value)`,
    /// the first at offset 0.
    spill: Vec<(u16, u32)>,
    spilled_lines: usize,
}

impl LineTable {
    /// The table of `ranges`: `(first, last, value)`, sorted, disjoint, no value `NONE` (and,
    /// for [`Width::U16`], none from `u16::MAX` on).
    pub(crate) fn build(ranges: &[(u32, u32, u32)], width: Width) -> Self {
        let (starts, values) = elementary_intervals(ranges);
        let bits = Self::choose_bits(&starts, width.per_line());
        let shift = 32 - bits;
        let mut lines = vec![0u8; LINE << bits];
        let mut spill = Vec::new();
        let mut spilled_lines = 0;
        let mut at = 0usize;
        for (high, line) in lines.chunks_exact_mut(LINE).enumerate() {
            let block = (high as u32) << shift;
            while at + 1 < starts.len() && starts[at + 1] <= block {
                at += 1;
            }
            let mut end = at + 1;
            while end < starts.len() && (starts[end] >> shift) as usize == high {
                end += 1;
            }
            let offset = |k: usize| (starts[k] & (u32::MAX >> bits)) as u16;
            if end - at <= width.per_line() {
                for slot in 0..width.per_line() - 1 {
                    let start = if at + 1 + slot < end {
                        offset(at + 1 + slot)
                    } else {
                        u16::MAX
                    };
                    line[2 * slot..2 * slot + 2].copy_from_slice(&start.to_le_bytes());
                }
                for slot in 0..width.per_line() {
                    // Unused slots repeat the last value (counting an unused start, which only
                    // the block's last address can, changes nothing).
                    let value = values[(at + slot).min(end - 1)];
                    let from = width.values_at();
                    match width {
                        Width::U16 => {
                            let v = if value == NONE { NONE16 } else { value as u16 };
                            line[from + 2 * slot..from + 2 * slot + 2]
                                .copy_from_slice(&v.to_le_bytes());
                        }
                        Width::U24 => {
                            let v = if value == NONE { NONE24 } else { value };
                            line[from + 3 * slot..from + 3 * slot + 3]
                                .copy_from_slice(&v.to_le_bytes()[..3]);
                        }
                        Width::U32 => line[from + 4 * slot..from + 4 * slot + 4]
                            .copy_from_slice(&value.to_le_bytes()),
                    }
                }
            } else {
                spilled_lines += 1;
                line[0..4].copy_from_slice(&(spill.len() as u32).to_le_bytes());
                line[4..8].copy_from_slice(&((end - at) as u32).to_le_bytes());
                line[SPILLED] = 1;
                for (k, &value) in values.iter().enumerate().take(end).skip(at) {
                    spill.push((if k == at { 0 } else { offset(k) }, value));
                }
            }
        }
        LineTable {
            bits,
            width,
            lines: PageBytes::copy_of(&lines),
            spill,
            spilled_lines,
        }
    }

    /// The fewest bits (16 to 20) for which at most one in a hundred of the blocks holding
    /// more than one interval has more than fit in a line (20 when none does).
    fn choose_bits(starts: &[u32], per_line: usize) -> u32 {
        for bits in 16..20 {
            let shift = 32 - bits;
            let mut inside = vec![0u32; 1 << bits];
            for &start in starts.iter().skip(1) {
                if start & (u32::MAX >> bits) != 0 {
                    inside[(start >> shift) as usize] += 1;
                }
            }
            let several = inside.iter().filter(|&&n| n > 0).count();
            let over = inside
                .iter()
                .filter(|&&n| n as usize + 1 > per_line)
                .count();
            if over * 100 <= several {
                return bits;
            }
        }
        20
    }

    /// The value of the range holding `address`, [`NONE`] outside every range.
    #[inline(always)]
    pub(crate) fn get(&self, address: u32) -> u32 {
        let index = (address >> (32 - self.bits)) as usize;
        let offset = (address & (u32::MAX >> self.bits)) as u16;
        let Some(line) = self
            .lines
            .bytes()
            .get(index * LINE..index * LINE + LINE)
            .and_then(|l| <&[u8; LINE]>::try_from(l).ok())
        else {
            return NONE;
        };
        if line[SPILLED] != 0 {
            return self.spilled(line, offset);
        }
        let start = |slot: usize| u16::from_le_bytes([line[2 * slot], line[2 * slot + 1]]);
        let from = self.width.values_at();
        match self.width {
            Width::U16 => {
                let n: usize = (0..15).map(|s| usize::from(start(s) <= offset)).sum();
                let v = u16::from_le_bytes([line[from + 2 * n], line[from + 2 * n + 1]]);
                if v == NONE16 {
                    NONE
                } else {
                    u32::from(v)
                }
            }
            Width::U24 => {
                let n: usize = (0..12).map(|s| usize::from(start(s) <= offset)).sum();
                let at = from + 3 * n;
                let v = u32::from_le_bytes([line[at], line[at + 1], line[at + 2], 0]);
                if v == NONE24 {
                    NONE
                } else {
                    v
                }
            }
            Width::U32 => {
                let n: usize = (0..9).map(|s| usize::from(start(s) <= offset)).sum();
                let at = from + 4 * n;
                u32::from_le_bytes([line[at], line[at + 1], line[at + 2], line[at + 3]])
            }
        }
    }

    /// The value at `offset` in a line whose intervals are in the spill list.
    #[cold]
    #[inline(never)]
    fn spilled(&self, line: &[u8; LINE], offset: u16) -> u32 {
        let from = u32::from_le_bytes([line[0], line[1], line[2], line[3]]) as usize;
        let count = u32::from_le_bytes([line[4], line[5], line[6], line[7]]) as usize;
        let Some(entries) = self.spill.get(from..from + count) else {
            return NONE;
        };
        let at = partition_point(entries, |e| e.0 <= offset).saturating_sub(1);
        entries.get(at).map_or(NONE, |e| e.1)
    }

    /// Starts loading the line a lookup of `address` reads.
    #[inline(always)]
    pub(crate) fn prefetch(&self, address: u32) {
        prefetch_index::prefetch_index(
            self.lines.bytes(),
            (address >> (32 - self.bits)) as usize * LINE,
        );
    }

    /// Approximate heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.lines.bytes().len() + self.spill.capacity() * std::mem::size_of::<(u16, u32)>()
    }

    /// Lines whose intervals did not fit (a lookup there reads the spill list too).
    pub(crate) fn spilled_lines(&self) -> usize {
        self.spilled_lines
    }

    /// Address bits selecting a line.
    #[cfg(test)]
    pub(crate) fn bits(&self) -> u32 {
        self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random ranges of random density (sparse, and dense enough to spill): the table answers
    /// what a search of the ranges answers, at both widths.
    #[test]
    fn answers_as_a_search_of_the_ranges() {
        let mut rng = crate::synthetic::Rng::new(0x6c69_6e65);
        for (width, max_value) in [
            (Width::U16, 60_000u64),
            (Width::U24, u64::from(NONE24)),
            (Width::U32, u64::from(u32::MAX - 1)),
        ] {
            for (gap, len) in [(1u64 << 14, 1u64 << 12), (300, 256), (1, 40)] {
                let mut ranges = Vec::new();
                let mut cursor = 0u32;
                while ranges.len() < 200_000 {
                    let Some(first) = cursor.checked_add(rng.below(gap) as u32) else {
                        break;
                    };
                    let Some(last) = first.checked_add(rng.below(len) as u32) else {
                        break;
                    };
                    ranges.push((first, last, rng.below(max_value) as u32));
                    let Some(next) = last.checked_add(1) else {
                        break;
                    };
                    cursor = next;
                }
                let table = LineTable::build(&ranges, width);
                let expected = |a: u32| {
                    let at = ranges.partition_point(|r| r.0 <= a);
                    match at.checked_sub(1).map(|at| ranges[at]) {
                        Some((_, last, value)) if a <= last => value,
                        _ => NONE,
                    }
                };
                let mut probes: Vec<u32> = (0..100_000).map(|_| rng.next_u64() as u32).collect();
                for &(first, last, _) in ranges.iter().step_by(5) {
                    probes.extend([first, last, first.wrapping_sub(1), last.wrapping_add(1)]);
                }
                probes.extend([0, u32::MAX]);
                for a in probes {
                    assert_eq!(
                        table.get(a),
                        expected(a),
                        "{a:#x} ({width:?}, {gap}, {len})"
                    );
                }
            }
        }
    }

    #[test]
    fn bits_grow_until_lines_hold_their_blocks() {
        // One /24 in three over a quarter of the space: 5 to 6 networks per 4,096 addresses,
        // each with a gap after it.
        let ranges: Vec<(u32, u32, u32)> = (0..1_000_000u32)
            .map(|i| {
                let first = (1 << 24) + i * 768;
                (first, first + 255, i % 50)
            })
            .collect();
        let narrow = LineTable::build(&ranges, Width::U16);
        assert_eq!(narrow.bits(), 20);
        assert_eq!(narrow.spilled_lines(), 0);
        let wide = LineTable::build(&ranges, Width::U32);
        assert!(wide.spilled_lines() > 0, "11 intervals in 10 slots");
        assert_eq!(narrow.get((1 << 24) + 768 + 3), 1);
        assert_eq!(narrow.get((1 << 24) + 768 + 256), NONE);
        assert_eq!(Width::for_values([1, 65_534].into_iter()), Width::U16);
        assert_eq!(Width::for_values([65_535].into_iter()), Width::U24);
        assert_eq!(Width::for_values([(1 << 24) - 1].into_iter()), Width::U32);
    }
}

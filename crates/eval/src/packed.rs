//! Large IPv4 interval tables packed twelve intervals to a cache line: the dense layout of an
//! address index.
//!
//! The address space is cut into `2^R` regions (`R` from 8 to 12 with the table's size; the
//! region table, 8 bytes a region, stays in cache). Each region is cut into as many lines as
//! its own interval starts need: `m = ⌈k / 6⌉` for `k` starts, any number, not a power of two,
//! so a region gets what its density asks and no more. An address's line is found by a
//! multiply, not a search: with `off` its offset in the region, line `⌊off · m / 2^(32-R)⌋`,
//! which covers the offsets from `⌈j · 2^(32-R) / m⌉` up to the next line's. A lookup reads
//! the region's entry, then one line, which the evaluator prefetches before it looks up the
//! other signals.
//!
//! A line (64 bytes) holds the code of the interval running into it and up to twelve interval
//! starts (3 bytes each: offsets in the region) with their codes (`u16`). The interval holding
//! an address is the code after the starts at or below its offset, counted without a branch.
//! Codes are ids of distinct *chains* (the postings of a network and of every network around
//! it), kept by the caller in a table of a few thousand entries at most (they are interned:
//! a block list of a million networks over a hundred rules has a few hundred), read after the
//! line from cache. At about six starts a line a random region's lines rarely overflow (a
//! Poisson count above twelve: under 1%); a region whose lines overflow more than one in 64
//! times gets more lines. A line that still overflows holds where its intervals begin in a
//! spill list, searched on a second memory access.
//!
//! About 13 bytes an interval (a million random networks: 13.7; the lines hold about five
//! starts each, the regions and chains a few kilobytes), against up to 64 for
//! [`RangeTable`](crate::range::RangeTable)'s half-line blocks (which stay for tables with more
//! distinct chains than a `u16` codes).

use crate::pages::PageBytes;
use crate::search::partition_point;

/// Bytes of a line.
const LINE: usize = 64;
/// Interval starts a line holds.
const STARTS: usize = 12;
/// Where the codes begin (after the starts, 3 bytes each).
const CODES_AT: usize = 3 * STARTS;
/// The largest code a table may hold.
pub(crate) const MAX_CODE: u16 = u16::MAX - 1;
/// In a line's first code: its intervals did not fit (bytes 0..4 hold where they begin in the
/// spill list, bytes 4..8 how many there are).
const SPILLED: u16 = u16::MAX;
/// An unused start (above every offset but the largest of a 24-bit region, where counting it
/// changes nothing: unused codes repeat the last one).
const UNUSED: u32 = (1 << 24) - 1;
/// Interval starts per line the layout aims at.
const FILL: usize = 6;
/// A region's lines are accepted when at most one in this many overflows.
const OVERFLOW_ONE_IN: usize = 64;

/// One region: its first line and how many lines it is cut into (0: the region lies inside one
/// interval and shares a line with every such region of the same code).
#[derive(Debug, Clone, Copy)]
struct Region {
    base: u32,
    lines: u32,
}

/// One interval of a line that overflowed.
#[derive(Debug, Clone, Copy)]
struct SpillStart {
    /// Offset in the region (0 for the interval running into the line).
    offset: u32,
    code: u16,
}

/// An IPv4 interval table of codes (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct PackedIntervals {
    /// `32 - R`: an address's offset bits within its region.
    shift: u32,
    regions: Box<[Region]>,
    lines: PageBytes,
    spill: Vec<SpillStart>,
}

/// How a region is laid out, decided before any line is written.
struct Plan {
    /// The interval holding the region's first address.
    at: usize,
    /// One past the region's last interval start.
    end: usize,
    lines: u32,
}

impl PackedIntervals {
    /// The table of intervals `starts[i]..starts[i + 1]` holding `codes[i]` (`starts` strictly
    /// ascending from 0, codes at most [`MAX_CODE`]).
    pub(crate) fn build(starts: &[u32], codes: &[u16]) -> Self {
        debug_assert_eq!(starts.len(), codes.len());
        debug_assert_eq!(starts.first(), Some(&0));
        let region_bits = (starts.len() / 64).max(1).ilog2().clamp(8, 12);
        let shift = 32 - region_bits;
        let region_span = 1u64 << shift;

        // Each region's intervals and line count; the regions inside one interval share one
        // line per code, numbered first.
        let mut plans = Vec::with_capacity(1 << region_bits);
        let mut shared: std::collections::HashMap<u16, u32> = Default::default();
        let mut at = 0usize;
        for region in 0..1u64 << region_bits {
            let first = region << shift;
            while at + 1 < starts.len() && u64::from(starts[at + 1]) <= first {
                at += 1;
            }
            let mut end = at + 1;
            while end < starts.len() && u64::from(starts[end]) < first + region_span {
                end += 1;
            }
            let lines = if end == at + 1 {
                let next = shared.len() as u32;
                shared.entry(codes[at]).or_insert(next);
                0
            } else {
                choose_lines(&starts[at + 1..end], first, shift)
            };
            plans.push(Plan { at, end, lines });
        }
        let mut regions = Vec::with_capacity(plans.len());
        let mut next = shared.len() as u32;
        for plan in &plans {
            if plan.lines == 0 {
                let base = shared[&codes[plan.at]];
                regions.push(Region { base, lines: 0 });
            } else {
                regions.push(Region {
                    base: next,
                    lines: plan.lines,
                });
                next += plan.lines;
            }
        }

        let mut spill = Vec::new();
        let lines = PageBytes::filled(next as usize * LINE, |bytes| {
            for (&code, &line) in &shared {
                write_line(line_mut(bytes, line as usize), code, &[], &[], 0);
            }
            for (region, plan) in plans.iter().enumerate() {
                let m = u64::from(plan.lines);
                let first = (region as u64) << shift;
                let base = regions[region].base as usize;
                let mut k = plan.at;
                for j in 0..m {
                    let lo = first + (j << shift).div_ceil(m);
                    let hi = first + ((j + 1) << shift).div_ceil(m);
                    while k + 1 < plan.end && u64::from(starts[k + 1]) <= lo {
                        k += 1;
                    }
                    let mut last = k + 1;
                    while last < plan.end && u64::from(starts[last]) < hi {
                        last += 1;
                    }
                    let line = line_mut(bytes, base + j as usize);
                    if last - (k + 1) <= STARTS {
                        write_line(
                            line,
                            codes[k],
                            &starts[k + 1..last],
                            &codes[k + 1..last],
                            first,
                        );
                    } else {
                        line[0..4].copy_from_slice(&(spill.len() as u32).to_le_bytes());
                        line[4..8].copy_from_slice(&((last - k) as u32).to_le_bytes());
                        line[CODES_AT..CODES_AT + 2].copy_from_slice(&SPILLED.to_le_bytes());
                        spill.push(SpillStart {
                            offset: 0,
                            code: codes[k],
                        });
                        spill.extend((k + 1..last).map(|i| SpillStart {
                            offset: (u64::from(starts[i]) - first) as u32,
                            code: codes[i],
                        }));
                    }
                }
            }
        });
        spill.shrink_to_fit();
        PackedIntervals {
            shift,
            regions: regions.into_boxed_slice(),
            lines,
            spill,
        }
    }

    /// The byte offset of the line holding `address` and the address's offset in its region.
    #[inline(always)]
    fn locate(&self, address: u32) -> (usize, u32) {
        let region = self.regions[(address >> self.shift) as usize];
        let offset = address & ((1u32 << self.shift) - 1);
        let j = (u64::from(offset) * u64::from(region.lines)) >> self.shift;
        ((region.base as usize + j as usize) * LINE, offset)
    }

    /// Starts loading the line a lookup of `address` reads.
    #[inline(always)]
    pub(crate) fn prefetch(&self, address: u32) {
        let (at, _) = self.locate(address);
        prefetch_index::prefetch_index(self.lines.bytes(), at);
    }

    /// The code of the interval holding `address`.
    #[inline(always)]
    pub(crate) fn get(&self, address: u32) -> u16 {
        let (at, offset) = self.locate(address);
        let Some(line) = self
            .lines
            .bytes()
            .get(at..at + LINE)
            .and_then(|l| <&[u8; LINE]>::try_from(l).ok())
        else {
            return 0;
        };
        let mut n = 0usize;
        for i in 0..STARTS {
            let start = u32::from(line[3 * i])
                | u32::from(line[3 * i + 1]) << 8
                | u32::from(line[3 * i + 2]) << 16;
            n += usize::from(start <= offset);
        }
        let code =
            |i: usize| u16::from_le_bytes([line[CODES_AT + 2 * i], line[CODES_AT + 2 * i + 1]]);
        if code(0) == SPILLED {
            return self.spilled(line, offset);
        }
        code(n)
    }

    /// The code of `offset` in a line that overflowed.
    #[cold]
    #[inline(never)]
    fn spilled(&self, line: &[u8; LINE], offset: u32) -> u16 {
        let word = |at: usize| {
            u32::from_le_bytes([line[at], line[at + 1], line[at + 2], line[at + 3]]) as usize
        };
        let (from, count) = (word(0), word(4));
        let entries = &self.spill[from..from + count];
        // The first entry is at offset 0: at least one is at or below `offset`.
        entries[partition_point(entries, |e| e.offset <= offset).saturating_sub(1)].code
    }

    /// Lines whose intervals did not fit.
    #[cfg(test)]
    pub(crate) fn spilled_lines(&self) -> usize {
        self.lines
            .bytes()
            .chunks_exact(LINE)
            .filter(|l| u16::from_le_bytes([l[CODES_AT], l[CODES_AT + 1]]) == SPILLED)
            .count()
    }

    /// Heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.regions)
            + self.lines.bytes().len()
            + self.spill.capacity() * std::mem::size_of::<SpillStart>()
    }
}

/// The fewest lines (at least `⌈k / FILL⌉`) for a region's starts `inside` (all after the
/// region's `first` address) such that at most one line in [`OVERFLOW_ONE_IN`] holds more
/// than [`STARTS`]. More lines help a region of randomly spread starts; they do not help a
/// cluster (a run of /32s) narrower than a line, which spills however many lines there are,
/// so the count stops growing when a quarter more lines does not take a quarter of the
/// overflowing starts out of the spill, and at two lines a start.
fn choose_lines(inside: &[u32], first: u64, shift: u32) -> u32 {
    let k = inside.len() as u64;
    let most = (2 * k).min(1 << shift);
    let mut m = k.div_ceil(FILL as u64).clamp(1, most);
    let mut before: Option<(u64, u64)> = None;
    loop {
        let (mut over, mut spilled) = (0u64, 0u64);
        let mut run = 0u64;
        let mut current = u64::MAX;
        for &s in inside {
            let j = ((u64::from(s) - first) * m) >> shift;
            if j == current {
                run += 1;
            } else {
                current = j;
                run = 1;
            }
            if run == STARTS as u64 + 1 {
                over += 1;
                spilled += run;
            } else if run > STARTS as u64 + 1 {
                spilled += 1;
            }
        }
        if let Some((fewer, spilled_before)) = before {
            if spilled * 4 > spilled_before * 3 {
                return fewer as u32;
            }
        }
        if over * OVERFLOW_ONE_IN as u64 <= m || m >= most {
            return m as u32;
        }
        before = Some((m, spilled));
        m = (m + m / 4 + 1).min(most);
    }
}

fn line_mut(bytes: &mut [u8], line: usize) -> &mut [u8] {
    &mut bytes[line * LINE..(line + 1) * LINE]
}

/// Writes a line: the code of the interval running into it, then its starts (absolute, in the
/// region beginning at `first`) and their codes; unused starts are [`UNUSED`] and unused codes
/// repeat the last one.
fn write_line(line: &mut [u8], run_in: u16, starts: &[u32], codes: &[u16], first: u64) {
    let mut last = run_in;
    line[CODES_AT..CODES_AT + 2].copy_from_slice(&run_in.to_le_bytes());
    for slot in 0..STARTS {
        let (start, code) = match (starts.get(slot), codes.get(slot)) {
            (Some(&s), Some(&c)) => ((u64::from(s) - first) as u32, c),
            _ => (UNUSED, last),
        };
        last = code;
        line[3 * slot..3 * slot + 3].copy_from_slice(&start.to_le_bytes()[..3]);
        let at = CODES_AT + 2 * (slot + 1);
        line[at..at + 2].copy_from_slice(&code.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code of `address` by a search of the intervals.
    fn searched(starts: &[u32], codes: &[u16], address: u32) -> u16 {
        codes[starts.partition_point(|&s| s <= address) - 1]
    }

    fn check(starts: &[u32], codes: &[u16], probes: impl Iterator<Item = u32>) {
        let table = PackedIntervals::build(starts, codes);
        for a in probes {
            table.prefetch(a);
            assert_eq!(table.get(a), searched(starts, codes, a), "{a:#x}");
        }
    }

    #[test]
    fn a_whole_space_table_and_its_ends() {
        let starts = [0u32, 5, 0xffff_fffe];
        let codes = [1u16, 0, 2];
        check(
            &starts,
            &codes,
            [0, 4, 5, 6, 0xffff_fffd, 0xffff_fffe, u32::MAX].into_iter(),
        );
    }

    #[test]
    fn a_crowded_region_spills_and_answers() {
        // 200 consecutive /32s in one /24: more starts than any line count of the region
        // can spread (at most two lines a start), so lines overflow.
        let mut starts = vec![0u32];
        let mut codes = vec![0u16];
        for i in 0..200u32 {
            starts.push(0x0a00_0000 + i);
            codes.push(1 + (i % 7) as u16);
        }
        starts.push(0x0a00_0000 + 200);
        codes.push(0);
        let table = PackedIntervals::build(&starts, &codes);
        assert!(table.spilled_lines() > 0);
        check(
            &starts,
            &codes,
            (0x09ff_ff00..0x0a00_0200).chain([0, u32::MAX]),
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(48))]

        /// Random tables (from a few thousand starts, region bits 8, to 300,000, region bits
        /// 12), spread or crowded (runs of neighbouring starts that overflow lines), with
        /// starts on region edges and on the last address of a 24-bit region (where an unused
        /// start also reads 2^24 - 1), and few or many codes: the packed table answers as a
        /// search of the plain intervals at every start, on either side of it, at every
        /// region's first and last address and at random addresses.
        #[test]
        fn packed_agrees_with_the_plain_intervals(
            seed: u64,
            count in 4_096usize..300_000,
            crowded in 0u32..4,
            distinct in 1u16..MAX_CODE,
        ) {
            let mut state = seed | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let mut set: std::collections::BTreeSet<u32> = Default::default();
            while set.len() < count {
                let r = next();
                let start = match r % 8 {
                    // A run of neighbours: a /32 list in one line's span, or longer.
                    0 if crowded > 0 => {
                        let base = next() as u32;
                        for i in 0..(r >> 8) % (40 * u64::from(crowded)) {
                            set.insert(base.wrapping_add(i as u32));
                        }
                        base
                    }
                    // The first or last address of a region of 2^24, 2^20 or 2^16 addresses.
                    1 => {
                        let bits = [24u32, 20, 16][((r >> 8) % 3) as usize];
                        let edge = ((next() as u32) >> bits) << bits;
                        if r & 0x100_0000 == 0 { edge } else { edge.wrapping_sub(1) }
                    }
                    _ => next() as u32,
                };
                set.insert(start);
            }
            set.insert(0);
            let starts: Vec<u32> = set.into_iter().collect();
            // Neighbours of one code are merged by the caller: codes alternate.
            let mut codes = Vec::with_capacity(starts.len());
            let mut last = u16::MAX;
            for _ in &starts {
                let mut code = (next() % u64::from(distinct)) as u16;
                if code == last {
                    code = (code + 1) % distinct.max(2);
                }
                codes.push(code);
                last = code;
            }
            let table = PackedIntervals::build(&starts, &codes);
            let mut probes: Vec<u32> = (0..20_000).map(|_| next() as u32).collect();
            for &s in &starts {
                probes.extend([s, s.wrapping_sub(1), s.wrapping_add(1)]);
            }
            for region in 0..table.regions.len() as u32 {
                let first = region << table.shift;
                probes.extend([first, first | ((1u32 << table.shift) - 1)]);
            }
            probes.extend([0, 1, u32::MAX - 1, u32::MAX]);
            for a in probes {
                table.prefetch(a);
                proptest::prop_assert_eq!(table.get(a), searched(&starts, &codes, a), "{:#x}", a);
            }
        }
    }
}

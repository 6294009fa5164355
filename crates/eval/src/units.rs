//! Large IPv4 tables of disjoint ranges laid out as aligned units: the layout of a policy's
//! compiled geo/ASN intervals ([`GeoIntervals`](crate::GeoIntervals)).
//!
//! A GeoIP database is dense where addresses are allocated, and its networks are aligned: in a
//! region of the address space where every range begins on a /24 boundary, a /24 is the unit
//! of the region and each unit lies inside one range. A line (32 bytes) then describes 28
//! consecutive units: a bitmap of the units where a new range begins, and one byte per range
//! met, an index into the table's 255 most common values. A lookup reads the region's entry
//! (4,096 of them, 32 KiB: in cache), then one line, which the evaluator prefetches, and counts
//! the bitmap's bits below the address's unit: no search.
//!
//! A million /24 networks with gaps between them take 3.4 MB this way, against 24 MB as
//! interval blocks ([`RangeTable`]), so a decision for a never-seen address mostly finds its
//! line in the last-level cache instead of memory. What does not suit the units (a region whose
//! ranges are too fine for its unit count to stay small, and the rare range whose value is not
//! among the common ones) is answered by a [`RangeTable`] of those ranges, which the region's
//! entry or the line's escape byte sends the lookup to.

use crate::lines::elementary_intervals;
use crate::pages::PageBytes;
use crate::range::{RangeTable, NONE};

/// Bytes of a line.
const LINE: usize = 32;
/// Units a line describes: its bitmap's bits 1 to 27 mark the units where a range begins
/// (bit 0 is never set: byte 4 of the line is the value at the line's first unit), and its 28
/// value bytes hold one value per range met.
const UNITS_PER_LINE: u32 = 28;
/// A value byte meaning "ask the fallback table".
const ESCAPE: u8 = u8::MAX;
/// Common values: every byte but [`ESCAPE`].
const COMMON: usize = ESCAPE as usize;
/// Regions: the addresses sharing their top this many bits.
const REGION_BITS: u32 = 12;
/// Address bits below a region's top bits.
const REGION_LOW: u32 = 32 - REGION_BITS;
/// A region is laid out in units when its lines number at most this many per range start in
/// it (else its units would be too fine for their count: it goes to the fallback table).
const LINES_PER_START: usize = 2;

/// How a region is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// The region lies inside one range (or none): its value.
    Uniform(u32),
    /// Units of `2^unit_bits` addresses, described from line `first`.
    Units { first: u32, unit_bits: u8 },
    /// By the fallback table.
    Fallback,
}

/// Disjoint IPv4 ranges, each with a value (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct UnitTable {
    regions: Box<[Region]>,
    lines: PageBytes,
    /// The values of the value bytes.
    common: Box<[u32]>,
    /// The ranges of the fallback regions and those with a value not among the common ones.
    fallback: RangeTable<u32>,
}

impl UnitTable {
    /// The table of `ranges`: `(first, last, value)`, sorted, disjoint, no value `NONE`.
    pub(crate) fn build(ranges: &[(u32, u32, u32)]) -> Self {
        let (starts, values) = elementary_intervals(ranges);

        // First pass: how each region is answered, and how often each value is met in the
        // regions laid out in units.
        let mut plans = Vec::with_capacity(1 << REGION_BITS);
        let mut counts: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        let mut at = 0usize;
        for region in 0..1u32 << REGION_BITS {
            let base = region << REGION_LOW;
            while at + 1 < starts.len() && starts[at + 1] <= base {
                at += 1;
            }
            let mut end = at + 1;
            while end < starts.len() && starts[end] >> REGION_LOW == region {
                end += 1;
            }
            let inside = &starts[at + 1..end];
            let plan = match inside.iter().map(|s| s.trailing_zeros()).min() {
                None => Region::Uniform(values[at]),
                Some(unit_bits) => {
                    let lines =
                        (1usize << (REGION_LOW - unit_bits)).div_ceil(UNITS_PER_LINE as usize);
                    if lines <= LINES_PER_START * inside.len() {
                        for &v in &values[at..end] {
                            *counts.entry(v).or_default() += 1;
                        }
                        Region::Units {
                            first: 0,
                            unit_bits: unit_bits as u8,
                        }
                    } else {
                        Region::Fallback
                    }
                }
            };
            plans.push((plan, at, end));
        }
        let mut by_count: Vec<(u32, usize)> = counts.into_iter().collect();
        by_count.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        by_count.truncate(COMMON);
        let common: Box<[u32]> = by_count.iter().map(|&(v, _)| v).collect();
        let byte_of: std::collections::HashMap<u32, u8> = common
            .iter()
            .enumerate()
            .map(|(i, &v)| (v, i as u8))
            .collect();

        // Second pass: the lines, and the ranges the fallback table answers.
        let mut records = Vec::new();
        let mut line_count = 0u32;
        let mut regions = Vec::with_capacity(plans.len());
        let mut fallback_regions = Vec::new();
        for (region, (plan, at, end)) in plans.into_iter().enumerate() {
            let Region::Units { unit_bits, .. } = plan else {
                if plan == Region::Fallback {
                    fallback_regions.push(region as u32);
                }
                regions.push(plan);
                continue;
            };
            let base = (region as u32) << REGION_LOW;
            let units = 1u32 << (REGION_LOW - u32::from(unit_bits));
            let mut k = at;
            let mut unit = 0u32;
            let first = line_count;
            while unit < units {
                let mut line = [0u8; LINE];
                let mut bitmap = 0u32;
                let mut n = 0usize;
                for i in 0..UNITS_PER_LINE.min(units - unit) {
                    let address = base + ((unit + i) << unit_bits);
                    let starts_here = k + 1 < end && starts[k + 1] == address;
                    if starts_here {
                        k += 1;
                    }
                    if i == 0 || starts_here {
                        if i > 0 {
                            bitmap |= 1 << i;
                        }
                        line[4 + n] = byte_of.get(&values[k]).copied().unwrap_or(ESCAPE);
                        n += 1;
                    }
                }
                line[..4].copy_from_slice(&bitmap.to_le_bytes());
                records.extend_from_slice(&line);
                line_count += 1;
                unit += UNITS_PER_LINE;
            }
            regions.push(Region::Units { first, unit_bits });
        }
        let in_fallback_region = |first: u32, last: u32| {
            let (lo, hi) = (first >> REGION_LOW, last >> REGION_LOW);
            let from = fallback_regions.partition_point(|&r| r < lo);
            fallback_regions.get(from).is_some_and(|&r| r <= hi)
        };
        let fallback: Vec<(u32, u32, u32)> = ranges
            .iter()
            .copied()
            .filter(|&(first, last, value)| {
                !byte_of.contains_key(&value) || in_fallback_region(first, last)
            })
            .collect();
        UnitTable {
            regions: regions.into_boxed_slice(),
            lines: PageBytes::copy_of(&records),
            common,
            fallback: RangeTable::build(fallback),
        }
    }

    /// The line of `address` in a region laid out in units, and the address's unit in it.
    #[inline(always)]
    fn line_of(address: u32, first: u32, unit_bits: u8) -> (usize, u32) {
        let unit = (address & ((1 << REGION_LOW) - 1)) >> unit_bits;
        (
            first as usize + (unit / UNITS_PER_LINE) as usize,
            unit % UNITS_PER_LINE,
        )
    }

    /// The value of the range holding `address`, `NONE` outside every range.
    #[inline(always)]
    pub(crate) fn get(&self, address: u32) -> u32 {
        match self.regions.get((address >> REGION_LOW) as usize) {
            Some(&Region::Uniform(value)) => value,
            Some(&Region::Units { first, unit_bits }) => {
                let (line, unit) = Self::line_of(address, first, unit_bits);
                let Some(line) = self.lines.bytes().get(line * LINE..(line + 1) * LINE) else {
                    return self.fallback.innermost(address).0;
                };
                let bitmap = u32::from_le_bytes([line[0], line[1], line[2], line[3]]);
                // The ranges begun at units 1..=unit: the value's place after the first.
                let at = (bitmap & ((2u32 << unit) - 1)).count_ones() as usize;
                match line.get(4 + at) {
                    Some(&byte) if byte != ESCAPE => {
                        self.common.get(usize::from(byte)).copied().unwrap_or(NONE)
                    }
                    _ => self.escaped(address),
                }
            }
            Some(Region::Fallback) | None => self.fallback.innermost(address).0,
        }
    }

    /// A value not among the common ones.
    #[cold]
    #[inline(never)]
    fn escaped(&self, address: u32) -> u32 {
        self.fallback.innermost(address).0
    }

    /// Starts loading what a lookup of `address` reads.
    #[inline(always)]
    pub(crate) fn prefetch(&self, address: u32) {
        match self.regions.get((address >> REGION_LOW) as usize) {
            Some(&Region::Units { first, unit_bits }) => {
                let (line, _) = Self::line_of(address, first, unit_bits);
                prefetch_index::prefetch_index(self.lines.bytes(), line * LINE);
            }
            Some(Region::Fallback) => self.fallback.prefetch(address),
            Some(Region::Uniform(_)) | None => {}
        }
    }

    /// Approximate heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.regions)
            + self.lines.bytes().len()
            + std::mem::size_of_val(&*self.common)
            + self.fallback.bytes()
    }

    /// Regions answered by the fallback table, and ranges it holds.
    #[cfg(test)]
    fn fallback_stats(&self) -> (usize, usize) {
        (
            self.regions
                .iter()
                .filter(|r| **r == Region::Fallback)
                .count(),
            self.fallback.networks(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::Rng;

    /// What a search of the ranges answers.
    fn search(ranges: &[(u32, u32, u32)], address: u32) -> u32 {
        let at = ranges.partition_point(|r| r.0 <= address);
        match at.checked_sub(1).map(|i| ranges[i]) {
            Some((_, last, value)) if address <= last => value,
            _ => NONE,
        }
    }

    /// Every range boundary, its neighbours, and random addresses.
    fn probes(ranges: &[(u32, u32, u32)], rng: &mut Rng) -> Vec<u32> {
        let mut out = vec![0, u32::MAX];
        for &(first, last, _) in ranges {
            out.extend([
                first,
                last,
                first.wrapping_sub(1),
                last.wrapping_add(1),
                first + (last - first) / 2,
            ]);
        }
        out.extend((0..50_000).map(|_| rng.next_u64() as u32));
        out
    }

    fn check(ranges: &[(u32, u32, u32)], rng: &mut Rng) -> UnitTable {
        let table = UnitTable::build(ranges);
        for address in probes(ranges, rng) {
            table.prefetch(address);
            assert_eq!(
                table.get(address),
                search(ranges, address),
                "address {address:#x}"
            );
        }
        table
    }

    /// Ranges of `len_units` units of `2^unit_bits` addresses, one in `every` units, from
    /// `from`, values drawn from `distinct`.
    fn aligned(
        rng: &mut Rng,
        from: u32,
        count: u32,
        unit_bits: u32,
        every: u32,
        distinct: u64,
    ) -> Vec<(u32, u32, u32)> {
        (0..count)
            .map(|i| {
                let first = from + ((i * every) << unit_bits);
                (
                    first,
                    first + (1 << unit_bits) - 1,
                    rng.below(distinct) as u32,
                )
            })
            .collect()
    }

    /// A GeoIP-like table: /24s with gaps over a few /8s, values from a small set (all common)
    /// and from a large one (many escaped to the fallback table).
    #[test]
    fn dense_aligned_ranges_answer_as_a_search() {
        let mut rng = Rng::new(0x756e_6974);
        for distinct in [60u64, 5_000] {
            let ranges = aligned(&mut rng, 1 << 24, 200_000, 8, 3, distinct);
            let table = check(&ranges, &mut rng);
            let (fallback_regions, fallback_ranges) = table.fallback_stats();
            assert_eq!(fallback_regions, 0);
            if distinct < COMMON as u64 {
                // About 4.6 KB per dense /12 (147 lines): far less than the interval blocks.
                assert_eq!(fallback_ranges, 0);
                assert!(table.bytes() < 1_000_000, "{} bytes", table.bytes());
            } else {
                assert!(fallback_ranges > 100_000, "{fallback_ranges}");
            }
        }
    }

    /// Regions too fine for units go to the fallback table: one /32 among /24s, a few ranges
    /// in a region, ranges crossing regions, and the top of the address space.
    #[test]
    fn fine_sparse_and_crossing_ranges_answer_as_a_search() {
        let mut rng = Rng::new(0x6669_6e65);
        let mut ranges = aligned(&mut rng, 1 << 24, 10_000, 8, 2, 40);
        // A /32 inside the dense run: its region goes to the fallback table.
        let lone = (1 << 24) + (5_000 << 9) + 256 + 17;
        ranges.push((lone, lone, 7));
        // A few ranges in an otherwise empty region, one of them /30.
        ranges.extend([(0x5000_0000, 0x5000_00ff, 3), (0x5000_1000, 0x5000_1003, 4)]);
        // Ranges crossing region boundaries (a /8, then half of a region and the next).
        ranges.push((0x6000_0000, 0x60ff_ffff, 5));
        ranges.push((0x6108_0000, 0x6117_ffff, 6));
        // Dense /26s (a finer unit) near the top, up to the last address.
        ranges.extend(aligned(&mut rng, 0xff00_0000, 0x4_0000, 6, 1, 30));
        ranges.sort_unstable();
        let table = check(&ranges, &mut rng);
        let (fallback_regions, _) = table.fallback_stats();
        assert!(fallback_regions >= 2, "{fallback_regions}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(48))]

        /// Range boundaries of random alignment (mostly coarse, some fine), spread over the
        /// space or crowded into a few regions, values from few or many: the table answers as
        /// a search.
        #[test]
        fn random_boundaries_answer_as_a_search(
            seed: u64,
            cuts in 1usize..4_000,
            align in 0u32..20,
            distinct in 1u64..2_000,
            crowded: bool,
        ) {
            let mut rng = Rng::new(seed);
            let regions = 1 + rng.below(4) as u32;
            let mut points: Vec<u32> = (0..cuts)
                .map(|_| {
                    let bits = if rng.below(50) == 0 { rng.below(8) as u32 } else { align };
                    let point = if crowded {
                        (rng.below(u64::from(regions)) as u32 * 0x0131_0000)
                            .wrapping_add(rng.below(1 << 20) as u32)
                    } else {
                        rng.next_u64() as u32
                    };
                    point & (u32::MAX << bits)
                })
                .collect();
            points.sort_unstable();
            points.dedup();
            let ranges: Vec<(u32, u32, u32)> = points
                .windows(2)
                .filter_map(|w| {
                    let value = rng.below(3 * distinct);
                    (value < 2 * distinct).then(|| (w[0], w[1] - 1, (value / 2) as u32))
                })
                .collect();
            check(&ranges, &mut rng);
        }
    }

    #[test]
    fn empty_and_single_tables() {
        let mut rng = Rng::new(1);
        check(&[], &mut rng);
        check(&[(0, u32::MAX, 9)], &mut rng);
        check(&[(0x0a00_0000, 0x0a00_0000, 1)], &mut rng);
    }
}

//! Disjoint-interval tables over the address space.
//!
//! CIDR blocks never partially overlap: two blocks are either disjoint or one contains the
//! other. So the distinct networks of a signal form a forest, and the address space splits into
//! elementary intervals, each covered by one innermost network (or none). A lookup finds the
//! interval by binary search; the interval record holds the innermost network's posting and its
//! enclosing network, whose own enclosing networks follow through parent links (at most 32 for
//! IPv4, 128 for IPv6; in real lists none or one). The common case touches the first level and
//! one interval record, nothing else.
//!
//! The search is kept short by a first level, chosen by size:
//!
//! - fewer than 64 intervals: none, a binary search over all of them (a few cache lines);
//! - IPv4 up to 4,095 intervals: a direct table on the top 8 to 22 bits of the address, sized
//!   so that a block holds about one interval (a block that no network touches is marked, and
//!   answered by the table alone), then a search of the block's few intervals;
//! - IPv4 from 4,096 intervals: [`PackedIntervals`], twelve interval starts to a cache line,
//!   each region of the address space cut into as many lines as its density asks, found by a
//!   multiply: a random address costs one memory access, which the evaluator starts
//!   (prefetches) before it looks up the other signals, at about 13 bytes an interval. A line
//!   holds a 16-bit *chain* code per interval: the networks' postings and enclosing networks
//!   interned (a chain is a posting and the chain around it), a few hundred for a block list
//!   of a million networks over a hundred rules, read from a small table that stays in cache;
//!   the network list is not kept;
//! - IPv4 from 131,072 intervals whose chains are too many for a 16-bit code (every network
//!   listed by its own combination of rules): [`Block`]s, the intervals of each block of
//!   addresses packed in half a cache line with their postings and found by indexing, one
//!   memory access a lookup, at up to 64 bytes an interval start. The block size adapts to the
//!   density of each region of the address space (each /12 has its own, from a /12 held whole
//!   to blocks of 16 addresses), read from a region table small enough to stay in cache; an
//!   empty or uniform region gets one shared block. Below 131,072 intervals such a table takes
//!   the direct table;
//! - IPv6: a fence array holding every 32nd interval start, small enough to stay in cache;
//!   from 8,192 intervals the prefetch searches the fences and requests the lines of the group
//!   of intervals the lookup will search (a million-network GeoIP table's IPv6 lookups went
//!   from several dependent memory accesses to lines already arriving).

use std::hint::select_unpredictable;

use crate::packed::{PackedIntervals, MAX_CODE};
use crate::pages::PageBytes;
use crate::search::partition_point;

/// Marks "no network".
pub(crate) const NONE: u32 = u32::MAX;

/// An address as an unsigned integer.
pub(crate) trait Address:
    Copy + Ord + Default + std::fmt::Debug + std::ops::Not<Output = Self>
{
    /// Whether a direct table on the top 16 bits is worth building (IPv4).
    const DIRECT16: bool;
    fn successor(self) -> Option<Self>;
    /// The top `bits` bits.
    fn top(self, bits: u32) -> usize;
    /// The lowest address whose top `bits` bits are `high`.
    fn from_top(high: usize, bits: u32) -> Self;
    /// The address's offset within its block of the top `bits` bits, truncated to 16 bits
    /// (exact when the block holds at most 65,536 addresses).
    fn offset16(self, bits: u32) -> u16;
    /// The low 32 bits (the whole address for IPv4).
    fn low32(self) -> u32;
}

impl Address for u32 {
    const DIRECT16: bool = true;
    #[inline]
    fn successor(self) -> Option<Self> {
        self.checked_add(1)
    }
    #[inline]
    fn top(self, bits: u32) -> usize {
        (self >> (32 - bits)) as usize
    }
    #[inline]
    fn from_top(high: usize, bits: u32) -> Self {
        (high as u32) << (32 - bits)
    }
    #[inline]
    fn offset16(self, bits: u32) -> u16 {
        (self & (u32::MAX >> bits)) as u16
    }
    #[inline]
    fn low32(self) -> u32 {
        self
    }
}

impl Address for u128 {
    const DIRECT16: bool = false;
    #[inline]
    fn successor(self) -> Option<Self> {
        self.checked_add(1)
    }
    #[inline]
    fn top(self, bits: u32) -> usize {
        (self >> (128 - bits)) as usize
    }
    #[inline]
    fn from_top(high: usize, bits: u32) -> Self {
        (high as u128) << (128 - bits)
    }
    #[inline]
    fn offset16(self, bits: u32) -> u16 {
        (self & (u128::MAX >> bits)) as u16
    }
    #[inline]
    fn low32(self) -> u32 {
        self as u32
    }
}

/// One distinct network: its posting and the network that encloses it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    pub(crate) posting: u32,
    pub(crate) parent: u32,
}

/// One elementary interval: where it starts, the posting of its innermost network (`NONE` when
/// no network covers it) and that network's enclosing network (`NONE` when there is none).
#[derive(Debug, Clone, Copy)]
struct Interval<A> {
    start: A,
    posting: u32,
    parent: u32,
}

/// Tables of fewer intervals than this are searched without a first level.
const FIRST_LEVEL_MIN: usize = 64;
/// In a direct-table entry: the whole block lies in an interval no network covers.
const UNCOVERED: u32 = 1 << 31;
/// In a direct-table entry: the interval index.
const INTERVAL: u32 = UNCOVERED - 1;
/// One fence every this many intervals.
const FENCE_STRIDE: usize = 32;
/// Fenced tables of at least this many intervals (hundreds of kilobytes) prefetch the group
/// of intervals a lookup searches.
const FENCES_PREFETCH_MIN: usize = 1 << 13;
/// IPv4 tables of at least this many intervals are packed in lines ([`PackedIntervals`]) when
/// their distinct chains fit a `u16` code.
const PACKED_MIN: usize = 1 << 12;
/// IPv4 tables of at least this many intervals (far more than a core's cache holds) whose
/// chains do not fit a `u16` code are laid out in [`Block`]s.
const BLOCKS_MIN: usize = 1 << 17;
/// Intervals a [`Block`] holds inline.
const BLOCK_INTERVALS: usize = 5;

/// The intervals of one block of addresses (the addresses sharing their top `bits` bits), in
/// half a cache line: a lookup reads this block and nothing else (the block is found by
/// indexing, not searching), so a random address in a table far larger than the cache costs
/// one memory access instead of two dependent ones.
///
/// `values[0]` is the interval covering the block's first address; `values[i]` the interval
/// starting at offset `starts[i - 1]` within the block. The interval holding an address is
/// `values[n]`, where `n` counts the starts at or below its offset: four compares and no
/// branch. Unused starts are `u16::MAX` and unused values repeat the last one, so counting an
/// unused start (only the block's last address can) changes nothing.
///
/// Stored as 32-byte records in [`PageBytes`] (huge pages where the system allows): the four
/// starts (`u16`), the five values (`u32`), `nested` and `spilled` (one byte each),
/// little-endian, two bytes unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    starts: [u16; BLOCK_INTERVALS - 1],
    /// Per interval: the posting of its innermost network (`NONE` for none) or, when its bit
    /// in `nested` is set, the innermost network's node (whose posting and enclosing network
    /// the lookup then reads).
    values: [u32; BLOCK_INTERVALS],
    nested: u8,
    /// Set when the block holds more intervals than fit: `values[0]` is where they begin in
    /// [`RangeTable::spill`] and `values[1]` how many there are.
    spilled: u8,
}

/// Bytes of a stored [`Block`].
const BLOCK_BYTES: usize = 32;

impl Block {
    fn encode(&self, out: &mut Vec<u8>) {
        for start in self.starts {
            out.extend_from_slice(&start.to_le_bytes());
        }
        for value in self.values {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&[self.nested, self.spilled, 0, 0]);
    }

    /// Block `index` of the stored records (for the spilled case and tests).
    fn decode(records: &[u8], index: usize) -> Block {
        let b = &records[index * BLOCK_BYTES..][..BLOCK_BYTES];
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        Block {
            starts: [0, 2, 4, 6].map(|at| u16::from_le_bytes([b[at], b[at + 1]])),
            values: [8, 12, 16, 20, 24].map(word),
            nested: b[28],
            spilled: b[29],
        }
    }

    /// The interval holding `offset` in block `index` of the stored records: `(value,
    /// nested)`, or `None` when the block spilled. Reads the four starts as one word, then the
    /// one value.
    #[inline(always)]
    fn find(records: &[u8], index: usize, offset: u16) -> Option<(u32, bool)> {
        let b: &[u8; BLOCK_BYTES] = records
            .get(index * BLOCK_BYTES..(index + 1) * BLOCK_BYTES)?
            .try_into()
            .ok()?;
        if b[29] != 0 {
            return None;
        }
        let starts = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let at = (0..4)
            .map(|lane| usize::from((starts >> (16 * lane)) as u16 <= offset))
            .sum::<usize>();
        let v = 8 + 4 * at;
        let value = u32::from_le_bytes([b[v], b[v + 1], b[v + 2], b[v + 3]]);
        Some((value, b[28] & (1 << at) != 0))
    }
}

/// One interval of a spilled block.
#[derive(Debug, Clone, Copy)]
struct SpillEntry {
    start: u16,
    nested: bool,
    value: u32,
}

/// The regions of a [`FirstLevel::Blocks`] table: the top bits of an address name its
/// region (4,096 of them: each /12 of IPv4); each region is cut into `2^bits` blocks of its
/// own (`bits` 0 for a region inside one interval, whose one block may be shared; else 4 to
/// 20, so a block spans at most 65,536 addresses and its offsets fit 16 bits). 8 bytes a
/// region, 32 KiB in all: read on every lookup, it stays in cache, and the block it names is
/// the one memory access of a random address.
#[derive(Debug, Clone)]
struct Regions(Box<[RegionEntry]>);

#[derive(Debug, Clone, Copy)]
struct RegionEntry {
    /// The region's first block.
    base: u32,
    /// Its blocks are the addresses sharing their top `REGION_BITS + bits` bits.
    bits: u32,
}

/// Regions: the addresses sharing their top this many bits.
const REGION_BITS: u32 = 12;
/// At most this many blocks per interval start in a region (rounded up to a power of two):
/// the memory bound of a crowded region; blocks that still hold too many intervals spill.
const MAX_BLOCKS_PER_START: usize = 2;

impl Regions {
    /// The block holding `address` and the address's offset in it.
    #[inline(always)]
    fn block<A: Address>(&self, address: A) -> (usize, u16) {
        let entry = self.0[address.top(REGION_BITS)];
        let bits = REGION_BITS + entry.bits;
        let within = address.top(bits) & ((1usize << entry.bits) - 1);
        (entry.base as usize + within, address.offset16(bits))
    }
}

/// The fewest blocks (as `bits`, 4 to 20) a region whose interval starts are `inside` (sorted,
/// all in the region, at least one) can be cut into so that no block holds more than
/// [`BLOCK_INTERVALS`] intervals, within [`MAX_BLOCKS_PER_START`]; the bound's own when none
/// does.
fn region_bits<A: Address>(inside: &[A]) -> u32 {
    let cap = (MAX_BLOCKS_PER_START * inside.len())
        .next_power_of_two()
        .max(16);
    let max_bits = (cap.trailing_zeros()).clamp(4, 20);
    (4..=max_bits)
        .find(|&bits| {
            // Starts per block, counted along the sorted starts: a block holds the interval
            // running into it plus its own starts.
            let mut run = 0usize;
            let mut current = usize::MAX;
            inside.iter().all(|s| {
                let block = s.top(REGION_BITS + bits);
                if block == current {
                    run += 1;
                } else {
                    current = block;
                    run = 1;
                }
                run < BLOCK_INTERVALS
            })
        })
        .unwrap_or(max_bits)
}

#[derive(Debug, Clone)]
enum FirstLevel<A> {
    None,
    /// `table[h]` = the interval holding the first address whose top `bits` bits are `h`;
    /// `table[1 << bits]` = the last interval. `bits` grows with the table (8 to 22) so that a
    /// block holds about one interval and the search reads one cache line. An entry with
    /// [`UNCOVERED`] set marks a block that lies inside one interval no network covers: the
    /// lookup answers from the table alone, without reading an interval.
    Direct {
        bits: u32,
        table: Vec<u32>,
    },
    /// `fences[j]` = `starts[j * FENCE_STRIDE]`.
    Fences(Vec<A>),
    /// The address space cut into [`REGION_BITS`]-bit regions, each cut into blocks of its
    /// own size (see [`Regions`]), each block a [`Block`]; the interval list itself is not
    /// kept.
    Blocks {
        regions: Regions,
        /// The blocks as [`BLOCK_BYTES`]-byte records.
        blocks: PageBytes,
        spill: Vec<SpillEntry>,
    },
    /// The intervals packed in lines, each holding the code of a chain: the node list holds
    /// the chains (interned: one per distinct posting and enclosing chain), not the networks;
    /// the interval list itself is not kept.
    Packed(PackedIntervals),
}

/// The interval table of one address signal and family.
#[derive(Debug, Clone)]
pub(crate) struct RangeTable<A> {
    intervals: Vec<Interval<A>>,
    nodes: Vec<Node>,
    first: FirstLevel<A>,
    /// Elementary intervals (the list itself is dropped for a [`FirstLevel::Blocks`] table).
    interval_count: usize,
    /// Distinct networks (a [`FirstLevel::Blocks`] table without nested networks keeps one
    /// placeholder node: its blocks hold every posting).
    network_count: usize,
}

impl<A: Address> Default for RangeTable<A> {
    fn default() -> Self {
        Self::build(Vec::new())
    }
}

impl<A: Address> RangeTable<A> {
    /// Builds the table from distinct networks `(first address, last address, posting)`.
    /// Networks must be distinct and laminar (CIDR blocks always are).
    pub(crate) fn build(nets: Vec<(A, A, u32)>) -> Self {
        Self::build_laid_out(nets, true)
    }

    /// [`build`](Self::build); `pack`: whether a large IPv4 table may be packed in lines
    /// (the tests of the other layouts build them with `false`).
    fn build_laid_out(mut nets: Vec<(A, A, u32)>, pack: bool) -> Self {
        // Outer networks first among those with the same start (the compiler passes them in
        // that order already: checking is one pass, sorting would be a second sort).
        let outer_first = |a: &(A, A, u32), b: &(A, A, u32)| a.0.cmp(&b.0).then(b.1.cmp(&a.1));
        if !nets.is_sorted_by(|a, b| outer_first(a, b).is_le()) {
            nets.sort_unstable_by(outer_first);
        }
        // A network opens at most one interval and closes at most one.
        let mut starts = Vec::with_capacity(2 * nets.len() + 1);
        starts.push(A::default());
        let mut innermost = Vec::with_capacity(2 * nets.len() + 1);
        innermost.push(NONE);
        let mut nodes = Vec::with_capacity(nets.len());
        let mut stack: Vec<(A, u32)> = Vec::new();

        fn push_interval<A: Address>(
            starts: &mut Vec<A>,
            innermost: &mut Vec<u32>,
            start: A,
            node: u32,
        ) {
            if starts.last() == Some(&start) {
                if let Some(last) = innermost.last_mut() {
                    *last = node;
                }
            } else {
                starts.push(start);
                innermost.push(node);
            }
        }

        fn close_until<A: Address>(
            stack: &mut Vec<(A, u32)>,
            starts: &mut Vec<A>,
            innermost: &mut Vec<u32>,
            before: Option<A>,
        ) {
            while let Some(&(end, _)) = stack.last() {
                if before.is_some_and(|start| end >= start) {
                    break;
                }
                stack.pop();
                if let Some(next) = end.successor() {
                    let resume = stack.last().map_or(NONE, |&(_, node)| node);
                    push_interval(starts, innermost, next, resume);
                }
            }
        }

        for (first, last, posting) in nets {
            close_until(&mut stack, &mut starts, &mut innermost, Some(first));
            let parent = stack.last().map_or(NONE, |&(_, node)| node);
            let node = nodes.len() as u32;
            nodes.push(Node { posting, parent });
            push_interval(&mut starts, &mut innermost, first, node);
            stack.push((last, node));
        }
        close_until(&mut stack, &mut starts, &mut innermost, None);

        if pack && A::DIRECT16 && starts.len() >= PACKED_MIN {
            if let Some((chains, packed)) = Self::packed(&starts, &innermost, &nodes) {
                return Self {
                    intervals: Vec::new(),
                    nodes: chains,
                    first: FirstLevel::Packed(packed),
                    interval_count: starts.len(),
                    network_count: nodes.len(),
                };
            }
        }
        if A::DIRECT16 && starts.len() >= BLOCKS_MIN {
            let first = Self::blocks(&starts, &innermost, &nodes);
            let network_count = nodes.len();
            // Without nesting no block refers to a node (the lookup reads node 0 and ignores
            // it): the blocks alone answer, the node list is not kept.
            let nodes = if nodes.iter().any(|n| n.parent != NONE) {
                nodes
            } else {
                vec![Node {
                    posting: NONE,
                    parent: NONE,
                }]
            };
            return Self {
                intervals: Vec::new(),
                nodes,
                first,
                interval_count: starts.len(),
                network_count,
            };
        }
        let first = if starts.len() < FIRST_LEVEL_MIN {
            FirstLevel::None
        } else if A::DIRECT16 && starts.len() <= INTERVAL as usize {
            let bits = (usize::BITS - starts.len().leading_zeros()).clamp(8, 22);
            let blocks = 1usize << bits;
            let mut table = Vec::with_capacity(blocks + 1);
            let mut at = 0usize;
            for high in 0..blocks {
                let block = A::from_top(high, bits);
                while at + 1 < starts.len() && starts[at + 1] <= block {
                    at += 1;
                }
                table.push(at as u32);
            }
            table.push((starts.len() - 1) as u32);
            // A block lies inside interval `table[h]` when the next block starts in it too
            // (the last block: when that interval is the last one).
            for high in 0..blocks {
                let at = table[high];
                if at == table[high + 1] && innermost[at as usize] == NONE {
                    table[high] |= UNCOVERED;
                }
            }
            FirstLevel::Direct { bits, table }
        } else {
            FirstLevel::Fences(starts.iter().step_by(FENCE_STRIDE).copied().collect())
        };

        let intervals: Vec<Interval<A>> = starts
            .iter()
            .zip(&innermost)
            .map(|(&start, &node)| match nodes.get(node as usize) {
                Some(n) => Interval {
                    start,
                    posting: n.posting,
                    parent: n.parent,
                },
                None => Interval {
                    start,
                    posting: NONE,
                    parent: NONE,
                },
            })
            .collect();
        Self {
            interval_count: intervals.len(),
            network_count: nodes.len(),
            intervals,
            nodes,
            first,
        }
    }

    /// Interns the chains of the networks (a chain: a network's posting and the chain of the
    /// network around it; the first chain, code 0, is "no network") and packs the intervals
    /// (`starts[i]`, innermost network `innermost[i]`) in lines of chain codes, neighbours with
    /// the same chain merged; `None` when there are more chains than a code can name.
    fn packed(
        starts: &[A],
        innermost: &[u32],
        nodes: &[Node],
    ) -> Option<(Vec<Node>, PackedIntervals)> {
        let mut chains = vec![Node {
            posting: NONE,
            parent: NONE,
        }];
        let mut known: std::collections::HashMap<(u32, u32), u16, foldhash::fast::RandomState> =
            Default::default();
        let mut chain_of: Vec<u16> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let parent = match node.parent {
                NONE => NONE,
                p => u32::from(chain_of[p as usize]),
            };
            let code = match known.entry((node.posting, parent)) {
                std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    if chains.len() > usize::from(MAX_CODE) {
                        return None;
                    }
                    chains.push(Node {
                        posting: node.posting,
                        parent,
                    });
                    *e.insert((chains.len() - 1) as u16)
                }
            };
            chain_of.push(code);
        }
        let mut merged_starts = Vec::with_capacity(starts.len());
        let mut codes: Vec<u16> = Vec::with_capacity(starts.len());
        for (&start, &node) in starts.iter().zip(innermost) {
            let code = chain_of.get(node as usize).copied().unwrap_or(0);
            if codes.last() != Some(&code) {
                merged_starts.push(start.low32());
                codes.push(code);
            }
        }
        drop(chain_of);
        let packed = PackedIntervals::build(&merged_starts, &codes);
        chains.shrink_to_fit();
        Some((chains, packed))
    }

    /// Lays the intervals (`starts[i]`, innermost network `innermost[i]`) out in blocks, each
    /// region of the address space with the smallest block count that holds every block's
    /// intervals inline (within [`MAX_BLOCKS_PER_START`] blocks per interval start; beyond it
    /// the fullest blocks spill).
    fn blocks(starts: &[A], innermost: &[u32], nodes: &[Node]) -> FirstLevel<A> {
        // An interval's value: its innermost network's posting, or that network's node when
        // an enclosing network must be reported too.
        let value = |at: usize| -> (u32, bool) {
            match nodes.get(innermost[at] as usize) {
                None => (NONE, false),
                Some(n) if n.parent == NONE => (n.posting, false),
                Some(_) => (innermost[at], true),
            }
        };
        let mut records = Vec::new();
        let mut spill = Vec::new();
        let mut entries = Vec::with_capacity(1 << REGION_BITS);
        // Regions inside one interval share one block per value.
        let mut uniform: std::collections::HashMap<(u32, bool), u32> =
            std::collections::HashMap::new();
        let mut block_count = 0u32;
        let mut at = 0usize;
        for region in 0..1usize << REGION_BITS {
            let first = A::from_top(region, REGION_BITS);
            while at + 1 < starts.len() && starts[at + 1] <= first {
                at += 1;
            }
            // Starts inside the region: at + 1 .. end.
            let mut end = at + 1;
            while end < starts.len() && starts[end].top(REGION_BITS) == region {
                end += 1;
            }
            let inside = &starts[at + 1..end];
            if inside.is_empty() {
                let (v, nested) = value(at);
                let base = *uniform.entry((v, nested)).or_insert_with(|| {
                    Block {
                        starts: [u16::MAX; BLOCK_INTERVALS - 1],
                        values: [v; BLOCK_INTERVALS],
                        nested: if nested { u8::MAX } else { 0 },
                        spilled: 0,
                    }
                    .encode(&mut records);
                    block_count += 1;
                    block_count - 1
                });
                entries.push(RegionEntry { base, bits: 0 });
                continue;
            }
            let bits = region_bits(inside);
            let base = block_count;
            let mut k = at;
            for high in 0..1usize << bits {
                let block = A::from_top((region << bits) | high, REGION_BITS + bits);
                while k + 1 < end && starts[k + 1] <= block {
                    k += 1;
                }
                let mut last = k + 1;
                while last < end && starts[last].top(REGION_BITS + bits) == (region << bits) | high
                {
                    last += 1;
                }
                let (v0, nested0) = value(k);
                let mut b = Block {
                    starts: [u16::MAX; BLOCK_INTERVALS - 1],
                    values: [v0; BLOCK_INTERVALS],
                    nested: if nested0 { u8::MAX } else { 0 },
                    spilled: 0,
                };
                if last - k <= BLOCK_INTERVALS {
                    for (i, j) in (k + 1..last).enumerate() {
                        let (v, nested) = value(j);
                        b.starts[i] = starts[j].offset16(REGION_BITS + bits);
                        // This value and the unused ones after it.
                        for slot in i + 1..BLOCK_INTERVALS {
                            b.values[slot] = v;
                            b.nested = if nested {
                                b.nested | (1 << slot)
                            } else {
                                b.nested & !(1 << slot)
                            };
                        }
                    }
                } else {
                    b.spilled = 1;
                    b.values[0] = spill.len() as u32;
                    b.values[1] = (last - k) as u32;
                    for (j, start) in starts.iter().enumerate().take(last).skip(k) {
                        let (v, nested) = value(j);
                        spill.push(SpillEntry {
                            start: if j == k {
                                0
                            } else {
                                start.offset16(REGION_BITS + bits)
                            },
                            nested,
                            value: v,
                        });
                    }
                }
                b.encode(&mut records);
            }
            block_count += 1 << bits;
            entries.push(RegionEntry { base, bits });
        }
        FirstLevel::Blocks {
            regions: Regions(entries.into_boxed_slice()),
            blocks: PageBytes::copy_of(&records),
            spill,
        }
    }

    /// The interval of `offset` in a block that did not fit: `(value, nested)`.
    #[cold]
    #[inline(never)]
    fn spilled(spill: &[SpillEntry], block: &Block, offset: u16) -> (u32, bool) {
        let from = block.values[0] as usize;
        let entries = &spill[from..from + block.values[1] as usize];
        // The first entry starts at offset 0: at least one entry is at or below `offset`.
        let e = entries[partition_point(entries, |e| e.start <= offset).saturating_sub(1)];
        (e.value, e.nested)
    }

    /// The posting of the innermost network holding `address` and that network's enclosing
    /// network (each `NONE` when there is none).
    #[inline]
    pub(crate) fn innermost(&self, address: A) -> (u32, u32) {
        let (lo, hi) = match &self.first {
            FirstLevel::Blocks {
                regions,
                blocks,
                spill,
            } => {
                let (index, offset) = regions.block(address);
                let (value, nested) = match Block::find(blocks.bytes(), index, offset) {
                    Some(found) => found,
                    None => Self::spilled(spill, &Block::decode(blocks.bytes(), index), offset),
                };
                // Without a branch on `nested`: node 0 is read when the value is a posting.
                let node = self.nodes[select_unpredictable(nested, value as usize, 0)];
                return (
                    select_unpredictable(nested, node.posting, value),
                    select_unpredictable(nested, node.parent, NONE),
                );
            }
            FirstLevel::Packed(packed) => {
                let chain = self.nodes[usize::from(packed.get(address.low32()))];
                return (chain.posting, chain.parent);
            }
            FirstLevel::None => (0, self.intervals.len() - 1),
            FirstLevel::Direct { bits, table } => {
                let high = address.top(*bits);
                let entry = table[high];
                if entry & UNCOVERED != 0 {
                    return (NONE, NONE);
                }
                (entry as usize, (table[high + 1] & INTERVAL) as usize)
            }
            FirstLevel::Fences(fences) => self.fenced_group(fences, address),
        };
        let index = lo + partition_point(&self.intervals[lo + 1..=hi], |i| i.start <= address);
        let interval = self.intervals[index];
        (interval.posting, interval.parent)
    }

    /// Starts loading the block a lookup of `address` reads (tables laid out in blocks, far
    /// larger than the cache); a no-op for the others.
    #[inline(always)]
    pub(crate) fn prefetch(&self, address: A) {
        match &self.first {
            FirstLevel::Blocks {
                regions, blocks, ..
            } => {
                let (index, _) = regions.block(address);
                prefetch_index::prefetch_index(blocks.bytes(), index * BLOCK_BYTES);
            }
            FirstLevel::Packed(packed) => packed.prefetch(address.low32()),
            // A large IPv6 table: the fences stay in cache, the group of intervals they lead
            // to does not. Its lines are requested now, so the search finds them arriving.
            FirstLevel::Fences(fences) if self.intervals.len() >= FENCES_PREFETCH_MIN => {
                let (lo, hi) = self.fenced_group(fences, address);
                let per_line = (64 / std::mem::size_of::<Interval<A>>()).max(1);
                for k in (lo..=hi).step_by(per_line) {
                    prefetch_index::prefetch_index(&self.intervals, k);
                }
            }
            // The other layouts are small enough to stay in cache.
            FirstLevel::Direct { .. } | FirstLevel::None | FirstLevel::Fences(_) => {}
        }
    }

    /// The intervals `lo..=hi` among which a fenced lookup of `address` searches (and whose
    /// lines the prefetch requests).
    #[inline(always)]
    fn fenced_group(&self, fences: &[A], address: A) -> (usize, usize) {
        let j = partition_point(fences, |&f| f <= address).saturating_sub(1);
        let lo = j * FENCE_STRIDE;
        (lo, (lo + FENCE_STRIDE).min(self.intervals.len() - 1))
    }

    /// The network node `index`.
    #[inline(always)]
    pub(crate) fn node(&self, index: u32) -> Node {
        self.nodes[index as usize]
    }

    pub(crate) fn networks(&self) -> usize {
        self.network_count
    }

    pub(crate) fn intervals(&self) -> usize {
        self.interval_count
    }

    pub(crate) fn has_first_level(&self) -> bool {
        !matches!(self.first, FirstLevel::None)
    }

    /// Whether the table is laid out in [`Block`]s.
    pub(crate) fn has_blocks(&self) -> bool {
        matches!(self.first, FirstLevel::Blocks { .. })
    }

    /// Whether the table is packed in lines ([`PackedIntervals`]).
    pub(crate) fn is_packed(&self) -> bool {
        matches!(self.first, FirstLevel::Packed(_))
    }

    pub(crate) fn bytes(&self) -> usize {
        let first = match &self.first {
            FirstLevel::None => 0,
            FirstLevel::Direct { table, .. } => table.capacity() * 4,
            FirstLevel::Fences(f) => f.capacity() * std::mem::size_of::<A>(),
            FirstLevel::Blocks {
                regions,
                blocks,
                spill,
            } => {
                std::mem::size_of_val(&*regions.0)
                    + blocks.bytes().len()
                    + spill.capacity() * std::mem::size_of::<SpillEntry>()
            }
            FirstLevel::Packed(packed) => packed.bytes(),
        };
        self.intervals.capacity() * std::mem::size_of::<Interval<A>>()
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator of test values.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// Every posting covering `address`, innermost first.
    fn chain<A: Address>(table: &RangeTable<A>, address: A) -> Vec<u32> {
        let (posting, mut node) = table.innermost(address);
        let mut out = Vec::new();
        if posting != NONE {
            out.push(posting);
        }
        while node != NONE {
            let n = table.node(node);
            out.push(n.posting);
            node = n.parent;
        }
        out
    }

    fn v4(a: [u8; 4]) -> u32 {
        u32::from_be_bytes(a)
    }

    #[test]
    fn nested_and_adjacent_networks() {
        let table = RangeTable::build(vec![
            (v4([10, 0, 0, 0]), v4([10, 255, 255, 255]), 1),
            (v4([10, 1, 0, 0]), v4([10, 1, 255, 255]), 2),
            (v4([10, 1, 2, 3]), v4([10, 1, 2, 3]), 3),
            (v4([11, 0, 0, 0]), v4([11, 0, 0, 255]), 4),
            (0, 0, 5),
            (v4([255, 255, 255, 255]), u32::MAX, 6),
            (v4([10, 1, 255, 0]), v4([10, 1, 255, 255]), 7),
        ]);
        assert_eq!(chain(&table, v4([10, 1, 2, 3])), vec![3, 2, 1]);
        assert_eq!(chain(&table, v4([10, 1, 2, 4])), vec![2, 1]);
        assert_eq!(chain(&table, v4([10, 1, 255, 255])), vec![7, 2, 1]);
        assert_eq!(chain(&table, v4([10, 2, 0, 0])), vec![1]);
        assert_eq!(chain(&table, v4([10, 255, 255, 255])), vec![1]);
        assert_eq!(chain(&table, v4([11, 0, 0, 0])), vec![4]);
        assert_eq!(chain(&table, v4([11, 0, 1, 0])), Vec::<u32>::new());
        assert_eq!(chain(&table, 0), vec![5]);
        assert_eq!(chain(&table, 1), Vec::<u32>::new());
        assert_eq!(chain(&table, u32::MAX), vec![6]);
        assert_eq!(chain(&table, u32::MAX - 1), Vec::<u32>::new());
        assert_eq!(chain(&RangeTable::<u32>::default(), 7), Vec::<u32>::new());
    }

    #[test]
    fn a_large_table_uses_a_wider_direct_table() {
        // 60,000 distinct /24 networks: about 120,000 intervals, a 17-bit direct table (from
        // 131,072 intervals on, blocks).
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut nets = std::collections::HashMap::new();
        while nets.len() < 60_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let first = ((state >> 32) as u32) & 0xffff_ff00;
            let next = nets.len() as u32;
            nets.entry(first).or_insert(next);
        }
        let table = RangeTable::build_laid_out(
            nets.iter()
                .map(|(&first, &p)| (first, first | 0xff, p))
                .collect(),
            false,
        );
        assert!(matches!(table.first, FirstLevel::Direct { bits: 17, .. }));
        for probe in 0..200_000u32 {
            let address = probe.wrapping_mul(2_654_435_761);
            let expected: Vec<u32> = nets
                .get(&(address & 0xffff_ff00))
                .copied()
                .into_iter()
                .collect();
            assert_eq!(chain(&table, address), expected, "{address:#x}");
        }
        for (&first, &p) in nets.iter().take(5_000) {
            assert_eq!(chain(&table, first), vec![p]);
            assert_eq!(chain(&table, first | 0xff), vec![p]);
        }
    }

    #[test]
    fn uncovered_blocks_answer_from_the_direct_table() {
        // 600 /24 networks in 1.0.0.0/8 and one /12 at the top: most /16 blocks are empty,
        // the blocks inside the /12 are covered, the last block is uncovered.
        let mut nets: Vec<(u32, u32, u32)> = (0..600u32)
            .map(|i| {
                let first = v4([1, 0, 0, 0]) + (i << 8) * 7;
                (first, first | 0xff, i)
            })
            .collect();
        nets.push((v4([200, 0, 0, 0]), v4([200, 15, 255, 255]), 600));
        let table = RangeTable::build(nets.clone());
        let FirstLevel::Direct {
            bits,
            table: direct,
        } = &table.first
        else {
            panic!("expected a direct table");
        };
        let flagged = direct.iter().filter(|&&e| e & UNCOVERED != 0).count();
        // Blocks 1.0 to 1.16 hold networks, 200.0 to 200.15 lie in the /12.
        assert!(flagged > (1 << bits) - 40, "{flagged} uncovered blocks");
        assert_eq!(direct[v4([200, 3, 0, 0]).top(*bits)] & UNCOVERED, 0);
        assert_eq!(direct[v4([1, 0, 0, 0]).top(*bits)] & UNCOVERED, 0);
        for probe in [
            0,
            u32::MAX,
            v4([1, 0, 0, 5]),
            v4([1, 0, 1, 5]),
            v4([1, 0, 7, 0]),
            v4([1, 0, 7, 255]),
            v4([1, 0, 8, 0]),
            v4([1, 16, 0, 0]),
            v4([199, 255, 255, 255]),
            v4([200, 0, 0, 0]),
            v4([200, 15, 255, 255]),
            v4([200, 16, 0, 0]),
        ] {
            let expected: Vec<u32> = nets
                .iter()
                .filter(|n| n.0 <= probe && probe <= n.1)
                .map(|n| n.2)
                .collect();
            assert_eq!(chain(&table, probe), expected, "{probe:#x}");
        }
    }

    /// A fenced IPv6 table large enough to prefetch its groups: for any address (the ends of
    /// the space, every boundary) the group whose lines the prefetch requests holds the
    /// interval the lookup finds, prefetching is harmless, and lookups answer as a search.
    #[test]
    fn a_large_fenced_table_prefetches_its_groups() {
        let nets: Vec<(u128, u128, u32)> = (0..6_000u32)
            .map(|i| {
                let first = (0x2a00u128 << 112) | ((u128::from(i) * 3) << 80);
                (first, first | ((1u128 << 80) - 1), i)
            })
            .collect();
        let table = RangeTable::build(nets.clone());
        assert!(table.intervals() >= FENCES_PREFETCH_MIN);
        let mut probes = vec![0, u128::MAX];
        for &(first, last, _) in &nets {
            probes.extend([first - 1, first, last, last + 1]);
        }
        let FirstLevel::Fences(fences) = &table.first else {
            panic!("expected fences");
        };
        for a in probes {
            let (lo, hi) = table.fenced_group(fences, a);
            let holding = table.intervals.partition_point(|i| i.start <= a) - 1;
            assert!(
                (lo..=hi).contains(&holding),
                "{a:#x}: {holding} not in {lo}..={hi}"
            );
            assert!(hi - lo <= FENCE_STRIDE);
            table.prefetch(a);
            let expected = nets
                .iter()
                .find(|n| n.0 <= a && a <= n.1)
                .map_or(NONE, |n| n.2);
            assert_eq!(table.innermost(a).0, expected, "{a:#x}");
        }
    }

    #[test]
    fn first_levels_agree_with_a_linear_scan() {
        // Enough networks for the direct table (IPv4) and the fences (IPv6).
        let mut next = xorshift(0x1234_5678_9abc_def0);
        let mut nets4 = Vec::new();
        let mut nets6 = Vec::new();
        for posting in 0..3000u32 {
            let len = 8 + (next() % 25) as u32;
            let mask = u32::MAX << (32 - len);
            let first = (next() as u32) & mask;
            nets4.push((first, first | !mask, posting));
            let len6 = 16 + (next() % 113) as u32;
            let mask6 = u128::MAX << (128 - len6);
            let first6 = ((u128::from(next()) << 64) | u128::from(next())) & mask6;
            nets6.push((first6, first6 | !mask6, posting));
        }
        // Drop duplicates of the same network (the compiler groups them).
        nets4.sort_unstable();
        nets4.dedup_by_key(|n| (n.0, n.1));
        nets6.sort_unstable();
        nets6.dedup_by_key(|n| (n.0, n.1));
        let t4 = RangeTable::build(nets4.clone());
        let t6 = RangeTable::build(nets6.clone());
        assert!(t4.has_first_level() && t6.has_first_level());
        for _ in 0..3000 {
            let a = next() as u32;
            let mut expected: Vec<(u32, u32)> = nets4
                .iter()
                .filter(|n| n.0 <= a && a <= n.1)
                .map(|n| (n.1 - n.0, n.2))
                .collect();
            expected.sort_unstable();
            let expected: Vec<u32> = expected.into_iter().map(|e| e.1).collect();
            assert_eq!(chain(&t4, a), expected, "{a:#x}");
            // Also probe the first address of some network.
            let probe = nets4[(next() % nets4.len() as u64) as usize].0;
            assert!(!chain(&t4, probe).is_empty());
            let a6 = (u128::from(next()) << 64) | u128::from(next());
            let a6 = if next().is_multiple_of(2) {
                a6
            } else {
                nets6[(next() % nets6.len() as u64) as usize].0
            };
            let mut expected6: Vec<(u128, u32)> = nets6
                .iter()
                .filter(|n| n.0 <= a6 && a6 <= n.1)
                .map(|n| (n.1 - n.0, n.2))
                .collect();
            expected6.sort_unstable();
            let expected6: Vec<u32> = expected6.into_iter().map(|e| e.1).collect();
            assert_eq!(chain(&t6, a6), expected6, "{a6:#x}");
        }
    }

    /// Random /20 to /32 networks, enclosing networks (nesting two and three deep), the two
    /// ends of the space, block edges, and one /16 crowded with /32s.
    fn per_length_case() -> Vec<(u32, u8)> {
        let mut next = xorshift(0x0dd_c0ffee);
        let mut nets: std::collections::BTreeSet<(u32, u8)> = Default::default();
        while nets.len() < 75_000 {
            let len = 20 + (next() % 13) as u8;
            nets.insert(((next() as u32) & (u32::MAX << (32 - len)), len));
        }
        for (first, len) in [
            (0x0a00_0000, 8),
            (0x0a10_0000, 12),
            (0x0a10_0000, 16),
            (0xc000_0000, 4),
            (0, 32),
            (u32::MAX, 32),
            (0x0b00_ffff, 32),
            (0x0b01_0000, 32),
            (0x0b02_0000, 16),
        ] {
            nets.insert((first, len));
        }
        for i in 0..400u32 {
            nets.insert((0x0c0c_0000 + i * 7, 32));
        }
        nets.into_iter().collect()
    }

    fn last_of(first: u32, len: u8) -> u32 {
        first | (u32::MAX.checked_shr(u32::from(len)).unwrap_or(0))
    }

    /// `table` (of `nets`, posting `posting(i)` for network `i`) against an oracle of the
    /// networks by prefix length, at random addresses and at every network's edges.
    fn agrees_with_a_per_length_oracle(
        table: &RangeTable<u32>,
        nets: &[(u32, u8)],
        posting: impl Fn(usize) -> u32,
    ) {
        let mut by_len: Vec<std::collections::HashMap<u32, u32>> = vec![Default::default(); 33];
        for (p, &(first, len)) in nets.iter().enumerate() {
            by_len[usize::from(len)].insert(first, posting(p));
        }
        let expected = |a: u32| -> Vec<u32> {
            (0..=32u32)
                .rev()
                .filter_map(|len| {
                    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
                    by_len[len as usize].get(&(a & mask)).copied()
                })
                .collect()
        };
        let mut next = xorshift(0x5eed_00f0_0ddd);
        let mut probes: Vec<u32> = (0..200_000).map(|_| next() as u32).collect();
        for &(first, len) in nets {
            let last = last_of(first, len);
            probes.extend([first, last, first.wrapping_sub(1), last.wrapping_add(1)]);
        }
        probes.extend((0..2_000u32).map(|i| 0x0c0c_0000 + i));
        probes.extend([0, 1, u32::MAX, u32::MAX - 1, 0x0b00_fffe, 0x0b01_0001]);
        for a in probes {
            table.prefetch(a);
            assert_eq!(chain(table, a), expected(a), "{a:#x}");
        }
    }

    #[test]
    fn blocks_agree_with_a_per_length_oracle() {
        let nets = per_length_case();
        let table = RangeTable::build_laid_out(
            nets.iter()
                .enumerate()
                .map(|(p, &(first, len))| (first, last_of(first, len), p as u32))
                .collect(),
            false,
        );
        let FirstLevel::Blocks { spill, .. } = &table.first else {
            panic!("expected blocks for {} intervals", table.intervals());
        };
        assert!(!spill.is_empty(), "the crowded /16 spills");
        agrees_with_a_per_length_oracle(&table, &nets, |p| p as u32);
    }

    /// The same networks with the postings of a block list over a few dozen rules (a few
    /// dozen distinct postings, so a few hundred chains): packed in lines.
    #[test]
    fn lines_agree_with_a_per_length_oracle() {
        let nets = per_length_case();
        let posting = |p: usize| (p * 7 % 41) as u32;
        let table = RangeTable::build(
            nets.iter()
                .enumerate()
                .map(|(p, &(first, len))| (first, last_of(first, len), posting(p)))
                .collect(),
        );
        let FirstLevel::Packed(packed) = &table.first else {
            panic!("expected lines for {} intervals", table.intervals());
        };
        assert!(packed.spilled_lines() > 0, "the crowded /16 spills");
        assert!(table.nodes.len() < 10_000, "{} chains", table.nodes.len());
        assert_eq!(table.networks(), nets.len());
        // Lines, regions and chains: about 13 bytes an interval.
        assert!(
            table.bytes() < table.intervals() * 14,
            "{} bytes for {} intervals",
            table.bytes(),
            table.intervals()
        );
        agrees_with_a_per_length_oracle(&table, &nets, posting);
    }

    /// A posting per network: more chains than a line's code names, so the table keeps the
    /// blocks (from 131,072 intervals) or the direct table.
    #[test]
    fn too_many_chains_for_lines_keep_blocks() {
        let nets = per_length_case();
        let table = RangeTable::build(
            nets.iter()
                .enumerate()
                .map(|(p, &(first, len))| (first, last_of(first, len), p as u32))
                .collect(),
        );
        assert!(table.has_blocks(), "{} intervals", table.intervals());
        let small = RangeTable::build(
            nets.iter()
                .take(70_000)
                .step_by(8)
                .enumerate()
                .map(|(p, &(first, len))| (first, last_of(first, len), p as u32))
                .collect(),
        );
        assert!(small.is_packed(), "fewer chains than codes");
    }

    #[test]
    fn crowded_regions_get_small_blocks_and_nothing_spills() {
        // A GeoIP-like layout: a /24 every 768 addresses (a network, then a gap), a million
        // of them: about ten interval starts every 4,096 addresses, more than a block of a
        // fixed 20-bit layout holds. Each region is cut finer instead; nothing spills, and
        // the empty regions share one block.
        let nets: Vec<(u32, u32, u32)> = (0..1_000_000u32)
            .map(|i| {
                let first = (1u32 << 24) + i * 768;
                (first, first | 0xff, i)
            })
            .collect();
        let table = RangeTable::build_laid_out(nets.clone(), false);
        let FirstLevel::Blocks {
            regions,
            blocks,
            spill,
        } = &table.first
        else {
            panic!("expected blocks");
        };
        assert!(spill.is_empty(), "{} spilled intervals", spill.len());
        let crowded = regions.0[(0x0200_0000u32 >> 20) as usize];
        assert_eq!(crowded.bits, 10, "blocks of 1,024 addresses");
        let shared = regions.0.iter().filter(|e| e.bits == 0).count();
        assert!(shared > 3_000, "{shared} regions in one interval");
        // About 24 bytes an interval start, against 16 for the starts and values alone.
        assert!(
            blocks.bytes().len() < 2_100_000 * 24,
            "{} bytes of blocks",
            blocks.bytes().len()
        );
        let mut next = xorshift(0x5eed);
        for _ in 0..300_000 {
            let a = (next() as u32) % (800_000_000);
            let expected: Vec<u32> = match a.checked_sub(1 << 24) {
                Some(d) if d / 768 < 1_000_000 && d % 768 < 256 => vec![d / 768],
                _ => Vec::new(),
            };
            assert_eq!(chain(&table, a), expected, "{a:#x}");
        }
        for &(first, last, p) in nets.iter().step_by(997) {
            assert_eq!(chain(&table, first), vec![p]);
            assert_eq!(chain(&table, last), vec![p]);
            assert!(chain(&table, last + 1).is_empty());
            assert!(chain(&table, first - 1).is_empty());
        }
    }

    #[test]
    fn block_records_round_trip() {
        let blocks = [
            Block {
                starts: [1, 300, u16::MAX, u16::MAX],
                values: [NONE, 7, 1 << 31 | 5, 1 << 31 | 5, 1 << 31 | 5],
                nested: 0b11100,
                spilled: 0,
            },
            Block {
                starts: [u16::MAX; 4],
                values: [12, 3, 0, 0, 0],
                nested: 0,
                spilled: 1,
            },
        ];
        let mut records = Vec::new();
        for b in &blocks {
            b.encode(&mut records);
        }
        assert_eq!(records.len(), 2 * BLOCK_BYTES);
        for (i, b) in blocks.iter().enumerate() {
            assert_eq!(Block::decode(&records, i), *b);
        }
        assert_eq!(Block::find(&records, 0, 0), Some((NONE, false)));
        assert_eq!(Block::find(&records, 0, 1), Some((7, false)));
        assert_eq!(Block::find(&records, 0, 299), Some((7, false)));
        assert_eq!(Block::find(&records, 0, 300), Some((1 << 31 | 5, true)));
        assert_eq!(
            Block::find(&records, 0, u16::MAX),
            Some((1 << 31 | 5, true))
        );
        assert_eq!(Block::find(&records, 1, 5), None, "spilled");
        assert_eq!(Block::find(&records, 2, 5), None, "out of range");
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(32))]

        /// Random CIDR sets, spread over the space or crowded into a few /16s (dense: /32s
        /// side by side, nesting), postings from a few (lines) or one per network (blocks or
        /// direct table), IPv4 and IPv6: every layout answers as a scan of the networks.
        #[test]
        fn random_networks_answer_as_a_scan(
            seed: u64,
            count in 1usize..6_000,
            crowded: bool,
            distinct in 1u32..5_000,
        ) {
            let mut next = xorshift(seed | 1);
            let windows: Vec<u32> = (0..4).map(|_| (next() as u32) & 0xffff_0000).collect();
            let mut v4: std::collections::BTreeSet<(u32, u8)> = Default::default();
            let mut v6: std::collections::BTreeSet<(u128, u8)> = Default::default();
            for _ in 0..count {
                let len = [32u8, 32, 31, 28, 24, 24, 20, 16, 12][(next() % 9) as usize];
                let point = if crowded {
                    windows[(next() % 4) as usize] | (next() as u32 & 0xffff)
                } else {
                    next() as u32
                };
                v4.insert((point & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0), len));
                let len6 = [128u8, 64, 56, 48, 32][(next() % 5) as usize];
                let point6 = if crowded {
                    (u128::from(windows[(next() % 4) as usize]) << 96)
                        | (u128::from(next()) << 32)
                } else {
                    (u128::from(next()) << 64) | u128::from(next())
                };
                v6.insert((point6 & (u128::MAX << (128 - u32::from(len6))), len6));
            }
            let posting = |p: usize| (p as u32).wrapping_mul(2_654_435_761) % distinct;
            let nets4: Vec<(u32, u32, u32)> = v4
                .iter()
                .enumerate()
                .map(|(p, &(first, len))| (first, last_of(first, len), posting(p)))
                .collect();
            let nets6: Vec<(u128, u128, u32)> = v6
                .iter()
                .enumerate()
                .map(|(p, &(first, len))| {
                    (first, first | (u128::MAX.checked_shr(u32::from(len)).unwrap_or(0)), posting(p))
                })
                .collect();
            let t4 = RangeTable::build(nets4.clone());
            let t6 = RangeTable::build(nets6.clone());
            if t4.intervals() >= PACKED_MIN {
                proptest::prop_assert!(t4.is_packed());
            }
            fn scan<A: Address>(nets: &[(A, A, u32)], a: A) -> Vec<u32> {
                // Innermost first: the enclosing networks of an address are nested, so the
                // narrower ones start later or end earlier.
                let mut holding: Vec<&(A, A, u32)> =
                    nets.iter().filter(|n| n.0 <= a && a <= n.1).collect();
                holding.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
                holding.into_iter().map(|n| n.2).collect()
            }
            let mut probes4: Vec<u32> = (0..1_500).map(|_| next() as u32).collect();
            let mut probes6: Vec<u128> = (0..500).map(|_| (u128::from(next()) << 64) | u128::from(next())).collect();
            for &(first, last, _) in nets4.iter().step_by(1 + nets4.len() / 700) {
                probes4.extend([first, last, first.wrapping_sub(1), last.wrapping_add(1)]);
            }
            for &(first, last, _) in nets6.iter().step_by(1 + nets6.len() / 300) {
                probes6.extend([first, last, first.wrapping_sub(1), last.wrapping_add(1)]);
            }
            probes4.extend([0, u32::MAX]);
            probes6.extend([0, u128::MAX]);
            for a in probes4 {
                t4.prefetch(a);
                proptest::prop_assert_eq!(chain(&t4, a), scan(&nets4, a), "{:#x}", a);
            }
            for a in probes6 {
                t6.prefetch(a);
                proptest::prop_assert_eq!(chain(&t6, a), scan(&nets6, a), "{:#x}", a);
            }
        }
    }
}

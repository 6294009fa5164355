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
//! The search is kept short by a first level: for IPv4 a direct table on the top 16 to 22 bits
//! of the address (sized so that a block holds about one interval; built only for large
//! tables), for IPv6 a fence array holding every 32nd interval start, small enough to stay in
//! cache.

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

/// Intervals smaller than this are searched without a first level.
const FIRST_LEVEL_MIN: usize = 512;
/// In a direct-table entry: the whole block lies in an interval no network covers.
const UNCOVERED: u32 = 1 << 31;
/// In a direct-table entry: the interval index.
const INTERVAL: u32 = UNCOVERED - 1;
/// One fence every this many intervals.
const FENCE_STRIDE: usize = 32;

#[derive(Debug, Clone)]
enum FirstLevel<A> {
    None,
    /// `table[h]` = the interval holding the first address whose top `bits` bits are `h`;
    /// `table[1 << bits]` = the last interval. `bits` grows with the table (16 to 22) so that a
    /// block holds about one interval and the search reads one cache line. An entry with
    /// [`UNCOVERED`] set marks a block that lies inside one interval no network covers: the
    /// lookup answers from the table alone, without reading an interval.
    Direct {
        bits: u32,
        table: Vec<u32>,
    },
    /// `fences[j]` = `starts[j * FENCE_STRIDE]`.
    Fences(Vec<A>),
}

/// The interval table of one address signal and family.
#[derive(Debug, Clone)]
pub(crate) struct RangeTable<A> {
    intervals: Vec<Interval<A>>,
    nodes: Vec<Node>,
    first: FirstLevel<A>,
}

impl<A: Address> Default for RangeTable<A> {
    fn default() -> Self {
        Self::build(Vec::new())
    }
}

impl<A: Address> RangeTable<A> {
    /// Builds the table from distinct networks `(first address, last address, posting)`.
    /// Networks must be distinct and laminar (CIDR blocks always are).
    pub(crate) fn build(mut nets: Vec<(A, A, u32)>) -> Self {
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

        let first = if starts.len() < FIRST_LEVEL_MIN {
            FirstLevel::None
        } else if A::DIRECT16 && starts.len() <= INTERVAL as usize {
            let bits = (usize::BITS - starts.len().leading_zeros()).clamp(16, 22);
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

        let intervals = starts
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
            intervals,
            nodes,
            first,
        }
    }

    /// The posting of the innermost network holding `address` and that network's enclosing
    /// network (each `NONE` when there is none).
    #[inline]
    pub(crate) fn innermost(&self, address: A) -> (u32, u32) {
        let (lo, hi) = match &self.first {
            FirstLevel::None => (0, self.intervals.len() - 1),
            FirstLevel::Direct { bits, table } => {
                let high = address.top(*bits);
                let entry = table[high];
                if entry & UNCOVERED != 0 {
                    return (NONE, NONE);
                }
                (entry as usize, (table[high + 1] & INTERVAL) as usize)
            }
            FirstLevel::Fences(fences) => {
                let j = partition_point(fences, |&f| f <= address).saturating_sub(1);
                let lo = j * FENCE_STRIDE;
                (lo, (lo + FENCE_STRIDE).min(self.intervals.len() - 1))
            }
        };
        let index = lo + partition_point(&self.intervals[lo + 1..=hi], |i| i.start <= address);
        let interval = self.intervals[index];
        (interval.posting, interval.parent)
    }

    /// The network node `index`.
    #[inline]
    pub(crate) fn node(&self, index: u32) -> Node {
        self.nodes[index as usize]
    }

    pub(crate) fn networks(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn intervals(&self) -> usize {
        self.intervals.len()
    }

    pub(crate) fn has_first_level(&self) -> bool {
        !matches!(self.first, FirstLevel::None)
    }

    pub(crate) fn bytes(&self) -> usize {
        let first = match &self.first {
            FirstLevel::None => 0,
            FirstLevel::Direct { table, .. } => table.capacity() * 4,
            FirstLevel::Fences(f) => f.capacity() * std::mem::size_of::<A>(),
        };
        self.intervals.capacity() * std::mem::size_of::<Interval<A>>()
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // 70,000 distinct /24 networks: about 140,000 intervals, an 18-bit direct table.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut nets = std::collections::HashMap::new();
        while nets.len() < 70_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let first = ((state >> 32) as u32) & 0xffff_ff00;
            let next = nets.len() as u32;
            nets.entry(first).or_insert(next);
        }
        let table = RangeTable::build(
            nets.iter()
                .map(|(&first, &p)| (first, first | 0xff, p))
                .collect(),
        );
        assert!(matches!(table.first, FirstLevel::Direct { bits: 18, .. }));
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

    #[test]
    fn first_levels_agree_with_a_linear_scan() {
        // Enough networks for the direct table (IPv4) and the fences (IPv6).
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
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
            let a6 = if next() % 2 == 0 {
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
}

//! Disjoint-interval tables over the address space.
//!
//! CIDR blocks never partially overlap: two blocks are either disjoint or one contains the
//! other. So the distinct networks of a signal form a forest, and the address space splits into
//! elementary intervals, each covered by one innermost network (or none). A lookup finds the
//! interval by binary search and returns that network; its enclosing networks follow through
//! parent links (at most 32 for IPv4, 128 for IPv6; in real lists one or two).
//!
//! The search is kept short by a first level: for IPv4 a direct table on the top 16 bits of the
//! address (65,537 entries, built only for large tables), for IPv6 a fence array holding every
//! 32nd interval start, small enough to stay in cache.

/// Marks "no network".
pub(crate) const NONE: u32 = u32::MAX;

/// An address as an unsigned integer.
pub(crate) trait Address: Copy + Ord + Default + std::fmt::Debug {
    /// Whether a direct table on the top 16 bits is worth building (IPv4).
    const DIRECT16: bool;
    fn successor(self) -> Option<Self>;
    fn top16(self) -> usize;
    fn from_top16(high: usize) -> Self;
}

impl Address for u32 {
    const DIRECT16: bool = true;
    #[inline]
    fn successor(self) -> Option<Self> {
        self.checked_add(1)
    }
    #[inline]
    fn top16(self) -> usize {
        (self >> 16) as usize
    }
    #[inline]
    fn from_top16(high: usize) -> Self {
        (high as u32) << 16
    }
}

impl Address for u128 {
    const DIRECT16: bool = false;
    #[inline]
    fn successor(self) -> Option<Self> {
        self.checked_add(1)
    }
    #[inline]
    fn top16(self) -> usize {
        (self >> 112) as usize
    }
    #[inline]
    fn from_top16(high: usize) -> Self {
        (high as u128) << 112
    }
}

/// One distinct network: its posting and the network that encloses it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    pub(crate) posting: u32,
    pub(crate) parent: u32,
}

/// Intervals smaller than this are searched without a first level.
const FIRST_LEVEL_MIN: usize = 512;
/// One fence every this many intervals.
const FENCE_STRIDE: usize = 32;

#[derive(Debug, Clone)]
enum FirstLevel<A> {
    None,
    /// `direct[h]` = the interval holding `h << 16`; `direct[65536]` = the last interval.
    Direct16(Vec<u32>),
    /// `fences[j]` = `starts[j * FENCE_STRIDE]`.
    Fences(Vec<A>),
}

/// The interval table of one address signal and family.
#[derive(Debug, Clone)]
pub(crate) struct RangeTable<A> {
    starts: Vec<A>,
    innermost: Vec<u32>,
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
        // Outer networks first among those with the same start.
        nets.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut starts = vec![A::default()];
        let mut innermost = vec![NONE];
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
        } else if A::DIRECT16 {
            let mut direct = Vec::with_capacity(65_537);
            let mut at = 0usize;
            for high in 0..65_536usize {
                let block = A::from_top16(high);
                while at + 1 < starts.len() && starts[at + 1] <= block {
                    at += 1;
                }
                direct.push(at as u32);
            }
            direct.push((starts.len() - 1) as u32);
            FirstLevel::Direct16(direct)
        } else {
            FirstLevel::Fences(starts.iter().step_by(FENCE_STRIDE).copied().collect())
        };

        let mut table = Self {
            starts,
            innermost,
            nodes,
            first,
        };
        table.starts.shrink_to_fit();
        table.innermost.shrink_to_fit();
        table
    }

    /// The innermost network holding `address`, or `NONE`.
    #[inline]
    pub(crate) fn innermost(&self, address: A) -> u32 {
        let (lo, hi) = match &self.first {
            FirstLevel::None => (0, self.starts.len() - 1),
            FirstLevel::Direct16(direct) => {
                let high = address.top16();
                (direct[high] as usize, direct[high + 1] as usize)
            }
            FirstLevel::Fences(fences) => {
                let j = fences.partition_point(|&f| f <= address).saturating_sub(1);
                let lo = j * FENCE_STRIDE;
                (lo, (lo + FENCE_STRIDE).min(self.starts.len() - 1))
            }
        };
        let index = lo + self.starts[lo + 1..=hi].partition_point(|&s| s <= address);
        self.innermost[index]
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
        self.starts.len()
    }

    pub(crate) fn has_first_level(&self) -> bool {
        !matches!(self.first, FirstLevel::None)
    }

    pub(crate) fn bytes(&self) -> usize {
        let first = match &self.first {
            FirstLevel::None => 0,
            FirstLevel::Direct16(d) => d.capacity() * 4,
            FirstLevel::Fences(f) => f.capacity() * std::mem::size_of::<A>(),
        };
        self.starts.capacity() * std::mem::size_of::<A>()
            + self.innermost.capacity() * 4
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + first
    }
}

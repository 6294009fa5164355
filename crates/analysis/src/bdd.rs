//! Reduced ordered binary decision diagrams, with one shared unique table and an operation
//! cache: just what the analysis needs (sets of atom ranges and products of them, the
//! difference of two diagrams).
//!
//! The analysis builds a diagram only for the questions its tables and points leave (see the
//! crate documentation): a box, cut to the atoms that matter, minus the few rules of two
//! signals or more that meet it. A first design kept the whole undecided region as one
//! diagram, updated rule by rule; it was exact but slow (every update rebuilds the nodes above
//! the signal the rule constrains, and independent signals make the region wide at every
//! level: 0.8 s at 250 rules where the tables take 0.03 s), which is why diagrams are now
//! local and small.
//!
//! Why by hand: `biodivine-lib-bdd` keeps each diagram in its own vector (every operation
//! copies its operands, with no table shared across operations), and `oxidd` (shared manager,
//! caches, complement edges) needs a newer Rust than the workspace's (1.91 against 1.88) and
//! brings a dozen crates and a thread pool, for what is here under three hundred lines with a
//! unit test against explicit sets. Nodes are never freed: a manager lives for one thread of
//! one analysis and is started afresh past two million nodes.
//!
//! Nodes are `u32` indexes: `FALSE` (0) and `TRUE` (1) are the terminals. Variables are
//! numbered from the root down (`0` first); the terminals' variable is `u32::MAX`.
//!
//! Work is counted in *steps* (one for each operation call that gets past its trivial cases:
//! a cache look-up, perhaps a recursion and a node): the analysis's budget is mostly these
//! steps (see `Budget` in the crate root). Past [`Manager::limit_steps`], or when the analysis
//! is interrupted (checked every [`CHECK_EVERY`] steps), operations stop as they do past the
//! node budget.

use crate::budget::Interrupt;

/// A diagram: an index into the manager's nodes.
pub(crate) type Bdd = u32;

/// The empty set.
pub(crate) const FALSE: Bdd = 0;
/// Every point.
pub(crate) const TRUE: Bdd = 1;

const TERMINAL_VAR: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    var: u32,
    lo: Bdd,
    hi: Bdd,
}

/// Operations in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Op {
    AndNot = 2,
    #[cfg(test)]
    And = 1,
    #[cfg(test)]
    Meets = 3,
}

#[derive(Debug, Clone, Copy, Default)]
struct CacheEntry {
    op: u32,
    f: u32,
    g: u32,
    result: u32,
}

/// How often (in steps) an operation looks at the analysis's [`Interrupt`].
const CHECK_EVERY: u64 = 1 << 10;

/// Why operations stopped (see [`Manager::exhausted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exhausted {
    /// Past the node budget of [`Manager::limit`]: the question is too complex.
    Nodes,
    /// Past the steps of [`Manager::limit_steps`], or interrupted: the analysis's budget.
    Work,
}

/// The nodes, their unique table and the operation cache.
pub(crate) struct Manager {
    /// Past this many nodes, operations stop and answer nonsense (see [`Manager::limit`]).
    budget: usize,
    exhausted: Option<Exhausted>,
    /// Steps taken (see the module docs), and the most it may take.
    steps: u64,
    max_steps: u64,
    interrupt: Option<std::sync::Arc<Interrupt>>,
    nodes: Vec<Node>,
    /// Open addressing: node indexes (0 = empty slot), hashed by `(var, lo, hi)`.
    unique: Vec<u32>,
    cache: Vec<CacheEntry>,
}

fn hash3(a: u32, b: u32, c: u32) -> u64 {
    let x = (u64::from(a) << 32 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x ^ (x >> 29) ^ u64::from(c)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

const CACHE_BITS: u32 = 18;

impl Manager {
    pub(crate) fn new() -> Self {
        let terminal = Node {
            var: TERMINAL_VAR,
            lo: 0,
            hi: 0,
        };
        Manager {
            budget: usize::MAX,
            exhausted: None,
            steps: 0,
            max_steps: u64::MAX,
            interrupt: None,
            nodes: vec![terminal, terminal],
            unique: vec![0; 1 << 10],
            cache: vec![CacheEntry::default(); 1 << 10],
        }
    }

    /// A manager whose operations look at `interrupt` every [`CHECK_EVERY`] steps.
    pub(crate) fn with_interrupt(interrupt: std::sync::Arc<Interrupt>) -> Self {
        Manager {
            interrupt: Some(interrupt),
            ..Manager::new()
        }
    }

    /// Drops every node and the cache (the step count and its limit stay).
    pub(crate) fn clear(&mut self) {
        let fresh = Manager::new();
        self.nodes = fresh.nodes;
        self.unique = fresh.unique;
        self.cache = fresh.cache;
        self.exhausted = None;
    }

    /// How many nodes exist (terminals included).
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Steps taken so far (see the module docs).
    pub(crate) fn steps(&self) -> u64 {
        self.steps
    }

    /// Lets the manager make at most `extra` more nodes: past them every operation answers
    /// `FALSE`, whatever the truth, until the next `limit`; [`Manager::exhausted`] says so.
    /// Nothing computed past the budget is remembered.
    pub(crate) fn limit(&mut self, extra: usize) {
        self.budget = self.nodes.len().saturating_add(extra);
        self.exhausted = None;
    }

    /// Lets the manager take at most `extra` more steps (until the next call), past which
    /// operations stop as past the node budget ([`Exhausted::Work`]).
    pub(crate) fn limit_steps(&mut self, extra: u64) {
        self.max_steps = self.steps.saturating_add(extra);
    }

    /// Whether (and why) operations stopped since the last [`Manager::limit`] (the results
    /// since are meaningless).
    pub(crate) fn exhausted(&self) -> Option<Exhausted> {
        self.exhausted
    }

    /// One step: `false` (and operations stop) past the step limit or when interrupted.
    fn step(&mut self) -> bool {
        self.steps += 1;
        let interrupted = self.steps.is_multiple_of(CHECK_EVERY)
            && self.interrupt.as_ref().is_some_and(|i| i.check());
        if self.steps > self.max_steps || interrupted {
            self.exhausted = Some(Exhausted::Work);
            return false;
        }
        true
    }

    /// The node `if var then hi else lo`, reduced and shared.
    pub(crate) fn node(&mut self, var: u32, lo: Bdd, hi: Bdd) -> Bdd {
        if self.exhausted.is_some() {
            return FALSE;
        }
        if lo == hi {
            return lo;
        }
        if self.nodes.len() >= self.budget {
            self.exhausted = Some(Exhausted::Nodes);
            return FALSE;
        }
        let mask = self.unique.len() - 1;
        let mut slot = hash3(var, lo, hi) as usize & mask;
        loop {
            let at = self.unique[slot];
            if at == 0 {
                break;
            }
            let n = self.nodes[at as usize];
            if n.var == var && n.lo == lo && n.hi == hi {
                return at;
            }
            slot = (slot + 1) & mask;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node { var, lo, hi });
        self.unique[slot] = id;
        if self.nodes.len() * 2 > self.unique.len() {
            self.grow();
        }
        id
    }

    fn grow(&mut self) {
        let size = self.unique.len() * 2;
        let mask = size - 1;
        let mut table = vec![0u32; size];
        for (id, n) in self.nodes.iter().enumerate().skip(2) {
            let mut slot = hash3(n.var, n.lo, n.hi) as usize & mask;
            while table[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            table[slot] = id as u32;
        }
        self.unique = table;
        // The cache grows with the nodes (up to its bound): most managers stay small.
        if self.cache.len() < size.min(1 << CACHE_BITS) {
            self.cache = vec![CacheEntry::default(); size.min(1 << CACHE_BITS)];
        }
    }

    fn cached(&self, op: Op, f: Bdd, g: Bdd) -> (usize, Option<Bdd>) {
        let slot = hash3(op as u32, f, g) as usize & (self.cache.len() - 1);
        let e = self.cache[slot];
        let hit = (e.op == op as u32 && e.f == f && e.g == g).then_some(e.result);
        (slot, hit)
    }

    fn remember(&mut self, slot: usize, op: Op, f: Bdd, g: Bdd, result: Bdd) {
        if self.exhausted.is_some() {
            return;
        }
        self.cache[slot] = CacheEntry {
            op: op as u32,
            f,
            g,
            result,
        };
    }

    /// The cofactors of `f` and `g` on the topmost of their variables.
    fn split(&self, f: Bdd, g: Bdd) -> (u32, (Bdd, Bdd), (Bdd, Bdd)) {
        let (nf, ng) = (self.nodes[f as usize], self.nodes[g as usize]);
        let var = nf.var.min(ng.var);
        let cf = if nf.var == var {
            (nf.lo, nf.hi)
        } else {
            (f, f)
        };
        let cg = if ng.var == var {
            (ng.lo, ng.hi)
        } else {
            (g, g)
        };
        (var, cf, cg)
    }

    /// `f ∧ g`.
    #[cfg(test)]
    pub(crate) fn and(&mut self, f: Bdd, g: Bdd) -> Bdd {
        if f == FALSE || g == FALSE {
            return FALSE;
        }
        if f == TRUE || f == g {
            return g;
        }
        if g == TRUE {
            return f;
        }
        let (f, g) = if f < g { (f, g) } else { (g, f) };
        let (slot, hit) = self.cached(Op::And, f, g);
        if let Some(r) = hit {
            return r;
        }
        let (var, (f0, f1), (g0, g1)) = self.split(f, g);
        let lo = self.and(f0, g0);
        let hi = self.and(f1, g1);
        let r = self.node(var, lo, hi);
        self.remember(slot, Op::And, f, g, r);
        r
    }

    /// `f ∧ ¬g`.
    pub(crate) fn and_not(&mut self, f: Bdd, g: Bdd) -> Bdd {
        if self.exhausted.is_some() || f == FALSE || g == TRUE || f == g {
            return FALSE;
        }
        if g == FALSE {
            return f;
        }
        if !self.step() {
            return FALSE;
        }
        let (slot, hit) = self.cached(Op::AndNot, f, g);
        if let Some(r) = hit {
            return r;
        }
        let (var, (f0, f1), (g0, g1)) = self.split(f, g);
        let lo = self.and_not(f0, g0);
        let hi = self.and_not(f1, g1);
        let r = self.node(var, lo, hi);
        self.remember(slot, Op::AndNot, f, g, r);
        r
    }

    /// Whether `f ∧ g` has a point (without building it).
    #[cfg(test)]
    pub(crate) fn meets(&mut self, f: Bdd, g: Bdd) -> bool {
        if f == FALSE || g == FALSE {
            return false;
        }
        if f == TRUE || g == TRUE || f == g {
            return true;
        }
        let (f, g) = if f < g { (f, g) } else { (g, f) };
        let (slot, hit) = self.cached(Op::Meets, f, g);
        if let Some(r) = hit {
            return r == TRUE;
        }
        let (_, (f0, f1), (g0, g1)) = self.split(f, g);
        let r = self.meets(f0, g0) || self.meets(f1, g1);
        self.remember(slot, Op::Meets, f, g, Bdd::from(r));
        r
    }

    /// Whether the point (`bit(var)` answers each variable) is in `f`.
    #[cfg(test)]
    pub(crate) fn contains(&self, mut f: Bdd, bit: impl Fn(u32) -> bool) -> bool {
        while f > TRUE {
            let n = self.nodes[f as usize];
            f = if bit(n.var) { n.hi } else { n.lo };
        }
        f == TRUE
    }

    /// The values `x` of a `bits`-bit unsigned number (variables `first..first + bits`, most
    /// significant first) with `x` in one of `ranges` (sorted, disjoint, half-open), followed by
    /// `then` (the set is `{x in ranges} ∧ then`, `then` on later variables).
    pub(crate) fn ranges(
        &mut self,
        first: u32,
        bits: u32,
        ranges: &[(u64, u64)],
        then: Bdd,
    ) -> Bdd {
        self.ranges_in(first, bits, 0, ranges, then)
    }

    /// `ranges` clipped to the block `[base, base + 2^bits)` of the variables from `var` on.
    fn ranges_in(
        &mut self,
        var: u32,
        bits: u32,
        base: u64,
        ranges: &[(u64, u64)],
        then: Bdd,
    ) -> Bdd {
        let end = base + (1u64 << bits);
        // Only the ranges that meet the block.
        let from = ranges.partition_point(|r| r.1 <= base);
        let to = ranges.partition_point(|r| r.0 < end);
        let ranges = &ranges[from..to.max(from)];
        match ranges {
            [] => FALSE,
            [(lo, hi)] if *lo <= base && *hi >= end => then,
            _ if !self.step() => FALSE,
            _ => {
                let half = base + (1u64 << (bits - 1));
                let lo = self.ranges_in(var + 1, bits - 1, base, ranges, then);
                let hi = self.ranges_in(var + 1, bits - 1, half, ranges, then);
                self.node(var, lo, hi)
            }
        }
    }

    /// The variable of a non-terminal node (for tests).
    #[cfg(test)]
    fn top(&self, f: Bdd) -> u32 {
        self.nodes[f as usize].var
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every 4-bit value in the set, by evaluation.
    fn values(m: &Manager, f: Bdd) -> Vec<u64> {
        (0..16u64)
            .filter(|&x| m.contains(f, |v| (x >> (3 - v)) & 1 == 1))
            .collect()
    }

    #[test]
    fn operations_agree_with_sets() {
        let mut m = Manager::new();
        let mut seed = 0x1234_5678_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut random = |m: &mut Manager| {
            let mut ranges = Vec::new();
            let mut at = 0;
            while at < 16 {
                let lo = at + next() % 5;
                let hi = (lo + 1 + next() % 4).min(16);
                if lo < 16 {
                    ranges.push((lo, hi));
                }
                at = hi + 1;
            }
            let set: Vec<u64> = ranges.iter().flat_map(|&(a, b)| a..b).collect();
            (m.ranges(0, 4, &ranges, TRUE), set)
        };
        for _ in 0..200 {
            let (f, fs) = random(&mut m);
            let (g, gs) = random(&mut m);
            assert_eq!(values(&m, f), fs);
            let and: Vec<u64> = fs.iter().copied().filter(|x| gs.contains(x)).collect();
            let diff: Vec<u64> = fs.iter().copied().filter(|x| !gs.contains(x)).collect();
            let fg = m.and(f, g);
            assert_eq!(values(&m, fg), and);
            let f_g = m.and_not(f, g);
            assert_eq!(values(&m, f_g), diff);
            assert_eq!(m.meets(f, g), !and.is_empty());
            // Canonical: equal sets are the same node.
            let again = m.ranges(
                0,
                4,
                &and.iter().map(|&x| (x, x + 1)).collect::<Vec<_>>(),
                TRUE,
            );
            assert_eq!(again, fg);
        }
        let f = m.ranges(0, 4, &[(3, 9)], TRUE);
        assert_eq!(m.top(f), 0);
    }
}

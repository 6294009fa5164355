//! The analysis: every question is "does this box hold a request that no earlier terminal
//! rule decides?", answered through a split of the earlier rules.
//!
//! - A rule that constrains one signal (besides the scope) decides whole slices of the
//!   request space: for each signal, scope and atom, the first such rule holding the atom is
//!   recorded (`Firsts`). A box minus every earlier one-signal rule is again a box (each
//!   signal's atoms whose first rule comes later), and whether it is empty is a range-maximum
//!   query per signal.
//! - The other rules (two signals or more, or none) are fewer: a request of that box that none
//!   of them holds is looked for (a *point*: in each signal the atom decided latest, moved out
//!   of the rule in the way, a few times); when none is found, the box is cut by those that
//!   differ from it in one signal, built as a decision diagram over what the others tell
//!   apart, and they are subtracted from it (exact).
//!
//! Each rule and pair of rules is asked this once or twice, so the work grows with the number
//! of pairs of rules that meet (the conflicts are most of them), not with the size of the
//! undecided region.

use netacl_model::{Action, NetworkAcl, RuleSet};

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::bdd::{Bdd, Exhausted, Manager, FALSE, TRUE};
use crate::budget::{Budget, Interrupt, Stopped, WorkDone};
use crate::cells::{AtomSet, Cell, DIMS};
use crate::domain::{Domain, RuleCells, SCOPE};
use crate::witness::{contains, Point, Witnesses};
use crate::{Analysis, Finding, FindingKind, Undecided};

/// A set on one dimension with at most this many atoms is indexed atom by atom.
const SMALL: u64 = 64;

/// How many request scopes there are (the atoms of `SCOPE`).
const SCOPES: usize = 3;

/// The two ways a question is asked. `POSSIBLY`: over the requests a rule possibly matches
/// (its `over` box), minus what earlier rules surely decide (their `under` boxes): an empty
/// answer proves the rule decides nothing there. `SURELY`: over its `under` box minus the
/// earlier `over` boxes: a request left proves the rule decides it. Both are the same for
/// exact rules.
const POSSIBLY: usize = 0;
const SURELY: usize = 1;

/// "No rule": later than every rule.
const NEVER: u32 = u32::MAX;

struct Rule<'a> {
    acl: &'a NetworkAcl,
    cells: RuleCells,
    /// Its id, its action's class (equal for equal actions) and whether it is terminal.
    id: String,
    class: u32,
    terminal: bool,
    /// The signals its `over` box constrains (bit `d`), and its scope atoms (bit `s`).
    over_signals: u16,
    over_scopes: u8,
    /// Per signal, the bits of its `over` box's atoms ([`set_signature`]): boxes whose bits do
    /// not meet share no atom.
    small: [u64; DIMS],
    /// The signals its query box constrains in each mode (bit `d`).
    signals: [u16; 2],
}

impl<'a> Rule<'a> {
    fn new(acl: &'a NetworkAcl, cells: RuleCells, class: u32, universe: &[u32; DIMS]) -> Self {
        let (mut over_signals, mut over_scopes) = (0, 0);
        let mut small = [u64::MAX; DIMS];
        if let Some(cell) = &cells.over {
            over_signals = constrained(cell).fold(0u16, |m, d| m | 1 << d);
            over_scopes = scopes(cell).fold(0u8, |m, s| m | 1 << s);
            for d in constrained(cell) {
                small[d] = set_signature(&cell.dims[d], universe[d]);
            }
        }
        let signals = [POSSIBLY, SURELY].map(|mode| {
            let cell = if mode == POSSIBLY {
                cells.over.as_ref()
            } else {
                cells.under.as_ref()
            };
            cell.map_or(0, |c| constrained(c).fold(0u16, |m, d| m | 1 << d))
        });
        Rule {
            acl,
            cells,
            id: acl.id.to_string(),
            class,
            terminal: acl.spec.rule.action().is_terminal(),
            over_signals,
            over_scopes,
            small,
            signals,
        }
    }

    /// Whether the two rules' `over` boxes meet (both present).
    fn meets(&self, other: &Rule<'_>) -> bool {
        if self.over_scopes & other.over_scopes == 0 {
            return false;
        }
        let (Some(a), Some(b)) = (&self.cells.over, &other.cells.over) else {
            return false;
        };
        let mut common = self.over_signals & other.over_signals;
        while common != 0 {
            let d = common.trailing_zeros() as usize;
            common &= common - 1;
            if self.small[d] & other.small[d] == 0 || !a.dims[d].intersects(&b.dims[d]) {
                return false;
            }
        }
        true
    }
}

impl Rule<'_> {
    fn action(&self) -> &Action {
        self.acl.spec.rule.action()
    }
    fn terminal(&self) -> bool {
        self.terminal
    }
    fn id(&self) -> String {
        self.id.clone()
    }
    /// The box questions are asked over in `mode`.
    fn query(&self, mode: usize) -> Option<&Cell> {
        if mode == POSSIBLY {
            self.cells.over.as_ref()
        } else {
            self.cells.under.as_ref()
        }
    }
    /// The box the rule decides in `mode`, as an earlier rule.
    fn decides(&self, mode: usize) -> Option<&Cell> {
        self.query(1 - mode)
    }
}

/// The bit of an atom in a signature of a set of atoms.
fn signature_bit(atom: u32) -> u32 {
    (u64::from(atom).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as u32
}

/// The signals (not the scope) a box constrains.
fn constrained(cell: &Cell) -> impl Iterator<Item = usize> + '_ {
    (0..DIMS).filter(move |&d| d != SCOPE && cell.dims[d] != AtomSet::Full)
}

/// The scope atoms of a box.
fn scopes(cell: &Cell) -> impl Iterator<Item = usize> + '_ {
    cell.dims[SCOPE]
        .ranges(SCOPES as u32)
        .into_iter()
        .flat_map(|(lo, hi)| lo as usize..hi as usize)
}

/// For one signal and scope: the first one-signal rule holding each atom, with a
/// range-maximum structure (blocks of 64 atoms, a sparse table over the blocks).
struct Firsts {
    first: Vec<u32>,
    /// The atom decided latest over the whole dimension, and its first rule.
    whole: Option<(u32, u32)>,
    /// `table[j][b]`: the block of largest maximum among blocks `b..b + 2^j`.
    table: Vec<Vec<u32>>,
    block_max: Vec<u32>,
}

const BLOCK: usize = 64;

impl Firsts {
    fn new(first: Vec<u32>) -> Self {
        let block_max: Vec<u32> = first
            .chunks(BLOCK)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect();
        let n = block_max.len();
        let mut table: Vec<Vec<u32>> = vec![(0..n as u32).collect()];
        let mut width = 1;
        while width * 2 <= n {
            let prev = &table[table.len() - 1];
            let next: Vec<u32> = (0..=n - width * 2)
                .map(|b| {
                    let (x, y) = (prev[b], prev[b + width]);
                    if block_max[y as usize] > block_max[x as usize] {
                        y
                    } else {
                        x
                    }
                })
                .collect();
            table.push(next);
            width *= 2;
        }
        let mut firsts = Firsts {
            first,
            whole: None,
            table,
            block_max,
        };
        let n = firsts.first.len() as u32;
        if n > 0 {
            firsts.whole = firsts.best_set(&[(0, n)]);
        }
        firsts
    }

    fn scan(&self, lo: usize, hi: usize, best: &mut (u32, u32)) {
        for (a, &v) in self.first[lo..hi].iter().enumerate() {
            if best.0 == u32::MAX || v > best.1 {
                *best = ((lo + a) as u32, v);
            }
        }
    }

    /// The atom decided latest in `lo..hi` (not empty), and its first rule.
    fn best(&self, lo: u32, hi: u32, best: &mut (u32, u32)) {
        let (lo, hi) = (lo as usize, hi as usize);
        let (bl, bh) = (lo / BLOCK, (hi - 1) / BLOCK);
        if bl == bh {
            return self.scan(lo, hi, best);
        }
        self.scan(lo, (bl + 1) * BLOCK, best);
        self.scan(bh * BLOCK, hi, best);
        if bl + 1 < bh {
            let (from, to) = (bl + 1, bh);
            let k = (usize::BITS - 1 - (to - from).leading_zeros()) as usize;
            let x = self.table[k][from];
            let y = self.table[k][to - (1 << k)];
            let b = if self.block_max[y as usize] > self.block_max[x as usize] {
                y
            } else {
                x
            } as usize;
            if self.block_max[b] > best.1 || best.0 == u32::MAX {
                self.scan(b * BLOCK, (b + 1) * BLOCK, best);
            }
        }
    }

    /// The atom of `set` decided latest; `None` for an empty set.
    fn best_set(&self, ranges: &[(u32, u32)]) -> Option<(u32, u32)> {
        let mut best = (u32::MAX, 0);
        for &(lo, hi) in ranges {
            self.best(lo, hi, &mut best);
        }
        (best.0 != u32::MAX).then_some(best)
    }
}

/// Finds the rules whose boxes can meet a box: each rule is filed under one *anchor*
/// dimension, the one where its box is narrowest (by atom, when narrow enough; else in the
/// dimension's wide list); rules constrained nowhere but in scope are global.
struct Index {
    postings: Vec<Vec<Vec<u32>>>,
    wide: Vec<Vec<u32>>,
    anchored: Vec<Vec<u32>>,
    global: Vec<u32>,
}

/// A thread's marks for [`Index::query`].
struct Seen {
    marks: Vec<u32>,
    hits: Vec<u32>,
    stamp: u32,
}

impl Seen {
    fn new(n: usize) -> Self {
        Seen {
            marks: vec![0; n],
            hits: vec![0; n],
            stamp: 0,
        }
    }
}

impl Index {
    fn new(rules: &[Rule<'_>], universe: &[u32; DIMS]) -> Self {
        let mut index = Index {
            postings: universe
                .iter()
                .map(|&u| vec![Vec::new(); u as usize])
                .collect(),
            wide: vec![Vec::new(); DIMS],
            anchored: vec![Vec::new(); DIMS],
            global: Vec::new(),
        };
        for (ordinal, rule) in rules.iter().enumerate() {
            let ordinal = ordinal as u32;
            let Some(cell) = &rule.cells.over else {
                continue;
            };
            let anchor = constrained(cell).min_by_key(|&d| cell.dims[d].atoms(universe[d]));
            let Some(d) = anchor else {
                index.global.push(ordinal);
                continue;
            };
            index.anchored[d].push(ordinal);
            if cell.dims[d].atoms(universe[d]) <= SMALL {
                for (lo, hi) in cell.dims[d].ranges(universe[d]) {
                    for atom in lo..hi {
                        index.postings[d][atom as usize].push(ordinal);
                    }
                }
            } else {
                index.wide[d].push(ordinal);
            }
        }
        index
    }

    /// The ordinals (sorted, below `limit`, without `me`) of the rules whose `over` box meets
    /// `cell`; `cost` grows by the rules looked at.
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        seen: &mut Seen,
        me: usize,
        cell: &Cell,
        rules: &[Rule<'_>],
        universe: &[u32; DIMS],
        limit: usize,
        cost: &mut u64,
    ) -> Vec<usize> {
        // When the lists to visit hold about every rule, a plain scan is cheaper.
        let mut visits = self.global.len();
        for d in (0..DIMS).filter(|&d| d != SCOPE) {
            let set = &cell.dims[d];
            if *set != AtomSet::Full && set.atoms(universe[d]) <= SMALL {
                visits += self.wide[d].len();
                for (lo, hi) in set.ranges(universe[d]) {
                    visits += (lo..hi)
                        .map(|a| self.postings[d][a as usize].len())
                        .sum::<usize>();
                }
            } else {
                visits += self.anchored[d].len();
            }
        }
        *cost += visits.min(limit) as u64 + 1;
        if visits >= limit {
            let me_rule = &rules[me];
            return (0..limit)
                .filter(|&o| o != me && rules[o].meets(me_rule))
                .collect();
        }
        seen.stamp += 1;
        let stamp = seen.stamp;
        let mut out = Vec::new();
        let mut visit = |ordinal: u32, seen: &mut Seen| {
            let o = ordinal as usize;
            if o == me || o >= limit || seen.marks[o] == stamp {
                return;
            }
            seen.marks[o] = stamp;
            if rules[o].meets(&rules[me]) {
                seen.hits[o] = stamp;
                out.push(o);
            }
        };
        for &o in &self.global {
            visit(o, seen);
        }
        for d in (0..DIMS).filter(|&d| d != SCOPE) {
            let set = &cell.dims[d];
            if *set != AtomSet::Full && set.atoms(universe[d]) <= SMALL {
                for (lo, hi) in set.ranges(universe[d]) {
                    for atom in lo..hi {
                        for &o in &self.postings[d][atom as usize] {
                            visit(o, seen);
                        }
                    }
                }
                for &o in &self.wide[d] {
                    visit(o, seen);
                }
            } else {
                for &o in &self.anchored[d] {
                    visit(o, seen);
                }
            }
        }
        if out.len() * 16 > rules.len() {
            // Many: read them back in order from the marks rather than sort.
            out.clear();
            out.extend((0..limit).filter(|&o| seen.hits[o] == stamp));
        } else {
            out.sort_unstable();
        }
        out
    }
}

/// Where each dimension's atoms sit among the diagram's variables: dimension by dimension
/// (scope first, then the signals), each atom number in binary, most significant bit first.
struct Layout {
    first: [u32; DIMS],
    bits: [u32; DIMS],
}

impl Layout {
    fn new(universe: &[u32; DIMS]) -> Self {
        let mut first = [0; DIMS];
        let mut bits = [0; DIMS];
        let mut next = 0;
        for d in 0..DIMS {
            let b = (32 - (universe[d].max(2) - 1).leading_zeros()).max(1);
            first[d] = next;
            bits[d] = b;
            next += b;
        }
        Layout { first, bits }
    }

    /// The requests whose atom in each dimension `d` is in `sets(d)` (`None`: any).
    fn product(&self, m: &mut Manager, sets: impl Fn(usize) -> Option<Vec<(u64, u64)>>) -> Bdd {
        let mut acc = TRUE;
        for d in (0..DIMS).rev() {
            if let Some(ranges) = sets(d) {
                acc = m.ranges(self.first[d], self.bits[d], &ranges, acc);
            }
        }
        acc
    }

    fn cell(&self, m: &mut Manager, cell: &Cell) -> Bdd {
        self.product(m, |d| match &cell.dims[d] {
            AtomSet::Full => None,
            AtomSet::Ranges(r) => Some(
                r.iter()
                    .map(|&(lo, hi)| (u64::from(lo), u64::from(hi)))
                    .collect(),
            ),
        })
    }
}

/// The earlier rules of one mode that are not one-signal rules: each with its box.
struct Others {
    /// Ordinal and box, in evaluation order.
    rules: Vec<(u32, Cell)>,
    /// Their boxes, filed for point look-ups (positions in `rules`).
    witnesses: Witnesses,
    /// Their boxes' signatures, to pass over those that surely miss a box quickly.
    signatures: Vec<Signature>,
}

/// A box in a few words: its scope atoms and, per signal, its atoms as bits (signals of at
/// most 64 atoms) or a signature of them (at most 256 atoms; all ones otherwise). Boxes whose
/// signatures do not meet do not meet.
#[derive(Debug, Clone, Copy)]
struct Signature {
    scopes: u8,
    signals: [u64; DIMS],
}

impl Signature {
    fn of(cell: &Cell, universe: &[u32; DIMS]) -> Self {
        let mut signals = [u64::MAX; DIMS];
        for d in constrained(cell) {
            signals[d] = set_signature(&cell.dims[d], universe[d]);
        }
        Signature {
            scopes: scopes(cell).fold(0u8, |m, s| m | 1 << s),
            signals,
        }
    }

    fn may_meet(&self, other: &Signature) -> bool {
        self.scopes & other.scopes != 0
            && self
                .signals
                .iter()
                .zip(&other.signals)
                .all(|(a, b)| a & b != 0)
    }
}

/// The bits of a set of atoms of a signal of `universe` atoms (see [`Signature`]).
fn set_signature(set: &AtomSet, universe: u32) -> u64 {
    if *set == AtomSet::Full {
        return u64::MAX;
    }
    let ranges = set.ranges(universe);
    if universe <= 64 {
        ranges
            .iter()
            .flat_map(|&(lo, hi)| lo..hi)
            .fold(0, |m, a| m | 1 << a)
    } else if set.atoms(universe) <= 256 {
        ranges
            .iter()
            .flat_map(|&(lo, hi)| lo..hi)
            .fold(0, |m, a| m | 1 << signature_bit(a))
    } else {
        u64::MAX
    }
}

/// How many times a point moves out of a rule in its way before the diagram is built.
const POINT_TRIES: usize = 8;

/// How many times a point moves to show that a rule is not redundant.
const REDUNDANCY_TRIES: usize = 16;

/// Everything the questions read (shared by the threads).
struct Shared<'r, 'a> {
    /// Whether points are looked for before diagrams are built (always, but in a test that
    /// checks the diagrams alone give the same answers).
    points: bool,
    /// The most nodes one question's diagram may make ([`MAX_DIAGRAM_NODES`]; less in a
    /// test).
    budget: usize,
    rules: &'r [Rule<'a>],
    universe: [u32; DIMS],
    layout: Layout,
    /// `firsts[mode][d][s]`.
    firsts: [Vec<Vec<Firsts>>; 2],
    others: [Others; 2],
    /// Per rule and mode, per signal `d` and scope `s` (at `d * SCOPES + s`): the
    /// latest-decided atom of its query box's set there and its first rule (atom `u32::MAX`:
    /// not constrained, or empty).
    best: Vec<[[(u32, u32); DIMS * SCOPES]; 2]>,
    /// Per mode and scope: the point of every signal's latest-decided atom, and the least
    /// of their first rules.
    base: [[(Point, u32); SCOPES]; 2],
    /// The analysis's deadline and cancellation flag.
    interrupt: Arc<Interrupt>,
    /// Work units done by every thread (see [`Space::used`]), and the caller's counter.
    units: AtomicU64,
    progress: Option<Arc<AtomicU64>>,
}

impl<'r, 'a> Shared<'r, 'a> {
    fn new(rules: &'r [Rule<'a>], universe: [u32; DIMS]) -> Self {
        let firsts = [POSSIBLY, SURELY].map(|mode| {
            (0..DIMS)
                .map(|d| {
                    (0..SCOPES)
                        .map(|s| {
                            if d == SCOPE {
                                return Firsts::new(Vec::new());
                            }
                            let u = universe[d] as usize;
                            let mut first = vec![NEVER; u];
                            // Next atom not yet given a first rule, path-compressed.
                            let mut next: Vec<u32> = (0..=u as u32).collect();
                            fn find(next: &mut [u32], x: u32) -> u32 {
                                let mut root = x;
                                while next[root as usize] != root {
                                    root = next[root as usize];
                                }
                                let mut y = x;
                                while next[y as usize] != root {
                                    let up = next[y as usize];
                                    next[y as usize] = root;
                                    y = up;
                                }
                                root
                            }
                            for (k, rule) in rules.iter().enumerate() {
                                if !rule.terminal() {
                                    continue;
                                }
                                let Some(cell) = rule.decides(mode) else {
                                    continue;
                                };
                                let mut dims = constrained(cell);
                                if dims.next() != Some(d) || dims.next().is_some() {
                                    continue;
                                }
                                if !scopes(cell).any(|x| x == s) {
                                    continue;
                                }
                                for (lo, hi) in cell.dims[d].ranges(universe[d]) {
                                    let mut a = find(&mut next, lo);
                                    while a < hi {
                                        first[a as usize] = k as u32;
                                        next[a as usize] = a + 1;
                                        a = find(&mut next, a + 1);
                                    }
                                }
                            }
                            Firsts::new(first)
                        })
                        .collect()
                })
                .collect()
        });
        let others = [POSSIBLY, SURELY].map(|mode| {
            let list: Vec<(u32, Cell)> = rules
                .iter()
                .enumerate()
                .filter(|(_, r)| r.terminal())
                .filter_map(|(k, r)| r.decides(mode).map(|c| (k as u32, c)))
                .filter(|(_, c)| constrained(c).count() != 1)
                .map(|(k, c)| (k, c.clone()))
                .collect();
            let witnesses = Witnesses::new(list.iter().map(|(_, c)| Some(c)), &universe);
            Others {
                signatures: list
                    .iter()
                    .map(|(_, c)| Signature::of(c, &universe))
                    .collect(),
                rules: list,
                witnesses,
            }
        });
        let mut space = Shared {
            points: true,
            budget: MAX_DIAGRAM_NODES,
            rules,
            universe,
            layout: Layout::new(&universe),
            firsts,
            others,
            best: Vec::new(),
            base: [[([0; DIMS], NEVER); SCOPES]; 2],
            interrupt: Arc::new(Interrupt::new(&Budget::unlimited())),
            units: AtomicU64::new(0),
            progress: None,
        };
        for mode in [POSSIBLY, SURELY] {
            for s in 0..SCOPES {
                let (point, least) = &mut space.base[mode][s];
                point[SCOPE] = s as u32;
                for d in (0..DIMS).filter(|&d| d != SCOPE) {
                    match space.firsts[mode][d][s].whole {
                        Some((atom, first)) => {
                            point[d] = atom;
                            *least = (*least).min(first);
                        }
                        None => *least = 0,
                    }
                }
            }
        }
        space.best = rules
            .iter()
            .map(|rule| {
                [POSSIBLY, SURELY].map(|mode| {
                    let mut out = [(u32::MAX, 0); DIMS * SCOPES];
                    let Some(cell) = rule.query(mode) else {
                        return out;
                    };
                    for d in constrained(cell) {
                        let ranges = cell.dims[d].ranges(universe[d]);
                        for s in scopes(cell) {
                            if let Some(best) = space.firsts[mode][d][s].best_set(&ranges) {
                                out[d * SCOPES + s] = best;
                            }
                        }
                    }
                    out
                })
            })
            .collect();
        space
    }

    /// The latest-decided atom of rule `r`'s query set on `d` in scope `s` (`None`: empty).
    fn rule_best(&self, mode: usize, r: usize, d: usize, s: usize) -> Option<(u32, u32)> {
        let best = self.best[r][mode][d * SCOPES + s];
        (best.0 != u32::MAX).then_some(best)
    }

    /// The first rule (position in `others`) before `k` holding `point`.
    fn blocker(&self, mode: usize, point: &Point, k: u32) -> Option<usize> {
        let others = &self.others[mode];
        let mut first: Option<usize> = None;
        others.witnesses.any_candidate(point, |o| {
            let (ordinal, cell) = &others.rules[o];
            if *ordinal < k && first.is_none_or(|f| o < f) && contains(cell, point) {
                first = Some(o);
            }
            false
        });
        first
    }

    /// A request of `cell` (one scope) that no one-signal rule before `k` decides (the start
    /// `point` is one) and no other rule before `k` holds.
    fn point_search(&self, mode: usize, cell: &Cell, point: Point, k: u32) -> Option<Point> {
        self.point_search_with(mode, cell, point, k, POINT_TRIES, |_| Ok(None))
    }

    /// Like [`Space::point_search`], and then `more` has its say about the point: `Ok(None)`
    /// takes it, `Ok(Some(cell))` moves it out of `cell`, `Err(())` gives up.
    fn point_search_with<'c>(
        &'c self,
        mode: usize,
        cell: &Cell,
        mut point: Point,
        k: u32,
        tries: usize,
        mut more: impl FnMut(&Point) -> Result<Option<&'c Cell>, ()>,
    ) -> Option<Point> {
        let mut cell = cell.clone();
        let s = point[SCOPE] as usize;
        for _ in 0..tries {
            let blocking = match self.blocker(mode, &point, k) {
                Some(o) => &self.others[mode].rules[o].1,
                None => match more(&point) {
                    Ok(None) => return Some(point),
                    Ok(Some(c)) => c,
                    Err(()) => return None,
                },
            };
            let mut moved = false;
            for d in constrained(blocking) {
                let u = self.universe[d];
                let Some(rest) = cell.dims[d].minus(&blocking.dims[d], u) else {
                    continue;
                };
                if let Some((atom, first)) = self.firsts[mode][d][s].best_set(&rest.ranges(u)) {
                    if first >= k {
                        point[d] = atom;
                        cell.dims[d] = rest;
                        moved = true;
                        break;
                    }
                }
            }
            if !moved {
                return None;
            }
        }
        None
    }
}

/// One thread's diagrams, over the shared tables, and the work of the rule it is on.
///
/// Each rule starts with an empty diagram manager ([`Space::begin`]), so what a rule's
/// questions cost (its work units: [`Space::used`]) depends on that rule alone, not on which
/// rules the thread answered before: the budget's cut falls at the same rule whatever the
/// threads do.
struct Space<'s, 'r, 'a> {
    shared: &'s Shared<'r, 'a>,
    m: Manager,
    /// The other rules' boxes as diagrams (per mode), built when first needed.
    diagrams: [Vec<Option<Bdd>>; 2],
    /// Whether a diagram outgrew its budget since the last [`Space::answer`].
    gave_up: bool,
    /// The current rule's work units outside the diagrams, its diagrams' steps when it
    /// began, and the most it may use.
    work: u64,
    steps_at_begin: u64,
    cap: u64,
    /// Whether the current rule's work ran out (or the analysis was interrupted): every
    /// question from then on is left open.
    out: bool,
}

impl<'s, 'r, 'a> Space<'s, 'r, 'a> {
    fn new(shared: &'s Shared<'r, 'a>) -> Self {
        Space {
            shared,
            m: Manager::with_interrupt(Arc::clone(&shared.interrupt)),
            diagrams: [POSSIBLY, SURELY].map(|mode| vec![None; shared.others[mode].rules.len()]),
            gave_up: false,
            work: 0,
            steps_at_begin: 0,
            cap: u64::MAX,
            out: false,
        }
    }

    /// Starts a rule's questions with at most `cap` work units (one is taken at once: every
    /// rule costs something).
    fn begin(&mut self, cap: u64) {
        if self.m.len() > 2 {
            self.clear_diagrams();
        }
        self.gave_up = false;
        self.work = 0;
        self.steps_at_begin = self.m.steps();
        self.cap = cap;
        self.m.limit_steps(cap);
        self.out = false;
        self.charge(1);
    }

    fn clear_diagrams(&mut self) {
        self.m.clear();
        for diagrams in &mut self.diagrams {
            diagrams.iter_mut().for_each(|d| *d = None);
        }
    }

    /// The current rule's work units so far.
    fn used(&self) -> u64 {
        self.work + (self.m.steps() - self.steps_at_begin)
    }

    /// Takes `units` of the rule's work; `false` (and every later question is left open)
    /// once they run out or the analysis is interrupted.
    fn charge(&mut self, units: u64) -> bool {
        self.work = self.work.saturating_add(units);
        if !self.out && (self.used() > self.cap || self.shared.interrupt.check()) {
            self.out = true;
        }
        !self.out
    }

    /// The answer of the question just asked: `None` when a diagram it needed outgrew the
    /// budget, or the work ran out (the question is left open, never guessed).
    fn answer(&mut self, open: bool) -> Option<bool> {
        (!std::mem::take(&mut self.gave_up)).then_some(open)
    }

    /// Why a question about the current rule is left open: `budget` once its work ran out,
    /// else `question` with [`TOO_COMPLEX`].
    fn left_open(&self, question: &str) -> String {
        if self.out {
            BUDGET.to_owned()
        } else {
            format!("{question}: {TOO_COMPLEX}")
        }
    }

    /// Whether the common box of rules `a` and `b` (`b` = `a`: its own box), in `mode`, holds
    /// a request that no terminal rule before ordinal `k` decides; with such a request when
    /// one was found without a diagram.
    fn open(&mut self, mode: usize, a: usize, b: usize, k: usize) -> (bool, Option<Point>) {
        let sh = self.shared;
        let cb = sh.rules[b].query(mode);
        self.open_with(mode, a, b, cb, true, k)
    }

    /// Like [`Space::open`] with `cb` for rule `b`'s box (`standard`: it is its box in
    /// `mode`).
    fn open_with(
        &mut self,
        mode: usize,
        a: usize,
        b: usize,
        cb: Option<&'r Cell>,
        standard: bool,
        k: usize,
    ) -> (bool, Option<Point>) {
        let sh = self.shared;
        if !self.charge(1) {
            self.gave_up = true;
            return (false, None);
        }
        let (Some(ca), Some(cb)) = (sh.rules[a].query(mode), cb) else {
            return (false, None);
        };
        let k32 = k as u32;
        let scope_bits = sh.rules[a].over_scopes & sh.rules[b].over_scopes;
        let signals_b = if standard {
            sh.rules[b].signals[mode]
        } else {
            sh.rules[b].signals[POSSIBLY]
        };
        let signals = if a == b {
            sh.rules[a].signals[mode]
        } else {
            sh.rules[a].signals[mode] | signals_b
        };
        let full = AtomSet::Full;
        'scope: for s in (0..SCOPES).filter(|&s| scope_bits & 1 << s != 0) {
            // The common box's latest-decided atom on each signal: on the signals neither box
            // constrains, the dimension's own.
            let (mut point, least) = sh.base[mode][s];
            if least < k32 {
                for d in (0..DIMS).filter(|&d| d != SCOPE && signals & 1 << d == 0) {
                    if sh.firsts[mode][d][s].whole.is_none_or(|(_, f)| f < k32) {
                        continue 'scope;
                    }
                }
            }
            let mut both: [Option<AtomSet>; DIMS] = Default::default();
            let mut rest = signals;
            while rest != 0 {
                let d = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let u = sh.universe[d];
                let (sa, sb) = (&ca.dims[d], if a == b { &full } else { &cb.dims[d] });
                let best = match (sa, sb) {
                    (AtomSet::Full, AtomSet::Full) => sh.firsts[mode][d][s].whole,
                    (AtomSet::Ranges(_), AtomSet::Full) => sh.rule_best(mode, a, d, s),
                    (AtomSet::Full, AtomSet::Ranges(r)) => {
                        if standard {
                            sh.rule_best(mode, b, d, s)
                        } else {
                            sh.firsts[mode][d][s].best_set(r)
                        }
                    }
                    (AtomSet::Ranges(_), AtomSet::Ranges(_)) => match sa.intersect(sb, u) {
                        Some(set) => {
                            let best = sh.firsts[mode][d][s].best_set(&set.ranges(u));
                            both[d] = Some(set);
                            best
                        }
                        None => None,
                    },
                };
                match best {
                    Some((atom, first)) if first >= k32 => point[d] = atom,
                    _ => continue 'scope,
                }
            }
            // The one-signal rules leave a request in this scope: look for one the others
            // leave too.
            if sh.points && sh.blocker(mode, &point, k32).is_none() {
                return (true, Some(point));
            }
            let mut cell = Cell::full();
            cell.dims[SCOPE] = AtomSet::from_ranges(vec![(s as u32, s as u32 + 1)], SCOPES as u32)
                .unwrap_or(AtomSet::Full);
            for d in (0..DIMS).filter(|&d| d != SCOPE) {
                cell.dims[d] = match both[d].take() {
                    Some(set) => set,
                    None if ca.dims[d] != AtomSet::Full => ca.dims[d].clone(),
                    None if a != b => cb.dims[d].clone(),
                    None => AtomSet::Full,
                };
            }
            if sh.points && !self.charge(POINT_TRIES as u64) {
                self.gave_up = true;
                return (false, None);
            }
            match sh
                .points
                .then(|| sh.point_search(mode, &cell, point, k32))
                .flatten()
            {
                Some(point) => return (true, Some(point)),
                None => {
                    if self.diagram(mode, &cell, k32, &[]).1 {
                        return (true, None);
                    }
                }
            }
        }
        (false, None)
    }

    /// The requests of `cell` (one scope) that no terminal rule before `k` decides and none of
    /// the boxes `minus` holds, as a diagram, and whether there are any. The other rules that
    /// differ from the box in one signal cut it first; on each signal, one atom (decided
    /// latest) stands for each run of atoms that the remaining rules and `minus` do not tell
    /// apart, and the signals none of them constrains are not spelled out at all.
    fn diagram(&mut self, mode: usize, cell: &Cell, k: u32, minus: &[&Cell]) -> (Bdd, bool) {
        let sh = self.shared;
        if self.out {
            self.gave_up = true;
            return (FALSE, false);
        }
        if self.m.len() > MAX_NODES {
            // Diagrams live for one question: start afresh rather than fill the memory.
            self.clear_diagrams();
        }
        self.m.limit(sh.budget);
        let s = scopes(cell).next().unwrap_or(0);
        let universe = sh.universe;
        let signature = Signature::of(cell, &universe);
        let others = &sh.others[mode];
        let earlier = others.rules.partition_point(|(ordinal, _)| *ordinal < k);
        let mut relevant: Vec<usize> = others.rules[..earlier]
            .iter()
            .enumerate()
            .filter(|&(o, (_, c))| others.signatures[o].may_meet(&signature) && c.intersects(cell))
            .map(|(o, _)| o)
            .collect();
        if !self.charge(earlier as u64) {
            self.gave_up = true;
            return (FALSE, false);
        }
        // A rule that holds the box in every signal but one takes a slice of that signal:
        // cut the box instead (and again, as long as one does).
        let mut cell = cell.clone();
        let mut changed = true;
        while changed {
            changed = false;
            if !self.charge(relevant.len() as u64) {
                self.gave_up = true;
                return (FALSE, false);
            }
            let mut keep = Vec::with_capacity(relevant.len());
            for &o in &relevant {
                let other = &sh.others[mode].rules[o].1;
                if !other.intersects(&cell) {
                    changed = true;
                    continue;
                }
                let mut outside = (0..DIMS).filter(|&d| {
                    other.dims[d] != AtomSet::Full
                        && cell.dims[d].minus(&other.dims[d], universe[d]).is_some()
                });
                match (outside.next(), outside.next()) {
                    (None, _) => return (FALSE, false),
                    (Some(d), None) => {
                        match cell.dims[d].minus(&other.dims[d], universe[d]) {
                            Some(rest) => cell.dims[d] = rest,
                            None => return (FALSE, false),
                        }
                        changed = true;
                    }
                    _ => keep.push(o),
                }
            }
            relevant = keep;
        }
        let cell = &cell;
        let cutters: Vec<&Cell> = relevant
            .iter()
            .map(|&o| &sh.others[mode].rules[o].1)
            .chain(minus.iter().copied())
            .collect();
        if !self.charge((cutters.len() * DIMS) as u64) {
            self.gave_up = true;
            return (FALSE, false);
        }
        self.m.limit_steps(self.cap.saturating_sub(self.used()));
        let mut sets: Vec<Option<Vec<(u64, u64)>>> = vec![None; DIMS];
        sets[SCOPE] = Some(vec![(s as u64, s as u64 + 1)]);
        for d in (0..DIMS).filter(|&d| d != SCOPE) {
            let firsts = &sh.firsts[mode][d][s];
            let u = universe[d];
            let ranges = cell.dims[d].ranges(u);
            // The atoms between two consecutive bounds of the sets that cut this signal are
            // alike to every rule that matters here: one of them (decided latest) stands
            // for all.
            let mut bounds: Vec<u32> = vec![0, u];
            for c in &cutters {
                if let AtomSet::Ranges(r) = &c.dims[d] {
                    bounds.extend(r.iter().flat_map(|&(lo, hi)| [lo, hi]));
                }
            }
            if bounds.len() == 2 {
                if firsts.best_set(&ranges).is_none_or(|(_, f)| f < k) {
                    return (FALSE, false);
                }
                continue;
            }
            bounds.extend(ranges.iter().flat_map(|&(lo, hi)| [lo, hi]));
            bounds.sort_unstable();
            bounds.dedup();
            let mut reps: Vec<(u64, u64)> = Vec::new();
            let mut r = 0;
            for w in bounds.windows(2) {
                let (lo, hi) = (w[0], w[1]);
                while r < ranges.len() && ranges[r].1 <= lo {
                    r += 1;
                }
                if r == ranges.len() || ranges[r].0 > lo {
                    continue;
                }
                let mut best = (u32::MAX, 0);
                firsts.best(lo, hi, &mut best);
                if best.0 != u32::MAX && best.1 >= k {
                    reps.push((u64::from(best.0), u64::from(best.0) + 1));
                }
            }
            if reps.is_empty() {
                return (FALSE, false);
            }
            sets[d] = Some(reps);
        }
        let mut region = sh.layout.product(&mut self.m, |d| sets[d].clone());
        for o in relevant {
            if region == FALSE {
                break;
            }
            let other = match self.diagrams[mode][o] {
                Some(b) => b,
                None => {
                    let b = sh.layout.cell(&mut self.m, &sh.others[mode].rules[o].1);
                    if self.m.exhausted().is_none() {
                        self.diagrams[mode][o] = Some(b);
                    }
                    b
                }
            };
            region = self.m.and_not(region, other);
        }
        for cut in minus {
            if region == FALSE {
                break;
            }
            let other = sh.layout.cell(&mut self.m, cut);
            region = self.m.and_not(region, other);
        }
        if let Some(why) = self.m.exhausted() {
            self.gave_up = true;
            if why == Exhausted::Work {
                self.out = true;
            }
            return (FALSE, false);
        }
        (region, region != FALSE)
    }

    /// Whether `cell` holds a request that no terminal rule before `k` decides (in `mode`)
    /// and none of the boxes `minus` holds.
    fn region_open(&mut self, mode: usize, cell: &Cell, k: u32, minus: &[&Cell]) -> bool {
        let sh = self.shared;
        for s in scopes(cell).collect::<Vec<_>>() {
            if !self.charge(1 + (sh.points as u64) * POINT_TRIES as u64) {
                self.gave_up = true;
                return false;
            }
            let mut one = cell.clone();
            one.dims[SCOPE] = AtomSet::from_ranges(vec![(s as u32, s as u32 + 1)], SCOPES as u32)
                .unwrap_or(AtomSet::Full);
            let mut point: Point = [0; DIMS];
            point[SCOPE] = s as u32;
            let mut empty = false;
            for d in (0..DIMS).filter(|&d| d != SCOPE) {
                let ranges = one.dims[d].ranges(sh.universe[d]);
                match sh.firsts[mode][d][s].best_set(&ranges) {
                    Some((atom, first)) if first >= k => point[d] = atom,
                    _ => {
                        empty = true;
                        break;
                    }
                }
            }
            if empty {
                continue;
            }
            let found = sh.points.then(|| {
                sh.point_search_with(mode, &one, point, k, POINT_TRIES, |p| {
                    Ok(minus.iter().copied().find(|c| contains(c, p)))
                })
            });
            if found.flatten().is_some() || self.diagram(mode, &one, k, minus).1 {
                return true;
            }
        }
        false
    }
}

/// The most nodes the diagram of one question may make: past them the question is left open
/// (the rule goes to `undecided`, "too many cases"). It bounds the time and memory one
/// question may take (a diagram can grow exponentially with the rules that cut the box); the
/// diagrams of the synthetic tenant stay under a thousand nodes.
const MAX_DIAGRAM_NODES: usize = 1 << 20;

/// Why a question is left open when a diagram outgrew [`MAX_DIAGRAM_NODES`].
const TOO_COMPLEX: &str =
    "too many cases to analyse exactly (a decision diagram of over 1,048,576 nodes)";

/// Why a rule's questions are left open when the analysis's work ran out (its budget, its
/// deadline, or a cancellation): the whole reason, never combined with a question.
pub(crate) const BUDGET: &str = "budget";

/// Diagrams are dropped (and the manager started afresh) past this many nodes.
const MAX_NODES: usize = 1 << 21;

/// What is known about one question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Yes,
    No,
    Unknown,
}

/// Analyses the active rules of `rules` (see the crate documentation).
pub(crate) fn analyze(rules: &RuleSet) -> Analysis {
    analyze_within(rules, &Budget::unlimited()).0
}

/// Analyses the active rules of `rules` within `budget` (see the crate documentation,
/// "Bounded work").
pub(crate) fn analyze_within(rules: &RuleSet, budget: &Budget) -> (Analysis, WorkDone) {
    analyze_with(rules, true, MAX_DIAGRAM_NODES, budget, None)
}

/// Whether each rule possibly decides some request (`false`: surely none; `None`: left
/// open), and whether it was left open because the work ran out.
struct DecidesSome {
    answers: Vec<Option<bool>>,
    out_of_work: Vec<bool>,
}

/// [`analyze_within`], with or without points (the answers are the same; tested), with a
/// budget of nodes for each question's diagram, on `threads` threads (`None`: by the rules
/// and the cores).
fn analyze_with(
    rules: &RuleSet,
    points: bool,
    node_budget: usize,
    budget: &Budget,
    threads: Option<usize>,
) -> (Analysis, WorkDone) {
    let mut active: Vec<&NetworkAcl> = rules.acls.iter().filter(|a| a.spec.active).collect();
    active.sort_by(|a, b| {
        (a.spec.priority, a.id.as_str().as_bytes())
            .cmp(&(b.spec.priority, b.id.as_str().as_bytes()))
    });
    let domain = Domain::new(active.iter().copied());
    let universe = domain.universe;
    let mut classes: Vec<&Action> = Vec::new();
    let rules: Vec<Rule<'_>> = active
        .iter()
        .map(|&acl| {
            let action = acl.spec.rule.action();
            let class = match classes.iter().position(|&a| a == action) {
                Some(c) => c,
                None => {
                    classes.push(action);
                    classes.len() - 1
                }
            };
            Rule::new(acl, domain.rule_cells(acl), class as u32, &universe)
        })
        .collect();
    let mut shared = Shared::new(&rules, universe);
    shared.points = points;
    shared.budget = node_budget;
    shared.interrupt = Arc::new(Interrupt::new(budget));
    shared.progress = budget.progress.clone();
    let points = Witnesses::new(rules.iter().map(|r| r.cells.over.as_ref()), &universe);
    let index = Index::new(&rules, &universe);
    let threads = threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_THREADS)
            .min(rules.len() / RULES_PER_THREAD + 1)
    });
    let total = budget.work.unwrap_or(u64::MAX);
    let n = rules.len();
    // Block by block of rules in evaluation order: first whether each rule possibly decides
    // some request (`false`: surely none), which the questions about the later rules read;
    // then every rule's questions. The answers are taken in that order while the work they
    // took fits the budget: the cut falls at the same place whatever the threads did, and
    // the rules before it are answered in full.
    let mut decides_some = DecidesSome {
        answers: vec![None; n],
        out_of_work: vec![true; n],
    };
    let mut outputs: Vec<Option<RuleOutput>> = Vec::with_capacity(n);
    let mut used = 0u64;
    let mut cut = false;
    'blocks: for from in (0..n).step_by(RULE_BLOCK) {
        let block = from..(from + RULE_BLOCK).min(n);
        let first = parallel(
            block.clone(),
            threads,
            &shared,
            total - used,
            |space, _, i| {
                let open = space.open(POSSIBLY, i, i, i).0;
                space.answer(open)
            },
        );
        for (i, done) in block.clone().zip(first) {
            let Some((answer, units, out)) = done.filter(|d| used.saturating_add(d.1) <= total)
            else {
                cut = true;
                break 'blocks;
            };
            used += units;
            decides_some.answers[i] = answer;
            decides_some.out_of_work[i] = out;
            cut |= out;
        }
        let answers = parallel(block, threads, &shared, total - used, |space, seen, i| {
            analyze_rule(space, &index, seen, &points, &decides_some, i)
        });
        for done in answers {
            let Some((out, units, out_of_work)) =
                done.filter(|d| used.saturating_add(d.1) <= total)
            else {
                cut = true;
                break 'blocks;
            };
            used += units;
            cut |= out_of_work;
            outputs.push(Some(out));
        }
    }
    let mut analysis = Analysis::default();
    outputs.resize_with(n, || None);
    for (i, out) in outputs.into_iter().enumerate() {
        let out = out.unwrap_or_else(|| {
            cut = true;
            RuleOutput {
                findings: Vec::new(),
                undecided: Some(Undecided {
                    rule_id: rules[i].id(),
                    reason: BUDGET.to_owned(),
                }),
            }
        });
        analysis.findings.extend(out.findings);
        analysis.undecided.extend(out.undecided);
    }
    let stopped = shared
        .interrupt
        .stopped()
        .or(cut.then_some(Stopped::Budget));
    let done = WorkDone {
        units: shared.units.load(Ordering::Relaxed),
        stopped,
    };
    (analysis, done)
}

/// Rules answered together, the first question of each first (see [`analyze_with`]).
const RULE_BLOCK: usize = 64;

/// At most this many threads share an analysis.
const MAX_THREADS: usize = 8;
/// A thread of its own for every this many rules.
const RULES_PER_THREAD: usize = 500;
/// Rules a thread takes at a time.
const CHUNK: usize = 4;

/// A rule's answer, the work units it took, and whether they ran out (or the analysis was
/// interrupted) before it was settled.
type Answered<T> = (T, u64, bool);

/// `f` for every rule of `rules`, over `threads` threads taking chunks of rules in turn
/// (each with its own diagrams): in rule order, each rule's answer, its work units and whether
/// they ran out (or the analysis was interrupted); `None` for the rules not asked.
///
/// The caller takes the answers in rule order while their work fits `limit`. So a rule is
/// not asked once the rules before it are known to have taken `limit` units, and it may take
/// at most what they are known to leave: past that, its answer would not be taken whatever
/// the other threads do, and what is taken is the same on any number of threads.
fn parallel<T: Send>(
    rules: std::ops::Range<usize>,
    threads: usize,
    shared: &Shared<'_, '_>,
    limit: u64,
    f: impl Fn(&mut Space<'_, '_, '_>, &mut Seen, usize) -> T + Sync,
) -> Vec<Option<Answered<T>>> {
    let (base, n) = (rules.start, rules.len());
    let next = AtomicUsize::new(0);
    // The work of the rules done, by chunk: the rules before a rule of chunk `c` took at
    // least the sum over the chunks before `c` (every one of them was taken before `c`), plus
    // what the rules of `c` before it took.
    let chunk_units: Vec<AtomicU64> = (0..n.div_ceil(CHUNK)).map(|_| AtomicU64::new(0)).collect();
    let left = |chunk: usize, mine: u64| -> u64 {
        if limit == u64::MAX {
            return u64::MAX;
        }
        let before = chunk_units[..chunk]
            .iter()
            .fold(mine, |sum, c| sum.saturating_add(c.load(Ordering::Relaxed)));
        limit.saturating_sub(before)
    };
    let work = || {
        let mut space = Space::new(shared);
        let mut seen = Seen::new(shared.rules.len());
        let mut done: Vec<(usize, Vec<Answered<T>>)> = Vec::new();
        'chunks: loop {
            let from = next.fetch_add(CHUNK, Ordering::Relaxed);
            if from >= n {
                break;
            }
            let chunk = from / CHUNK;
            let mut answers = Vec::with_capacity(CHUNK);
            let mut mine = 0u64;
            for i in from..(from + CHUNK).min(n) {
                let cap = left(chunk, mine);
                if cap == 0 || shared.interrupt.check() {
                    done.push((from, answers));
                    break 'chunks;
                }
                space.begin(cap);
                let answer = f(&mut space, &mut seen, base + i);
                let units = space.used();
                mine = mine.saturating_add(units);
                chunk_units[chunk].fetch_add(units, Ordering::Relaxed);
                shared.units.fetch_add(units, Ordering::Relaxed);
                if let Some(progress) = &shared.progress {
                    progress.fetch_add(units, Ordering::Relaxed);
                }
                answers.push((answer, units, space.out));
            }
            done.push((from, answers));
        }
        done
    };
    let mut chunks: Vec<(usize, Vec<Answered<T>>)> = if threads <= 1 {
        work()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    chunks.sort_unstable_by_key(|c| c.0);
    let mut out: Vec<Option<Answered<T>>> = Vec::with_capacity(n);
    for (from, answers) in chunks {
        out.resize_with(from, || None);
        out.extend(answers.into_iter().map(Some));
    }
    out.resize_with(n, || None);
    out
}

/// What the analysis says about one rule.
#[derive(Default)]
struct RuleOutput {
    findings: Vec<Finding>,
    undecided: Option<Undecided>,
}

/// The questions about rule `i`.
fn analyze_rule(
    space: &mut Space<'_, '_, '_>,
    index: &Index,
    seen: &mut Seen,
    points: &Witnesses,
    decides_some: &DecidesSome,
    i: usize,
) -> RuleOutput {
    let sh = space.shared;
    let rules = sh.rules;
    let rule = &rules[i];
    let mut out = RuleOutput::default();
    {
        let Some(over_cell) = &rule.cells.over else {
            out.findings.push(Finding {
                kind: FindingKind::Shadowed,
                rule_id: rule.id(),
                by: Vec::new(),
                detail: "matches no request".to_owned(),
            });
            return out;
        };
        // The earlier rules that meet it (all the questions but redundancy read only these);
        // every rule that meets it when needed.
        let mut cost = 0;
        let candidates = index.query(seen, i, over_cell, rules, &sh.universe, i, &mut cost);
        space.charge(cost);
        let mut all: Option<Vec<usize>> = None;
        let mut all_candidates = |space: &mut Space<'_, '_, '_>, seen: &mut Seen| -> Vec<usize> {
            all.get_or_insert_with(|| {
                let mut cost = 0;
                let all = index.query(
                    seen,
                    i,
                    over_cell,
                    rules,
                    &sh.universe,
                    rules.len(),
                    &mut cost,
                );
                space.charge(cost);
                all
            })
            .clone()
        };
        let mut reasons: Vec<String> = Vec::new();
        let inexact_reason = |candidates: &[usize]| -> String {
            if let Some(reason) = &rule.cells.inexact {
                return reason.clone();
            }
            candidates
                .iter()
                .find_map(|&c| {
                    rules[c]
                        .cells
                        .inexact
                        .as_ref()
                        .map(|r| format!("depends on {}, which {r}", rules[c].id()))
                })
                .unwrap_or_default()
        };
        // Whether it possibly decides some request (`None`: left open), and surely does.
        let possibly = decides_some.answers[i];
        let (surely, witness) = if possibly == Some(true) {
            let (open, point) = space.open(SURELY, i, i, i);
            (space.answer(open), point)
        } else {
            (Some(false), None)
        };
        let shadowed = match (possibly, surely) {
            (Some(false), _) => Known::Yes,
            (Some(true), Some(true)) => Known::No,
            _ => Known::Unknown,
        };
        match shadowed {
            Known::Yes => {
                // The rules before the first prefix of the rule set that decides all it
                // matches are the only ones that can decide some of it: find that prefix by
                // halving (each question asks whether the rules before `k` leave some; one
                // left open counts as "some", which only widens the search).
                let (mut lo, mut hi) = (0, i);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    let open = space.open(POSSIBLY, i, i, mid).0;
                    if space.answer(open).unwrap_or(true) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                let mut by_open = false;
                let mut by: Vec<String> = Vec::new();
                for &e in candidates.iter().take_while(|&&e| e < lo) {
                    if !rules[e].terminal() || decides_some.answers[e] == Some(false) {
                        continue;
                    }
                    let open = space.open(POSSIBLY, e, i, e).0;
                    match space.answer(open) {
                        Some(true) => by.push(rules[e].id()),
                        Some(false) => {}
                        None => by_open = true,
                    }
                }
                if by_open {
                    reasons.push(
                        space.left_open("which earlier rules decide the requests it matches"),
                    );
                }
                let verb = if rule.terminal() {
                    "never decides"
                } else {
                    "never recorded"
                };
                out.findings.push(Finding {
                    kind: FindingKind::Shadowed,
                    rule_id: rule.id(),
                    detail: format!(
                        "{verb}: {} decide{} every request it matches",
                        by.join(", "),
                        if by.len() == 1 { "s" } else { "" }
                    ),
                    by,
                });
            }
            Known::Unknown if possibly.is_none() && decides_some.out_of_work[i] => {
                reasons.push(BUDGET.to_owned())
            }
            Known::Unknown if possibly.is_none() || surely.is_none() => {
                reasons.push(space.left_open("whether it is shadowed"))
            }
            Known::Unknown => {
                let candidates = all_candidates(space, seen);
                reasons.push(format!(
                    "whether it is shadowed: {}",
                    inexact_reason(&candidates)
                ))
            }
            Known::No => {}
        }
        if rule.terminal() {
            let (mut unknown_conflicts, mut open_conflicts) = (false, false);
            for &e in &candidates {
                let earlier = &rules[e];
                if !earlier.terminal()
                    || earlier.class == rule.class
                    || decides_some.answers[e] == Some(false)
                {
                    continue;
                }
                let open = space.open(SURELY, e, i, e).0;
                let proven = space.answer(open);
                let refuted = if proven == Some(true) {
                    Some(false)
                } else {
                    let open = space.open(POSSIBLY, e, i, e).0;
                    space.answer(open).map(|open| !open)
                };
                match (proven, refuted) {
                    (Some(true), _) => out.findings.push(conflict(earlier, rule)),
                    (_, Some(true)) => {}
                    (Some(false), Some(false)) => unknown_conflicts = true,
                    _ => open_conflicts = true,
                }
            }
            if unknown_conflicts {
                let candidates = all_candidates(space, seen);
                reasons.push(format!(
                    "whether it conflicts: {}",
                    inexact_reason(&candidates)
                ));
            }
            if open_conflicts {
                reasons.push(space.left_open("whether it conflicts"));
            }
        }

        // Redundancy (a log rule that is recorded is never redundant).
        if rule.terminal() && shadowed == Known::No {
            let bad = |x: usize| !rules[x].terminal() || rules[x].class != rule.class;
            // A request it surely decides that, once it is gone, a later rule surely decides
            // otherwise (or records), or that no later rule possibly matches: not redundant.
            let refuted_by_point = sh.points
                && space.charge(REDUNDANCY_TRIES as u64)
                && witness.is_some_and(|p| {
                    let s = p[SCOPE];
                    let Some(mut cell) = rule.cells.under.clone() else {
                        return false;
                    };
                    cell.dims[SCOPE] = AtomSet::from_ranges(vec![(s, s + 1)], SCOPES as u32)
                        .unwrap_or(AtomSet::Full);
                    space
                        .shared
                        .point_search_with(SURELY, &cell, p, i as u32, REDUNDANCY_TRIES, |p| {
                            let mut first: Option<usize> = None;
                            points.any_candidate(p, |o| {
                                if o > i
                                    && first.is_none_or(|f| o < f)
                                    && rules[o].cells.over.as_ref().is_some_and(|c| contains(c, p))
                                {
                                    first = Some(o);
                                }
                                false
                            });
                            let Some(x) = first else { return Ok(None) };
                            let surely = rules[x]
                                .cells
                                .under
                                .as_ref()
                                .is_some_and(|c| contains(c, p));
                            if bad(x) && surely {
                                Ok(None)
                            } else {
                                rules[x].cells.over.as_ref().map(Some).ok_or(())
                            }
                        })
                        .is_some()
                });
            if !refuted_by_point {
                let candidates = all_candidates(space, seen);
                let later: Vec<usize> = candidates.iter().copied().filter(|&c| c > i).collect();
                let exact = rule.cells.inexact.is_none()
                    && candidates.iter().all(|&c| rules[c].cells.inexact.is_none());
                let proof = redundancy_proof(space, i, &later, bad);
                if let Ok(Some(takers)) = &proof {
                    let by: Vec<String> = takers.iter().map(|&x| rules[x].id()).collect();
                    out.findings.push(Finding {
                        kind: FindingKind::Redundant,
                        rule_id: rule.id(),
                        detail: format!(
                            "removing it changes no decision: {} decide{} the requests it decides the same way",
                            by.join(", "),
                            if by.len() == 1 { "s" } else { "" }
                        ),
                        by,
                    });
                } else {
                    let refuted = match proof {
                        Err(GaveUp) => Err(GaveUp),
                        Ok(_) if exact => Ok(true),
                        Ok(_) => redundancy_refuted(space, i, &later, bad),
                    };
                    match refuted {
                        Ok(true) => {}
                        Ok(false) => reasons.push(format!(
                            "whether it is redundant: {}",
                            inexact_reason(&candidates)
                        )),
                        Err(GaveUp) => reasons.push(space.left_open("whether it is redundant")),
                    }
                }
            }
        }
        if reasons.iter().any(|r| r == BUDGET) {
            // What ran out of work is said once, as the whole reason.
            reasons = vec![BUDGET.to_owned()];
        }
        if !reasons.is_empty() {
            out.undecided = Some(Undecided {
                rule_id: rule.id(),
                reason: reasons.join("; "),
            });
        }
    }
    out
}

/// The later rules that take every request rule `i` possibly decides, each deciding it the
/// same way, before any rule deciding otherwise (or recording) meets one (`None`: not so).
fn redundancy_proof(
    space: &mut Space<'_, '_, '_>,
    i: usize,
    later: &[usize],
    bad: impl Fn(usize) -> bool,
) -> Result<Option<Vec<usize>>, GaveUp> {
    let rules = space.shared.rules;
    let Some(over) = rules[i].cells.over.as_ref() else {
        return Ok(None);
    };
    let mut takers: Vec<usize> = Vec::new();
    let mut taken: Vec<&Cell> = Vec::new();
    for &x in later {
        let Some(theirs) = rules[x].cells.over.as_ref() else {
            continue;
        };
        let meets = if taken.is_empty() {
            space.open_with(POSSIBLY, i, x, Some(theirs), true, i).0
        } else {
            intersect(over, theirs, &space.shared.universe)
                .is_some_and(|common| space.region_open(POSSIBLY, &common, i as u32, &taken))
        };
        if space.answer(meets).ok_or(GaveUp)? {
            if bad(x) {
                return Ok(None);
            }
            takers.push(x);
            if let Some(under) = rules[x].cells.under.as_ref() {
                taken.push(under);
            }
            let left = space.region_open(POSSIBLY, over, i as u32, &taken);
            if !space.answer(left).ok_or(GaveUp)? {
                // Taken whole: no later rule meets what is left.
                return Ok(Some(takers));
            }
        }
    }
    // It decides some request (so something is left when nothing took it).
    Ok(None)
}

/// Whether rule `i` surely decides a request that, once it is gone, a later rule surely
/// decides otherwise (or records), or that no later rule possibly decides.
fn redundancy_refuted(
    space: &mut Space<'_, '_, '_>,
    i: usize,
    later: &[usize],
    bad: impl Fn(usize) -> bool,
) -> Result<bool, GaveUp> {
    let rules = space.shared.rules;
    let Some(under) = rules[i].cells.under.as_ref() else {
        return Ok(false);
    };
    let mut taken: Vec<&Cell> = Vec::new();
    for &x in later {
        if bad(x) {
            if let Some(common) = rules[x]
                .cells
                .under
                .as_ref()
                .and_then(|theirs| intersect(under, theirs, &space.shared.universe))
            {
                let meets = space.region_open(SURELY, &common, i as u32, &taken);
                if space.answer(meets).ok_or(GaveUp)? {
                    return Ok(true);
                }
            }
        }
        if let Some(theirs) = rules[x].cells.over.as_ref() {
            if theirs.intersects(under) {
                taken.push(theirs);
            }
        }
    }
    let left = space.region_open(SURELY, under, i as u32, &taken);
    space.answer(left).ok_or(GaveUp)
}

/// A question left open: a diagram it needed outgrew [`MAX_DIAGRAM_NODES`].
#[derive(Debug, Clone, Copy)]
struct GaveUp;

/// The common box of two boxes; `None` when they are disjoint.
fn intersect(a: &Cell, b: &Cell, universe: &[u32; DIMS]) -> Option<Cell> {
    let mut cell = a.clone();
    for d in 0..DIMS {
        if !cell.restrict(d, &b.dims[d], universe) {
            return None;
        }
    }
    Some(cell)
}

fn conflict(earlier: &Rule<'_>, rule: &Rule<'_>) -> Finding {
    let (theirs, mine) = (earlier.action().name(), rule.action().name());
    let mut detail = String::with_capacity(earlier.id.len() + theirs.len() + mine.len() + 72);
    detail.push_str(&earlier.id);
    detail.push_str(" (");
    detail.push_str(theirs);
    detail.push_str(") decides requests this rule (");
    detail.push_str(mine);
    detail.push_str(") also matches: their order decides");
    Finding {
        kind: FindingKind::Conflict,
        rule_id: rule.id(),
        by: vec![earlier.id()],
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netacl_eval::synthetic::{self, SyntheticConfig};
    use std::collections::BTreeSet;

    fn tenant(rules: usize, seed: u64) -> RuleSet {
        let config = SyntheticConfig {
            rules,
            cidrs: rules * 10,
            requests: 1,
            seed,
        };
        synthetic::generate(&config)
            .rule_set(&config)
            .expect("the synthetic rule set validates")
    }

    /// The analysis answers as the previous one (boxes swept against boxes, kept as
    /// `legacy`) does on synthetic tenants (every signal, CIDR lists, `not_match`, log rules,
    /// mixed scopes, user-agent wildcards): the same findings in the same order, and the
    /// same undecided rules with the same reasons, except for the rules the sweeps gave up
    /// on (their bound on one rule's work), which are left out of the comparison.
    #[test]
    fn answers_as_the_sweeps_do_on_synthetic_tenants() {
        for (rules, seed) in [
            (60, 1),
            (150, 2),
            (250, 3),
            (300, 0x6e65_7461_636c),
            (400, 5),
        ] {
            let set = tenant(rules, seed);
            let new = analyze(&set);
            let old = crate::legacy::analyze(&set);
            let gave_up: BTreeSet<&str> = old
                .undecided
                .iter()
                .filter(|u| u.reason.contains("too many cases"))
                .map(|u| u.rule_id.as_str())
                .collect();
            let findings = |a: &Analysis| -> Vec<Finding> {
                a.findings
                    .iter()
                    .filter(|f| !gave_up.contains(f.rule_id.as_str()))
                    .cloned()
                    .collect()
            };
            let undecided = |a: &Analysis| -> Vec<Undecided> {
                a.undecided
                    .iter()
                    .filter(|u| !gave_up.contains(u.rule_id.as_str()))
                    .cloned()
                    .collect()
            };
            assert!(old.findings.len() > rules, "{rules} rules, seed {seed}");
            assert_eq!(findings(&new), findings(&old), "{rules} rules, seed {seed}");
            assert_eq!(
                undecided(&new),
                undecided(&old),
                "{rules} rules, seed {seed}"
            );
        }
    }

    /// Points only save work: without them (every question answered by a diagram) the
    /// findings and undecided rules are the same.
    #[test]
    fn diagrams_alone_answer_as_points_do() {
        for (rules, seed) in [(80, 7), (200, 8), (500, 9)] {
            let set = tenant(rules, seed);
            assert_eq!(
                analyze_with(&set, false, MAX_DIAGRAM_NODES, &Budget::unlimited(), None).0,
                analyze_with(&set, true, MAX_DIAGRAM_NODES, &Budget::unlimited(), None).0,
                "{rules} rules, seed {seed}"
            );
        }
    }

    /// A question whose diagram outgrows the budget is left open, never guessed: with a
    /// budget of a few nodes (and no points, so that every question needs a diagram) some
    /// rules go to `undecided` ("too many cases"), and every finding still reported is one
    /// the full analysis reports (a shadowed rule's `by` may miss the rules left open).
    #[test]
    fn a_question_past_the_budget_is_left_open() {
        for (rules, seed) in [(150, 11), (300, 12)] {
            let set = tenant(rules, seed);
            let full = analyze(&set);
            let starved = analyze_with(&set, false, 40, &Budget::unlimited(), None).0;
            let too_complex = starved
                .undecided
                .iter()
                .filter(|u| u.reason.contains("too many cases"))
                .count();
            assert!(too_complex > 0, "{rules} rules, seed {seed}");
            for f in &starved.findings {
                assert!(
                    full.findings.iter().any(|g| g.kind == f.kind
                        && g.rule_id == f.rule_id
                        && f.by.iter().all(|b| g.by.contains(b))),
                    "{f:?} ({rules} rules, seed {seed})"
                );
                if f.kind != FindingKind::Shadowed {
                    assert!(full.findings.contains(f), "{f:?}");
                }
            }
            // What the starved analysis does not report is left open for that rule.
            let open: BTreeSet<&str> = starved
                .undecided
                .iter()
                .map(|u| u.rule_id.as_str())
                .collect();
            for g in &full.findings {
                if !starved.findings.contains(g) {
                    assert!(open.contains(g.rule_id.as_str()), "{g:?}");
                }
            }
        }
    }

    fn overlapping(rules: usize, seed: u64) -> RuleSet {
        let records = synthetic::overlapping(rules, seed);
        RuleSet::from_json(&records, 1, &netacl_model::Limits::default())
            .expect("the overlapping rule set validates")
    }

    /// Every finding of `partial` is one `full` reports (a shadowed rule's `by` may miss
    /// rules), and every finding of `full` that `partial` does not report concerns a rule
    /// `partial` lists as undecided.
    fn sound_against(partial: &Analysis, full: &Analysis, what: &str) {
        for f in &partial.findings {
            assert!(
                full.findings.iter().any(|g| g.kind == f.kind
                    && g.rule_id == f.rule_id
                    && f.by.iter().all(|b| g.by.contains(b))),
                "{f:?} ({what})"
            );
            if f.kind != FindingKind::Shadowed {
                assert!(full.findings.contains(f), "{f:?} ({what})");
            }
        }
        let open: BTreeSet<&str> = partial
            .undecided
            .iter()
            .map(|u| u.rule_id.as_str())
            .collect();
        for g in &full.findings {
            if !partial.findings.contains(g) {
                assert!(open.contains(g.rule_id.as_str()), "{g:?} ({what})");
            }
        }
    }

    /// A budget of work units leaves questions open (`budget`), never guessed: on the
    /// synthetic tenant and on the overlapping rule set, under budgets from a tenth of what the
    /// whole analysis takes down to a few units, some rules are undecided for the budget, every
    /// finding reported is one the unbounded analysis reports, and what it does not report is
    /// left open for that rule. With enough units the answer is the unbounded one.
    #[test]
    fn a_small_budget_leaves_questions_open_and_reports_only_proven_findings() {
        for (set, what) in [
            (tenant(300, 21), "synthetic, 300 rules"),
            (overlapping(60, 22), "overlapping, 60 rules"),
        ] {
            let (full, all) = analyze_within(&set, &Budget::unlimited());
            assert_eq!(all.stopped, None, "{what}");
            assert!(!full.findings.is_empty(), "{what}");
            assert!(full.undecided.iter().all(|u| u.reason != BUDGET), "{what}");
            let (enough, done) = analyze_within(&set, &Budget::work(all.units));
            assert_eq!(enough, full, "{what}: the whole budget");
            assert_eq!(done.stopped, None, "{what}");
            for share in [10, 3, 2] {
                let budget = all.units * share / 30;
                let (partial, done) = analyze_within(&set, &Budget::work(budget));
                let what = format!("{what}, {share}/30 of {} units", all.units);
                assert_eq!(done.stopped, Some(Stopped::Budget), "{what}");
                let cut = partial
                    .undecided
                    .iter()
                    .filter(|u| u.reason == BUDGET)
                    .count();
                assert!(cut > 0, "{what}");
                assert!(partial.findings.len() < full.findings.len(), "{what}");
                sound_against(&partial, &full, &what);
            }
            let (nothing, _) = analyze_within(&set, &Budget::work(3));
            assert!(nothing.findings.len() <= 1, "{what}");
            sound_against(&nothing, &full, what);
        }
    }

    /// The budget's cut falls at the same rule whatever the threads do: one thread and
    /// several give the same answer and the same findings (the work of each rule does not
    /// depend on the rules its thread answered before).
    #[test]
    fn the_budget_cuts_the_same_answer_on_any_number_of_threads() {
        let set = overlapping(80, 23);
        let (_, all) = analyze_within(&set, &Budget::unlimited());
        for share in [2, 5] {
            let budget = Budget::work(all.units * share / 10);
            let one = analyze_with(&set, true, MAX_DIAGRAM_NODES, &budget, Some(1));
            let many = analyze_with(&set, true, MAX_DIAGRAM_NODES, &budget, Some(4));
            assert_eq!(one.0, many.0, "{share}/10 of the units");
            assert!(one.0.undecided.iter().any(|u| u.reason == BUDGET));
        }
        let unbounded = Budget::unlimited();
        assert_eq!(
            analyze_with(&set, true, MAX_DIAGRAM_NODES, &unbounded, Some(3)).0,
            analyze_with(&set, true, MAX_DIAGRAM_NODES, &unbounded, Some(1)).0
        );
    }

    /// The analysis of the overlapping rule set of 1,000 rules runs for minutes unbounded;
    /// started on another thread, it stops soon after its cancellation flag is set (and
    /// after its deadline), with the rules it did not settle undecided for the budget and the
    /// findings it proved (checked against the unbounded analysis of its first rules).
    #[test]
    fn a_cancelled_or_late_analysis_stops() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        use std::time::{Duration, Instant};
        let set = Arc::new(overlapping(1_000, 24));
        let cancel = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(AtomicU64::new(0));
        let budget = Budget::unlimited()
            .with_cancel(Arc::clone(&cancel))
            .with_progress(Arc::clone(&progress));
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = {
            let set = Arc::clone(&set);
            std::thread::spawn(move || {
                let _ = tx.send(analyze_within(&set, &budget));
            })
        };
        // Let it work a little (at most a minute), then cancel.
        let start = Instant::now();
        while progress.load(Ordering::Relaxed) < 3_000_000
            && start.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            progress.load(Ordering::Relaxed) > 0,
            "the analysis did some work"
        );
        cancel.store(true, Ordering::Relaxed);
        let (cancelled, done) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the cancelled analysis stopped (unbounded, it runs for minutes)");
        worker.join().expect("worker");
        assert_eq!(done.stopped, Some(Stopped::Cancelled));
        let open = cancelled
            .undecided
            .iter()
            .filter(|u| u.reason == BUDGET)
            .count();
        assert!(open > 900, "{open} rules left open");
        assert!(!cancelled.findings.is_empty());
        // Its findings are proven: whether a rule is shadowed or conflicts depends on the
        // rules up to it alone, and the unbounded analysis of the first 120 rules (in
        // evaluation order) says the same of the rules it shares.
        let mut order: Vec<&NetworkAcl> = set.acls.iter().collect();
        order.sort_by(|a, b| {
            (a.spec.priority, a.id.as_str().as_bytes())
                .cmp(&(b.spec.priority, b.id.as_str().as_bytes()))
        });
        let first = RuleSet {
            version: 1,
            acls: order[..120].iter().map(|&a| a.clone()).collect(),
        };
        let (head, _) = analyze_within(&first, &Budget::unlimited());
        let mut checked = 0;
        for f in &cancelled.findings {
            if f.kind == FindingKind::Redundant
                || !first.acls.iter().any(|a| a.id.as_str() == f.rule_id)
            {
                continue;
            }
            checked += 1;
            assert!(
                head.findings.iter().any(|g| g.kind == f.kind
                    && g.rule_id == f.rule_id
                    && f.by.iter().all(|b| g.by.contains(b))),
                "{f:?}"
            );
        }
        assert!(checked > 0);

        // A deadline already near: the analysis stops at it.
        let late = Budget::unlimited().with_deadline(Instant::now() + Duration::from_millis(200));
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = {
            let set = Arc::clone(&set);
            std::thread::spawn(move || {
                let _ = tx.send(analyze_within(&set, &late));
            })
        };
        let (_, done) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the analysis stopped at its deadline");
        worker.join().expect("worker");
        assert_eq!(done.stopped, Some(Stopped::Deadline));
    }
}

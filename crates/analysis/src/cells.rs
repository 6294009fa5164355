//! Sets of requests as unions of boxes: one set of atoms per dimension.
//!
//! A dimension's atoms are numbered `0..universe`; a set of atoms is a sorted list of disjoint
//! half-open ranges, or [`AtomSet::Full`]. A [`Cell`] is the product of one set per dimension
//! (a box); a [`Region`] is a list of pairwise disjoint cells.

use std::sync::Arc;

use smallvec::SmallVec;

/// How many dimensions a request has (see `domain.rs`).
pub(crate) const DIMS: usize = 11;

/// Ranges while a set is built.
type Ranges = SmallVec<[(u32, u32); 2]>;

/// A set of atoms of one dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AtomSet {
    /// Every atom of the dimension (the dimension is not constrained).
    Full,
    /// These ranges (sorted, disjoint, not adjacent, never empty, never the whole universe),
    /// shared: boxes are cut and copied often, their sets rarely change.
    Ranges(Arc<[(u32, u32)]>),
}

impl AtomSet {
    /// The set of the given ranges (any order, may overlap), normalised; `None` when empty.
    pub(crate) fn from_ranges(mut ranges: Vec<(u32, u32)>, universe: u32) -> Option<Self> {
        ranges.retain(|(lo, hi)| lo < hi);
        ranges.sort_unstable();
        let mut merged: Ranges = SmallVec::new();
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Self::normalised(merged, universe)
    }

    fn normalised(ranges: Ranges, universe: u32) -> Option<Self> {
        if ranges.is_empty() {
            None
        } else if ranges.len() == 1 && ranges[0] == (0, universe) {
            Some(AtomSet::Full)
        } else {
            Some(AtomSet::Ranges(Arc::from(ranges.as_slice())))
        }
    }

    /// How many atoms the set holds.
    pub(crate) fn atoms(&self, universe: u32) -> u64 {
        match self {
            AtomSet::Full => u64::from(universe),
            AtomSet::Ranges(r) => r.iter().map(|(lo, hi)| u64::from(hi - lo)).sum(),
        }
    }

    /// The ranges (the whole universe for `Full`).
    pub(crate) fn ranges(&self, universe: u32) -> Ranges {
        match self {
            AtomSet::Full => smallvec::smallvec![(0, universe)],
            AtomSet::Ranges(r) => SmallVec::from_slice(r),
        }
    }

    pub(crate) fn intersects(&self, other: &AtomSet) -> bool {
        let (a, b) = match (self, other) {
            (AtomSet::Full, _) | (_, AtomSet::Full) => return true,
            (AtomSet::Ranges(a), AtomSet::Ranges(b)) => (a, b),
        };
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if a[i].0.max(b[j].0) < a[i].1.min(b[j].1) {
                return true;
            }
            if a[i].1 <= b[j].1 {
                i = skip(a, i + 1, b[j].0);
            } else {
                j = skip(b, j + 1, a[i].0);
            }
        }
        false
    }

    /// `self ∩ other`; `None` when empty.
    pub(crate) fn intersect(&self, other: &AtomSet, universe: u32) -> Option<AtomSet> {
        let (a, b) = match (self, other) {
            (AtomSet::Full, x) | (x, AtomSet::Full) => return Some(x.clone()),
            (AtomSet::Ranges(a), AtomSet::Ranges(b)) => (a, b),
        };
        let mut out: Ranges = SmallVec::new();
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let lo = a[i].0.max(b[j].0);
            let hi = a[i].1.min(b[j].1);
            if lo < hi {
                out.push((lo, hi));
            }
            if a[i].1 <= b[j].1 {
                i = skip(a, i + 1, b[j].0);
            } else {
                j = skip(b, j + 1, a[i].0);
            }
        }
        Self::normalised(out, universe)
    }

    /// `self \ other`; `None` when empty.
    pub(crate) fn minus(&self, other: &AtomSet, universe: u32) -> Option<AtomSet> {
        let b = match other {
            AtomSet::Full => return None,
            AtomSet::Ranges(b) => b,
        };
        let full = [(0, universe)];
        let a: &[(u32, u32)] = match self {
            AtomSet::Full => &full,
            AtomSet::Ranges(r) => r,
        };
        let mut out: Ranges = SmallVec::new();
        let mut j = 0;
        for &(lo, hi) in a {
            let mut start = lo;
            j = skip(b, j, start);
            let mut k = j;
            while k < b.len() && b[k].0 < hi {
                if b[k].0 > start {
                    out.push((start, b[k].0));
                }
                start = start.max(b[k].1);
                if start >= hi {
                    break;
                }
                k += 1;
            }
            if start < hi {
                out.push((start, hi));
            }
        }
        Self::normalised(out, universe)
    }

    /// The atoms not in `self`; `None` when empty.
    pub(crate) fn complement(&self, universe: u32) -> Option<AtomSet> {
        AtomSet::Full.minus(self, universe)
    }
}

/// The first index from `from` on whose range ends after `bound` (ranges sorted and
/// disjoint): the next element first, then galloping, so that sets of very different sizes
/// meet in time proportional to the smaller.
fn skip(ranges: &[(u32, u32)], from: usize, bound: u32) -> usize {
    if from >= ranges.len() || ranges[from].1 > bound {
        return from;
    }
    // ranges[lo].1 <= bound; find hi with ranges[hi].1 > bound (or the end).
    let mut lo = from;
    let mut step = 1;
    let mut hi = from + 1;
    while hi < ranges.len() && ranges[hi].1 <= bound {
        lo = hi;
        step *= 2;
        hi = lo + step;
    }
    let hi = hi.min(ranges.len());
    lo + 1 + ranges[lo + 1..hi].partition_point(|r| r.1 <= bound)
}

/// A box: the requests whose atom in every dimension is in that dimension's set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cell {
    pub(crate) dims: [AtomSet; DIMS],
}

impl Cell {
    /// Every request.
    pub(crate) fn full() -> Self {
        Cell {
            dims: std::array::from_fn(|_| AtomSet::Full),
        }
    }

    /// Restricts dimension `d` to `set`; `false` when the cell became empty.
    pub(crate) fn restrict(&mut self, d: usize, set: &AtomSet, universe: &[u32; DIMS]) -> bool {
        match self.dims[d].intersect(set, universe[d]) {
            Some(s) => {
                self.dims[d] = s;
                true
            }
            None => false,
        }
    }

    /// Whether the two boxes share a request.
    pub(crate) fn intersects(&self, other: &Cell) -> bool {
        self.dims
            .iter()
            .zip(&other.dims)
            .all(|(a, b)| a.intersects(b))
    }

    /// `self \ other` as disjoint boxes, pushed to `out`.
    #[cfg(test)]
    pub(crate) fn minus_into(&self, other: &Cell, universe: &[u32; DIMS], out: &mut Vec<Cell>) {
        if !self.intersects(other) {
            out.push(self.clone());
            return;
        }
        let mut rest = self.clone();
        for (d, (cut, &size)) in other.dims.iter().zip(universe).enumerate() {
            if *cut == AtomSet::Full {
                continue;
            }
            if let Some(outside) = rest.dims[d].minus(cut, size) {
                let mut piece = rest.clone();
                piece.dims[d] = outside;
                out.push(piece);
                // Not empty: the boxes intersect in every dimension (and when nothing lies
                // outside, `rest` is inside already).
                if let Some(inside) = rest.dims[d].intersect(cut, size) {
                    rest.dims[d] = inside;
                }
            }
        }
    }
}

#[cfg(test)]
/// A union of pairwise disjoint boxes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Region {
    pub(crate) cells: Vec<Cell>,
    /// Boxes visited so far (the work budget, see [`MAX_WORK`]).
    work: u64,
}

#[cfg(test)]
/// The region grew past the analysis's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooComplex;

#[cfg(test)]
/// The most boxes a region may hold before the analysis gives up on a rule.
pub(crate) const MAX_CELLS: usize = 4096;

#[cfg(test)]
/// The most boxes one region may visit (over every test and subtraction of a sweep) before the
/// analysis gives up on a rule: it bounds the time a rule can take.
pub(crate) const MAX_WORK: u64 = 200_000;

#[cfg(test)]
impl Region {
    pub(crate) fn of(cell: Option<Cell>) -> Self {
        Region {
            cells: cell.into_iter().collect(),
            work: 0,
        }
    }

    /// The region of `cell`, one box per atom of its dimension `d`: where `d` has few atoms
    /// (the request scope), boxes cut along it at once are cut no further by the rules that
    /// name one of its atoms, and the region grows less.
    pub(crate) fn split(cell: Option<Cell>, d: usize, universe: &[u32; DIMS]) -> Self {
        let Some(cell) = cell else {
            return Region::of(None);
        };
        let mut cells = Vec::new();
        for (lo, hi) in cell.dims[d].ranges(universe[d]) {
            for atom in lo..hi {
                let mut piece = cell.clone();
                piece.dims[d] = AtomSet::from_ranges(vec![(atom, atom + 1)], universe[d])
                    .unwrap_or(AtomSet::Full);
                cells.push(piece);
            }
        }
        Region { cells, work: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    pub(crate) fn intersects(&mut self, cell: &Cell) -> bool {
        self.work += self.cells.len() as u64;
        self.cells.iter().any(|c| c.intersects(cell))
    }

    /// Removes `cell` from the region.
    pub(crate) fn subtract(
        &mut self,
        cell: &Cell,
        universe: &[u32; DIMS],
    ) -> Result<(), TooComplex> {
        if self.work > MAX_WORK {
            return Err(TooComplex);
        }
        if !self.intersects(cell) {
            return Ok(());
        }
        let mut out = Vec::with_capacity(self.cells.len() + 2);
        for c in &self.cells {
            c.minus_into(cell, universe, &mut out);
        }
        if out.len() > MAX_CELLS {
            return Err(TooComplex);
        }
        self.cells = out;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(r: &[(u32, u32)], u: u32) -> Option<AtomSet> {
        AtomSet::from_ranges(r.to_vec(), u)
    }

    #[test]
    fn set_operations() {
        let a = set(&[(0, 3), (5, 8)], 10).unwrap();
        let b = set(&[(2, 6)], 10).unwrap();
        assert_eq!(a.intersect(&b, 10), set(&[(2, 3), (5, 6)], 10));
        assert_eq!(a.minus(&b, 10), set(&[(0, 2), (6, 8)], 10));
        assert_eq!(b.minus(&a, 10), set(&[(3, 5)], 10));
        assert_eq!(a.complement(10), set(&[(3, 5), (8, 10)], 10));
        assert_eq!(set(&[(0, 10)], 10), Some(AtomSet::Full));
        assert_eq!(AtomSet::Full.minus(&AtomSet::Full, 10), None);
        assert_eq!(set(&[(0, 4), (4, 10)], 10), Some(AtomSet::Full));
        assert!(!a.intersects(&set(&[(3, 5)], 10).unwrap()));
    }

    #[test]
    fn set_operations_agree_with_atom_by_atom_sets_of_any_sizes() {
        // Sets of very different sizes (the galloping paths) and alike, against bit vectors.
        let mut seed = 0x9e37_79b9_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let u = 300;
        for round in 0..400 {
            let mut random_set = |pieces: u64| {
                let ranges: Vec<(u32, u32)> = (0..pieces)
                    .map(|_| {
                        let lo = (next() % u64::from(u)) as u32;
                        let len = 1 + (next() % 4) as u32;
                        (lo, (lo + len).min(u))
                    })
                    .collect();
                AtomSet::from_ranges(ranges, u)
            };
            let a = random_set(1 + round % 3);
            let b = random_set(if round % 2 == 0 { 80 } else { 2 });
            let (Some(a), Some(b)) = (a, b) else { continue };
            let bits = |s: &Option<AtomSet>| -> Vec<bool> {
                (0..u)
                    .map(|x| {
                        s.as_ref()
                            .is_some_and(|s| s.ranges(u).iter().any(|r| r.0 <= x && x < r.1))
                    })
                    .collect()
            };
            let (ba, bb) = (bits(&Some(a.clone())), bits(&Some(b.clone())));
            for (x, y, s1, s2) in [(&a, &b, &ba, &bb), (&b, &a, &bb, &ba)] {
                let and: Vec<bool> = s1.iter().zip(s2).map(|(p, q)| *p && *q).collect();
                let diff: Vec<bool> = s1.iter().zip(s2).map(|(p, q)| *p && !*q).collect();
                assert_eq!(bits(&x.intersect(y, u)), and, "{x:?} ∩ {y:?}");
                assert_eq!(bits(&x.minus(y, u)), diff, "{x:?} \\ {y:?}");
                assert_eq!(x.intersects(y), and.iter().any(|&p| p), "{x:?} meets {y:?}");
            }
        }
    }

    #[test]
    fn box_difference_is_disjoint_and_exact() {
        let universe = [4; DIMS];
        let mut a = Cell::full();
        a.dims[0] = set(&[(0, 3)], 4).unwrap();
        let mut b = Cell::full();
        b.dims[0] = set(&[(1, 2)], 4).unwrap();
        b.dims[1] = set(&[(0, 1)], 4).unwrap();
        let mut out = Vec::new();
        a.minus_into(&b, &universe, &mut out);
        // Count points over the first two dimensions.
        let mut count = 0;
        for x in 0..4 {
            for y in 0..4 {
                let inside: Vec<_> = out
                    .iter()
                    .filter(|c| {
                        let p =
                            |s: &AtomSet, v: u32| s.ranges(4).iter().any(|r| r.0 <= v && v < r.1);
                        p(&c.dims[0], x) && p(&c.dims[1], y)
                    })
                    .collect();
                assert!(inside.len() <= 1);
                let expected = x < 3 && !(x == 1 && y == 0);
                assert_eq!(inside.len() == 1, expected, "{x} {y}");
                count += inside.len();
            }
        }
        assert_eq!(count, 11);
    }
}

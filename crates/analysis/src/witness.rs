//! Concrete requests (points: one atom per dimension) and the index that finds the rules that
//! can contain one.
//!
//! The analysis (`analyze.rs`) tests its points against the rules that can contain them: each
//! rule is filed under the atoms of its narrowest dimension ([`Witnesses::any_candidate`]).
//! The point search below (the atom the fewest rules name in each dimension, a range-minimum
//! table over the atoms' coverage) is the previous analysis's (`legacy.rs`, kept as the test
//! oracle), hence only in tests.

use crate::cells::{AtomSet, Cell, DIMS};
use crate::domain::SCOPE;

/// A request, as one atom per dimension.
pub(crate) type Point = [u32; DIMS];

/// Whether the atom is in the set.
fn set_contains(set: &AtomSet, atom: u32) -> bool {
    match set {
        AtomSet::Full => true,
        AtomSet::Ranges(r) => {
            let i = r.partition_point(|&(_, hi)| hi <= atom);
            i < r.len() && r[i].0 <= atom
        }
    }
}

/// Whether the box contains the point.
pub(crate) fn contains(cell: &Cell, point: &Point) -> bool {
    cell.dims
        .iter()
        .zip(point)
        .all(|(set, &atom)| set_contains(set, atom))
}

#[cfg(test)]
/// The atom of least coverage in any range of one dimension: a sparse table of argmins.
struct RangeMin {
    cover: Vec<u32>,
    /// `levels[k][i]`: the least-covered atom of `i..i + 2^k`.
    levels: Vec<Vec<u32>>,
}

#[cfg(test)]
impl RangeMin {
    fn new(cover: Vec<u32>) -> Self {
        let n = cover.len();
        let mut levels: Vec<Vec<u32>> = vec![(0..n as u32).collect()];
        let mut width = 1;
        while width * 2 <= n {
            let prev = &levels[levels.len() - 1];
            let next: Vec<u32> = (0..=n - width * 2)
                .map(|i| {
                    let (a, b) = (prev[i], prev[i + width]);
                    if cover[b as usize] < cover[a as usize] {
                        b
                    } else {
                        a
                    }
                })
                .collect();
            levels.push(next);
            width *= 2;
        }
        RangeMin { cover, levels }
    }

    /// The least-covered atom of `lo..hi` (not empty).
    fn argmin(&self, lo: u32, hi: u32) -> u32 {
        let len = (hi - lo) as usize;
        let k = (usize::BITS - 1 - len.leading_zeros()) as usize;
        let a = self.levels[k][lo as usize];
        let b = self.levels[k][hi as usize - (1 << k)];
        if self.cover[b as usize] < self.cover[a as usize] {
            b
        } else {
            a
        }
    }

    fn better(&self, best: Option<u32>, atom: u32) -> Option<u32> {
        match best {
            Some(b) if self.cover[b as usize] <= self.cover[atom as usize] => Some(b),
            _ => Some(atom),
        }
    }
}

/// Chooses points and finds the rules that contain them.
pub(crate) struct Witnesses {
    #[cfg(test)]
    universe: [u32; DIMS],
    #[cfg(test)]
    ranges: Vec<RangeMin>,
    /// `postings[d][atom]`: the rules filed under dimension `d` whose set holds `atom`.
    postings: Vec<Vec<Vec<u32>>>,
    /// Rules filed under no atom (constrained only in scope, or too wide to file): always
    /// tested.
    unfiled: Vec<u32>,
}

/// A rule's narrowest dimension is filed atom by atom when it has at most this many atoms.
const MAX_FILED_ATOMS: u64 = 1 << 16;

impl Witnesses {
    /// The coverage and index of the rules' `over` boxes (ordinal = position).
    pub(crate) fn new<'a>(
        boxes: impl Iterator<Item = Option<&'a Cell>> + Clone,
        universe: &[u32; DIMS],
    ) -> Self {
        let mut postings: Vec<Vec<Vec<u32>>> = universe
            .iter()
            .map(|&u| vec![Vec::new(); u as usize])
            .collect();
        let mut unfiled = Vec::new();
        for (ordinal, cell) in boxes.clone().enumerate() {
            let Some(cell) = cell else { continue };
            let anchor = (0..DIMS)
                .filter(|&d| d != SCOPE && cell.dims[d] != AtomSet::Full)
                .min_by_key(|&d| cell.dims[d].atoms(universe[d]));
            match anchor {
                Some(d) if cell.dims[d].atoms(universe[d]) <= MAX_FILED_ATOMS => {
                    for (lo, hi) in cell.dims[d].ranges(universe[d]) {
                        for atom in lo..hi {
                            postings[d][atom as usize].push(ordinal as u32);
                        }
                    }
                }
                _ => unfiled.push(ordinal as u32),
            }
        }
        Witnesses {
            #[cfg(test)]
            universe: *universe,
            #[cfg(test)]
            ranges: Self::coverage(boxes, universe),
            postings,
            unfiled,
        }
    }

    /// Coverage by difference arrays: how many rules constrain a dimension to a set holding
    /// the atom (an unconstrained dimension counts for no atom: it tells none apart).
    #[cfg(test)]
    fn coverage<'a>(
        boxes: impl Iterator<Item = Option<&'a Cell>>,
        universe: &[u32; DIMS],
    ) -> Vec<RangeMin> {
        let mut diff: Vec<Vec<i64>> = universe.iter().map(|&u| vec![0; u as usize + 1]).collect();
        for cell in boxes.flatten() {
            for (d, set) in cell.dims.iter().enumerate() {
                if let AtomSet::Ranges(r) = set {
                    for &(lo, hi) in r.iter() {
                        diff[d][lo as usize] += 1;
                        diff[d][hi as usize] -= 1;
                    }
                }
            }
        }
        diff.into_iter()
            .map(|diff| {
                let mut running = 0i64;
                let cover: Vec<u32> = diff[..diff.len() - 1]
                    .iter()
                    .map(|&x| {
                        running += x;
                        running.max(0) as u32
                    })
                    .collect();
                RangeMin::new(cover)
            })
            .collect()
    }

    /// The least-covered atom of `a ∩ b` in dimension `d`; `None` when they are disjoint.
    #[cfg(test)]
    fn pick(&self, d: usize, a: &AtomSet, b: &AtomSet) -> Option<u32> {
        let table = &self.ranges[d];
        let u = self.universe[d];
        match (a, b) {
            (AtomSet::Full, AtomSet::Full) => Some(table.argmin(0, u)),
            (AtomSet::Full, AtomSet::Ranges(r)) | (AtomSet::Ranges(r), AtomSet::Full) => {
                r.iter().fold(None, |best, &(lo, hi)| {
                    table.better(best, table.argmin(lo, hi))
                })
            }
            (AtomSet::Ranges(a), AtomSet::Ranges(b)) => {
                let (mut i, mut j) = (0, 0);
                let mut best = None;
                while i < a.len() && j < b.len() {
                    let lo = a[i].0.max(b[j].0);
                    let hi = a[i].1.min(b[j].1);
                    if lo < hi {
                        best = table.better(best, table.argmin(lo, hi));
                    }
                    if a[i].1 <= b[j].1 {
                        i += 1;
                    } else {
                        j += 1;
                    }
                }
                best
            }
        }
    }

    /// A point of `a ∩ b` (`b` defaults to everything), its atoms the least covered, that
    /// `blocker` accepts (answers `None` for): when `blocker` names a box holding the point, the
    /// point moves out of it (in the first dimension where that box constrains and leaves
    /// some of the allowed atoms), at most `tries` times. `None` when the boxes are disjoint or
    /// no accepted point was found.
    #[cfg(test)]
    pub(crate) fn search<'c>(
        &self,
        a: &Cell,
        b: Option<&Cell>,
        tries: usize,
        mut blocker: impl FnMut(&Point) -> Option<&'c Cell>,
    ) -> Option<Point> {
        let mut point = [0u32; DIMS];
        for (d, atom) in point.iter_mut().enumerate() {
            let other = b.map_or(&AtomSet::Full, |b| &b.dims[d]);
            *atom = self.pick(d, &a.dims[d], other)?;
        }
        // The allowed atoms of the dimensions the search has narrowed.
        let mut narrowed: [Option<AtomSet>; DIMS] = Default::default();
        for _ in 0..tries {
            let Some(cell) = blocker(&point) else {
                return Some(point);
            };
            let mut moved = false;
            for d in 0..DIMS {
                let AtomSet::Ranges(_) = &cell.dims[d] else {
                    continue;
                };
                let allowed = match &narrowed[d] {
                    Some(set) => set.clone(),
                    None => {
                        let other = b.map_or(&AtomSet::Full, |b| &b.dims[d]);
                        a.dims[d].intersect(other, self.universe[d])?
                    }
                };
                if let Some(rest) = allowed.minus(&cell.dims[d], self.universe[d]) {
                    point[d] = self.pick(d, &rest, &AtomSet::Full)?;
                    narrowed[d] = Some(rest);
                    moved = true;
                    break;
                }
            }
            if !moved {
                return None;
            }
        }
        None
    }

    /// A point of `a ∩ b`, its atoms the least covered; `None` when the boxes are disjoint.
    #[cfg(test)]
    pub(crate) fn point(&self, a: &Cell, b: Option<&Cell>) -> Option<Point> {
        self.search(a, b, 1, |_| None)
    }

    /// Calls `f` with the ordinal of every rule that may contain `point` (each once, in no
    /// particular order; the caller tests containment), until `f` answers `true`; answers
    /// whether it did.
    pub(crate) fn any_candidate(&self, point: &Point, mut f: impl FnMut(usize) -> bool) -> bool {
        for (d, &atom) in point.iter().enumerate() {
            if d == SCOPE {
                continue;
            }
            for &o in &self.postings[d][atom as usize] {
                if f(o as usize) {
                    return true;
                }
            }
        }
        self.unfiled.iter().any(|&o| f(o as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_minimum_finds_the_least_covered_atom() {
        let cover = vec![5, 3, 4, 1, 7, 1, 0, 9, 2];
        let table = RangeMin::new(cover.clone());
        for lo in 0..cover.len() {
            for hi in lo + 1..=cover.len() {
                let got = table.argmin(lo as u32, hi as u32);
                let best = *cover[lo..hi].iter().min().unwrap();
                assert!((lo..hi).contains(&(got as usize)));
                assert_eq!(cover[got as usize], best, "{lo}..{hi}");
            }
        }
    }

    #[test]
    fn points_lie_in_both_boxes_and_candidates_include_every_container() {
        let universe = [3, 10, 10, 6, 6, 6, 6, 6, 6, 6, 6];
        let set = |r: &[(u32, u32)], u: u32| AtomSet::from_ranges(r.to_vec(), u).unwrap();
        let mut a = Cell::full();
        a.dims[1] = set(&[(2, 6)], 10);
        let mut b = Cell::full();
        b.dims[1] = set(&[(0, 3), (5, 9)], 10);
        b.dims[4] = set(&[(1, 2)], 6);
        let mut c = Cell::full();
        c.dims[0] = set(&[(1, 2)], 3);
        let boxes = [Some(&a), Some(&b), Some(&c)];
        let w = Witnesses::new(boxes.iter().copied(), &universe);
        let p = w.point(&a, Some(&b)).unwrap();
        assert!(contains(&a, &p) && contains(&b, &p));
        // Atom 2 or 5 of dimension 1; both are covered by a and b alone.
        assert!(p[1] == 2 || p[1] == 5);
        let mut disjoint = Cell::full();
        disjoint.dims[1] = set(&[(9, 10)], 10);
        assert_eq!(w.point(&a, Some(&disjoint)), None);
        for p in [[0u32; DIMS], p, [1, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0]] {
            let mut seen = Vec::new();
            w.any_candidate(&p, |o| {
                seen.push(o);
                false
            });
            for (o, cell) in boxes.iter().enumerate() {
                if contains(cell.unwrap(), &p) {
                    assert!(seen.contains(&o), "{o} contains {p:?}");
                }
            }
        }
    }
}

//! The previous analysis (boxes swept against boxes, with points first), kept as the oracle
//! of the differential tests (`analyze.rs`): its answers are exact but it takes minutes past
//! 500 rules and gives up on some rules (a work bound). What follows is its own description.
//!
//! The analysis: each rule's region swept against the rules that can meet it.

use netacl_model::{Action, NetworkAcl, RuleSet};

use crate::cells::{AtomSet, Cell, Region, TooComplex, DIMS, MAX_CELLS, MAX_WORK};
use crate::domain::{Domain, RuleCells, SCOPE};
use crate::witness::{contains, Witnesses};
use crate::{Analysis, Finding, FindingKind, Undecided};

/// A set on one dimension with at most this many atoms is indexed atom by atom.
const SMALL: u64 = 64;

struct Rule<'a> {
    acl: &'a NetworkAcl,
    cells: RuleCells,
}

impl Rule<'_> {
    fn action(&self) -> &Action {
        self.acl.spec.rule.action()
    }
    fn terminal(&self) -> bool {
        self.action().is_terminal()
    }
    fn exact(&self) -> bool {
        self.cells.inexact.is_none()
    }
    fn id(&self) -> String {
        self.acl.id.to_string()
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
    seen: Vec<u32>,
    stamp: u32,
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
            seen: vec![0; rules.len()],
            stamp: 0,
        };
        for (ordinal, rule) in rules.iter().enumerate() {
            let ordinal = ordinal as u32;
            let Some(cell) = &rule.cells.over else {
                continue;
            };
            let anchor = (0..DIMS)
                .filter(|&d| d != SCOPE && cell.dims[d] != AtomSet::Full)
                .min_by_key(|&d| cell.dims[d].atoms(universe[d]));
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

    /// The ordinals (sorted, without `me`) of the rules whose `over` box meets `cell`.
    fn query(
        &mut self,
        me: usize,
        cell: &Cell,
        rules: &[Rule<'_>],
        universe: &[u32; DIMS],
    ) -> Vec<usize> {
        self.stamp += 1;
        let stamp = self.stamp;
        let mut out = Vec::new();
        let mut visit = |ordinal: u32, seen: &mut Vec<u32>| {
            let o = ordinal as usize;
            if o == me || seen[o] == stamp {
                return;
            }
            seen[o] = stamp;
            if rules[o]
                .cells
                .over
                .as_ref()
                .is_some_and(|other| other.intersects(cell))
            {
                out.push(o);
            }
        };
        for &o in &self.global {
            visit(o, &mut self.seen);
        }
        for d in (0..DIMS).filter(|&d| d != SCOPE) {
            let set = &cell.dims[d];
            if *set != AtomSet::Full && set.atoms(universe[d]) <= SMALL {
                for (lo, hi) in set.ranges(universe[d]) {
                    for atom in lo..hi {
                        for &o in &self.postings[d][atom as usize] {
                            visit(o, &mut self.seen);
                        }
                    }
                }
                for &o in &self.wide[d] {
                    visit(o, &mut self.seen);
                }
            } else {
                for &o in &self.anchored[d] {
                    visit(o, &mut self.seen);
                }
            }
        }
        out.sort_unstable();
        out
    }
}

/// One pass over the earlier terminal rules: the part of `start` left undecided, and the rules
/// `test` says take part of it.
fn sweep_earlier<'c>(
    start: Option<&Cell>,
    earlier: &[usize],
    test: impl Fn(usize) -> Option<&'c Cell>,
    subtract: impl Fn(usize) -> Option<&'c Cell>,
    universe: &[u32; DIMS],
) -> Result<(Region, Vec<usize>), TooComplex> {
    let mut region = Region::split(start.cloned(), SCOPE, universe);
    let mut hit = Vec::new();
    for &e in earlier {
        if region.is_empty() {
            break;
        }
        if test(e).is_some_and(|t| region.intersects(t)) {
            hit.push(e);
        }
        if let Some(s) = subtract(e) {
            region.subtract(s, universe)?;
        }
    }
    Ok((region, hit))
}

/// What is known about one question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    Yes,
    No,
    Unknown,
}

fn known(proven: bool, refuted: bool) -> Known {
    match (proven, refuted) {
        (true, _) => Known::Yes,
        (false, true) => Known::No,
        (false, false) => Known::Unknown,
    }
}

const TOO_COMPLEX: &str = "too many cases to analyse exactly";

/// Analyses the active rules of `rules` (see the crate documentation).
pub(crate) fn analyze(rules: &RuleSet) -> Analysis {
    analyze_with(rules, Strategy::PointsThenSweep)
}

/// How each rule's questions are answered; the answers are the same (tested).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Points first (see `witness.rs`), the sweep for what they leave.
    PointsThenSweep,
    /// The sweep alone.
    #[cfg(test)]
    SweepOnly,
}

fn analyze_with(rules: &RuleSet, strategy: Strategy) -> Analysis {
    let mut active: Vec<&NetworkAcl> = rules.acls.iter().filter(|a| a.spec.active).collect();
    active.sort_by(|a, b| {
        (a.spec.priority, a.id.as_str().as_bytes())
            .cmp(&(b.spec.priority, b.id.as_str().as_bytes()))
    });
    let domain = Domain::new(active.iter().copied());
    let universe = domain.universe;
    let rules: Vec<Rule<'_>> = active
        .iter()
        .map(|&acl| Rule {
            acl,
            cells: domain.rule_cells(acl),
        })
        .collect();
    let mut index = Index::new(&rules, &universe);
    let witnesses = Witnesses::new(rules.iter().map(|r| r.cells.over.as_ref()), &universe);
    let mut settled: Vec<Settled> = Vec::with_capacity(rules.len());
    let mut analysis = Analysis::default();

    for (i, rule) in rules.iter().enumerate() {
        let Some(over) = &rule.cells.over else {
            // Matches no request at all.
            analysis.findings.push(Finding {
                kind: FindingKind::Shadowed,
                rule_id: rule.id(),
                by: Vec::new(),
                detail: "matches no request".to_owned(),
            });
            settled.push(Settled::SHADOWED);
            continue;
        };
        let candidates = index.query(i, over, &rules, &universe);
        let earlier: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&c| c < i && rules[c].terminal())
            .collect();
        let later: Vec<usize> = candidates.iter().copied().filter(|&c| c > i).collect();
        let fast = match strategy {
            Strategy::PointsThenSweep => {
                settle_by_points(i, &rules, &earlier, &settled, &witnesses, &universe)
            }
            #[cfg(test)]
            Strategy::SweepOnly => None,
        };
        if let Some(fast) = fast {
            for &e in &fast.conflicts {
                analysis.findings.push(conflict(&rules[e], rule));
            }
            if fast.unknown_conflicts {
                let reason = rule.cells.inexact.clone().or_else(|| {
                    earlier.iter().find_map(|&c| {
                        rules[c]
                            .cells
                            .inexact
                            .as_ref()
                            .map(|r| format!("depends on {}, which {r}", rules[c].id()))
                    })
                });
                analysis.undecided.push(Undecided {
                    rule_id: rule.id(),
                    reason: format!("whether it conflicts: {}", reason.unwrap_or_default()),
                });
            }
            settled.push(Settled {
                shadowed: Known::No,
                left: None,
            });
            continue;
        }
        let exact = rule.exact() && candidates.iter().all(|&c| rules[c].exact());
        let mut reasons: Vec<String> = Vec::new();
        let inexact_reason = || -> String {
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

        // Earlier rules: shadowing and conflicts.
        let under_of = |c: usize| rules[c].cells.under.as_ref();
        let over_of = |c: usize| rules[c].cells.over.as_ref();
        let o_sweep = sweep_earlier(Some(over), &earlier, over_of, under_of, &universe);
        let u_sweep = if exact {
            o_sweep.clone()
        } else {
            sweep_earlier(
                rule.cells.under.as_ref(),
                &earlier,
                under_of,
                over_of,
                &universe,
            )
        };
        let (Ok((o_left, o_hit)), Ok((u_left, u_hit))) = (o_sweep, u_sweep) else {
            analysis.undecided.push(Undecided {
                rule_id: rule.id(),
                reason: format!(
                    "whether it is shadowed: {TOO_COMPLEX} (over {MAX_CELLS} boxes or {MAX_WORK} box visits)"
                ),
            });
            settled.push(Settled {
                shadowed: Known::Unknown,
                left: None,
            });
            continue;
        };
        let shadowed = known(o_left.is_empty(), !u_left.is_empty());
        settled.push(Settled {
            shadowed,
            left: (o_left.cells.len() + u_left.cells.len() <= MAX_KEPT_CELLS)
                .then(|| (o_left.clone(), u_left.clone())),
        });
        match shadowed {
            Known::Yes => {
                let by: Vec<String> = o_hit.iter().map(|&e| rules[e].id()).collect();
                let verb = if rule.terminal() {
                    "never decides"
                } else {
                    "never recorded"
                };
                analysis.findings.push(Finding {
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
            Known::Unknown => reasons.push(format!("whether it is shadowed: {}", inexact_reason())),
            Known::No => {}
        }
        if rule.terminal() {
            let mut unknown_conflicts = false;
            for &e in &earlier {
                if rules[e].action() == rule.action() {
                    continue;
                }
                match known(u_hit.contains(&e), !o_hit.contains(&e)) {
                    Known::Yes => analysis.findings.push(conflict(&rules[e], rule)),
                    Known::Unknown => unknown_conflicts = true,
                    Known::No => {}
                }
            }
            if unknown_conflicts {
                reasons.push(format!("whether it conflicts: {}", inexact_reason()));
            }
        }

        // Later rules: redundancy (a log rule that is recorded is never redundant).
        if rule.terminal() && shadowed == Known::No {
            let bad = |x: usize| !rules[x].terminal() || rules[x].action() != rule.action();
            let proof = (|| -> Result<Option<Vec<usize>>, TooComplex> {
                let mut region = o_left.clone();
                let mut takers = Vec::new();
                for &x in &later {
                    if region.is_empty() {
                        break;
                    }
                    if over_of(x).is_some_and(|c| region.intersects(c)) {
                        if bad(x) {
                            return Ok(None);
                        }
                        takers.push(x);
                    }
                    if let Some(c) = under_of(x) {
                        region.subtract(c, &universe)?;
                    }
                }
                Ok(region.is_empty().then_some(takers))
            })();
            let refuted = if exact {
                proof.as_ref().map(|p| p.is_none()).map_err(|&e| e)
            } else {
                (|| -> Result<bool, TooComplex> {
                    let mut region = u_left.clone();
                    for &x in &later {
                        if region.is_empty() {
                            return Ok(false);
                        }
                        if bad(x) && under_of(x).is_some_and(|c| region.intersects(c)) {
                            return Ok(true);
                        }
                        if let Some(c) = over_of(x) {
                            region.subtract(c, &universe)?;
                        }
                    }
                    Ok(!region.is_empty())
                })()
                .map_err(|_| TooComplex)
            };
            match (proof, refuted) {
                (Ok(Some(takers)), _) => {
                    let by: Vec<String> = takers.iter().map(|&x| rules[x].id()).collect();
                    analysis.findings.push(Finding {
                        kind: FindingKind::Redundant,
                        rule_id: rule.id(),
                        detail: format!(
                            "removing it changes no decision: {} decide{} the requests it decides the same way",
                            by.join(", "),
                            if by.len() == 1 { "s" } else { "" }
                        ),
                        by,
                    });
                }
                (_, Ok(true)) => {}
                (Err(TooComplex), _) | (_, Err(TooComplex)) => {
                    reasons.push(format!("whether it is redundant: {TOO_COMPLEX}"))
                }
                _ => reasons.push(format!("whether it is redundant: {}", inexact_reason())),
            }
        }
        if !reasons.is_empty() {
            analysis.undecided.push(Undecided {
                rule_id: rule.id(),
                reason: reasons.join("; "),
            });
        }
    }
    analysis
}

fn conflict(earlier: &Rule<'_>, rule: &Rule<'_>) -> Finding {
    Finding {
        kind: FindingKind::Conflict,
        rule_id: rule.id(),
        by: vec![earlier.id()],
        detail: format!(
            "{} ({}) decides requests this rule ({}) also matches: their order decides",
            earlier.id(),
            earlier.action().name(),
            rule.action().name()
        ),
    }
}

/// What the later rules may reuse of an earlier rule's analysis.
struct Settled {
    /// Whether it is shadowed (`Yes`: it decides no request, so it conflicts with none).
    shadowed: Known,
    /// When its sweep ran and stayed small: the part of its `over` box (first) and of its
    /// `under` box (second) that no earlier terminal rule surely (first) or possibly (second)
    /// decides. A later rule's conflict with it is proven when the second meets the later
    /// rule's `under` box, refuted when the first does not meet its `over` box.
    left: Option<(Region, Region)>,
}

impl Settled {
    const SHADOWED: Settled = Settled {
        shadowed: Known::Yes,
        left: None,
    };
}

/// The most boxes of an earlier rule's regions kept for the later rules' conflict questions.
const MAX_KEPT_CELLS: usize = 64;

/// What [`settle_by_points`] settled.
struct FastAnswer {
    /// The earlier rules it is proven to conflict with, in order.
    conflicts: Vec<usize>,
    /// Whether some conflict stays unknown (approximate boxes).
    unknown_conflicts: bool,
}

/// Tries to settle every question about rule `i` with points (see `witness.rs`): not shadowed
/// (a point it surely matches that no earlier terminal rule possibly matches), each conflict
/// with an earlier terminal rule of another action (proven by a point both surely match that
/// no terminal rule before the earlier one possibly matches; refuted when the earlier rule is
/// shadowed; or read from the earlier rule's kept regions), and not redundant (the first later
/// rule that possibly matches the first point surely matches it and decides otherwise, or no
/// later rule possibly matches it). `None` when some question is left: the caller sweeps.
fn settle_by_points(
    i: usize,
    rules: &[Rule<'_>],
    earlier: &[usize],
    settled: &[Settled],
    witnesses: &Witnesses,
    universe: &[u32; DIMS],
) -> Option<FastAnswer> {
    let rule = &rules[i];
    let under = rule.cells.under.as_ref()?;
    let over = rule.cells.over.as_ref()?;
    let over_of = |o: usize| rules[o].cells.over.as_ref();
    // The first terminal rule before `before` that possibly matches the point.
    let decided_before = |point: &[u32; DIMS], before: usize| -> Option<&Cell> {
        let mut first: Option<usize> = None;
        witnesses.any_candidate(point, |o| {
            if o < before
                && first.is_none_or(|f| o < f)
                && rules[o].terminal()
                && over_of(o).is_some_and(|c| contains(c, point))
            {
                first = Some(o);
            }
            false
        });
        first.and_then(over_of)
    };
    witnesses.search(under, None, POINT_TRIES, |p| decided_before(p, i))?;
    let mut answer = FastAnswer {
        conflicts: Vec::new(),
        unknown_conflicts: false,
    };
    if !rule.terminal() {
        return Some(answer);
    }
    for &e in earlier {
        let other = &rules[e];
        if other.action() == rule.action() || settled[e].shadowed == Known::Yes {
            continue;
        }
        if let Some((o_left, u_left)) = &settled[e].left {
            let proven = u_left.cells.iter().any(|c| c.intersects(under));
            let refuted = !o_left.cells.iter().any(|c| c.intersects(over));
            match known(proven, refuted) {
                Known::Yes => answer.conflicts.push(e),
                Known::Unknown => answer.unknown_conflicts = true,
                Known::No => {}
            }
            continue;
        }
        if witnesses
            .search(under, other.cells.under.as_ref(), POINT_TRIES, |q| {
                decided_before(q, e)
            })
            .is_some()
        {
            answer.conflicts.push(e);
            continue;
        }
        // No point found: sweep the two rules' common box against the terminal rules before
        // the earlier one (a much smaller sweep than the rule's own).
        let common = |a: Option<&Cell>, b: Option<&Cell>| -> Option<Cell> {
            let (a, b) = (a?, b?);
            let mut cell = a.clone();
            for d in 0..DIMS {
                if !cell.restrict(d, &b.dims[d], universe) {
                    return None;
                }
            }
            Some(cell)
        };
        let o_common = common(Some(over), other.cells.over.as_ref());
        let u_common = common(Some(under), other.cells.under.as_ref());
        let before: Vec<usize> = earlier
            .iter()
            .copied()
            .filter(|&t| t < e)
            .filter(|&t| {
                o_common
                    .as_ref()
                    .is_some_and(|c| over_of(t).is_some_and(|o| o.intersects(c)))
            })
            .collect();
        let under_of = |o: usize| rules[o].cells.under.as_ref();
        let (o_left, _) =
            sweep_earlier(o_common.as_ref(), &before, |_| None, under_of, universe).ok()?;
        let (u_left, _) =
            sweep_earlier(u_common.as_ref(), &before, |_| None, over_of, universe).ok()?;
        match known(!u_left.is_empty(), o_left.is_empty()) {
            Known::Yes => answer.conflicts.push(e),
            Known::Unknown => answer.unknown_conflicts = true,
            Known::No => {}
        }
    }
    // Not redundant: a point it decides that, once it is gone, a later rule surely decides
    // otherwise (or a log rule records), or no later rule possibly matches.
    let redecided = |point: &[u32; DIMS]| -> Option<&Cell> {
        if let Some(cell) = decided_before(point, i) {
            return Some(cell);
        }
        let mut first: Option<usize> = None;
        witnesses.any_candidate(point, |o| {
            if o > i
                && first.is_none_or(|f| o < f)
                && over_of(o).is_some_and(|c| contains(c, point))
            {
                first = Some(o);
            }
            false
        });
        let x = first?;
        let next = &rules[x];
        let surely = next
            .cells
            .under
            .as_ref()
            .is_some_and(|c| contains(c, point));
        let same = next.terminal() && next.action() == rule.action();
        if surely && !same {
            None
        } else {
            over_of(x)
        }
    };
    witnesses.search(under, None, POINT_TRIES, redecided)?;
    Some(answer)
}

/// How many times a point search moves out of a box before the sweep takes over.
const POINT_TRIES: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use netacl_eval::synthetic::{self, SyntheticConfig};

    /// Points settle questions exactly as the sweep would: on synthetic tenants (every signal,
    /// CIDR lists, `not_match`, log rules, mixed scopes, user-agent wildcards), analysed with
    /// and without them.
    #[test]
    fn points_answer_as_the_sweep_does_on_synthetic_tenants() {
        for (rules, seed) in [(40, 1), (60, 2), (80, 3), (120, 4), (150, 0x6e65_7461_636c)] {
            let config = SyntheticConfig {
                rules,
                cidrs: rules * 10,
                requests: 1,
                seed,
            };
            let set = synthetic::generate(&config).rule_set(&config).unwrap();
            let fast = analyze_with(&set, Strategy::PointsThenSweep);
            let sweep = analyze_with(&set, Strategy::SweepOnly);
            assert!(!sweep.findings.is_empty());
            // Every rule the sweep decides gets the same findings; the points may decide more
            // (a rule the sweep gives up on is not swept at all when points settle it).
            let undecided: std::collections::BTreeSet<&str> =
                sweep.undecided.iter().map(|u| u.rule_id.as_str()).collect();
            let decided = |a: &Analysis| -> Vec<Finding> {
                a.findings
                    .iter()
                    .filter(|f| !undecided.contains(f.rule_id.as_str()))
                    .cloned()
                    .collect()
            };
            assert_eq!(
                decided(&fast),
                decided(&sweep),
                "{rules} rules, seed {seed}"
            );
            for u in &fast.undecided {
                assert!(undecided.contains(u.rule_id.as_str()), "{u:?}");
            }
        }
    }
}

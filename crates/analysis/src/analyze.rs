//! The analysis: each rule's region swept against the rules that can meet it.

use netacl_model::{Action, NetworkAcl, RuleSet};

use crate::cells::{AtomSet, Cell, Region, TooComplex, DIMS, MAX_CELLS, MAX_WORK};
use crate::domain::{Domain, RuleCells, SCOPE};
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
    let mut region = Region::of(start.cloned());
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
            continue;
        };
        let candidates = index.query(i, over, &rules, &universe);
        let earlier: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&c| c < i && rules[c].terminal())
            .collect();
        let later: Vec<usize> = candidates.iter().copied().filter(|&c| c > i).collect();
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
            continue;
        };
        let shadowed = known(o_left.is_empty(), !u_left.is_empty());
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
                    Known::Yes => analysis.findings.push(Finding {
                        kind: FindingKind::Conflict,
                        rule_id: rule.id(),
                        by: vec![rules[e].id()],
                        detail: format!(
                            "{} ({}) decides requests this rule ({}) also matches: their order decides",
                            rules[e].id(),
                            rules[e].action().name(),
                            rule.action().name()
                        ),
                    }),
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

//! The analysis: one pass in evaluation order keeps the undecided region as a decision
//! diagram, so what each rule decides falls out; the findings are then read per rule.

use netacl_model::{Action, NetworkAcl, RuleSet};

use crate::bdd::{Bdd, Manager, FALSE, TRUE};
use crate::cells::{AtomSet, Cell, DIMS};
use crate::domain::{Domain, RuleCells, SCOPE};
use crate::{Analysis, Finding, FindingKind, Undecided};

/// A set on one dimension with at most this many atoms is indexed atom by atom.
const SMALL: u64 = 64;

struct Rule<'a> {
    acl: &'a NetworkAcl,
    cells: RuleCells,
    /// The requests it surely matches (`under`) and possibly matches (`over`).
    under: Bdd,
    over: Bdd,
}

impl Rule<'_> {
    fn action(&self) -> &Action {
        self.acl.spec.rule.action()
    }
    fn terminal(&self) -> bool {
        self.action().is_terminal()
    }
    fn id(&self) -> String {
        self.acl.id.to_string()
    }
}

/// Where each dimension's atoms sit among the diagram's variables: dimension by dimension (in
/// `ORDER`), each atom number in binary, most significant bit first.
struct Layout {
    order: [usize; DIMS],
    first: [u32; DIMS],
    bits: [u32; DIMS],
    universe: [u32; DIMS],
    /// For each variable: its dimension and the shift of its bit in the atom number.
    of_var: Vec<(u8, u8)>,
}

/// The dimensions from the root down: the request scope and the signals with few atoms
/// first, signals that rules name together next to each other (hostname and ASN, country and
/// ASN), the wide address and fingerprint dimensions last.
const ORDER: [usize; DIMS] = [SCOPE, 4, 5, 9, 3, 8, 6, 7, 1, 2, 10];


fn order() -> [usize; DIMS] {
    if let Some(v) = std::env::var_os("NETACL_ORDER") {
        let v: Vec<usize> = v.to_str().unwrap().split(',').map(|x| x.parse().unwrap()).collect();
        return v.try_into().unwrap();
    }
    ORDER
}

impl Layout {
    fn new(universe: &[u32; DIMS]) -> Self {
        let order = order();
        let mut first = [0; DIMS];
        let mut bits = [0; DIMS];
        let mut of_var = Vec::new();
        let mut next = 0;
        for &d in &order {
            let b = (32 - (universe[d].max(2) - 1).leading_zeros()).max(1);
            first[d] = next;
            bits[d] = b;
            for k in 0..b {
                of_var.push((d as u8, (b - 1 - k) as u8));
            }
            next += b;
        }
        Layout {
            order,
            first,
            bits,
            universe: *universe,
            of_var,
        }
    }

    /// The requests of a box.
    fn cell(&self, m: &mut Manager, cell: Option<&Cell>) -> Bdd {
        let Some(cell) = cell else { return FALSE };
        let mut acc = TRUE;
        for &d in self.order.iter().rev() {
            if let AtomSet::Ranges(r) = &cell.dims[d] {
                let ranges: Vec<(u64, u64)> =
                    r.iter().map(|&(lo, hi)| (u64::from(lo), u64::from(hi))).collect();
                acc = m.ranges(self.first[d], self.bits[d], &ranges, acc);
            }
        }
        acc
    }

    /// Every request: each dimension's atom number below its universe.
    fn valid(&self, m: &mut Manager) -> Bdd {
        let mut acc = TRUE;
        for &d in self.order.iter().rev() {
            if u64::from(self.universe[d]) < 1u64 << self.bits[d] {
                acc = m.ranges(
                    self.first[d],
                    self.bits[d],
                    &[(0, u64::from(self.universe[d]))],
                    acc,
                );
            }
        }
        acc
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

/// What one rule decides: the part of its `over` box that no earlier terminal rule surely
/// decides (`over`: it possibly decides these), and the part of its `under` box that no
/// earlier terminal rule possibly decides (`under`: it surely decides these). Equal when the
/// rule and every earlier rule meeting it are exact.
#[derive(Debug, Clone, Copy)]
struct Decides {
    over: Bdd,
    under: Bdd,
}

/// Analyses the active rules of `rules` (see the crate documentation).
pub(crate) fn analyze(rules: &RuleSet) -> Analysis {
    let mut active: Vec<&NetworkAcl> = rules.acls.iter().filter(|a| a.spec.active).collect();
    active.sort_by(|a, b| {
        (a.spec.priority, a.id.as_str().as_bytes())
            .cmp(&(b.spec.priority, b.id.as_str().as_bytes()))
    });
    let domain = Domain::new(active.iter().copied());
    let universe = domain.universe;
    let layout = Layout::new(&universe);
    let mut m = Manager::new();
    let rules: Vec<Rule<'_>> = active
        .iter()
        .map(|&acl| {
            let cells = domain.rule_cells(acl);
            let over = layout.cell(&mut m, cells.over.as_ref());
            let under = if cells.inexact.is_none() {
                over
            } else {
                layout.cell(&mut m, cells.under.as_ref())
            };
            Rule {
                acl,
                cells,
                under,
                over,
            }
        })
        .collect();

    // The pass: `possibly` holds the requests no earlier terminal rule surely decides,
    // `surely` those no earlier terminal rule possibly decides.
    let t0 = std::time::Instant::now();
    let valid = layout.valid(&mut m);
    let (mut possibly, mut surely) = (valid, valid);
    let mut decides: Vec<Decides> = Vec::with_capacity(rules.len());
    for rule in &rules {
        let d = Decides {
            over: m.and(rule.over, possibly),
            under: m.and(rule.under, surely),
        };
        decides.push(d);
        if rule.terminal() {
            possibly = m.and_not(possibly, rule.under);
            surely = m.and_not(surely, rule.over);
        }
    }
    if std::env::var_os("NETACL_ANALYSIS_STATS").is_some() {
        eprintln!("nodes after the pass: {} U {} in {:?}", m.len(), m.size(possibly), t0.elapsed());
        let prof = m.profile(possibly, layout.of_var.len());
        for &d in &layout.order {
            let s: usize = (layout.first[d]..layout.first[d] + layout.bits[d]).map(|v| prof[v as usize]).sum();
            eprintln!("  dim {d}: universe {} nodes {s}", universe[d]);
        }
        let total: usize = decides.iter().map(|d| m.size(d.over)).sum();
        eprintln!("  sum of R sizes {total}");
    }

    let mut index = Index::new(&rules, &universe);
    let mut analysis = Analysis::default();
    for (i, rule) in rules.iter().enumerate() {
        let Some(over_cell) = &rule.cells.over else {
            analysis.findings.push(Finding {
                kind: FindingKind::Shadowed,
                rule_id: rule.id(),
                by: Vec::new(),
                detail: "matches no request".to_owned(),
            });
            continue;
        };
        let candidates = index.query(i, over_cell, &rules, &universe);
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
        let mine = decides[i];
        let shadowed = known(mine.over == FALSE, mine.under != FALSE);
        match shadowed {
            Known::Yes => {
                let by: Vec<String> = candidates
                    .iter()
                    .copied()
                    .filter(|&e| e < i && rules[e].terminal())
                    .filter(|&e| m.meets(decides[e].over, rule.over))
                    .map(|e| rules[e].id())
                    .collect();
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
            for &e in candidates.iter().take_while(|&&e| e < i) {
                let earlier = &rules[e];
                if !earlier.terminal() || earlier.action() == rule.action() {
                    continue;
                }
                let theirs = decides[e];
                if theirs.over == FALSE {
                    continue;
                }
                let proven = m.meets(theirs.under, rule.under);
                let refuted = !proven && !m.meets(theirs.over, rule.over);
                match known(proven, refuted) {
                    Known::Yes => analysis.findings.push(conflict(earlier, rule)),
                    Known::Unknown => unknown_conflicts = true,
                    Known::No => {}
                }
            }
            if unknown_conflicts {
                reasons.push(format!("whether it conflicts: {}", inexact_reason()));
            }
        }

        // Redundancy (a log rule that is recorded is never redundant).
        if rule.terminal() && shadowed == Known::No {
            let later = || candidates.iter().copied().filter(|&c| c > i);
            let bad = |x: usize| !rules[x].terminal() || rules[x].action() != rule.action();
            // Proof: every request it possibly decides falls to a later rule deciding it the
            // same way before any rule deciding otherwise (or recording) meets it.
            let mut region = mine.over;
            let mut takers = Vec::new();
            let mut proven = true;
            for x in later() {
                if region == FALSE {
                    break;
                }
                if m.meets(region, rules[x].over) {
                    if bad(x) {
                        proven = false;
                        break;
                    }
                    takers.push(x);
                }
                region = m.and_not(region, rules[x].under);
            }
            proven &= region == FALSE;
            if proven {
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
            } else {
                // Refutation: a request it surely decides that, once it is gone, a later rule
                // surely decides otherwise (or records), or no later rule possibly decides.
                let mut region = mine.under;
                let mut refuted = None;
                for x in later() {
                    if region == FALSE {
                        refuted = Some(false);
                        break;
                    }
                    if bad(x) && m.meets(region, rules[x].under) {
                        refuted = Some(true);
                        break;
                    }
                    region = m.and_not(region, rules[x].over);
                }
                if !refuted.unwrap_or(region != FALSE) {
                    reasons.push(format!("whether it is redundant: {}", inexact_reason()));
                }
            }
        }
        if !reasons.is_empty() {
            analysis.undecided.push(Undecided {
                rule_id: rule.id(),
                reason: reasons.join("; "),
            });
        }
    }
    if std::env::var_os("NETACL_ANALYSIS_STATS").is_some() {
        eprintln!("nodes at the end: {}", m.len());
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

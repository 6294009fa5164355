//! The request space of one rule set, cut into atoms.
//!
//! Each signal is a dimension. Its atoms are the classes of values that every rule of the set
//! treats alike: for a value set (ASNs, countries, subdivisions, JA3, JA4, hostnames, exact user
//! agents, signature key ids) each value a rule names, then "any other value" (when one exists)
//! and "missing" (for user agents, each `*` pattern also contributes its shortest match, the
//! pattern without its stars, a value it surely matches, and one unlikely value stands for
//! "matched by none"); for an address signal the elementary intervals the rules' networks cut the
//! IPv4 and IPv6 spaces into (IPv4-mapped IPv6 addresses left out: a request's mapped address is
//! matched as IPv4), then "missing"; for the scope the three request scopes. A rule is then a
//! box, exactly (see [`RuleCells`]).

use std::collections::{BTreeSet, HashMap};

use ipnet::{Ipv4Net, Ipv6Net};
use netacl_model::{Criteria, NetworkAcl, RuleScope, Signal};

use crate::cells::{AtomSet, Cell, DIMS};

pub(crate) const SCOPE: usize = 0;

/// The dimension of a signal (`Managed` has none: it is never modelled).
fn dim_of(signal: Signal) -> Option<usize> {
    Some(match signal {
        Signal::ClientIp => 1,
        Signal::ConnectingIp => 2,
        Signal::Asn => 3,
        Signal::Country => 4,
        Signal::Subdivision => 5,
        Signal::Ja3 => 6,
        Signal::Ja4 => 7,
        Signal::UserAgent => 8,
        Signal::Hostname => 9,
        Signal::MessageSignature => 10,
        Signal::Managed => return None,
    })
}

/// A value-set dimension: the values rules name, "any other value", "missing".
#[derive(Debug, Default)]
struct ValueDim {
    index: HashMap<String, u32>,
    has_other: bool,
}

impl ValueDim {
    fn new(values: BTreeSet<String>, domain_size: Option<usize>) -> Self {
        let has_other = domain_size.is_none_or(|size| values.len() < size);
        let index = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| (v, i as u32))
            .collect();
        ValueDim { index, has_other }
    }

    fn universe(&self) -> u32 {
        self.index.len() as u32 + u32::from(self.has_other) + 1
    }

    fn set<'a>(&self, keys: impl Iterator<Item = String> + 'a) -> Vec<(u32, u32)> {
        keys.filter_map(|k| self.index.get(&k).map(|&i| (i, i + 1)))
            .collect()
    }
}

/// An address dimension: elementary intervals of the IPv4 space, then of the IPv6 space
/// without `::ffff:0:0/96`, then "missing".
#[derive(Debug, Default)]
struct AddressDim {
    v4: Vec<u32>,
    v6: Vec<u128>,
    /// The raw index of the IPv4-mapped interval among the IPv6 intervals.
    mapped: usize,
}

const MAPPED: (u128, u128) = (0xffff_0000_0000, 0xffff_ffff_ffff);

fn v6_bounds(net: &Ipv6Net) -> (u128, u128) {
    (u128::from(net.network()), u128::from(net.broadcast()))
}

fn v4_bounds(net: &Ipv4Net) -> (u32, u32) {
    (u32::from(net.network()), u32::from(net.broadcast()))
}

/// Whether an IPv6 network lies inside `::ffff:0:0/96` (it matches no request).
fn only_mapped(net: &Ipv6Net) -> bool {
    let (lo, hi) = v6_bounds(net);
    lo >= MAPPED.0 && hi <= MAPPED.1
}

impl AddressDim {
    fn new(v4: &[Ipv4Net], v6: &[Ipv6Net]) -> Self {
        let mut starts4: Vec<u32> = vec![0];
        for net in v4 {
            let (lo, hi) = v4_bounds(net);
            starts4.push(lo);
            if let Some(next) = hi.checked_add(1) {
                starts4.push(next);
            }
        }
        starts4.sort_unstable();
        starts4.dedup();
        let mut starts6: Vec<u128> = vec![0, MAPPED.0, MAPPED.1 + 1];
        for net in v6.iter().filter(|n| !only_mapped(n)) {
            let (lo, hi) = v6_bounds(net);
            starts6.push(lo);
            if let Some(next) = hi.checked_add(1) {
                starts6.push(next);
            }
        }
        starts6.sort_unstable();
        starts6.dedup();
        let mapped = starts6.binary_search(&MAPPED.0).unwrap_or(0);
        AddressDim {
            v4: starts4,
            v6: starts6,
            mapped,
        }
    }

    fn v6_atoms(&self) -> u32 {
        self.v6.len() as u32 - 1
    }

    fn universe(&self) -> u32 {
        self.v4.len() as u32 + self.v6_atoms() + 1
    }

    fn v4_range(&self, net: &Ipv4Net) -> (u32, u32) {
        let (lo, hi) = v4_bounds(net);
        let first = self.v4.partition_point(|&s| s < lo) as u32;
        let end = match hi.checked_add(1) {
            Some(next) => self.v4.partition_point(|&s| s < next) as u32,
            None => self.v4.len() as u32,
        };
        (first, end)
    }

    fn v6_range(&self, net: &Ipv6Net) -> Vec<(u32, u32)> {
        if only_mapped(net) {
            return Vec::new();
        }
        let (lo, hi) = v6_bounds(net);
        let first = self.v6.partition_point(|&s| s < lo);
        let end = match hi.checked_add(1) {
            Some(next) => self.v6.partition_point(|&s| s < next),
            None => self.v6.len(),
        };
        // Raw interval indexes first..end; the mapped one (raw `mapped`) is not an atom.
        let base = self.v4.len() as u32;
        let shift = |raw: usize| -> u32 {
            let id = if raw > self.mapped { raw - 1 } else { raw };
            base + id as u32
        };
        vec![(shift(first), shift(end))]
    }

    fn set(&self, v4: Option<&[Ipv4Net]>, v6: Option<&[Ipv6Net]>) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = v4.unwrap_or(&[]).iter().map(|n| self.v4_range(n)).collect();
        for net in v6.unwrap_or(&[]) {
            out.extend(self.v6_range(net));
        }
        out
    }
}

/// The atoms of every dimension for one rule set.
#[derive(Debug)]
pub(crate) struct Domain {
    pub(crate) universe: [u32; DIMS],
    client: AddressDim,
    connecting: AddressDim,
    values: HashMap<usize, ValueDim>,
    /// The user agents rules name exactly (no `*`), in atom order.
    ua_literals: Vec<String>,
}

fn nets4(c: &Criteria, connecting: bool) -> Option<Vec<Ipv4Net>> {
    let list = if connecting {
        c.connecting_ipv4_cidrs()
    } else {
        c.ipv4_cidrs()
    };
    list.map(|l| l.iter().map(|e| e.net()).collect())
}

fn nets6(c: &Criteria, connecting: bool) -> Option<Vec<Ipv6Net>> {
    let list = if connecting {
        c.connecting_ipv6_cidrs()
    } else {
        c.ipv6_cidrs()
    };
    list.map(|l| l.iter().map(|e| e.net()).collect())
}

/// The canonical keys a criteria lists for a value dimension (the form requests compare in).
fn keys(c: &Criteria, d: usize) -> Vec<String> {
    match d {
        3 => c
            .asns()
            .unwrap_or(&[])
            .iter()
            .map(|a| a.to_string())
            .collect(),
        4 => c
            .geo_country_codes()
            .unwrap_or(&[])
            .iter()
            .map(|x| x.text().to_ascii_uppercase())
            .collect(),
        5 => c
            .geo_subdivision_codes()
            .unwrap_or(&[])
            .iter()
            .map(|x| x.text().to_ascii_uppercase())
            .collect(),
        6 => c
            .ja3_fingerprints()
            .unwrap_or(&[])
            .iter()
            .map(|x| x.text().to_ascii_lowercase())
            .collect(),
        7 => c
            .ja4_fingerprints()
            .unwrap_or(&[])
            .iter()
            .map(|x| x.text().to_ascii_lowercase())
            .collect(),
        8 => c
            .user_agents()
            .unwrap_or(&[])
            .iter()
            .filter(|p| !p.has_wildcard())
            .map(|p| p.text().to_owned())
            .collect(),
        9 => c
            .hostnames()
            .unwrap_or(&[])
            .iter()
            .map(|h| h.text().trim_end_matches('.').to_ascii_lowercase())
            .collect(),
        10 => c
            .http_message_signature()
            .unwrap_or(&[])
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect(),
        _ => Vec::new(),
    }
}

/// The value dimensions and how many values each can take at most (`None`: unbounded).
const VALUE_DIMS: [(usize, Option<usize>); 8] = [
    (3, None),
    (4, Some(26 * 26)),
    (5, None),
    (6, None),
    (7, None),
    (8, None),
    (9, None),
    (10, None),
];

/// A user agent that stands for "none of the patterns" where none matches it.
const UNLIKELY_USER_AGENT: &str = "\u{7f}netacl-analysis\u{7f}";

/// Whether a user-agent pattern matches every present user agent (only `*`s).
fn matches_everything(pattern: &str) -> bool {
    !pattern.is_empty() && pattern.bytes().all(|b| b == b'*')
}

/// A rule as boxes: `under ⊆ the requests it matches ⊆ over`. Both are the same box (and exact)
/// unless the rule names something the atoms cannot express: a managed list (content not
/// modelled) or a user-agent pattern with a `*` (it matches some of the "other" user agents).
#[derive(Debug, Clone)]
pub(crate) struct RuleCells {
    pub(crate) under: Option<Cell>,
    pub(crate) over: Option<Cell>,
    /// Why `under` and `over` differ; `None` when they are the same box.
    pub(crate) inexact: Option<String>,
}

impl Domain {
    /// The atoms of the active rules of `acls`.
    pub(crate) fn new<'a>(acls: impl Iterator<Item = &'a NetworkAcl> + Clone) -> Self {
        let criteria = || acls.clone().flat_map(|acl| acl.spec.rule.criteria());
        let address = |connecting: bool| {
            let mut v4 = Vec::new();
            let mut v6 = Vec::new();
            for c in criteria() {
                v4.extend(nets4(c, connecting).unwrap_or_default());
                v6.extend(nets6(c, connecting).unwrap_or_default());
            }
            AddressDim::new(&v4, &v6)
        };
        let client = address(false);
        let connecting = address(true);
        let mut values = HashMap::new();
        let mut ua_literals = Vec::new();
        for (d, size) in VALUE_DIMS {
            let mut set: BTreeSet<String> = criteria().flat_map(|c| keys(c, d)).collect();
            if d == 8 {
                // Each wildcard pattern's shortest match (its stars removed) is an atom of its
                // own, a user agent the pattern surely matches.
                let witnesses: Vec<String> = criteria()
                    .flat_map(|c| {
                        c.user_agents()
                            .unwrap_or(&[])
                            .iter()
                            .filter(|p| p.has_wildcard() && !matches_everything(p.text()))
                            .map(|p| p.text().replace('*', ""))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                // And one value few patterns match, so that "a user agent none of them
                // matches" usually has a concrete witness too (patterns are tried on it like
                // on every value, so it is exact whatever they are).
                if !witnesses.is_empty() {
                    set.insert(UNLIKELY_USER_AGENT.to_owned());
                }
                set.extend(witnesses);
                ua_literals = set.iter().cloned().collect();
            }
            values.insert(d, ValueDim::new(set, size));
        }
        let mut universe = [0u32; DIMS];
        universe[SCOPE] = 3;
        universe[1] = client.universe();
        universe[2] = connecting.universe();
        for (d, _) in VALUE_DIMS {
            universe[d] = values[&d].universe();
        }
        Domain {
            universe,
            client,
            connecting,
            values,
            ua_literals,
        }
    }

    /// The request scopes a rule scope covers, as atoms (management 0, authentication 1,
    /// dynamic client registration 2).
    fn scope_set(scope: RuleScope) -> AtomSet {
        match scope {
            RuleScope::Tenant => AtomSet::Full,
            RuleScope::Management => AtomSet::Ranges(std::sync::Arc::new([(0, 1)])),
            RuleScope::Authentication => AtomSet::Ranges(std::sync::Arc::new([(1, 2)])),
            RuleScope::DynamicClientRegistration => AtomSet::Ranges(std::sync::Arc::new([(2, 3)])),
        }
    }

    /// The atoms a criteria's list for `signal` matches: `(surely, possibly)`; equal except for
    /// user-agent patterns with a `*`. "Missing" is in neither.
    fn listed(&self, c: &Criteria, signal: Signal, d: usize) -> (AtomSet, AtomSet) {
        let u = self.universe[d];
        let ranges = match signal {
            Signal::ClientIp => self
                .client
                .set(nets4(c, false).as_deref(), nets6(c, false).as_deref()),
            Signal::ConnectingIp => self
                .connecting
                .set(nets4(c, true).as_deref(), nets6(c, true).as_deref()),
            _ => self.values[&d].set(keys(c, d).into_iter()),
        };
        let empty = || AtomSet::Ranges(std::sync::Arc::new([]));
        let surely = AtomSet::from_ranges(ranges, u).unwrap_or_else(empty);
        if signal != Signal::UserAgent {
            return (surely.clone(), surely);
        }
        // Wildcard patterns: the literal atoms they match surely, "other" possibly; a pattern
        // of only `*` matches every present user agent.
        let dim = &self.values[&d];
        let other = dim.index.len() as u32;
        let present = (0, u - 1);
        let mut sure = surely.ranges(u).to_vec();
        if matches!(surely, AtomSet::Ranges(ref r) if r.is_empty()) {
            sure.clear();
        }
        let mut possible = sure.clone();
        for pattern in c.user_agents().unwrap_or(&[]).iter() {
            if !pattern.has_wildcard() {
                continue;
            }
            if matches_everything(pattern.text()) {
                sure.push(present);
                possible.push(present);
                continue;
            }
            for (i, literal) in self.ua_literals.iter().enumerate() {
                if pattern.matches(literal) {
                    sure.push((i as u32, i as u32 + 1));
                    possible.push((i as u32, i as u32 + 1));
                }
            }
            possible.push((other, other + 1));
        }
        (
            AtomSet::from_ranges(sure, u).unwrap_or_else(empty),
            AtomSet::from_ranges(possible, u).unwrap_or_else(empty),
        )
    }

    /// The rule's boxes.
    pub(crate) fn rule_cells(&self, acl: &NetworkAcl) -> RuleCells {
        let rule = &acl.spec.rule;
        let u = &self.universe;
        let mut under = Some(Cell::full());
        let mut over = Some(Cell::full());
        let mut reasons: Vec<String> = Vec::new();
        let restrict = |cell: &mut Option<Cell>, d: usize, set: Option<AtomSet>| {
            let keep = match (cell.as_mut(), set) {
                (Some(c), Some(set)) => c.restrict(d, &set, u),
                _ => false,
            };
            if !keep {
                *cell = None;
            }
        };
        restrict(&mut under, SCOPE, Some(Self::scope_set(rule.scope())));
        restrict(&mut over, SCOPE, Some(Self::scope_set(rule.scope())));
        let nonempty = |s: AtomSet| match s {
            AtomSet::Ranges(ref r) if r.is_empty() => None,
            s => Some(s),
        };
        for (criteria, negated) in [(rule.match_criteria(), false), (rule.not_match(), true)] {
            let Some(c) = criteria else { continue };
            for signal in c.signals() {
                let Some(d) = dim_of(signal) else {
                    // A managed list: its content is not modelled.
                    let names: Vec<&str> = c
                        .auth0_managed()
                        .unwrap_or(&[])
                        .iter()
                        .map(|n| n.as_str())
                        .collect();
                    reasons.push(format!(
                        "names the managed list(s) {}, whose content the analysis does not model",
                        names.join(", ")
                    ));
                    under = None;
                    continue;
                };
                let (surely, possibly) = self.listed(c, signal, d);
                if surely != possibly {
                    let patterns: Vec<&str> = c
                        .user_agents()
                        .unwrap_or(&[])
                        .iter()
                        .filter(|p| p.has_wildcard() && !matches_everything(p.text()))
                        .map(|p| p.text())
                        .collect();
                    reasons.push(format!(
                        "user-agent pattern(s) {} match values the analysis cannot enumerate",
                        patterns
                            .iter()
                            .map(|p| format!("{p:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                if negated {
                    // Not listed: the complement (a missing value is never listed).
                    restrict(&mut under, d, possibly.complement(u[d]));
                    restrict(&mut over, d, surely.complement(u[d]));
                } else {
                    restrict(&mut under, d, nonempty(surely));
                    restrict(&mut over, d, nonempty(possibly));
                }
            }
        }
        RuleCells {
            under,
            over,
            inexact: (!reasons.is_empty()).then(|| reasons.join("; ")),
        }
    }
}

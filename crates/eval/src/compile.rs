//! Compiling a rule set into a [`CompiledPolicy`].

use std::sync::Arc;
use std::time::Instant;

use ipnet::{Ipv4Net, Ipv6Net};
use netacl_model::{
    Action, Criteria, Limits, ManagedListName, NetworkAcl, RequestScope, RuleScope, RuleSet, Signal,
};

use crate::geo::GeoValues;
use crate::hash::{ja3_key, random_seed, short_key_caseless, ByteMap, CountryTable, FixedMap};
use crate::managed::{ManagedIndex, MASKS};
use crate::policy::{
    bit, signal_name, ActionCode, CompiledPolicy, EmptyListRule, IndexKind, IndexStats, Indexes,
    ManagedListUse, PolicyStats, RuleMeta, SignalSet,
};
use crate::postings::{Postings, EXCLUDED_LIST, MEMBERS_LIST, NO_RULE, REQUEST_SCOPES};
use crate::range::{RangeTable, NONE};
use crate::useragent::UserAgentIndex;

/// Why a rule set could not be compiled. The policy in service stays as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The set holds more rules than [`Limits::max_rules_per_set`].
    #[error("the rule set holds {rules} rules, more than the limit of {limit}")]
    TooManyRules {
        /// Rules in the set.
        rules: usize,
        /// The limit.
        limit: usize,
    },
    /// The set holds more entries than [`Limits::max_entries_per_set`].
    #[error("the rule set holds {entries} entries, more than the limit of {limit}")]
    TooManyEntries {
        /// Entries over all rules.
        entries: usize,
        /// The limit.
        limit: usize,
    },
    /// One rule holds more entries than [`Limits::max_entries_per_rule`].
    #[error("rule {id} holds {entries} entries, more than the limit of {limit} per rule")]
    RuleTooLarge {
        /// The rule's id.
        id: String,
        /// Entries in the rule.
        entries: usize,
        /// The limit.
        limit: usize,
    },
    /// Two records carry the same id.
    #[error("rule id {id} appears twice (records {first} and {second})")]
    DuplicateId {
        /// The id.
        id: String,
        /// Index of the first record with it.
        first: usize,
        /// Index of the second record with it.
        second: usize,
    },
}

/// Estimated share of requests that carry one listed value of a signal: the cost model that
/// picks each rule's anchor (see the crate documentation).
fn value_share(signal: Signal) -> f64 {
    match signal {
        Signal::ClientIp | Signal::ConnectingIp => 0.0, // computed from the prefix length
        Signal::Asn => 1.0 / 2000.0,
        Signal::Country => 1.0 / 20.0,
        Signal::Subdivision => 1.0 / 200.0,
        Signal::Ja3 | Signal::Ja4 => 1.0 / 50.0,
        Signal::UserAgent => 1.0 / 100.0,
        Signal::Hostname => 1.0 / 3.0,
        Signal::Managed => 0.0, // computed from the lists' content
        // A tenant that names its proxy's key usually sees most requests signed by it.
        Signal::MessageSignature => 1.0 / 2.0,
    }
}

fn v4_share(net: &Ipv4Net) -> f64 {
    (-f64::from(net.prefix_len())).exp2().max((-24f64).exp2())
}

fn v6_share(net: &Ipv6Net) -> f64 {
    // Relative to the global unicast space 2000::/3.
    (3.0 - f64::from(net.prefix_len()))
        .exp2()
        .clamp((-24f64).exp2(), 1.0)
}

/// The expected share of requests for which `criteria`'s `signal` list hits.
fn signal_cost(criteria: &Criteria, signal: Signal, managed: &ManagedIndex) -> f64 {
    let sum: f64 = match signal {
        Signal::Managed => managed.share(criteria.auth0_managed().unwrap_or(&[])),
        Signal::ClientIp => {
            criteria
                .ipv4_cidrs()
                .unwrap_or(&[])
                .iter()
                .map(|e| v4_share(&e.net()))
                .sum::<f64>()
                + criteria
                    .ipv6_cidrs()
                    .unwrap_or(&[])
                    .iter()
                    .map(|e| v6_share(&e.net()))
                    .sum::<f64>()
        }
        Signal::ConnectingIp => {
            criteria
                .connecting_ipv4_cidrs()
                .unwrap_or(&[])
                .iter()
                .map(|e| v4_share(&e.net()))
                .sum::<f64>()
                + criteria
                    .connecting_ipv6_cidrs()
                    .unwrap_or(&[])
                    .iter()
                    .map(|e| v6_share(&e.net()))
                    .sum::<f64>()
        }
        Signal::UserAgent => criteria
            .user_agents()
            .unwrap_or(&[])
            .iter()
            .map(|p| {
                if p.text().chars().all(|c| c == '*') {
                    1.0
                } else if p.has_wildcard() {
                    0.2
                } else {
                    value_share(Signal::UserAgent)
                }
            })
            .sum(),
        other => member_len(criteria, other) as f64 * value_share(other),
    };
    sum.min(1.0)
}

fn member_len(criteria: &Criteria, signal: Signal) -> usize {
    match signal {
        Signal::ClientIp => {
            criteria.ipv4_cidrs().map_or(0, <[_]>::len)
                + criteria.ipv6_cidrs().map_or(0, <[_]>::len)
        }
        Signal::ConnectingIp => {
            criteria.connecting_ipv4_cidrs().map_or(0, <[_]>::len)
                + criteria.connecting_ipv6_cidrs().map_or(0, <[_]>::len)
        }
        Signal::Asn => criteria.asns().map_or(0, <[_]>::len),
        Signal::Country => criteria.geo_country_codes().map_or(0, <[_]>::len),
        Signal::Subdivision => criteria.geo_subdivision_codes().map_or(0, <[_]>::len),
        Signal::Ja3 => criteria.ja3_fingerprints().map_or(0, <[_]>::len),
        Signal::Ja4 => criteria.ja4_fingerprints().map_or(0, <[_]>::len),
        Signal::UserAgent => criteria.user_agents().map_or(0, <[_]>::len),
        Signal::Hostname => criteria.hostnames().map_or(0, <[_]>::len),
        Signal::Managed => criteria.auth0_managed().map_or(0, <[_]>::len),
        Signal::MessageSignature => criteria.http_message_signature().map_or(0, <[_]>::len),
    }
}

/// The signal of `criteria` whose list a random request is least likely to hit.
pub(crate) fn choose_anchor(criteria: &Criteria, managed: &ManagedIndex) -> Option<Signal> {
    let mut best: Option<(f64, Signal)> = None;
    for signal in criteria.signals() {
        let cost = signal_cost(criteria, signal, managed);
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, signal));
        }
    }
    best.map(|(_, s)| s)
}

/// Entries gathered per signal before grouping: `(key, list, rule)`.
#[derive(Default)]
struct Collected {
    client_v4: Vec<((u32, u32), u8, u32)>,
    client_v6: Vec<((u128, u128), u8, u32)>,
    connecting_v4: Vec<((u32, u32), u8, u32)>,
    connecting_v6: Vec<((u128, u128), u8, u32)>,
    asn: Vec<(u32, u8, u32)>,
    country: Vec<([u8; 2], u8, u32)>,
    subdivision: Vec<(u64, u8, u32)>,
    ja3: Vec<([u64; 2], u8, u32)>,
    ja4: Vec<(String, u8, u32)>,
    user_agent: Vec<(String, u8, u32)>,
    hostname: Vec<(String, u8, u32)>,
    /// `(list name index, list code, rule)`: compiled into the per-mask postings.
    managed: Vec<(u8, u8, u32)>,
    /// Key ids of `http_message_signature`, compared exactly.
    message_signature: Vec<(String, u8, u32)>,
}

/// The key of a network: its first address and the complement of its last (see [`ranges`]).
fn v4_range(net: Ipv4Net) -> (u32, u32) {
    (u32::from(net.network()), !u32::from(net.broadcast()))
}

/// The key of a network: its first address and the complement of its last (see [`ranges`]).
fn v6_range(net: Ipv6Net) -> (u128, u128) {
    (u128::from(net.network()), !u128::from(net.broadcast()))
}

impl Collected {
    /// Adds every entry of one criteria object under the list codes `lists` for `signal`.
    fn add(&mut self, criteria: &Criteria, rule: u32, lists_for: &dyn Fn(Signal) -> Vec<u8>) {
        for signal in criteria.signals() {
            let lists = lists_for(signal);
            for &list in &lists {
                match signal {
                    Signal::ClientIp => {
                        for e in criteria.ipv4_cidrs().unwrap_or(&[]) {
                            self.client_v4.push((v4_range(e.net()), list, rule));
                        }
                        for e in criteria.ipv6_cidrs().unwrap_or(&[]) {
                            self.client_v6.push((v6_range(e.net()), list, rule));
                        }
                    }
                    Signal::ConnectingIp => {
                        for e in criteria.connecting_ipv4_cidrs().unwrap_or(&[]) {
                            self.connecting_v4.push((v4_range(e.net()), list, rule));
                        }
                        for e in criteria.connecting_ipv6_cidrs().unwrap_or(&[]) {
                            self.connecting_v6.push((v6_range(e.net()), list, rule));
                        }
                    }
                    Signal::Asn => {
                        for &asn in criteria.asns().unwrap_or(&[]) {
                            self.asn.push((asn, list, rule));
                        }
                    }
                    Signal::Country => {
                        for c in criteria.geo_country_codes().unwrap_or(&[]) {
                            self.country.push((c.canonical(), list, rule));
                        }
                    }
                    Signal::Subdivision => {
                        for c in criteria.geo_subdivision_codes().unwrap_or(&[]) {
                            // A valid code has at most six bytes (`CC-XXX`).
                            if let Some(key) = short_key_caseless(c.text().as_bytes()) {
                                self.subdivision.push((key, list, rule));
                            }
                        }
                    }
                    Signal::Ja3 => {
                        for f in criteria.ja3_fingerprints().unwrap_or(&[]) {
                            self.ja3.push((ja3_key(f.bytes()), list, rule));
                        }
                    }
                    Signal::Ja4 => {
                        for f in criteria.ja4_fingerprints().unwrap_or(&[]) {
                            self.ja4.push((f.canonical(), list, rule));
                        }
                    }
                    Signal::UserAgent => {
                        for p in criteria.user_agents().unwrap_or(&[]) {
                            self.user_agent.push((p.text().to_owned(), list, rule));
                        }
                    }
                    Signal::Hostname => {
                        for h in criteria.hostnames().unwrap_or(&[]) {
                            self.hostname.push((h.canonical(), list, rule));
                        }
                    }
                    Signal::Managed => {
                        for name in criteria.auth0_managed().unwrap_or(&[]) {
                            self.managed.push((name.index() as u8, list, rule));
                        }
                    }
                    Signal::MessageSignature => {
                        for id in criteria.http_message_signature().unwrap_or(&[]) {
                            self.message_signature
                                .push((id.as_str().to_owned(), list, rule));
                        }
                    }
                }
            }
        }
    }
}

/// Stores postings, dropping the anchors no request can reach (see [`Grouper::cut`]).
struct Grouper {
    postings: Postings,
    /// Per rule ordinal: the rule decides whenever its anchor holds (a terminal action, no
    /// other `match` signal, no `not_match`).
    decides_alone: Vec<bool>,
    /// Per request scope: the ordinal of the first rule without conditions that decides every
    /// request of the scope (`match_all` with a terminal action), [`NO_RULE`] when none. No
    /// rule after it can be tried for that scope.
    scope_cut: [u32; REQUEST_SCOPES],
    /// The postings stored for several rules, by content: values listed by the same rules in
    /// the same roles (a block list written into two rules) share one, so an address index
    /// holds few distinct postings and packs them in its lines' codes.
    stored: std::collections::HashMap<Vec<(u8, u32)>, u32, foldhash::fast::RandomState>,
}

impl Grouper {
    /// Sorts `(key, list, rule)` triples and stores one posting per distinct key.
    fn group<K: Ord>(&mut self, mut items: Vec<(K, u8, u32)>) -> Vec<(K, u32)> {
        items.sort_unstable();
        self.group_sorted(items)
    }

    /// Stores one posting per distinct key of `(key, list, rule)` triples sorted by all three.
    /// One buffer holds the run of the current key (no allocation per key).
    fn group_sorted<K: Ord>(&mut self, items: Vec<(K, u8, u32)>) -> Vec<(K, u32)> {
        let mut out = Vec::with_capacity(items.len());
        let mut run: Vec<(u8, u32)> = Vec::new();
        let mut items = items.into_iter().peekable();
        while let Some((key, list, rule)) = items.next() {
            run.clear();
            run.push((list, rule));
            while let Some((_, l, r)) = items.next_if(|(k, _, _)| *k == key) {
                run.push((l, r));
            }
            self.cut(&mut run);
            // A value whose rules were all cut concerns no request: left out of the index.
            if let Some(&(_, rule)) = run.first() {
                let reference = if run.iter().all(|&(_, r)| r == rule) {
                    // One rule: inline, nothing stored (or, rarely, stored as it is).
                    self.postings.add_sorted(&run)
                } else if let Some(&reference) = self.stored.get(&run) {
                    reference
                } else {
                    let reference = self.postings.add_sorted(&run);
                    self.stored.insert(run.clone(), reference);
                    reference
                };
                out.push((key, reference));
            }
        }
        out
    }

    /// The posting of each managed-list mask: the rules naming any list of the mask, in their
    /// roles. Lists that no rule names, or that hold no entry (a lookup never reports them),
    /// are left out of the mask first, and equal postings are stored once, so there are at
    /// most two to the number of named lists (usually one).
    fn managed(&mut self, items: Vec<(u8, u8, u32)>, with_entries: usize) -> [u32; MASKS] {
        let mut out = [NONE; MASKS];
        let named = items.iter().fold(0usize, |m, &(name, _, _)| m | 1 << name) & with_entries;
        let mut stored: Vec<(Vec<(u8, u32)>, u32)> = Vec::new();
        let mut run = Vec::new();
        for mask in 1..MASKS {
            if mask & !named != 0 {
                out[mask] = out[mask & named];
                continue;
            }
            run.clear();
            run.extend(
                items
                    .iter()
                    .filter(|&&(name, _, _)| mask & (1 << name) != 0)
                    .map(|&(_, list, rule)| (list, rule)),
            );
            run.sort_unstable();
            run.dedup();
            self.cut(&mut run);
            if run.is_empty() {
                continue;
            }
            out[mask] = match stored.iter().find(|(r, _)| *r == run) {
                Some(&(_, reference)) => reference,
                None => {
                    let reference = self.postings.add_sorted(&run);
                    stored.push((run.clone(), reference));
                    reference
                }
            };
        }
        out
    }

    /// Drops, from each anchor list of a run sorted by list then rule, the rules after the
    /// first one that decides alone: a request reaching that list is decided by that rule, or
    /// by an earlier one, so the later rules of the list could never be tried. Likewise the
    /// rules after the scope's cut (a `match_all` rule decides every request of the scope
    /// there). Member and excluded lists are kept whole (they answer for rules anchored
    /// elsewhere).
    fn cut(&self, run: &mut Vec<(u8, u32)>) {
        let mut cut_list = None;
        run.retain(|&(list, rule)| {
            if usize::from(list) >= REQUEST_SCOPES {
                return true;
            }
            if cut_list == Some(list) || rule > self.scope_cut[usize::from(list)] {
                return false;
            }
            if self.decides_alone[rule as usize] {
                cut_list = Some(list);
            }
            true
        });
    }
}

/// Address entries are keyed `(first, !last)`: sorting them puts outer networks before inner
/// ones that start at the same address, the order [`RangeTable::build`] needs, so it does not
/// sort a second time.
fn ranges<A: crate::range::Address>(grouped: Vec<((A, A), u32)>) -> RangeTable<A> {
    RangeTable::build(
        grouped
            .into_iter()
            .map(|((first, not_last), posting)| (first, !not_last, posting))
            .collect(),
    )
}

fn fixed_map<K: crate::hash::FixedKey + Ord>(
    seed: u64,
    items: Vec<(K, u8, u32)>,
    grouper: &mut Grouper,
) -> Option<FixedMap<K>> {
    let grouped = grouper.group(items);
    (!grouped.is_empty()).then(|| FixedMap::build(seed, &grouped))
}

fn byte_map(seed: u64, items: Vec<(String, u8, u32)>, grouper: &mut Grouper) -> Option<ByteMap> {
    let grouped = grouper.group(items);
    if grouped.is_empty() {
        return None;
    }
    Some(ByteMap::build_caseless(
        seed,
        grouped.iter().map(|(k, p)| (k.as_bytes(), *p)),
    ))
}

/// A map from exact bytes (key ids are case-sensitive).
fn exact_byte_map(
    seed: u64,
    items: Vec<(String, u8, u32)>,
    grouper: &mut Grouper,
) -> Option<ByteMap> {
    let grouped = grouper.group(items);
    if grouped.is_empty() {
        return None;
    }
    Some(ByteMap::build(
        seed,
        grouped.iter().map(|(k, p)| (k.as_bytes(), *p)),
    ))
}

fn covered_scopes(scope: RuleScope) -> impl Iterator<Item = u8> {
    RequestScope::ALL
        .into_iter()
        .filter(move |r| scope.covers(*r))
        .map(|r| crate::policy::scope_index(r) as u8)
}

impl CompiledPolicy {
    /// Compiles a rule set under the default [`Limits`].
    ///
    /// Inactive rules are left out; the others are ordered by ascending priority, ties broken
    /// by id in byte order.
    pub fn compile(rules: &RuleSet) -> Result<CompiledPolicy, CompileError> {
        Self::compile_with_limits(rules, &Limits::default())
    }

    /// Compiles a rule set, refusing one beyond `limits`. No managed list is configured: a
    /// rule naming one holds no entry of it (see [`CompiledPolicy::compile_with_lists`]).
    pub fn compile_with_limits(
        rules: &RuleSet,
        limits: &Limits,
    ) -> Result<CompiledPolicy, CompileError> {
        Self::compile_with_lists(rules, limits, &ManagedIndex::empty())
    }

    /// Compiles a rule set against the managed lists of `managed` (compiled once, shared by
    /// every policy compiled with it), refusing a set beyond `limits`.
    pub fn compile_with_lists(
        rules: &RuleSet,
        limits: &Limits,
        managed: &Arc<ManagedIndex>,
    ) -> Result<CompiledPolicy, CompileError> {
        let started = Instant::now();
        if rules.acls.len() > limits.max_rules_per_set {
            return Err(CompileError::TooManyRules {
                rules: rules.acls.len(),
                limit: limits.max_rules_per_set,
            });
        }
        let mut total_entries = 0usize;
        for acl in &rules.acls {
            let entries = acl.spec.entry_count();
            if entries > limits.max_entries_per_rule {
                return Err(CompileError::RuleTooLarge {
                    id: acl.id.to_string(),
                    entries,
                    limit: limits.max_entries_per_rule,
                });
            }
            total_entries += entries;
        }
        if total_entries > limits.max_entries_per_set {
            return Err(CompileError::TooManyEntries {
                entries: total_entries,
                limit: limits.max_entries_per_set,
            });
        }
        let mut by_id: Vec<usize> = (0..rules.acls.len()).collect();
        by_id.sort_by(|&a, &b| rules.acls[a].id.cmp(&rules.acls[b].id).then(a.cmp(&b)));
        for pair in by_id.windows(2) {
            if rules.acls[pair[0]].id == rules.acls[pair[1]].id {
                return Err(CompileError::DuplicateId {
                    id: rules.acls[pair[0]].id.to_string(),
                    first: pair[0],
                    second: pair[1],
                });
            }
        }

        Ok(Self::build(rules, managed, started))
    }

    /// Compiles a rule set already checked against the limits (cannot fail).
    fn build(rules: &RuleSet, managed: &Arc<ManagedIndex>, started: Instant) -> CompiledPolicy {
        let mut order: Vec<&NetworkAcl> = rules.acls.iter().filter(|a| a.spec.active).collect();
        order.sort_by(|a, b| {
            a.spec
                .priority
                .cmp(&b.spec.priority)
                .then_with(|| a.id.as_str().as_bytes().cmp(b.id.as_str().as_bytes()))
        });

        let mut collected = Collected::default();
        let mut meta = Vec::with_capacity(order.len());
        let mut ids = Vec::with_capacity(order.len());
        let mut redirects = Vec::with_capacity(order.len());
        let mut unanchored: [Vec<u32>; REQUEST_SCOPES] = Default::default();
        let mut needed = SignalSet::EMPTY;
        let mut anchor_counts = [0usize; Signal::ALL.len()];
        // Per rule: its anchor and the request scopes it covers.
        let mut rule_anchors: Vec<(Option<Signal>, Vec<u8>)> = Vec::with_capacity(order.len());
        let mut list_rules = [0usize; ManagedListName::ALL.len()];
        let mut empty_list_rules = Vec::new();
        let mut entries = 0usize;

        for (ordinal, acl) in order.iter().enumerate() {
            let ordinal = ordinal as u32;
            let rule = &acl.spec.rule;
            entries += acl.spec.entry_count();
            let scopes: Vec<u8> = covered_scopes(rule.scope()).collect();
            let mut check = 0u16;
            let mut exclude = 0u16;
            for criteria in rule.criteria() {
                for &name in criteria.auth0_managed().unwrap_or(&[]) {
                    list_rules[name.index()] += 1;
                    if !managed.has_entries(name) {
                        empty_list_rules.push(EmptyListRule {
                            rule_id: acl.id.to_string(),
                            list: name.as_str(),
                            configured: managed.is_configured(name),
                        });
                    }
                }
            }
            let mut anchor = None;
            if let Some(criteria) = rule.match_criteria() {
                anchor = choose_anchor(criteria, managed);
                for signal in criteria.signals() {
                    needed.insert(signal);
                    if Some(signal) != anchor {
                        check |= bit(signal);
                    }
                }
                if let Some(anchor) = anchor {
                    anchor_counts[anchor as usize] += 1;
                }
                collected.add(criteria, ordinal, &|signal| {
                    if Some(signal) == anchor {
                        scopes.clone()
                    } else {
                        vec![MEMBERS_LIST]
                    }
                });
                if anchor.is_none() {
                    // A `match` naming no signal cannot be built by validation; treat it as
                    // absent (it holds).
                    for &s in &scopes {
                        unanchored[s as usize].push(ordinal);
                    }
                }
            } else {
                for &s in &scopes {
                    unanchored[s as usize].push(ordinal);
                }
            }
            if let Some(criteria) = rule.not_match() {
                for signal in criteria.signals() {
                    needed.insert(signal);
                    exclude |= bit(signal);
                }
                collected.add(criteria, ordinal, &|_| vec![EXCLUDED_LIST]);
            }
            let (action, redirect) = match rule.action() {
                Action::Block => (ActionCode::Block, None),
                Action::Allow => (ActionCode::Allow, None),
                Action::Log => (ActionCode::Log, None),
                Action::Redirect { redirect_uri } => (
                    ActionCode::Redirect,
                    Some(std::sync::Arc::<str>::from(redirect_uri.as_str())),
                ),
            };
            meta.push(RuleMeta {
                check,
                exclude,
                action,
            });
            rule_anchors.push((anchor, scopes));
            ids.push(acl.id.clone());
            redirects.push(redirect);
        }

        let seed = random_seed();
        let decides_alone: Vec<bool> = meta
            .iter()
            .map(|m| m.action != ActionCode::Log && m.check == 0 && m.exclude == 0)
            .collect();
        // An unanchored rule that decides alone (`match_all` with a terminal action) decides
        // every request of its scopes: no later rule of those scopes can be tried, so the
        // anchor lists and the signals probed for the scope stop there too.
        let mut scope_cut = [NO_RULE; REQUEST_SCOPES];
        for (list, cut) in unanchored.iter_mut().zip(&mut scope_cut) {
            if let Some(at) = list.iter().position(|&r| decides_alone[r as usize]) {
                list.truncate(at + 1);
                *cut = list[at];
            }
        }
        let mut anchored = [0u16; REQUEST_SCOPES];
        for (ordinal, (anchor, scopes)) in rule_anchors.iter().enumerate() {
            if let Some(anchor) = anchor {
                for &s in scopes {
                    if ordinal as u32 <= scope_cut[usize::from(s)] {
                        anchored[usize::from(s)] |= bit(*anchor);
                    }
                }
            }
        }
        let mut grouper = Grouper {
            postings: Postings::default(),
            decides_alone,
            scope_cut,
            stored: Default::default(),
        };
        let g = &mut grouper;
        let c = collected;
        let geo_values = Arc::new(GeoValues::new(
            c.country.iter().map(|e| e.0),
            c.subdivision.iter().map(|e| e.0),
            c.asn.iter().map(|e| e.0),
        ));
        let indexes = Indexes {
            client_v4: ranges(g.group(c.client_v4)),
            client_v6: ranges(g.group(c.client_v6)),
            connecting_v4: ranges(g.group(c.connecting_v4)),
            connecting_v6: ranges(g.group(c.connecting_v6)),
            asn: fixed_map(seed, c.asn, g),
            country: Some(g.group(c.country))
                .filter(|grouped| !grouped.is_empty())
                .map(|grouped| CountryTable::build(&grouped)),
            subdivision: fixed_map(seed, c.subdivision, g),
            ja3: fixed_map(seed, c.ja3, g),
            ja4: byte_map(seed, c.ja4, g),
            user_agent: Some(g.group(c.user_agent))
                .filter(|grouped| !grouped.is_empty())
                .map(|grouped| UserAgentIndex::build(seed, grouped)),
            hostname: byte_map(seed, c.hostname, g),
            message_signature: exact_byte_map(seed, c.message_signature, g),
        };
        let managed_postings = g.managed(c.managed, managed.masks_with_entries());
        let mut postings = grouper.postings;
        postings.shrink();

        let mut policy = CompiledPolicy {
            version: rules.version,
            meta,
            ids,
            redirects,
            unanchored,
            postings,
            indexes,
            managed: Arc::clone(managed),
            managed_postings,
            needed,
            indexed: needed,
            anchored,
            attachment: None,
            geo_values,
            geo: None,
            geo_postings: Default::default(),
            stats: PolicyStats {
                version: rules.version,
                rules: rules.acls.len(),
                active_rules: order.len(),
                entries,
                needed_signals: needed,
                anchors: Vec::new(),
                unanchored: [0; 3],
                postings: 0,
                indexes: Vec::new(),
                user_agents: Default::default(),
                compile_micros: 0,
                approx_bytes: 0,
                managed_lists: Vec::new(),
                rules_naming_empty_lists: empty_list_rules,
            },
        };
        policy.stats.managed_lists = managed
            .stats()
            .into_iter()
            .zip(list_rules)
            .map(|(list, rules)| ManagedListUse { list, rules })
            .collect();
        policy.stats.anchors = Signal::ALL
            .into_iter()
            .map(|s| (signal_name(s), anchor_counts[s as usize]))
            .collect();
        policy.stats.unanchored = [
            policy.unanchored[0].len(),
            policy.unanchored[1].len(),
            policy.unanchored[2].len(),
        ];
        policy.stats.postings = policy.postings.len();
        policy.stats.indexes = policy.index_stats();
        policy.stats.user_agents = policy
            .indexes
            .user_agent
            .as_ref()
            .map(UserAgentIndex::stats)
            .unwrap_or_default();
        policy.stats.approx_bytes = policy.stats.indexes.iter().map(|i| i.bytes).sum::<usize>()
            + policy.postings.bytes()
            + policy.geo_values.bytes()
            + policy.meta.capacity() * std::mem::size_of::<RuleMeta>()
            + policy
                .ids
                .iter()
                .map(|_| std::mem::size_of::<netacl_model::AclId>())
                .sum::<usize>()
            + policy
                .redirects
                .iter()
                .map(|r| r.as_ref().map_or(0, |r| r.len()) + 16)
                .sum::<usize>()
            + policy
                .unanchored
                .iter()
                .map(|u| u.capacity() * 4)
                .sum::<usize>();
        policy.stats.compile_micros = started.elapsed().as_micros() as u64;
        policy
    }

    fn index_stats(&self) -> Vec<IndexStats> {
        fn table<A: crate::range::Address>(
            name: &'static str,
            t: &RangeTable<A>,
            first_level: IndexKind,
        ) -> IndexStats {
            IndexStats {
                name,
                kind: if t.networks() == 0 {
                    IndexKind::Unused
                } else if t.is_packed() {
                    IndexKind::IntervalLines
                } else if t.has_blocks() {
                    IndexKind::IntervalBlocks
                } else if t.has_first_level() {
                    first_level
                } else {
                    IndexKind::IntervalTable
                },
                keys: t.networks(),
                intervals: Some(t.intervals()),
                bytes: t.bytes(),
            }
        }
        fn hashed(name: &'static str, keys: Option<(usize, usize)>) -> IndexStats {
            IndexStats {
                name,
                kind: if keys.is_some() {
                    IndexKind::HashTable
                } else {
                    IndexKind::Unused
                },
                keys: keys.map_or(0, |k| k.0),
                intervals: None,
                bytes: keys.map_or(0, |k| k.1),
            }
        }
        let ix = &self.indexes;
        vec![
            table(
                "client_ip_v4",
                &ix.client_v4,
                IndexKind::IntervalTableDirect,
            ),
            table(
                "client_ip_v6",
                &ix.client_v6,
                IndexKind::IntervalTableFenced,
            ),
            table(
                "connecting_ip_v4",
                &ix.connecting_v4,
                IndexKind::IntervalTableDirect,
            ),
            table(
                "connecting_ip_v6",
                &ix.connecting_v6,
                IndexKind::IntervalTableFenced,
            ),
            hashed("asn", ix.asn.as_ref().map(|m| (m.len(), m.bytes()))),
            IndexStats {
                kind: if ix.country.is_some() {
                    IndexKind::DirectTable
                } else {
                    IndexKind::Unused
                },
                ..hashed("country", ix.country.as_ref().map(|m| (m.len(), m.bytes())))
            },
            hashed(
                "subdivision",
                ix.subdivision.as_ref().map(|m| (m.len(), m.bytes())),
            ),
            hashed("ja3", ix.ja3.as_ref().map(|m| (m.len(), m.bytes()))),
            hashed("ja4", ix.ja4.as_ref().map(|m| (m.len(), m.bytes()))),
            IndexStats {
                name: "user_agent",
                kind: if ix.user_agent.is_some() {
                    IndexKind::UserAgentMatcher
                } else {
                    IndexKind::Unused
                },
                keys: ix.user_agent.as_ref().map_or(0, UserAgentIndex::len),
                intervals: None,
                bytes: ix.user_agent.as_ref().map_or(0, UserAgentIndex::bytes),
            },
            hashed(
                "hostname",
                ix.hostname.as_ref().map(|m| (m.len(), m.bytes())),
            ),
            hashed(
                "http_message_signature",
                ix.message_signature.as_ref().map(|m| (m.len(), m.bytes())),
            ),
            table(
                "auth0_managed_v4",
                self.managed.v4(),
                IndexKind::IntervalTableDirect,
            ),
            table(
                "auth0_managed_v6",
                self.managed.v6(),
                IndexKind::IntervalTableFenced,
            ),
            hashed(
                "auth0_managed_ja3",
                self.managed.ja3().map(|m| (m.len(), m.bytes())),
            ),
            hashed(
                "auth0_managed_ja4",
                self.managed.ja4().map(|m| (m.len(), m.bytes())),
            ),
        ]
    }

    /// A policy with no rules (version 0): every request gets [`crate::Verdict::None`].
    pub fn empty() -> CompiledPolicy {
        Self::build(&RuleSet::default(), &ManagedIndex::empty(), Instant::now())
    }
}

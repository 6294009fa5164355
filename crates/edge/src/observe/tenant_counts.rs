//! Per-rule counts of each tenant at a multi-tenant edge, and the `acls_summary` reports made
//! from them.
//!
//! Every tenant of a [`TenantRouter`](crate::TenantRouter) carries a [`TenantRuleCounts`]: a table of counters for
//! the rule-set version its engine holds, built when that version is installed (compiled by the
//! edge, or observed from the engine `netacl serve` feeds), sized by the tenant's active rules
//! and swapped in whole. Recording a decision takes no lock, allocates nothing and looks nothing
//! up by id: one load of the table, a version check, then one increment for the request's
//! scope, one for the deciding rule and one per monitoring-mode (`log`) rule that matched, each
//! at the rule's position in evaluation order (the [`RuleIndex`] the decision carries; a
//! compiled policy numbers its active rules by ascending priority, ties by id, as the table
//! does).
//!
//! A quiet tenant's counters are one stripe of cache lines (allocated on a line boundary) that
//! every thread writes: its memory does not grow with the number of cores. Once the tenant is
//! busy, its counters get one more stripe per thread slot, as the single-tenant edge's are
//! striped ([`EdgeMetrics`](crate::EdgeMetrics)), so threads deciding at once on different
//! cores never write the same line. *Busy* is checked every [`BUSY_CHECK`] by the edge's
//! summary task (never per request): a tenant whose table counted at least [`BUSY_REQUESTS`]
//! requests since the last check is spread, and a new version of a spread tenant's rules is
//! counted spread from the start. Spreading allocates the stripes once, off the request path;
//! a request records into the shared stripe or into its thread's, whichever the table has when
//! it looks, and a report sums the shared stripe and every thread's, so no count is lost or
//! counted twice. A tenant without active rules holds no counters at all. Memory per tenant:
//! `64 × ⌈(3 + 5 × rules) / 8⌉` bytes of counters (a 5-rule tenant: 256 bytes), `stripes`
//! times more once busy (one stripe per core, at most 16), and 28 bytes per rule (its id,
//! scope and action), about 100 bytes of table beside them.
//!
//! Every summary interval [`TenantRuleCounts::take_summaries`] takes the counts since its last
//! call, each cell swapped with 0 (an increment lands before the swap and is reported now, or
//! after it and is reported next time: none is lost or counted twice), and makes one
//! [`AclSummary`] per rule that matched a request or refused a connection. A rule's *evaluated*
//! count is derived as for the single-tenant edge: the requests of the scopes it covers, less
//! those decided by an earlier rule. When a new version is installed, what the old table
//! counted and was not reported yet is kept aside and reported with the next interval (merged
//! by rule id; a rule removed meanwhile is still reported, with its last action and scope), so a
//! rule change loses only the few decisions recorded into the old table while it is replaced.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use netacl_eval::RuleIndex;
use netacl_model::{AclId, AclSummary, Action, RequestScope, RuleScope, RuleSet};

use crate::observe::metrics::{
    scope_slot, stripe_count, stripe_slot, Line, LINE, REQUEST_SCOPES, SCOPES,
};

/// Counters per rule, after the [`SCOPES`] request counters: the requests it decided per
/// request scope, its monitored matches, the connections it refused.
const PER_RULE: usize = SCOPES + 2;
const MONITORED: usize = SCOPES;
const REFUSED: usize = SCOPES + 1;

fn rule_cell(rule: usize, counter: usize) -> usize {
    SCOPES + rule * PER_RULE + counter
}

/// How often the summary task looks for busy tenants (see the module docs).
pub(crate) const BUSY_CHECK: Duration = Duration::from_secs(1);
/// Requests since the last check from which a tenant is busy: its counters get a stripe per
/// thread slot (see the module docs).
pub(crate) const BUSY_REQUESTS: u64 = 1_000;

/// A table's counters: one stripe every thread writes while the tenant is quiet, one stripe
/// per thread slot more once it is busy (see the module docs).
#[derive(Debug)]
struct Counters {
    /// Cache lines per stripe: the counters rounded up to a line.
    lines: usize,
    shared: Box<[Line]>,
    /// [`stripe_count`] stripes, once the tenant is busy.
    spread: OnceLock<Box<[Line]>>,
}

impl Counters {
    fn new(counters: usize, spread: bool) -> Self {
        let lines = counters.div_ceil(LINE);
        let out = Counters {
            lines,
            shared: (0..lines).map(|_| Line::new()).collect(),
            spread: OnceLock::new(),
        };
        if spread {
            out.spread();
        }
        out
    }

    /// Gives every thread slot a stripe of its own, once (not without counters, nor with one
    /// stripe: there is no other core to share a line with).
    fn spread(&self) {
        if self.lines > 0 && stripe_count() > 1 {
            self.spread.get_or_init(|| {
                (0..self.lines * stripe_count())
                    .map(|_| Line::new())
                    .collect()
            });
        }
    }

    fn is_spread(&self) -> bool {
        self.spread.get().is_some()
    }

    /// One more in `counter`, in `stripe` (this thread's [`stripe_slot`]) once spread.
    #[inline]
    fn add(&self, stripe: usize, counter: usize) {
        let line = match self.spread.get() {
            Some(stripes) => stripes.get(stripe * self.lines + counter / LINE),
            None => self.shared.get(counter / LINE),
        };
        if let Some(line) = line {
            line.0[counter % LINE].fetch_add(1, Relaxed);
        }
    }

    /// The counter's value over the shared stripe and every thread's, each cell set back to 0.
    fn take(&self, counter: usize) -> u64 {
        let (line, cell) = (counter / LINE, counter % LINE);
        let take = |l: Option<&Line>| l.map_or(0, |l| l.0[cell].swap(0, Relaxed));
        let mut sum = take(self.shared.get(line));
        if let Some(stripes) = self.spread.get() {
            for stripe in 0..stripes.len() / self.lines.max(1) {
                sum = sum.saturating_add(take(stripes.get(stripe * self.lines + line)));
            }
        }
        sum
    }

    /// The requests counted in the shared stripe and not taken yet (its per-scope counters).
    fn shared_requests(&self) -> u64 {
        (0..SCOPES)
            .filter_map(|s| {
                self.shared
                    .get(s / LINE)
                    .map(|l| l.0[s % LINE].load(Relaxed))
            })
            .fold(0u64, u64::saturating_add)
    }

    /// Bytes of counters held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.shared)
            + self.spread.get().map_or(0, |s| std::mem::size_of_val(&**s))
    }
}

/// The actions a counted rule may have, by the number a [`CountedRule`] keeps.
const ACTIONS: [&str; 4] = ["block", "allow", "log", "redirect"];

fn action_code(action: &Action) -> u8 {
    match action {
        Action::Block => 0,
        Action::Allow => 1,
        Action::Log => 2,
        Action::Redirect { .. } => 3,
    }
}

/// What a table knows of a rule (for its reports).
struct CountedRule {
    id: AclId,
    scope: RuleScope,
    action: u8,
}

/// The counters of one rule-set version of one tenant.
struct CountTable {
    version: u64,
    /// Active rules in evaluation order.
    rules: Box<[CountedRule]>,
    /// Positions in `rules`, sorted by id (a refused connection names its rule by id).
    by_id: Box<[u32]>,
    /// The counters (none without rules).
    counts: Counters,
}

impl CountTable {
    /// The table of `rules`, its counters spread over the thread slots from the start when
    /// `spread` (the tenant is busy).
    fn build(rules: Option<&RuleSet>, spread: bool) -> Self {
        let mut active: Vec<_> = rules
            .map(|r| r.acls.iter().filter(|acl| acl.spec.active).collect())
            .unwrap_or_default();
        active.sort_by(|a, b| {
            (a.spec.priority, a.id.as_str().as_bytes())
                .cmp(&(b.spec.priority, b.id.as_str().as_bytes()))
        });
        let counted: Box<[CountedRule]> = active
            .iter()
            .map(|acl| CountedRule {
                id: acl.id.clone(),
                scope: acl.spec.rule.scope(),
                action: action_code(acl.spec.rule.action()),
            })
            .collect();
        let mut by_id: Vec<u32> = (0..counted.len() as u32).collect();
        by_id.sort_by(|&a, &b| counted[a as usize].id.cmp(&counted[b as usize].id));
        let counters = if counted.is_empty() {
            0
        } else {
            SCOPES + counted.len() * PER_RULE
        };
        Self {
            version: rules.map_or(0, |r| r.version),
            rules: counted,
            by_id: by_id.into_boxed_slice(),
            counts: Counters::new(counters, spread),
        }
    }

    #[inline]
    fn add(&self, stripe: usize, counter: usize) {
        self.counts.add(stripe, counter);
    }

    /// The counter's value over every stripe, each stripe's cell set back to 0.
    fn take(&self, counter: usize) -> u64 {
        self.counts.take(counter)
    }

    /// Takes every rule's counts since the last take (see the module docs); appends those of
    /// the rules that counted anything.
    fn drain(&self, into: &mut Vec<RuleCount>) {
        if self.rules.is_empty() {
            return;
        }
        let requests: [u64; SCOPES] = std::array::from_fn(|s| self.take(s));
        // Requests of each scope still undecided when reaching the current rule.
        let mut remaining = requests;
        for (index, rule) in self.rules.iter().enumerate() {
            let decided: [u64; SCOPES] = std::array::from_fn(|s| self.take(rule_cell(index, s)));
            let mut evaluated = 0u64;
            for (slot, scope) in REQUEST_SCOPES.iter().enumerate() {
                if rule.scope.covers(*scope) {
                    evaluated = evaluated.saturating_add(remaining[slot]);
                    remaining[slot] = remaining[slot].saturating_sub(decided[slot]);
                }
            }
            let matched = decided
                .iter()
                .fold(0u64, |sum, n| sum.saturating_add(*n))
                .saturating_add(self.take(rule_cell(index, MONITORED)));
            let refused = self.take(rule_cell(index, REFUSED));
            if evaluated > 0 || matched > 0 || refused > 0 {
                into.push(RuleCount {
                    id: rule.id.clone(),
                    scope: rule.scope,
                    action: rule.action,
                    version: self.version,
                    evaluated,
                    matched,
                    refused,
                });
            }
        }
    }
}

/// One rule's counts not reported yet.
#[derive(Debug, Clone)]
struct RuleCount {
    id: AclId,
    scope: RuleScope,
    action: u8,
    version: u64,
    evaluated: u64,
    matched: u64,
    refused: u64,
}

/// Adds `older` into `newer` by rule id (`newer`'s action, scope and version stand).
fn merge(newer: &mut Vec<RuleCount>, older: Vec<RuleCount>) {
    if older.is_empty() {
        return;
    }
    let index: HashMap<AclId, usize> = newer
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.clone(), i))
        .collect();
    for count in older {
        match index.get(&count.id) {
            Some(&i) => {
                let into = &mut newer[i];
                into.evaluated = into.evaluated.saturating_add(count.evaluated);
                into.matched = into.matched.saturating_add(count.matched);
                into.refused = into.refused.saturating_add(count.refused);
            }
            None => newer.push(count),
        }
    }
}

/// The per-rule counters of one tenant at a multi-tenant edge (see the module docs), and the
/// key of its requests in the edge's shared traffic sample.
pub struct TenantRuleCounts {
    table: ArcSwap<CountTable>,
    /// Counts of replaced tables not reported yet (taken by installs and reports, never per
    /// request).
    pending: Mutex<Vec<RuleCount>>,
    sample_key: u64,
    /// The shared stripe's request count at the last busy check.
    seen: AtomicU64,
}

impl std::fmt::Debug for TenantRuleCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantRuleCounts")
            .field("version", &self.version())
            .field("sample_key", &self.sample_key)
            .finish_non_exhaustive()
    }
}

/// The next sample key (0 is the single-tenant edge's).
static NEXT_SAMPLE_KEY: AtomicU64 = AtomicU64::new(1);

impl TenantRuleCounts {
    /// Counters for `rules` (none yet: an empty table of version 0), with a sample key no other
    /// tenant of this process had or will have.
    pub(crate) fn new(rules: Option<&RuleSet>) -> Self {
        Self {
            table: ArcSwap::from_pointee(CountTable::build(rules, false)),
            pending: Mutex::new(Vec::new()),
            sample_key: NEXT_SAMPLE_KEY.fetch_add(1, Relaxed),
            seen: AtomicU64::new(0),
        }
    }

    /// The counters of a tenant put again (new domains, a new policy): `kept`'s when the tenant
    /// stays the same (its counts go on, counting `rules` from now on when given), else new
    /// ones for `rules`.
    pub(crate) fn carry(kept: Option<&Arc<Self>>, rules: Option<&RuleSet>) -> Arc<Self> {
        match kept {
            Some(kept) => {
                if let Some(rules) = rules {
                    kept.install(rules);
                }
                Arc::clone(kept)
            }
            None => Arc::new(Self::new(rules)),
        }
    }

    /// The rule-set version counted.
    pub fn version(&self) -> u64 {
        self.table.load().version
    }

    /// The key of this tenant's requests in the edge's traffic sample
    /// ([`TrafficSample::requests_of`](crate::TrafficSample::requests_of)): drawn when the
    /// tenant came to this edge, never reused, so that a tenant deleted and created again does
    /// not see the requests of its predecessor.
    pub fn sample_key(&self) -> u64 {
        self.sample_key
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Vec<RuleCount>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts for a new rule-set version from now on; what the old table counted and was not
    /// reported is kept for the next report. The same version again keeps its table.
    pub(crate) fn install(&self, rules: &RuleSet) {
        let mut pending = self.lock_pending();
        let old = self.table.load_full();
        if old.version == rules.version && rules.version != 0 {
            return;
        }
        let spread = old.counts.is_spread();
        self.table
            .store(Arc::new(CountTable::build(Some(rules), spread)));
        let mut drained = Vec::new();
        old.drain(&mut drained);
        merge(&mut drained, std::mem::take(&mut *pending));
        *pending = drained;
    }

    /// Spreads the counters over a stripe per thread slot when the table counted at least
    /// `busy` requests since the last call (the summary task calls it every [`BUSY_CHECK`]);
    /// whether they are spread (now or before).
    pub(crate) fn spread_if_busy(&self, busy: u64) -> bool {
        let table = self.table.load();
        if !table.counts.is_spread() {
            let counted = table.counts.shared_requests();
            let before = self.seen.swap(counted, Relaxed);
            // Taken for a report, or a new table, since the last look: all of it is new.
            let since = counted.checked_sub(before).unwrap_or(counted);
            if since >= busy {
                table.counts.spread();
            }
        }
        table.counts.is_spread()
    }

    /// Records one decision made against rule-set `version`: the request's `scope`, the
    /// deciding `rule` and the `monitored` rules that matched. No allocation, no lock. `false`
    /// when the table of that version is not installed (the request is not attributed).
    #[inline]
    pub(crate) fn record(
        &self,
        version: u64,
        scope: RequestScope,
        rule: Option<RuleIndex>,
        monitored: &[RuleIndex],
    ) -> bool {
        self.record_at(
            version,
            scope,
            rule.map(RuleIndex::get),
            monitored.iter().map(|r| r.get()),
        )
    }

    /// [`record`](Self::record) with rule positions in evaluation order.
    #[inline]
    fn record_at(
        &self,
        version: u64,
        scope: RequestScope,
        rule: Option<usize>,
        monitored: impl Iterator<Item = usize>,
    ) -> bool {
        let table = self.table.load();
        if table.version != version {
            return false;
        }
        if table.rules.is_empty() {
            return true;
        }
        let stripe = stripe_slot();
        let slot = scope_slot(scope);
        let rules = table.rules.len();
        table.add(stripe, slot);
        if let Some(rule) = rule.filter(|&r| r < rules) {
            table.add(stripe, rule_cell(rule, slot));
        }
        for rule in monitored.filter(|&r| r < rules) {
            table.add(stripe, rule_cell(rule, MONITORED));
        }
        true
    }

    /// Counts a connection refused before the handshake by `rule` of rule-set `version`.
    pub(crate) fn record_refusal(&self, version: u64, rule: &AclId) {
        let table = self.table.load();
        if table.version != version {
            return;
        }
        let found = table
            .by_id
            .binary_search_by(|&i| table.rules[i as usize].id.cmp(rule));
        if let Ok(at) = found {
            let index = table.by_id[at] as usize;
            table.add(stripe_slot(), rule_cell(index, REFUSED));
        }
    }

    /// Takes the counts since the last call (and those of replaced versions not reported yet):
    /// one summary per rule that matched a request or refused a connection meanwhile, for an
    /// interval of `interval`. A rule with nothing to report sends nothing.
    pub fn take_summaries(&self, interval: Duration) -> Vec<AclSummary> {
        let mut pending = self.lock_pending();
        let table = self.table.load_full();
        let mut counts = Vec::new();
        table.drain(&mut counts);
        merge(&mut counts, std::mem::take(&mut *pending));
        drop(pending);
        let interval_s = interval
            .as_secs()
            .clamp(1, netacl_model::MAX_SUMMARY_INTERVAL_S);
        counts
            .into_iter()
            .filter(|c| c.matched > 0 || c.refused > 0)
            .map(|c| AclSummary {
                rule_id: c.id.to_string(),
                action: ACTIONS[usize::from(c.action)].to_owned(),
                scope: c.scope.as_str().to_owned(),
                policy_version: c.version,
                interval_s,
                evaluated: c.evaluated,
                matched: c.matched,
                connections_refused: c.refused,
            })
            .collect()
    }
}

/// One tenant's reports of one interval.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TenantSummaries {
    /// The tenant's id.
    pub tenant: String,
    /// One per rule that matched a request or refused a connection during the interval.
    pub summaries: Vec<AclSummary>,
}

/// Where a multi-tenant edge hands each interval's reports
/// ([`EdgeConfig::tenant_summary_sink`](crate::EdgeConfig::tenant_summary_sink)):
/// the admin service in the same process, or the reporter to the platform the edge follows.
/// Called once per interval from the summary task with every tenant that has something to
/// report; it must not block (hand the batch to a task).
#[derive(Clone)]
pub struct TenantSummarySink(pub(crate) Arc<dyn Fn(Vec<TenantSummaries>) + Send + Sync>);

impl TenantSummarySink {
    /// A sink calling `f` with each interval's reports.
    pub fn new(f: impl Fn(Vec<TenantSummaries>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl std::fmt::Debug for TenantSummarySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TenantSummarySink")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::{stripe_count, Line};

    /// Rules `(id, priority, action, scope)`, the `n`-th matching client address `192.0.2.n`
    /// (from 1) alone.
    fn rules(version: u64, specs: &[(&str, u64, &str, &str)]) -> RuleSet {
        let records: Vec<_> = specs
            .iter()
            .enumerate()
            .map(|(n, (id, priority, action, scope))| {
                let mut record = serde_json::json!({
                    "id": id, "description": "t", "active": true, "priority": priority,
                    "rule": {"action": {*action: true}, "scope": scope,
                             "match": {"ipv4_cidrs": [format!("192.0.2.{}/32", n + 1)]}},
                    "created_at": "2026-01-01T00:00:00.000Z",
                    "updated_at": "2026-01-01T00:00:00.000Z"
                });
                if *action == "redirect" {
                    record["rule"]["action"]["redirect_uri"] = "https://example.com/denied".into();
                }
                record
            })
            .collect();
        RuleSet::from_json(
            &serde_json::Value::Array(records),
            version,
            &netacl_model::Limits::default(),
        )
        .expect("valid test rules")
    }

    const A: &str = "acl_1111111111111111111111";
    const B: &str = "acl_2222222222222222222222";
    const C: &str = "acl_3333333333333333333333";

    /// The position of rule `id` in the table of `rules`.
    fn at(rules: &RuleSet, id: &str) -> usize {
        let table = CountTable::build(Some(rules), false);
        table
            .rules
            .iter()
            .position(|r| r.id.as_str() == id)
            .expect("rule in the table")
    }

    fn by_id(summaries: &[AclSummary], id: &str) -> AclSummary {
        summaries
            .iter()
            .find(|s| s.rule_id == id)
            .unwrap_or_else(|| panic!("{id} not reported: {summaries:?}"))
            .clone()
    }

    #[test]
    fn counts_are_derived_reported_once_and_carried_over_a_new_version() {
        let set = rules(
            3,
            &[
                (A, 1, "log", "tenant"),
                (B, 2, "block", "management"),
                (C, 3, "allow", "tenant"),
            ],
        );
        let counts = TenantRuleCounts::new(Some(&set));
        let (a, b, c) = (at(&set, A), at(&set, B), at(&set, C));
        let none = || std::iter::empty::<usize>();
        let mgmt = RequestScope::Management;
        let auth = RequestScope::Authentication;
        // 2 management requests blocked by B (A monitored in one), 3 auth requests allowed by
        // C, 1 management request undecided.
        assert!(counts.record_at(3, mgmt, Some(b), std::iter::once(a)));
        assert!(counts.record_at(3, mgmt, Some(b), none()));
        for _ in 0..3 {
            assert!(counts.record_at(3, auth, Some(c), none()));
        }
        assert!(counts.record_at(3, mgmt, None, none()));
        // Another version's decision is not attributed; a position beyond the table is ignored.
        assert!(!counts.record_at(2, auth, Some(c), none()));
        assert!(counts.record_at(3, auth, Some(99), std::iter::once(99)));
        let interval = Duration::from_secs(600);
        let reports = counts.take_summaries(interval);
        assert_eq!(reports.len(), 3, "{reports:?}");
        let (ra, rb, rc) = (by_id(&reports, A), by_id(&reports, B), by_id(&reports, C));
        assert_eq!(
            (ra.evaluated, ra.matched, ra.action.as_str()),
            (7, 1, "log")
        );
        assert_eq!(
            (rb.evaluated, rb.matched, rb.action.as_str()),
            (3, 2, "block")
        );
        assert_eq!(
            (rc.evaluated, rc.matched, rc.scope.as_str()),
            (5, 3, "tenant")
        );
        assert_eq!((rc.policy_version, rc.interval_s), (3, 600));
        assert!(reports.iter().all(|r| r.check().is_ok()));
        // Reported once: nothing new, nothing to report.
        assert!(counts.take_summaries(interval).is_empty());

        // Counted under version 3, then version 4 installed (B removed, C kept) before the
        // report: both still reported, C's counts of both versions together.
        assert!(counts.record_at(3, auth, Some(c), none()));
        assert!(counts.record_at(3, mgmt, Some(b), none()));
        let next = rules(4, &[(C, 5, "allow", "tenant")]);
        counts.install(&next);
        assert_eq!(counts.version(), 4);
        assert!(
            !counts.record_at(3, auth, Some(c), none()),
            "the old version"
        );
        assert!(counts.record_at(4, auth, Some(at(&next, C)), none()));
        counts.record_refusal(4, &AclId::parse(C).expect("id"));
        counts.record_refusal(3, &AclId::parse(C).expect("id"));
        let reports = counts.take_summaries(interval);
        let rc = by_id(&reports, C);
        assert_eq!(
            (
                rc.evaluated,
                rc.matched,
                rc.connections_refused,
                rc.policy_version
            ),
            (2, 2, 1, 4)
        );
        let rb = by_id(&reports, B);
        assert_eq!((rb.matched, rb.policy_version), (1, 3));
        assert!(counts.take_summaries(interval).is_empty());
        // The same version again keeps its table (and its counts).
        assert!(counts.record_at(4, auth, Some(at(&next, C)), none()));
        counts.install(&next);
        assert_eq!(by_id(&counts.take_summaries(interval), C).matched, 1);
    }

    #[test]
    fn the_table_orders_rules_as_the_policy_does() {
        // Priorities out of order and a tie (broken by id).
        let set = rules(
            1,
            &[
                (C, 2, "block", "tenant"),
                (B, 2, "allow", "tenant"),
                (A, 3, "log", "tenant"),
                (
                    "acl_4444444444444444444444",
                    1,
                    "redirect",
                    "authentication",
                ),
            ],
        );
        let policy = netacl_eval::CompiledPolicy::compile(&set).expect("compiles");
        let table = CountTable::build(Some(&set), false);
        assert_eq!(table.rules.len(), 4);
        for n in 1..=4u8 {
            let ip: std::net::IpAddr = format!("192.0.2.{n}").parse().expect("ip");
            let request =
                netacl_eval::Request::new(RequestScope::Authentication).with_client_ip(ip);
            let decision = policy.evaluate(&request);
            let rule = decision
                .rule()
                .or_else(|| decision.monitored().first().copied())
                .expect("one rule matches");
            assert_eq!(
                &table.rules[rule.get()].id,
                policy.rule_id(rule),
                "192.0.2.{n}"
            );
        }
    }

    #[test]
    fn a_tenant_without_rules_holds_no_counters_and_keys_differ() {
        let empty = TenantRuleCounts::new(None);
        let other = TenantRuleCounts::new(Some(&RuleSet {
            version: 1,
            acls: vec![],
        }));
        assert_eq!(empty.table.load().counts.bytes(), 0);
        assert_eq!(other.table.load().counts.bytes(), 0);
        assert!(empty.record_at(0, RequestScope::Authentication, Some(0), std::iter::empty()));
        assert!(empty.take_summaries(Duration::from_secs(1)).is_empty());
        assert_ne!(empty.sample_key(), other.sample_key());
        assert_ne!(empty.sample_key(), 0);
        // A 5-rule table: 3 + 25 counters, 4 lines per stripe.
        let five = rules(
            1,
            &[
                (A, 1, "block", "tenant"),
                (B, 2, "block", "tenant"),
                (C, 3, "block", "tenant"),
                ("acl_4444444444444444444444", 4, "block", "tenant"),
                ("acl_5555555555555555555555", 5, "block", "tenant"),
            ],
        );
        // One stripe however many cores (the memory of a quiet tenant does not grow with
        // them); one more per thread slot once spread.
        let table = CountTable::build(Some(&five), false);
        assert_eq!(table.counts.bytes(), 4 * 64);
        assert_eq!(std::mem::align_of::<Line>(), 64);
        assert_eq!(std::mem::size_of::<Line>(), 64);
        assert_eq!(
            table.counts.shared.as_ptr() as usize % 64,
            0,
            "stripes start on a line"
        );
        table.counts.spread();
        let spread = if stripe_count() > 1 {
            stripe_count()
        } else {
            0
        };
        assert_eq!(table.counts.bytes(), 4 * 64 * (1 + spread));
    }

    /// Five rules, each matching its own address.
    fn five(version: u64) -> RuleSet {
        rules(
            version,
            &[
                (A, 1, "block", "tenant"),
                (B, 2, "log", "tenant"),
                (C, 3, "allow", "authentication"),
                ("acl_4444444444444444444444", 4, "block", "management"),
                ("acl_5555555555555555555555", 5, "block", "tenant"),
            ],
        )
    }

    #[test]
    fn a_busy_tenant_is_spread_and_a_quiet_one_is_not() {
        let set = five(1);
        let counts = TenantRuleCounts::new(Some(&set));
        let scope = RequestScope::Authentication;
        for _ in 0..BUSY_REQUESTS - 1 {
            assert!(counts.record_at(1, scope, Some(0), std::iter::empty()));
        }
        assert!(!counts.spread_if_busy(BUSY_REQUESTS), "quiet so far");
        // Counted since the last look only: one more request is not busy.
        assert!(counts.record_at(1, scope, Some(0), std::iter::empty()));
        assert!(!counts.spread_if_busy(BUSY_REQUESTS));
        for _ in 0..BUSY_REQUESTS {
            assert!(counts.record_at(1, scope, Some(0), std::iter::empty()));
        }
        let many_cores = stripe_count() > 1;
        assert_eq!(counts.spread_if_busy(BUSY_REQUESTS), many_cores);
        assert!(counts.record_at(1, scope, Some(0), std::iter::once(1)));
        let reports = counts.take_summaries(Duration::from_secs(60));
        let a = by_id(&reports, A);
        assert_eq!(
            (a.evaluated, a.matched),
            (2 * BUSY_REQUESTS + 1, 2 * BUSY_REQUESTS + 1)
        );
        assert_eq!(by_id(&reports, B).matched, 1);
        // A new version of a busy tenant's rules is counted spread from the start.
        counts.install(&five(2));
        assert_eq!(counts.table.load().counts.is_spread(), many_cores);
    }

    /// Threads record while the counters spread and reports are taken: every count is reported
    /// once.
    #[test]
    fn counts_stay_exact_while_the_counters_spread() {
        const THREADS: u64 = 4;
        const EACH: u64 = 20_000;
        let set = five(1);
        let counts = Arc::new(TenantRuleCounts::new(Some(&set)));
        let reported = std::thread::scope(|threads| {
            for t in 0..THREADS {
                let counts = Arc::clone(&counts);
                threads.spawn(move || {
                    for n in 0..EACH {
                        let rule = Some((t + n) as usize % 5);
                        assert!(counts.record_at(
                            1,
                            RequestScope::Management,
                            rule,
                            std::iter::once(1)
                        ));
                    }
                });
            }
            let mut reported = Vec::new();
            for round in 0..200 {
                if round == 50 {
                    counts.table.load().counts.spread();
                }
                reported.extend(counts.take_summaries(Duration::from_secs(1)));
                std::thread::yield_now();
            }
            reported
        });
        let mut matched: HashMap<String, u64> = HashMap::new();
        for r in reported
            .into_iter()
            .chain(counts.take_summaries(Duration::from_secs(1)))
        {
            *matched.entry(r.rule_id).or_default() += r.matched;
        }
        let total = THREADS * EACH;
        // Rule B (position 1) is the deciding rule of a fifth of the requests and monitored in
        // all of them.
        assert_eq!(matched.get(B), Some(&(total / 5 + total)));
        let all: u64 = matched.values().sum();
        assert_eq!(all, total + total);
    }
}

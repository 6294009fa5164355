//! Per-rule counters, the periodic `acls_summary` event and Prometheus text.
//!
//! Each rule-set version gets its own table of atomics ([`RuleTable`]), swapped in whole when
//! the rules change, so recording a decision takes no lock: one increment for the request's
//! scope, one for the deciding rule, one per monitoring-mode (`log`) rule that matched.
//!
//! A rule's *evaluated* count is derived instead of counted, so that a request does not pay one
//! increment per rule it passes: a rule was evaluated for every request whose scope it covers,
//! except those decided by an earlier rule (earlier in evaluation order: priority, then id).
//! *matched* counts the requests the rule matched (deciding or monitored). When a new version is
//! installed, every rule that keeps its id carries its totals over, so the Prometheus counters of
//! an unchanged rule do not reset; decisions recorded into the old table while it is being
//! replaced can be lost (a handful at most).
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use netacl_model::{AclId, AclSummary, RequestScope, RuleScope, RuleSet};

use crate::decision::AclVerdict;

pub(crate) const SCOPES: usize = 3;

pub(crate) fn scope_slot(scope: RequestScope) -> usize {
    match scope {
        RequestScope::Management => 0,
        RequestScope::Authentication => 1,
        RequestScope::DynamicClientRegistration => 2,
    }
}

/// Each rule's totals (evaluated, matched, connections refused) at the last summary.
type RuleTotals = HashMap<AclId, (u64, u64, u64)>;

/// Counters written per request, striped: one stripe per thread slot (threads take slots in
/// turn, modulo the number of stripes, the available parallelism), each stripe whole cache
/// lines on line boundaries, so that threads deciding at once on different cores do not write
/// the same cache line. A read sums the stripes.
#[derive(Debug)]
pub(crate) struct Stripes {
    /// Cache lines per stripe: the counters rounded up to a line.
    lines: usize,
    cells: Box<[Line]>,
}

/// Cells in a cache line.
pub(crate) const LINE: usize = 64 / std::mem::size_of::<AtomicU64>();

/// One cache line of counters, on a line boundary (so stripes need no padding between them).
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Line(pub(crate) [AtomicU64; LINE]);

impl Line {
    pub(crate) fn new() -> Self {
        Line(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Stripes of the counters: the available parallelism (at most [`MAX_STRIPES`]) unless
/// [`set_counter_stripes`] chose another count first.
static STRIPES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// The most stripes counters have.
pub const MAX_STRIPES: usize = 16;

pub(crate) fn stripe_count() -> usize {
    *STRIPES.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .clamp(1, MAX_STRIPES)
    })
}

/// Stripes the per-request counters as on a machine of `stripes` cores (1 to [`MAX_STRIPES`])
/// instead of this one's: for benches that measure another machine's memory. It must come
/// before any counter is made; `false` when the count was already fixed (it stays as it was).
pub fn set_counter_stripes(stripes: usize) -> bool {
    STRIPES.set(stripes.clamp(1, MAX_STRIPES)).is_ok()
}

/// Stripes the per-request counters have (fixed from their first use).
pub fn counter_stripes() -> usize {
    stripe_count()
}

/// This thread's stripe slot (assigned once per thread, in turn).
pub(crate) fn stripe_slot() -> usize {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Relaxed) as usize;
    }
    SLOT.with(|slot| *slot) % stripe_count()
}

impl Stripes {
    pub(crate) fn new(counters: usize) -> Self {
        let lines = counters.div_ceil(LINE);
        Stripes {
            lines,
            cells: (0..lines * stripe_count()).map(|_| Line::new()).collect(),
        }
    }

    #[inline]
    fn cell(&self, stripe: usize, counter: usize) -> Option<&AtomicU64> {
        self.cells
            .get(stripe * self.lines + counter / LINE)
            .map(|line| &line.0[counter % LINE])
    }

    #[inline]
    pub(crate) fn add(&self, counter: usize) {
        self.add_in(stripe_slot(), counter);
    }

    /// [`add`](Self::add) in the stripe `stripe` (this thread's [`stripe_slot`], read once
    /// for several counters).
    #[inline]
    pub(crate) fn add_in(&self, stripe: usize, counter: usize) {
        if let Some(cell) = self.cell(stripe, counter) {
            cell.fetch_add(1, Relaxed);
        }
    }

    /// Stripes (0 for no counters).
    fn stripes(&self) -> usize {
        self.cells.len().checked_div(self.lines).unwrap_or(0)
    }

    pub(crate) fn sum(&self, counter: usize) -> u64 {
        (0..self.stripes())
            .filter_map(|stripe| self.cell(stripe, counter))
            .fold(0u64, |sum, cell| sum.saturating_add(cell.load(Relaxed)))
    }
}

/// Per-rule counters in a [`RuleTable`]'s stripes, after the per-scope request counters: the
/// requests decided per scope, then monitored matches, then refused connections.
const PER_RULE: usize = SCOPES + 2;
const MONITORED: usize = SCOPES;
const REFUSED: usize = SCOPES + 1;

fn rule_cell(rule: usize, counter: usize) -> usize {
    SCOPES + rule * PER_RULE + counter
}

pub(crate) const REQUEST_SCOPES: [RequestScope; SCOPES] = [
    RequestScope::Management,
    RequestScope::Authentication,
    RequestScope::DynamicClientRegistration,
];

#[derive(Debug)]
struct RuleEntry {
    id: AclId,
    scope: RuleScope,
    action: &'static str,
    /// Totals carried over from earlier versions.
    base_evaluated: u64,
    base_matched: u64,
    base_refused: u64,
}

/// The counters of one rule-set version.
#[derive(Debug)]
pub struct RuleTable {
    version: u64,
    /// Active rules in evaluation order.
    rules: Vec<RuleEntry>,
    by_id: HashMap<AclId, usize>,
    /// Requests evaluated against this version by request scope, then per rule the requests it
    /// decided by request scope, its monitored matches and its refused connections (striped).
    counts: Stripes,
}

impl RuleTable {
    fn empty() -> Self {
        Self {
            version: 0,
            rules: Vec::new(),
            by_id: HashMap::new(),
            counts: Stripes::new(SCOPES),
        }
    }

    fn build(rules: &RuleSet, carried: &HashMap<AclId, (u64, u64, u64)>) -> Self {
        let mut active: Vec<_> = rules.acls.iter().filter(|acl| acl.spec.active).collect();
        active.sort_by(|a, b| {
            (a.spec.priority, a.id.as_str()).cmp(&(b.spec.priority, b.id.as_str()))
        });
        let entries: Vec<RuleEntry> = active
            .iter()
            .map(|acl| {
                let (base_evaluated, base_matched, base_refused) =
                    carried.get(&acl.id).copied().unwrap_or_default();
                RuleEntry {
                    id: acl.id.clone(),
                    scope: acl.spec.rule.scope(),
                    action: acl.spec.rule.action().name(),
                    base_evaluated,
                    base_matched,
                    base_refused,
                }
            })
            .collect();
        let by_id = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.clone(), i))
            .collect();
        let counts = Stripes::new(SCOPES + entries.len() * PER_RULE);
        Self {
            version: rules.version,
            rules: entries,
            by_id,
            counts,
        }
    }

    /// The rule-set version this table counts for.
    pub fn version(&self) -> u64 {
        self.version
    }

    fn snapshot(&self) -> Vec<RuleStat> {
        let requests: [u64; SCOPES] = std::array::from_fn(|s| self.counts.sum(s));
        // Requests of each scope still undecided when reaching the current rule.
        let mut remaining = requests;
        let mut out = Vec::with_capacity(self.rules.len());
        for (index, rule) in self.rules.iter().enumerate() {
            let decided: [u64; SCOPES] =
                std::array::from_fn(|s| self.counts.sum(rule_cell(index, s)));
            let mut evaluated = 0u64;
            for (slot, scope) in REQUEST_SCOPES.iter().enumerate() {
                if rule.scope.covers(*scope) {
                    evaluated = evaluated.saturating_add(remaining[slot]);
                    remaining[slot] = remaining[slot].saturating_sub(decided[slot]);
                }
            }
            let matched = decided
                .iter()
                .sum::<u64>()
                .saturating_add(self.counts.sum(rule_cell(index, MONITORED)));
            out.push(RuleStat {
                rule_id: rule.id.clone(),
                action: rule.action,
                scope: rule.scope,
                evaluated: evaluated.saturating_add(rule.base_evaluated),
                matched: matched.saturating_add(rule.base_matched),
                connections_refused: self
                    .counts
                    .sum(rule_cell(index, REFUSED))
                    .saturating_add(rule.base_refused),
            });
        }
        out
    }
}

/// Totals of one rule since the edge started (carried across rule-set versions while the rule
/// keeps its id).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleStat {
    /// The rule.
    pub rule_id: AclId,
    /// Its action (`block`, `allow`, `log`, `redirect`).
    pub action: &'static str,
    /// Its scope.
    pub scope: RuleScope,
    /// Requests the rule was evaluated for.
    pub evaluated: u64,
    /// Requests the rule matched.
    pub matched: u64,
    /// Connections the rule refused before the TLS handshake (not counted in `evaluated` or
    /// `matched`, which count requests).
    pub connections_refused: u64,
}

/// The Prometheus series of the edge's listeners (`listener="proxy"`, `"metrics"`): open
/// connections, connections admitted, refused and evicted by cap, and connections or bodies
/// cut by a timeout (see [`netacl_listener::ListenerStats`]).
pub(crate) fn render_listeners(listeners: &[(&str, netacl_listener::ListenerStats)]) -> String {
    /// One labelled value of a series: its extra label (or none) and where it is read.
    type Value = (&'static str, fn(&netacl_listener::ListenerStats) -> u64);
    let mut out = String::with_capacity(2048);
    let series: [(&str, &str, &str, &[Value]); 6] = [
        (
            "netacl_edge_listener_connections_open",
            "gauge",
            "Connections open on a listener.",
            &[("", |s| s.open)],
        ),
        (
            "netacl_edge_listener_connections_accepted_total",
            "counter",
            "Connections a listener admitted.",
            &[("", |s| s.accepted)],
        ),
        (
            "netacl_edge_listener_connections_refused_total",
            "counter",
            "New connections closed at once, by the cap they were over (nothing idle to close instead).",
            &[
                ("cap=\"max_connections\"", |s| s.refused_max_connections),
                ("cap=\"max_connections_per_client\"", |s| s.refused_per_client),
            ],
        ),
        (
            "netacl_edge_listener_connections_evicted_total",
            "counter",
            "Idle connections closed to admit a new one, by the cap that was reached.",
            &[
                ("cap=\"max_connections\"", |s| s.evicted_max_connections),
                ("cap=\"max_connections_per_client\"", |s| s.evicted_per_client),
            ],
        ),
        (
            "netacl_edge_listener_timeouts_total",
            "counter",
            "Connections closed (header, idle, send: an answer not read) or request bodies failed (body) by a timeout.",
            &[
                ("timeout=\"header\"", |s| s.header_timeouts),
                ("timeout=\"idle\"", |s| s.idle_timeouts),
                ("timeout=\"body\"", |s| s.body_timeouts),
                ("timeout=\"send\"", |s| s.send_timeouts),
            ],
        ),
        (
            "netacl_edge_listener_accept_errors_total",
            "counter",
            "Failed accepts (out of file descriptors and the like).",
            &[("", |s| s.accept_errors)],
        ),
    ];
    for (name, kind, help, values) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (listener, stats) in listeners {
            for (label, value) in values {
                let sep = if label.is_empty() { "" } else { "," };
                let _ = writeln!(
                    out,
                    "{name}{{listener=\"{listener}\"{sep}{label}}} {}",
                    value(stats)
                );
            }
        }
    }
    out
}

/// Counters of an edge: per rule (see the module docs), per verdict, per connection outcome.
#[derive(Debug)]
pub struct EdgeMetrics {
    table: ArcSwap<RuleTable>,
    /// Per-request counters (striped): the verdicts, then [`UNATTRIBUTED`], the connections
    /// accepted and refused, the signatures verified and refused.
    counts: Stripes,
    handshake_failures: AtomicU64,
    rule_source_errors: AtomicU64,
    policy_version: AtomicU64,
    /// What other front doors serving this edge's enforcer add to `/metrics` (read only when
    /// the metrics are rendered, never per request).
    extra: std::sync::RwLock<ExtraMetrics>,
}

/// A section of Prometheus text rendered by its owner.
type Section = Arc<dyn Fn(&mut String) + Send + Sync>;

/// A metric family that a front door adds series to ([`EdgeMetrics::add_series`]): its name,
/// `# HELP` text and `# TYPE` (`counter`, `gauge`, `histogram`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricFamily {
    /// The family's name (`netacl_edge_door_requests_total`).
    pub name: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
    /// The `# TYPE`.
    pub kind: &'static str,
}
/// A listener's counters, read when the metrics are rendered.
type ListenerSource = Arc<dyn Fn() -> netacl_listener::ListenerStats + Send + Sync>;

/// The series and listeners front doors registered ([`EdgeMetrics::add_series`],
/// [`EdgeMetrics::add_listener`]).
#[derive(Default)]
struct ExtraMetrics {
    sections: Vec<(MetricFamily, Section)>,
    listeners: Vec<(&'static str, ListenerSource)>,
}

impl std::fmt::Debug for ExtraMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtraMetrics")
            .field("sections", &self.sections.len())
            .field(
                "listeners",
                &self.listeners.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

const UNATTRIBUTED: usize = VERDICTS.len();
const CONNECTIONS_ACCEPTED: usize = UNATTRIBUTED + 1;
const CONNECTIONS_REFUSED: usize = UNATTRIBUTED + 2;
const SIGNATURES_VERIFIED: usize = UNATTRIBUTED + 3;
const SIGNATURES_REFUSED: usize = UNATTRIBUTED + 4;

impl Default for EdgeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn verdict_slot(verdict: AclVerdict) -> usize {
    match verdict {
        AclVerdict::None => 0,
        AclVerdict::Allow => 1,
        AclVerdict::Block => 2,
        AclVerdict::Redirect => 3,
        AclVerdict::InvalidPath => 4,
        AclVerdict::Misdirected => 5,
    }
}

const VERDICTS: [AclVerdict; 6] = [
    AclVerdict::None,
    AclVerdict::Allow,
    AclVerdict::Block,
    AclVerdict::Redirect,
    AclVerdict::InvalidPath,
    AclVerdict::Misdirected,
];

impl EdgeMetrics {
    /// Empty counters.
    pub fn new() -> Self {
        Self {
            table: ArcSwap::from_pointee(RuleTable::empty()),
            counts: Stripes::new(SIGNATURES_REFUSED + 1),
            handshake_failures: AtomicU64::new(0),
            rule_source_errors: AtomicU64::new(0),
            policy_version: AtomicU64::new(0),
            extra: std::sync::RwLock::new(ExtraMetrics::default()),
        }
    }

    /// Adds series of `family` to what [`render_prometheus`](Self::render_prometheus) gives:
    /// a front door serving this edge's enforcer (`netacl-doors`) renders its own counters
    /// there. `series` writes sample lines only; the family's `# HELP` and `# TYPE` are written
    /// once, and every registration's series of one family follow them together, as the
    /// Prometheus text format requires. Called when the metrics are rendered, never per
    /// request.
    pub fn add_series(
        &self,
        family: MetricFamily,
        series: impl Fn(&mut String) + Send + Sync + 'static,
    ) {
        let mut extra = self.extra.write().unwrap_or_else(|p| p.into_inner());
        extra.sections.push((family, Arc::new(series)));
    }

    /// Adds a listener to the `netacl_edge_listener_*` series of the edge's `/metrics` (label
    /// `listener="NAME"`, beside `proxy` and `metrics`): `stats` is read when they are rendered.
    pub fn add_listener(
        &self,
        name: &'static str,
        stats: impl Fn() -> netacl_listener::ListenerStats + Send + Sync + 'static,
    ) {
        let mut extra = self.extra.write().unwrap_or_else(|p| p.into_inner());
        extra.listeners.push((name, Arc::new(stats)));
    }

    /// The registered listeners' counters, by name (see [`add_listener`](Self::add_listener)).
    pub(crate) fn extra_listeners(&self) -> Vec<(&'static str, netacl_listener::ListenerStats)> {
        let extra = self.extra.read().unwrap_or_else(|p| p.into_inner());
        extra
            .listeners
            .iter()
            .map(|(name, stats)| (*name, stats()))
            .collect()
    }

    /// Installs the table for a new rule-set version, carrying totals of unchanged ids.
    pub fn install_rules(&self, rules: &RuleSet) {
        let old = self.table.load_full();
        if old.version == rules.version && rules.version != 0 {
            // The same version again (a re-sent rule set): keep counting into its table.
            return;
        }
        let carried: HashMap<AclId, (u64, u64, u64)> = old
            .snapshot()
            .into_iter()
            .map(|s| (s.rule_id, (s.evaluated, s.matched, s.connections_refused)))
            .collect();
        self.table
            .store(Arc::new(RuleTable::build(rules, &carried)));
        self.policy_version.store(rules.version, Relaxed);
    }

    /// Records one request's decision (made against rule-set `version`).
    pub fn record(
        &self,
        version: u64,
        scope: RequestScope,
        verdict: AclVerdict,
        rule: Option<&AclId>,
        monitored: &[AclId],
    ) {
        self.counts.add(verdict_slot(verdict));
        if matches!(verdict, AclVerdict::InvalidPath | AclVerdict::Misdirected) {
            // Refused before any rule: no scope, nothing evaluated.
            return;
        }
        let table = self.table.load();
        if table.version != version {
            // The table for this version is not installed (yet): count the request only.
            self.counts.add(UNATTRIBUTED);
            return;
        }
        let slot = scope_slot(scope);
        table.counts.add(slot);
        if let Some(i) = rule.and_then(|id| table.by_id.get(id)) {
            table.counts.add(rule_cell(*i, slot));
        }
        for id in monitored {
            if let Some(i) = table.by_id.get(id) {
                table.counts.add(rule_cell(*i, MONITORED));
            }
        }
    }

    /// Counts one request's verdict only (multi-tenant mode: the request's rules are counted in
    /// its tenant's own table, see [`TenantRuleCounts`](crate::TenantRuleCounts)).
    pub(crate) fn record_verdict(&self, verdict: AclVerdict) {
        self.counts.add(verdict_slot(verdict));
    }

    /// Counts a request decided by a version whose counter table was not installed (yet).
    pub(crate) fn record_unattributed(&self) {
        self.counts.add(UNATTRIBUTED);
    }

    /// Counts a connection refused by `rule` (of rule-set `version`) before the handshake.
    pub fn record_refusal(&self, version: u64, rule: &AclId) {
        let table = self.table.load();
        if table.version == version {
            if let Some(i) = table.by_id.get(rule) {
                table.counts.add(rule_cell(*i, REFUSED));
            }
        }
    }

    /// Counts an accepted (`true`) or refused connection.
    pub fn record_connection(&self, accepted: bool) {
        self.counts.add(if accepted {
            CONNECTIONS_ACCEPTED
        } else {
            CONNECTIONS_REFUSED
        });
    }

    /// Counts a request signature that was checked (a live rule names
    /// `http_message_signature`): verified (`true`) or not.
    pub fn record_signature(&self, verified: bool) {
        self.counts.add(if verified {
            SIGNATURES_VERIFIED
        } else {
            SIGNATURES_REFUSED
        });
    }

    /// Counts a failed TLS handshake (or a connection that sent no ClientHello).
    pub fn record_handshake_failure(&self) {
        self.handshake_failures.fetch_add(1, Relaxed);
    }

    /// Counts a failed rule-source fetch or reload.
    pub fn record_rule_source_error(&self) {
        self.rule_source_errors.fetch_add(1, Relaxed);
    }

    /// Requests decided with `verdict` so far.
    pub fn verdict_count(&self, verdict: AclVerdict) -> u64 {
        self.counts.sum(verdict_slot(verdict))
    }

    /// Connections refused before the TLS handshake (or before any request on plain HTTP).
    pub fn connections_refused(&self) -> u64 {
        self.counts.sum(CONNECTIONS_REFUSED)
    }

    /// Per-rule totals of the installed version, in evaluation order.
    pub fn rule_stats(&self) -> Vec<RuleStat> {
        self.table.load().snapshot()
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4).
    pub fn render_prometheus(&self) -> String {
        let mut out = String::with_capacity(1024);
        let table = self.table.load();
        let _ = writeln!(
            out,
            "# HELP netacl_edge_policy_version Version of the rule set the counters are kept for.\n\
             # TYPE netacl_edge_policy_version gauge\nnetacl_edge_policy_version {}",
            table.version
        );
        let _ = writeln!(
            out,
            "# HELP netacl_edge_requests_total Requests evaluated, by verdict.\n\
             # TYPE netacl_edge_requests_total counter"
        );
        for v in VERDICTS {
            let _ = writeln!(
                out,
                "netacl_edge_requests_total{{verdict=\"{}\"}} {}",
                v.as_str(),
                self.verdict_count(v)
            );
        }
        let _ = writeln!(
            out,
            "# HELP netacl_edge_requests_unattributed_total Requests decided by a version whose \
             counter table was not installed yet.\n\
             # TYPE netacl_edge_requests_unattributed_total counter\n\
             netacl_edge_requests_unattributed_total {}",
            self.counts.sum(UNATTRIBUTED)
        );
        let _ = writeln!(
            out,
            "# HELP netacl_edge_connections_total Connections, by outcome of the connection-level check.\n\
             # TYPE netacl_edge_connections_total counter\n\
             netacl_edge_connections_total{{result=\"accepted\"}} {}\n\
             netacl_edge_connections_total{{result=\"refused\"}} {}",
            self.counts.sum(CONNECTIONS_ACCEPTED),
            self.counts.sum(CONNECTIONS_REFUSED)
        );
        let _ = writeln!(
            out,
            "# HELP netacl_edge_message_signatures_total Requests whose RFC 9421 signature was checked (only while a live rule names http_message_signature), by outcome.\n\
             # TYPE netacl_edge_message_signatures_total counter\n\
             netacl_edge_message_signatures_total{{result=\"verified\"}} {}\n\
             netacl_edge_message_signatures_total{{result=\"not_verified\"}} {}",
            self.counts.sum(SIGNATURES_VERIFIED),
            self.counts.sum(SIGNATURES_REFUSED)
        );
        let _ = writeln!(
            out,
            "# HELP netacl_edge_tls_handshake_failures_total Connections without a usable ClientHello or handshake.\n\
             # TYPE netacl_edge_tls_handshake_failures_total counter\n\
             netacl_edge_tls_handshake_failures_total {}",
            self.handshake_failures.load(Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP netacl_edge_rule_source_errors_total Failed rule fetches or reloads (the last good rules stay).\n\
             # TYPE netacl_edge_rule_source_errors_total counter\n\
             netacl_edge_rule_source_errors_total {}",
            self.rule_source_errors.load(Relaxed)
        );
        let stats = table.snapshot();
        for (name, help) in [
            ("evaluated", "Requests a rule was evaluated for."),
            ("matched", "Requests a rule matched."),
            (
                "connections_refused",
                "Connections a rule refused before the TLS handshake.",
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP netacl_edge_rule_{name}_total {help}\n# TYPE netacl_edge_rule_{name}_total counter"
            );
            for s in &stats {
                let value = match name {
                    "evaluated" => s.evaluated,
                    "matched" => s.matched,
                    _ => s.connections_refused,
                };
                let _ = writeln!(
                    out,
                    "netacl_edge_rule_{name}_total{{rule_id=\"{}\",action=\"{}\",scope=\"{}\"}} {value}",
                    s.rule_id, s.action, s.scope
                );
            }
        }
        let sections: Vec<(MetricFamily, Section)> = {
            let extra = self.extra.read().unwrap_or_else(|p| p.into_inner());
            extra.sections.clone()
        };
        // The families in the order they were first registered, each with all its series.
        for (i, (family, _)) in sections.iter().enumerate() {
            if sections[..i].iter().any(|(f, _)| f.name == family.name) {
                continue;
            }
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}",
                name = family.name,
                help = family.help,
                kind = family.kind
            );
            for (_, series) in sections.iter().filter(|(f, _)| f.name == family.name) {
                series(&mut out);
            }
        }
        out
    }

    /// Emits one `acls_summary` event per rule every `interval` (counts over the interval), on
    /// target `netacl_edge::summary`, until the returned task is aborted.
    pub fn spawn_summary(self: Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        self.spawn_summary_to(interval, None)
    }

    /// [`spawn_summary`](Self::spawn_summary), also handing each interval's reports to `sink`:
    /// one [`AclSummary`] per rule that matched a request or refused a connection during the
    /// interval (a rule with nothing to report sends nothing, so an idle rule set does not fill
    /// the tenant's log).
    pub fn spawn_summary_to(
        self: Arc<Self>,
        interval: Duration,
        sink: Option<SummarySink>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut last: HashMap<AclId, (u64, u64, u64)> = HashMap::new();
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let (next, reports) = self.emit_summary(&last, interval);
                last = next;
                if let Some(sink) = &sink {
                    if !reports.is_empty() {
                        (sink.0)(reports);
                    }
                }
            }
        })
    }

    /// Emits the summary events for the counts since `last`; returns the new totals and the
    /// reports of the rules that matched or refused something.
    fn emit_summary(&self, last: &RuleTotals, interval: Duration) -> (RuleTotals, Vec<AclSummary>) {
        let version = self.table.load().version;
        let mut next = HashMap::new();
        let mut reports = Vec::new();
        for s in self.rule_stats() {
            let (e0, m0, r0) = last.get(&s.rule_id).copied().unwrap_or_default();
            let (evaluated, matched, refused) = (
                s.evaluated.saturating_sub(e0),
                s.matched.saturating_sub(m0),
                s.connections_refused.saturating_sub(r0),
            );
            tracing::info!(
                target: "netacl_edge::summary",
                event = "acls_summary",
                rule_id = %s.rule_id,
                action = s.action,
                scope = %s.scope,
                policy_version = version,
                interval_s = interval.as_secs(),
                evaluated,
                matched,
                connections_refused = refused,
                evaluated_total = s.evaluated,
                matched_total = s.matched,
                "acls_summary"
            );
            if matched > 0 || refused > 0 {
                reports.push(AclSummary {
                    rule_id: s.rule_id.to_string(),
                    action: s.action.to_owned(),
                    scope: s.scope.as_str().to_owned(),
                    policy_version: version,
                    interval_s: interval
                        .as_secs()
                        .clamp(1, netacl_model::MAX_SUMMARY_INTERVAL_S),
                    evaluated,
                    matched,
                    connections_refused: refused,
                });
            }
            next.insert(s.rule_id, (s.evaluated, s.matched, s.connections_refused));
        }
        (next, reports)
    }
}

/// Where an edge hands its per-rule summaries (see [`EdgeMetrics::spawn_summary_to`]): the
/// admin service in the same process, or the reporter to a remote admin server. Called once per
/// interval from the summary task; it must not block (hand the batch to a task).
#[derive(Clone)]
pub struct SummarySink(Arc<dyn Fn(Vec<AclSummary>) + Send + Sync>);

impl SummarySink {
    /// A sink calling `f` with each interval's reports.
    pub fn new(f: impl Fn(Vec<AclSummary>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl std::fmt::Debug for SummarySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SummarySink")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_of_one_family_render_together_under_one_header() {
        let m = EdgeMetrics::new();
        let family = |name| MetricFamily {
            name,
            help: "help",
            kind: "counter",
        };
        m.add_series(family("door_a_total"), |out| {
            out.push_str("door_a_total{door=\"x\"} 1\n")
        });
        m.add_series(family("door_b_total"), |out| {
            out.push_str("door_b_total{door=\"x\"} 2\n")
        });
        m.add_series(family("door_a_total"), |out| {
            out.push_str("door_a_total{door=\"y\"} 3\n")
        });
        let text = m.render_prometheus();
        let tail = &text[text.find("# HELP door_a_total").unwrap()..];
        assert_eq!(
            tail,
            "# HELP door_a_total help\n# TYPE door_a_total counter\n\
             door_a_total{door=\"x\"} 1\ndoor_a_total{door=\"y\"} 3\n\
             # HELP door_b_total help\n# TYPE door_b_total counter\n\
             door_b_total{door=\"x\"} 2\n"
        );
    }

    #[test]
    fn listener_series_name_each_listener_and_reason() {
        let mut proxy = netacl_listener::ListenerStats::default();
        proxy.open = 7;
        proxy.refused_max_connections = 3;
        proxy.evicted_per_client = 2;
        proxy.body_timeouts = 1;
        let text = render_listeners(&[
            ("proxy", proxy),
            ("metrics", netacl_listener::ListenerStats::default()),
        ]);
        for line in [
            "# TYPE netacl_edge_listener_connections_open gauge",
            "netacl_edge_listener_connections_open{listener=\"proxy\"} 7",
            "netacl_edge_listener_connections_refused_total{listener=\"proxy\",cap=\"max_connections\"} 3",
            "netacl_edge_listener_connections_evicted_total{listener=\"proxy\",cap=\"max_connections_per_client\"} 2",
            "netacl_edge_listener_timeouts_total{listener=\"proxy\",timeout=\"body\"} 1",
            "netacl_edge_listener_timeouts_total{listener=\"metrics\",timeout=\"idle\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }

    fn rules(version: u64, specs: &[(&str, u64, &str, &str)]) -> RuleSet {
        let records: Vec<_> = specs
            .iter()
            .map(|(id, priority, action, scope)| {
                serde_json::json!({
                    "id": id, "description": "t", "active": true, "priority": priority,
                    "rule": {"action": {*action: true}, "scope": scope,
                             "match": {"ipv4_cidrs": ["192.0.2.0/24"]}},
                    "created_at": "2026-01-01T00:00:00.000Z",
                    "updated_at": "2026-01-01T00:00:00.000Z"
                })
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

    fn id(s: &str) -> AclId {
        AclId::parse(s).unwrap()
    }

    #[test]
    fn evaluated_is_derived_from_earlier_decisions() {
        let m = EdgeMetrics::new();
        m.install_rules(&rules(
            3,
            &[
                (A, 1, "log", "tenant"),
                (B, 2, "block", "management"),
                (C, 3, "allow", "tenant"),
            ],
        ));
        let mgmt = RequestScope::Management;
        let auth = RequestScope::Authentication;
        // 2 management requests blocked by B (A monitored in one), 3 auth requests allowed by
        // C, 1 management request undecided.
        m.record(3, mgmt, AclVerdict::Block, Some(&id(B)), &[id(A)]);
        m.record(3, mgmt, AclVerdict::Block, Some(&id(B)), &[]);
        for _ in 0..3 {
            m.record(3, auth, AclVerdict::Allow, Some(&id(C)), &[]);
        }
        m.record(3, mgmt, AclVerdict::None, None, &[]);
        let stats = m.rule_stats();
        let get = |s: &str| {
            stats
                .iter()
                .find(|r| r.rule_id.as_str() == s)
                .unwrap()
                .clone()
        };
        assert_eq!((get(A).evaluated, get(A).matched), (6, 1));
        assert_eq!((get(B).evaluated, get(B).matched), (3, 2));
        assert_eq!((get(C).evaluated, get(C).matched), (4, 3));
        assert_eq!(m.verdict_count(AclVerdict::Block), 2);

        // A stale version is counted as a verdict but not attributed.
        m.record(2, auth, AclVerdict::Allow, Some(&id(C)), &[]);
        assert_eq!(get(C).matched, 3);

        // A new version carries the totals of ids it keeps.
        m.install_rules(&rules(4, &[(C, 5, "allow", "tenant")]));
        m.record(4, auth, AclVerdict::Allow, Some(&id(C)), &[]);
        let stats = m.rule_stats();
        assert_eq!(stats.len(), 1);
        assert_eq!((stats[0].evaluated, stats[0].matched), (5, 4));

        let text = m.render_prometheus();
        assert!(text.contains(&format!(
            "netacl_edge_rule_matched_total{{rule_id=\"{C}\",action=\"allow\",scope=\"tenant\"}} 4"
        )));
        assert!(text.contains("netacl_edge_requests_total{verdict=\"block\"} 2"));
        assert!(text.contains("netacl_edge_policy_version 4"));
    }

    #[test]
    fn summary_reports_deltas() {
        let m = EdgeMetrics::new();
        m.install_rules(&rules(1, &[(A, 1, "block", "tenant")]));
        m.record(
            1,
            RequestScope::Authentication,
            AclVerdict::Block,
            Some(&id(A)),
            &[],
        );
        let (last, reports) = m.emit_summary(&HashMap::new(), Duration::from_secs(600));
        assert_eq!(last.get(&id(A)), Some(&(1, 1, 0)));
        assert_eq!(reports.len(), 1);
        assert_eq!(
            (
                reports[0].matched,
                reports[0].interval_s,
                reports[0].action.as_str()
            ),
            (1, 600, "block")
        );
        assert_eq!(reports[0].check(), Ok(()));
        // Nothing new: nothing to report.
        let (_, quiet) = m.emit_summary(&last, Duration::from_secs(600));
        assert!(quiet.is_empty());
        m.record(
            1,
            RequestScope::Authentication,
            AclVerdict::Block,
            Some(&id(A)),
            &[],
        );
        m.record_refusal(1, &id(A));
        let (next, reports) = m.emit_summary(&last, Duration::from_secs(600));
        assert_eq!(next.get(&id(A)), Some(&(2, 2, 1)));
        assert_eq!(
            (
                reports[0].evaluated,
                reports[0].matched,
                reports[0].connections_refused
            ),
            (1, 1, 1),
            "the interval's deltas"
        );
    }
}

//! Many tenants behind one edge: the host a request names picks the tenant whose policy decides.
//!
//! A [`TenantRouter`] maps host names to [`TenantPolicy`] values (one per tenant: its own
//! [`Engine`], its connection-level rules, its counters). The host → tenant table is one
//! immutable value swapped whole ([`arc_swap`]), so a request sees one table, one tenant, and
//! that tenant's one policy snapshot. Selecting a tenant allocates nothing and takes no lock:
//! the host is hashed with a keyed hash over its ASCII-lowercased bytes (folded in a stack
//! buffer, never copied to the heap) and compared case-insensitively in place.
//!
//! Changes come in batches ([`TenantRouter::apply`]): a batch compiles the rules of the
//! tenants it names (only those), then, when tenants were added or removed or their domains
//! changed, builds the next table once (linear in the number of tenants), so loading 10,000
//! tenants costs 10,000 compilations and one table, not 10,000 tables. A rule change in a
//! tenant whose domains stay is installed in that tenant's engine and in the table's entries
//! for its hosts (each entry holds the policy that decides its requests, so that a request
//! reads one entry and then the policy, as a single-tenant edge reads its engine and then
//! the policy); the table is not rebuilt.
//!
//! ```
//! use netacl_edge::{TenantChange, TenantRouter};
//! use netacl_model::RuleSet;
//!
//! let router = TenantRouter::new();
//! let empty = RuleSet { version: 1, acls: vec![] };
//! let report = router.apply(vec![
//!     TenantChange::put("acme", ["acme.test"], empty.clone()),
//!     TenantChange::put("globex", ["globex.test", "www.globex.test"], empty),
//! ]);
//! assert!(report.failed.is_empty());
//! assert_eq!(router.select("ACME.test:8443").unwrap().id(), "acme");
//! assert_eq!(router.select("www.globex.test.").unwrap().id(), "globex");
//! assert!(router.select("initech.test").is_none());
//! ```
pub(crate) mod host_table;
pub(crate) mod sni;

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use hashbrown::HashTable;
use netacl_eval::{CompileError, CompiledPolicy, Engine, ManagedIndex};
use netacl_model::{Limits, RuleSet};

use crate::decision::connection_rules::ConnectionRules;
use crate::decision::AclVerdict;
use crate::observe::metrics::Stripes;
use crate::observe::tenant_counts::TenantRuleCounts;
use crate::signals::httpsig::SigningKeys;
use crate::tenants::host_table::HostTable;

/// The most bytes of a host name that are looked up (DNS names are at most 253); a longer
/// `Host` names no tenant.
const MAX_HOST: usize = 253;

/// The label value under which tenants without their own series are counted.
pub const OTHER_TENANTS: &str = "_other";

/// A host name as tenants are looked up by: surrounding ASCII white space trimmed (space, tab,
/// CR, LF, form feed; any other character, a non-ASCII space included, is part of the name,
/// which then names no tenant), the port removed (`acme.test:8443` → `acme.test`,
/// `[2001:db8::1]:443` → `2001:db8::1`), one trailing dot removed. Case is left as it is
/// (lookups ignore ASCII case). `None` for an empty or overlong name.
pub fn tenant_host(value: &str) -> Option<&str> {
    let value = value.trim_ascii();
    let host = if let Some(rest) = value.strip_prefix('[') {
        rest.split_once(']').map(|(h, _)| h)?
    } else {
        // A port is the digits after the last `:`: scanned from the end, so a name without one
        // (the common case: it ends in a letter) costs one comparison.
        let bytes = value.as_bytes();
        let mut end = bytes.len();
        while end > 0 && bytes[end - 1].is_ascii_digit() {
            end -= 1;
        }
        match end.checked_sub(1) {
            Some(colon) if bytes[colon] == b':' => &value[..colon],
            _ => value,
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    (!host.is_empty() && host.len() <= MAX_HOST).then_some(host)
}

/// A table from host names to values, case-insensitive (ASCII), keyed hashing (a per-table
/// random seed, so that hosts a client chooses cannot be made to collide), lookups without
/// allocation.
pub(crate) struct HostMap<V> {
    state: foldhash::quality::RandomState,
    entries: HashTable<(Arc<str>, V)>,
}

impl<V: Clone> Clone for HostMap<V> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            entries: self.entries.clone(),
        }
    }
}

impl<V> Default for HostMap<V> {
    fn default() -> Self {
        Self {
            state: foldhash::quality::RandomState::default(),
            entries: HashTable::new(),
        }
    }
}

impl<V> HostMap<V> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            state: foldhash::quality::RandomState::default(),
            entries: HashTable::with_capacity(capacity),
        }
    }

    /// The hash of `host`'s ASCII-lowercased bytes, folded 32 bytes at a time on the stack.
    fn hash(&self, host: &str) -> u64 {
        let mut hasher = self.state.build_hasher();
        let mut buf = [0u8; 32];
        for chunk in host.as_bytes().chunks(buf.len()) {
            let folded = &mut buf[..chunk.len()];
            for (d, s) in folded.iter_mut().zip(chunk) {
                *d = s.to_ascii_lowercase();
            }
            hasher.write(folded);
        }
        hasher.write_usize(host.len());
        hasher.finish()
    }

    /// The value for `host` (any ASCII case).
    pub(crate) fn get(&self, host: &str) -> Option<&V> {
        let hash = self.hash(host);
        self.entries
            .find(hash, |(k, _)| k.eq_ignore_ascii_case(host))
            .map(|(_, v)| v)
    }

    /// Inserts `host` (stored lowercased); gives back the value it held.
    pub(crate) fn insert(&mut self, host: &str, value: V) -> Option<V> {
        let hash = self.hash(host);
        let state = &self.state;
        match self.entries.entry(
            hash,
            |(k, _)| k.eq_ignore_ascii_case(host),
            |(k, _)| {
                let mut hasher = state.build_hasher();
                let mut buf = [0u8; 32];
                for chunk in k.as_bytes().chunks(buf.len()) {
                    let folded = &mut buf[..chunk.len()];
                    for (d, s) in folded.iter_mut().zip(chunk) {
                        *d = s.to_ascii_lowercase();
                    }
                    hasher.write(folded);
                }
                hasher.write_usize(k.len());
                hasher.finish()
            },
        ) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                Some(std::mem::replace(&mut e.get_mut().1, value))
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert((Arc::from(host.to_ascii_lowercase()), value));
                None
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().map(|(k, v)| (&**k, v))
    }
}

/// Requests of one tenant (or of all tenants without their own series), by verdict: written
/// per request by every core, so striped (one stripe per thread slot, each on cache lines of its
/// own, as the per-rule counters are); a read sums the stripes.
#[derive(Debug)]
pub struct TenantCounters {
    verdicts: Stripes,
}

impl Default for TenantCounters {
    fn default() -> Self {
        Self {
            verdicts: Stripes::new(6),
        }
    }
}

fn verdict_slot(verdict: AclVerdict) -> usize {
    match verdict {
        AclVerdict::None => 0,
        AclVerdict::Allow => 1,
        AclVerdict::Block => 2,
        AclVerdict::Redirect => 3,
        AclVerdict::InvalidPath => 4,
        _ => 5,
    }
}

const COUNTED: [AclVerdict; 5] = [
    AclVerdict::None,
    AclVerdict::Allow,
    AclVerdict::Block,
    AclVerdict::Redirect,
    AclVerdict::InvalidPath,
];

impl TenantCounters {
    pub(crate) fn record(&self, verdict: AclVerdict) {
        self.verdicts.add(verdict_slot(verdict));
    }

    /// Requests counted with `verdict`.
    pub fn count(&self, verdict: AclVerdict) -> u64 {
        self.verdicts.sum(verdict_slot(verdict))
    }
}

/// One tenant at the edge: its id, its domains, the engine holding its live policy, the rules
/// that can refuse its connections before the handshake, and where its requests are counted.
pub struct TenantPolicy {
    id: Arc<str>,
    domains: Box<[Arc<str>]>,
    engine: Arc<Engine>,
    /// Whether `engine` is fed by someone else ([`TenantRules::Follow`]); otherwise the router
    /// alone installs its policies.
    followed: bool,
    connection_rules: ArcSwap<ConnectionRules>,
    counters: Arc<TenantCounters>,
    /// Compilations of this tenant's rules (a rule change in another tenant never adds one).
    compiles: AtomicU64,
    /// Its per-rule counters and traffic sample key (kept while the tenant stays).
    rule_counts: Arc<TenantRuleCounts>,
}

impl std::fmt::Debug for TenantPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantPolicy")
            .field("id", &self.id)
            .field("domains", &self.domains)
            .field("version", &self.engine.policy().version())
            .finish_non_exhaustive()
    }
}

impl TenantPolicy {
    /// The tenant's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its domains, lowercased.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.iter().map(|d| &**d)
    }

    /// The engine holding its live policy. Read it; change it only through
    /// [`TenantRouter::apply`] (a policy installed in it directly would not reach the router's
    /// host table, which serves a compiled tenant's requests), unless the tenant follows an
    /// engine its caller feeds ([`TenantRules::Follow`]).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Its requests by verdict (shared with every tenant without its own series).
    pub fn counters(&self) -> &Arc<TenantCounters> {
        &self.counters
    }

    /// Its per-rule counters, for its `acls_summary` reports, and the key of its requests in
    /// the edge's traffic sample.
    pub fn rule_counts(&self) -> &TenantRuleCounts {
        &self.rule_counts
    }

    /// How many times this tenant's rules were compiled at this edge.
    pub fn compiles(&self) -> u64 {
        self.compiles.load(Relaxed)
    }

    pub(crate) fn connection_rules(&self) -> arc_swap::Guard<Arc<ConnectionRules>> {
        self.connection_rules.load()
    }

    /// Compiles `rules` with `managed` lists (and the keys signed-proxy rules are verified
    /// with) and puts them in its engine. On error nothing changes. The router calls it and
    /// then puts the policy in its host table (see [`Routed`]).
    pub(crate) fn apply_rules(
        &self,
        rules: &RuleSet,
        managed: &Arc<ManagedIndex>,
        keys: Option<Arc<SigningKeys>>,
    ) -> Result<(), CompileError> {
        let (policy, connection) = compile(rules, managed, keys)?;
        self.compiles.fetch_add(1, Relaxed);
        self.rule_counts.install(rules);
        self.engine.install(policy);
        self.connection_rules.store(connection);
        Ok(())
    }

    /// For a tenant whose engine is fed by someone else (`netacl serve` in process): the rule
    /// set that engine now holds, so that connection-level refusal follows it.
    pub fn observe_rules(&self, rules: &RuleSet) -> Result<(), CompileError> {
        let live = self.engine.policy();
        let connection = connection_rules(rules, live.managed_index())?;
        self.connection_rules.store(connection);
        self.rule_counts.install(rules);
        Ok(())
    }
}

fn connection_rules(
    rules: &RuleSet,
    managed: &Arc<ManagedIndex>,
) -> Result<Arc<ConnectionRules>, CompileError> {
    let built = ConnectionRules::build(rules, managed)?;
    Ok(if built.is_empty() {
        // Most tenants have no rule that can refuse a connection: share one empty value.
        empty_connection_rules(rules.version)
    } else {
        Arc::new(built)
    })
}

fn empty_connection_rules(version: u64) -> Arc<ConnectionRules> {
    Arc::new(ConnectionRules::none(version))
}

fn compile(
    rules: &RuleSet,
    managed: &Arc<ManagedIndex>,
    keys: Option<Arc<SigningKeys>>,
) -> Result<(Arc<CompiledPolicy>, Arc<ConnectionRules>), CompileError> {
    let connection = connection_rules(rules, managed)?;
    let mut policy = CompiledPolicy::compile_with_lists(rules, &Limits::default(), managed)?;
    if let Some(keys) = keys.filter(|k| !k.is_empty()) {
        policy = policy.with_attachment(keys);
    }
    Ok((Arc::new(policy), connection))
}

/// The rules of a tenant in a [`TenantChange::Put`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TenantRules {
    /// Compile these rules (with these managed lists and signing keys) into the tenant's own
    /// engine.
    Compile {
        /// The rule set.
        rules: RuleSet,
        /// The managed lists they may name.
        managed: Arc<ManagedIndex>,
        /// Keys for `http_message_signature` rules.
        keys: Option<Arc<SigningKeys>>,
    },
    /// Keep the rules in service (a change of domains only; a new tenant starts empty).
    Keep,
    /// Follow an engine fed by someone else (`netacl serve` in process); `rules` is what it
    /// holds, for the connection-level rules.
    Follow {
        /// The engine.
        engine: Arc<Engine>,
        /// The rule set it holds, when known.
        rules: Option<Arc<RuleSet>>,
    },
}

/// One change in a batch given to [`TenantRouter::apply`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TenantChange {
    /// Adds the tenant or replaces its domains and (per `rules`) its policy.
    Put {
        /// The tenant's id.
        id: String,
        /// Its host names (any case, a trailing dot and a port are removed).
        domains: Vec<String>,
        /// Its rules.
        rules: TenantRules,
    },
    /// Removes the tenant: its hosts name no tenant any more.
    Remove {
        /// The tenant's id.
        id: String,
    },
}

impl TenantChange {
    /// Puts tenant `id` with `domains` and `rules` (no managed lists, no signing keys).
    pub fn put<I, S>(id: &str, domains: I, rules: RuleSet) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        TenantChange::Put {
            id: id.to_owned(),
            domains: domains.into_iter().map(|d| d.as_ref().to_owned()).collect(),
            rules: TenantRules::Compile {
                rules,
                managed: Arc::clone(CompiledPolicy::empty().managed_index()),
                keys: None,
            },
        }
    }

    /// Removes tenant `id`.
    pub fn remove(id: &str) -> Self {
        TenantChange::Remove { id: id.to_owned() }
    }
}

/// Why one change of a batch was not applied (the others were).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TenantChangeError {
    /// The tenant's rules do not compile: its policy in service stays (a new tenant is not
    /// added).
    #[error("tenant {tenant}: rules not compiled: {source}")]
    Compile {
        /// The tenant.
        tenant: String,
        /// Why.
        #[source]
        source: CompileError,
    },
    /// A domain is not a host name (empty, or longer than 253 bytes).
    #[error("tenant {tenant}: domain {domain:?} is not a host name")]
    InvalidDomain {
        /// The tenant.
        tenant: String,
        /// The domain as given.
        domain: String,
    },
    /// A domain is another tenant's.
    #[error("tenant {tenant}: domain {domain} belongs to tenant {owner}")]
    DomainTaken {
        /// The tenant.
        tenant: String,
        /// The domain.
        domain: String,
        /// The tenant holding it.
        owner: String,
    },
}

/// What a batch did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ApplyReport {
    /// Tenants whose rules were compiled.
    pub compiled: usize,
    /// Tenants added.
    pub added: usize,
    /// Tenants removed.
    pub removed: usize,
    /// Changes not applied.
    pub failed: Vec<TenantChangeError>,
}

/// A host's entry: its tenant and the policy that decides its requests, so that a decision
/// goes from the host table's slot to the policy, as a single-tenant edge goes from its engine
/// to the policy: the slot takes the place of the engine instead of coming before it.
///
/// For a tenant whose rules the router compiles, the slot's policy is the one in service: the
/// router installs every policy of that tenant itself, and in the same batch (under its
/// writer lock, before [`TenantRouter::apply`] returns) puts it in every slot naming the
/// tenant, in the table in service and in any table it builds (which copies it from the
/// engine). A tenant that follows an engine fed by someone else (`netacl serve` in process,
/// [`TenantRules::Follow`]) is decided from that engine's snapshot.
struct Routed {
    tenant: Arc<TenantPolicy>,
    decides: Decides,
}

/// What decides a host's requests.
enum Decides {
    /// The policy in service of a tenant whose rules the router compiles.
    Held(ArcSwap<CompiledPolicy>),
    /// The engine of a tenant that follows an engine fed by someone else.
    Followed(Arc<Engine>),
}

impl Clone for Routed {
    fn clone(&self) -> Self {
        Routed {
            tenant: Arc::clone(&self.tenant),
            decides: match &self.decides {
                Decides::Held(policy) => Decides::Held(ArcSwap::new(policy.load_full())),
                Decides::Followed(engine) => Decides::Followed(Arc::clone(engine)),
            },
        }
    }
}

impl Routed {
    /// The entry of `tenant`, its policy read from its engine (the writer lock held).
    fn new(tenant: &Arc<TenantPolicy>) -> Self {
        let decides = match tenant.followed {
            true => Decides::Followed(Arc::clone(&tenant.engine)),
            false => Decides::Held(ArcSwap::new(tenant.engine.policy())),
        };
        Routed {
            tenant: Arc::clone(tenant),
            decides,
        }
    }

    /// The address whose line a request for this entry's hosts reads first: the policy's, or
    /// the followed engine's.
    fn hint(&self) -> usize {
        match &self.decides {
            Decides::Held(policy) => Arc::as_ptr(&policy.load()) as usize,
            Decides::Followed(engine) => Arc::as_ptr(engine) as usize,
        }
    }

    /// Puts the policy in service of the tenant's engine in this entry (the writer lock
    /// held, after the router installed it).
    fn refresh(&self) {
        if let Decides::Held(policy) = &self.decides {
            policy.store(self.tenant.engine.policy());
        }
    }
}

/// The tenants in service: one value, replaced whole.
struct TenantTable {
    hosts: HostTable<Routed>,
    by_id: HashMap<Arc<str>, Arc<TenantPolicy>>,
}

impl TenantTable {
    fn empty() -> Self {
        Self {
            hosts: HostTable::default(),
            by_id: HashMap::new(),
        }
    }

    /// Puts `tenant`'s policy in service in every entry naming it (after the router installed
    /// it, the writer lock held).
    fn refresh(&self, tenant: &Arc<TenantPolicy>) {
        for domain in tenant.domains.iter() {
            if let Some(routed) = self.hosts.get(domain) {
                if Arc::ptr_eq(&routed.tenant, tenant) {
                    routed.refresh();
                    self.hosts.hint(domain, routed.hint());
                }
            }
        }
    }

    /// Every host's hint (after the table is built).
    fn with_hints(self) -> Self {
        for tenant in self.by_id.values() {
            for domain in tenant.domains.iter() {
                if let Some(routed) = self.hosts.get(domain) {
                    self.hosts.hint(domain, routed.hint());
                }
            }
        }
        self
    }

    /// The tenant serving `host` (already trimmed by [`tenant_host`]). The line its decision
    /// reads next (the policy, or the followed engine) was requested with the host's slot, from
    /// the slot's hint.
    #[inline]
    fn tenant(&self, host: &str) -> Option<SelectedTenant<'_>> {
        let routed = self.hosts.get(host)?;
        Some(SelectedTenant { routed })
    }
}

/// The tenant a host selected, as the per-request path gets it: the tenant (its methods through
/// `Deref`) and the policy that decides its requests, read from the host table's slot.
#[derive(Clone, Copy)]
pub struct SelectedTenant<'t> {
    routed: &'t Routed,
}

impl<'t> SelectedTenant<'t> {
    /// The engine holding the tenant's live policy (the same as [`TenantPolicy::engine`]).
    pub fn engine(&self) -> &'t Arc<Engine> {
        &self.routed.tenant.engine
    }

    /// The tenant's policy in service, for one decision (one snapshot: no reference count
    /// written, as [`Engine::snapshot`]).
    #[inline]
    pub fn policy(&self) -> arc_swap::Guard<Arc<CompiledPolicy>> {
        match &self.routed.decides {
            Decides::Held(policy) => policy.load(),
            Decides::Followed(engine) => engine.snapshot(),
        }
    }

    /// The tenant itself.
    pub fn tenant(&self) -> &'t Arc<TenantPolicy> {
        &self.routed.tenant
    }
}

impl std::ops::Deref for SelectedTenant<'_> {
    type Target = TenantPolicy;
    fn deref(&self) -> &TenantPolicy {
        &self.routed.tenant
    }
}

/// How the request named its host, and what the edge makes of it (see
/// [`TenantRouter::select_request`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestHosts<'a> {
    /// Whether the request came over TLS.
    pub tls: bool,
    /// The TLS SNI, if the client sent one.
    pub sni: Option<&'a str>,
    pub host_header: Option<&'a str>,
    pub authority: Option<&'a str>,
}

/// Host names to tenants (see the module docs).
pub struct TenantRouter {
    table: ArcSwap<TenantTable>,
    /// Serialises batches (readers never take it).
    writer: Mutex<()>,
    /// Tenants with their own counter series (`--metrics-tenant`).
    counted: HashSet<String>,
    /// Every other tenant's requests.
    others: Arc<TenantCounters>,
    /// Requests for a host of no tenant (421), and host/SNI disagreements.
    misdirected: AtomicU64,
}

impl std::fmt::Debug for TenantRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantRouter")
            .field("tenants", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for TenantRouter {
    fn default() -> Self {
        Self::new()
    }
}

impl TenantRouter {
    /// No tenants; every tenant counted under [`OTHER_TENANTS`].
    pub fn new() -> Self {
        Self::with_counted_tenants(std::iter::empty::<String>())
    }

    /// No tenants yet; the tenants named in `counted` get their own counter series, every other
    /// tenant is counted under [`OTHER_TENANTS`] (so the series stay bounded whatever the
    /// number of tenants).
    pub fn with_counted_tenants<I, S>(counted: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            table: ArcSwap::from_pointee(TenantTable::empty()),
            writer: Mutex::new(()),
            counted: counted.into_iter().map(Into::into).collect(),
            others: Arc::new(TenantCounters::default()),
            misdirected: AtomicU64::new(0),
        }
    }

    /// Tenants in service.
    pub fn len(&self) -> usize {
        self.table.load().by_id.len()
    }

    /// Whether no tenant is in service.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tenant serving `host` (any case; a port and one trailing dot are ignored).
    /// Allocates nothing, takes no lock.
    pub fn select(&self, host: &str) -> Option<Arc<TenantPolicy>> {
        let host = tenant_host(host)?;
        self.table
            .load()
            .tenant(host)
            .map(|t| Arc::clone(t.tenant()))
    }

    /// Calls `f` with the tenant serving `host` (as [`select`](Self::select), without touching
    /// the tenant's reference count: the per-request path).
    pub fn with_tenant<R>(&self, host: &str, f: impl FnOnce(SelectedTenant<'_>) -> R) -> Option<R> {
        let host = tenant_host(host)?;
        self.table.load().tenant(host).map(f)
    }

    /// The tenant with this id.
    pub fn tenant(&self, id: &str) -> Option<Arc<TenantPolicy>> {
        self.table.load().by_id.get(id).cloned()
    }

    /// Every tenant in service (one snapshot of the table), in no particular order.
    pub fn tenants(&self) -> Vec<Arc<TenantPolicy>> {
        self.table.load().by_id.values().cloned().collect()
    }

    /// Every tenant's id, sorted.
    pub fn tenant_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .table
            .load()
            .by_id
            .keys()
            .map(|k| k.to_string())
            .collect();
        ids.sort();
        ids
    }

    /// Requests refused 421 so far (host of no tenant, or SNI and host naming different
    /// tenants).
    pub fn misdirected(&self) -> u64 {
        self.misdirected.load(Relaxed)
    }

    pub(crate) fn record_misdirected(&self) {
        self.misdirected.fetch_add(1, Relaxed);
    }

    /// The tenant a request is for, or `None` (the edge answers 421):
    ///
    /// - TLS with SNI: the SNI's tenant (none: 421); a `Host` or authority that names another
    ///   tenant (or no tenant) is domain fronting: 421.
    /// - TLS without SNI: the host's tenant, unless `own_certificate(host)` (the host has a
    ///   certificate of its own, so its clients send SNI): 421.
    /// - Plain HTTP: the host's tenant (`Host`, or the HTTP/2 authority; both given must name the
    ///   same tenant); no host (HTTP/1.0): 421.
    #[cfg(test)]
    pub(crate) fn select_request(
        &self,
        hosts: RequestHosts<'_>,
        own_certificate: impl Fn(&str) -> bool,
    ) -> Option<Arc<TenantPolicy>> {
        self.with_request_tenant(hosts, own_certificate, |t| Arc::clone(t.tenant()))
    }

    /// [`select_request`](Self::select_request) for the per-request path: `f` gets the tenant
    /// while the table is held (no reference count touched).
    pub(crate) fn with_request_tenant<R>(
        &self,
        hosts: RequestHosts<'_>,
        own_certificate: impl Fn(&str) -> bool,
        f: impl FnOnce(SelectedTenant<'_>) -> R,
    ) -> Option<R> {
        let table = self.table.load();
        let find = |name: &str| tenant_host(name).and_then(|h| table.tenant(h));
        let header = hosts.host_header;
        let chosen = match (hosts.tls, hosts.sni) {
            (true, Some(sni)) => find(sni)?,
            (true, None) => {
                let name = header.or(hosts.authority).and_then(tenant_host)?;
                if own_certificate(name) {
                    return None;
                }
                table.tenant(name)?
            }
            (false, _) => find(header.or(hosts.authority)?)?,
        };
        for given in [header, hosts.authority].into_iter().flatten() {
            match find(given) {
                Some(t) if Arc::ptr_eq(t.tenant(), chosen.tenant()) => {}
                _ => return None,
            }
        }
        Some(f(chosen))
    }

    /// Applies a batch of changes: compiles the rules of the tenants it puts (those only),
    /// then builds the next host table once if tenants came, went or changed domains, and
    /// swaps it in. A change that fails (rules that do not compile, a domain of another
    /// tenant) is reported and leaves that tenant as it was; the rest of the batch applies.
    ///
    /// Changes are taken by value or by reference (`&TenantChange`: nothing of the batch is
    /// dropped while it is applied).
    pub fn apply<C>(&self, changes: impl IntoIterator<Item = C>) -> ApplyReport
    where
        C: std::borrow::Borrow<TenantChange>,
    {
        let _writing = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.table.load_full();
        let mut report = ApplyReport::default();
        // The tenants as they will be, by id; `None` marks a removal.
        let mut next: HashMap<Arc<str>, Option<Arc<TenantPolicy>>> = HashMap::new();
        let mut rebuild = false;
        for change in changes {
            match change.borrow() {
                TenantChange::Remove { id } => {
                    if current.by_id.contains_key(id.as_str()) || next.contains_key(id.as_str()) {
                        next.insert(Arc::from(id.as_str()), None);
                        rebuild = true;
                    }
                }
                TenantChange::Put { id, domains, rules } => {
                    let mut normal: Vec<Arc<str>> = Vec::with_capacity(domains.len());
                    let mut bad = None;
                    for d in domains {
                        match tenant_host(d) {
                            Some(h) => {
                                let h = h.to_ascii_lowercase();
                                if !normal.iter().any(|n| **n == *h) {
                                    normal.push(Arc::from(h));
                                }
                            }
                            None => bad = Some(d.clone()),
                        }
                    }
                    if let Some(domain) = bad {
                        report.failed.push(TenantChangeError::InvalidDomain {
                            tenant: id.clone(),
                            domain,
                        });
                        continue;
                    }
                    normal.sort();
                    let existing = match next.get(id.as_str()) {
                        Some(pending) => pending.clone(),
                        None => current.by_id.get(id.as_str()).cloned(),
                    };
                    match self.put(id, normal, rules, existing.as_ref(), &mut report) {
                        Ok(Some(policy)) => {
                            next.insert(policy.id.clone(), Some(policy));
                            rebuild = true;
                        }
                        Ok(None) => {
                            // Its rules alone changed: the table in service serves the new
                            // policy from here on (a table this batch builds copies it).
                            if let Some(e) = &existing {
                                current.refresh(e);
                            }
                        }
                        Err(err) => report.failed.push(err),
                    }
                }
            }
        }
        if rebuild {
            let table = self.build(&current, next, &mut report);
            self.table.store(Arc::new(table));
        }
        report
    }

    /// Puts one tenant: `Ok(Some)` when the table must change (a new tenant, new domains or a
    /// new engine), `Ok(None)` when its rules alone changed (installed already).
    fn put(
        &self,
        id: &str,
        domains: Vec<Arc<str>>,
        rules: &TenantRules,
        existing: Option<&Arc<TenantPolicy>>,
        report: &mut ApplyReport,
    ) -> Result<Option<Arc<TenantPolicy>>, TenantChangeError> {
        let compile_error = |source| TenantChangeError::Compile {
            tenant: id.to_owned(),
            source,
        };
        let same_domains = existing.is_some_and(|e| *e.domains == *domains);
        match (rules, existing) {
            (
                TenantRules::Compile {
                    rules,
                    managed,
                    keys,
                },
                Some(e),
            ) if same_domains => {
                e.apply_rules(rules, managed, keys.clone())
                    .map_err(compile_error)?;
                report.compiled += 1;
                Ok(None)
            }
            (TenantRules::Keep, Some(_)) if same_domains => Ok(None),
            (TenantRules::Follow { engine, rules }, Some(e))
                if same_domains && Arc::ptr_eq(engine, &e.engine) =>
            {
                if let Some(rules) = rules {
                    e.observe_rules(rules).map_err(compile_error)?;
                }
                Ok(None)
            }
            (
                TenantRules::Compile {
                    rules,
                    managed,
                    keys,
                },
                _,
            ) => {
                let (policy, connection) =
                    compile(rules, managed, keys.clone()).map_err(compile_error)?;
                report.compiled += 1;
                let engine = Engine::new();
                engine.install(policy);
                let counts = TenantRuleCounts::carry(existing.map(|e| &e.rule_counts), Some(rules));
                Ok(Some(self.tenant_policy(
                    id,
                    domains,
                    (Arc::new(engine), false),
                    connection,
                    1,
                    counts,
                )))
            }
            (TenantRules::Keep, existing) => {
                let (engine, followed, connection) = match existing {
                    Some(e) => (e.engine.clone(), e.followed, e.connection_rules.load_full()),
                    None => (Arc::new(Engine::new()), false, empty_connection_rules(0)),
                };
                let compiles = existing.map_or(0, |e| e.compiles());
                let counts = TenantRuleCounts::carry(existing.map(|e| &e.rule_counts), None);
                Ok(Some(self.tenant_policy(
                    id,
                    domains,
                    (engine, followed),
                    connection,
                    compiles,
                    counts,
                )))
            }
            (TenantRules::Follow { engine, rules }, _) => {
                let connection = match rules {
                    Some(rules) => connection_rules(rules, engine.policy().managed_index())
                        .map_err(compile_error)?,
                    None => empty_connection_rules(0),
                };
                // The same engine is the same tenant (new domains); another is a new tenant.
                let kept = existing
                    .filter(|e| Arc::ptr_eq(&e.engine, engine))
                    .map(|e| &e.rule_counts);
                let counts = TenantRuleCounts::carry(kept, rules.as_deref());
                Ok(Some(self.tenant_policy(
                    id,
                    domains,
                    (engine.clone(), true),
                    connection,
                    0,
                    counts,
                )))
            }
        }
    }

    fn tenant_policy(
        &self,
        id: &str,
        domains: Vec<Arc<str>>,
        (engine, followed): (Arc<Engine>, bool),
        connection: Arc<ConnectionRules>,
        compiles: u64,
        rule_counts: Arc<TenantRuleCounts>,
    ) -> Arc<TenantPolicy> {
        let counters = if self.counted.contains(id) {
            Arc::new(TenantCounters::default())
        } else {
            Arc::clone(&self.others)
        };
        Arc::new(TenantPolicy {
            id: Arc::from(id),
            domains: domains.into_boxed_slice(),
            engine,
            followed,
            connection_rules: ArcSwap::new(connection),
            counters,
            compiles: AtomicU64::new(compiles),
            rule_counts,
        })
    }

    /// The next table: the current tenants with the batch's removals and puts applied. A put
    /// whose domain another tenant keeps fails (that tenant stays as it was).
    fn build(
        &self,
        current: &TenantTable,
        mut next: HashMap<Arc<str>, Option<Arc<TenantPolicy>>>,
        report: &mut ApplyReport,
    ) -> TenantTable {
        let mut by_id: HashMap<Arc<str>, Arc<TenantPolicy>> =
            HashMap::with_capacity(current.by_id.len() + next.len());
        for (id, tenant) in &current.by_id {
            match next.get(id) {
                Some(None) => report.removed += 1,
                Some(Some(_)) => {}
                None => {
                    by_id.insert(id.clone(), tenant.clone());
                }
            }
        }
        let mut hosts = HostTable::with_capacity(current.hosts.len() + next.len());
        for tenant in by_id.values() {
            for d in tenant.domains.iter() {
                hosts.insert(d, Routed::new(tenant));
            }
        }
        // Puts in id order, so that a contested domain goes the same way every time.
        let mut puts: Vec<Arc<TenantPolicy>> = next.drain().filter_map(|(_, t)| t).collect();
        puts.sort_by(|a, b| a.id.cmp(&b.id));
        for tenant in puts {
            let taken = tenant.domains.iter().find_map(|d| {
                hosts
                    .get(d)
                    .filter(|owner| owner.tenant.id != tenant.id)
                    .map(|owner| (d.to_string(), owner.tenant.id.to_string()))
            });
            if let Some((domain, owner)) = taken {
                report.failed.push(TenantChangeError::DomainTaken {
                    tenant: tenant.id.to_string(),
                    domain,
                    owner,
                });
                // Keep the tenant as it was, if it was.
                if let Some(old) = current.by_id.get(&tenant.id) {
                    for d in old.domains.iter() {
                        if hosts.get(d).is_none() {
                            hosts.insert(d, Routed::new(old));
                        }
                    }
                    by_id.insert(old.id.clone(), old.clone());
                }
                continue;
            }
            if !current.by_id.contains_key(&tenant.id) {
                report.added += 1;
            }
            for d in tenant.domains.iter() {
                hosts.insert(d, Routed::new(&tenant));
            }
            by_id.insert(tenant.id.clone(), tenant);
        }
        TenantTable { hosts, by_id }.with_hints()
    }

    /// Prometheus text: requests by tenant (the `--metrics-tenant` ones, everything else under
    /// [`OTHER_TENANTS`]) and verdict, tenants in service, misdirected requests.
    pub fn render_prometheus(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let table = self.table.load();
        let _ = writeln!(
            out,
            "# HELP netacl_edge_tenants Tenants in service at this edge.\n\
             # TYPE netacl_edge_tenants gauge\nnetacl_edge_tenants {}",
            table.by_id.len()
        );
        let _ = writeln!(
            out,
            "# HELP netacl_edge_misdirected_requests_total Requests answered 421: a host of no tenant, or SNI and host naming different tenants.\n\
             # TYPE netacl_edge_misdirected_requests_total counter\n\
             netacl_edge_misdirected_requests_total {}",
            self.misdirected()
        );
        let _ = writeln!(
            out,
            "# HELP netacl_edge_tenant_requests_total Requests by tenant (tenants named by --metrics-tenant; all others as \"{OTHER_TENANTS}\") and verdict.\n\
             # TYPE netacl_edge_tenant_requests_total counter"
        );
        let mut counted: Vec<&String> = self.counted.iter().collect();
        counted.sort();
        let mut series: Vec<(&str, Arc<TenantCounters>)> = counted
            .into_iter()
            .filter_map(|id| {
                table
                    .by_id
                    .get(id.as_str())
                    .map(|t| (id.as_str(), t.counters.clone()))
            })
            .collect();
        series.push((OTHER_TENANTS, self.others.clone()));
        for (tenant, counters) in series {
            for v in COUNTED {
                let _ = writeln!(
                    out,
                    "netacl_edge_tenant_requests_total{{tenant=\"{}\",verdict=\"{}\"}} {}",
                    escape_label(tenant),
                    v.as_str(),
                    counters.count(v)
                );
            }
        }
        out
    }
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty(version: u64) -> RuleSet {
        RuleSet {
            version,
            acls: vec![],
        }
    }

    #[test]
    fn hosts_are_normalised() {
        assert_eq!(tenant_host("Acme.Test:8443"), Some("Acme.Test"));
        assert_eq!(tenant_host("acme.test."), Some("acme.test"));
        assert_eq!(tenant_host("acme.test.:443"), Some("acme.test"));
        assert_eq!(tenant_host("[2001:db8::1]:443"), Some("2001:db8::1"));
        assert_eq!(tenant_host(" acme.test "), Some("acme.test"));
        assert_eq!(tenant_host("\tacme.test\t"), Some("acme.test"));
        // Only ASCII blanks are trimmed: a name with another space character around it is
        // another name (which no tenant has).
        assert_eq!(tenant_host("\u{a0}acme.test"), Some("\u{a0}acme.test"));
        assert_eq!(tenant_host(":80"), None);
        assert_eq!(tenant_host(""), None);
        assert_eq!(tenant_host("."), None);
        assert_eq!(tenant_host(&"a".repeat(254)), None);
        // The port is the digits after the last colon, whatever comes before.
        assert_eq!(tenant_host("acme.test:"), Some("acme.test"));
        assert_eq!(tenant_host("a:b:8443"), Some("a:b"));
        assert_eq!(tenant_host("a:8b"), Some("a:8b"));
        assert_eq!(tenant_host("t1.example"), Some("t1.example"));
        assert_eq!(tenant_host("10.0.0.1:80"), Some("10.0.0.1"));
        assert_eq!(tenant_host("10.0.0.1"), Some("10.0.0.1"));
        assert_eq!(tenant_host("8443"), Some("8443"));
        // Against the definition (`rsplit_once(':')`, a port of digits only) on many shapes.
        for value in [
            "x:", "x::1", ":1:2", "1:2:x", "a.b:0", "a.b:0x", "::", "9:9", "a:", "a",
        ] {
            let by_definition = match value.rsplit_once(':') {
                Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
                _ => value,
            };
            let by_definition = by_definition.strip_suffix('.').unwrap_or(by_definition);
            assert_eq!(
                tenant_host(value),
                (!by_definition.is_empty()).then_some(by_definition),
                "{value}"
            );
        }
    }

    #[test]
    fn lookups_ignore_case_and_do_not_cross_tenants() {
        let router = TenantRouter::new();
        let report = router.apply(vec![
            TenantChange::put("a", ["A.example", "www.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert_eq!(report.added, 2);
        assert_eq!(router.select("a.EXAMPLE").unwrap().id(), "a");
        assert_eq!(router.select("WWW.A.example.:80").unwrap().id(), "a");
        assert_eq!(router.select("b.example").unwrap().id(), "b");
        assert!(router.select("c.example").is_none());
        assert!(router.select("a.example.b.example").is_none());
        // A long host (beyond one fold buffer) is looked up like any other.
        let long = format!("{}.example", "x".repeat(100));
        router.apply(vec![TenantChange::put("long", [long.as_str()], empty(1))]);
        assert_eq!(
            router.select(&long.to_ascii_uppercase()).unwrap().id(),
            "long"
        );
        // IDN: a U-label does not match its A-label (domains are configured in A-labels).
        router.apply(vec![TenantChange::put(
            "idn",
            ["xn--caf-dma.example"],
            empty(1),
        )]);
        assert!(router.select("café.example").is_none());
        assert_eq!(router.select("XN--CAF-DMA.example").unwrap().id(), "idn");
    }

    #[test]
    fn a_rule_change_recompiles_only_its_tenant_and_keeps_the_table() {
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        let b = router.tenant("b").unwrap();
        let table = router.table.load_full();
        let report = router.apply(vec![TenantChange::put("a", ["a.example"], empty(2))]);
        assert_eq!(report.compiled, 1);
        assert!(
            Arc::ptr_eq(&table, &router.table.load_full()),
            "table rebuilt"
        );
        assert_eq!(router.tenant("a").unwrap().engine().policy().version(), 2);
        assert_eq!(router.tenant("a").unwrap().compiles(), 2);
        assert_eq!(b.compiles(), 1);
        assert_eq!(b.engine().policy().version(), 1);
    }

    /// The version a request for `host` is decided by, as the per-request path reads it.
    fn decided_version(router: &TenantRouter, host: &str) -> Option<u64> {
        router.with_tenant(host, |t| t.policy().version())
    }

    #[test]
    fn the_host_table_serves_each_rule_change_at_once() {
        let mut hints_checked = 0;
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example", "www.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        for version in 2..40 {
            // Rules alone (the table stays), then rules with a tenant added or removed in the
            // same batch (a new table), then two changes of one tenant in one batch.
            let batch = match version % 3 {
                0 => vec![TenantChange::put(
                    "a",
                    ["a.example", "www.a.example"],
                    empty(version),
                )],
                1 => vec![
                    TenantChange::put("a", ["a.example", "www.a.example"], empty(version)),
                    TenantChange::put(
                        &format!("c{version}"),
                        [format!("c{version}.example")],
                        empty(1),
                    ),
                ],
                _ => vec![
                    TenantChange::put("a", ["a.example", "www.a.example"], empty(version + 100)),
                    TenantChange::remove(&format!("c{}", version - 1)),
                    TenantChange::put("a", ["a.example", "www.a.example"], empty(version)),
                ],
            };
            let report = router.apply(batch);
            assert!(report.failed.is_empty(), "{:?}", report.failed);
            for host in ["a.example", "WWW.A.example:443"] {
                assert_eq!(decided_version(&router, host), Some(version), "{host}");
            }
            assert_eq!(decided_version(&router, "b.example"), Some(1));
            // The hint requested with each host's slot is the policy in service.
            for host in ["a.example", "www.a.example", "b.example"] {
                let table = router.table.load();
                let in_service = table
                    .tenant(host)
                    .map(|t| Arc::as_ptr(&*t.policy()) as usize);
                if let Some(hint) = table.hosts.hint_of(host) {
                    assert_eq!(Some(hint), in_service, "{host}");
                    hints_checked += 1;
                }
            }
            assert_eq!(
                router.tenant("a").unwrap().engine().policy().version(),
                version
            );
        }
        // New domains with new rules in one change: the old host names no tenant, the new
        // one is decided by the new rules; then the rules change again, the table staying.
        router.apply(vec![TenantChange::put("a", ["new.a.example"], empty(50))]);
        assert_eq!(decided_version(&router, "a.example"), None);
        assert_eq!(decided_version(&router, "new.a.example"), Some(50));
        router.apply(vec![TenantChange::put("a", ["new.a.example"], empty(51))]);
        assert_eq!(decided_version(&router, "new.a.example"), Some(51));
        // Three or four hosts in a table of at least eight slots: most of the 114 checks
        // find their host alone in its first slot.
        assert!(hints_checked > 60, "{hints_checked}");
        // Rules that do not compile (one rule twice) leave the policy in service, in the
        // table too.
        let mut bad = RuleSet::from_json(
            &serde_json::json!([{
                "id": netacl_model::AclId::from_random(7).to_string(), "description": "",
                "active": true, "priority": 1,
                "rule": {"action": {"block": true}, "scope": "tenant",
                         "match": {"asns": [1]}},
                "created_at": "2026-01-01T00:00:00.000Z",
                "updated_at": "2026-01-01T00:00:00.000Z"
            }]),
            52,
            &Limits::default(),
        )
        .unwrap();
        bad.acls.push(bad.acls[0].clone());
        let report = router.apply([TenantChange::put("a", ["new.a.example"], bad)]);
        assert!(matches!(
            report.failed.as_slice(),
            [TenantChangeError::Compile { .. }]
        ));
        assert_eq!(decided_version(&router, "new.a.example"), Some(51));
    }

    #[test]
    fn a_followed_engine_decides_as_its_feeder_installs() {
        let router = TenantRouter::new();
        let engine = Arc::new(Engine::new());
        engine.publish(&empty(3)).unwrap();
        let follow = |rules: TenantRules| TenantChange::Put {
            id: "f".into(),
            domains: vec!["f.example".into()],
            rules,
        };
        router.apply([follow(TenantRules::Follow {
            engine: Arc::clone(&engine),
            rules: None,
        })]);
        assert_eq!(decided_version(&router, "f.example"), Some(3));
        // Its slot's hint is the engine, the line a request reads next.
        assert_eq!(
            router.table.load().hosts.hint_of("f.example"),
            Some(Arc::as_ptr(&engine) as usize)
        );
        // Its feeder installs without telling the router: the next request sees it.
        engine.publish(&empty(4)).unwrap();
        assert_eq!(decided_version(&router, "f.example"), Some(4));
        // Rules compiled by the router into a followed engine, and a change of domains that
        // keeps the rules: still the engine's policy at each request.
        router.apply([TenantChange::put("f", ["f.example"], empty(5))]);
        assert_eq!(decided_version(&router, "f.example"), Some(5));
        router.apply([follow(TenantRules::Keep)]);
        engine.publish(&empty(6)).unwrap();
        assert_eq!(decided_version(&router, "f.example"), Some(6));
    }

    #[test]
    fn removal_and_domain_changes() {
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example", "old.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        // A domain held by another tenant is refused; the tenant stays as it was.
        let report = router.apply(vec![TenantChange::put("b", ["a.example"], empty(2))]);
        assert!(matches!(
            report.failed.as_slice(),
            [TenantChangeError::DomainTaken { .. }]
        ));
        assert_eq!(router.select("a.example").unwrap().id(), "a");
        assert_eq!(router.select("b.example").unwrap().id(), "b");
        // Domains change: the old one names no tenant; the engine (and its policy) stays.
        let engine = router.tenant("a").unwrap().engine().clone();
        let report = router.apply(vec![TenantChange::Put {
            id: "a".into(),
            domains: vec!["new.a.example".into(), "a.example".into()],
            rules: TenantRules::Keep,
        }]);
        assert!(report.failed.is_empty());
        assert!(router.select("old.a.example").is_none());
        assert!(Arc::ptr_eq(
            router.select("new.a.example").unwrap().engine(),
            &engine
        ));
        // Removal, and a domain moving to another tenant in the same batch.
        let report = router.apply(vec![
            TenantChange::remove("a"),
            TenantChange::put("b", ["b.example", "a.example"], empty(3)),
        ]);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert_eq!(report.removed, 1);
        assert!(router.tenant("a").is_none());
        assert!(router.select("new.a.example").is_none());
        assert_eq!(router.select("a.example").unwrap().id(), "b");
        assert_eq!(router.len(), 1);
    }

    #[test]
    fn bad_domains_are_refused() {
        let router = TenantRouter::new();
        let report = router.apply(vec![TenantChange::put("a", ["", "a.example"], empty(1))]);
        assert!(matches!(
            report.failed.as_slice(),
            [TenantChangeError::InvalidDomain { .. }]
        ));
        assert!(router.is_empty());
    }

    use crate::enforce::connection::TlsInfo;

    fn tls(sni: Option<&str>) -> TlsInfo {
        TlsInfo::new(sni, &"0".repeat(32), "t13d1516h2_8daaf6152771_b186095e22b6")
    }

    #[test]
    fn request_selection_refuses_fronting() {
        let router = TenantRouter::new();
        router.apply(vec![
            TenantChange::put("a", ["a.example", "www.a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
        ]);
        let pick = |tls: Option<&TlsInfo>, host: Option<&str>, authority: Option<&str>| {
            router
                .select_request(
                    RequestHosts {
                        tls: tls.is_some(),
                        sni: tls.and_then(|t| t.sni.as_deref()),
                        host_header: host,
                        authority,
                    },
                    |h| h.eq_ignore_ascii_case("b.example"),
                )
                .map(|t| t.id().to_owned())
        };
        let a = tls(Some("a.example"));
        assert_eq!(
            pick(Some(&a), Some("a.example"), None).as_deref(),
            Some("a")
        );
        // Another domain of the same tenant is fine.
        assert_eq!(
            pick(Some(&a), Some("WWW.a.example:443"), None).as_deref(),
            Some("a")
        );
        // No Host (HTTP/1.0) over TLS: the SNI decides.
        assert_eq!(pick(Some(&a), None, None).as_deref(), Some("a"));
        // SNI of one tenant, Host (or authority) of another or of none: fronting.
        assert_eq!(pick(Some(&a), Some("b.example"), None), None);
        assert_eq!(pick(Some(&a), Some("c.example"), None), None);
        assert_eq!(pick(Some(&a), None, Some("b.example")), None);
        // Unknown SNI.
        assert_eq!(
            pick(Some(&tls(Some("c.example"))), Some("a.example"), None),
            None
        );
        // No SNI: the host decides, unless that host has its own certificate.
        let none = tls(None);
        assert_eq!(
            pick(Some(&none), Some("a.example"), None).as_deref(),
            Some("a")
        );
        assert_eq!(pick(Some(&none), Some("b.example"), None), None);
        assert_eq!(pick(Some(&none), None, None), None);
        // Plain HTTP.
        assert_eq!(
            pick(None, Some("B.example:8080"), None).as_deref(),
            Some("b")
        );
        assert_eq!(pick(None, None, Some("b.example")).as_deref(), Some("b"));
        assert_eq!(pick(None, Some("b.example"), Some("a.example")), None);
        assert_eq!(pick(None, None, None), None);
        assert_eq!(pick(None, Some("c.example"), None), None);
    }

    #[test]
    fn a_host_entry_is_one_pair_of_cache_lines() {
        assert_eq!(crate::tenants::host_table::slot_bytes::<Routed>(), 128);
    }

    #[test]
    fn loading_many_tenants_is_one_table() {
        let router = TenantRouter::new();
        let changes: Vec<_> = (0..2_000)
            .map(|i| TenantChange::put(&format!("t{i}"), [format!("t{i}.example")], empty(1)))
            .collect();
        let report = router.apply(changes);
        assert_eq!(report.added, 2_000);
        assert_eq!(report.compiled, 2_000);
        for i in (0..2_000).step_by(97) {
            assert_eq!(
                router.select(&format!("T{i}.EXAMPLE")).unwrap().id(),
                format!("t{i}")
            );
        }
    }

    #[test]
    fn metrics_name_only_counted_tenants() {
        let router = TenantRouter::with_counted_tenants(["a"]);
        router.apply(vec![
            TenantChange::put("a", ["a.example"], empty(1)),
            TenantChange::put("b", ["b.example"], empty(1)),
            TenantChange::put("c", ["c.example"], empty(1)),
        ]);
        router
            .select("a.example")
            .unwrap()
            .counters()
            .record(AclVerdict::Block);
        router
            .select("b.example")
            .unwrap()
            .counters()
            .record(AclVerdict::Block);
        router
            .select("c.example")
            .unwrap()
            .counters()
            .record(AclVerdict::None);
        let text = router.render_prometheus();
        assert!(
            text.contains("netacl_edge_tenant_requests_total{tenant=\"a\",verdict=\"block\"} 1")
        );
        assert!(text
            .contains("netacl_edge_tenant_requests_total{tenant=\"_other\",verdict=\"block\"} 1"));
        assert!(text
            .contains("netacl_edge_tenant_requests_total{tenant=\"_other\",verdict=\"none\"} 1"));
        assert!(!text.contains("tenant=\"b\""));
        assert!(text.contains("netacl_edge_tenants 3"));
    }
}

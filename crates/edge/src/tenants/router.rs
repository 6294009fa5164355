//! The router ([`TenantRouter`]): host names to tenants, the per-request selection, batches of
//! changes, and the tenants' Prometheus series.
use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::sync::Mutex;

use arc_swap::ArcSwap;
use netacl_eval::Engine;

use super::changes::{ApplyReport, TenantChange, TenantChangeError};
use super::counters::{TenantCounters, COUNTED};
use super::host::tenant_host;
use super::policy::{compile, connection_rules, empty_connection_rules, TenantPolicy, TenantRules};
use super::table::{RequestHosts, Routed, SelectedTenant, TenantTable};
use super::OTHER_TENANTS;
use crate::decision::connection_rules::ConnectionRules;
use crate::observe::tenant_counts::TenantRuleCounts;
use crate::tenants::host_table::HostTable;

/// Host names to tenants (see the module docs).
pub struct TenantRouter {
    pub(super) table: ArcSwap<TenantTable>,
    /// Serialises batches (readers never take it).
    pub(super) writer: Mutex<()>,
    /// Tenants with their own counter series (`--metrics-tenant`).
    pub(super) counted: HashSet<String>,
    /// Every other tenant's requests.
    pub(super) others: Arc<TenantCounters>,
    /// Requests for a host of no tenant (421), and host/SNI disagreements.
    pub(super) misdirected: AtomicU64,
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
    pub(super) fn put(
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

    pub(super) fn tenant_policy(
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
    pub(super) fn build(
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

pub(super) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

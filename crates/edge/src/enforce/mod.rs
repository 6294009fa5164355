//! The enforcing core shared by the tower layer and the proxy: digest a request (or a
//! connection), enrich it with what the live policy needs, decide with one policy load.
//!
//! The facts of a request (`facts`, built from the connection (`connection`) and the client
//! address (`client_addr`)) go into the one decision step, [`Enforcer::decide_facts`].
pub(crate) mod client_addr;
pub(crate) mod connection;
pub(crate) mod facts;

use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::HeaderMap;
use netacl_eval::{
    CompileError, CompiledPolicy, Engine, GeoTable, ManagedIndex, Request, SignalSet, Verdict,
};
use netacl_model::{AclId, RequestScope, RuleSet, Signal};

pub use crate::decision::{AclDecision, AclVerdict};

use crate::decision::connection_rules::{ConnectionRules, ConnectionSignals};
use crate::enforce::client_addr::{canonical_ip, ClientAddrResolver};
use crate::enforce::connection::{ConnectionInfo, TlsInfo};
use crate::enforce::facts::{RequestFacts, RequestHost, TlsFacts};
use crate::observe::metrics::EdgeMetrics;
use crate::observe::sample::{SampledSignals, TrafficSample};
use crate::signals::enrich::GeoState;
use crate::signals::geo::{
    GeoEnricher, GeoError, GeoInfo, GeoNeeds, SharedGeoTable, SubdivisionCode,
};
use crate::signals::httpsig::{self, SignedRequest, SigningKeys};
use crate::tenants::sni::SniCertificates;
use crate::tenants::{RequestHosts, SelectedTenant, TenantRouter};

/// The outcome of the connection-level check.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionVerdict {
    /// Go on (read the request / complete the handshake).
    Accept,
    /// Close the connection now; `rule_id` blocked it.
    Refuse {
        /// The deciding rule.
        rule_id: AclId,
    },
}

/// The enforcing core: an [`Engine`] plus everything needed to digest requests for it.
///
/// Share it (`Arc`) between the [`AclLayer`](crate::AclLayer), the proxy's accept loop and the
/// rule sources.
pub struct Enforcer {
    engine: Arc<Engine>,
    addrs: ClientAddrResolver,
    geo: Option<GeoState>,
    /// Multi-tenant mode with GeoIP databases: every address's answer, for every tenant.
    geo_table: Option<Arc<SharedGeoTable>>,
    metrics: Arc<EdgeMetrics>,
    connection_rules: ArcSwap<ConnectionRules>,
    enabled: bool,
    /// Multi-tenant mode: the host picks the tenant whose policy decides.
    tenants: Option<Arc<TenantRouter>>,
    /// The TLS listener's certificates by host (multi-tenant mode: a TLS request without SNI
    /// for a host with a certificate of its own is misdirected).
    certificates: Option<Arc<SniCertificates>>,
    /// The traffic sample of the edge's requests, for the impact preview (multi-tenant mode:
    /// one ring for every tenant, each slot keyed by its tenant).
    sample: Option<Arc<TrafficSample>>,
}

impl std::fmt::Debug for Enforcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enforcer")
            .field("addrs", &self.addrs)
            .field("geo", &self.geo.is_some())
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl Enforcer {
    /// An enforcer deciding with `engine`'s live policy; the client address comes from `addrs`.
    pub fn new(engine: Arc<Engine>, addrs: ClientAddrResolver) -> Self {
        Self {
            engine,
            addrs,
            geo: None,
            geo_table: None,
            metrics: Arc::new(EdgeMetrics::new()),
            connection_rules: ArcSwap::from_pointee(ConnectionRules::empty()),
            enabled: true,
            tenants: None,
            certificates: None,
            sample: None,
        }
    }

    /// Keeps a sample of the requests decided (see [`TrafficSample`]): in single-tenant mode
    /// under the key 0, in multi-tenant mode under each tenant's
    /// [`sample_key`](crate::TenantRuleCounts::sample_key).
    pub fn with_sample(mut self, sample: Arc<TrafficSample>) -> Self {
        self.sample = Some(sample);
        self
    }

    /// The traffic sample, if any.
    pub fn sample(&self) -> Option<&Arc<TrafficSample>> {
        self.sample.as_ref()
    }

    /// Multi-tenant mode: every request is decided by the policy of the tenant its host names
    /// (see [`TenantRouter`] and the crate docs, "Many tenants"); a request for a host of no
    /// tenant, or whose TLS SNI and HTTP host name different tenants, is
    /// [`AclVerdict::Misdirected`]. The enforcer's own engine is then not used.
    ///
    /// With GeoIP databases ([`with_geo`](Self::with_geo), before or after), the tenants' geo
    /// and ASN conditions are answered from one [`SharedGeoTable`] built from the databases
    /// (here, if the databases were given first: a walk of every network), whatever the
    /// tenants' rules; see [`with_geo`](Self::with_geo).
    pub fn with_tenants(mut self, tenants: Arc<TenantRouter>) -> Self {
        self.tenants = Some(tenants);
        self.build_geo_table();
        self
    }

    /// Multi-tenant mode with databases: the table every tenant's decisions read.
    fn build_geo_table(&mut self) {
        if let (Some(state), Some(_)) = (&self.geo, &self.tenants) {
            self.geo_table = Some(Arc::new(SharedGeoTable::new(Arc::clone(&state.enricher))));
        }
    }

    /// The geo/ASN table of every tenant (multi-tenant mode with GeoIP databases).
    pub fn geo_table(&self) -> Option<&Arc<SharedGeoTable>> {
        self.geo_table.as_ref()
    }

    /// Where policies get intervals compiled for their own values: the single-tenant edge
    /// (in multi-tenant mode the table answers every tenant, the enforcer's own engine too).
    fn per_policy_geo(&self) -> Option<&GeoState> {
        self.geo.as_ref().filter(|_| self.tenants.is_none())
    }

    /// The TLS listener's certificates, so that a TLS request without SNI for a host that has
    /// a certificate of its own is refused (multi-tenant mode).
    pub fn with_certificates(mut self, certificates: Arc<SniCertificates>) -> Self {
        self.certificates = Some(certificates);
        self
    }

    /// The tenants (multi-tenant mode).
    pub fn tenants(&self) -> Option<&Arc<TenantRouter>> {
        self.tenants.as_ref()
    }

    /// Enriches requests with country, subdivision and ASN from `geo`, with no database access
    /// per request. Single-tenant: every policy this enforcer installs carries the intervals
    /// compiled from the databases for the values its rules list (see
    /// [`GeoEnricher::intervals`]), rebuilt when rules change and when
    /// [`reload_geo`](Self::reload_geo) swaps in a database; a decision reads them from the
    /// policy snapshot it loads. Call before installing rules. Multi-tenant
    /// ([`with_tenants`](Self::with_tenants)): one table of every network's answer
    /// ([`SharedGeoTable`], built here if the tenants were given first), rebuilt only by
    /// [`reload_geo`](Self::reload_geo), gives each request its address's values, which the
    /// tenant's policy answers with its own indexes; a tenant's rule change compiles its rules
    /// alone.
    pub fn with_geo(mut self, geo: Arc<GeoEnricher>) -> Self {
        self.geo = Some(GeoState::new(geo));
        self.build_geo_table();
        self
    }

    /// The enricher, if any.
    pub fn geo(&self) -> Option<&Arc<GeoEnricher>> {
        self.geo.as_ref().map(|g| &g.enricher)
    }

    /// Reloads the databases whose files changed ([`GeoEnricher::reload_changed`]) and, when
    /// one was swapped in, puts the policy in service back with intervals compiled from the
    /// new databases (one swap; a rule change made meanwhile is never undone), or in
    /// multi-tenant mode swaps in the table of the new databases (requests go on with the
    /// previous table meanwhile). A file that fails to load is refused: the databases and the
    /// enriched policy or table in service stay.
    ///
    /// # Errors
    ///
    /// The first [`GeoError`] met (the other databases are still reloaded).
    pub fn reload_geo(&self) -> Result<usize, GeoError> {
        let Some(state) = &self.geo else {
            return Ok(0);
        };
        let reloaded = state.enricher.reload_changed();
        if !matches!(reloaded, Ok(0)) {
            self.reenrich();
        }
        if let Some(table) = &self.geo_table {
            // A no-op unless the databases changed since the table was built (it also
            // catches up after a reload whose table was not built).
            let _ = table.rebuild();
        }
        reloaded
    }

    /// [`reload_geo`](Self::reload_geo) every `interval` on a blocking thread, in a tokio task
    /// that ends when the enforcer is dropped or the handle aborted. Must be called from within
    /// a tokio runtime.
    pub fn spawn_geo_watcher(
        self: &Arc<Self>,
        interval: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker =
                tokio::time::interval(interval.max(std::time::Duration::from_millis(10)));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(enforcer) = weak.upgrade() else {
                    return;
                };
                // Loading and compiling read whole files: keep it off the async workers.
                let outcome = tokio::task::spawn_blocking(move || enforcer.reload_geo()).await;
                if let Err(join_error) = outcome {
                    tracing::error!(target: "netacl_edge::geo", "geo watcher: {join_error}");
                }
            }
        })
    }

    /// Re-enriches the policy in service (and the connection rules) from the databases in
    /// service, under the rebuild lock.
    fn reenrich(&self) {
        let Some(state) = self.per_policy_geo() else {
            return;
        };
        let mut rebuild = state.lock();
        let live = self.engine.policy();
        if let Some(enriched) = rebuild.reenrich(&live) {
            if self.engine.replace(&live, Arc::clone(&enriched)) {
                let connection = self.connection_rules.load_full();
                self.connection_rules
                    .store(Arc::new(connection.with_geo(enriched.geo())));
            }
        }
    }

    /// Keeps the counters in `metrics` (to share them with a metrics endpoint).
    pub fn with_metrics(mut self, metrics: Arc<EdgeMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Turns enforcement off (`--acl off`): every request passes without evaluation. Meant for
    /// measuring the cost of the ACL; nothing is counted.
    pub fn disabled(mut self) -> Self {
        self.enabled = false;
        self
    }

    /// Whether requests are evaluated.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The counters.
    pub fn metrics(&self) -> &Arc<EdgeMetrics> {
        &self.metrics
    }

    /// The client-address resolver.
    pub fn addrs(&self) -> &ClientAddrResolver {
        &self.addrs
    }

    /// Compiles `rules` (against the managed lists in force), swaps them into the engine, and
    /// updates the connection-level rules and the counters. On error nothing changes.
    pub fn apply_rules(&self, rules: &RuleSet) -> Result<(), CompileError> {
        let managed = Arc::clone(self.engine.policy().managed_index());
        self.apply_rules_with_lists(rules, &managed)
    }

    /// Like [`Enforcer::apply_rules`], with the managed lists of `managed`.
    pub fn apply_rules_with_lists(
        &self,
        rules: &RuleSet,
        managed: &Arc<ManagedIndex>,
    ) -> Result<(), CompileError> {
        self.apply_rules_with_keys(rules, managed, None)
    }

    /// Like [`Enforcer::apply_rules_with_lists`], with the prepared keys `http_message_signature`
    /// rules are verified with. The keys are attached to the compiled policy, so that rules and
    /// keys go into service in one swap and every decision reads both from one snapshot. Without
    /// keys (or for a key id they lack) the signal is always missing.
    pub fn apply_rules_with_keys(
        &self,
        rules: &RuleSet,
        managed: &Arc<ManagedIndex>,
        keys: Option<Arc<SigningKeys>>,
    ) -> Result<(), CompileError> {
        // Rule changes and database reloads rebuild one at a time (see `enrich.rs`).
        let mut rebuild = self.per_policy_geo().map(GeoState::lock);
        let connection = ConnectionRules::build(rules, managed)?;
        let mut policy =
            CompiledPolicy::compile_with_lists(rules, &netacl_model::Limits::default(), managed)?;
        if let Some(keys) = keys.filter(|k| !k.is_empty()) {
            policy = policy.with_attachment(keys);
        }
        if let Some(rebuild) = &mut rebuild {
            policy = rebuild.enrich(policy);
        }
        let connection = connection.with_geo(policy.geo());
        self.engine.install(Arc::new(policy));
        self.connection_rules.store(Arc::new(connection));
        self.metrics.install_rules(rules);
        Ok(())
    }

    /// For an engine fed by someone else (`netacl serve` running the edge in process): tells the
    /// enforcer which rule set the engine now holds, so that connection-level refusal and the
    /// per-rule counters follow it. Does not touch the engine.
    ///
    /// With GeoIP databases, the policy in service is put back with its geo intervals (one
    /// compare-and-swap: a policy published meanwhile is left alone, and enriched when it is
    /// observed). Until then, decisions look the client address up in the databases directly.
    pub fn observe_rules(&self, rules: &RuleSet) -> Result<(), CompileError> {
        let mut rebuild = self.per_policy_geo().map(GeoState::lock);
        let mut live = self.engine.policy();
        let connection = ConnectionRules::build(rules, live.managed_index())?;
        if let Some(rebuild) = &mut rebuild {
            if let Some(enriched) = rebuild.reenrich(&live) {
                if self.engine.replace(&live, Arc::clone(&enriched)) {
                    live = enriched;
                }
            }
        }
        let connection = connection.with_geo(live.geo());
        self.connection_rules.store(Arc::new(connection));
        self.metrics.install_rules(rules);
        Ok(())
    }

    /// The connection-level check (see the crate docs, "Refusing connections").
    pub fn check_connection(&self, peer: IpAddr, tls: Option<&TlsInfo>) -> ConnectionVerdict {
        if !self.enabled {
            return ConnectionVerdict::Accept;
        }
        let peer = canonical_ip(peer);
        let known = ConnectionSignals {
            direct: !self.addrs.trusts(peer),
            sni: tls.is_some_and(|t| t.sni.is_some()),
        };
        let mut tenant = None;
        // Multi-tenant mode: the table of every tenant, one snapshot for the check.
        let in_service = match &self.tenants {
            Some(_) => self.geo_table.as_ref().map(|t| t.load()),
            None => None,
        };
        let table = in_service
            .as_ref()
            .and_then(|t| t.as_ref())
            .map(|t| &t.table);
        let (rules, live) = match &self.tenants {
            None => (self.connection_rules.load(), self.engine.policy()),
            Some(router) => {
                // Only the SNI names a tenant before a request is read.
                let Some(found) = tls
                    .and_then(|t| t.sni.as_deref())
                    .and_then(|sni| router.select(sni))
                else {
                    self.metrics.record_connection(true);
                    return ConnectionVerdict::Accept;
                };
                let chosen = (found.connection_rules(), found.engine().policy());
                tenant = Some(found);
                chosen
            }
        };
        // Connection rules of another version than the live policy's are not used: a rule that
        // was just removed must not keep refusing.
        let verdict = match &rules.policies[known.slot()] {
            Some(policy) if rules.version == live.version() => {
                let table = table_for(table, policy);
                let geo = match table {
                    Some(_) => GeoInfo::default(),
                    None => self.lookup_geo(policy, peer, known.direct),
                };
                let mut request =
                    Request::new(RequestScope::Authentication).with_connecting_ip(peer);
                if known.direct {
                    request = request.with_client_ip(peer);
                    request = apply_geo(request, &geo);
                    if let Some(table) = table.filter(|_| names_geo(policy.needed_signals())) {
                        request = table.enrich(request);
                    }
                }
                if let Some(tls) = tls {
                    request = request.with_ja3(&tls.ja3).with_ja4(&tls.ja4);
                    if let Some(sni) = &tls.sni {
                        request = request.with_hostname(sni);
                    }
                }
                let decision = policy.evaluate(&request);
                match (decision.verdict(), decision.rule()) {
                    (Verdict::Block, Some(rule)) => {
                        let rule_id = policy.rule_id(rule).clone();
                        match &tenant {
                            Some(tenant) => {
                                tenant.rule_counts().record_refusal(rules.version, &rule_id)
                            }
                            None => self.metrics.record_refusal(rules.version, &rule_id),
                        }
                        ConnectionVerdict::Refuse { rule_id }
                    }
                    _ => ConnectionVerdict::Accept,
                }
            }
            _ => ConnectionVerdict::Accept,
        };
        self.metrics
            .record_connection(verdict == ConnectionVerdict::Accept);
        verdict
    }

    /// The geo/ASN values of `ip` for a policy WITHOUT compiled intervals (a rebuild that
    /// failed, or a policy published by someone else and not yet observed): looked up in the
    /// databases directly, without the per-address cache. A policy with intervals needs
    /// nothing here: the evaluator answers from them.
    fn lookup_geo(&self, policy: &CompiledPolicy, ip: IpAddr, known: bool) -> GeoInfo {
        let (Some(state), true, None) = (&self.geo, known, policy.geo()) else {
            return GeoInfo::default();
        };
        let geo = &state.enricher;
        let needed = policy.needed_signals();
        let needs = GeoNeeds {
            country: needed.contains(Signal::Country),
            subdivision: needed.contains(Signal::Subdivision),
            asn: needed.contains(Signal::Asn),
        };
        if needs == GeoNeeds::default() {
            return GeoInfo::default();
        }
        geo.lookup_direct(ip, needs)
    }

    /// Decides about one request: `path` is the request target's path, `headers` its headers.
    /// The method is not known: no signature is verified (see
    /// [`decide_request`](Self::decide_request)).
    ///
    /// Allocates nothing for the common request (a path already in normal form, and no
    /// monitoring-mode rule matching): the ids it reports are held inline and the redirect
    /// target is shared with the policy. A matching `log` rule costs the `monitored` list; a
    /// path that is not normal, its normal form.
    pub fn decide(
        &self,
        conn: Option<&ConnectionInfo>,
        path: &str,
        authority: Option<&str>,
        headers: &HeaderMap,
    ) -> AclDecision {
        self.decide_facts(&self.hyper_facts(conn, path, authority, headers))
    }

    /// [`Enforcer::decide`] for a whole request: with its method and query too, so that an
    /// RFC 9421 signature can be verified when a live rule names `http_message_signature`
    /// (the policy in service carries the keys; see [`crate::httpsig`]). Nothing about the
    /// signature is parsed when no live rule names the signal. A signature that does not
    /// verify only leaves the signal missing: the rules decide.
    pub fn decide_request(
        &self,
        conn: Option<&ConnectionInfo>,
        method: &http::Method,
        uri: &http::Uri,
        headers: &HeaderMap,
    ) -> AclDecision {
        self.decide_facts(&self.request_facts(conn, method, uri, headers))
    }

    /// The facts of a hyper request, gathered once: its addresses (the client resolved over
    /// the trusted proxies from the forwarding header), TLS facts, host, method, path, query
    /// and user agent, with its headers for the signature check.
    pub fn request_facts<'a>(
        &self,
        conn: Option<&'a ConnectionInfo>,
        method: &'a http::Method,
        uri: &'a http::Uri,
        headers: &'a HeaderMap,
    ) -> RequestFacts<'a> {
        self.hyper_facts(
            conn,
            uri.path(),
            uri.authority().map(|a| a.as_str()),
            headers,
        )
        .with_method(method.as_str())
        .with_query(uri.query())
    }

    /// The facts of a hyper request without its method and query.
    fn hyper_facts<'a>(
        &self,
        conn: Option<&'a ConnectionInfo>,
        path: &'a str,
        authority: Option<&'a str>,
        headers: &'a HeaderMap,
    ) -> RequestFacts<'a> {
        let mut facts = RequestFacts::new(path, headers)
            .with_host(RequestHost::from_headers(headers, authority))
            .with_user_agent(
                headers
                    .get(http::header::USER_AGENT)
                    .and_then(|v| v.to_str().ok()),
            );
        if let Some(conn) = conn {
            facts = facts.with_addrs(self.addrs.resolve(conn.peer, headers));
            if let Some(tls) = conn.tls.as_deref() {
                facts = facts.with_tls(TlsFacts::from(tls));
            }
        }
        facts
    }

    /// The one decision step, whatever proxy gathered the facts: the tenant (multi-tenant
    /// mode: the host the request names picks it, or the request is misdirected), then the
    /// policy snapshot, then the decision, counted and sampled.
    ///
    /// Allocates nothing for the common request, as [`decide`](Self::decide).
    pub fn decide_facts(&self, facts: &RequestFacts<'_>) -> AclDecision {
        let client_ip = facts.client_ip();
        // Multi-tenant mode: the tenant first, before any other work.
        if let (Some(router), true) = (&self.tenants, self.enabled) {
            // The table of every tenant's geo/ASN answers: one snapshot for the decision, the
            // client address's blocks requested now, so that they arrive while the tenant is
            // selected (whether its rules name geo signals is known only then).
            let in_service = self.geo_table.as_ref().map(|t| t.load());
            let table = in_service
                .as_ref()
                .and_then(|t| t.as_ref())
                .map(|t| &t.table);
            if let (Some(table), Some(ip)) = (table, client_ip) {
                table.prefetch(ip);
            }
            let hosts = RequestHosts {
                tls: facts.tls.is_some(),
                sni: facts.tls.and_then(|t| t.sni),
                host_header: facts.host.header,
                authority: facts.host.authority,
            };
            let own = |host: &str| {
                self.certificates
                    .as_ref()
                    .is_some_and(|c| c.has_own_certificate(host))
            };
            // More than one `Host`, or one that is not visible ASCII: which tenant it names is
            // the reader's guess (an upstream may take another one than this edge): refused.
            let decided = (!facts.host.unclear)
                .then(|| {
                    router.with_request_tenant(hosts, own, |tenant| {
                        let decision = self.decide_policy(Some(tenant), table, facts);
                        tenant.counters().record(decision.verdict);
                        decision
                    })
                })
                .flatten();
            return decided.unwrap_or_else(|| {
                router.record_misdirected();
                self.metrics.record(
                    0,
                    RequestScope::default(),
                    AclVerdict::Misdirected,
                    None,
                    &[],
                );
                AclDecision {
                    verdict: AclVerdict::Misdirected,
                    rule_id: None,
                    monitored: Vec::new(),
                    redirect_uri: None,
                    version: 0,
                    scope: RequestScope::default(),
                    client_ip,
                }
            });
        }
        self.decide_policy(None, None, facts)
    }

    /// The decision by one policy: the tenant's (multi-tenant mode, with the tenants' geo
    /// table) or the enforcer's own.
    fn decide_policy(
        &self,
        tenant: Option<SelectedTenant<'_>>,
        table: Option<&GeoTable>,
        facts: &RequestFacts<'_>,
    ) -> AclDecision {
        let client_ip = facts.client_ip();
        let path = facts.path;
        let (scope, verdict) = match (netacl_model::scope_of_path(path), self.enabled) {
            (Ok(scope), true) => (scope, None),
            (Ok(scope), false) => (scope, Some(AclVerdict::None)),
            (Err(_), false) => (RequestScope::default(), Some(AclVerdict::None)),
            (Err(_), true) => (RequestScope::default(), Some(AclVerdict::InvalidPath)),
        };
        if let Some(verdict) = verdict {
            // Not evaluated: the ACL is off, or the path is refused before any rule.
            if self.enabled {
                self.metrics.record(0, scope, verdict, None, &[]);
            }
            return AclDecision {
                verdict,
                rule_id: None,
                monitored: Vec::new(),
                redirect_uri: None,
                version: 0,
                scope,
                client_ip,
            };
        }
        // One load: the same snapshot serves the enrichment, the decision and the ids (a guard:
        // no reference count written, nothing shared between cores).
        let policy = match tenant {
            Some(t) => t.policy(),
            None => self.engine.snapshot(),
        };
        let tenant = tenant.map(|t| t.tenant());
        // Geo/ASN values: from the policy's own intervals (the evaluator reads them), from the
        // tenants' table, or (neither: a policy not enriched yet, no table built) looked up in
        // the databases directly.
        let table = table_for(table, &policy);
        let mut request = Request::new(scope);
        let addrs = facts.addrs;
        let geo = match addrs {
            Some(a) => {
                request = request.with_connecting_ip(a.connecting);
                match a.client {
                    Some(client) => {
                        request = request.with_client_ip(client);
                        match table {
                            Some(_) => GeoInfo::default(),
                            None => self.lookup_geo(&policy, client, true),
                        }
                    }
                    None => GeoInfo::default(),
                }
            }
            None => GeoInfo::default(),
        };
        request = apply_geo(request, &geo);
        if let Some(table) = table.filter(|_| names_geo(policy.needed_signals())) {
            request = table.enrich(request);
        }
        let tls = facts.tls;
        if let Some(tls) = tls {
            request = request.with_ja3(tls.ja3).with_ja4(tls.ja4);
        }
        let hostname = facts.hostname();
        if let Some(host) = hostname {
            request = request.with_hostname(host);
        }
        let user_agent = facts.user_agent;
        if let Some(ua) = user_agent {
            request = request.with_user_agent(ua);
        }
        let mut key_id = None;
        if let Some(method) = facts.method {
            if policy.needed_signals().contains(Signal::MessageSignature) {
                let verified = policy.attachment::<SigningKeys>().and_then(|keys| {
                    let signed = SignedRequest {
                        method,
                        scheme: facts.scheme(),
                        authority: facts.host.named().unwrap_or(""),
                        path,
                        query: facts.query,
                        headers: facts.headers,
                    };
                    match httpsig::verify(keys, &signed, unix_now()) {
                        Ok(id) => Some(id),
                        Err(reason) => {
                            self.metrics.record_signature(false);
                            tracing::debug!(
                                target: "netacl_edge::access",
                                %reason,
                                "request signature not verified: the signal is missing"
                            );
                            None
                        }
                    }
                });
                if let Some(id) = verified {
                    self.metrics.record_signature(true);
                    request = request.with_message_signature(id);
                    key_id = Some(id);
                }
            }
        }
        let decision = policy.evaluate(&request);
        // One request in K (per thread) is copied into the sample: no allocation, no waiting.
        if let Some(sample) = self.sample.as_deref().filter(|s| s.due()) {
            let client = addrs.and_then(|a| a.client);
            // The values the databases hold for the client address, all three (the rules of
            // a proposed change may name signals the live ones do not): from the tenants'
            // table where there is one (no database walk), else looked up.
            let geo = match (table, &self.geo, client) {
                (Some(table), _, Some(ip)) => geo_info(table.lookup(ip)),
                (None, Some(state), Some(ip)) => state.enricher.lookup_direct(ip, GeoNeeds::ALL),
                _ => geo,
            };
            sample.record(&SampledSignals {
                key: tenant.map_or(0, |t| t.rule_counts().sample_key()),
                scope,
                connecting_ip: addrs.map(|a| a.connecting),
                client_ip: client,
                geo,
                ja3: tls.map(|t| t.ja3),
                ja4: tls.map(|t| t.ja4),
                user_agent,
                hostname,
                key_id,
            });
        }
        let verdict = verdict_from_eval(decision.verdict());
        let rule_id = decision.rule().map(|r| policy.rule_id(r).clone());
        // Empty (no allocation) unless a `log` rule matched.
        let monitored: Vec<AclId> = decision
            .monitored()
            .iter()
            .map(|r| policy.rule_id(*r).clone())
            .collect();
        let redirect_uri = policy.shared_redirect_uri(&decision).cloned();
        match tenant {
            // Multi-tenant: the verdict here, the rules in the tenant's own table.
            Some(tenant) => {
                self.metrics.record_verdict(verdict);
                let counted = tenant.rule_counts().record(
                    decision.version(),
                    scope,
                    decision.rule(),
                    decision.monitored(),
                );
                if !counted {
                    self.metrics.record_unattributed();
                }
            }
            None => self.metrics.record(
                decision.version(),
                scope,
                verdict,
                rule_id.as_ref(),
                &monitored,
            ),
        }
        AclDecision {
            verdict,
            rule_id,
            monitored,
            redirect_uri,
            version: decision.version(),
            scope,
            client_ip,
        }
    }
}

/// Now, in UNIX seconds (0 before 1970: every signature then looks not yet valid).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn verdict_from_eval(verdict: Verdict) -> AclVerdict {
    match verdict {
        Verdict::Allow => AclVerdict::Allow,
        Verdict::Block => AclVerdict::Block,
        Verdict::Redirect => AclVerdict::Redirect,
        _ => AclVerdict::None,
    }
}

/// Whether a policy's rules name the country, the subdivision or the ASN.
fn names_geo(needed: SignalSet) -> bool {
    needed.contains(Signal::Country)
        || needed.contains(Signal::Subdivision)
        || needed.contains(Signal::Asn)
}

/// The table that answers `policy`'s geo/ASN conditions: the tenants' table, unless the policy
/// carries intervals of its own (the evaluator reads those).
/// A table's answer as the enricher gives it (a subdivision `CC-XXX` split into its parts).
fn geo_info(found: netacl_eval::GeoLookup<'_>) -> GeoInfo {
    let subdivision = found.subdivision.and_then(|code| {
        let (country, part) = code.split_once('-')?;
        let country: [u8; 2] = country.as_bytes().try_into().ok()?;
        SubdivisionCode::new(country, part)
    });
    GeoInfo {
        country: found.country,
        subdivision,
        asn: found.asn,
    }
}

fn table_for<'t>(table: Option<&'t GeoTable>, policy: &CompiledPolicy) -> Option<&'t GeoTable> {
    table.filter(|_| policy.geo().is_none())
}

fn apply_geo<'a>(mut request: Request<'a>, geo: &'a GeoInfo) -> Request<'a> {
    if let Some(asn) = geo.asn {
        request = request.with_asn(asn);
    }
    if let Some(country) = geo.country_str() {
        request = request.with_country(country);
    }
    if let Some(subdivision) = geo.subdivision.as_ref().map(|s| s.as_str()) {
        request = request.with_subdivision(subdivision);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn record(n: u128, priority: u64, action: Value, scope: &str, criteria: Value) -> Value {
        let mut rule = json!({"action": action, "scope": scope});
        if let Value::Object(c) = criteria {
            for (k, v) in c {
                rule[k] = v;
            }
        }
        json!({
            "id": AclId::from_random(n).to_string(), "description": "t", "active": true,
            "priority": priority, "rule": rule,
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
        })
    }

    const JA4: &str = "t13d1516h2_8daaf6152771_b186095e22b6";

    fn enforcer(records: Vec<Value>) -> Enforcer {
        let trusted = crate::TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        let enforcer = Enforcer::new(
            Arc::new(Engine::new()),
            ClientAddrResolver::new(trusted, crate::ForwardedHeader::XForwardedFor),
        );
        let rules = RuleSet::from_json(&Value::Array(records), 1, &netacl_model::Limits::default())
            .unwrap();
        enforcer.apply_rules(&rules).unwrap();
        enforcer
    }

    fn refused(e: &Enforcer, peer: &str, sni: Option<&str>) -> bool {
        let tls = TlsInfo::new(sni, &"0".repeat(32), JA4);
        matches!(
            e.check_connection(peer.parse().unwrap(), Some(&tls)),
            ConnectionVerdict::Refuse { .. }
        )
    }

    fn block(n: u128, p: u64, scope: &str, criteria: Value) -> Value {
        record(n, p, json!({"block": true}), scope, criteria)
    }

    #[test]
    fn certain_tenant_block_refuses() {
        let e = enforcer(vec![block(
            1,
            5,
            "tenant",
            json!({"match": {"ja4_fingerprints": [JA4]}}),
        )]);
        assert!(refused(&e, "192.0.2.1", None));
        assert!(refused(&e, "10.0.0.1", Some("a.example")));
    }

    #[test]
    fn an_earlier_uncertain_allow_prevents_refusal() {
        let e = enforcer(vec![
            record(
                1,
                1,
                json!({"allow": true}),
                "tenant",
                json!({"match": {"user_agents": ["monitor/*"]}}),
            ),
            block(
                2,
                5,
                "tenant",
                json!({"match": {"ja4_fingerprints": [JA4]}}),
            ),
        ]);
        assert!(!refused(&e, "192.0.2.1", None));
        // The same allow on a certain signal that does not match: refused.
        let e = enforcer(vec![
            record(
                1,
                1,
                json!({"allow": true}),
                "tenant",
                json!({"match": {"connecting_ipv4_cidrs": ["198.51.100.0/24"]}}),
            ),
            block(
                2,
                5,
                "tenant",
                json!({"match": {"ja4_fingerprints": [JA4]}}),
            ),
        ]);
        assert!(refused(&e, "192.0.2.1", None));
        assert!(!refused(&e, "198.51.100.1", None));
    }

    #[test]
    fn uncertain_blocks_are_skipped_not_barriers() {
        let e = enforcer(vec![
            block(
                1,
                1,
                "management",
                json!({"match": {"ja4_fingerprints": [JA4]}}),
            ),
            block(
                2,
                2,
                "tenant",
                json!({"not_match": {"user_agents": ["good/*"]}}),
            ),
            block(
                3,
                5,
                "tenant",
                json!({"match": {"ja4_fingerprints": [JA4]}}),
            ),
        ]);
        assert!(refused(&e, "192.0.2.1", None));
        // Rules naming HTTP-level signals alone never refuse a connection.
        let e = enforcer(vec![block(
            2,
            2,
            "tenant",
            json!({"not_match": {"user_agents": ["good/*"]}}),
        )]);
        assert!(!refused(&e, "192.0.2.1", None));
        // Nor does a scope narrower than the tenant.
        let e = enforcer(vec![block(
            1,
            1,
            "management",
            json!({"match": {"ja4_fingerprints": [JA4]}}),
        )]);
        assert!(!refused(&e, "192.0.2.1", None));
    }

    #[test]
    fn client_address_is_known_only_for_direct_peers() {
        let e = enforcer(vec![block(
            1,
            1,
            "tenant",
            json!({"match": {"ipv4_cidrs": ["0.0.0.0/0"]}}),
        )]);
        assert!(refused(&e, "192.0.2.1", None));
        // Behind a trusted proxy the client address comes with the request.
        assert!(!refused(&e, "10.0.0.1", None));
        let e = enforcer(vec![block(
            1,
            1,
            "tenant",
            json!({"match": {"connecting_ipv4_cidrs": ["10.0.0.0/8"]}}),
        )]);
        assert!(refused(&e, "10.0.0.1", None));
    }

    #[test]
    fn hostname_is_known_only_with_sni() {
        let e = enforcer(vec![block(
            1,
            1,
            "tenant",
            json!({"match": {"hostnames": ["bad.example"]}}),
        )]);
        assert!(refused(&e, "192.0.2.1", Some("BAD.example.")));
        assert!(!refused(&e, "192.0.2.1", Some("good.example")));
        assert!(!refused(&e, "192.0.2.1", None));
        let e = enforcer(vec![block(
            1,
            1,
            "tenant",
            json!({"not_match": {"hostnames": ["good.example"]}}),
        )]);
        assert!(
            !refused(&e, "192.0.2.1", None),
            "without SNI the Host header decides later"
        );
        assert!(refused(&e, "192.0.2.1", Some("other.example")));
    }

    #[test]
    fn stale_connection_rules_are_not_used() {
        let e = enforcer(vec![block(
            1,
            1,
            "tenant",
            json!({"match": {"ja4_fingerprints": [JA4]}}),
        )]);
        // The engine moves on without the enforcer knowing: connection rules stand down.
        e.engine()
            .publish(&RuleSet {
                version: 2,
                acls: vec![],
            })
            .unwrap();
        assert!(!refused(&e, "192.0.2.1", None));
    }

    #[test]
    fn facts_from_any_proxy_decide_as_a_hyper_request() {
        let e = enforcer(vec![
            block(1, 1, "tenant", json!({"match": {"user_agents": ["bad/*"]}})),
            block(
                2,
                2,
                "tenant",
                json!({"match": {"hostnames": ["blocked.example"]}}),
            ),
            block(
                3,
                3,
                "tenant",
                json!({"match": {"ipv4_cidrs": ["192.0.2.0/24"]}}),
            ),
        ]);
        let conn = ConnectionInfo::new("10.0.0.1:4000".parse().unwrap());
        // Through the trusted proxy 10.0.0.1: the client is the forwarded address.
        let cases: [(&str, &str, &str, Option<u128>); 4] = [
            ("bad/1.0", "ok.example", "198.51.100.7", Some(1)),
            ("good/1.0", "blocked.example:8080", "198.51.100.7", Some(2)),
            ("good/1.0", "ok.example", "192.0.2.9", Some(3)),
            ("good/1.0", "ok.example", "198.51.100.7", None),
        ];
        for (ua, host, client, rule) in cases {
            let mut headers = HeaderMap::new();
            headers.insert("user-agent", ua.parse().unwrap());
            headers.insert("host", host.parse().unwrap());
            headers.insert("x-forwarded-for", client.parse().unwrap());
            let hyper = e.decide(Some(&conn), "/authorize", None, &headers);
            // The same request as a proxy without a HeaderMap hands it.
            let pairs = [("user-agent", ua), ("host", host)];
            let facts = RequestFacts::new("/authorize", &pairs)
                .with_addrs(crate::RequestAddrs {
                    connecting: "10.0.0.1".parse().unwrap(),
                    client: Some(client.parse().unwrap()),
                })
                .with_host(RequestHost::new(Some(host), None))
                .with_user_agent(Some(ua));
            let neutral = e.decide_facts(&facts);
            assert_eq!(neutral, hyper, "{ua} {host} {client}");
            assert_eq!(
                hyper.rule_id,
                rule.map(AclId::from_random),
                "{ua} {host} {client}"
            );
        }
    }
}

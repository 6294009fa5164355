//! The enriched policy: the compiled rules together with the geo/ASN intervals compiled from
//! the databases in service, built off the request path and swapped as one snapshot.
//!
//! Rules change ([`Enforcer::apply_rules`](crate::Enforcer::apply_rules) and friends) and
//! databases are reloaded ([`Enforcer::reload_geo`](crate::Enforcer::reload_geo)) on other
//! threads; both rebuild under one lock, so a reload racing a rule change yields, in either
//! order, the newest rules with intervals compiled for exactly their values from the newest
//! databases. Intervals are reused while neither the listed values nor the databases change
//! (most rule changes do not touch geo values).

use std::sync::{Arc, Mutex, MutexGuard};

use netacl_eval::{CompiledPolicy, GeoIntervals, GeoValues};

use crate::signals::geo::GeoEnricher;

/// The last intervals built: for which values, from which databases' generation.
struct Built {
    values: GeoValues,
    generation: u32,
    intervals: Arc<GeoIntervals>,
}

/// The enricher and what serialises and caches the rebuilds.
pub(crate) struct GeoState {
    pub(crate) enricher: Arc<GeoEnricher>,
    last: Mutex<Option<Built>>,
}

/// Held while a rebuild runs (rule change or reload).
pub(crate) struct Rebuild<'a> {
    state: &'a GeoState,
    last: MutexGuard<'a, Option<Built>>,
}

impl GeoState {
    pub(crate) fn new(enricher: Arc<GeoEnricher>) -> Self {
        GeoState {
            enricher,
            last: Mutex::new(None),
        }
    }

    /// Takes the rebuild lock (a poisoned lock is taken over: the cache only ever holds
    /// complete values).
    pub(crate) fn lock(&self) -> Rebuild<'_> {
        Rebuild {
            state: self,
            last: self.last.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }
}

impl Rebuild<'_> {
    /// The intervals for `values` from the databases in service (reused when unchanged);
    /// `None` when no rule lists a geo/ASN value, or when the databases cannot be walked (then
    /// logged: the policy goes into service without intervals and the edge looks addresses up
    /// directly until a rebuild succeeds).
    pub(crate) fn intervals(&mut self, values: &GeoValues) -> Option<Arc<GeoIntervals>> {
        if values.is_empty() {
            return None;
        }
        let enricher = &self.state.enricher;
        if let Some(built) = self.last.as_ref() {
            if built.values == *values && built.generation == enricher.generation() {
                return Some(Arc::clone(&built.intervals));
            }
        }
        match enricher.intervals(values) {
            Ok(compiled) => {
                let stats = compiled.intervals.stats();
                tracing::info!(
                    target: "netacl_edge::geo",
                    networks = stats.networks,
                    ranges = stats.ranges,
                    bytes = stats.bytes,
                    millis = compiled.elapsed.as_millis() as u64,
                    "geo intervals compiled"
                );
                let intervals = Arc::new(compiled.intervals);
                *self.last = Some(Built {
                    values: values.clone(),
                    generation: compiled.generation,
                    intervals: Arc::clone(&intervals),
                });
                Some(intervals)
            }
            Err(error) => {
                tracing::error!(
                    target: "netacl_edge::geo",
                    "geo intervals not compiled, addresses are looked up directly: {error}"
                );
                None
            }
        }
    }

    /// `policy` with the intervals for its values attached (unchanged when there are none).
    pub(crate) fn enrich(&mut self, policy: CompiledPolicy) -> CompiledPolicy {
        match self.intervals(&policy.geo_values()) {
            Some(intervals) => policy.with_geo(intervals),
            None => policy,
        }
    }

    /// A policy in service re-enriched from the databases now in service; `None` when it has
    /// nothing to gain (no listed value, or already carrying these very intervals).
    pub(crate) fn reenrich(&mut self, policy: &Arc<CompiledPolicy>) -> Option<Arc<CompiledPolicy>> {
        let intervals = self.intervals(&policy.geo_values())?;
        if policy.geo().is_some_and(|g| Arc::ptr_eq(g, &intervals)) {
            return None;
        }
        Some(Arc::new(CompiledPolicy::clone(policy).with_geo(intervals)))
    }
}

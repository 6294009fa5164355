//! The databases in service compiled into one [`GeoTable`] for every tenant
//! ([`GeoEnricher::table`]), and the table in service, rebuilt when a database is reloaded
//! ([`SharedGeoTable`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwapOption, Guard};
use netacl_eval::{GeoDatabase, GeoTable, GeoTableBuilder};

use super::intervals::{walk, IntervalError, Ranges, ALIASES};
use super::record::{country_code, AsnRecord, Location};
use super::{GeoEnricher, SubdivisionCode};

/// A [`GeoTable`] with what it was compiled from.
#[derive(Debug)]
#[non_exhaustive]
pub struct CompiledTable {
    /// The table.
    pub table: GeoTable,
    /// The databases' generation it was compiled from ([`GeoEnricher::generation`]).
    pub generation: u32,
    /// How long the walk and the build took.
    pub elapsed: Duration,
}

/// One database's IPv4 and IPv6 ranges, `(first, last, answer)`.
type Families<T> = (Vec<(u32, u32, T)>, Vec<(u128, u128, T)>);

/// The aliases that hold for one database's ranges, given to the builder; its IPv4 and IPv6
/// ranges (the aliased networks that do not hold put back as IPv6).
fn split<T: Copy + PartialEq>(
    mut ranges: Ranges<T>,
    database: GeoDatabase,
    builder: &mut GeoTableBuilder,
) -> Families<T> {
    let holds = ranges.holding_aliases();
    for (k, &(alias, len)) in ALIASES.iter().enumerate() {
        if holds[k] {
            builder.alias_v4(database, alias, len);
        }
    }
    let v6 = ranges.v6_with_aliases(holds);
    (std::mem::take(&mut ranges.v4), v6)
}

impl GeoEnricher {
    /// Compiles the databases in service into one [`GeoTable`]: every network of each database
    /// with its answer (country = `country.iso_code`, the first subdivision, the ASN), walked
    /// once (each distinct record decoded once), adjacent ranges with the same answer merged.
    /// It depends on the databases alone, not on any rule, so one table serves every tenant of
    /// an edge (see [`SharedGeoTable`]); its answers are exactly those of
    /// [`lookup`](Self::lookup) with [`GeoNeeds::ALL`](super::GeoNeeds::ALL) (the
    /// differential tests hold it to that). A database not configured answers nothing.
    ///
    /// # Errors
    ///
    /// An [`IntervalError`] when the reader fails (or panics) walking a database that passed
    /// the load checks.
    pub fn table(&self) -> Result<CompiledTable, IntervalError> {
        let started = Instant::now();
        // Read the generation before the databases: a table compiled from a database swapped
        // in meanwhile is filed under the older generation, and rebuilt.
        let generation = self.generation();
        let mut builder = GeoTableBuilder::new();
        if let Some(slot) = &self.inner.location {
            let database = slot.database.load();
            let ranges = walk(&database, "location", |l: Location<'_, true>| {
                // As a lookup: no subdivision without a country.
                let country = l.country.and_then(country_code)?;
                let subdivision = l.subdivision.and_then(|s| SubdivisionCode::new(country, s));
                Some((country, subdivision))
            })?;
            let (v4, v6) = split(ranges, GeoDatabase::Location, &mut builder);
            for (first, last, (country, subdivision)) in v4 {
                builder.add_location_v4(first, last, Some(country), subdivision.as_deref());
            }
            for (first, last, (country, subdivision)) in v6 {
                builder.add_location_v6(first, last, Some(country), subdivision.as_deref());
            }
        }
        if let Some(slot) = &self.inner.asn {
            let database = slot.database.load();
            let ranges = walk(&database, "asn", |r: AsnRecord| r.autonomous_system_number)?;
            let (v4, v6) = split(ranges, GeoDatabase::Asn, &mut builder);
            for (first, last, asn) in v4 {
                builder.add_asn_v4(first, last, asn);
            }
            for (first, last, asn) in v6 {
                builder.add_asn_v6(first, last, asn);
            }
        }
        Ok(CompiledTable {
            table: builder.build(),
            generation,
            elapsed: started.elapsed(),
        })
    }
}

/// The [`GeoTable`] in service for an edge's tenants: compiled from a [`GeoEnricher`]'s
/// databases, rebuilt off the request path when a database is reloaded
/// ([`rebuild`](Self::rebuild)), and swapped whole, so a decision reads one table snapshot.
///
/// No tenant holds anything that depends on the table (each answers the values the table gives
/// a request with its own indexes), so a tenant's rule change never waits for the table, a
/// rebuild touches no tenant, and any table snapshot is consistent with any policy snapshot.
/// Until a first table is built (the databases could not be walked), [`load`](Self::load)
/// gives none and the edge looks addresses up in the databases directly; a rebuild that fails
/// keeps the table in service (the previous databases' answers, whole).
///
/// ```
/// use std::path::Path;
/// use std::sync::Arc;
/// use netacl_edge::geo::{GeoEnricher, SharedGeoTable};
/// use netacl_eval::{CompiledPolicy, Request, Verdict};
/// use netacl_model::{Limits, RequestScope, RuleSet};
///
/// let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/mmdb");
/// let geo = GeoEnricher::open(
///     Some(&dir.join("netacl-test-city.mmdb")),
///     Some(&dir.join("netacl-test-asn.mmdb")),
/// ).unwrap();
/// let table = SharedGeoTable::new(Arc::new(geo));
///
/// // Any tenant's policy, compiled without any geo data of its own.
/// let rules = RuleSet::from_json(&serde_json::json!([{
///     "id": "acl_1111111111111111111111", "description": "US only", "active": true,
///     "priority": 1, "rule": {"action": {"block": true}, "scope": "tenant",
///         "not_match": {"geo_country_codes": ["US"]}},
///     "created_at": "2026-07-30T11:42:25.354Z", "updated_at": "2026-07-30T11:42:25.354Z"
/// }]), 1, &Limits::default()).unwrap();
/// let policy = CompiledPolicy::compile(&rules).unwrap();
///
/// let in_service = table.load();
/// let table = &in_service.as_ref().expect("built").table;
/// let decide = |ip: &str| {
///     let request = Request::new(RequestScope::Authentication).with_client_ip(ip.parse().unwrap());
///     policy.evaluate(&table.enrich(request)).verdict()
/// };
/// assert_eq!(decide("198.51.100.7"), Verdict::None); // US
/// assert_eq!(decide("203.0.113.1"), Verdict::Block); // not in the database: not US
/// ```
#[derive(Debug)]
pub struct SharedGeoTable {
    enricher: Arc<GeoEnricher>,
    current: ArcSwapOption<CompiledTable>,
    /// Serialises rebuilds (readers never take it); holds the generation whose walk failed
    /// last, not tried again until a reload changes the databases.
    rebuilding: Mutex<Option<u32>>,
}

impl SharedGeoTable {
    /// The table of `enricher`'s databases, built now (a walk of every network: seconds for
    /// real-size databases; call it off any async worker). A database that cannot be walked
    /// is logged, and the table left unbuilt until a [`rebuild`](Self::rebuild) succeeds.
    pub fn new(enricher: Arc<GeoEnricher>) -> Self {
        let shared = SharedGeoTable {
            enricher,
            current: ArcSwapOption::empty(),
            rebuilding: Mutex::new(None),
        };
        let _ = shared.rebuild();
        shared
    }

    /// The enricher whose databases the table holds.
    pub fn enricher(&self) -> &Arc<GeoEnricher> {
        &self.enricher
    }

    /// The table in service (none until one was built): one snapshot, held for a decision.
    /// No lock, no allocation.
    #[inline]
    pub fn load(&self) -> Guard<Option<Arc<CompiledTable>>> {
        self.current.load()
    }

    /// The table in service, held beyond a decision (a reference count): for reports and
    /// tests.
    pub fn current(&self) -> Option<Arc<CompiledTable>> {
        self.current.load_full()
    }

    /// Rebuilds the table when the databases in service are not those of the table in service
    /// (a reload since), and swaps it in. Gives whether a table was swapped in. Meant for the
    /// thread that reloads the databases; requests go on with the table in service meanwhile.
    /// Databases whose walk failed are not walked again until the next reload.
    ///
    /// # Errors
    ///
    /// An [`IntervalError`] when a database cannot be walked (logged too): the table in
    /// service stays.
    pub fn rebuild(&self) -> Result<bool, IntervalError> {
        let mut failed = self.rebuilding.lock().unwrap_or_else(|p| p.into_inner());
        let generation = self.enricher.generation();
        let built = self
            .current
            .load()
            .as_ref()
            .is_some_and(|t| t.generation == generation);
        if built || *failed == Some(generation) {
            return Ok(false);
        }
        match self.enricher.table() {
            Ok(compiled) => {
                let stats = compiled.table.stats();
                tracing::info!(
                    target: "netacl_edge::geo",
                    location_ranges = stats.location_ranges,
                    asn_ranges = stats.asn_ranges,
                    bytes = stats.bytes,
                    millis = compiled.elapsed.as_millis() as u64,
                    "geo table compiled for every tenant"
                );
                self.current.store(Some(Arc::new(compiled)));
                *failed = None;
                Ok(true)
            }
            Err(error) => {
                *failed = Some(generation);
                tracing::error!(
                    target: "netacl_edge::geo",
                    "geo table not compiled, the table in service stays: {error}"
                );
                Err(error)
            }
        }
    }
}

//! GeoIP and ASN enrichment from MaxMind-format databases (`.mmdb`).
//!
//! A [`GeoEnricher`] holds up to two databases, read into memory: a City or Country database
//! (for the country and the subdivision) and an ASN database. [`GeoEnricher::lookup`] answers
//! only what the caller [needs](GeoNeeds), skipping databases whose signals are not needed, and
//! decodes only those fields of the record, borrowed from the buffer: no allocation per lookup.
//! Databases are swapped in whole ([`arc_swap`]) by [`GeoEnricher::reload`] or by the watcher
//! task ([`GeoEnricher::spawn_watcher`]); a file that fails to load leaves the old database in
//! service.
//!
//! ```
//! use std::path::Path;
//! use netacl_edge::geo::{GeoEnricher, GeoNeeds};
//!
//! # fn main() -> Result<(), netacl_edge::geo::GeoError> {
//! // In production: a GeoIP2/GeoLite2 City (or Country) database and an ASN database.
//! let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/mmdb");
//! let geo = GeoEnricher::open(
//!     Some(&dir.join("netacl-test-city.mmdb")),
//!     Some(&dir.join("netacl-test-asn.mmdb")),
//! )?;
//! let info = geo.lookup("198.51.100.7".parse().unwrap(), GeoNeeds::ALL);
//! assert_eq!(info.country_str(), Some("US"));
//! assert_eq!(info.subdivision.unwrap().as_str(), "US-NY");
//! assert_eq!(info.asn, Some(64500));
//!
//! // Only what is needed is read: no ASN database access here.
//! let needs = GeoNeeds { country: true, ..GeoNeeds::NONE };
//! let country = geo.lookup("::ffff:198.51.100.7".parse().unwrap(), needs);
//! assert_eq!((country.country, country.asn), (Some(*b"US"), None));
//! # Ok(())
//! # }
//! ```
//!
//! # Choices
//!
//! - **Country** is the record's `country.iso_code` (where the address is), not
//!   `registered_country`; a record without `country` gives no country.
//! - **Subdivision** is the *first* entry of `subdivisions`, which MaxMind orders from the
//!   largest to the smallest (`GB-ENG` before a county, `US-NY`): the level rules are written
//!   at. It is reported as ISO 3166-2, `country-code`: `US` + `-` + `NY`.
//! - **IPv4-mapped IPv6** addresses (`::ffff:a.b.c.d`) are looked up as IPv4. An IPv6 address
//!   in an IPv4-only database is absent.
//! - **Errors at lookup time** (a corrupt record or search tree) give "absent" and are counted
//!   ([`GeoStats::lookup_errors`]).
//! - **Decoded locations are cached per record** (a lock-free, direct-mapped cache of 16,384
//!   entries per location database, keyed by the record's offset in the data section, emptied
//!   by a reload): decoding a City record means stepping over the city and continent names
//!   stored before `country`, which costs several times the tree walk, and a City database has
//!   far fewer distinct records than networks. In front of that, answers are cached per client
//!   address (16,384 entries, lock-free, invalidated by any reload): a repeat client costs a few
//!   atomic loads instead of walking trees of millions of nodes. A database error is counted
//!   once and its "absent" answer cached like any other (a loaded database never changes).
//!
//! # Untrusted files
//!
//! A database is used only after the whole file has been checked ([`GeoEnricher::open`], every
//! reload): the metadata; the search tree, walked once, so that every record is a node, the
//! "empty" marker or a pointer into the data section and no path is longer than an address has
//! bits; and every data record the tree points to, decoded to its end by the reader's verifier
//! (`maxminddb::Reader::verify`), which follows each pointer once, refuses pointer targets
//! outside the data section, pointer cycles, nesting deeper than 128 levels and malformed
//! values, and bounds its work to a multiple of the section's size. Lookups decode with the
//! reader's own bounds on top (512 levels of nesting, 65,536 values and 2 MiB of strings per
//! record). A file that fails any check is refused with a [`GeoError`] naming it, and the
//! database in service, if any, stays. Opening and every lookup also run under
//! `catch_unwind`: should the reader panic anyway, that is an error (at load) or an absent
//! answer counted in [`GeoStats::lookup_errors`] (at lookup), never a crash. This relies on the
//! default `panic = "unwind"`.
//!
//! # Replacing files
//!
//! A database is read into memory whole: the file can be replaced in any way (renamed over,
//! rewritten in place, truncated) without affecting the loaded copy, and nothing is mapped, so
//! no `unsafe` is involved. A reload reads the new file beside the one in service (for a moment
//! both are in memory) and swaps it in only once it has passed every check. A file that changes
//! while it is being read is refused ([`GeoError::Changed`]) and read again on the next change;
//! writing the new file beside the old and renaming it over (as MaxMind's `geoipupdate` does)
//! avoids that.

mod cache;
mod intervals;
mod record;
mod table;

pub use intervals::{CompiledIntervals, IntervalError};
pub use table::{CompiledTable, SharedGeoTable};

pub use record::SubdivisionCode;

use std::io;
use std::net::IpAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use maxminddb::{MaxMindDbError, Reader};

use crate::file_stamp::FileStamp;
use cache::{AddressCache, LocationCache, PackedLocation};
use record::{country_code, AsnRecord, Location};

/// The name of a database given as bytes ([`GeoEnricher::from_bytes`]), in errors and
/// [`DatabaseInfo::path`].
const IN_MEMORY: &str = "<memory>";

/// Which signals a lookup must produce. Databases whose signals are not needed are not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GeoNeeds {
    /// The country (City or Country database).
    pub country: bool,
    /// The ISO 3166-2 subdivision (City database).
    pub subdivision: bool,
    /// The autonomous system number (ASN database).
    pub asn: bool,
}

impl GeoNeeds {
    /// Nothing: a lookup returns at once.
    pub const NONE: GeoNeeds = GeoNeeds {
        country: false,
        subdivision: false,
        asn: false,
    };
    /// Every signal.
    pub const ALL: GeoNeeds = GeoNeeds {
        country: true,
        subdivision: true,
        asn: true,
    };

    /// Whether nothing is needed.
    pub fn is_empty(self) -> bool {
        !(self.country || self.subdivision || self.asn)
    }

    fn location(self) -> bool {
        self.country || self.subdivision
    }
}

/// The signals found for an address. A field is `None` when it was not asked for, no database
/// is loaded for it, the address is not in the database, or the record lacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GeoInfo {
    /// ISO 3166-1 alpha-2 country code, uppercase ASCII (`*b"US"`).
    pub country: Option<[u8; 2]>,
    /// ISO 3166-2 subdivision code (`US-NY`).
    pub subdivision: Option<SubdivisionCode>,
    /// Autonomous system number.
    pub asn: Option<u32>,
}

impl GeoInfo {
    /// The country code as text (`"US"`).
    pub fn country_str(&self) -> Option<&str> {
        self.country
            .as_ref()
            .and_then(|code| std::str::from_utf8(code).ok())
    }
}

/// Why a database could not be (re)loaded. The database in service, if any, stays.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GeoError {
    /// The file could not be opened or read.
    #[error("geo database {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The MaxMind reader refused the file (no metadata marker, unreadable metadata, a data
    /// record that does not decode: a pointer outside the data section, a pointer cycle, nesting
    /// too deep, ...).
    #[error("geo database {path} is not a valid MaxMind DB: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The reader's error.
        #[source]
        source: MaxMindDbError,
    },
    /// The file's structure is inconsistent (search tree larger than the file, a record
    /// pointing outside it, an unknown record size, ...).
    #[error("geo database {path} is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file changed while it was being loaded; the next attempt will see the new file.
    #[error("geo database {path} changed while loading")]
    Changed {
        /// The file.
        path: PathBuf,
    },
}

/// Counters of an enricher, for the admin view and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GeoStats {
    /// Lookups that failed in a database (corrupt record or tree) and were answered "absent".
    pub lookup_errors: u64,
    /// Successful reloads.
    pub reloads: u64,
    /// Failed reloads (the old database stayed in service).
    pub reload_failures: u64,
    /// Lookups that walked a database's search tree ([`GeoEnricher::lookup`] missing its
    /// cache, every [`GeoEnricher::lookup_direct`]). An edge whose decisions are answered by
    /// compiled intervals or a [`GeoTable`](netacl_eval::GeoTable) adds none per request.
    pub tree_walks: u64,
}

/// Which database a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseRole {
    /// City or Country database: country and subdivision.
    Location,
    /// ASN database.
    Asn,
}

/// What is known about a loaded database.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DatabaseInfo {
    /// What it is used for.
    pub role: DatabaseRole,
    /// The file it was loaded from.
    pub path: PathBuf,
    /// The metadata's `database_type` (`GeoIP2-City`, `GeoLite2-ASN`, ...).
    pub database_type: String,
    /// The metadata's build time, seconds since the Unix epoch.
    pub build_epoch: u64,
    /// 4 or 6.
    pub ip_version: u16,
    /// Nodes in the search tree.
    pub node_count: u32,
}

/// Enrichment of client addresses with country, subdivision and ASN from MaxMind-format
/// databases, reloadable in place. Cheap to clone (the clones share the databases).
#[derive(Debug, Clone)]
pub struct GeoEnricher {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    location: Option<Slot>,
    asn: Option<Slot>,
    lookup_errors: AtomicU64,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
    tree_walks: AtomicU64,
    /// Answers per address, valid for one generation of the databases.
    answers: AddressCache,
    /// Bumped after every database swap.
    generation: AtomicU32,
}

#[derive(Debug)]
struct Slot {
    role: DatabaseRole,
    path: PathBuf,
    database: ArcSwap<Database>,
    /// The stamp of the last file that failed to load, so that the watcher reports a broken
    /// file once rather than on every tick.
    failed: std::sync::Mutex<Option<FileStamp>>,
}

#[derive(Debug)]
struct Database {
    reader: Reader<Vec<u8>>,
    stamp: FileStamp,
    /// Decoded locations per network (location databases only).
    cache: Option<LocationCache>,
}

impl GeoEnricher {
    /// Opens the databases: `location` a City or Country database, `asn` an ASN database.
    /// Either may be `None`; the signals it would give are then always absent.
    ///
    /// # Errors
    ///
    /// A [`GeoError`] naming the file when a database cannot be loaded.
    pub fn open(location: Option<&Path>, asn: Option<&Path>) -> Result<GeoEnricher, GeoError> {
        let slot = |role, path: &Path| -> Result<Slot, GeoError> {
            let database = load(path, role)?;
            log_loaded(role, path, &database);
            Ok(Slot {
                role,
                path: path.to_owned(),
                database: ArcSwap::from_pointee(database),
                failed: std::sync::Mutex::new(None),
            })
        };
        Ok(GeoEnricher::with_slots(
            location
                .map(|p| slot(DatabaseRole::Location, p))
                .transpose()?,
            asn.map(|p| slot(DatabaseRole::Asn, p)).transpose()?,
        ))
    }

    /// An enricher over databases already in memory, checked exactly as [`open`](Self::open)
    /// checks files: `location` a City or Country database, `asn` an ASN database. There is no
    /// file behind them, so [`reload`](Self::reload) reports an I/O error for `<memory>` and
    /// keeps them, and [`reload_changed`](Self::reload_changed) leaves them alone.
    ///
    /// The public entry point for fuzzing (`fuzz/`, target `maxmind`: arbitrary bytes never make
    /// loading or a lookup panic or hang) and for tests that build databases.
    ///
    /// # Errors
    ///
    /// A [`GeoError`] naming `<memory>` when a database fails a check.
    pub fn from_bytes(
        location: Option<Vec<u8>>,
        asn: Option<Vec<u8>>,
    ) -> Result<GeoEnricher, GeoError> {
        let slot = |role, bytes: Vec<u8>| -> Result<Slot, GeoError> {
            let path = Path::new(IN_MEMORY);
            let stamp = FileStamp::in_memory(bytes.len() as u64);
            let database = load_bytes(bytes, stamp, path, role)?;
            Ok(Slot {
                role,
                path: path.to_owned(),
                database: ArcSwap::from_pointee(database),
                failed: std::sync::Mutex::new(None),
            })
        };
        Ok(GeoEnricher::with_slots(
            location
                .map(|b| slot(DatabaseRole::Location, b))
                .transpose()?,
            asn.map(|b| slot(DatabaseRole::Asn, b)).transpose()?,
        ))
    }

    fn with_slots(location: Option<Slot>, asn: Option<Slot>) -> GeoEnricher {
        GeoEnricher {
            inner: Arc::new(Inner {
                location,
                asn,
                lookup_errors: AtomicU64::new(0),
                reloads: AtomicU64::new(0),
                reload_failures: AtomicU64::new(0),
                tree_walks: AtomicU64::new(0),
                answers: AddressCache::new(),
                generation: AtomicU32::new(0),
            }),
        }
    }

    /// Looks up `ip`, reading only the databases and fields `needs` asks for. Never fails:
    /// anything not found is `None` (see [`GeoInfo`]); database errors are counted.
    pub fn lookup(&self, ip: IpAddr, needs: GeoNeeds) -> GeoInfo {
        self.lookup_with(ip, needs, true)
    }

    /// [`lookup`](Self::lookup) without the per-address answer cache (the per-record location
    /// cache still serves): what the edge uses for a policy that has no compiled intervals.
    pub fn lookup_direct(&self, ip: IpAddr, needs: GeoNeeds) -> GeoInfo {
        self.lookup_with(ip, needs, false)
    }

    fn lookup_with(&self, ip: IpAddr, needs: GeoNeeds, cached: bool) -> GeoInfo {
        let mut info = GeoInfo::default();
        if needs.is_empty() {
            return info;
        }
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        let (address, v6) = match ip {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), false),
            IpAddr::V6(v6) => (u128::from(v6), true),
        };
        // Read the generation before the databases: an answer computed from a database swapped
        // in meanwhile is then filed under the old generation and never served.
        let generation = self.inner.generation.load(Ordering::Acquire);
        let mut entry = if cached {
            self.inner
                .answers
                .get(address, v6, generation)
                .unwrap_or_default()
        } else {
            Default::default()
        };
        let mut learned = false;
        let walks_location =
            needs.location() && !entry.location_known && self.inner.location.is_some();
        let walks_asn = needs.asn && !entry.asn_known && self.inner.asn.is_some();
        if walks_location || walks_asn {
            self.inner.tree_walks.fetch_add(1, Ordering::Relaxed);
        }
        if needs.location() && !entry.location_known {
            if let Some(slot) = &self.inner.location {
                entry.location = self.locate(&slot.database.load(), ip);
            }
            entry.location_known = true;
            learned = true;
        }
        if needs.asn && !entry.asn_known {
            if let Some(slot) = &self.inner.asn {
                entry.asn = self
                    .read::<AsnRecord>(&slot.database.load(), ip)
                    .and_then(|r| r.autonomous_system_number);
            }
            entry.asn_known = true;
            learned = true;
        }
        if learned && cached {
            self.inner.answers.put(address, v6, generation, entry);
        }
        let location = entry.location;
        if needs.country {
            info.country = location.country;
        }
        if needs.subdivision {
            info.subdivision =
                location
                    .country
                    .zip(location.subdivision)
                    .and_then(|(country, (code, len))| {
                        let code = code.get(..usize::from(len))?;
                        SubdivisionCode::new(country, std::str::from_utf8(code).ok()?)
                    });
        }
        if needs.asn {
            info.asn = entry.asn;
        }
        info
    }

    /// The country and first subdivision of `ip`: the tree walk finds its record, whose
    /// decoded location comes from the cache or, on a miss, from decoding the record.
    fn locate(&self, database: &Database, ip: IpAddr) -> PackedLocation {
        if ip.is_ipv6() && database.reader.metadata().ip_version != 6 {
            return PackedLocation::default();
        }
        let Some(found) = self.guarded(|| database.reader.lookup(ip)) else {
            return PackedLocation::default();
        };
        let Some(offset) = found.offset() else {
            return PackedLocation::default();
        };
        let record = offset as u64;
        if let Some(cached) = database.cache.as_ref().and_then(|c| c.get(record)) {
            return cached;
        }
        let Some(fields) = self
            .guarded(|| found.decode::<Location<'_, true>>())
            .flatten()
        else {
            return PackedLocation::default();
        };
        let country = fields.country.and_then(country_code);
        let subdivision = country
            .zip(fields.subdivision)
            .and_then(|(c, s)| SubdivisionCode::new(c, s))
            .and_then(|code| {
                let tail = code.as_str().as_bytes().get(3..)?;
                let mut bytes = [0u8; 3];
                bytes.get_mut(..tail.len())?.copy_from_slice(tail);
                Some((bytes, u8::try_from(tail.len()).ok()?))
            });
        let location = PackedLocation {
            country,
            subdivision,
        };
        if let Some(cache) = &database.cache {
            cache.put(record, location);
        }
        location
    }

    /// Reads the record for `ip`; errors and panics in the reader count as absent.
    fn read<'a, T: serde::Deserialize<'a>>(&self, database: &'a Database, ip: IpAddr) -> Option<T> {
        if ip.is_ipv6() && database.reader.metadata().ip_version != 6 {
            return None;
        }
        self.guarded(|| database.reader.lookup(ip)?.decode::<T>())
            .flatten()
    }

    /// Runs a reader operation; an error or a panic in it is counted and gives `None`.
    fn guarded<T>(&self, operation: impl FnOnce() -> Result<T, MaxMindDbError>) -> Option<T> {
        match catch_unwind(AssertUnwindSafe(operation)) {
            Ok(Ok(value)) => Some(value),
            Ok(Err(error)) => {
                self.count_lookup_error(&error);
                None
            }
            Err(_panic) => {
                self.count_lookup_error(&"the reader panicked");
                None
            }
        }
    }

    #[cold]
    fn count_lookup_error(&self, error: &dyn std::fmt::Display) {
        let previous = self.inner.lookup_errors.fetch_add(1, Ordering::Relaxed);
        // Log the first error and then every 1024th, not one line per request.
        if previous.is_multiple_of(1024) {
            tracing::warn!(
                target: "netacl_edge::geo",
                errors = previous + 1,
                "geo lookup failed, answered as absent: {error}"
            );
        }
    }

    /// Reloads every configured database from its file, whether or not it changed. A database
    /// that fails to load is kept as it was; the others are still reloaded.
    ///
    /// # Errors
    ///
    /// The first [`GeoError`] met (every failure is also logged).
    pub fn reload(&self) -> Result<(), GeoError> {
        let mut first_error = None;
        for slot in self.slots() {
            if let Err(error) = self.reload_slot(slot) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.inner.location.iter().chain(self.inner.asn.iter())
    }

    fn reload_slot(&self, slot: &Slot) -> Result<(), GeoError> {
        match load(&slot.path, slot.role) {
            Ok(database) => {
                log_loaded(slot.role, &slot.path, &database);
                slot.database.store(Arc::new(database));
                self.inner.generation.fetch_add(1, Ordering::AcqRel);
                self.inner.reloads.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut failed) = slot.failed.lock() {
                    *failed = None;
                }
                Ok(())
            }
            Err(error) => {
                self.inner.reload_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    target: "netacl_edge::geo",
                    "reloading failed, the previous database stays in service: {error}"
                );
                if let Ok(mut failed) = slot.failed.lock() {
                    *failed = FileStamp::of(&slot.path).ok();
                }
                Err(error)
            }
        }
    }

    /// Reloads the databases whose files changed (length, modification time or inode) since
    /// they were loaded, skipping a file that already failed unchanged. Returns how many were
    /// reloaded.
    ///
    /// # Errors
    ///
    /// The first [`GeoError`] met.
    pub fn reload_changed(&self) -> Result<usize, GeoError> {
        let mut reloaded = 0;
        let mut first_error = None;
        for slot in self.slots() {
            let Ok(stamp) = FileStamp::of(&slot.path) else {
                // A missing file (mid-replacement, or removed): keep serving the old one.
                continue;
            };
            let failed_before = slot
                .failed
                .lock()
                .map(|f| *f == Some(stamp))
                .unwrap_or(false);
            if stamp == slot.database.load().stamp || failed_before {
                continue;
            }
            match self.reload_slot(slot) {
                Ok(()) => reloaded += 1,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(reloaded), Err)
    }

    /// Spawns a tokio task that checks the files every `interval` and reloads those that
    /// changed ([`reload_changed`](Self::reload_changed)). The task ends when every handle to
    /// this enricher is dropped, or when the returned handle is aborted. Must be called from
    /// within a tokio runtime.
    pub fn spawn_watcher(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let enricher = GeoEnricher { inner };
                // Loading reads and checks a whole file: keep it off the async workers.
                let outcome = tokio::task::spawn_blocking(move || enricher.reload_changed()).await;
                if let Err(join_error) = outcome {
                    tracing::error!(target: "netacl_edge::geo", "geo watcher: {join_error}");
                }
            }
        })
    }

    /// The counters.
    pub fn stats(&self) -> GeoStats {
        GeoStats {
            lookup_errors: self.inner.lookup_errors.load(Ordering::Relaxed),
            reloads: self.inner.reloads.load(Ordering::Relaxed),
            reload_failures: self.inner.reload_failures.load(Ordering::Relaxed),
            tree_walks: self.inner.tree_walks.load(Ordering::Relaxed),
        }
    }

    /// The databases in service.
    pub fn databases(&self) -> Vec<DatabaseInfo> {
        self.slots()
            .map(|slot| {
                let database = slot.database.load();
                let meta = database.reader.metadata();
                DatabaseInfo {
                    role: slot.role,
                    path: slot.path.clone(),
                    database_type: meta.database_type.clone(),
                    build_epoch: meta.build_epoch,
                    ip_version: meta.ip_version,
                    node_count: meta.node_count,
                }
            })
            .collect()
    }
}

fn log_loaded(role: DatabaseRole, path: &Path, database: &Database) {
    let meta = database.reader.metadata();
    tracing::info!(
        target: "netacl_edge::geo",
        ?role,
        path = %path.display(),
        database_type = %meta.database_type,
        build_epoch = meta.build_epoch,
        node_count = meta.node_count,
        "geo database loaded"
    );
}

/// Reads a database file into memory and checks all of it (see the module documentation).
fn load(path: &Path, role: DatabaseRole) -> Result<Database, GeoError> {
    let io_error = |source| GeoError::Io {
        path: path.to_owned(),
        source,
    };
    let stamp = FileStamp::of(path).map_err(io_error)?;
    let bytes = std::fs::read(path).map_err(io_error)?;
    if bytes.len() as u64 != stamp.len || FileStamp::of(path).map_err(io_error)? != stamp {
        return Err(GeoError::Changed {
            path: path.to_owned(),
        });
    }
    load_bytes(bytes, stamp, path, role)
}

/// Checks the bytes of a database (see the module documentation) and opens them; `path` names
/// them in errors.
fn load_bytes(
    bytes: Vec<u8>,
    stamp: FileStamp,
    path: &Path,
    role: DatabaseRole,
) -> Result<Database, GeoError> {
    check(&bytes).map_err(|failure| match failure {
        CheckFailure::Reader(source) => GeoError::Format {
            path: path.to_owned(),
            source,
        },
        CheckFailure::Corrupt(reason) => GeoError::Corrupt {
            path: path.to_owned(),
            reason,
        },
    })?;
    // The same bytes, checked: reading the metadata again cannot fail, but is not assumed to.
    let reader = match catch_unwind(AssertUnwindSafe(|| Reader::from_source(bytes))) {
        Ok(Ok(reader)) => reader,
        Ok(Err(source)) => {
            return Err(GeoError::Format {
                path: path.to_owned(),
                source,
            })
        }
        Err(_panic) => {
            return Err(GeoError::Corrupt {
                path: path.to_owned(),
                reason: "the reader panicked on its metadata".to_owned(),
            })
        }
    };
    let cache = (role == DatabaseRole::Location).then(LocationCache::new);
    Ok(Database {
        reader,
        stamp,
        cache,
    })
}

enum CheckFailure {
    Reader(MaxMindDbError),
    Corrupt(String),
}

/// Every check a database passes before it is used: the metadata (the reader's, bounded in
/// depth), the search tree (ours: every record in bounds, no cycle, no path longer than an
/// address), then the reader's verifier over the tree and every data record it points to.
fn check(bytes: &[u8]) -> Result<(), CheckFailure> {
    let guarded = |operation: &dyn Fn() -> Result<(), CheckFailure>| {
        catch_unwind(AssertUnwindSafe(operation)).unwrap_or_else(|_panic| {
            Err(CheckFailure::Corrupt(
                "the reader panicked while checking the file".to_owned(),
            ))
        })
    };
    guarded(&|| {
        let reader = Reader::from_source(bytes).map_err(CheckFailure::Reader)?;
        check_search_tree(bytes, reader.metadata()).map_err(CheckFailure::Corrupt)?;
        reader.verify().map_err(CheckFailure::Reader)
    })
}

/// Checks the metadata against the file and walks every record of the search tree: each must
/// be a node, the "empty" marker, or a pointer into the data section. After this the reader's
/// tree walk and pointer arithmetic stay in bounds.
fn check_search_tree(bytes: &[u8], meta: &maxminddb::Metadata) -> Result<(), String> {
    let file_len = bytes.len() as u64;
    if meta.binary_format_major_version != 2 {
        return Err(format!(
            "binary format version {} (expected 2)",
            meta.binary_format_major_version
        ));
    }
    if meta.ip_version != 4 && meta.ip_version != 6 {
        return Err(format!("ip_version {} (expected 4 or 6)", meta.ip_version));
    }
    let record_bits = u64::from(meta.record_size);
    if ![24, 28, 32].contains(&record_bits) {
        return Err(format!("record size {record_bits} (expected 24, 28 or 32)"));
    }
    let node_count = u64::from(meta.node_count);
    if node_count == 0 {
        return Err("empty search tree".to_owned());
    }
    let node_bytes = record_bits / 4;
    let tree_len = node_count * node_bytes;
    // The tree, the 16-byte separator, and at least the metadata marker must fit in the file.
    let data_len = match file_len.checked_sub(tree_len + 16) {
        Some(len) if len > 0 => len,
        _ => {
            return Err(format!(
                "node count {node_count} needs a {tree_len}-byte search tree, larger than the {file_len}-byte file"
            ))
        }
    };
    let tree = bytes
        .get(..usize::try_from(tree_len).map_err(|_| "search tree too large".to_owned())?)
        .ok_or_else(|| "search tree larger than the file".to_owned())?;
    let node_bytes = node_bytes as usize;
    let record = |node: u64, side: usize| -> u64 {
        let start = node as usize * node_bytes;
        let bytes = tree.get(start..start + node_bytes).unwrap_or_default();
        u64::from(node_records(bytes, meta.record_size)[side])
    };
    // Every record is a node, the "empty" marker, or a pointer into the data section.
    for index in 0..node_count {
        for side in 0..2 {
            let value = record(index, side);
            let pointer_ok = value <= node_count
                || (value >= node_count + 16 && value - node_count - 16 < data_len);
            if !pointer_ok {
                return Err(format!(
                    "search tree node {index} points to {value}, outside the file"
                ));
            }
        }
    }
    // No path from the root may be longer than an address has bits (which also rules out
    // cycles): a lookup that runs out of bits on a node fails.
    let max_depth = if meta.ip_version == 6 { 128 } else { 32 };
    check_tree_depth(node_count, max_depth, record)
}

/// Depth-first walk from the root computing each node's height (longest path to a leaf) once,
/// so shared subtrees (IPv4 aliases) are visited once. Fails on a cycle or a path longer than
/// `max_depth` nodes.
fn check_tree_depth(
    node_count: u64,
    max_depth: u8,
    record: impl Fn(u64, usize) -> u64,
) -> Result<(), String> {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    // A finished node stores 2 + its height.
    let mut state = vec![UNSEEN; node_count as usize];
    struct Frame {
        node: u64,
        next_side: usize,
        height: u8,
    }
    let mut stack = vec![Frame {
        node: 0,
        next_side: 0,
        height: 0,
    }];
    if let Some(root) = state.first_mut() {
        *root = ON_PATH;
    }
    while let Some(top) = stack.last_mut() {
        if top.next_side == 2 {
            let height = top.height.saturating_add(1);
            if let Some(slot) = state.get_mut(top.node as usize) {
                *slot = height.saturating_add(2);
            }
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                parent.height = parent.height.max(height);
            }
            continue;
        }
        let child = record(top.node, top.next_side);
        top.next_side += 1;
        if child >= node_count {
            continue;
        }
        match state.get(child as usize).copied().unwrap_or(UNSEEN) {
            UNSEEN => {
                if stack.len() >= usize::from(max_depth) {
                    return Err(format!(
                        "search tree path longer than {max_depth} bits (at node {child})"
                    ));
                }
                if let Some(slot) = state.get_mut(child as usize) {
                    *slot = ON_PATH;
                }
                stack.push(Frame {
                    node: child,
                    next_side: 0,
                    height: 0,
                });
            }
            ON_PATH => return Err(format!("search tree has a cycle through node {child}")),
            done => {
                let height = done - 2;
                if stack.len() + usize::from(height) > usize::from(max_depth) {
                    return Err(format!(
                        "search tree path longer than {max_depth} bits (through node {child})"
                    ));
                }
                if let Some(top) = stack.last_mut() {
                    top.height = top.height.max(height);
                }
            }
        }
    }
    Ok(())
}

/// The two records of a node.
fn node_records(node: &[u8], record_size: u16) -> [u32; 2] {
    let b = |i: usize| u32::from(node.get(i).copied().unwrap_or(0));
    match record_size {
        24 => [b(0) << 16 | b(1) << 8 | b(2), b(3) << 16 | b(4) << 8 | b(5)],
        28 => [
            (b(3) & 0xf0) << 20 | b(0) << 16 | b(1) << 8 | b(2),
            (b(3) & 0x0f) << 24 | b(4) << 16 | b(5) << 8 | b(6),
        ],
        _ => [
            b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3),
            b(4) << 24 | b(5) << 16 | b(6) << 8 | b(7),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_records_decode_each_record_size() {
        assert_eq!(node_records(&[0, 0, 1, 0, 0, 2], 24), [1, 2]);
        // 28-bit: the middle byte carries the high nibbles (left record in the high half).
        assert_eq!(
            node_records(&[0x12, 0x34, 0x56, 0xab, 0x78, 0x9a, 0xbc], 28),
            [0x0a12_3456, 0x0b78_9abc]
        );
        assert_eq!(node_records(&[0, 0, 0, 7, 0, 0, 1, 0], 32), [7, 256]);
    }

    #[test]
    fn needs() {
        assert!(GeoNeeds::NONE.is_empty());
        assert!(!GeoNeeds::ALL.is_empty());
        assert!(GeoNeeds {
            subdivision: true,
            ..GeoNeeds::NONE
        }
        .location());
    }
}

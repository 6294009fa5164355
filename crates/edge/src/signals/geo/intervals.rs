//! Compiling the databases in service into address intervals for a policy's listed values
//! ([`GeoEnricher::intervals`]): each database's networks walked once, off the request path.

use std::collections::HashMap;
use std::net::IpAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use maxminddb::{MaxMindDbError, WithinOptions};
use netacl_eval::{GeoAnswer, GeoIntervals, GeoIntervalsBuilder, GeoValues};

use super::record::{country_code, AsnRecord, Location};
use super::{Database, GeoEnricher, SubdivisionCode};

/// `::ffff:0:0/96`: IPv4-mapped addresses are looked up as IPv4 (the evaluator canonicalises
/// them), so the IPv6 table never holds them.
const MAPPED_FIRST: u128 = 0xffff_0000_0000;
const MAPPED_LAST: u128 = 0xffff_ffff_ffff;

/// Why intervals could not be compiled (a database the reader's iteration fails on; the
/// enriched policy in service stays).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IntervalError {
    /// The reader failed while walking a database's networks.
    #[error("walking the networks of the {role} database: {source}")]
    Walk {
        /// `location` or `asn`.
        role: &'static str,
        /// The reader's error.
        #[source]
        source: MaxMindDbError,
    },
    /// The reader panicked while walking a database.
    #[error("the reader panicked while walking the {role} database")]
    Panicked {
        /// `location` or `asn`.
        role: &'static str,
    },
}

/// Compiled intervals with what they were compiled from.
#[derive(Debug, Clone)]
pub struct CompiledIntervals {
    /// The intervals.
    pub intervals: GeoIntervals,
    /// The databases' generation they were compiled from ([`GeoEnricher::generation`]).
    pub generation: u32,
    /// How long the walk and the build took.
    pub elapsed: Duration,
}

/// The IPv6 networks that IPv6 databases alias to their IPv4 subtree: `::/96` (the subtree
/// itself, IPv4-compatible addresses), `2001::/32` (Teredo), `2002::/16` (6to4).
pub(super) const ALIASES: [(u128, u8); 3] =
    [(0, 96), (0x2001u128 << 112, 32), (0x2002u128 << 112, 16)];

/// One database's kept networks, by family: `(first, last, answer)`, disjoint, in the order the
/// tree walk yields them. The networks inside each alias network are kept apart, as the IPv4
/// ranges they would be if the alias holds (the 32 bits after the alias prefix).
pub(super) struct Ranges<T> {
    pub(super) v4: Vec<(u32, u32, T)>,
    v6: Vec<(u128, u128, T)>,
    /// Per alias: its networks as IPv4 ranges, or `None` once a network in it cannot be one
    /// (longer than the alias prefix + 32 bits).
    aliased: [Option<Vec<(u32, u32, T)>>; 3],
    ipv6_database: bool,
}

impl<T: Copy + PartialEq> Ranges<T> {
    fn new(ipv6_database: bool) -> Self {
        Ranges {
            v4: Vec::new(),
            v6: Vec::new(),
            aliased: [Some(Vec::new()), Some(Vec::new()), Some(Vec::new())],
            ipv6_database,
        }
    }

    /// Adds a network the database answers `answer` for, as the reader's lookups see it: an
    /// IPv4 network (from an IPv4 database, or the IPv4 subtree of an IPv6 one) answers the
    /// IPv4 addresses, and in an IPv6 database also the IPv4-compatible `::a.b.c.d` addresses;
    /// an IPv6 network answers the IPv6 addresses, except `::ffff:0:0/96` (IPv4-mapped
    /// addresses are looked up as IPv4).
    fn add(&mut self, network: IpAddr, prefix: u8, answer: T) {
        match network {
            IpAddr::V4(v4) => {
                let first = u32::from(v4);
                let last = first | u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
                self.v4.push((first, last, answer));
                if self.ipv6_database {
                    if let Some(aliased) = &mut self.aliased[0] {
                        aliased.push((first, last, answer));
                    }
                }
            }
            IpAddr::V6(v6) => {
                let first = u128::from(v6);
                let last = first | u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
                // An IPv6 network over all of `::/96` also answers every IPv4 address.
                if first == 0 && prefix <= 96 {
                    self.v4.push((0, u32::MAX, answer));
                }
                for (k, &(alias, len)) in ALIASES.iter().enumerate().skip(1) {
                    let inside = (first ^ alias) >> (128 - u32::from(len)) == 0 && prefix >= len;
                    if inside {
                        let shift = 96 - u32::from(len);
                        match &mut self.aliased[k] {
                            Some(aliased) if u32::from(prefix) <= u32::from(len) + 32 => {
                                aliased.push((
                                    (first >> shift) as u32,
                                    (last >> shift) as u32,
                                    answer,
                                ));
                            }
                            slot => {
                                // Finer than an IPv4 address: not an alias; keep it as IPv6.
                                *slot = None;
                                self.v6.push((first, last, answer));
                            }
                        }
                        return;
                    }
                }
                if first >= MAPPED_FIRST && last <= MAPPED_LAST {
                    return;
                }
                if first <= MAPPED_LAST && last >= MAPPED_FIRST {
                    // Encloses the mapped range: split around it.
                    if first < MAPPED_FIRST {
                        self.v6.push((first, MAPPED_FIRST - 1, answer));
                    }
                    if last > MAPPED_LAST {
                        self.v6.push((MAPPED_LAST + 1, last, answer));
                    }
                    return;
                }
                self.v6.push((first, last, answer));
            }
        }
    }

    /// Which aliases hold: the database's networks inside the alias are exactly its IPv4
    /// networks (the same kept ranges and answers, in the same order). An IPv4 database
    /// answers no IPv6 address, so no alias holds for it unless it keeps no IPv4 network.
    pub(super) fn holding_aliases(&self) -> [bool; 3] {
        std::array::from_fn(|k| match &self.aliased[k] {
            Some(aliased) if self.ipv6_database => *aliased == self.v4,
            Some(aliased) => aliased.is_empty() && self.v4.is_empty(),
            None => false,
        })
    }

    /// The IPv6 ranges with the networks of the aliases that do not hold (`holds[k]` false)
    /// put back as IPv6 ranges.
    pub(super) fn v6_with_aliases(&mut self, holds: [bool; 3]) -> Vec<(u128, u128, T)> {
        let mut v6 = std::mem::take(&mut self.v6);
        for (k, &(alias, len)) in ALIASES.iter().enumerate() {
            if holds[k] {
                continue;
            }
            let shift = 96 - u32::from(len);
            let low = (1u128 << shift) - 1;
            if let Some(aliased) = self.aliased[k].take() {
                v6.extend(aliased.into_iter().map(|(first, last, answer)| {
                    (
                        alias | (u128::from(first) << shift),
                        alias | (u128::from(last) << shift) | low,
                        answer,
                    )
                }));
            }
        }
        v6
    }
}

/// Walks every network of `database` once (aliases of the IPv4 subtree included), decoding
/// each distinct record once, and keeps those `answer_of` gives an answer.
pub(super) fn walk<'a, R: serde::Deserialize<'a>, T: Copy + PartialEq>(
    database: &'a Database,
    role: &'static str,
    answer_of: impl Fn(R) -> Option<T>,
) -> Result<Ranges<T>, IntervalError> {
    let reader = &database.reader;
    let ipv6_database = reader.metadata().ip_version == 6;
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<Ranges<T>, MaxMindDbError> {
        let mut ranges = Ranges::new(ipv6_database);
        let mut decoded: HashMap<usize, Option<T>> = HashMap::new();
        for found in reader.networks(WithinOptions::default().include_aliased_networks())? {
            let found = found?;
            let Some(offset) = found.offset() else {
                continue;
            };
            let answer = match decoded.get(&offset) {
                Some(answer) => *answer,
                None => {
                    let answer = found.decode::<R>()?.and_then(&answer_of);
                    decoded.insert(offset, answer);
                    answer
                }
            };
            let Some(answer) = answer else {
                continue;
            };
            let network = found.network()?;
            ranges.add(network.ip(), network.prefix(), answer);
        }
        Ok(ranges)
    }));
    match outcome {
        Ok(Ok(ranges)) => Ok(ranges),
        Ok(Err(source)) => Err(IntervalError::Walk { role, source }),
        Err(_panic) => Err(IntervalError::Panicked { role }),
    }
}

/// Overlays the location and ASN ranges (each disjoint) into ranges carrying both answers.
fn overlay<A: Copy + Ord + Successor>(
    mut location: Vec<(A, A, GeoAnswer)>,
    mut asn: Vec<(A, A, GeoAnswer)>,
    mut emit: impl FnMut(A, A, GeoAnswer),
) {
    location.sort_by_key(|r| r.0);
    asn.sort_by_key(|r| r.0);
    let combine = |l: Option<&GeoAnswer>, a: Option<&GeoAnswer>| {
        let l = l.copied().unwrap_or_default();
        let a = a.copied().unwrap_or_default();
        l.or(a)
    };
    // Boundaries: every start and every end + 1.
    let mut points: Vec<A> = Vec::with_capacity(2 * (location.len() + asn.len()));
    for &(first, last, _) in location.iter().chain(asn.iter()) {
        points.push(first);
        if let Some(next) = last.next() {
            points.push(next);
        }
    }
    points.sort_unstable();
    points.dedup();
    let (mut i, mut j) = (0usize, 0usize);
    for (k, &start) in points.iter().enumerate() {
        // The elementary range [start, next point - 1].
        let end = match points.get(k + 1) {
            Some(&next) => next.prev(),
            None => A::MAX,
        };
        while i < location.len() && location[i].1 < start {
            i += 1;
        }
        while j < asn.len() && asn[j].1 < start {
            j += 1;
        }
        let l = location.get(i).filter(|r| r.0 <= start);
        let a = asn.get(j).filter(|r| r.0 <= start);
        if l.is_some() || a.is_some() {
            emit(start, end, combine(l.map(|r| &r.2), a.map(|r| &r.2)));
        }
    }
}

/// Address arithmetic for [`overlay`].
trait Successor: Sized {
    const MAX: Self;
    fn next(self) -> Option<Self>;
    fn prev(self) -> Self;
}

impl Successor for u32 {
    const MAX: Self = u32::MAX;
    fn next(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn prev(self) -> Self {
        self.saturating_sub(1)
    }
}

impl Successor for u128 {
    const MAX: Self = u128::MAX;
    fn next(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn prev(self) -> Self {
        self.saturating_sub(1)
    }
}

impl GeoEnricher {
    /// The generation of the databases in service: bumped by every successful reload.
    pub fn generation(&self) -> u32 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Compiles the databases in service into intervals answering the values `values` lists
    /// (a policy's [`geo_values`](netacl_eval::CompiledPolicy::geo_values)): each database's
    /// networks walked once (each distinct record decoded once), the networks carrying no
    /// listed value dropped, the two databases overlaid, adjacent ranges with the same answer
    /// merged. The answers are exactly those of [`lookup`](Self::lookup) restricted to the
    /// listed values (the differential tests hold them to it). A database not configured, or
    /// whose signals no rule lists, is not read.
    ///
    /// # Errors
    ///
    /// An [`IntervalError`] when the reader fails (or panics) walking a database that passed
    /// the load checks.
    pub fn intervals(&self, values: &GeoValues) -> Result<CompiledIntervals, IntervalError> {
        let started = Instant::now();
        // Read the generation before the databases: intervals compiled from a database
        // swapped in meanwhile are filed under the older generation, and rebuilt.
        let generation = self.generation();
        let location = match (&self.inner.location, values.wants_location()) {
            (Some(slot), true) => {
                let database = slot.database.load();
                let wants_subdivision = values.wants_subdivision();
                Some(walk(&database, "location", |l: Location<'_, true>| {
                    let country = l.country.and_then(country_code);
                    let subdivision = country
                        .zip(l.subdivision)
                        .filter(|_| wants_subdivision)
                        .and_then(|(c, s)| SubdivisionCode::new(c, s));
                    let answer = GeoAnswer::new(country, subdivision.as_deref(), None);
                    values.keeps(&answer).then_some(answer)
                })?)
            }
            _ => None,
        };
        let asn = match (&self.inner.asn, values.wants_asn()) {
            (Some(slot), true) => {
                let database = slot.database.load();
                Some(walk(&database, "asn", |r: AsnRecord| {
                    let answer = GeoAnswer::new(None, None, r.autonomous_system_number);
                    values.keeps(&answer).then_some(answer)
                })?)
            }
            _ => None,
        };
        // An alias holds for the combined answer when it holds for every database read.
        let mut location = location;
        let mut asn = asn;
        let read = [location.is_some(), asn.is_some()];
        let holds: [bool; 3] = std::array::from_fn(|k| {
            location.as_ref().is_none_or(|r| r.holding_aliases()[k])
                && asn.as_ref().is_none_or(|r| r.holding_aliases()[k])
        });
        let mut builder = GeoIntervalsBuilder::new(values.clone());
        if read.iter().any(|&r| r) {
            for (k, &(alias, len)) in ALIASES.iter().enumerate() {
                if holds[k] {
                    builder.alias_v4(alias, len);
                }
            }
        }
        let (location_v4, location_v6) = location
            .as_mut()
            .map(|r| (std::mem::take(&mut r.v4), r.v6_with_aliases(holds)))
            .unwrap_or_default();
        let (asn_v4, asn_v6) = asn
            .as_mut()
            .map(|r| (std::mem::take(&mut r.v4), r.v6_with_aliases(holds)))
            .unwrap_or_default();
        overlay(location_v4, asn_v4, |first, last, answer| {
            builder.add_v4(first, last, answer)
        });
        overlay(location_v6, asn_v6, |first, last, answer| {
            builder.add_v6(first, last, answer)
        });
        Ok(CompiledIntervals {
            intervals: builder.build(),
            generation,
            elapsed: started.elapsed(),
        })
    }
}

//! Every address's geo/ASN answer, for every value the databases hold: one table for a whole
//! platform of tenants.
//!
//! See [`GeoTable`].

use std::collections::HashMap;
use std::net::IpAddr;

use crate::geo::{merge, push_alias, uses_compiled, AddressIntervals};
use crate::range::NONE;
use crate::request::{canonical_ip, Request};

/// Which database an alias ([`GeoTableBuilder::alias_v4`]) is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GeoDatabase {
    /// The City or Country database: country and subdivision.
    Location,
    /// The ASN database.
    Asn,
}

/// A distinct location answer: the country (`[0, 0]` for none) and the subdivision code's bytes
/// (its length in the last byte, 0 for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Location {
    country: [u8; 2],
    subdivision: [u8; 8],
}

impl Location {
    /// The location as a request takes it: a country that is not two ASCII letters and a
    /// subdivision that is not 1 to 7 ASCII bytes are missing (the evaluator could never match
    /// them: [`Request::with_country`] drops such a country, and no subdivision index holds a
    /// key longer than 7 bytes).
    fn new(country: Option<[u8; 2]>, subdivision: Option<&str>) -> Location {
        let country = country
            .filter(|c| c.iter().all(u8::is_ascii_alphabetic))
            .map_or([0; 2], |c| c.map(|b| b.to_ascii_uppercase()));
        let mut bytes = [0u8; 8];
        if let Some(code) = subdivision.map(str::as_bytes) {
            if (1..=7).contains(&code.len()) && code.is_ascii() {
                bytes[..code.len()].copy_from_slice(code);
                bytes[7] = code.len() as u8;
            }
        }
        Location {
            country,
            subdivision: bytes,
        }
    }

    fn is_empty(&self) -> bool {
        self.country == [0; 2] && self.subdivision[7] == 0
    }

    fn country(&self) -> Option<[u8; 2]> {
        (self.country != [0; 2]).then_some(self.country)
    }

    fn subdivision(&self) -> Option<&str> {
        let len = usize::from(self.subdivision[7]);
        if len == 0 {
            return None;
        }
        // Only ASCII is ever stored.
        std::str::from_utf8(self.subdivision.get(..len)?).ok()
    }
}

/// In an ASN range's value: the ASN is in the table's `large_asns` at the index in the low bits
/// (ASNs from 2^31 on, private or unallocated, are held there; every other ASN is the value
/// itself).
const LARGE_ASN: u32 = 1 << 31;

/// One database's ranges, as given.
#[derive(Debug)]
struct Ranges<T> {
    v4: Vec<(u32, u32, T)>,
    v6: Vec<(u128, u128, T)>,
    aliases: Vec<(u128, u8)>,
}

impl<T> Default for Ranges<T> {
    fn default() -> Self {
        Ranges {
            v4: Vec::new(),
            v6: Vec::new(),
            aliases: Vec::new(),
        }
    }
}

/// Collects the networks of a location database and of an ASN database and compiles them into
/// a [`GeoTable`]. Give it every network of each database with its answer (networks without
/// one may be left out: they answer as missing anyway). A database's ranges must not overlap
/// (the networks of a search tree never do); of overlapping ranges the first added is kept.
#[derive(Debug, Default)]
pub struct GeoTableBuilder {
    location: Ranges<Location>,
    asn: Ranges<u32>,
}

impl GeoTableBuilder {
    /// An empty builder (built as is: an empty database, every value missing).
    pub fn new() -> Self {
        Self::default()
    }

    /// The location database says the IPv4 addresses `first..=last` are in `country` (two ASCII
    /// letters, any case) and `subdivision` (ISO 3166-2, `US-NY`). A value a request could not
    /// carry (a country that is not two letters, a subdivision longer than seven bytes or not
    /// ASCII) is missing.
    pub fn add_location_v4(
        &mut self,
        first: u32,
        last: u32,
        country: Option<[u8; 2]>,
        subdivision: Option<&str>,
    ) {
        let location = Location::new(country, subdivision);
        if first <= last && !location.is_empty() {
            self.location.v4.push((first, last, location));
        }
    }

    /// As [`add_location_v4`](Self::add_location_v4) for the IPv6 addresses `first..=last`
    /// (IPv4-mapped addresses, `::ffff:0:0/96`, are looked up as IPv4 and never reach this
    /// table).
    pub fn add_location_v6(
        &mut self,
        first: u128,
        last: u128,
        country: Option<[u8; 2]>,
        subdivision: Option<&str>,
    ) {
        let location = Location::new(country, subdivision);
        if first <= last && !location.is_empty() {
            self.location.v6.push((first, last, location));
        }
    }

    /// The ASN database says the IPv4 addresses `first..=last` are in autonomous system `asn`.
    pub fn add_asn_v4(&mut self, first: u32, last: u32, asn: u32) {
        if first <= last {
            self.asn.v4.push((first, last, asn));
        }
    }

    /// As [`add_asn_v4`](Self::add_asn_v4) for IPv6 addresses.
    pub fn add_asn_v6(&mut self, first: u128, last: u128, asn: u32) {
        if first <= last {
            self.asn.v6.push((first, last, asn));
        }
    }

    /// In `database`, the IPv6 network `first/prefix_len` (`prefix_len` at most 96) answers as
    /// its IPv4 table: an address in it is answered for the IPv4 address of the 32 bits after
    /// the prefix (see [`GeoIntervalsBuilder::alias_v4`](crate::GeoIntervalsBuilder::alias_v4)).
    pub fn alias_v4(&mut self, database: GeoDatabase, first: u128, prefix_len: u8) {
        match database {
            GeoDatabase::Location => push_alias(&mut self.location.aliases, first, prefix_len),
            GeoDatabase::Asn => push_alias(&mut self.asn.aliases, first, prefix_len),
        }
    }

    /// Sorts, merges adjacent ranges with the same answer and builds the tables.
    pub fn build(self) -> GeoTable {
        let location_networks = self.location.v4.len() + self.location.v6.len();
        let asn_networks = self.asn.v4.len() + self.asn.v6.len();

        // Locations: each range holds the number of its distinct answer.
        let mut locations: Vec<Location> = Vec::new();
        let mut numbered: HashMap<Location, u32> = HashMap::new();
        let mut number = |location: Location| -> u32 {
            *numbered.entry(location).or_insert_with(|| {
                locations.push(location);
                (locations.len() - 1) as u32
            })
        };
        let location_v4: Vec<(u32, u32, u32)> = merge(self.location.v4)
            .into_iter()
            .map(|(first, last, l)| (first, last, number(l)))
            .collect();
        let location_v6: Vec<(u128, u128, u32)> = merge(self.location.v6)
            .into_iter()
            .map(|(first, last, l)| (first, last, number(l)))
            .collect();
        let location_ranges = location_v4.len() + location_v6.len();

        // ASNs: each range holds its ASN, or (from 2^31 on) the ASN's place among the large
        // ones.
        let mut large_asns: Vec<u32> = Vec::new();
        let mut large: HashMap<u32, u32> = HashMap::new();
        let mut value = |asn: u32| -> u32 {
            if asn < LARGE_ASN {
                return asn;
            }
            *large.entry(asn).or_insert_with(|| {
                large_asns.push(asn);
                LARGE_ASN | (large_asns.len() - 1) as u32
            })
        };
        let asn_v4: Vec<(u32, u32, u32)> = merge(self.asn.v4)
            .into_iter()
            .map(|(first, last, asn)| (first, last, value(asn)))
            .collect();
        let asn_v6: Vec<(u128, u128, u32)> = merge(self.asn.v6)
            .into_iter()
            .map(|(first, last, asn)| (first, last, value(asn)))
            .collect();
        let asn_ranges = asn_v4.len() + asn_v6.len();

        let location =
            AddressIntervals::build_in_lines(location_v4, location_v6, self.location.aliases);
        let asn = AddressIntervals::build_in_lines(asn_v4, asn_v6, self.asn.aliases);
        let locations = locations.into_boxed_slice();
        let large_asns = large_asns.into_boxed_slice();
        let bytes = location.bytes()
            + asn.bytes()
            + std::mem::size_of_val(&*locations)
            + std::mem::size_of_val(&*large_asns);
        GeoTable {
            stats: GeoTableStats {
                location_networks,
                location_ranges,
                locations: locations.len(),
                asn_networks,
                asn_ranges,
                spilled_lines: location.spilled_lines() + asn.spilled_lines(),
                bytes,
            },
            location,
            asn,
            locations,
            large_asns,
        }
    }
}

/// What a [`GeoTable`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[non_exhaustive]
pub struct GeoTableStats {
    /// Networks of the location database with a country or subdivision, before merging.
    pub location_networks: usize,
    /// Location ranges after merging adjacent networks with the same answer.
    pub location_ranges: usize,
    /// Distinct (country, subdivision) answers.
    pub locations: usize,
    /// Networks of the ASN database, before merging.
    pub asn_networks: usize,
    /// ASN ranges after merging.
    pub asn_ranges: usize,
    /// Large IPv4 tables are laid out one cache line per block of addresses, a lookup reading
    /// one line; this many lines held more ranges than fit, and a lookup there reads a
    /// second place.
    pub spilled_lines: usize,
    /// Approximate heap bytes.
    pub bytes: usize,
}

/// What the databases say about one address: the values [`GeoTable::enrich`] gives a request.
/// A field is `None` when the address is absent from its database, no database gives it, or
/// the record lacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GeoLookup<'t> {
    /// The country, uppercase ASCII (`*b"US"`).
    pub country: Option<[u8; 2]>,
    /// The subdivision (`US-NY`), as the database gives it.
    pub subdivision: Option<&'t str>,
    /// The autonomous system number.
    pub asn: Option<u32>,
}

/// Every address's country, first subdivision and ASN, for every value the databases hold,
/// independent of any rule. Immutable: build it with a [`GeoTableBuilder`], replace it whole
/// when a database changes.
///
/// [`GeoIntervals`](crate::GeoIntervals) are compiled for the values one policy lists, so they
/// change with that policy's rules. An edge enforcing thousands of tenants cannot afford that:
/// a table per tenant would cost megabytes per tenant, and a tenant's rule change would wait for
/// a walk over millions of networks. A [`GeoTable`] depends on the databases alone: every
/// network's country, first subdivision and ASN, adjacent networks with the same answer merged,
/// built once when a database is (re)loaded and shared by every tenant. A tenant's policy needs
/// nothing of its own for it: [`GeoTable::enrich`] gives the request the address's values, and
/// the policy answers them with the indexes it holds for the values its rules list, exactly as
/// for values a request carries itself. So a decision depends on one table snapshot and one
/// policy snapshot, which never need to agree on anything (no ids shared between them), and a
/// rule change compiles the rules alone.
///
/// The location answers and the ASN answers are two tables. Keeping them apart keeps each as
/// small as its own database (an overlay would hold every intersection of a City range with an
/// ASN range) and each value small: a location range holds the number of its distinct
/// (country, subdivision) answer, read from a table of a few thousand entries; an ASN range
/// holds the ASN itself. A large IPv4 table is laid out one cache line per block of addresses
/// (found by indexing; up to 16 ranges of 16-bit values or 13 of 24-bit values a line, the
/// block size chosen so that at most one line in a hundred overflows), so that a lookup reads
/// one line per table, which [`GeoTable::prefetch`] starts early: a GeoIP database is dense
/// (a network per /24 over a provider's range), and the client-address index's half-line
/// blocks would overflow into a second, dependent read. IPv6 ranges and small tables use the
/// client-address index's interval tables.
///
/// ```
/// use netacl_eval::{CompiledPolicy, GeoTableBuilder, Request, Verdict};
/// use netacl_model::{Limits, RequestScope, RuleSet};
///
/// let rule = |country: &str| serde_json::json!([{
///     "id": "acl_1111111111111111111111", "description": "geo", "active": true,
///     "priority": 1, "rule": {"action": {"block": true}, "scope": "tenant",
///         "match": {"geo_country_codes": [country]}},
///     "created_at": "2026-07-30T11:42:25.354Z", "updated_at": "2026-07-30T11:42:25.354Z"
/// }]);
/// // Two tenants listing different countries.
/// let no_fr = CompiledPolicy::compile(&RuleSet::from_json(&rule("FR"), 1, &Limits::default()).unwrap()).unwrap();
/// let no_de = CompiledPolicy::compile(&RuleSet::from_json(&rule("DE"), 1, &Limits::default()).unwrap()).unwrap();
///
/// // One table for both, from what the databases say: 192.0.2.0/24 is in Paris, AS 64500.
/// let mut builder = GeoTableBuilder::new();
/// builder.add_location_v4(0xc000_0200, 0xc000_02ff, Some(*b"FR"), Some("FR-75C"));
/// builder.add_asn_v4(0xc000_0000, 0xc000_03ff, 64500);
/// let table = builder.build();
///
/// let request = Request::new(RequestScope::Authentication)
///     .with_client_ip("192.0.2.9".parse().unwrap());
/// table.prefetch(request.client_ip().unwrap()); // early, while other work goes on
/// let enriched = table.enrich(request);
/// assert_eq!(enriched.country(), Some("FR"));
/// assert_eq!(enriched.subdivision(), Some("FR-75C"));
/// assert_eq!(enriched.asn(), Some(64500));
/// assert_eq!(no_fr.evaluate(&enriched).verdict(), Verdict::Block);
/// assert_eq!(no_de.evaluate(&enriched).verdict(), Verdict::None);
///
/// // Values the request carries win, all three together: nothing is looked up.
/// let given = table.enrich(request.with_asn(64501));
/// assert_eq!((given.country(), given.asn()), (None, Some(64501)));
/// ```
#[derive(Debug, Clone, Default)]
pub struct GeoTable {
    /// Per address range, the number of its location in `locations`.
    location: AddressIntervals,
    /// Per address range, its ASN (or, from 2^31 on, [`LARGE_ASN`] and an index into
    /// `large_asns`).
    asn: AddressIntervals,
    locations: Box<[Location]>,
    large_asns: Box<[u32]>,
    stats: GeoTableStats,
}

impl GeoTable {
    /// A table of no network: every address's values are missing (an empty database).
    pub fn empty() -> Self {
        GeoTableBuilder::new().build()
    }

    /// What the table holds.
    pub fn stats(&self) -> GeoTableStats {
        self.stats
    }

    /// The values of `ip` (IPv4-mapped IPv6 as IPv4).
    pub fn lookup(&self, ip: IpAddr) -> GeoLookup<'_> {
        self.lookup_canonical(canonical_ip(ip))
    }

    /// Starts loading the blocks a lookup of `ip` reads (in tables far larger than the cache,
    /// one memory access each): call it as soon as the client address is known, so that the
    /// lookup, later, finds them in the cache.
    #[inline]
    pub fn prefetch(&self, ip: IpAddr) {
        let ip = canonical_ip(ip);
        self.location.prefetch(ip);
        self.asn.prefetch(ip);
    }

    /// `request` with the country, subdivision and ASN of its client address, when it carries
    /// none of the three itself (values a request carries win, all three together, as with
    /// [`CompiledPolicy::with_geo`](crate::CompiledPolicy::with_geo)) and has a client address;
    /// otherwise `request` unchanged. An address the databases do not hold gets no values
    /// (missing: a `match` on them does not hold, a `not_match` does not exclude).
    pub fn enrich<'a>(&'a self, mut request: Request<'a>) -> Request<'a> {
        if let Some(ip) = uses_compiled(&request) {
            let found = self.lookup_canonical(ip);
            request.set_country_code(found.country);
            request.set_subdivision(found.subdivision);
            request.set_asn(found.asn);
        }
        request
    }

    #[inline]
    fn lookup_canonical(&self, ip: IpAddr) -> GeoLookup<'_> {
        let location = self.location.value(ip);
        let asn = self.asn.value(ip);
        let location = self.locations.get(location as usize);
        GeoLookup {
            country: location.and_then(Location::country),
            subdivision: location.and_then(Location::subdivision),
            asn: match asn {
                NONE => None,
                small if small < LARGE_ASN => Some(small),
                large => self.large_asns.get((large & !LARGE_ASN) as usize).copied(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(text: &str) -> u32 {
        u32::from(text.parse::<Ipv4Addr>().unwrap())
    }

    #[test]
    fn answers_each_database_apart_and_merges_neighbours() {
        let mut b = GeoTableBuilder::new();
        b.add_location_v4(
            v4("10.0.0.0"),
            v4("10.0.0.255"),
            Some(*b"us"),
            Some("US-NY"),
        );
        b.add_location_v4(
            v4("10.0.1.0"),
            v4("10.0.1.255"),
            Some(*b"US"),
            Some("US-NY"),
        );
        b.add_location_v4(v4("10.0.2.0"), v4("10.0.2.255"), Some(*b"US"), None);
        // Not a country a request could carry, and a subdivision too long: missing.
        b.add_location_v4(
            v4("10.0.3.0"),
            v4("10.0.3.255"),
            Some(*b"1X"),
            Some("XX-LONGER"),
        );
        b.add_asn_v4(v4("10.0.0.128"), v4("10.0.1.127"), 64500);
        b.add_asn_v4(v4("10.0.4.0"), v4("10.0.4.255"), u32::MAX);
        b.add_asn_v4(v4("10.0.5.0"), v4("10.0.5.255"), 1 << 31);
        // Overlapping an earlier range: dropped.
        b.add_asn_v4(v4("10.0.4.7"), v4("10.0.4.7"), 1);
        b.add_location_v6(
            0x2001_0db8 << 96,
            (0x2001_0db8 << 96) | u128::from(u64::MAX),
            Some(*b"FR"),
            Some("FR-75C"),
        );
        let table = b.build();
        let stats = table.stats();
        assert_eq!(
            (stats.location_networks, stats.location_ranges),
            (4, 3),
            "{stats:?}"
        );
        assert_eq!(stats.locations, 3, "{stats:?}");
        let at = |ip: &str| table.lookup(ip.parse().unwrap());
        assert_eq!(
            at("10.0.0.1"),
            GeoLookup {
                country: Some(*b"US"),
                subdivision: Some("US-NY"),
                asn: None
            }
        );
        assert_eq!(
            at("::ffff:10.0.1.0"),
            GeoLookup {
                country: Some(*b"US"),
                subdivision: Some("US-NY"),
                asn: Some(64500)
            }
        );
        assert_eq!(at("10.0.2.9").subdivision, None);
        assert_eq!(at("10.0.3.9"), GeoLookup::default());
        assert_eq!(at("10.0.4.7").asn, Some(u32::MAX));
        assert_eq!(at("10.0.5.7").asn, Some(1 << 31));
        assert_eq!(at("10.0.6.0"), GeoLookup::default());
        assert_eq!(at("2001:db8::1").country, Some(*b"FR"));
        assert_eq!(at("2001:db8:0:1::").country, None);
        // No alias: an IPv4-compatible address is an IPv6 address like any other.
        assert_eq!(at("::10.0.0.1"), GeoLookup::default());
    }

    #[test]
    fn aliases_are_per_database() {
        let mut b = GeoTableBuilder::new();
        b.add_location_v4(0, u32::MAX, Some(*b"DE"), None);
        b.add_asn_v4(0, u32::MAX, 3320);
        b.alias_v4(GeoDatabase::Location, 0x2002u128 << 112, 16);
        let table = b.build();
        let six_to_four: IpAddr = Ipv6Addr::from((0x2002u128 << 112) | (7u128 << 80)).into();
        assert_eq!(table.lookup(six_to_four).country, Some(*b"DE"));
        assert_eq!(table.lookup(six_to_four).asn, None);
    }

    #[test]
    fn an_empty_table_answers_nothing() {
        let table = GeoTable::empty();
        for ip in ["192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1"] {
            assert_eq!(table.lookup(ip.parse().unwrap()), GeoLookup::default());
        }
        let request = Request::new(netacl_model::RequestScope::Authentication)
            .with_client_ip("192.0.2.1".parse().unwrap());
        assert_eq!(table.enrich(request), request);
    }

    /// Random disjoint ranges over the whole IPv4 space, large enough for the block layout:
    /// the table answers what a scan of the ranges answers.
    #[test]
    fn random_ranges_answer_as_a_scan() {
        let mut rng = crate::synthetic::Rng::new(0x7461_626c);
        let mut ranges = Vec::new();
        let mut cursor = 0u32;
        while ranges.len() < 300_000 {
            let Some(first) = cursor.checked_add(rng.below(4096) as u32) else {
                break;
            };
            let Some(last) = first.checked_add(rng.below(2048) as u32) else {
                break;
            };
            let country = [b'A' + rng.below(26) as u8, b'A' + rng.below(4) as u8];
            let sub = format!(
                "{}{}-{}",
                country[0] as char,
                country[1] as char,
                rng.below(5)
            );
            let sub = rng.chance(50).then_some(sub);
            let asn = rng.chance(70).then(|| 1 + rng.below(5_000) as u32);
            ranges.push((first, last, country, sub, asn));
            let Some(after) = last.checked_add(1) else {
                break;
            };
            cursor = after;
        }
        let mut b = GeoTableBuilder::new();
        for (first, last, country, sub, asn) in &ranges {
            b.add_location_v4(*first, *last, Some(*country), sub.as_deref());
            if let Some(asn) = asn {
                b.add_asn_v4(*first, *last, *asn);
            }
        }
        let table = b.build();
        for _ in 0..200_000 {
            let a = rng.next_u64() as u32;
            let at = ranges.partition_point(|r| r.0 <= a);
            let expected = match at.checked_sub(1).map(|at| &ranges[at]) {
                Some((_, last, country, sub, asn)) if a <= *last => GeoLookup {
                    country: Some(*country),
                    subdivision: sub.as_deref(),
                    asn: *asn,
                },
                _ => GeoLookup::default(),
            };
            assert_eq!(table.lookup(IpAddr::V4(Ipv4Addr::from(a))), expected, "{a}");
        }
    }
}

//! Geo and ASN answers compiled into address intervals.
//!
//! For a given pair of databases, the country, first subdivision and ASN of a client address
//! are a property of the address: the networks that carry a value some rule lists form address
//! intervals. [`GeoIntervals`] holds them (adjacent networks with the same answer merged) in
//! address tables, so that a decision answers its geo/ASN conditions with one more address
//! lookup (prefetched together with the client-address lookup when the evaluation begins)
//! instead of a walk through the databases' search trees. A large IPv4 table is laid out in
//! aligned units with a byte per range (the `units` module: a policy's answers take few
//! distinct values), a few megabytes for a million networks, so that the lookup of a
//! never-seen address mostly finds its line in the last-level cache; the others use the
//! interval tables of the client-address index.
//!
//! This crate does not read databases: whoever does (`netacl-edge`'s `geo` module, for
//! MaxMind files) walks their networks once, keeps those whose values
//! [`GeoValues::keeps`] says a rule lists, and feeds them to a [`GeoIntervalsBuilder`]. The
//! result is attached to a policy with [`CompiledPolicy::with_geo`](crate::CompiledPolicy::with_geo):
//! rules and intervals then go into service in one swap.
//!
//! ```
//! use netacl_eval::{CompiledPolicy, GeoAnswer, GeoIntervalsBuilder, Request, Verdict};
//! use netacl_model::{Limits, RequestScope, RuleSet};
//!
//! let rules = serde_json::json!([{
//!     "id": "acl_1111111111111111111111", "description": "no FR", "active": true,
//!     "priority": 1, "rule": {"action": {"block": true}, "scope": "tenant",
//!         "match": {"geo_country_codes": ["FR"]}},
//!     "created_at": "2026-07-30T11:42:25.354Z", "updated_at": "2026-07-30T11:42:25.354Z"
//! }]);
//! let rules = RuleSet::from_json(&rules, 1, &Limits::default()).unwrap();
//! let policy = CompiledPolicy::compile(&rules).unwrap();
//!
//! // What a database says: 192.0.2.0/24 is in France.
//! let mut builder = GeoIntervalsBuilder::new(policy.geo_values());
//! builder.add_v4(0xc000_0200, 0xc000_02ff, GeoAnswer::new(Some(*b"FR"), None, Some(64500)));
//! let policy = policy.with_geo(std::sync::Arc::new(builder.build()));
//!
//! let from = |ip: &str| Request::new(RequestScope::Authentication).with_client_ip(ip.parse().unwrap());
//! assert_eq!(policy.evaluate(&from("192.0.2.9")).verdict(), Verdict::Block);
//! assert_eq!(policy.evaluate(&from("198.51.100.1")).verdict(), Verdict::None);
//! // Values carried by the request win over the compiled ones.
//! assert_eq!(policy.evaluate(&from("192.0.2.9").with_country("US")).verdict(), Verdict::None);
//! ```

use std::collections::HashMap;
use std::net::IpAddr;

use crate::hash::short_key_caseless;
use crate::lines::{LineTable, Width};
use crate::range::RangeTable;
use crate::request::{v4_bits, Request};
use crate::units::UnitTable;

/// What the databases say about an address: the values the geo/ASN signals take. A field is
/// `None` when the address is absent from the database, no database gives it, or the record
/// lacks it (a missing value, as in the semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GeoAnswer {
    country: Option<[u8; 2]>,
    /// The subdivision (`US-NY`) as the key the subdivision index uses.
    subdivision: Option<u64>,
    asn: Option<u32>,
}

impl GeoAnswer {
    /// An answer. A country that is not two ASCII letters and a subdivision longer than seven
    /// bytes are dropped (missing), as [`Request::with_country`] and rule validation would.
    pub fn new(country: Option<[u8; 2]>, subdivision: Option<&str>, asn: Option<u32>) -> Self {
        let country = country
            .filter(|c| c.iter().all(u8::is_ascii_alphabetic))
            .map(|c| c.map(|b| b.to_ascii_uppercase()));
        GeoAnswer {
            country,
            subdivision: subdivision.and_then(|s| short_key_caseless(s.as_bytes())),
            asn,
        }
    }

    /// Each value of `self`, or `other`'s where `self` has none: the answer of an address from
    /// a location database (`self`) and an ASN database (`other`).
    pub fn or(self, other: GeoAnswer) -> GeoAnswer {
        GeoAnswer {
            country: self.country.or(other.country),
            subdivision: self.subdivision.or(other.subdivision),
            asn: self.asn.or(other.asn),
        }
    }

    /// The answer with only the values `values` lists (the others are as good as missing: a
    /// value no rule lists matches no `match` and satisfies every `not_match`).
    fn restricted_to(self, values: &GeoValues) -> Self {
        GeoAnswer {
            country: self
                .country
                .filter(|c| values.countries.binary_search(c).is_ok()),
            subdivision: self
                .subdivision
                .filter(|s| values.subdivisions.binary_search(s).is_ok()),
            asn: self.asn.filter(|a| values.asns.binary_search(a).is_ok()),
        }
    }

    fn is_empty(self) -> bool {
        self.country.is_none() && self.subdivision.is_none() && self.asn.is_none()
    }
}

/// The countries, subdivisions and ASNs a policy's active rules list (in `match` or
/// `not_match`): the only values worth compiling into intervals. Two policies listing the same
/// values can share one [`GeoIntervals`].
///
/// Each kind is a sorted slice without repeats (searched by bisection; a tree set of 25,000
/// ASNs took three times the bytes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GeoValues {
    countries: Box<[[u8; 2]]>,
    subdivisions: Box<[u64]>,
    asns: Box<[u32]>,
}

/// The values sorted, without repeats.
fn sorted_set<T: Ord>(values: impl IntoIterator<Item = T>) -> Box<[T]> {
    let mut values: Vec<T> = values.into_iter().collect();
    values.sort_unstable();
    values.dedup();
    values.into_boxed_slice()
}

impl GeoValues {
    pub(crate) fn new(
        countries: impl IntoIterator<Item = [u8; 2]>,
        subdivisions: impl IntoIterator<Item = u64>,
        asns: impl IntoIterator<Item = u32>,
    ) -> Self {
        GeoValues {
            countries: sorted_set(countries),
            subdivisions: sorted_set(subdivisions),
            asns: sorted_set(asns),
        }
    }

    /// Heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.countries)
            + std::mem::size_of_val(&*self.subdivisions)
            + std::mem::size_of_val(&*self.asns)
    }

    /// The values of explicit lists: countries (two ASCII letters, any case; others are
    /// ignored), subdivisions (`US-NY`, any case) and ASNs. For embedders and tests that
    /// compile intervals for values of their own; a policy's are [`CompiledPolicy::geo_values`](crate::CompiledPolicy::geo_values).
    pub fn listing<'s>(
        countries: impl IntoIterator<Item = [u8; 2]>,
        subdivisions: impl IntoIterator<Item = &'s str>,
        asns: impl IntoIterator<Item = u32>,
    ) -> Self {
        GeoValues::new(
            countries
                .into_iter()
                .filter_map(|c| GeoAnswer::new(Some(c), None, None).country),
            subdivisions
                .into_iter()
                .filter_map(|s| short_key_caseless(s.as_bytes())),
            asns,
        )
    }

    /// `answer` with only the values this lists (what [`GeoIntervals::answer`] gives for an
    /// address whose databases' answer is `answer`).
    pub fn restrict(&self, answer: GeoAnswer) -> GeoAnswer {
        answer.restricted_to(self)
    }

    /// Whether no rule lists a country, a subdivision or an ASN (no interval is needed).
    pub fn is_empty(&self) -> bool {
        self.countries.is_empty() && self.subdivisions.is_empty() && self.asns.is_empty()
    }

    /// Whether a rule lists a country or a subdivision (a location database is worth reading).
    pub fn wants_location(&self) -> bool {
        !(self.countries.is_empty() && self.subdivisions.is_empty())
    }

    /// Whether a rule lists a subdivision.
    pub fn wants_subdivision(&self) -> bool {
        !self.subdivisions.is_empty()
    }

    /// Whether a rule lists an ASN (an ASN database is worth reading).
    pub fn wants_asn(&self) -> bool {
        !self.asns.is_empty()
    }

    /// Whether a network carrying `answer` must be kept: it carries a value some rule lists.
    pub fn keeps(&self, answer: &GeoAnswer) -> bool {
        !answer.restricted_to(self).is_empty()
    }
}

/// Collects the networks of one or two databases and compiles them into [`GeoIntervals`].
///
/// Feed it every network whose answer a rule may care about ([`GeoValues::keeps`]; the others
/// are dropped anyway), with the values of both databases combined per address: the builder
/// does not overlay two databases, the caller gives each address range its whole answer.
/// Ranges must not overlap (the networks of one database's search tree never do); of
/// overlapping ranges the first added is kept.
#[derive(Debug)]
pub struct GeoIntervalsBuilder {
    values: GeoValues,
    v4: Vec<(u32, u32, GeoAnswer)>,
    v6: Vec<(u128, u128, GeoAnswer)>,
    aliases: Vec<(u128, u8)>,
    networks: usize,
}

impl GeoIntervalsBuilder {
    /// A builder keeping the values `values` lists (a policy's [`geo_values`](crate::CompiledPolicy::geo_values)).
    pub fn new(values: GeoValues) -> Self {
        GeoIntervalsBuilder {
            values,
            v4: Vec::new(),
            v6: Vec::new(),
            aliases: Vec::new(),
            networks: 0,
        }
    }

    /// The IPv6 network `first/prefix_len` (`prefix_len` at most 96) answers as the IPv4
    /// table: an address in it is answered for the IPv4 address of the 32 bits after the
    /// prefix (the IPv4 aliases of MaxMind IPv6 databases: `::/96`, `2001::/32` (Teredo),
    /// `2002::/16` (6to4)), instead of a copy of every IPv4 range. Ranges added to the IPv6
    /// table inside an alias are never consulted. An invalid prefix is ignored.
    pub fn alias_v4(&mut self, first: u128, prefix_len: u8) {
        push_alias(&mut self.aliases, first, prefix_len);
    }

    /// The values the builder keeps.
    pub fn values(&self) -> &GeoValues {
        &self.values
    }

    /// The IPv4 addresses `first..=last` answer `answer`.
    pub fn add_v4(&mut self, first: u32, last: u32, answer: GeoAnswer) {
        let answer = answer.restricted_to(&self.values);
        if first <= last && !answer.is_empty() {
            self.networks += 1;
            self.v4.push((first, last, answer));
        }
    }

    /// The IPv6 addresses `first..=last` answer `answer` (IPv4-mapped addresses, `::ffff:0:0/96`,
    /// are looked up as IPv4 and never reach this table).
    pub fn add_v6(&mut self, first: u128, last: u128, answer: GeoAnswer) {
        let answer = answer.restricted_to(&self.values);
        if first <= last && !answer.is_empty() {
            self.networks += 1;
            self.v6.push((first, last, answer));
        }
    }

    /// Sorts, merges adjacent ranges with the same answer and builds the tables.
    pub fn build(self) -> GeoIntervals {
        let ids = ValueIds::new(&self.values);
        let mut answers: Vec<GeoIds> = Vec::new();
        let mut numbered: HashMap<GeoAnswer, u32> = HashMap::new();
        let mut id_of = |answer: GeoAnswer| -> u32 {
            let value = ids.of(answer);
            match ids.packing {
                Some(packing) => packing.pack(value),
                None => *numbered.entry(answer).or_insert_with(|| {
                    answers.push(value);
                    (answers.len() - 1) as u32
                }),
            }
        };
        fn number<A: crate::range::Address>(
            ranges: Vec<(A, A, GeoAnswer)>,
            id_of: &mut impl FnMut(GeoAnswer) -> u32,
        ) -> Vec<(A, A, u32)> {
            merge(ranges)
                .into_iter()
                .map(|(first, last, answer)| (first, last, id_of(answer)))
                .collect()
        }
        let v4 = number(self.v4, &mut id_of);
        let v6 = number(self.v6, &mut id_of);
        let distinct: std::collections::HashSet<u32> = v4
            .iter()
            .map(|r| r.2)
            .chain(v6.iter().map(|r| r.2))
            .collect();
        let intervals = v4.len() + v6.len();
        let table = AddressIntervals::build(v4, v6, self.aliases);
        let bytes =
            table.bytes() + answers.capacity() * std::mem::size_of::<GeoIds>() + ids.bytes();
        GeoIntervals {
            values: self.values,
            table,
            ids,
            answers,
            stats: GeoIntervalStats {
                networks: self.networks,
                ranges: intervals,
                distinct_answers: distinct.len(),
                bytes,
            },
        }
    }
}

/// An answer as value ids: each value's position (from 1) in the sorted list of the values
/// kept for its signal, 0 for a missing value. A policy maps each id to its index's posting
/// once, when the intervals are attached, so a decision turns an interval into postings with
/// three reads of small tables (no hashing, no answer table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct GeoIds {
    pub(crate) country: u32,
    pub(crate) subdivision: u32,
    pub(crate) asn: u32,
}

/// How three value ids fit in an interval's 32-bit value: the country's bits low, then the
/// subdivision's, then the ASN's (31 bits at most, so a value never reads as "no interval").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packing {
    subdivision_shift: u32,
    asn_shift: u32,
}

/// Bits for ids 0..=n.
fn id_bits(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

impl Packing {
    fn new(countries: usize, subdivisions: usize, asns: usize) -> Option<Packing> {
        let (c, s, a) = (id_bits(countries), id_bits(subdivisions), id_bits(asns));
        (c + s + a <= 31).then_some(Packing {
            subdivision_shift: c,
            asn_shift: c + s,
        })
    }

    fn pack(self, ids: GeoIds) -> u32 {
        ids.country | ids.subdivision << self.subdivision_shift | ids.asn << self.asn_shift
    }

    #[inline(always)]
    fn unpack(self, value: u32) -> GeoIds {
        let low = |bits: u32| (1u32 << bits) - 1;
        GeoIds {
            country: value & low(self.subdivision_shift),
            subdivision: (value >> self.subdivision_shift)
                & low(self.asn_shift - self.subdivision_shift),
            asn: value >> self.asn_shift,
        }
    }
}

/// The kept values in id order, and how ids are stored in the intervals.
#[derive(Debug, Clone, Default)]
pub(crate) struct ValueIds {
    pub(crate) countries: Vec<[u8; 2]>,
    pub(crate) subdivisions: Vec<u64>,
    pub(crate) asns: Vec<u32>,
    /// `None` when the ids need more than 31 bits: the intervals then hold an index into the
    /// intervals' table of distinct answers.
    packing: Option<Packing>,
}

impl ValueIds {
    fn new(values: &GeoValues) -> ValueIds {
        let countries: Vec<[u8; 2]> = values.countries.to_vec();
        let subdivisions: Vec<u64> = values.subdivisions.to_vec();
        let asns: Vec<u32> = values.asns.to_vec();
        let packing = Packing::new(countries.len(), subdivisions.len(), asns.len());
        ValueIds {
            countries,
            subdivisions,
            asns,
            packing,
        }
    }

    /// The ids of an answer restricted to the kept values.
    fn of(&self, answer: GeoAnswer) -> GeoIds {
        fn id<T: Ord>(sorted: &[T], value: Option<T>) -> u32 {
            value.map_or(0, |v| {
                sorted.binary_search(&v).map_or(0, |at| at as u32 + 1)
            })
        }
        GeoIds {
            country: id(&self.countries, answer.country),
            subdivision: id(&self.subdivisions, answer.subdivision),
            asn: id(&self.asns, answer.asn),
        }
    }

    /// The answer of ids.
    fn answer(&self, ids: GeoIds) -> GeoAnswer {
        fn value<T: Copy>(sorted: &[T], id: u32) -> Option<T> {
            (id as usize)
                .checked_sub(1)
                .and_then(|at| sorted.get(at).copied())
        }
        GeoAnswer {
            country: value(&self.countries, ids.country),
            subdivision: value(&self.subdivisions, ids.subdivision),
            asn: value(&self.asns, ids.asn),
        }
    }

    fn bytes(&self) -> usize {
        self.countries.capacity() * 2 + self.subdivisions.capacity() * 8 + self.asns.capacity() * 4
    }
}

/// Sorts the ranges (stably: of ranges starting at the same address the first added comes
/// first), drops any overlapping an earlier one and merges adjacent ranges with the same
/// answer.
pub(crate) fn merge<A: crate::range::Address, T: PartialEq>(
    mut ranges: Vec<(A, A, T)>,
) -> Vec<(A, A, T)> {
    ranges.sort_by_key(|r| r.0);
    let mut out: Vec<(A, A, T)> = Vec::with_capacity(ranges.len());
    for (first, last, answer) in ranges {
        match out.last_mut() {
            Some(previous) if first <= previous.1 => {} // overlaps: keep the earlier
            Some(previous) if previous.2 == answer && previous.1.successor() == Some(first) => {
                previous.1 = last;
            }
            _ => out.push((first, last, answer)),
        }
    }
    out
}

/// Records that the IPv6 network `first/prefix_len` answers as the IPv4 table (see
/// [`GeoIntervalsBuilder::alias_v4`]); an invalid prefix, or a ninth alias, is ignored.
pub(crate) fn push_alias(aliases: &mut Vec<(u128, u8)>, first: u128, prefix_len: u8) {
    if prefix_len <= 96 && aliases.len() < 8 {
        let mask = u128::MAX
            .checked_shl(128 - u32::from(prefix_len))
            .unwrap_or(0);
        aliases.push((first & mask, prefix_len));
    }
}

/// Disjoint address ranges, each with a 32-bit value, in the interval tables the evaluator
/// uses for the client address; IPv6 networks aliased to the IPv4 table are answered from it.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddressIntervals {
    v4: V4Intervals,
    v6: RangeTable<u128>,
    /// IPv6 networks answered as IPv4 (see [`GeoIntervalsBuilder::alias_v4`]).
    aliases: Vec<(u128, u8)>,
}

/// The IPv4 ranges of an [`AddressIntervals`].
#[derive(Debug, Clone)]
enum V4Intervals {
    /// The interval table of the client-address index.
    Ranges(RangeTable<u32>),
    /// One cache line per block of addresses (large tables of small values).
    Lines(LineTable),
    /// Aligned units with one-byte values (large tables of a policy's few values).
    Units(UnitTable),
}

impl Default for V4Intervals {
    fn default() -> Self {
        V4Intervals::Ranges(RangeTable::default())
    }
}

/// IPv4 ranges from which [`AddressIntervals::build_in_lines`] lays them out in lines.
const LINES_MIN: usize = 1 << 14;

impl AddressIntervals {
    /// The tables of disjoint, sorted ranges; a large IPv4 table laid out in aligned units
    /// ([`UnitTable`]: a policy's intervals take few distinct values, a byte each).
    pub(crate) fn build(
        v4: Vec<(u32, u32, u32)>,
        v6: Vec<(u128, u128, u32)>,
        aliases: Vec<(u128, u8)>,
    ) -> Self {
        let v4 = if v4.len() >= LINES_MIN {
            V4Intervals::Units(UnitTable::build(&v4))
        } else {
            V4Intervals::Ranges(RangeTable::build(v4))
        };
        AddressIntervals {
            v4,
            v6: RangeTable::build(v6),
            aliases,
        }
    }

    /// As [`build`](Self::build), a large IPv4 table laid out one cache line per block of
    /// addresses ([`LineTable`]: dense ranges, as a GeoIP database's, spill out of the
    /// interval table's half-line blocks).
    pub(crate) fn build_in_lines(
        v4: Vec<(u32, u32, u32)>,
        v6: Vec<(u128, u128, u32)>,
        aliases: Vec<(u128, u8)>,
    ) -> Self {
        let v4 = if v4.len() >= LINES_MIN {
            let width = Width::for_values(v4.iter().map(|r| r.2));
            V4Intervals::Lines(LineTable::build(&v4, width))
        } else {
            V4Intervals::Ranges(RangeTable::build(v4))
        };
        AddressIntervals {
            v4,
            v6: RangeTable::build(v6),
            aliases,
        }
    }

    /// Where an address is looked up: the IPv4 table, or (outside the IPv4 aliases) the IPv6.
    #[inline(always)]
    fn key(&self, ip: IpAddr) -> Result<u32, u128> {
        match ip {
            IpAddr::V4(a) => Ok(v4_bits(a)),
            IpAddr::V6(a) => {
                let a = u128::from(a);
                for &(first, len) in &self.aliases {
                    if (a ^ first).checked_shr(128 - u32::from(len)).unwrap_or(0) == 0 {
                        return Ok((a >> (96 - u32::from(len))) as u32);
                    }
                }
                Err(a)
            }
        }
    }

    /// Starts loading what [`value`](Self::value) reads for `ip` (already canonical).
    #[inline(always)]
    pub(crate) fn prefetch(&self, ip: IpAddr) {
        match (self.key(ip), &self.v4) {
            (Ok(a), V4Intervals::Ranges(v4)) => v4.prefetch(a),
            (Ok(a), V4Intervals::Lines(v4)) => v4.prefetch(a),
            (Ok(a), V4Intervals::Units(v4)) => v4.prefetch(a),
            (Err(a), _) => self.v6.prefetch(a),
        }
    }

    /// The value of the range holding `ip` (already canonical), [`NONE`](crate::range::NONE)
    /// outside every range.
    #[inline(always)]
    pub(crate) fn value(&self, ip: IpAddr) -> u32 {
        match (self.key(ip), &self.v4) {
            (Ok(a), V4Intervals::Ranges(v4)) => v4.innermost(a).0,
            (Ok(a), V4Intervals::Lines(v4)) => v4.get(a),
            (Ok(a), V4Intervals::Units(v4)) => v4.get(a),
            (Err(a), _) => self.v6.innermost(a).0,
        }
    }

    /// IPv4 lines whose ranges did not fit in them (0 unless laid out in lines).
    pub(crate) fn spilled_lines(&self) -> usize {
        match &self.v4 {
            V4Intervals::Ranges(_) | V4Intervals::Units(_) => 0,
            V4Intervals::Lines(v4) => v4.spilled_lines(),
        }
    }

    /// Approximate heap bytes.
    pub(crate) fn bytes(&self) -> usize {
        let v4 = match &self.v4 {
            V4Intervals::Ranges(v4) => v4.bytes(),
            V4Intervals::Lines(v4) => v4.bytes(),
            V4Intervals::Units(v4) => v4.bytes(),
        };
        v4 + self.v6.bytes() + self.aliases.capacity() * 32
    }
}

/// What a [`GeoIntervals`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct GeoIntervalStats {
    /// Networks kept (carrying a listed value), before merging.
    pub networks: usize,
    /// Address ranges after merging adjacent networks with the same answer.
    pub ranges: usize,
    /// Distinct answers.
    pub distinct_answers: usize,
    /// Approximate heap bytes.
    pub bytes: usize,
}

/// The geo/ASN answers of the client addresses, compiled from databases for the values a
/// policy lists (the module documentation of `geo.rs` in the crate docs). Immutable; attach it to a policy with
/// [`CompiledPolicy::with_geo`](crate::CompiledPolicy::with_geo).
#[derive(Debug, Clone)]
pub struct GeoIntervals {
    /// The values kept.
    values: GeoValues,
    /// Per address range, its answer's value ids (packed) or number.
    table: AddressIntervals,
    /// The kept values by id, and whether the intervals hold packed ids.
    ids: ValueIds,
    /// When the ids do not pack: the ids of each distinct answer, by the number the intervals
    /// hold.
    answers: Vec<GeoIds>,
    stats: GeoIntervalStats,
}

impl Default for GeoIntervals {
    /// No network: every address's values are missing (an empty database).
    fn default() -> Self {
        GeoIntervalsBuilder::new(GeoValues::default()).build()
    }
}

impl GeoIntervals {
    /// The values the intervals were compiled for (the others are answered as missing).
    pub fn values(&self) -> &GeoValues {
        &self.values
    }

    /// What the intervals hold.
    pub fn stats(&self) -> GeoIntervalStats {
        self.stats
    }

    /// The compiled answer for `ip` (IPv4-mapped IPv6 as IPv4), restricted to the listed
    /// values: what a decision uses when the request carries no geo/ASN value.
    pub fn answer(&self, ip: IpAddr) -> GeoAnswer {
        self.ids
            .answer(self.ids_canonical(crate::request::canonical_ip(ip)))
    }

    /// The kept values by id.
    pub(crate) fn value_ids(&self) -> &ValueIds {
        &self.ids
    }

    /// Starts loading what [`answer`](Self::answer) reads for `ip` (already canonical).
    #[inline(always)]
    pub(crate) fn prefetch(&self, ip: IpAddr) {
        self.table.prefetch(ip);
    }

    /// The value ids for a request's canonical client address (all 0 outside every kept
    /// network).
    #[inline(always)]
    pub(crate) fn ids_canonical(&self, ip: IpAddr) -> GeoIds {
        let value = self.table.value(ip);
        if value == crate::range::NONE {
            return GeoIds::default();
        }
        match self.ids.packing {
            Some(packing) => packing.unpack(value),
            None => self
                .answers
                .get(value as usize)
                .copied()
                .unwrap_or_default(),
        }
    }
}

/// Per value id of one [`GeoIntervals`], the posting one policy's index holds for that value
/// ([`NONE`](crate::range::NONE) for none, and for id 0, a missing value): built when the
/// intervals are attached, so that a decision goes from an interval to postings by indexing.
#[derive(Debug, Clone, Default)]
pub(crate) struct GeoPostings {
    country: Box<[u32]>,
    subdivision: Box<[u32]>,
    asn: Box<[u32]>,
}

impl GeoPostings {
    pub(crate) fn new(
        ids: &ValueIds,
        country: impl Fn([u8; 2]) -> u32,
        subdivision: impl Fn(u64) -> u32,
        asn: impl Fn(u32) -> u32,
    ) -> Self {
        fn table<T: Copy>(values: &[T], find: impl Fn(T) -> u32) -> Box<[u32]> {
            std::iter::once(crate::range::NONE)
                .chain(values.iter().map(|&v| find(v)))
                .collect()
        }
        GeoPostings {
            country: table(&ids.countries, country),
            subdivision: table(&ids.subdivisions, subdivision),
            asn: table(&ids.asns, asn),
        }
    }

    /// The postings of the three values of `ids`: (ASN, country, subdivision).
    #[inline(always)]
    pub(crate) fn of(&self, ids: GeoIds) -> (u32, u32, u32) {
        let at = |table: &[u32], id: u32| table.get(id as usize).copied();
        (
            at(&self.asn, ids.asn).unwrap_or(crate::range::NONE),
            at(&self.country, ids.country).unwrap_or(crate::range::NONE),
            at(&self.subdivision, ids.subdivision).unwrap_or(crate::range::NONE),
        )
    }
}

/// Whether `request` is to take its geo/ASN values from compiled intervals: it carries none of
/// them itself (values given explicitly win, all three together) and has a client address.
#[inline(always)]
pub(crate) fn uses_compiled(request: &Request<'_>) -> Option<IpAddr> {
    if request.asn().is_some()
        || request.country_code().is_some()
        || request.subdivision().is_some()
    {
        return None;
    }
    request.client_ip()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random disjoint IPv4 ranges with random answers (some values listed, some not, some
    /// missing) over `countries` countries, `subdivisions` subdivisions and `asns` ASNs: the
    /// compiled intervals answer what a scan of the ranges answers. Gives whether the ids were
    /// packed into the intervals.
    fn agrees_with_a_scan(countries: usize, subdivisions: usize, asns: usize) -> bool {
        let mut state = 0x2545_f491_4f6c_dd1du64 ^ (countries * subdivisions * asns) as u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let country = |i: u64| [b'A' + (i / 26 % 26) as u8, b'A' + (i % 26) as u8];
        let subdivision = |i: u64| format!("Q{}-{}", (b'A' + (i % 26) as u8) as char, i / 26);
        let listed_countries: Vec<[u8; 2]> = (0..countries as u64).map(country).collect();
        let listed_subdivisions: Vec<String> = (0..subdivisions as u64).map(subdivision).collect();
        let listed_asns: Vec<u32> = (0..asns as u32).map(|i| 1 + 3 * i).collect();
        let values = GeoValues::listing(
            listed_countries.iter().copied(),
            listed_subdivisions.iter().map(String::as_str),
            listed_asns.iter().copied(),
        );
        // Values drawn from a pool a quarter larger than the listed one, a fifth missing.
        let draw = |r: u64, n: usize| -> Option<u64> {
            (!r.is_multiple_of(5)).then(|| (r >> 8) % (n as u64 + n as u64 / 4 + 1))
        };
        let mut ranges = Vec::new();
        let mut cursor = 0u32;
        while let Some(first) = cursor.checked_add((next() % 4096) as u32) {
            let Some(last) = first.checked_add((next() % 2048) as u32) else {
                break;
            };
            let answer = GeoAnswer::new(
                draw(next(), countries).map(country),
                draw(next(), subdivisions).map(subdivision).as_deref(),
                draw(next(), asns).map(|i| 1 + 3 * i as u32),
            );
            ranges.push((first, last, answer));
            let Some(after) = last.checked_add(1) else {
                break;
            };
            cursor = after;
            if ranges.len() == 60_000 {
                break;
            }
        }
        let mut builder = GeoIntervalsBuilder::new(values.clone());
        for &(first, last, answer) in &ranges {
            builder.add_v4(first, last, answer);
        }
        let intervals = builder.build();
        let expected = |a: u32| -> GeoAnswer {
            let at = ranges.partition_point(|r| r.0 <= a);
            match at.checked_sub(1).map(|at| ranges[at]) {
                Some((_, last, answer)) if a <= last => values.restrict(answer),
                _ => GeoAnswer::default(),
            }
        };
        let mut probes: Vec<u32> = (0..100_000).map(|_| next() as u32).collect();
        for &(first, last, _) in ranges.iter().step_by(7) {
            probes.extend([first, last, first.wrapping_sub(1), last.wrapping_add(1)]);
        }
        let mut listed = 0;
        for a in probes {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(a));
            assert_eq!(intervals.answer(ip), expected(a), "{ip}");
            listed += usize::from(intervals.answer(ip) != GeoAnswer::default());
        }
        assert!(listed > 10_000, "{listed}");
        intervals.ids.packing.is_some()
    }

    #[test]
    fn packed_value_ids_answer_as_the_ranges() {
        assert!(agrees_with_a_scan(50, 200, 2_000));
    }

    #[test]
    fn value_ids_too_many_to_pack_answer_as_the_ranges() {
        // 10 + 12 + 12 bits: the intervals number the distinct answers instead.
        assert!(!agrees_with_a_scan(600, 3_000, 3_000));
    }

    #[test]
    fn ids_pack_in_31_bits_at_most() {
        let packing = Packing::new(50, 200, 2_000).unwrap();
        let ids = GeoIds {
            country: 50,
            subdivision: 200,
            asn: 2_000,
        };
        assert_eq!(packing.unpack(packing.pack(ids)), ids);
        assert!(packing.pack(ids) < 1 << 31);
        assert!(Packing::new(676, 1_000, 2_047).is_some());
        assert!(Packing::new(676, 1_024, 2_047).is_none());
    }
}

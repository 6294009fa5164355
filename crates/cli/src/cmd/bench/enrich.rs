//! `netacl bench --enrich` (and `--geoip-city`/`--geoip-asn`): the decision with geo/ASN
//! conditions answered by intervals compiled into the policy, for never-seen addresses, against
//! the decision with the same values given in the request, in alternating rounds of one run.
//!
//! Without database flags, a City-like database of 1,050,000 networks and an ASN database of
//! 200,000 are generated into a temporary directory (`benches/mmdb_fixture.rs`, a few seconds),
//! and the synthetic tenant's geo/ASN lists are redrawn from pools of 50 countries, 200
//! subdivisions and 2,000 ASNs (the databases hold about half of each). The requests are the
//! synthetic mix replicated over 262,144 distinct client addresses (nine in ten in a network of
//! the database), so that the interval lookups are spread over the whole table, as an
//! attacker's addresses would be.
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use netacl_edge::geo::{GeoEnricher, GeoNeeds, SubdivisionCode};
use netacl_eval::synthetic::Rng;
use netacl_eval::{CompiledPolicy, Request};

/// An address's country, first subdivision and ASN as the database answers them.
type LookedUp = (Option<[u8; 2]>, Option<SubdivisionCode>, Option<u32>);
use serde::Serialize;

#[path = "../../../../../benches/mmdb_fixture.rs"]
#[allow(dead_code)]
mod mmdb_fixture;

/// Distinct client addresses of the measurement.
pub const ADDRESSES: usize = 262_144;

/// The databases of the measurement: given, or generated into a directory kept until the end.
pub struct Databases {
    pub city: Option<PathBuf>,
    pub asn: Option<PathBuf>,
    generated: bool,
    _dir: Option<tempfile::TempDir>,
}

impl Databases {
    /// The given databases, or freshly generated ones when neither is given.
    pub fn prepare(city: Option<&Path>, asn: Option<&Path>) -> anyhow::Result<Databases> {
        if city.is_some() || asn.is_some() {
            return Ok(Databases {
                city: city.map(Path::to_owned),
                asn: asn.map(Path::to_owned),
                generated: false,
                _dir: None,
            });
        }
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        mmdb_fixture::write_databases(dir.path());
        Ok(Databases {
            city: Some(dir.path().join("city.mmdb")),
            asn: Some(dir.path().join("asn.mmdb")),
            generated: true,
            _dir: Some(dir),
        })
    }

    /// Whether the databases were generated (not given).
    pub fn generated(&self) -> bool {
        self.generated
    }

    /// Redraws the geo/ASN values of the synthetic records from the pools (generated
    /// databases only: with real databases the tenant is left as generated).
    pub fn redraw_tenant(&self, records: &mut serde_json::Value) {
        if !self.generated {
            return;
        }
        let (countries, subdivisions, asns) = pools();
        let Some(records) = records.as_array_mut() else {
            return;
        };
        let mut rng = Rng::new(0x706f_6f6c);
        for record in records.iter_mut() {
            for part in ["match", "not_match"] {
                let Some(criteria) = record["rule"].get_mut(part).and_then(|c| c.as_object_mut())
                else {
                    continue;
                };
                for (key, pool) in [
                    ("geo_country_codes", &countries),
                    ("geo_subdivision_codes", &subdivisions),
                ] {
                    if let Some(list) = criteria.get_mut(key).and_then(|l| l.as_array_mut()) {
                        let mut fresh: Vec<String> =
                            list.iter().map(|_| rng.pick(pool).clone()).collect();
                        fresh.sort();
                        fresh.dedup();
                        *list = fresh.into_iter().map(serde_json::Value::from).collect();
                    }
                }
                if let Some(list) = criteria.get_mut("asns").and_then(|l| l.as_array_mut()) {
                    let mut fresh: Vec<u32> = list.iter().map(|_| *rng.pick(&asns)).collect();
                    fresh.sort_unstable();
                    fresh.dedup();
                    *list = fresh.into_iter().map(serde_json::Value::from).collect();
                }
            }
        }
        // Every pool value named at least once: three block rules of the registration scope.
        let extra = [
            (
                "geo_country_codes",
                countries.iter().map(|c| json_str(c)).collect(),
            ),
            (
                "geo_subdivision_codes",
                subdivisions.iter().map(|c| json_str(c)).collect(),
            ),
            (
                "asns",
                asns.iter()
                    .map(|&a| serde_json::Value::from(a))
                    .collect::<Vec<_>>(),
            ),
        ];
        // They take the place of the last three, so the tenant keeps its rule count.
        records.truncate(records.len().saturating_sub(extra.len()));
        for (i, (key, values)) in extra.into_iter().enumerate() {
            records.push(serde_json::json!({
                "id": format!("acl_enrichpoo{}111111111111", i + 2), "description": "pool",
                "active": true, "priority": 99,
                "rule": {"action": {"block": true}, "scope": "dynamic_client_registration",
                         "match": {key: values}},
                "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
            }));
        }
    }
}

fn json_str(s: &str) -> serde_json::Value {
    serde_json::Value::from(s)
}

/// 50 countries, 200 subdivisions, 2,000 ASNs; about half of each in the generated databases.
fn pools() -> (Vec<String>, Vec<String>, Vec<u32>) {
    let mut countries: Vec<String> = [
        "US", "GB", "FR", "DE", "NL", "SE", "ES", "IT", "PL", "BR", "AR", "MX", "CA", "JP", "KR",
        "CN", "IN", "SG", "AU", "NZ", "ZA", "NG", "RU", "UA",
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();
    for a in b'A'..=b'Z' {
        if countries.len() == 50 {
            break;
        }
        countries.push(format!("Q{}", a as char));
    }
    let mut subdivisions: Vec<String> = [
        "US-NY", "US-CA", "US-TX", "US-WA", "US-FL", "GB-ENG", "GB-SCT", "GB-WLS", "FR-75C",
        "FR-IDF", "FR-ARA", "DE-BY", "DE-BE", "DE-HH", "NL-NH", "NL-ZH", "SE-AB", "ES-M", "ES-B",
        "ES-AN", "IT-62", "IT-25", "PL-14", "BR-SP", "BR-RJ", "AR-B", "MX-CMX", "CA-ON", "CA-QC",
        "CA-BC", "JP-13", "JP-27", "KR-11", "CN-BJ", "CN-SH", "IN-MH", "IN-KA", "IN-DL", "AU-NSW",
        "AU-VIC", "NZ-AUK", "ZA-GP", "NG-LA", "RU-MOW", "UA-30",
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();
    let mut n = 0;
    while subdivisions.len() < 200 {
        subdivisions.push(format!("QZ-{n}"));
        n += 1;
    }
    // ASNs 1..=200,000 are in the generated database; every 100th of 1..=200,000, and 1,000
    // beyond it.
    let asns = (0..2_000u32)
        .map(|i| if i < 1_000 { 1 + i * 200 } else { 300_000 + i })
        .collect();
    (countries, subdivisions, asns)
}

/// What `--enrich` adds to the report.
#[derive(Serialize)]
pub struct EnrichReport {
    /// Median ns per decision: no geo value in the request, answered by the compiled
    /// intervals, each request from a distinct address.
    pub enriched_cold_ns_per_decision: f64,
    /// Median ns per decision of the same requests with the looked-up values given in the
    /// request (alternating rounds with the enriched ones).
    pub enrich_compiled_ns_per_decision: f64,
    /// The first over the second.
    pub enrich_ratio: f64,
    /// Compiling the intervals from the databases (walk, overlay, build): median of three.
    pub enrich_rebuild_ms: f64,
    /// Heap bytes of the intervals.
    pub enrich_bytes: usize,
    /// Networks kept and ranges after merging.
    pub enrich_networks: usize,
    /// Ranges after merging adjacent networks with the same answer.
    pub enrich_ranges: usize,
    /// Requests (distinct client addresses) per round.
    pub enrich_requests: usize,
    /// Requests whose looked-up values include a listed one.
    pub enrich_listed_share: f64,
}

/// A random address: nine in ten in a network of the generated database (or random IPv4 for
/// given databases), one in twenty IPv6.
pub fn address(rng: &mut Rng, generated: bool) -> IpAddr {
    if !generated {
        return IpAddr::V4(Ipv4Addr::from(rng.next_u64() as u32));
    }
    match rng.below(20) {
        0 => {
            let net =
                mmdb_fixture::v6_network(rng.below(u64::from(mmdb_fixture::V6_NETWORKS)) as u32);
            IpAddr::V6(Ipv6Addr::from(
                u128::from(net.network()) | u128::from(rng.next_u64()),
            ))
        }
        1 | 2 => {
            let net =
                mmdb_fixture::v4_network(rng.below(u64::from(mmdb_fixture::V4_NETWORKS)) as u32);
            IpAddr::V4(Ipv4Addr::from(
                u32::from(net.network()) + 256 + rng.below(512) as u32,
            ))
        }
        _ => {
            let net =
                mmdb_fixture::v4_network(rng.below(u64::from(mmdb_fixture::V4_NETWORKS)) as u32);
            IpAddr::V4(Ipv4Addr::from(
                u32::from(net.network()) + rng.below(256) as u32,
            ))
        }
    }
}

#[inline(never)]
fn decide_all(policy: &CompiledPolicy, requests: &[Request<'_>]) {
    for request in requests {
        black_box(policy.evaluate(black_box(request)));
    }
}

/// Measures the enriched decision against the decision with values given.
pub fn measure(
    databases: &Databases,
    policy: &CompiledPolicy,
    mix: &[Request<'_>],
    rounds: usize,
) -> anyhow::Result<EnrichReport> {
    let enricher = GeoEnricher::open(databases.city.as_deref(), databases.asn.as_deref())
        .context("cannot load the GeoIP databases")?;
    let values = policy.geo_values();
    let mut rebuilds = Vec::new();
    let mut compiled = None;
    for _ in 0..3 {
        let t = Instant::now();
        let c = enricher
            .intervals(&values)
            .context("cannot compile the GeoIP databases")?;
        rebuilds.push(t.elapsed().as_secs_f64() * 1e3);
        compiled = Some(c);
    }
    rebuilds.sort_by(f64::total_cmp);
    let intervals = compiled.expect("three builds").intervals;
    let stats = intervals.stats();
    let enriched = policy.clone().with_geo(Arc::new(intervals));

    // The addresses and their looked-up values (kept here: the requests borrow them).
    let mut rng = Rng::new(0x636f_6c64);
    let addresses: Vec<IpAddr> = (0..ADDRESSES)
        .map(|_| address(&mut rng, databases.generated))
        .collect();
    let looked_up: Vec<LookedUp> = addresses
        .iter()
        .map(|&ip| {
            let info = enricher.lookup_direct(ip, GeoNeeds::ALL);
            (info.country, info.subdivision, info.asn)
        })
        .collect();
    let mut bare = Vec::with_capacity(ADDRESSES);
    let mut given = Vec::with_capacity(ADDRESSES);
    let mut listed = 0usize;
    for (k, (&ip, (country, subdivision, asn))) in addresses.iter().zip(&looked_up).enumerate() {
        let mut request = mix[k % mix.len()];
        request.set_client_ip(Some(ip));
        request.set_asn(None);
        request.set_country(None);
        request.set_subdivision(None);
        bare.push(request);
        request.set_asn(*asn);
        request.set_country(country.as_ref().and_then(|c| std::str::from_utf8(c).ok()));
        request.set_subdivision(subdivision.as_ref().map(|s| s.as_str()));
        given.push(request);
        let answer = netacl_eval::GeoAnswer::new(*country, subdivision.as_deref(), *asn);
        listed += usize::from(values.keeps(&answer));
    }
    // The enriched decision is the decision with the looked-up values, request by request.
    for (b, g) in bare.iter().zip(&given) {
        let (eb, eg) = (enriched.evaluate(b), enriched.evaluate(g));
        anyhow::ensure!(
            enriched.outcome(&eb) == enriched.outcome(&eg),
            "the enriched decision differs from the looked-up one for {b:?}"
        );
    }
    decide_all(&enriched, &bare);
    decide_all(&enriched, &given);
    let mut cold = Vec::with_capacity(rounds);
    let mut with_values = Vec::with_capacity(rounds);
    let n = ADDRESSES as f64;
    for _ in 0..rounds.max(3) {
        let t = Instant::now();
        decide_all(&enriched, &bare);
        cold.push(t.elapsed().as_secs_f64() * 1e9 / n);
        let t = Instant::now();
        decide_all(&enriched, &given);
        with_values.push(t.elapsed().as_secs_f64() * 1e9 / n);
    }
    cold.sort_by(f64::total_cmp);
    with_values.sort_by(f64::total_cmp);
    let cold = cold[cold.len() / 2];
    let with_values = with_values[with_values.len() / 2];
    Ok(EnrichReport {
        enriched_cold_ns_per_decision: cold,
        enrich_compiled_ns_per_decision: with_values,
        enrich_ratio: cold / with_values,
        enrich_rebuild_ms: rebuilds[1],
        enrich_bytes: stats.bytes,
        enrich_networks: stats.networks,
        enrich_ranges: stats.ranges,
        enrich_requests: ADDRESSES,
        enrich_listed_share: listed as f64 / n,
    })
}

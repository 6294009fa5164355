//! Enrichment at the edge with real-size databases: GeoIP/ASN lookup alone, and lookup plus the
//! decision of a compiled policy.
//!
//! Setup (once, a few seconds, into a temporary directory that is removed afterwards): a
//! City-like database of 1,050,000 networks (1,000,000 IPv4 and 50,000 IPv6, 4,000 distinct
//! location records shaped like GeoIP2 City records) and an ASN database of 200,000 networks,
//! written with `mmdb-writer`, and the synthetic tenant of `netacl_eval::synthetic` (1,000 rules
//! over countries, subdivisions, ASNs, CIDRs, ...).
//!
//! The hot cases cycle over 4,096 addresses (a few thousand networks, which the location cache
//! holds); `lookup/all_cold` cycles over 262,144 networks, so nearly every lookup decodes its
//! City record.
//!
//! Run: `cargo bench -p netacl-benches --bench enrich`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mmdb_writer::ipnet::{IpNet, Ipv4Net, Ipv6Net};
use mmdb_writer::{IpVersion, Value, Writer};
use netacl_edge::geo::{GeoEnricher, GeoNeeds};
use netacl_eval::synthetic::{generate, Rng, SyntheticConfig};
use netacl_eval::{CompiledPolicy, Request};
use netacl_model::RequestScope;

const V4_NETWORKS: u32 = 1_000_000;
const V6_NETWORKS: u32 = 50_000;
const ASN_NETWORKS: u32 = 200_000;
const LOCATIONS: usize = 4_000;

const COUNTRIES: [(&str, &[&str]); 24] = [
    ("US", &["NY", "CA", "TX", "WA", "FL"]),
    ("GB", &["ENG", "SCT", "WLS"]),
    ("FR", &["75C", "IDF", "ARA"]),
    ("DE", &["BY", "BE", "HH"]),
    ("NL", &["NH", "ZH"]),
    ("SE", &["AB"]),
    ("ES", &["M", "B", "AN"]),
    ("IT", &["62", "25"]),
    ("PL", &["14"]),
    ("BR", &["SP", "RJ"]),
    ("AR", &["B"]),
    ("MX", &["CMX"]),
    ("CA", &["ON", "QC", "BC"]),
    ("JP", &["13", "27"]),
    ("KR", &["11"]),
    ("CN", &["BJ", "SH"]),
    ("IN", &["MH", "KA", "DL"]),
    ("SG", &[]),
    ("AU", &["NSW", "VIC"]),
    ("NZ", &["AUK"]),
    ("ZA", &["GP"]),
    ("NG", &["LA"]),
    ("RU", &["MOW"]),
    ("UA", &["30"]),
];

fn names(base: &str) -> Value {
    Value::map(
        ["de", "en", "es", "fr", "ja", "pt-BR", "ru", "zh-CN"]
            .iter()
            .map(|lang| (*lang, Value::String(format!("{base} ({lang})")))),
    )
}

/// A record shaped like a GeoIP2 City record.
fn location_record(index: usize) -> Value {
    let (country, subdivisions) = COUNTRIES[index % COUNTRIES.len()];
    let mut fields = vec![
        (
            "city",
            Value::map([
                ("geoname_id", Value::U32(100_000 + index as u32)),
                ("names", names(&format!("City {index}"))),
            ]),
        ),
        (
            "continent",
            Value::map([
                ("code", Value::from("XX")),
                ("geoname_id", Value::U32(6_255_148)),
                ("names", names("Continent")),
            ]),
        ),
        (
            "country",
            Value::map([
                (
                    "geoname_id",
                    Value::U32(1_000 + (index % COUNTRIES.len()) as u32),
                ),
                ("iso_code", Value::from(country)),
                ("names", names(country)),
            ]),
        ),
        (
            "location",
            Value::map([
                ("accuracy_radius", Value::U16(100)),
                ("latitude", Value::Double(index as f64 / 100.0)),
                ("longitude", Value::Double(-(index as f64) / 100.0)),
                ("time_zone", Value::from("Etc/UTC")),
            ]),
        ),
        (
            "registered_country",
            Value::map([
                ("geoname_id", Value::U32(1_000)),
                ("iso_code", Value::from(country)),
                ("names", names(country)),
            ]),
        ),
    ];
    if !subdivisions.is_empty() {
        let code = subdivisions[index / COUNTRIES.len() % subdivisions.len()];
        fields.push((
            "subdivisions",
            Value::array([Value::map([
                ("geoname_id", Value::U32(200_000 + index as u32)),
                ("iso_code", Value::from(code)),
                ("names", names(code)),
            ])]),
        ));
    }
    Value::map(fields)
}

/// The IPv4 networks: /24s spread over the space with gaps (one in three /24s from 1.0.0.0).
fn v4_network(i: u32) -> Ipv4Net {
    let base = (1u32 << 24) + i * 3 * 256;
    Ipv4Net::new(Ipv4Addr::from(base), 24).expect("valid prefix")
}

fn v6_network(i: u32) -> Ipv6Net {
    let base = (0x2a00u128 << 112) | (u128::from(i) << 80);
    Ipv6Net::new(Ipv6Addr::from(base), 48).expect("valid prefix")
}

fn write_databases(dir: &Path) {
    let mut city = Writer::builder("NetACL-Bench-City")
        .ip_version(IpVersion::V6)
        .build();
    let records: Vec<Value> = (0..LOCATIONS).map(location_record).collect();
    for i in 0..V4_NETWORKS {
        let record = records[(i as usize * 7919) % LOCATIONS].clone();
        city.insert_value(IpNet::V4(v4_network(i)), record)
            .expect("insert");
    }
    for i in 0..V6_NETWORKS {
        let record = records[(i as usize * 104_729) % LOCATIONS].clone();
        city.insert_value(IpNet::V6(v6_network(i)), record)
            .expect("insert");
    }
    std::fs::write(dir.join("city.mmdb"), city.to_bytes().expect("write city"))
        .expect("write city");

    let mut asn = Writer::builder("NetACL-Bench-ASN")
        .ip_version(IpVersion::V6)
        .build();
    for i in 0..ASN_NETWORKS {
        // One ASN network per five city /24s, as a /22-ish block.
        let net = v4_network(i * 5);
        let record = Value::map([
            ("autonomous_system_number", Value::U32(1 + i % 400_000)),
            (
                "autonomous_system_organization",
                Value::String(format!("Example Network {}", i % 5_000)),
            ),
        ]);
        asn.insert_value(IpNet::V4(net), record).expect("insert");
    }
    std::fs::write(dir.join("asn.mmdb"), asn.to_bytes().expect("write asn")).expect("write asn");
}

/// Lookup addresses: nine in ten inside a written network, one in ten in a gap.
fn probe_addresses() -> Vec<IpAddr> {
    let mut rng = Rng::new(0x656e_7269_6368);
    (0..4096)
        .map(|k| {
            if k % 10 == 9 {
                let i = rng.below(u64::from(V4_NETWORKS)) as u32;
                let gap = u32::from(v4_network(i).network()) + 256 + rng.below(256) as u32;
                IpAddr::V4(Ipv4Addr::from(gap))
            } else if k % 10 == 8 {
                let net = v6_network(rng.below(u64::from(V6_NETWORKS)) as u32);
                IpAddr::V6(Ipv6Addr::from(
                    u128::from(net.network()) | u128::from(rng.next_u64()),
                ))
            } else {
                let net = v4_network(rng.below(u64::from(V4_NETWORKS)) as u32);
                IpAddr::V4(Ipv4Addr::from(
                    u32::from(net.network()) + rng.below(256) as u32,
                ))
            }
        })
        .collect()
}

fn bench_enrich(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    write_databases(dir.path());
    let geo = GeoEnricher::open(
        Some(&dir.path().join("city.mmdb")),
        Some(&dir.path().join("asn.mmdb")),
    )
    .expect("open the generated databases");
    let probes = probe_addresses();

    let config = SyntheticConfig {
        rules: 1_000,
        cidrs: 10_000,
        requests: 1,
        ..SyntheticConfig::default()
    };
    let rules = generate(&config)
        .rule_set(&config)
        .expect("synthetic rules validate");
    let policy = CompiledPolicy::compile(&rules).expect("synthetic rules compile");

    let mut group = c.benchmark_group("enrich");
    group.throughput(Throughput::Elements(1));
    let needs_cases = [
        (
            "country",
            GeoNeeds {
                country: true,
                ..GeoNeeds::NONE
            },
        ),
        (
            "asn",
            GeoNeeds {
                asn: true,
                ..GeoNeeds::NONE
            },
        ),
        ("all", GeoNeeds::ALL),
    ];
    for (name, needs) in needs_cases {
        group.bench_with_input(BenchmarkId::new("lookup", name), &needs, |b, needs| {
            let mut k = 0usize;
            b.iter(|| {
                k = (k + 1) & 4095;
                black_box(geo.lookup(black_box(probes[k]), *needs))
            })
        });
    }
    // Cold: 262,144 addresses in as many distinct networks, cycling, far more than the
    // 16,384-slot location cache holds: nearly every lookup decodes its record.
    let cold: Vec<IpAddr> = (0..1u32 << 18)
        .map(|k| {
            let net = v4_network(k.wrapping_mul(2_654_435_761) % V4_NETWORKS);
            IpAddr::V4(Ipv4Addr::from(u32::from(net.network()) + (k & 0xff)))
        })
        .collect();
    group.bench_function(BenchmarkId::new("lookup", "all_cold"), |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 1) & ((1 << 18) - 1);
            black_box(geo.lookup(black_box(cold[k]), GeoNeeds::ALL))
        })
    });
    group.bench_function("lookup_and_evaluate/1000_rules", |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 1) & 4095;
            let ip = black_box(probes[k]);
            let info = geo.lookup(ip, GeoNeeds::ALL);
            let mut request = Request::new(RequestScope::Authentication).with_client_ip(ip);
            if let Some(country) = info.country_str() {
                request = request.with_country(country);
            }
            if let Some(subdivision) = &info.subdivision {
                request = request.with_subdivision(subdivision.as_str());
            }
            if let Some(asn) = info.asn {
                request = request.with_asn(asn);
            }
            black_box(policy.evaluate(&request))
        })
    });
    group.finish();

    // How often the probes find something, so the figures can be read.
    let found = probes
        .iter()
        .filter(|ip| geo.lookup(**ip, GeoNeeds::ALL).country.is_some())
        .count();
    eprintln!(
        "enrich: {} location networks, {} ASN networks, {found}/{} probes located, lookup errors {}",
        V4_NETWORKS + V6_NETWORKS,
        ASN_NETWORKS,
        probes.len(),
        geo.stats().lookup_errors
    );
}

criterion_group!(benches, bench_enrich);
criterion_main!(benches);

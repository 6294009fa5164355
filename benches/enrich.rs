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
//! Loading is measured too: `load/open` (criterion) opens both databases, and the setup prints
//! the file sizes, one open's time and the process's resident memory (`VmRSS`) before the open,
//! after it, and after the cold lookups have touched the records (Linux; printed, not asserted).
//!
//! `compiled/*`: the edge's path since the geo/ASN conditions are compiled into the policy
//! (`GeoEnricher::intervals`, `CompiledPolicy::with_geo`): a decision for never-seen addresses
//! answered from the intervals (`cold`), the same addresses with their values given
//! (`values_given`), and rebuilding the intervals (`rebuild`, what a database reload costs).
//!
//! Run: `cargo bench -p netacl-benches --bench enrich` (`-- load` for the loading figures alone).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use netacl_edge::geo::{GeoEnricher, GeoNeeds};
use netacl_eval::synthetic::{generate, Rng, SyntheticConfig};
use netacl_eval::{CompiledPolicy, Request};
use netacl_model::RequestScope;

#[path = "mmdb_fixture.rs"]
mod mmdb_fixture;
use mmdb_fixture::{
    v4_network, v6_network, write_databases, ASN_NETWORKS, V4_NETWORKS, V6_NETWORKS,
};

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

/// The process's resident memory in KiB (Linux), or 0 when unknown.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn open_both(dir: &Path) -> GeoEnricher {
    GeoEnricher::open(Some(&dir.join("city.mmdb")), Some(&dir.join("asn.mmdb")))
        .expect("open the generated databases")
}

fn bench_enrich(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    write_databases(dir.path());
    let size_mib = |name: &str| {
        std::fs::metadata(dir.path().join(name)).map_or(0.0, |m| m.len() as f64 / 1048576.0)
    };
    let rss_before = resident_kib();
    let started = std::time::Instant::now();
    let geo = open_both(dir.path());
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    let rss_opened = resident_kib();
    eprintln!(
        "load: city.mmdb {:.1} MiB, asn.mmdb {:.1} MiB; open {open_ms:.0} ms; resident memory +{:.1} MiB after open",
        size_mib("city.mmdb"),
        size_mib("asn.mmdb"),
        rss_opened.saturating_sub(rss_before) as f64 / 1024.0,
    );
    {
        let mut group = c.benchmark_group("load");
        group.sample_size(10);
        group.bench_function("open", |b| b.iter(|| black_box(open_both(dir.path()))));
        group.finish();
    }
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

    // Compiled enrichment (the edge's path since issue 15): the policy's listed values compiled
    // into address intervals attached to the policy, decided for never-seen addresses (the cold
    // set: no lookup, no cache), against the same addresses with their values given.
    let values = policy.geo_values();
    let compiled = geo.intervals(&values).expect("intervals compile");
    eprintln!(
        "compiled: intervals built in {:.0} ms",
        compiled.elapsed.as_secs_f64() * 1e3
    );
    let enriched = policy
        .clone()
        .with_geo(std::sync::Arc::new(compiled.intervals));
    let looked_up: Vec<_> = cold
        .iter()
        .map(|ip| (*ip, geo.lookup_direct(*ip, GeoNeeds::ALL)))
        .collect();
    let mut group = c.benchmark_group("compiled");
    group.throughput(Throughput::Elements(1));
    group.bench_function("cold/1000_rules", |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 1) & ((1 << 18) - 1);
            let request = Request::new(RequestScope::Authentication).with_client_ip(cold[k]);
            black_box(enriched.evaluate(black_box(&request)))
        })
    });
    group.bench_function("values_given/1000_rules", |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 1) & ((1 << 18) - 1);
            let (ip, info) = &looked_up[k];
            let mut request = Request::new(RequestScope::Authentication).with_client_ip(*ip);
            if let Some(country) = info.country_str() {
                request = request.with_country(country);
            }
            if let Some(subdivision) = &info.subdivision {
                request = request.with_subdivision(subdivision.as_str());
            }
            if let Some(asn) = info.asn {
                request = request.with_asn(asn);
            }
            black_box(policy.evaluate(black_box(&request)))
        })
    });
    group.sample_size(10);
    group.bench_function("rebuild/1000_rules", |b| {
        b.iter(|| black_box(geo.intervals(&values).expect("intervals compile")))
    });
    group.finish();

    eprintln!(
        "load: resident memory +{:.1} MiB over the process before the first open, after the lookups",
        resident_kib().saturating_sub(rss_before) as f64 / 1024.0
    );

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

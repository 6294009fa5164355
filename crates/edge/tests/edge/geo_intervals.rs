//! Geo/ASN intervals compiled from the databases ([`GeoEnricher::intervals`]) against "look the
//! address up, then keep the listed values": every network of MaxMind's reference databases
//! (first and last address, in every form the edge can see it), checked against the reader's
//! lookup and against the JSON sources; random addresses over a generated real-size database.
//! The same for the table of every tenant ([`GeoEnricher::table`], `platform_table`), and
//! many tenants' decisions through one enforcer against "look the address up, then evaluate
//! the tenant's rules with those values" (`many_tenants`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use netacl_edge::geo::{GeoEnricher, GeoInfo, GeoNeeds};
use netacl_eval::synthetic::Rng;
use netacl_eval::{GeoAnswer, GeoIntervals, GeoValues};

#[path = "../../../../benches/mmdb_fixture.rs"]
#[allow(dead_code)]
mod mmdb_fixture;

use crate::maxmind_sources::{fixture, maxmind, prefix_in_v6, source_rows};

fn as_v6(ip: IpAddr) -> u128 {
    u128::from(crate::maxmind_sources::as_v6(ip))
}

/// The generated real-size databases (`city.mmdb`, `asn.mmdb`, as the bench makes them),
/// written once per content of their generator into the test binaries' scratch directory and
/// shared by the tests of this binary (writing them takes seconds).
fn generated_databases() -> &'static std::path::Path {
    use std::hash::{Hash, Hasher};
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        include_str!("../../../../benches/mmdb_fixture.rs").hash(&mut hasher);
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("mmdb-fixture-{:016x}", hasher.finish()));
        if !dir.join("asn.mmdb").exists() {
            // Written aside and renamed, so that a concurrent test binary never reads half.
            let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            mmdb_fixture::write_databases(scratch.path());
            let written = scratch.keep();
            if std::fs::rename(&written, &dir).is_err() {
                // Another binary was first: its copy is the same.
                let _ = std::fs::remove_dir_all(&written);
            }
        }
        dir
    })
}

/// The source's record for `ip` (most specific network; IPv4 `a.b.c.d` is `::a.b.c.d`).
fn record_at(rows: &[(IpNet, serde_json::Value)], ip: IpAddr) -> Option<&serde_json::Value> {
    let bits = as_v6(ip);
    rows.iter()
        .filter(|(net, _)| {
            let len = prefix_in_v6(net);
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            bits & mask == as_v6(net.network()) & mask
        })
        .max_by_key(|(net, _)| prefix_in_v6(net))
        .map(|(_, record)| record)
}

/// What the JSON sources say about `ip` (an IPv4 or a native IPv6 address).
fn from_sources(
    city: &[(IpNet, serde_json::Value)],
    asn: &[(IpNet, serde_json::Value)],
    ip: IpAddr,
) -> GeoAnswer {
    let location = record_at(city, ip);
    let country = location
        .and_then(|r| r["country"]["iso_code"].as_str())
        .map(|c| [c.as_bytes()[0], c.as_bytes()[1]]);
    let subdivision = location
        .and_then(|r| r["country"]["iso_code"].as_str())
        .zip(location.and_then(|r| r["subdivisions"][0]["iso_code"].as_str()))
        .map(|(c, s)| format!("{c}-{s}"));
    let asn = record_at(asn, ip)
        .and_then(|r| r["autonomous_system_number"].as_u64())
        .map(|n| u32::try_from(n).unwrap());
    GeoAnswer::new(country, subdivision.as_deref(), asn)
}

fn looked_up(geo: &GeoEnricher, ip: IpAddr) -> GeoAnswer {
    let info: GeoInfo = geo.lookup(ip, GeoNeeds::ALL);
    GeoAnswer::new(info.country, info.subdivision.as_deref(), info.asn)
}

/// Every value the sources hold.
fn all_values(
    city: &[(IpNet, serde_json::Value)],
    asn: &[(IpNet, serde_json::Value)],
) -> (Vec<[u8; 2]>, Vec<String>, Vec<u32>) {
    let mut countries = Vec::new();
    let mut subdivisions = Vec::new();
    let mut asns = Vec::new();
    for (_, r) in city {
        if let Some(c) = r["country"]["iso_code"].as_str() {
            countries.push([c.as_bytes()[0], c.as_bytes()[1]]);
            if let Some(s) = r["subdivisions"][0]["iso_code"].as_str() {
                subdivisions.push(format!("{c}-{s}"));
            }
        }
    }
    for (_, r) in asn {
        if let Some(n) = r["autonomous_system_number"].as_u64() {
            asns.push(u32::try_from(n).unwrap());
        }
    }
    (countries, subdivisions, asns)
}

/// The addresses of a network as the edge can see them: first and last, and for an IPv4
/// network its IPv4-mapped and IPv4-compatible IPv6 forms and its 6to4 alias.
fn probes(net: &IpNet) -> Vec<(IpAddr, bool)> {
    let mut out = Vec::new();
    for ip in [net.network(), net.broadcast()] {
        out.push((ip, true));
        if let IpAddr::V4(v4) = ip {
            out.push((IpAddr::V6(v4.to_ipv6_mapped()), false));
            out.push((IpAddr::V6(v4.to_ipv6_compatible()), true));
            let six_to_four = (0x2002u128 << 112) | (u128::from(u32::from(v4)) << 80);
            out.push((IpAddr::V6(Ipv6Addr::from(six_to_four)), false));
        }
    }
    out
}

/// Checks every network of both sources: the compiled answer equals the lookup restricted to
/// `values`, and (for addresses the sources describe directly) the sources restricted too.
fn check_reference(geo: &GeoEnricher, values: &GeoValues) -> usize {
    let city = source_rows(&maxmind("GeoIP2-City-Test.json"));
    let asn = source_rows(&maxmind("GeoLite2-ASN-Test.json"));
    let compiled = geo.intervals(values).unwrap();
    let intervals: &GeoIntervals = &compiled.intervals;
    let mut checked = 0;
    for (net, _) in city.iter().chain(&asn) {
        for (ip, in_sources) in probes(net) {
            let answer = intervals.answer(ip);
            assert_eq!(
                answer,
                values.restrict(looked_up(geo, ip)),
                "{ip} (network {net}): compiled against lookup"
            );
            if in_sources {
                assert_eq!(
                    answer,
                    values.restrict(from_sources(&city, &asn, ip)),
                    "{ip} (network {net}): compiled against the JSON sources"
                );
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn every_network_of_the_reference_databases_answers_as_a_lookup_and_the_sources() {
    let geo = GeoEnricher::open(
        Some(&maxmind("GeoIP2-City-Test.mmdb")),
        Some(&maxmind("GeoLite2-ASN-Test.mmdb")),
    )
    .unwrap();
    let city = source_rows(&maxmind("GeoIP2-City-Test.json"));
    let asn = source_rows(&maxmind("GeoLite2-ASN-Test.json"));
    let (countries, subdivisions, asns) = all_values(&city, &asn);
    assert!(countries.len() > 10 && subdivisions.len() > 10 && asns.len() > 100);

    // Every value listed: nothing is filtered.
    let every = GeoValues::listing(
        countries.iter().copied(),
        subdivisions.iter().map(String::as_str),
        asns.iter().copied(),
    );
    let checked = check_reference(&geo, &every);
    assert!(checked > 4000, "checked {checked}");

    // A few values listed: networks carrying none are dropped, the others keep only those.
    let few = GeoValues::listing(
        [*b"GB", *b"us"],
        ["US-WA", "gb-eng", "SE-AB"],
        asns.iter().copied().step_by(7),
    );
    check_reference(&geo, &few);
    let few_compiled = geo.intervals(&few).unwrap();
    let every_compiled = geo.intervals(&every).unwrap();
    assert!(few_compiled.intervals.stats().networks < every_compiled.intervals.stats().networks);

    // Only countries listed: the ASN database is not read, ASNs are missing.
    let countries_only = GeoValues::listing([*b"GB"], [], []);
    check_reference(&geo, &countries_only);

    // London, by hand.
    let london = every_compiled
        .intervals
        .answer("81.2.69.160".parse().unwrap());
    assert_eq!(london, GeoAnswer::new(Some(*b"GB"), Some("GB-ENG"), None));
}

#[test]
fn the_project_fixtures_and_a_country_database_answer_as_lookups() {
    for (city, asn) in [
        (
            Some(fixture("netacl-test-city.mmdb")),
            Some(fixture("netacl-test-asn.mmdb")),
        ),
        (Some(maxmind("GeoLite2-Country-Test.mmdb")), None),
        (Some(maxmind("GeoLite2-City-Test.mmdb")), None),
        (None, Some(maxmind("GeoLite2-ASN-Test.mmdb"))),
    ] {
        let geo = GeoEnricher::open(city.as_deref(), asn.as_deref()).unwrap();
        // List everything the databases could answer with, found by looking up random
        // addresses (plus a country no database holds).
        let mut rng = Rng::new(99);
        let addresses: Vec<IpAddr> = (0..200_000).map(|_| random_address(&mut rng)).collect();
        let mut countries = vec![*b"ZZ"];
        let mut subdivisions = vec![];
        let mut asns = vec![];
        for &ip in &addresses {
            let info = geo.lookup(ip, GeoNeeds::ALL);
            countries.extend(info.country);
            subdivisions.extend(info.subdivision.map(|s| s.to_string()));
            asns.extend(info.asn);
        }
        let values = GeoValues::listing(countries, subdivisions.iter().map(String::as_str), asns);
        let compiled = geo.intervals(&values).unwrap();
        for &ip in &addresses {
            assert_eq!(
                compiled.intervals.answer(ip),
                values.restrict(looked_up(&geo, ip)),
                "{ip} in {city:?} / {asn:?}"
            );
        }
    }
}

/// A random address, biased towards where test databases have networks: IPv4 (random, and in
/// the documentation and MaxMind test ranges), its mapped, compatible and 6to4 forms, and IPv6
/// under 2001::/16, 2002::/16 and 2a02::/16.
fn random_address(rng: &mut Rng) -> IpAddr {
    let v4 = match rng.below(4) {
        0 => rng.next_u64() as u32,
        1 => u32::from(Ipv4Addr::new(81, 2, 69, 0)) | (rng.below(1 << 12) as u32),
        2 => u32::from(Ipv4Addr::new(192, 0, 2, 0)) | (rng.below(1 << 10) as u32),
        _ => (u32::from(Ipv4Addr::new(1, 0, 0, 0)) + (rng.below(1 << 26) as u32)) & !0xff | 7,
    };
    match rng.below(8) {
        0 => IpAddr::V6(Ipv4Addr::from(v4).to_ipv6_mapped()),
        1 => IpAddr::V6(Ipv4Addr::from(v4).to_ipv6_compatible()),
        2 => IpAddr::V6(Ipv6Addr::from(
            (0x2002u128 << 112) | (u128::from(v4) << 80) | u128::from(rng.next_u64()),
        )),
        3 => {
            let top = *rng.pick(&[0x2001u128, 0x2a02, 0x2a00, 0x2600]);
            IpAddr::V6(Ipv6Addr::from(
                (top << 112)
                    | (u128::from(rng.below(1 << 16)) << 96)
                    | (u128::from(rng.next_u64()) << 32),
            ))
        }
        _ => IpAddr::V4(Ipv4Addr::from(v4)),
    }
}

#[test]
fn random_addresses_over_a_real_size_database_answer_as_lookups() {
    let dir = generated_databases();
    let geo = GeoEnricher::open(Some(&dir.join("city.mmdb")), Some(&dir.join("asn.mmdb"))).unwrap();
    // The bench's shape: some countries, some subdivisions, one ASN in a hundred.
    let values = GeoValues::listing(
        [*b"US", *b"FR", *b"JP", *b"BR", *b"ZA", *b"NZ"],
        ["US-NY", "GB-ENG", "DE-BY", "IN-KA", "CA-QC", "AU-VIC"],
        (1..400_000).step_by(100),
    );
    let compiled = geo.intervals(&values).unwrap();
    let stats = compiled.intervals.stats();
    assert!(stats.networks > 100_000, "{stats:?}");
    assert!(stats.ranges <= stats.networks, "{stats:?}");
    eprintln!("{stats:?} in {:?}", compiled.elapsed);
    let mut rng = Rng::new(0x7265_616c);
    let mut hits = 0usize;
    for k in 0..300_000u32 {
        let ip = if k % 3 == 0 {
            random_address(&mut rng)
        } else {
            let net =
                mmdb_fixture::v4_network(rng.below(u64::from(mmdb_fixture::V4_NETWORKS)) as u32);
            let ip = Ipv4Addr::from(u32::from(net.network()) + rng.below(512) as u32);
            if k % 3 == 1 {
                IpAddr::V4(ip)
            } else {
                let net = mmdb_fixture::v6_network(
                    rng.below(u64::from(mmdb_fixture::V6_NETWORKS)) as u32
                );
                IpAddr::V6(Ipv6Addr::from(
                    u128::from(net.network()) | u128::from(rng.next_u64()),
                ))
            }
        };
        let answer = compiled.intervals.answer(ip);
        assert_eq!(answer, values.restrict(looked_up(&geo, ip)), "{ip}");
        hits += usize::from(answer != GeoAnswer::default());
    }
    assert!(hits > 30_000, "only {hits} addresses carry a listed value");
}

mod through_the_enforcer {
    //! The enriched policy in the enforcer: reloads, refused files, races with rule changes.

    use std::net::SocketAddr;
    use std::path::Path;
    use std::sync::{Arc, Barrier};

    use mmdb_writer::{IpVersion, Value, Writer};
    use netacl_edge::geo::GeoEnricher;
    use netacl_edge::{
        AclVerdict, ClientAddrResolver, ConnectionInfo, Enforcer, ForwardedHeader, TrustedProxies,
    };
    use netacl_eval::Engine;
    use netacl_model::{AclId, Limits, RuleSet};
    use serde_json::json;

    /// An ASN database where 192.0.2.0/24 and 2001:db8::/32 belong to `asn` (none when 0).
    pub(super) fn asn_database(asn: u32) -> Vec<u8> {
        let mut writer = Writer::builder("NetACL-Test-ASN")
            .ip_version(IpVersion::V6)
            .description(&[("en", "netacl reload test")])
            .build();
        if asn != 0 {
            for net in ["192.0.2.0/24", "2001:db8::/32"] {
                writer
                    .insert_value(
                        net.parse::<mmdb_writer::ipnet::IpNet>().unwrap(),
                        Value::map([("autonomous_system_number", Value::U32(asn))]),
                    )
                    .unwrap();
            }
        }
        writer.to_bytes().unwrap()
    }

    /// Replaces `path` as `geoipupdate` does: a new file renamed over the old.
    pub(super) fn install(path: &Path, bytes: &[u8]) {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    /// Version `version`: block the ASN `asn` (`match`) for every scope; and a redirect for
    /// every request NOT from AS 64999 (`not_match`), after it.
    fn rules(version: u64, asn: u32) -> RuleSet {
        let record = |n: u128, priority: u64, rule: serde_json::Value| {
            json!({"id": AclId::from_random(n).to_string(), "description": "r", "active": true,
                   "priority": priority, "rule": rule,
                   "created_at": "2026-01-01T00:00:00.000Z",
                   "updated_at": "2026-01-01T00:00:00.000Z"})
        };
        RuleSet::from_json(
            &json!([
                record(
                    1,
                    1,
                    json!({"action": {"block": true}, "scope": "tenant",
                                    "match": {"asns": [asn]}})
                ),
                record(
                    2,
                    2,
                    json!({"action": {"redirect": true,
                                               "redirect_uri": "https://example.com/"},
                                    "scope": "tenant", "not_match": {"asns": [64999]}})
                ),
            ]),
            version,
            &Limits::default(),
        )
        .unwrap()
    }

    fn enforcer(path: &Path) -> Enforcer {
        let geo = GeoEnricher::open(None, Some(path)).unwrap();
        Enforcer::new(
            Arc::new(Engine::new()),
            ClientAddrResolver::new(TrustedProxies::none(), ForwardedHeader::XForwardedFor),
        )
        .with_geo(Arc::new(geo))
    }

    fn verdict(enforcer: &Enforcer, client: &str) -> AclVerdict {
        let peer = SocketAddr::new(client.parse().unwrap(), 4000);
        enforcer
            .decide(
                Some(&ConnectionInfo::new(peer)),
                "/authorize",
                None,
                &http::HeaderMap::new(),
            )
            .verdict
    }

    #[test]
    fn policies_carry_intervals_and_reloads_rebuild_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn.mmdb");
        install(&path, &asn_database(64500));
        let enforcer = enforcer(&path);
        enforcer.apply_rules(&rules(1, 64500)).unwrap();
        let live = enforcer.engine().policy();
        let geo = live.geo().expect("intervals compiled with the rules");
        assert_eq!(*geo.values(), live.geo_values());
        assert_eq!(verdict(&enforcer, "192.0.2.7"), AclVerdict::Block);
        assert_eq!(verdict(&enforcer, "2001:db8::7"), AclVerdict::Block);
        assert_eq!(verdict(&enforcer, "::ffff:192.0.2.7"), AclVerdict::Block);
        // Absent from the database: the `match` fails, the `not_match` holds.
        assert_eq!(verdict(&enforcer, "198.51.100.1"), AclVerdict::Redirect);

        // A rule change that lists the same values reuses the intervals.
        enforcer.apply_rules(&rules(2, 64500)).unwrap();
        let again = enforcer.engine().policy();
        assert!(Arc::ptr_eq(again.geo().unwrap(), geo));

        // The database moves the network to another AS: the reload rebuilds the intervals.
        install(&path, &asn_database(64501));
        assert_eq!(enforcer.reload_geo().unwrap(), 1);
        let reloaded = enforcer.engine().policy();
        assert_eq!(reloaded.version(), 2);
        assert!(!Arc::ptr_eq(reloaded.geo().unwrap(), geo));
        assert_eq!(verdict(&enforcer, "192.0.2.7"), AclVerdict::Redirect);

        // Nothing changed on disk: nothing is rebuilt.
        assert_eq!(enforcer.reload_geo().unwrap(), 0);
        assert!(Arc::ptr_eq(&enforcer.engine().policy(), &reloaded));
    }

    #[test]
    fn a_file_that_fails_to_load_is_refused_and_the_enriched_policy_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn.mmdb");
        install(&path, &asn_database(64500));
        let enforcer = enforcer(&path);
        enforcer.apply_rules(&rules(1, 64500)).unwrap();
        let before = enforcer.engine().policy();
        let mut broken = asn_database(64501);
        broken.truncate(broken.len() / 2);
        install(&path, &broken);
        assert!(enforcer.reload_geo().is_err());
        assert!(Arc::ptr_eq(&enforcer.engine().policy(), &before));
        assert_eq!(verdict(&enforcer, "192.0.2.7"), AclVerdict::Block);
        // The next good file is taken.
        install(&path, &asn_database(64501));
        assert_eq!(enforcer.reload_geo().unwrap(), 1);
        assert_eq!(verdict(&enforcer, "192.0.2.7"), AclVerdict::Redirect);
    }

    #[test]
    fn an_empty_database_makes_every_geo_value_missing_in_match_and_not_match() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn.mmdb");
        install(&path, &asn_database(0));
        let enforcer = enforcer(&path);
        enforcer.apply_rules(&rules(1, 64500)).unwrap();
        assert_eq!(enforcer.engine().policy().geo().unwrap().stats().ranges, 0);
        for client in ["192.0.2.7", "2001:db8::1", "10.0.0.1"] {
            // `match` on the ASN fails, `not_match` holds: the redirect.
            assert_eq!(verdict(&enforcer, client), AclVerdict::Redirect, "{client}");
        }
    }

    #[test]
    fn a_reload_racing_rule_changes_yields_one_consistent_snapshot() {
        const ROUNDS: u64 = 60;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn.mmdb");
        let databases = [asn_database(64500), asn_database(64501)];
        install(&path, &databases[0]);
        let enforcer = Arc::new(enforcer(&path));
        enforcer.apply_rules(&rules(1, 64500)).unwrap();
        let barrier = Arc::new(Barrier::new(3));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

        let rule_changes = {
            let (enforcer, barrier) = (Arc::clone(&enforcer), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for version in 2..2 + ROUNDS {
                    let asn = if version % 2 == 0 { 64501 } else { 64500 };
                    enforcer.apply_rules(&rules(version, asn)).unwrap();
                }
            })
        };
        let reloads = {
            let (enforcer, barrier, path) =
                (Arc::clone(&enforcer), Arc::clone(&barrier), path.clone());
            let databases = databases.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for round in 0..ROUNDS {
                    install(&path, &databases[(round % 2) as usize]);
                    enforcer.reload_geo().unwrap();
                }
                // The last file: 64501 (ROUNDS is even, the last round wrote index 1).
            })
        };
        let reader = {
            let (enforcer, barrier, done) = (
                Arc::clone(&enforcer),
                Arc::clone(&barrier),
                Arc::clone(&done),
            );
            std::thread::spawn(move || {
                barrier.wait();
                let mut seen = 0u64;
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    let live = enforcer.engine().policy();
                    // Never new rules with intervals compiled for other values.
                    let geo = live.geo().expect("every installed policy is enriched");
                    assert_eq!(
                        *geo.values(),
                        live.geo_values(),
                        "version {}",
                        live.version()
                    );
                    seen += 1;
                }
                seen
            })
        };
        rule_changes.join().unwrap();
        reloads.join().unwrap();
        done.store(true, std::sync::atomic::Ordering::Release);
        assert!(reader.join().unwrap() > 0);
        // The end state: the last rules (version ROUNDS + 1, odd: block 64500) with the last
        // database (192.0.2.0/24 in AS 64501): not blocked, redirected.
        let live = enforcer.engine().policy();
        assert_eq!(live.version(), ROUNDS + 1);
        assert_eq!(verdict(&enforcer, "192.0.2.7"), AclVerdict::Redirect);
        assert_eq!(
            enforcer.geo().unwrap().databases()[0].database_type,
            "NetACL-Test-ASN"
        );
    }
}

/// What a lookup gives, as comparable values (country, subdivision, ASN).
type Values = (Option<[u8; 2]>, Option<String>, Option<u32>);

fn lookup_values(geo: &GeoEnricher, ip: IpAddr) -> Values {
    let info = geo.lookup_direct(ip, GeoNeeds::ALL);
    (
        info.country,
        info.subdivision.map(|s| s.to_string()),
        info.asn,
    )
}

fn table_values(table: &netacl_eval::GeoTable, ip: IpAddr) -> Values {
    let found = table.lookup(ip);
    (
        found.country,
        found.subdivision.map(str::to_owned),
        found.asn,
    )
}

mod platform_table {
    //! The table of every tenant ([`GeoEnricher::table`]) against "look the address up":
    //! every network of MaxMind's reference databases (in every form the edge can see an
    //! address), the JSON sources, other database shapes, and random addresses over a
    //! generated real-size database.

    use super::*;

    #[test]
    fn every_network_of_the_reference_databases_answers_as_a_lookup_and_the_sources() {
        let geo = GeoEnricher::open(
            Some(&maxmind("GeoIP2-City-Test.mmdb")),
            Some(&maxmind("GeoLite2-ASN-Test.mmdb")),
        )
        .unwrap();
        let compiled = geo.table().unwrap();
        let table = &compiled.table;
        let city = source_rows(&maxmind("GeoIP2-City-Test.json"));
        let asn = source_rows(&maxmind("GeoLite2-ASN-Test.json"));
        let mut checked = 0;
        for (net, _) in city.iter().chain(&asn) {
            for (ip, in_sources) in probes(net) {
                let values = table_values(table, ip);
                assert_eq!(values, lookup_values(&geo, ip), "{ip} (network {net})");
                if in_sources {
                    let (country, subdivision, asn_) = &values;
                    assert_eq!(
                        GeoAnswer::new(*country, subdivision.as_deref(), *asn_),
                        from_sources(&city, &asn, ip),
                        "{ip} (network {net}): table against the JSON sources"
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 4000, "checked {checked}");
        let london = table.lookup("81.2.69.160".parse().unwrap());
        assert_eq!(
            (london.country, london.subdivision),
            (Some(*b"GB"), Some("GB-ENG"))
        );
        let stats = table.stats();
        assert!(
            stats.location_ranges > 0 && stats.asn_ranges > 0,
            "{stats:?}"
        );
    }

    #[test]
    fn other_database_shapes_answer_as_lookups() {
        for (city, asn) in [
            (
                Some(fixture("netacl-test-city.mmdb")),
                Some(fixture("netacl-test-asn.mmdb")),
            ),
            (Some(maxmind("GeoLite2-Country-Test.mmdb")), None),
            (Some(maxmind("GeoLite2-City-Test.mmdb")), None),
            (None, Some(maxmind("GeoLite2-ASN-Test.mmdb"))),
            (None, None),
        ] {
            let geo = GeoEnricher::open(city.as_deref(), asn.as_deref()).unwrap();
            let table = geo.table().unwrap().table;
            let mut rng = Rng::new(98);
            for _ in 0..200_000 {
                let ip = random_address(&mut rng);
                assert_eq!(
                    table_values(&table, ip),
                    lookup_values(&geo, ip),
                    "{ip} in {city:?} / {asn:?}"
                );
            }
        }
    }

    #[test]
    fn random_addresses_over_a_real_size_database_answer_as_lookups() {
        let dir = generated_databases();
        let geo =
            GeoEnricher::open(Some(&dir.join("city.mmdb")), Some(&dir.join("asn.mmdb"))).unwrap();
        let compiled = geo.table().unwrap();
        let stats = compiled.table.stats();
        eprintln!("{stats:?} in {:?}", compiled.elapsed);
        assert!(stats.location_networks >= 1_000_000, "{stats:?}");
        assert!(stats.asn_networks >= 200_000, "{stats:?}");
        let mut rng = Rng::new(0x7461_626c);
        let mut found = 0usize;
        for k in 0..300_000u32 {
            let ip = match k % 3 {
                0 => random_address(&mut rng),
                1 => {
                    let net = mmdb_fixture::v4_network(
                        rng.below(u64::from(mmdb_fixture::V4_NETWORKS)) as u32,
                    );
                    IpAddr::V4(Ipv4Addr::from(
                        u32::from(net.network()) + rng.below(512) as u32,
                    ))
                }
                _ => {
                    let net = mmdb_fixture::v6_network(
                        rng.below(u64::from(mmdb_fixture::V6_NETWORKS)) as u32,
                    );
                    IpAddr::V6(Ipv6Addr::from(
                        u128::from(net.network()) | u128::from(rng.next_u64()),
                    ))
                }
            };
            let values = table_values(&compiled.table, ip);
            assert_eq!(values, lookup_values(&geo, ip), "{ip}");
            found += usize::from(values.0.is_some() || values.2.is_some());
        }
        assert!(found > 100_000, "only {found} addresses found");
    }
}

mod many_tenants {
    //! Many tenants behind one enforcer, their geo/ASN conditions answered from the table of
    //! every tenant: each decision equals "look the address up, then evaluate the tenant's
    //! rules with those values", with no tree walk per request; an empty database, reloads
    //! racing rule changes, a refused file.

    use std::net::SocketAddr;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};

    use mmdb_writer::{IpVersion, Value, Writer};
    use netacl_edge::geo::{GeoEnricher, GeoNeeds};
    use netacl_edge::{
        AclVerdict, ClientAddrResolver, ConnectionInfo, Enforcer, ForwardedHeader, TenantChange,
        TenantRouter, TrustedProxies,
    };
    use netacl_eval::{Engine, Request, Verdict};
    use netacl_model::{AclId, Limits, RequestScope, RuleSet};
    use serde_json::{json, Value as Json};

    use super::through_the_enforcer::{asn_database, install};
    use super::*;

    fn record(n: u128, priority: u64, action: Json, criteria: Json) -> Json {
        let mut rule = json!({"action": action, "scope": "tenant"});
        if let Json::Object(c) = criteria {
            for (k, v) in c {
                rule[k] = v;
            }
        }
        json!({"id": AclId::from_random(n).to_string(), "description": "r", "active": true,
               "priority": priority, "rule": rule,
               "created_at": "2026-01-01T00:00:00.000Z",
               "updated_at": "2026-01-01T00:00:00.000Z"})
    }

    fn rule_set(version: u64, records: Vec<Json>) -> RuleSet {
        RuleSet::from_json(&Json::Array(records), version, &Limits::default()).unwrap()
    }

    const BLOCK: fn() -> Json = || json!({"block": true});

    /// Tenants listing different values among those a database holds (`countries`,
    /// `subdivisions`, `asns`, each sorted), and two that list none it holds or none at all.
    fn tenants(
        countries: &[String],
        subdivisions: &[String],
        asns: &[u32],
    ) -> Vec<(String, RuleSet)> {
        let pick = |list: &[String], every: usize, from: usize| -> Vec<String> {
            list.iter().skip(from).step_by(every).cloned().collect()
        };
        let asns_every = |every: usize, from: usize| -> Vec<u32> {
            asns.iter().skip(from).step_by(every).copied().collect()
        };
        let redirect = json!({"redirect": true, "redirect_uri": "https://example.com/"});
        vec![
            (
                "countries.test".to_owned(),
                rule_set(
                    1,
                    vec![
                        record(
                            1,
                            1,
                            BLOCK(),
                            json!({"match": {"geo_country_codes": pick(countries, 3, 0)}}),
                        ),
                        record(
                            2,
                            2,
                            json!({"log": true}),
                            json!({"match": {"geo_country_codes": pick(countries, 3, 1)}}),
                        ),
                        record(
                            3,
                            3,
                            redirect.clone(),
                            json!({"not_match": {"geo_country_codes": pick(countries, 2, 0)}}),
                        ),
                    ],
                ),
            ),
            (
                "subdivisions.test".to_owned(),
                rule_set(
                    1,
                    vec![
                        record(
                            11,
                            1,
                            redirect.clone(),
                            json!({"match": {"geo_subdivision_codes": pick(subdivisions, 2, 0)}}),
                        ),
                        record(
                            12,
                            2,
                            BLOCK(),
                            json!({"not_match": {"geo_subdivision_codes": pick(subdivisions, 2, 1)}}),
                        ),
                    ],
                ),
            ),
            (
                "asns.test".to_owned(),
                rule_set(
                    1,
                    vec![
                        record(
                            21,
                            1,
                            json!({"allow": true}),
                            json!({"match": {"asns": asns_every(7, 0)}}),
                        ),
                        record(
                            22,
                            2,
                            BLOCK(),
                            json!({"not_match": {"asns": asns_every(3, 1)}}),
                        ),
                    ],
                ),
            ),
            (
                "mixed.test".to_owned(),
                rule_set(
                    1,
                    vec![
                        record(
                            31,
                            1,
                            BLOCK(),
                            json!({"match": {"geo_country_codes": pick(countries, 2, 1), "asns": asns_every(2, 0)}}),
                        ),
                        record(
                            32,
                            2,
                            redirect.clone(),
                            json!({"match": {"geo_subdivision_codes": pick(subdivisions, 1, 0)},
                                                          "not_match": {"asns": asns_every(5, 0)}}),
                        ),
                        record(
                            33,
                            3,
                            json!({"log": true}),
                            json!({"not_match": {"geo_country_codes": pick(countries, 1, 0)}}),
                        ),
                    ],
                ),
            ),
            (
                "unheld.test".to_owned(),
                rule_set(
                    1,
                    vec![
                        record(
                            41,
                            1,
                            BLOCK(),
                            json!({"match": {"geo_country_codes": ["ZZ"], "asns": [4_294_967_295u32]}}),
                        ),
                        record(
                            42,
                            2,
                            redirect,
                            json!({"not_match": {"geo_subdivision_codes": ["ZZ-ZZZ"], "asns": [0]}}),
                        ),
                    ],
                ),
            ),
            (
                "nogeo.test".to_owned(),
                rule_set(
                    1,
                    vec![record(
                        51,
                        1,
                        BLOCK(),
                        json!({"match": {"ipv4_cidrs": ["81.2.69.0/24", "1.0.0.0/16"]}}),
                    )],
                ),
            ),
        ]
    }

    fn platform(geo: GeoEnricher, tenants: &[(String, RuleSet)]) -> (Enforcer, Arc<TenantRouter>) {
        let router = Arc::new(TenantRouter::new());
        let report = router.apply(
            tenants
                .iter()
                .map(|(host, rules)| TenantChange::put(host, [host.as_str()], rules.clone())),
        );
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let enforcer = Enforcer::new(
            Arc::new(Engine::new()),
            ClientAddrResolver::new(TrustedProxies::none(), ForwardedHeader::XForwardedFor),
        )
        .with_geo(Arc::new(geo))
        .with_tenants(Arc::clone(&router));
        assert!(
            enforcer.geo_table().unwrap().load().is_some(),
            "table built"
        );
        (enforcer, router)
    }

    type Outcome = (AclVerdict, Option<AclId>, Vec<AclId>, u64);

    fn decide(enforcer: &Enforcer, host: &str, ip: IpAddr) -> Outcome {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::HOST, host.parse().unwrap());
        let conn = ConnectionInfo::new(SocketAddr::new(ip, 40_000));
        let d = enforcer.decide(Some(&conn), "/authorize", None, &headers);
        (d.verdict, d.rule_id, d.monitored, d.version)
    }

    /// The tenant's policy in service, evaluated with the values a lookup gives.
    fn looked_up_then_evaluated(
        router: &TenantRouter,
        geo: &GeoEnricher,
        host: &str,
        ip: IpAddr,
    ) -> Outcome {
        let policy = router.select(host).unwrap().engine().policy();
        assert!(
            policy.geo().is_none(),
            "tenants hold no geo data of their own"
        );
        let info = geo.lookup_direct(ip, GeoNeeds::ALL);
        let mut request = Request::new(RequestScope::Authentication)
            .with_connecting_ip(ip)
            .with_client_ip(ip)
            .with_hostname(host);
        request.set_country(info.country_str());
        request.set_subdivision(info.subdivision.as_deref());
        request.set_asn(info.asn);
        let decision = policy.evaluate(&request);
        let verdict = match decision.verdict() {
            Verdict::Block => AclVerdict::Block,
            Verdict::Allow => AclVerdict::Allow,
            Verdict::Redirect => AclVerdict::Redirect,
            _ => AclVerdict::None,
        };
        (
            verdict,
            decision.rule().map(|r| policy.rule_id(r).clone()),
            decision
                .monitored()
                .iter()
                .map(|&r| policy.rule_id(r).clone())
                .collect(),
            decision.version(),
        )
    }

    /// Decides every address for every tenant through the enforcer and against the lookup;
    /// gives how many decisions each verdict had.
    fn check_all(
        geo_files: (Option<&Path>, Option<&Path>),
        tenants: &[(String, RuleSet)],
        addresses: &[IpAddr],
    ) -> std::collections::HashMap<AclVerdict, usize> {
        let reference = GeoEnricher::open(geo_files.0, geo_files.1).unwrap();
        let (enforcer, router) = platform(
            GeoEnricher::open(geo_files.0, geo_files.1).unwrap(),
            tenants,
        );
        let walks = enforcer.geo().unwrap().stats().tree_walks;
        let mut verdicts = std::collections::HashMap::new();
        for &ip in addresses {
            for (host, _) in tenants {
                let got = decide(&enforcer, host, ip);
                let want = looked_up_then_evaluated(&router, &reference, host, ip);
                assert_eq!(got, want, "{ip} at {host}");
                *verdicts.entry(got.0).or_insert(0) += 1;
            }
        }
        let geo = enforcer.geo().unwrap();
        assert_eq!(
            geo.stats().tree_walks,
            walks,
            "no database walked on the request path"
        );
        // The counter counts: a direct lookup walks.
        geo.lookup_direct(addresses[0], GeoNeeds::ALL);
        assert_eq!(geo.stats().tree_walks, walks + 1);
        verdicts
    }

    #[test]
    fn tenants_decide_every_reference_network_as_look_up_then_evaluate() {
        let city = source_rows(&maxmind("GeoIP2-City-Test.json"));
        let asn = source_rows(&maxmind("GeoLite2-ASN-Test.json"));
        let (mut countries, subdivisions, asns) = all_values(&city, &asn);
        let mut subdivisions = subdivisions;
        let mut asns = asns;
        let text = |c: &[u8; 2]| String::from_utf8(c.to_vec()).unwrap();
        let mut country_names: Vec<String> = countries.drain(..).map(|c| text(&c)).collect();
        for list in [&mut country_names, &mut subdivisions] {
            list.sort();
            list.dedup();
        }
        asns.sort_unstable();
        asns.dedup();
        let tenants = tenants(&country_names, &subdivisions, &asns);
        let addresses: Vec<IpAddr> = city
            .iter()
            .chain(&asn)
            .flat_map(|(net, _)| probes(net).into_iter().map(|(ip, _)| ip))
            .collect();
        let city_db = maxmind("GeoIP2-City-Test.mmdb");
        let asn_db = maxmind("GeoLite2-ASN-Test.mmdb");
        let verdicts = check_all((Some(&city_db), Some(&asn_db)), &tenants, &addresses);
        eprintln!("{verdicts:?}");
        for v in [
            AclVerdict::Block,
            AclVerdict::Allow,
            AclVerdict::Redirect,
            AclVerdict::None,
        ] {
            assert!(
                verdicts.get(&v).copied().unwrap_or(0) > 100,
                "{v:?}: {verdicts:?}"
            );
        }
    }

    #[test]
    fn tenants_decide_random_addresses_over_a_real_size_database_as_look_up_then_evaluate() {
        let dir = generated_databases();
        let (city_db, asn_db) = (dir.join("city.mmdb"), dir.join("asn.mmdb"));
        // The values the generated databases hold (as `mmdb_fixture` writes them), and some
        // they do not.
        let countries: Vec<String> = [
            "AR", "AU", "BR", "CA", "DE", "FR", "GB", "IN", "JP", "MX", "NL", "SE", "US", "ZZ",
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        let subdivisions: Vec<String> = [
            "AU-VIC", "CA-QC", "DE-BY", "FR-75C", "GB-ENG", "IN-KA", "JP-13", "US-NY", "US-TX",
            "ZZ-1",
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        let asns: Vec<u32> = (1..260_000).step_by(3).collect();
        let tenants = tenants(&countries, &subdivisions, &asns);
        let mut rng = Rng::new(0x6d74_6765);
        let addresses: Vec<IpAddr> = (0..40_000u32)
            .map(|k| match k % 3 {
                0 => random_address(&mut rng),
                1 => {
                    let net = mmdb_fixture::v4_network(
                        rng.below(u64::from(mmdb_fixture::V4_NETWORKS)) as u32,
                    );
                    IpAddr::V4(Ipv4Addr::from(
                        u32::from(net.network()) + rng.below(512) as u32,
                    ))
                }
                _ => {
                    let net = mmdb_fixture::v6_network(
                        rng.below(u64::from(mmdb_fixture::V6_NETWORKS)) as u32,
                    );
                    IpAddr::V6(Ipv6Addr::from(
                        u128::from(net.network()) | u128::from(rng.next_u64()),
                    ))
                }
            })
            .collect();
        let verdicts = check_all((Some(&city_db), Some(&asn_db)), &tenants, &addresses);
        eprintln!("{verdicts:?}");
        for v in [
            AclVerdict::Block,
            AclVerdict::Allow,
            AclVerdict::Redirect,
            AclVerdict::None,
        ] {
            // Allow is the rarest: one address in ten is in an ASN network, whose ASN the
            // allow rule lists one time in 21.
            assert!(
                verdicts.get(&v).copied().unwrap_or(0) > 20,
                "{v:?}: {verdicts:?}"
            );
        }
    }

    #[test]
    fn a_tenants_connections_are_refused_by_geo_from_the_table() {
        let tenants = vec![
            (
                "strict.test".to_owned(),
                rule_set(
                    1,
                    vec![record(
                        1,
                        1,
                        BLOCK(),
                        json!({"not_match": {"geo_country_codes": ["GB"]}}),
                    )],
                ),
            ),
            ("open.test".to_owned(), rule_set(1, vec![])),
        ];
        let (enforcer, _router) = platform(
            GeoEnricher::open(Some(&maxmind("GeoIP2-City-Test.mmdb")), None).unwrap(),
            &tenants,
        );
        let walks = enforcer.geo().unwrap().stats().tree_walks;
        let refused = |sni: &str, peer: &str| {
            let tls = netacl_edge::TlsInfo::new(
                Some(sni),
                &"0".repeat(32),
                "t13d1516h2_8daaf6152771_b186095e22b6",
            );
            matches!(
                enforcer.check_connection(peer.parse().unwrap(), Some(&tls)),
                netacl_edge::ConnectionVerdict::Refuse { .. }
            )
        };
        // London is in GB; 2.125.160.216 too; 89.160.20.112 is in Sweden; 203.0.113.1 is in no
        // network (not GB: refused, failing closed).
        assert!(!refused("strict.test", "81.2.69.160"));
        assert!(!refused("strict.test", "2.125.160.216"));
        assert!(refused("strict.test", "89.160.20.112"));
        assert!(refused("strict.test", "203.0.113.1"));
        assert!(!refused("open.test", "89.160.20.112"));
        assert_eq!(enforcer.geo().unwrap().stats().tree_walks, walks);
    }

    /// A City-like database where 192.0.2.0/24 and 2001:db8::/32 are in `country` (none when
    /// empty), subdivision `country`-`sub`.
    fn city_database(country: &str, sub: &str) -> Vec<u8> {
        let mut writer = Writer::builder("NetACL-Test-City")
            .ip_version(IpVersion::V6)
            .description(&[("en", "netacl reload test")])
            .build();
        if !country.is_empty() {
            for net in ["192.0.2.0/24", "2001:db8::/32"] {
                writer
                    .insert_value(
                        net.parse::<mmdb_writer::ipnet::IpNet>().unwrap(),
                        Value::map([
                            ("country", Value::map([("iso_code", Value::from(country))])),
                            (
                                "subdivisions",
                                Value::array([Value::map([("iso_code", Value::from(sub))])]),
                            ),
                        ]),
                    )
                    .unwrap();
            }
        }
        writer.to_bytes().unwrap()
    }

    #[test]
    fn an_empty_database_makes_every_geo_value_missing_in_match_and_not_match() {
        let dir = tempfile::tempdir().unwrap();
        let (city, asn) = (dir.path().join("city.mmdb"), dir.path().join("asn.mmdb"));
        install(&city, &city_database("", ""));
        install(&asn, &asn_database(0));
        let tenants = vec![
            (
                "match.test".to_owned(),
                rule_set(
                    1,
                    vec![
                        record(
                            1,
                            1,
                            BLOCK(),
                            json!({"match": {"geo_country_codes": ["FR"]}}),
                        ),
                        record(
                            2,
                            2,
                            BLOCK(),
                            json!({"match": {"geo_subdivision_codes": ["FR-IDF"]}}),
                        ),
                        record(3, 3, BLOCK(), json!({"match": {"asns": [64500]}})),
                    ],
                ),
            ),
            (
                "country.test".to_owned(),
                rule_set(
                    1,
                    vec![record(
                        4,
                        1,
                        BLOCK(),
                        json!({"not_match": {"geo_country_codes": ["FR"]}}),
                    )],
                ),
            ),
            (
                "subdivision.test".to_owned(),
                rule_set(
                    1,
                    vec![record(
                        5,
                        1,
                        BLOCK(),
                        json!({"not_match": {"geo_subdivision_codes": ["FR-IDF"]}}),
                    )],
                ),
            ),
            (
                "asn.test".to_owned(),
                rule_set(
                    1,
                    vec![record(
                        6,
                        1,
                        BLOCK(),
                        json!({"not_match": {"asns": [64500]}}),
                    )],
                ),
            ),
        ];
        let (enforcer, _router) = platform(
            GeoEnricher::open(Some(&city), Some(&asn)).unwrap(),
            &tenants,
        );
        let stats = enforcer
            .geo_table()
            .unwrap()
            .current()
            .unwrap()
            .table
            .stats();
        assert_eq!((stats.location_ranges, stats.asn_ranges), (0, 0));
        for client in ["192.0.2.7", "2001:db8::1", "10.0.0.1", "::ffff:192.0.2.7"] {
            let ip: IpAddr = client.parse().unwrap();
            // `match` on a missing value does not hold; `not_match` does not exclude.
            assert_eq!(
                decide(&enforcer, "match.test", ip).0,
                AclVerdict::None,
                "{client}"
            );
            for host in ["country.test", "subdivision.test", "asn.test"] {
                assert_eq!(
                    decide(&enforcer, host, ip).0,
                    AclVerdict::Block,
                    "{client} at {host}"
                );
            }
        }
        // The same rules with the address in the databases: FR-IDF, AS 64500.
        install(&city, &city_database("FR", "IDF"));
        install(&asn, &asn_database(64500));
        assert_eq!(enforcer.reload_geo().unwrap(), 2);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(decide(&enforcer, "match.test", ip).0, AclVerdict::Block);
        for host in ["country.test", "subdivision.test", "asn.test"] {
            assert_eq!(decide(&enforcer, host, ip).0, AclVerdict::None, "{host}");
        }
    }

    #[test]
    fn a_file_that_fails_to_load_is_refused_and_the_table_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn.mmdb");
        install(&path, &asn_database(64500));
        let tenants = vec![(
            "a.test".to_owned(),
            rule_set(
                1,
                vec![record(1, 1, BLOCK(), json!({"match": {"asns": [64500]}}))],
            ),
        )];
        let (enforcer, _router) = platform(GeoEnricher::open(None, Some(&path)).unwrap(), &tenants);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(decide(&enforcer, "a.test", ip).0, AclVerdict::Block);
        let before = enforcer.geo_table().unwrap().current().unwrap();
        for broken in [
            {
                let mut b = asn_database(64501);
                b.truncate(b.len() / 2);
                b
            },
            std::fs::read(maxmind("MaxMind-DB-test-broken-search-tree-24.mmdb")).unwrap(),
            std::fs::read(maxmind("GeoIP2-City-Test-Invalid-Node-Count.mmdb")).unwrap(),
        ] {
            install(&path, &broken);
            assert!(enforcer.reload_geo().is_err());
            assert!(Arc::ptr_eq(
                &before,
                &enforcer.geo_table().unwrap().current().unwrap()
            ));
            assert_eq!(decide(&enforcer, "a.test", ip).0, AclVerdict::Block);
        }
        assert_eq!(enforcer.geo().unwrap().stats().reload_failures, 3);
        // The next good file is taken.
        install(&path, &asn_database(64501));
        assert_eq!(enforcer.reload_geo().unwrap(), 1);
        assert!(!Arc::ptr_eq(
            &before,
            &enforcer.geo_table().unwrap().current().unwrap()
        ));
        assert_eq!(decide(&enforcer, "a.test", ip).0, AclVerdict::None);
    }

    /// Rules of version `version` for one tenant: even versions block FR + AS 64500, odd ones
    /// DE + AS 64501 (both signals in one `match`); every other request from outside AS 64999
    /// is redirected.
    fn racing_rules(version: u64) -> RuleSet {
        let (country, asn) = if version.is_multiple_of(2) {
            ("FR", 64500)
        } else {
            ("DE", 64501)
        };
        rule_set(
            version,
            vec![
                record(
                    1,
                    1,
                    BLOCK(),
                    json!({"match": {"geo_country_codes": [country], "asns": [asn]}}),
                ),
                record(
                    2,
                    2,
                    json!({"redirect": true, "redirect_uri": "https://example.com/"}),
                    json!({"not_match": {"asns": [64999]}}),
                ),
            ],
        )
    }

    #[test]
    fn reloads_racing_tenant_rule_changes_yield_consistent_decisions() {
        const ROUNDS: u64 = 40;
        let dir = tempfile::tempdir().unwrap();
        let (city, asn) = (dir.path().join("city.mmdb"), dir.path().join("asn.mmdb"));
        // Database pair k: 192.0.2.0/24 in FR / AS 64500 (k even) or DE / AS 64501 (k odd).
        let pairs = [
            (city_database("FR", "IDF"), asn_database(64500)),
            (city_database("DE", "BE"), asn_database(64501)),
        ];
        install(&city, &pairs[0].0);
        install(&asn, &pairs[0].1);
        let tenants = vec![
            ("racing.test".to_owned(), racing_rules(0)),
            ("quiet.test".to_owned(), racing_rules(0)),
        ];
        let (enforcer, router) = platform(
            GeoEnricher::open(Some(&city), Some(&asn)).unwrap(),
            &tenants,
        );
        let enforcer = Arc::new(enforcer);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        // Each round reloads both files and swaps the table once: generation 2k holds pair k.
        let pair_of = |generation: u32| (generation / 2 % 2) as u64;
        let table_generation = |e: &Enforcer| e.geo_table().unwrap().current().unwrap().generation;
        assert_eq!(table_generation(&enforcer), 0);
        // Rules of version v with database pair k: a block exactly when they agree.
        let expected = |version: u64, pair: u64| {
            if version % 2 == pair {
                AclVerdict::Block
            } else {
                AclVerdict::Redirect
            }
        };

        let barrier = Arc::new(Barrier::new(4));
        let done = Arc::new(AtomicBool::new(false));
        let rule_changes = {
            let (router, barrier) = (Arc::clone(&router), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                for version in 1..=4 * ROUNDS {
                    let report = router.apply([TenantChange::put(
                        "racing.test",
                        ["racing.test"],
                        racing_rules(version),
                    )]);
                    assert_eq!(report.compiled, 1);
                }
            })
        };
        let reloads = {
            let (enforcer, barrier) = (Arc::clone(&enforcer), Arc::clone(&barrier));
            let (city, asn, pairs) = (city.clone(), asn.clone(), pairs.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for round in 1..=ROUNDS {
                    let (c, a) = &pairs[(round % 2) as usize];
                    install(&city, c);
                    install(&asn, a);
                    assert_eq!(enforcer.reload_geo().unwrap(), 2);
                }
            })
        };
        let deciders: Vec<_> = ["racing.test", "quiet.test"]
            .into_iter()
            .map(|host| {
                let (enforcer, barrier, done) = (
                    Arc::clone(&enforcer),
                    Arc::clone(&barrier),
                    Arc::clone(&done),
                );
                std::thread::spawn(move || {
                    barrier.wait();
                    let (mut exact, mut all) = (0u64, 0u64);
                    while !done.load(Ordering::Acquire) {
                        let before = table_generation(&enforcer);
                        let (verdict, _, _, version) = decide(&enforcer, host, ip);
                        let after = table_generation(&enforcer);
                        // One table and one rule set, whichever were in service during the
                        // decision: never rules of one version read against values that are
                        // no table's.
                        let possible: Vec<AclVerdict> = (before..=after)
                            .step_by(2)
                            .map(|g| expected(version, pair_of(g)))
                            .collect();
                        assert!(
                            possible.contains(&verdict),
                            "{host}: rules {version}, tables {before}..={after}: {verdict:?}"
                        );
                        exact += u64::from(before == after);
                        all += 1;
                    }
                    (exact, all)
                })
            })
            .collect();
        rule_changes.join().unwrap();
        reloads.join().unwrap();
        done.store(true, Ordering::Release);
        for decider in deciders {
            let (exact, all) = decider.join().unwrap();
            assert!(exact > 0 && all > 0, "{exact} of {all}");
        }
        // The end: the last rules (version 4 * ROUNDS, even: FR + AS 64500) with the last pair
        // (ROUNDS even: pair 0, FR / AS 64500).
        assert_eq!(table_generation(&enforcer), 2 * ROUNDS as u32);
        assert_eq!(decide(&enforcer, "racing.test", ip).0, AclVerdict::Block);
        assert_eq!(decide(&enforcer, "quiet.test", ip).0, AclVerdict::Block);
        // The rule changes compiled their tenant only, never the other one.
        assert_eq!(router.tenant("quiet.test").unwrap().compiles(), 1);
    }
}

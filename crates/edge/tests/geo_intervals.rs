//! Geo/ASN intervals compiled from the databases ([`GeoEnricher::intervals`]) against "look the
//! address up, then keep the listed values": every network of MaxMind's reference databases
//! (first and last address, in every form the edge can see it), checked against the reader's
//! lookup and against the JSON sources; random addresses over a generated real-size database.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use netacl_edge::geo::{GeoEnricher, GeoInfo, GeoNeeds};
use netacl_eval::synthetic::Rng;
use netacl_eval::{GeoAnswer, GeoIntervals, GeoValues};

#[path = "../../../benches/mmdb_fixture.rs"]
#[allow(dead_code)]
mod mmdb_fixture;

mod maxmind_sources;
use maxmind_sources::{fixture, maxmind, prefix_in_v6, source_rows};

fn as_v6(ip: IpAddr) -> u128 {
    u128::from(maxmind_sources::as_v6(ip))
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
    let dir = tempfile::tempdir().unwrap();
    mmdb_fixture::write_databases(dir.path());
    let geo = GeoEnricher::open(
        Some(&dir.path().join("city.mmdb")),
        Some(&dir.path().join("asn.mmdb")),
    )
    .unwrap();
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
    fn asn_database(asn: u32) -> Vec<u8> {
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
    fn install(path: &Path, bytes: &[u8]) {
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

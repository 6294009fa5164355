//! Geo/ASN enrichment: the project's fixtures (generated here from `testdata/mmdb/*.json` with
//! mmdb-writer, and compared with the committed `.mmdb` files), MaxMind's own test databases
//! checked against their source JSON, broken files, and reloading.
//!
//! Regenerate the committed fixtures with
//! `NETACL_REGEN_MMDB=1 cargo test --workspace --test edge geo_enrichment::committed_fixtures`.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use ipnet::IpNet;
use mmdb_writer::{IpVersion, Value, Writer};
use netacl_edge::geo::{GeoEnricher, GeoError, GeoInfo, GeoNeeds};

use crate::maxmind_sources::{as_v6, fixture, maxmind, prefix_in_v6, source_rows};

/// JSON → MMDB value, with integers as uint32 (as MaxMind writes geoname ids and ASNs) when
/// they fit.
fn to_value(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => u32::try_from(u).map_or(Value::U64(u), Value::U32),
            (None, Some(f)) => Value::Double(f),
            (None, None) => panic!("unsupported number {n}"),
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(to_value).collect()),
        serde_json::Value::Object(map) => {
            Value::map(map.iter().map(|(k, v)| (k.clone(), to_value(v))))
        }
        serde_json::Value::Null => panic!("null has no MMDB form"),
    }
}

/// The fixture generator: an IPv6 database (IPv4 reachable at `::/96` and `::ffff:0:0/96`)
/// with a fixed build time, so the bytes are reproducible.
fn build_mmdb(database_type: &str, rows: &[(IpNet, serde_json::Value)]) -> Vec<u8> {
    let mut writer = Writer::builder(database_type)
        .ip_version(IpVersion::V6)
        .description(&[("en", "netacl test fixture; see testdata/mmdb/README.md")])
        .build_epoch(SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600))
        .build();
    for (network, record) in rows {
        writer.insert_value(*network, to_value(record)).unwrap();
    }
    writer.to_bytes().unwrap()
}

const CITY_TYPE: &str = "NetACL-Test-City";
const ASN_TYPE: &str = "NetACL-Test-ASN";

#[test]
fn committed_fixtures_match_the_generator() {
    for (source, target, database_type) in [
        ("city-source.json", "netacl-test-city.mmdb", CITY_TYPE),
        ("asn-source.json", "netacl-test-asn.mmdb", ASN_TYPE),
    ] {
        let bytes = build_mmdb(database_type, &source_rows(&fixture(source)));
        if std::env::var_os("NETACL_REGEN_MMDB").is_some() {
            std::fs::write(fixture(target), &bytes).unwrap();
        }
        let committed = std::fs::read(fixture(target)).unwrap();
        assert!(
            committed == bytes,
            "{target} differs from what {source} generates; regenerate with NETACL_REGEN_MMDB=1"
        );
    }
}

/// What a source file says an address gets: the most specific network containing it, the
/// later row winning among equals (as insertion order does in the writer).
#[derive(Debug, Default, PartialEq, Eq)]
struct Expected {
    country: Option<String>,
    subdivision: Option<String>,
    asn: Option<u32>,
}

fn expected_at(rows: &[(IpNet, serde_json::Value)], ip: IpAddr) -> Expected {
    let best = rows
        .iter()
        .filter(|(net, _)| contains(net, ip))
        .max_by_key(|(net, _)| prefix_in_v6(net));
    let Some((_, record)) = best else {
        return Expected::default();
    };
    let country = record["country"]["iso_code"].as_str().map(str::to_owned);
    let subdivision = match (&country, record["subdivisions"][0]["iso_code"].as_str()) {
        (Some(c), Some(s)) => Some(format!("{c}-{s}")),
        _ => None,
    };
    Expected {
        country,
        subdivision,
        asn: record["autonomous_system_number"]
            .as_u64()
            .map(|n| u32::try_from(n).unwrap()),
    }
}

fn contains(net: &IpNet, ip: IpAddr) -> bool {
    let bits = u128::from(as_v6(ip));
    let base = u128::from(as_v6(net.network()));
    let len = prefix_in_v6(net);
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    bits & mask == base & mask
}

fn observed(info: &GeoInfo) -> Expected {
    Expected {
        country: info.country_str().map(str::to_owned),
        subdivision: info.subdivision.map(|s| s.to_string()),
        asn: info.asn,
    }
}

/// For every network of both sources, looks up its first address (and its last) and compares
/// with what the sources say. Returns how many addresses were checked.
fn check_against_sources(
    geo: &GeoEnricher,
    location_rows: &[(IpNet, serde_json::Value)],
    asn_rows: &[(IpNet, serde_json::Value)],
) -> usize {
    let mut checked = 0;
    for (net, _) in location_rows.iter().chain(asn_rows) {
        for ip in [net.network(), net.broadcast()] {
            let info = geo.lookup(ip, GeoNeeds::ALL);
            let location = expected_at(location_rows, ip);
            let asn = expected_at(asn_rows, ip);
            let want = Expected {
                country: location.country,
                subdivision: location.subdivision,
                asn: asn.asn,
            };
            assert_eq!(observed(&info), want, "{ip} (network {net})");
            checked += 1;
        }
    }
    checked
}

#[test]
fn fixture_lookups_give_the_source_answers() {
    let geo = GeoEnricher::open(
        Some(&fixture("netacl-test-city.mmdb")),
        Some(&fixture("netacl-test-asn.mmdb")),
    )
    .unwrap();
    let city = source_rows(&fixture("city-source.json"));
    let asn = source_rows(&fixture("asn-source.json"));
    assert!(check_against_sources(&geo, &city, &asn) >= 80);
    assert_eq!(geo.stats().lookup_errors, 0);

    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let info = geo.lookup(ip("198.51.100.7"), GeoNeeds::ALL);
    assert_eq!(info.country, Some(*b"US"));
    assert_eq!(info.subdivision.unwrap().as_str(), "US-NY");
    assert_eq!(info.asn, Some(64500));
    // The first (largest) subdivision is the one reported.
    let info = geo.lookup(ip("203.0.113.70"), GeoNeeds::ALL);
    assert_eq!(info.subdivision.unwrap().as_str(), "GB-SCT");
    // A 32-bit ASN.
    assert_eq!(
        geo.lookup(ip("10.10.1.1"), GeoNeeds::ALL).asn,
        Some(4_200_000_000)
    );
    // A more specific network carved out of a larger one.
    let carved = geo.lookup(ip("100.70.128.9"), GeoNeeds::ALL);
    assert_eq!(carved.country_str(), Some("PT"));
    assert_eq!(carved.asn, Some(64506));
    assert_eq!(
        geo.lookup(ip("100.70.129.9"), GeoNeeds::ALL).country_str(),
        Some("ES")
    );
    // registered_country only: no country.
    let registered = geo.lookup(ip("100.69.1.1"), GeoNeeds::ALL);
    assert_eq!((registered.country, registered.subdivision), (None, None));
    // Not in the databases.
    assert_eq!(geo.lookup(ip("8.8.8.8"), GeoNeeds::ALL), GeoInfo::default());
    assert_eq!(geo.lookup(ip("2600::1"), GeoNeeds::ALL), GeoInfo::default());
    // IPv6.
    let v6 = geo.lookup(ip("2001:db8:5::1"), GeoNeeds::ALL);
    assert_eq!(
        (
            v6.country_str(),
            v6.subdivision.map(|s| s.to_string()),
            v6.asn
        ),
        (Some("SE"), Some("SE-AB".to_owned()), Some(64511))
    );
}

#[test]
fn ipv4_mapped_addresses_are_looked_up_as_ipv4_and_needs_are_respected() {
    let geo = GeoEnricher::open(
        Some(&fixture("netacl-test-city.mmdb")),
        Some(&fixture("netacl-test-asn.mmdb")),
    )
    .unwrap();
    let v4: IpAddr = "192.0.2.200".parse().unwrap();
    let mapped: IpAddr = "::ffff:192.0.2.200".parse().unwrap();
    let direct = geo.lookup(v4, GeoNeeds::ALL);
    assert_eq!(direct.country_str(), Some("CA"));
    assert_eq!(geo.lookup(mapped, GeoNeeds::ALL), direct);

    let country_only = geo.lookup(
        v4,
        GeoNeeds {
            country: true,
            ..GeoNeeds::NONE
        },
    );
    assert_eq!(
        country_only,
        GeoInfo {
            country: Some(*b"CA"),
            ..GeoInfo::default()
        }
    );
    let subdivision_only = geo.lookup(
        v4,
        GeoNeeds {
            subdivision: true,
            ..GeoNeeds::NONE
        },
    );
    assert_eq!(subdivision_only.country, None);
    assert_eq!(subdivision_only.subdivision.unwrap().as_str(), "CA-QC");
    let asn_only = geo.lookup(
        v4,
        GeoNeeds {
            asn: true,
            ..GeoNeeds::NONE
        },
    );
    assert_eq!(
        asn_only,
        GeoInfo {
            asn: Some(64504),
            ..GeoInfo::default()
        }
    );
    assert_eq!(geo.lookup(v4, GeoNeeds::NONE), GeoInfo::default());

    // Only an ASN database: location signals are absent.
    let asn_db = GeoEnricher::open(None, Some(&fixture("netacl-test-asn.mmdb"))).unwrap();
    assert_eq!(
        asn_db.lookup(v4, GeoNeeds::ALL),
        GeoInfo {
            asn: Some(64504),
            ..GeoInfo::default()
        }
    );
    let infos = geo.databases();
    assert_eq!(infos.len(), 2);
    assert_eq!(infos[0].database_type, CITY_TYPE);
    assert_eq!(infos[1].database_type, ASN_TYPE);
}

#[test]
fn maxmind_test_databases_match_their_source_json() {
    let geo = GeoEnricher::open(
        Some(&maxmind("GeoIP2-City-Test.mmdb")),
        Some(&maxmind("GeoLite2-ASN-Test.mmdb")),
    )
    .unwrap();
    let city = source_rows(&maxmind("GeoIP2-City-Test.json"));
    let asn = source_rows(&maxmind("GeoLite2-ASN-Test.json"));
    let checked = check_against_sources(&geo, &city, &asn);
    assert!(checked > 1500, "checked {checked}");
    assert_eq!(geo.stats().lookup_errors, 0);
    // A known answer, by hand: London.
    let info = geo.lookup("81.2.69.160".parse().unwrap(), GeoNeeds::ALL);
    assert_eq!(info.country_str(), Some("GB"));
    assert_eq!(info.subdivision.unwrap().as_str(), "GB-ENG");
}

#[test]
fn maxmind_country_database_serves_countries() {
    let geo = GeoEnricher::open(Some(&maxmind("GeoLite2-Country-Test.mmdb")), None).unwrap();
    let info = geo.lookup("81.2.69.160".parse().unwrap(), GeoNeeds::ALL);
    assert_eq!(info.country_str(), Some("GB"));
    assert_eq!(info.subdivision, None);
}

fn assert_refused(path: &Path) -> GeoError {
    match GeoEnricher::open(Some(path), None) {
        Ok(geo) => {
            // Accepted: then no lookup may crash; errors must be counted, not raised.
            for ip in ["1.1.1.1", "81.2.69.160", "2001:218::1", "::1"] {
                let _ = geo.lookup(ip.parse().unwrap(), GeoNeeds::ALL);
            }
            panic!("{} was accepted", path.display());
        }
        Err(error) => error,
    }
}

#[test]
fn broken_databases_are_refused_with_a_clear_error() {
    let error = assert_refused(&maxmind("GeoIP2-City-Test-Invalid-Node-Count.mmdb"));
    let message = error.to_string();
    assert!(
        message.contains("GeoIP2-City-Test-Invalid-Node-Count.mmdb")
            && message.contains("search tree extends beyond"),
        "{message}"
    );
}

#[test]
fn broken_search_tree_is_refused() {
    // The root's right record points back to the root: every address from 128.0.0.0 up would
    // run out of bits on a node. Refused at load, before any lookup.
    let error = assert_refused(&maxmind("MaxMind-DB-test-broken-search-tree-24.mmdb"));
    assert!(matches!(error, GeoError::Corrupt { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("broken-search-tree") && message.contains("cycle"),
        "{message}"
    );
}

#[test]
fn records_of_the_wrong_shape_answer_absent_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.mmdb");
    let mut writer = Writer::builder("NetACL-Odd")
        .ip_version(IpVersion::V6)
        .description(&[("en", "records of the wrong shape")])
        .build();
    let net = |s: &str| s.parse::<IpNet>().unwrap();
    writer
        .insert_value(net("192.0.2.0/25"), Value::String("not a map".to_owned()))
        .unwrap();
    writer
        .insert_value(
            net("192.0.2.128/25"),
            Value::map([
                ("country", Value::map([("iso_code", Value::U32(7))])),
                ("autonomous_system_number", Value::String("AS1".to_owned())),
            ]),
        )
        .unwrap();
    writer
        .insert_value(
            net("198.51.100.0/24"),
            Value::map([
                ("country", Value::map([("iso_code", Value::from("USA"))])),
                (
                    "subdivisions",
                    Value::array([Value::map([("iso_code", Value::from("TOOLONG"))])]),
                ),
            ]),
        )
        .unwrap();
    std::fs::write(&path, writer.to_bytes().unwrap()).unwrap();
    let geo = GeoEnricher::open(Some(&path), Some(&path)).unwrap();
    for ip in ["192.0.2.1", "192.0.2.200"] {
        assert_eq!(
            geo.lookup(ip.parse().unwrap(), GeoNeeds::ALL),
            GeoInfo::default()
        );
    }
    // Two lookups, each failing in both databases.
    assert_eq!(geo.stats().lookup_errors, 4);
    // Well-formed but invalid codes are absent, not errors.
    assert_eq!(
        geo.lookup("198.51.100.1".parse().unwrap(), GeoNeeds::ALL),
        GeoInfo::default()
    );
    assert_eq!(geo.stats().lookup_errors, 4);
}

#[test]
fn truncated_and_garbage_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture("netacl-test-city.mmdb")).unwrap();
    let path = dir.path().join("db.mmdb");
    let mut cuts: Vec<usize> = (0..24).map(|i| good.len() * i / 24).collect();
    cuts.extend([good.len() - 1, good.len() - 20, 1]);
    for cut in cuts {
        std::fs::write(&path, &good[..cut]).unwrap();
        assert_refused(&path);
    }
    // Garbage, and garbage ending with the metadata marker.
    std::fs::write(&path, vec![0x5a; 4096]).unwrap();
    assert!(matches!(assert_refused(&path), GeoError::Format { .. }));
    let mut marker = vec![0xffu8; 100];
    marker.extend_from_slice(b"\xab\xcd\xefMaxMind.com");
    marker.extend_from_slice(&[0xe0, 0xff, 0xff, 0xff]);
    std::fs::write(&path, &marker).unwrap();
    assert_refused(&path);
    // The metadata of a good file behind a short, bogus tree.
    let meta_at = good
        .windows(14)
        .rposition(|w| w == b"\xab\xcd\xefMaxMind.com")
        .unwrap();
    std::fs::write(&path, &good[meta_at..]).unwrap();
    let message = assert_refused(&path).to_string();
    assert!(message.contains("search tree"), "{message}");
    // Missing file.
    assert!(matches!(
        assert_refused(&dir.path().join("missing.mmdb")),
        GeoError::Io { .. }
    ));
}

#[test]
fn flipped_bytes_never_crash_loading_or_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture("netacl-test-city.mmdb")).unwrap();
    let path = dir.path().join("db.mmdb");
    let probes: Vec<IpAddr> = source_rows(&fixture("city-source.json"))
        .iter()
        .map(|(net, _)| net.network())
        .collect();
    // Deterministic spread of positions over the whole file (tree, data and metadata).
    for step in 0..200usize {
        let mut bytes = good.clone();
        let at = (step * 7919) % bytes.len();
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(geo) = GeoEnricher::open(Some(&path), None) {
            for ip in &probes {
                let _ = geo.lookup(*ip, GeoNeeds::ALL);
            }
        }
    }
}

/// Writes `bytes` beside `path` and renames it over `path`, as a database update should.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn asn_rows_with_offset(offset: u32) -> Vec<(IpNet, serde_json::Value)> {
    let mut rows = source_rows(&fixture("asn-source.json"));
    for (_, record) in &mut rows {
        let n = record["autonomous_system_number"].as_u64().unwrap();
        record["autonomous_system_number"] =
            serde_json::json!(u32::try_from(n).unwrap().wrapping_add(offset));
    }
    rows
}

#[test]
fn reload_swaps_in_a_new_file_and_keeps_the_old_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("asn.mmdb");
    std::fs::copy(fixture("netacl-test-asn.mmdb"), &path).unwrap();
    let geo = GeoEnricher::open(None, Some(&path)).unwrap();
    let ip: IpAddr = "198.51.100.1".parse().unwrap();
    let asn_needs = GeoNeeds {
        asn: true,
        ..GeoNeeds::NONE
    };
    assert_eq!(geo.lookup(ip, asn_needs).asn, Some(64500));

    replace(&path, &build_mmdb(ASN_TYPE, &asn_rows_with_offset(1000)));
    geo.reload().unwrap();
    assert_eq!(geo.lookup(ip, asn_needs).asn, Some(65500));
    assert_eq!(geo.stats().reloads, 1);

    replace(&path, b"this is not a MaxMind database");
    let error = geo.reload().unwrap_err();
    assert!(error.to_string().contains("asn.mmdb"), "{error}");
    assert_eq!(geo.lookup(ip, asn_needs).asn, Some(65500));
    assert_eq!(geo.stats().reload_failures, 1);
    // The broken file is not retried until it changes.
    assert_eq!(geo.reload_changed().unwrap(), 0);
    assert_eq!(geo.stats().reload_failures, 1);

    // A removed file keeps the database in service too.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(geo.reload_changed().unwrap(), 0);
    assert!(geo.reload().is_err());
    assert_eq!(geo.lookup(ip, asn_needs).asn, Some(65500));

    replace(&path, &build_mmdb(ASN_TYPE, &asn_rows_with_offset(2000)));
    assert_eq!(geo.reload_changed().unwrap(), 1);
    assert_eq!(geo.lookup(ip, asn_needs).asn, Some(66500));
}

#[tokio::test]
async fn watcher_reloads_changed_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("asn.mmdb");
    std::fs::copy(fixture("netacl-test-asn.mmdb"), &path).unwrap();
    let geo = GeoEnricher::open(None, Some(&path)).unwrap();
    let watcher = geo.spawn_watcher(Duration::from_millis(20));
    let ip: IpAddr = "2001:db8::1".parse().unwrap();
    assert_eq!(geo.lookup(ip, GeoNeeds::ALL).asn, Some(64510));

    replace(&path, &build_mmdb(ASN_TYPE, &asn_rows_with_offset(7)));
    let mut seen = None;
    for _ in 0..500 {
        seen = geo.lookup(ip, GeoNeeds::ALL).asn;
        if seen == Some(64517) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen, Some(64517));

    replace(&path, &[0u8; 64]);
    for _ in 0..500 {
        if geo.stats().reload_failures > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(geo.stats().reload_failures, 1);
    assert_eq!(geo.lookup(ip, GeoNeeds::ALL).asn, Some(64517));

    // Dropping every handle ends the task.
    drop(geo);
    tokio::time::timeout(Duration::from_secs(10), watcher)
        .await
        .expect("watcher ended")
        .unwrap();
}

#[test]
fn cached_answers_equal_fresh_ones_across_threads() {
    let city = fixture("netacl-test-city.mmdb");
    let asn = fixture("netacl-test-asn.mmdb");
    let probes: Vec<IpAddr> = source_rows(&fixture("city-source.json"))
        .iter()
        .chain(source_rows(&fixture("asn-source.json")).iter())
        .flat_map(|(net, _)| [net.network(), net.broadcast()])
        .collect();
    // Answers of a fresh enricher, each address looked up once (nothing cached before).
    let expected: Vec<GeoInfo> = probes
        .iter()
        .map(|ip| {
            let fresh = GeoEnricher::open(Some(&city), Some(&asn)).unwrap();
            fresh.lookup(*ip, GeoNeeds::ALL)
        })
        .collect();
    let shared = GeoEnricher::open(Some(&city), Some(&asn)).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4usize {
            let (shared, probes, expected) = (&shared, &probes, &expected);
            scope.spawn(move || {
                for round in 0..50 {
                    for (i, ip) in probes.iter().enumerate().skip((t + round) % 3) {
                        assert_eq!(shared.lookup(*ip, GeoNeeds::ALL), expected[i], "{ip}");
                        let country_only = shared.lookup(
                            *ip,
                            GeoNeeds {
                                country: true,
                                ..GeoNeeds::NONE
                            },
                        );
                        assert_eq!(country_only.country, expected[i].country, "{ip}");
                        assert_eq!(country_only.subdivision, None);
                    }
                }
            });
        }
    });
    assert_eq!(shared.stats().lookup_errors, 0);
}

// ---------------------------------------------------------------------------------------
// Hostile databases: pointer loops and deep nesting. A stack overflow aborts the process
// (`catch_unwind` cannot catch it), so these tests run their body in a child process of this
// test binary and report how the child ended.

/// Runs the test `name` (a test of this binary) again in a child process, where `body` runs;
/// the parent asserts that the child ended normally.
fn in_child_process(name: &str, body: impl FnOnce()) {
    const CHILD: &str = "NETACL_GEO_HOSTILE_CHILD";
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    // The test's path within the binary: this module's path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let path = if module.is_empty() {
        name.to_owned()
    } else {
        format!("{module}::{name}")
    };
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([path.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the child running {name} ended with {:?}:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "the child did not run {name}:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// MaxMind DB encoding of the few values the hostile files need (control byte: type in the
/// top three bits, size in the low five; extended types after a zero type).
mod encode {
    pub fn string(text: &str) -> Vec<u8> {
        assert!(text.len() < 29);
        let mut out = vec![0x40 | text.len() as u8];
        out.extend_from_slice(text.as_bytes());
        out
    }
    pub fn map(entries: usize) -> Vec<u8> {
        assert!(entries < 29);
        vec![0xe0 | entries as u8]
    }
    pub fn array(items: usize) -> Vec<u8> {
        assert!(items < 29);
        vec![items as u8, 11 - 7]
    }
    pub fn uint16(value: u16) -> Vec<u8> {
        let mut out = vec![0xa0 | 2];
        out.extend_from_slice(&value.to_be_bytes());
        out
    }
    pub fn uint32(value: u32) -> Vec<u8> {
        let mut out = vec![0xc0 | 4];
        out.extend_from_slice(&value.to_be_bytes());
        out
    }
    pub fn uint64(value: u64) -> Vec<u8> {
        let mut out = vec![8, 9 - 7];
        out.extend_from_slice(&value.to_be_bytes());
        out
    }
    /// A pointer to `offset` (below 2048) in its section.
    pub fn pointer(offset: u16) -> Vec<u8> {
        assert!(offset < 2048);
        vec![0x20 | (offset >> 8) as u8, offset as u8]
    }
}

const METADATA_MARKER: &[u8] = b"\xab\xcd\xefMaxMind.com";

/// The smallest IPv4 database: one node whose two records both point at offset 0 of `data`;
/// `extra_metadata` is appended to the metadata map as one more entry.
fn one_node_database(data: &[u8], extra_metadata: Option<(&str, Vec<u8>)>) -> Vec<u8> {
    use encode::*;
    let record = 1u32 + 16; // node_count + 16 + data offset 0
    let mut bytes = Vec::new();
    for _ in 0..2 {
        bytes.extend_from_slice(&record.to_be_bytes()[1..]);
    }
    bytes.extend_from_slice(&[0; 16]);
    bytes.extend_from_slice(data);
    bytes.extend_from_slice(METADATA_MARKER);
    bytes.extend(map(9 + usize::from(extra_metadata.is_some())));
    for (key, value) in [
        ("binary_format_major_version", uint16(2)),
        ("binary_format_minor_version", uint16(0)),
        ("build_epoch", uint64(1_767_225_600)),
        ("database_type", string("NetACL-Hostile")),
        (
            "description",
            [map(1), string("en"), string("hostile")].concat(),
        ),
        ("ip_version", uint16(4)),
        ("languages", array(0)),
        ("node_count", uint32(1)),
        ("record_size", uint16(24)),
    ]
    .into_iter()
    .chain(extra_metadata)
    {
        bytes.extend(string(key));
        bytes.extend(value);
    }
    bytes
}

/// A file whose metadata is a map holding a pointer back to itself: decoding it recursed until
/// the stack overflowed (maxminddb 0.26). It lacks the required metadata fields.
fn tiny_metadata_pointer_loop() -> Vec<u8> {
    let mut bytes = METADATA_MARKER.to_vec();
    bytes.extend(encode::map(1));
    bytes.extend(encode::string("a"));
    bytes.extend(encode::pointer(0));
    bytes
}

/// Complete metadata with one more member, a pointer back to the metadata map itself.
fn metadata_pointer_loop() -> Vec<u8> {
    one_node_database(&encode::uint32(7), Some(("loop", encode::pointer(0))))
}

/// A well-formed tree and metadata whose one record is a map holding a pointer to itself.
fn record_pointer_loop() -> Vec<u8> {
    let mut data = encode::map(1);
    data.extend(encode::string("a"));
    data.extend(encode::pointer(0));
    one_node_database(&data, None)
}

/// A record nested 100,000 arrays deep (200 KB): no pointer, just depth.
fn deeply_nested_record() -> Vec<u8> {
    let mut data = Vec::new();
    for _ in 0..100_000 {
        data.extend(encode::array(1));
    }
    data.extend(encode::uint32(7));
    one_node_database(&data, None)
}

/// Each hostile file, what it is, and a word its refusal must say.
fn hostile_databases() -> [(&'static str, Vec<u8>, &'static str); 4] {
    [
        (
            "tiny metadata pointer loop",
            tiny_metadata_pointer_loop(),
            "missing field",
        ),
        ("metadata pointer loop", metadata_pointer_loop(), "cyclic"),
        ("record pointer loop", record_pointer_loop(), "cyclic"),
        (
            "record nested 100,000 deep",
            deeply_nested_record(),
            "depth",
        ),
    ]
}

#[test]
fn the_hostile_files_are_what_they_claim() {
    let files = hostile_databases();
    // The first is tiny, as in the report (a few dozen bytes).
    assert!(files[0].1.len() < 64, "{}", files[0].1.len());
    // The others are well-formed around their hostile part: a good record in the same frame
    // loads and answers.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.mmdb");
    let mut asn = encode::map(1);
    asn.extend(encode::string("autonomous_system_number"));
    asn.extend(encode::uint32(64_496));
    std::fs::write(&path, one_node_database(&asn, None)).unwrap();
    let geo = GeoEnricher::open(None, Some(&path)).unwrap();
    for ip in ["1.1.1.1", "200.1.1.1"] {
        assert_eq!(
            geo.lookup(ip.parse().unwrap(), GeoNeeds::ALL).asn,
            Some(64_496)
        );
    }
    for (_, bytes, _) in &files[1..] {
        assert_eq!(&bytes[..6], &[0, 0, 17, 0, 0, 17]);
        assert_eq!(&bytes[6..22], &[0; 16]);
    }
}

#[test]
fn hostile_databases_are_refused_at_start() {
    in_child_process("hostile_databases_are_refused_at_start", || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hostile.mmdb");
        for (what, bytes, says) in hostile_databases() {
            std::fs::write(&path, bytes).unwrap();
            for (location, asn) in [(Some(path.as_path()), None), (None, Some(path.as_path()))] {
                match GeoEnricher::open(location, asn) {
                    Err(error) => {
                        let message = error.to_string();
                        assert!(
                            message.contains("hostile.mmdb") && message.contains(says),
                            "{what}: {message}"
                        );
                    }
                    Ok(geo) => {
                        for ip in ["1.1.1.1", "200.1.1.1"] {
                            let _ = geo.lookup(ip.parse().unwrap(), GeoNeeds::ALL);
                        }
                        panic!("{what}: accepted");
                    }
                }
            }
        }
    });
}

#[test]
fn hostile_databases_are_refused_on_reload_and_the_old_one_stays() {
    in_child_process(
        "hostile_databases_are_refused_on_reload_and_the_old_one_stays",
        || {
            let dir = tempfile::tempdir().unwrap();
            let city = dir.path().join("city.mmdb");
            let asn = dir.path().join("asn.mmdb");
            std::fs::copy(fixture("netacl-test-city.mmdb"), &city).unwrap();
            std::fs::copy(fixture("netacl-test-asn.mmdb"), &asn).unwrap();
            let geo = GeoEnricher::open(Some(&city), Some(&asn)).unwrap();
            let ip: IpAddr = "198.51.100.7".parse().unwrap();
            let expected = geo.lookup(ip, GeoNeeds::ALL);
            assert_eq!(expected.country_str(), Some("US"));
            assert_eq!(expected.asn, Some(64500));
            let mut failures = 0;
            for (what, bytes, _) in hostile_databases() {
                for path in [&city, &asn] {
                    replace(path, &bytes);
                    let error = geo.reload_changed().expect_err(what);
                    failures += 1;
                    assert!(
                        error.to_string().contains(path.to_str().unwrap()),
                        "{what}: {error}"
                    );
                    assert_eq!(geo.stats().reload_failures, failures);
                    // The old databases answer, for a cached and a new address alike.
                    assert_eq!(geo.lookup(ip, GeoNeeds::ALL), expected, "{what}");
                    let other = geo.lookup("203.0.113.9".parse().unwrap(), GeoNeeds::ALL);
                    assert_eq!(
                        other,
                        geo.lookup("203.0.113.9".parse().unwrap(), GeoNeeds::ALL)
                    );
                }
            }
            assert_eq!(geo.stats().reloads, 0);
            // A good file is taken again after all that.
            replace(
                &asn,
                &std::fs::read(fixture("netacl-test-asn.mmdb")).unwrap(),
            );
            assert_eq!(geo.reload_changed().unwrap(), 1);
            assert_eq!(geo.stats().reloads, 1);
            assert_eq!(geo.lookup(ip, GeoNeeds::ALL), expected);
        },
    );
}

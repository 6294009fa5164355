//! The policy inputs `netacl-pingora` shares with `netacl edge` beyond the rules: MaxMind's
//! reference databases compiled into the policy (`--geoip-city`, `--geoip-asn`), and managed
//! lists from files (`--managed-list NAME=PATH`), followed when they change.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::{get_from, local, record, rules, start, Upstream, ID1, ID2};

/// MaxMind's test databases in the shared reference data (read in place, never copied).
fn maxmind(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference-data/maxmind")
        .join(name)
}

/// Expected answers from the databases' JSON sources: 81.2.69.144/124 is GB in
/// GeoIP2-City-Test, 1.0.0.0/24 is AS 15169 in GeoLite2-ASN-Test. The clients are given by a
/// trusted proxy (127.0.0.5), the only way a loopback test can be one of those addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn countries_and_asns_come_from_the_geoip_databases() {
    let upstream = Upstream::start().await;
    let policy = rules(&[
        record(
            ID1,
            1,
            r#"{"block":true}"#,
            r#"{"geo_country_codes":["GB"]}"#,
        ),
        record(
            ID2,
            2,
            r#"{"redirect":true,"redirect_uri":"https://example.com/as15169"}"#,
            r#"{"asns":[15169]}"#,
        ),
    ]);
    let (city, asn) = (
        maxmind("GeoIP2-City-Test.mmdb"),
        maxmind("GeoLite2-ASN-Test.mmdb"),
    );
    let proxy = start(
        upstream.addr,
        &policy,
        None,
        &[
            "--trusted-proxy",
            "127.0.0.5/32",
            "--geoip-city",
            city.to_str().expect("utf-8 path"),
            "--geoip-asn",
            asn.to_str().expect("utf-8 path"),
        ],
    );
    let from = |client: &'static str| [("x-forwarded-for", client)];
    let gb = get_from(local(5), proxy.http, "/", "app.test", &from("81.2.69.150")).await;
    assert_eq!(gb.status, 403, "GB is blocked");
    let google = get_from(local(5), proxy.http, "/", "app.test", &from("1.0.0.7")).await;
    assert_eq!(google.status, 302, "AS 15169 is redirected");
    assert_eq!(
        google.header("location"),
        Some("https://example.com/as15169")
    );
    let elsewhere = get_from(local(5), proxy.http, "/", "app.test", &from("203.0.113.9")).await;
    assert_eq!(
        (elsewhere.status, elsewhere.body.as_str()),
        (200, "upstream"),
        "an address in neither database matches neither rule"
    );
    assert_eq!(upstream.hits(), 1);
}

/// A database that does not load is refused at start, naming it (the proxy does not serve
/// without the geo signals its rules read).
#[test]
fn a_geoip_database_that_does_not_load_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("city.mmdb");
    std::fs::write(&bad, b"not a MaxMind database").expect("write");
    let rules_file = dir.path().join("rules.json");
    std::fs::write(&rules_file, "[]").expect("write");
    let output = std::process::Command::new(crate::support::BIN)
        .args(["--upstream", "127.0.0.1:9", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "off", "--rules-file"])
        .arg(&rules_file)
        .arg("--geoip-city")
        .arg(&bad)
        .output()
        .expect("run netacl-pingora");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("GeoIP"), "{stderr}");
}

/// A managed list from a file blocks its entries; a changed file is put in force within 5 s;
/// a malformed file is refused at start (naming the line) and, once running, leaves the last
/// good content in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_list_files_are_enforced_and_followed() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("tor.txt");
    std::fs::write(&list, "# exits\n127.0.0.2\n").expect("write");
    let policy = rules(&[record(
        ID1,
        1,
        r#"{"block":true}"#,
        r#"{"auth0_managed":["auth0.tor"]}"#,
    )]);
    let flag = format!("auth0.tor={}", list.display());
    let proxy = start(upstream.addr, &policy, None, &["--managed-list", &flag]);
    let status = |x: u8| {
        let http = proxy.http;
        async move { get_from(local(x), http, "/", "app.test", &[]).await.status }
    };
    assert_eq!(status(2).await, 403, "a listed client is blocked");
    assert_eq!(status(3).await, 200);

    // The file changes (a rename, as a deploy writes it): 127.0.0.3 listed, 127.0.0.2 not.
    let tmp = dir.path().join("tor.tmp");
    std::fs::write(&tmp, "127.0.0.3 # new exit\n").expect("write");
    std::fs::rename(&tmp, &list).expect("rename");
    let deadline = Instant::now() + Duration::from_secs(5);
    while status(3).await != 403 {
        assert!(
            Instant::now() < deadline,
            "the new list in force within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status(2).await, 200, "the old entry left with the old file");

    // A malformed file is logged and ignored: the last good list stays in force.
    std::fs::write(&tmp, "127.0.0.3\n127.0.0.300\n").expect("write");
    std::fs::rename(&tmp, &list).expect("rename");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(status(3).await, 403);
    assert_eq!(status(2).await, 200);

    // At start, the same malformed file is refused with its line.
    let output = std::process::Command::new(crate::support::BIN)
        .args(["--upstream", "127.0.0.1:9", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "off", "--rules-file"])
        .arg(&proxy.rules)
        .args(["--managed-list", &flag])
        .output()
        .expect("run netacl-pingora");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("auth0.tor") && stderr.contains("line 2"),
        "{stderr}"
    );
}

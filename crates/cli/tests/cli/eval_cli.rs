//! `netacl eval` and `netacl bench` through the real binary: the README's quick tour, the
//! rule-file errors (exit status 2, naming the rule and the property path), request-line errors,
//! the envelope form, the limit flags, and the bench's JSON report.

use std::process::{Command, Output};

use serde_json::{json, Value};

fn netacl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_netacl"))
}

fn rules() -> Value {
    json!([
        {"id": "acl_1111111111111111111111", "description": "block a bad network outside the US",
         "active": true, "priority": 10,
         "rule": {"action": {"block": true}, "scope": "tenant",
                  "match": {"ipv4_cidrs": ["198.51.100.0/24"]},
                  "not_match": {"geo_country_codes": ["US"]}}},
        {"id": "acl_2222222222222222222222", "description": "watch a fingerprint", "active": true,
         "priority": 20,
         "rule": {"action": {"log": true}, "scope": "authentication",
                  "match": {"ja4_fingerprints": ["t13d1516h2_8daaf6152771_e5627efa2ab1"]}}}
    ])
}

fn write_rules(dir: &tempfile::TempDir, rules: &Value) -> std::path::PathBuf {
    let path = dir.path().join("rules.json");
    std::fs::write(&path, rules.to_string()).expect("write rules");
    path
}

fn eval(rules: &std::path::Path, extra: &[&str], stdin: &str) -> Output {
    let mut command = netacl();
    command.arg("eval").arg("--rules").arg(rules).args(extra);
    crate::stdin_support::run_with_stdin(command, stdin)
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

#[test]
fn quick_tour_decisions_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(&dir, &rules());
    let requests = concat!(
        r#"{"path": "/authorize", "client_ip": "198.51.100.7", "country": "FR"}"#,
        "\n\n",
        r#"{"path": "/authorize", "client_ip": "198.51.100.7", "country": "US", "ja4": "t13d1516h2_8daaf6152771_e5627efa2ab1"}"#,
        "\n",
        r#"{"client_ip": "not an address"}"#,
        "\n",
        r#"{"scope": "management", "client_ip": "::ffff:198.51.100.8", "country": "DE"}"#,
        "\n",
    );
    let output = eval(&rules, &[], requests);
    assert!(output.status.success(), "{output:?}");
    let out = lines(&output);
    assert_eq!(out.len(), 4, "the blank line gives no output: {out:?}");
    assert_eq!(
        out[0],
        json!({"action": "block", "rule_id": "acl_1111111111111111111111", "monitored": []})
    );
    assert_eq!(
        out[1],
        json!({"action": "none", "rule_id": null, "monitored": ["acl_2222222222222222222222"]})
    );
    let error = out[2]["error"].as_str().expect("an error line");
    assert!(error.contains("client_ip"), "{error}");
    // An IPv4-mapped address is matched as IPv4.
    assert_eq!(out[3]["rule_id"], "acl_1111111111111111111111");
}

#[test]
fn envelope_and_requests_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(
        &dir,
        &json!({"network_acls": rules(), "start": 0, "limit": 50, "total": 2}),
    );
    let requests = dir.path().join("requests.jsonl");
    std::fs::write(
        &requests,
        "{\"client_ip\": \"203.0.113.1\"}\n{\"client_ip\": \"198.51.100.1\"}\n",
    )
    .expect("write requests");
    let output = eval(
        &rules,
        &["--requests", requests.to_str().expect("path")],
        "",
    );
    assert!(output.status.success(), "{output:?}");
    let out = lines(&output);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["action"], "none");
    assert_eq!(out[1]["action"], "block");
}

#[test]
fn invalid_rule_file_names_the_rule_and_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bad = rules();
    bad[1]["rule"]["match"]["asns"] = json!([7, 7]);
    let rules = write_rules(&dir, &bad);
    let output = eval(&rules, &[], "");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("acl_2222222222222222222222"), "{stderr}");
    assert!(stderr.contains("[1].rule.match.asns"), "{stderr}");
    assert!(
        stderr.contains("Array items are not unique (indexes 0 and 1)"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn limit_flags_apply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(&dir, &rules());
    let output = eval(&rules, &["--max-rules", "1"], "");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("maximum 1"));
    let output = eval(&rules, &["--max-rules", "2"], "{}\n");
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn bench_reports_json() {
    let output = netacl()
        .args([
            "bench",
            "--rules",
            "200",
            "--cidrs",
            "2000",
            "--requests",
            "500",
            "--rounds",
            "2",
            "--json",
        ])
        .output()
        .expect("netacl bench");
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["rules"], 200);
    for key in [
        "cidrs",
        "compiled_ns_per_decision",
        "compiled_ns_per_decision_unique_user_agents",
        "reference_ns_per_decision",
        "speedup",
        "compile_ms",
        "policy_bytes",
    ] {
        assert!(report[key].is_number(), "{key} in {report}");
    }
}

#[test]
fn bench_analyze_reports_the_analysis_as_json() {
    let output = netacl()
        .args([
            "bench",
            "--analyze",
            "--rules",
            "60",
            "--cidrs",
            "600",
            "--rounds",
            "1",
            "--json",
        ])
        .output()
        .expect("netacl bench --analyze");
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["rules"], 60);
    assert_eq!(report["rounds"], 1);
    for key in ["analyze_ms", "analyze_ms_min", "analyze_ms_max"] {
        assert!(report[key].is_number(), "{key} in {report}");
    }
    let count = |key: &str| {
        report[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {report}"))
    };
    // The synthetic tenant has conflicting rules; findings add up by kind.
    assert!(count("conflict") > 0, "{report}");
    assert_eq!(
        count("findings"),
        count("shadowed") + count("redundant") + count("conflict"),
        "{report}"
    );
    let _ = count("undecided");
}

#[test]
fn managed_lists_come_from_files_and_a_bad_line_is_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(
        &dir,
        &json!([
            {"id": "acl_3333333333333333333333", "description": "block Tor", "active": true,
             "priority": 10,
             "rule": {"action": {"block": true}, "scope": "tenant",
                      "match": {"auth0_managed": ["auth0.tor"]}}},
            {"id": "acl_4444444444444444444444", "description": "VPN, never configured",
             "active": true, "priority": 20,
             "rule": {"action": {"block": true}, "scope": "tenant",
                      "match": {"auth0_managed": ["auth0.vpn"]}}},
            {"id": "acl_5555555555555555555555", "description": "deny the rest of management",
             "active": true, "priority": 30,
             "rule": {"action": {"block": true}, "scope": "management", "match_all": true}}
        ]),
    );
    let tor = dir.path().join("tor.txt");
    std::fs::write(
        &tor,
        "# Tor exits\n192.0.2.0/24\n2001:db8::/32   # v6\n\ne7d705a3286e19ea42f587b344ee6865\n",
    )
    .expect("write list");
    let flag = format!("auth0.tor={}", tor.display());
    let requests = [
        r#"{"client_ip": "192.0.2.9"}"#,
        r#"{"client_ip": "::ffff:192.0.2.9"}"#,
        r#"{"client_ip": "2001:db8::1"}"#,
        r#"{"client_ip": "203.0.113.1", "ja3": "E7D705A3286E19EA42F587B344EE6865"}"#,
        r#"{"client_ip": "203.0.113.1"}"#,
        r#"{"path": "/api/v2/users", "client_ip": "203.0.113.1"}"#,
    ]
    .join("\n");
    let output = eval(&rules, &["--managed-list", &flag], &requests);
    assert!(output.status.success(), "{output:?}");
    let rule_ids: Vec<Value> = lines(&output)
        .iter()
        .map(|l| l["rule_id"].clone())
        .collect();
    assert_eq!(
        rule_ids,
        [
            json!("acl_3333333333333333333333"),
            json!("acl_3333333333333333333333"),
            json!("acl_3333333333333333333333"),
            json!("acl_3333333333333333333333"),
            Value::Null,
            json!("acl_5555555555555555555555"),
        ]
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("acl_4444444444444444444444") && stderr.contains("auth0.vpn"),
        "the rule naming an unconfigured list is named: {stderr}"
    );

    // Without the file, the Tor rule matches nothing.
    let output = eval(&rules, &[], r#"{"client_ip": "192.0.2.9"}"#);
    assert_eq!(lines(&output)[0]["action"], "none");

    // A malformed line: exit status 2, the list, the file and the line named.
    std::fs::write(&tor, "192.0.2.0/24\n# ok\n192.0.2.0/40\n").expect("write list");
    let output = eval(&rules, &["--managed-list", &flag], "");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("auth0.tor")
            && stderr.contains("line 3")
            && stderr.contains("192.0.2.0/40"),
        "{stderr}"
    );
    // An unknown list name is refused by the flag parser.
    let output = eval(&rules, &["--managed-list", "auth0.botnet=/dev/null"], "");
    assert!(!output.status.success());
}

/// `--geoip-city`/`--geoip-asn` with MaxMind's reference databases: a line with an address and no
/// geo values takes them from the databases (compiled into the policy); a line carrying any geo
/// value keeps its own; an address absent from the database has no country (so `match` does not
/// match and `not_match` does not exclude). Expected answers from the databases' JSON sources:
/// 81.2.69.144/124 is GB in GeoIP2-City-Test, 1.0.0.0/24 is AS 15169 in GeoLite2-ASN-Test.
#[test]
fn geoip_databases_enrich_lines_without_geo_values() {
    let maxmind = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference-data/maxmind");
    let city = maxmind.join("GeoIP2-City-Test.mmdb");
    let asn = maxmind.join("GeoLite2-ASN-Test.mmdb");
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(
        &dir,
        &json!([
            {"id": "acl_1111111111111111111111", "description": "block GB", "active": true,
             "priority": 10,
             "rule": {"action": {"block": true}, "scope": "tenant",
                      "match": {"geo_country_codes": ["GB"]}}},
            {"id": "acl_2222222222222222222222", "description": "redirect AS 15169",
             "active": true, "priority": 20,
             "rule": {"action": {"redirect": true, "redirect_uri": "https://example.com/r"},
                      "scope": "tenant", "match": {"asns": [15169]}}},
            {"id": "acl_3333333333333333333333", "description": "log outside GB", "active": true,
             "priority": 30,
             "rule": {"action": {"log": true}, "scope": "tenant",
                      "match": {"ipv4_cidrs": ["0.0.0.0/0"]},
                      "not_match": {"geo_country_codes": ["GB"]}}}
        ]),
    );
    let requests = [
        r#"{"client_ip": "81.2.69.150"}"#,
        r#"{"client_ip": "81.2.69.150", "country": "FR"}"#,
        r#"{"client_ip": "1.0.0.7"}"#,
        r#"{"client_ip": "1.0.0.7", "asn": 64500}"#,
        r#"{"client_ip": "203.0.113.9"}"#,
    ]
    .join("\n");
    let geo = [
        "--geoip-city",
        city.to_str().expect("utf-8 path"),
        "--geoip-asn",
        asn.to_str().expect("utf-8 path"),
    ];
    let output = eval(&rules, &geo, &requests);
    assert!(output.status.success(), "{output:?}");
    let got = lines(&output);
    let summary: Vec<(String, Value, Value)> = got
        .iter()
        .map(|d| {
            (
                d["action"].to_string(),
                d["rule_id"].clone(),
                d["monitored"].clone(),
            )
        })
        .collect();
    let three = json!(["acl_3333333333333333333333"]);
    assert_eq!(
        summary,
        vec![
            (
                "\"block\"".into(),
                json!("acl_1111111111111111111111"),
                json!([])
            ),
            ("\"none\"".into(), Value::Null, three.clone()),
            // The redirect decides: the later log rule is not reached.
            (
                "\"redirect\"".into(),
                json!("acl_2222222222222222222222"),
                json!([])
            ),
            ("\"none\"".into(), Value::Null, three.clone()),
            ("\"none\"".into(), Value::Null, three.clone()),
        ],
        "{got:?}"
    );
    // Without the databases the same lines carry no geo value: nothing is GB or AS 15169.
    let plain = lines(&eval(&rules, &[], &requests));
    assert!(plain.iter().all(|d| d["action"] == "none"), "{plain:?}");
    // A database that does not load is an error, not a silent run without enrichment.
    let broken = maxmind.join("MaxMind-DB-test-broken-search-tree-24.mmdb");
    let output = eval(
        &rules,
        &["--geoip-city", broken.to_str().expect("utf-8 path")],
        &requests,
    );
    assert!(!output.status.success(), "{output:?}");
}

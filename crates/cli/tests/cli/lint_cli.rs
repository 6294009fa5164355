//! `netacl lint` and `netacl eval --compare` through the real binary: findings and exit
//! statuses (0 clean, 1 findings, 2 invalid input), the impact preview over a request file.
use std::process::{Command, Output};

use serde_json::{json, Value};

fn netacl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_netacl"))
}

fn record(id: &str, priority: u64, action: Value, cidr: &str) -> Value {
    json!({"id": id, "description": "", "active": true, "priority": priority,
           "rule": {"action": action, "scope": "tenant", "match": {"ipv4_cidrs": [cidr]}}})
}

const A: &str = "acl_1111111111111111111111";
const B: &str = "acl_2222222222222222222222";

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write");
    path
}

fn lint(path: &std::path::Path) -> (Output, Value) {
    let output = netacl()
        .arg("lint")
        .arg(path)
        .output()
        .expect("netacl lint");
    let value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, value)
}

#[test]
fn lint_exit_statuses_and_findings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shadowing = json!([
        record(A, 10, json!({"block": true}), "10.0.0.0/8"),
        record(B, 20, json!({"allow": true}), "10.1.0.0/16"),
    ]);
    let (output, value) = lint(&write(&dir, "shadow.json", &shadowing.to_string()));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(value["findings"][0]["kind"], "shadowed");
    assert_eq!(value["findings"][0]["rule_id"], B);
    assert_eq!(value["findings"][0]["by"], json!([A]));
    assert_eq!(value["findings"][1]["kind"], "conflict");
    assert_eq!(value["undecided"], json!([]));

    // The list envelope, no overlap: exit 0, empty lists.
    let clean = json!({"network_acls": [
        record(A, 10, json!({"block": true}), "10.0.0.0/8"),
        record(B, 20, json!({"allow": true}), "192.0.2.0/24"),
    ]});
    let (output, value) = lint(&write(&dir, "clean.json", &clean.to_string()));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(value, json!({"findings": [], "undecided": []}));

    // Undecided alone is not a finding.
    let undecided = json!([
        {"id": A, "description": "", "active": true, "priority": 1,
         "rule": {"action": {"block": true}, "scope": "tenant", "match": {"user_agents": ["bot*"]}}},
        {"id": B, "description": "", "active": true, "priority": 2,
         "rule": {"action": {"block": true}, "scope": "tenant", "match": {"user_agents": ["*bot"]}}},
    ]);
    let (output, value) = lint(&write(&dir, "undecided.json", &undecided.to_string()));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // Both undecided: whether every `bot*` is a `*bot` (A redundant), whether `*bot` is left
    // only what `bot*` takes (B shadowed).
    assert_eq!(value["undecided"][0]["rule_id"], A);
    assert_eq!(value["undecided"][1]["rule_id"], B);

    // Invalid input: exit 2, the validation message on stderr, nothing on stdout.
    let invalid = json!([record(A, 10, json!({"block": true}), "10.0.0.0/33")]);
    let (output, _) = lint(&write(&dir, "invalid.json", &invalid.to_string()));
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("rule 0 (id acl_1111111111111111111111)")
            && stderr.contains("[0].rule.match.ipv4_cidrs[0]"),
        "{stderr}"
    );
    let (output, _) = lint(&write(&dir, "text.json", "not json"));
    assert_eq!(output.status.code(), Some(2));
    let (output, _) = lint(&dir.path().join("missing.json"));
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn eval_compare_prints_the_impact_preview() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = write(
        &dir,
        "old.json",
        &json!([record(A, 10, json!({"block": true}), "10.0.0.0/8")]).to_string(),
    );
    let new = write(
        &dir,
        "new.json",
        &json!([
            record(A, 10, json!({"block": true}), "10.0.0.0/8"),
            record(
                B,
                5,
                json!({"redirect": true, "redirect_uri": "https://example.com/"}),
                "10.1.0.0/16"
            ),
        ])
        .to_string(),
    );
    let requests = write(
        &dir,
        "requests.jsonl",
        "{\"client_ip\": \"10.1.2.3\"}\n{\"client_ip\": \"10.2.0.1\"}\n\nnot json\n{\"client_ip\": \"10.1.0.9\", \"path\": \"/api/v2/users\"}\n",
    );
    let output = netacl()
        .args(["eval", "--compare"])
        .arg(&old)
        .arg(&new)
        .arg("--requests")
        .arg(&requests)
        .output()
        .expect("netacl eval --compare");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(value["requests"], 3);
    assert_eq!(value["changed"], 2);
    assert_eq!(
        value["transitions"],
        json!([{"from": {"action": "block"},
                "to": {"action": "redirect", "redirect_uri": "https://example.com/"}, "count": 2}])
    );
    assert_eq!(
        value["by_rule"],
        json!([{"rule_id": A, "gained": 0, "lost": 2}, {"rule_id": B, "gained": 2, "lost": 0}])
    );
    assert_eq!(
        value["examples"][1]["request"],
        json!({"client_ip": "10.1.0.9", "path": "/api/v2/users"})
    );
    assert_eq!(
        value["examples"][1]["to"]["redirect_uri"],
        "https://example.com/"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("1 of 4 request lines were invalid"),
        "{stderr}"
    );

    // --compare and --rules together are refused by the argument parser.
    let output = netacl()
        .args(["eval", "--rules"])
        .arg(&old)
        .arg("--compare")
        .arg(&old)
        .arg(&new)
        .output()
        .expect("netacl eval");
    assert_eq!(output.status.code(), Some(2));
}

/// `--work-budget UNITS` bounds the analysis as `serve --analysis-work` does: on rules whose
/// CIDRs, ASNs and countries all overlap, a small budget leaves rules undecided with the reason
/// `budget` (every finding left is one the whole analysis reports), and a budget of what the
/// whole analysis takes gives the whole answer. `bench --analyze --overlapping --work-budget`
/// reports the same cut.
#[test]
fn lint_and_bench_take_a_work_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = netacl_eval::synthetic::overlapping(40, 5);
    let path = write(&dir, "overlapping.json", &rules.to_string());
    let (output, full) = lint(&path);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(full["undecided"]
        .as_array()
        .expect("undecided")
        .iter()
        .all(|u| u["reason"] != "budget"));
    let bounded = |units: u64| -> (Output, Value) {
        let output = netacl()
            .arg("lint")
            .arg(&path)
            .args(["--work-budget", &units.to_string()])
            .output()
            .expect("netacl lint");
        let value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (output, value)
    };
    let (output, cut) = bounded(60_000);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{output:?}");
    let budget: Vec<&Value> = cut["undecided"]
        .as_array()
        .expect("undecided")
        .iter()
        .filter(|u| u["reason"] == "budget")
        .collect();
    assert!(!budget.is_empty(), "{cut}");
    let (cut_findings, all_findings) = (
        cut["findings"].as_array().expect("findings").len(),
        full["findings"].as_array().expect("findings").len(),
    );
    assert!(cut_findings > 0 && cut_findings < all_findings, "{cut}");
    for finding in cut["findings"].as_array().expect("findings") {
        assert!(
            full["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .any(|f| f["kind"] == finding["kind"] && f["rule_id"] == finding["rule_id"]),
            "{finding}"
        );
    }
    let (_, whole) = bounded(u64::MAX / 2);
    assert_eq!(whole, full);

    let bench = netacl()
        .args([
            "bench",
            "--analyze",
            "--overlapping",
            "--rules",
            "40",
            "--seed",
            "5",
        ])
        .args(["--work-budget", "60000", "--rounds", "1", "--json"])
        .output()
        .expect("netacl bench");
    assert!(bench.status.success(), "{bench:?}");
    let report: Value = serde_json::from_slice(&bench.stdout).expect("one JSON line");
    assert_eq!(report["overlapping"], true);
    assert_eq!(report["rules"], 40);
    assert_eq!(report["undecided_budget"], budget.len(), "{report}");
    assert_eq!(report["work_budget"], 60_000);
}

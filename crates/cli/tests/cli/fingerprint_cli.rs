//! `netacl fingerprint` through the real binary.

use std::path::PathBuf;
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (record_hex, ja3, ja3_string, ja4, sni) of every line of a vector file.
fn vectors(path: PathBuf) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run(args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_netacl"));
    command.arg("fingerprint").args(args);
    crate::stdin_support::run_with_stdin(command, stdin)
}

fn output_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn fingerprints_every_line_from_stdin() {
    let mut rows = vectors(repo_root().join("testdata/tls/own-vectors.jsonl"));
    rows.extend(
        vectors(repo_root().join("../shared/reference-data/tls/clienthello-vectors.jsonl"))
            .into_iter()
            .take(5),
    );
    let input: String = rows
        .iter()
        .map(|r| format!("{}\n", r["record_hex"].as_str().unwrap()))
        .collect();
    let output = run(&[], &input);
    assert!(output.status.success(), "{output:?}");
    let lines = output_lines(&output);
    assert_eq!(lines.len(), rows.len());
    for (row, line) in rows.iter().zip(&lines) {
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["ja3", "ja3_string", "ja4", "sni"]);
        assert_eq!(line["ja3"], row["ja3"]);
        assert_eq!(line["ja3_string"], row["ja3_string"]);
        assert_eq!(line["ja4"], row["ja4"]);
        if let Some(sni) = row.get("sni") {
            assert_eq!(&line["sni"], sni);
        }
    }
    // A vector without SNI prints null.
    let no_sni = rows
        .iter()
        .position(|r| r["name"] == "tls13_no_sni")
        .unwrap();
    assert!(lines[no_sni]["sni"].is_null());
}

#[test]
fn bad_lines_print_an_error_and_the_rest_continues() {
    let good = vectors(repo_root().join("testdata/tls/own-vectors.jsonl"))
        .into_iter()
        .find(|r| r["name"] == "tls12_only")
        .unwrap();
    let good_hex = good["record_hex"].as_str().unwrap();
    let input = format!(
        "not hex\n\n# a comment\n{good_hex}\n160301\n{}\n170303000100\nabc\n{good_hex}\n",
        &good_hex[..good_hex.len() - 2]
    );
    let output = run(&[], &input);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let lines = output_lines(&output);
    assert_eq!(lines.len(), 7, "{lines:?}");
    let error = |i: usize| {
        lines[i]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{:?}", lines[i]))
    };
    assert!(
        error(0).starts_with("line 1: not a hex digit"),
        "{}",
        error(0)
    );
    assert_eq!(lines[1]["ja4"], good["ja4"]);
    assert!(error(2).starts_with("line 5:") && error(2).contains("before the ClientHello"));
    assert!(error(3).contains("before the ClientHello"));
    assert!(error(4).contains("content type 23"), "{}", error(4));
    assert!(error(5).contains("odd number"));
    assert_eq!(lines[6]["ja3"], good["ja3"]);
    assert_eq!(lines[6]["sni"], "legacy.example");
}

#[test]
fn reads_a_file_given_with_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hellos.txt");
    let rows = vectors(repo_root().join("testdata/tls/own-vectors.jsonl"));
    let text: String = rows
        .iter()
        .take(3)
        .map(|r| {
            // Colon- and space-separated hex is accepted too.
            let hex = r["record_hex"].as_str().unwrap();
            let spaced: Vec<&str> = (0..hex.len() / 2).map(|i| &hex[2 * i..2 * i + 2]).collect();
            format!("{}\n", spaced.join(":"))
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    let output = run(&["--input", path.to_str().unwrap()], "");
    assert!(output.status.success(), "{output:?}");
    let lines = output_lines(&output);
    assert_eq!(lines.len(), 3);
    for (row, line) in rows.iter().zip(&lines) {
        assert_eq!(line["ja4"], row["ja4"]);
    }

    let missing = run(&["--input", dir.path().join("nope").to_str().unwrap()], "");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nope"));
}

//! Hostile input to the binary's file and line readers: rule files and directory files nested
//! deeper than the limit (32 levels) are refused with an error naming it (exit status 2 or 1,
//! never a crash); a request line nested 50,000 deep, or given as a JSON array (serde's
//! positional form of a struct), is an `{"error": ...}` line and the lines after it are
//! evaluated.

use std::process::{Command, Output};

use serde_json::{json, Value};

const TOO_DEEP: &str = "Nested deeper than the limit of 32 levels of arrays and objects";

fn netacl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_netacl"))
}

fn run(args: &[&std::ffi::OsStr], stdin: &str) -> Output {
    let mut command = netacl();
    command.args(args);
    crate::stdin_support::run_with_stdin(command, stdin)
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn nested_objects(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

fn rules() -> Value {
    json!([{"id": "acl_1111111111111111111111", "description": "block management",
            "active": true, "priority": 10,
            "rule": {"action": {"block": true}, "scope": "management",
                     "match": {"ipv4_cidrs": ["198.51.100.0/24"]}}}])
}

#[test]
fn a_rule_file_nested_too_deep_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in [
        ("arrays", nested_arrays(50_000)),
        ("objects", nested_objects(50_000)),
        (
            "envelope",
            format!("{{\"network_acls\": {}}}", nested_arrays(40)),
        ),
    ] {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, text).expect("write");
        let output = run(&["eval".as_ref(), "--rules".as_ref(), path.as_os_str()], "");
        assert_eq!(output.status.code(), Some(2), "{name}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(TOO_DEEP), "{name}: {stderr}");
        assert!(
            stderr.contains(&path.display().to_string()),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn request_lines_nested_deep_or_given_as_arrays_are_errors_and_the_rest_go_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.json");
    std::fs::write(&path, rules().to_string()).expect("write");
    let good = r#"{"scope": "management", "client_ip": "198.51.100.7"}"#;
    let input = [
        format!("{{\"path\": {}}}", nested_arrays(50_000)),
        nested_arrays(50_000),
        nested_objects(50_000),
        // serde's positional form of the request struct: (scope, path, client_ip).
        r#"["management",null,"198.51.100.7"]"#.to_owned(),
        "[]".to_owned(),
        good.to_owned(),
    ]
    .join("\n");
    let output = run(
        &["eval".as_ref(), "--rules".as_ref(), path.as_os_str()],
        &input,
    );
    assert!(output.status.success(), "{output:?}");
    let out: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(out.len(), 6, "{out:?}");
    for (i, line) in out[..5].iter().enumerate() {
        assert!(line["error"].is_string(), "line {i}: {line}");
        assert!(line.get("action").is_none(), "line {i}: {line}");
    }
    assert!(
        out[3]["error"]
            .as_str()
            .unwrap_or("")
            .contains("a JSON object"),
        "{}",
        out[3]
    );
    assert_eq!(out[5]["action"], "block");
}

#[test]
fn a_directory_file_nested_too_deep_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("directory.json");
    let text = format!(
        "{{\"sessions\": [{{\"id\": \"s\", \"user_id\": \"u\", \"session_metadata\": {}}}]}}",
        nested_objects(50_000)
    );
    std::fs::write(&path, text).expect("write");
    let data_dir = dir.path().join("data");
    let output = run(
        &[
            "directory".as_ref(),
            "import".as_ref(),
            path.as_os_str(),
            "--data-dir".as_ref(),
            data_dir.as_os_str(),
        ],
        "",
    );
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(TOO_DEEP), "{stderr}");
}

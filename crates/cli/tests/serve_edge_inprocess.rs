//! `netacl serve --edge-upstream ...`: the edge runs in the admin API's process and shares its
//! engine, so a rule is enforced at the edge as soon as its write is answered, and a deleted
//! rule stops being enforced as soon as the delete is answered. With `--database-url`, rules
//! written on another node reach the edge through the store follower. Real binary, loopback
//! only, every wait bounded.
mod cluster_support;
mod serve_support;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use serve_support::{free_port, request, Server};

/// Starts `netacl serve` with the edge in process in front of a test upstream; returns the
/// server and the edge's plain-HTTP address (bound once the server reports its address).
fn serve_with_edge(data: &std::path::Path, domain: &str, extra: &[&str]) -> (Server, SocketAddr) {
    let upstream = cluster_support::upstream();
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
    let upstream_url = format!("http://{upstream}");
    let edge_listen = edge.to_string();
    let mut args = vec![
        "--edge-upstream",
        upstream_url.as_str(),
        "--edge-listen",
        edge_listen.as_str(),
        "--edge-metrics-listen",
        "off",
    ];
    args.extend_from_slice(extra);
    let server = Server::start(data, "127.0.0.1:0", domain, &args);
    (server, edge)
}

/// The edge's answer to `GET /` from 127.0.0.1: `(status, body)`.
fn through_edge(edge: SocketAddr) -> (u16, String) {
    let answer = request(edge, "GET", "/", None, None).expect("request through the edge");
    (answer.status, answer.text)
}

fn create_block_rule(admin: SocketAddr, token: &str, priority: u64) -> String {
    let body = cluster_support::block_rule(priority, "127.0.0.1");
    let answer = request(
        admin,
        "POST",
        "/api/v2/network-acls",
        Some(token),
        Some(&body),
    )
    .expect("create the rule");
    assert_eq!(answer.status, 201, "{}", answer.text);
    answer.json()["id"].as_str().expect("id").to_owned()
}

fn delete_rule(admin: SocketAddr, token: &str, id: &str) {
    let path = format!("/api/v2/network-acls/{id}");
    let answer = request(admin, "DELETE", &path, Some(token), None).expect("delete the rule");
    assert_eq!(answer.status, 204, "{}", answer.text);
}

#[test]
fn rules_are_enforced_by_the_in_process_edge_as_soon_as_they_are_answered() {
    let data = tempfile::tempdir().expect("tempdir");
    let (server, edge) = serve_with_edge(data.path(), "edge-inprocess.test", &[]);
    let token = server.token();

    // No rule: the request reaches the upstream.
    assert_eq!(through_edge(edge), (200, "upstream".to_owned()));

    // Right after the 201, with no wait: blocked at the edge, not forwarded.
    let id = create_block_rule(server.addr, &token, 1);
    let (status, body) = through_edge(edge);
    assert_eq!(status, 403, "{body}");
    assert_ne!(body, "upstream");
    let blocked: Value = serde_json::from_str(&body).expect("JSON 403 body");
    assert!(blocked.is_object(), "{body}");

    // Right after the 204: passes again.
    delete_rule(server.addr, &token, &id);
    assert_eq!(through_edge(edge), (200, "upstream".to_owned()));

    // An inactive rule is not enforced; activating it through PATCH is.
    let id = create_block_rule(server.addr, &token, 2);
    let path = format!("/api/v2/network-acls/{id}");
    let patch = serde_json::json!({"active": false});
    let answer = request(server.addr, "PATCH", &path, Some(&token), Some(&patch)).expect("patch");
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(through_edge(edge).0, 200);
    let patch = serde_json::json!({"active": true});
    let answer = request(server.addr, "PATCH", &path, Some(&token), Some(&patch)).expect("patch");
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(through_edge(edge).0, 403);

    // The admin API itself is not behind the edge: it still answers this client.
    let answer = request(
        server.addr,
        "GET",
        "/api/v2/network-acls",
        Some(&token),
        None,
    )
    .expect("list");
    assert_eq!(answer.status, 200, "{}", answer.text);
}

#[test]
fn the_edge_enforces_the_rules_of_a_restarted_server_from_the_start() {
    let data = tempfile::tempdir().expect("tempdir");
    let domain = "edge-restart.test";
    {
        let (server, edge) = serve_with_edge(data.path(), domain, &[]);
        let token = server.token();
        create_block_rule(server.addr, &token, 1);
        assert_eq!(through_edge(edge).0, 403);
        server.kill();
    }
    // The stored rule is loaded into the engine before the edge accepts its first request.
    let (_server, edge) = serve_with_edge(data.path(), domain, &[]);
    assert_eq!(through_edge(edge).0, 403);
}

/// With `--database-url`: a rule written on node A reaches the edge running in node B (through
/// B's store follower and B's engine), and so does its deletion. Needs
/// `NETACL_TEST_DATABASE_URL` (see `cluster_support`).
#[test]
fn rules_written_on_another_node_reach_the_in_process_edge() {
    let Some(server_url) =
        cluster_support::database_url("rules_written_on_another_node_reach_the_in_process_edge")
    else {
        return;
    };
    let url = cluster_support::fresh_database(&server_url, "inprocess_edge");
    let domain = cluster_support::DOMAIN;
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let kek = cluster_support::secrets_key_file(&url);
    let kek = kek.to_str().expect("utf-8 path");
    let a = Server::start(
        dir_a.path(),
        "127.0.0.1:0",
        domain,
        &["--database-url", &url, "--secrets-key-file", kek],
    );
    let (b, edge) = serve_with_edge(
        dir_b.path(),
        domain,
        &[
            "--database-url",
            &url,
            "--sync-interval-ms",
            "200",
            "--secrets-key-file",
            kek,
        ],
    );
    let token = a.token();
    assert_eq!(through_edge(edge).0, 200);

    let id = create_block_rule(a.addr, &token, 1);
    let blocked =
        cluster_support::wait_for(Duration::from_secs(15), Duration::from_millis(20), || {
            cluster_support::edge_status(edge, "/") == Some(403)
        });
    assert!(
        blocked.is_some(),
        "the edge of node B never enforced node A's rule"
    );

    delete_rule(a.addr, &token, &id);
    let passed =
        cluster_support::wait_for(Duration::from_secs(15), Duration::from_millis(20), || {
            cluster_support::edge_status(edge, "/") == Some(200)
        });
    assert!(
        passed.is_some(),
        "the edge of node B kept enforcing a deleted rule"
    );
    drop(b);
}

/// `serve --managed-list`: the file's list is in force at the in-process edge from the start,
/// read-only through the API, and a change of the file is enforced within seconds.
#[test]
fn a_list_file_of_serve_is_enforced_at_its_edge_and_reloaded() {
    let data = tempfile::tempdir().expect("tempdir");
    let tor = data.path().join("tor.txt");
    std::fs::write(&tor, "127.0.0.1\n").expect("write list");
    let flag = format!("auth0.tor={}", tor.display());
    let (server, edge) = serve_with_edge(
        data.path(),
        "edge-lists.test",
        &["--managed-list", flag.as_str()],
    );
    let token = server.token();
    let rule = serde_json::json!({"description": "block Tor", "active": true, "priority": 3,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"auth0_managed": ["auth0.tor"]}}});
    let answer = request(
        server.addr,
        "POST",
        "/api/v2/network-acls",
        Some(&token),
        Some(&rule),
    )
    .expect("create");
    assert_eq!(answer.status, 201, "{}", answer.text);
    assert_eq!(through_edge(edge).0, 403, "enforced as soon as answered");
    let path = "/_netacl/v1/managed-lists/auth0.tor";
    let listed = request(server.addr, "GET", path, Some(&token), None).expect("get");
    assert_eq!(listed.json()["source"], "file");
    let put = serde_json::json!({"items": ["10.0.0.1"]});
    let refused = request(server.addr, "PUT", path, Some(&token), Some(&put)).expect("put");
    assert_eq!(refused.status, 409, "{}", refused.text);

    // The file changes: in force within seconds, with a new version.
    let tmp = tor.with_extension("tmp");
    std::fs::write(&tmp, "10.9.9.9\n").expect("write");
    std::fs::rename(&tmp, &tor).expect("rename");
    let started = std::time::Instant::now();
    while through_edge(edge).0 != 200 {
        assert!(started.elapsed() < Duration::from_secs(20), "reloaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started.elapsed() < Duration::from_secs(5), "within 5 s");
    let listed = request(server.addr, "GET", path, Some(&token), None).expect("get");
    assert_eq!(listed.json()["items"], serde_json::json!(["10.9.9.9"]));
    assert_eq!(listed.json()["version"], serde_json::json!(2));
}

/// The README's five-minute tour, run as written: the block between its `ANCHOR: tour` marks,
/// with `bash`, in a directory whose `target/release/netacl` is the binary under test (the tour
/// names the binary by that path). It must exit 0, pass a request through the edge, block the
/// next one after its rule is written, and replay the same decisions with `netacl eval`.
#[test]
fn the_readme_tour_runs_as_written() {
    let readme_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = std::fs::read_to_string(readme_path).expect("README.md");
    let start = readme
        .find("<!-- ANCHOR: tour -->")
        .expect("the tour's start mark");
    let end = readme
        .find("<!-- ANCHOR_END: tour -->")
        .expect("the tour's end mark");
    let block = &readme[start..end];
    let script = block
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.rsplit_once("```"))
        .map(|(script, _)| script)
        .expect("a sh block between the marks");
    assert!(
        script.starts_with("# tour"),
        "the block opens with `# tour`"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let bin_dir = dir.path().join("target/release");
    std::fs::create_dir_all(&bin_dir).expect("target/release");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_netacl"), bin_dir.join("netacl"))
        .expect("link the binary");
    // `timeout` bounds the whole tour (its own waits are bounded; a hung curl would not be).
    let output = std::process::Command::new("timeout")
        .args(["120", "bash", "-c", script])
        .current_dir(dir.path())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the tour failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"200"),
        "passed before the rule:\n{stdout}"
    );
    let created: Value = serde_json::from_str(lines[1]).expect("the stored record");
    assert!(created["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("acl_")));
    assert!(
        lines[2].contains(r#""errorCode":"blocked""#) && lines[2].ends_with(" 403"),
        "blocked after the rule:\n{stdout}"
    );
    let block: Value = serde_json::from_str(lines[3]).expect("eval's first decision");
    assert_eq!(block["action"], "block");
    assert_eq!(block["rule_id"], created["id"]);
    let none: Value = serde_json::from_str(lines[4]).expect("eval's second decision");
    assert_eq!(none["action"], "none");
    assert_eq!(lines.len(), 5, "{stdout}");
}

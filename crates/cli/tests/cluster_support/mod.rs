//! Several `netacl serve` nodes on one PostgreSQL database, `netacl edge` following one of them,
//! a test upstream and a minimal HTTP/1.1 client (the last ones also used by `edge_cli`).
//! Loopback only; every wait is bounded.
//!
//! The database server comes from `NETACL_TEST_DATABASE_URL` (see `.ci/postgres.sh`); each test
//! gets a fresh database on it. Without that variable the tests print a notice and pass, except
//! under CI (`CI` set), where they fail.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_netacl");
pub const DOMAIN: &str = "cluster.test";
pub const CLIENT_ID: &str = "cluster-test";
pub const CLIENT_SECRET: &str = "cluster-test-secret-0123456789abcdefghij";

/// Kills the child when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The test database server's URL, or `None` (with a notice) when there is none outside CI.
pub fn database_url(test: &str) -> Option<String> {
    match std::env::var("NETACL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but NETACL_TEST_DATABASE_URL is not: source .ci/postgres.sh")
        }
        _ => {
            eprintln!("skipping {test}: NETACL_TEST_DATABASE_URL is not set (see .ci/postgres.sh)");
            None
        }
    }
}

/// `url` with its database name replaced (URL or key=value form).
pub fn with_dbname(url: &str, dbname: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let (base, query) = match url.find('?') {
            Some(q) => (&url[..q], &url[q..]),
            None => (url, ""),
        };
        let after = &base[scheme_end + 3..];
        let authority = after.split('/').next().unwrap_or(after);
        format!("{}://{authority}/{dbname}{query}", &url[..scheme_end])
    } else {
        format!("{url} dbname={dbname}")
    }
}

/// Creates a fresh database on the server of `url`; returns its URL.
pub fn fresh_database(url: &str, label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!("netacl_{label}_{}_{nanos}", std::process::id());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect to the test database server");
        let driver = tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create database");
        drop(client);
        let _ = driver.await;
    });
    with_dbname(url, &name)
}

/// The ids of the network ACLs committed in the database at `url`, by priority then id.
pub fn committed_ids(url: &str) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect to the test database");
        let driver = tokio::spawn(connection);
        let rows = client
            .query("SELECT id FROM network_acls ORDER BY priority, id", &[])
            .await
            .expect("query");
        drop(client);
        let _ = driver.await;
        rows.iter().map(|row| row.get(0)).collect()
    })
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A `netacl serve` node.
pub struct Node {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub data: tempfile::TempDir,
}

/// The key-encryption key file of the nodes sharing `database_url` (one per database, made by
/// the first node's test; required with `--database-url`).
pub fn secrets_key_file(database_url: &str) -> std::path::PathBuf {
    use std::hash::BuildHasher;
    let hash =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(database_url);
    let path = std::env::temp_dir().join(format!("netacl-test-kek-{hash:016x}"));
    netacl_secrets::Kek::load_or_generate(&path).expect("test key-encryption key");
    path
}

/// Starts a node on `database_url` (not waiting for it; see [`token`]).
pub fn start_node(database_url: &str) -> Node {
    let port = free_port();
    let data = tempfile::tempdir().expect("tempdir");
    let child = Command::new(BIN)
        .arg("serve")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--database-url", database_url])
        .arg("--secrets-key-file")
        .arg(secrets_key_file(database_url))
        .arg("--data-dir")
        .arg(data.path())
        .args(["--tenant-domain", DOMAIN])
        .args(["--bootstrap-client-id", CLIENT_ID])
        .args(["--bootstrap-client-secret", CLIENT_SECRET])
        .args(["--rate-limit-burst", "0"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn netacl serve");
    Node {
        proc: Proc(child),
        addr: format!("127.0.0.1:{port}").parse().expect("addr"),
        data,
    }
}

/// Starts `netacl edge` following `node` and proxying to `upstream`; returns it with its
/// plain-HTTP address.
pub fn start_edge(node: SocketAddr, upstream: SocketAddr) -> (Proc, SocketAddr) {
    let (child, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(["--upstream", &format!("http://{upstream}")])
            .args(["--rules-url", &format!("http://{node}")])
            .args(["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET])
            .args(["--audience", &format!("https://{DOMAIN}/api/v2/")])
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let http = edge_address(&line, "http=");
    (child, http)
}

/// Spawns `command` (a `netacl edge`) with its standard output piped and waits (at most 60 s)
/// for the line in which it reports its addresses; returns the process and that line.
pub fn spawn_edge(command: &mut Command) -> (Proc, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn netacl edge");
    let stdout = child.stdout.take().expect("stdout");
    let child = Proc(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("edge printed its addresses");
    (child, line)
}

/// The address after `key` (`http=`, `tls=`, `metrics=`) in the edge's address line.
pub fn edge_address(line: &str, key: &str) -> SocketAddr {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no {key} address in {line:?}"))
}

/// A tiny HTTP/1.1 upstream answering `200 upstream` to everything (at most 100,000
/// connections; the thread ends with the test process).
pub fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(100_000) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nupstream",
                );
            });
        }
    });
    addr
}

/// An upstream serving sites by host, as a virtual-host server behind a proxy does: it
/// answers each request with the host and forwarding headers it received, one `name: value`
/// line each: `host`, then `x-forwarded-host`, then `forwarded` (several lines of one name in
/// the order received).
pub fn echo_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(100_000) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let mut seen = String::new();
                for wanted in ["host", "x-forwarded-host", "forwarded"] {
                    for line in head.split("\r\n").skip(1) {
                        let Some((name, value)) = line.split_once(':') else {
                            continue;
                        };
                        if name.trim().eq_ignore_ascii_case(wanted) {
                            seen.push_str(&format!("{wanted}: {}\n", value.trim()));
                        }
                    }
                }
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{seen}",
                        seen.len()
                    )
                    .as_bytes(),
                );
            });
        }
    });
    addr
}

/// Sends `request` as it is (raw bytes); the status code and body of the answer.
pub fn raw_exchange(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    stream.write_all(request).expect("write");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Sends one request; returns the status code and body (`None` when the connection failed).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .ok()?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// Waits (at most `limit`, polling every `every`) for `f` to hold; returns the time it took.
pub fn wait_for(limit: Duration, every: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    for _ in 0..1_000_000 {
        if f() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(every);
    }
    None
}

/// A token from `node` (`None` while it is not up).
pub fn token(node: SocketAddr) -> Option<String> {
    let body = json!({
        "grant_type": "client_credentials",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "audience": format!("https://{DOMAIN}/api/v2/"),
    })
    .to_string();
    let (status, body) = http(
        node,
        "POST",
        "/oauth/token",
        &[("content-type", "application/json")],
        &body,
    )?;
    if status != 200 {
        return None;
    }
    let json: Value = serde_json::from_str(&body).ok()?;
    json.get("access_token")?.as_str().map(str::to_owned)
}

/// Waits (at most 60 s) until `node` issues a token.
pub fn wait_token(node: SocketAddr) -> String {
    let mut token = None;
    wait_for(Duration::from_secs(60), Duration::from_millis(50), || {
        token = self::token(node);
        token.is_some()
    });
    token.expect("the node starts and issues a token")
}

/// An authorised JSON request; `(status, body as JSON or Null)`.
pub fn call(node: SocketAddr, token: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let headers = if body.is_null() {
        &headers[1..]
    } else {
        &headers[..]
    };
    match http(node, method, path, headers, &text) {
        Some((status, body)) => (status, serde_json::from_str(&body).unwrap_or(Value::Null)),
        None => (0, Value::Null),
    }
}

/// The create body of a rule blocking `cidr` at `priority`.
pub fn block_rule(priority: u64, cidr: &str) -> Value {
    json!({
        "description": format!("block {cidr}"),
        "active": true,
        "priority": priority,
        "rule": {"action": {"block": true}, "scope": "tenant", "match": {"ipv4_cidrs": [cidr]}}
    })
}

/// The live engine's decision for a client address on `node`: `(action, policy version)`.
pub fn decision(node: SocketAddr, token: &str, client_ip: &str) -> Option<(String, u64)> {
    let (status, body) = call(
        node,
        token,
        "POST",
        "/_netacl/v1/dry-run",
        &json!({"request": {"client_ip": client_ip}}),
    );
    if status != 200 {
        return None;
    }
    Some((
        body["outcome"]["action"].as_str()?.to_owned(),
        body["version"].as_u64()?,
    ))
}

/// The ids of the network ACLs `node` lists (its in-memory snapshot), in order.
pub fn listed_ids(node: SocketAddr, token: &str) -> Option<Vec<String>> {
    let (status, body) = call(
        node,
        token,
        "GET",
        "/api/v2/network-acls?per_page=100",
        &Value::Null,
    );
    if status != 200 {
        return None;
    }
    let items = body
        .as_array()
        .or_else(|| body["network_acls"].as_array())?;
    items
        .iter()
        .map(|acl| acl["id"].as_str().map(str::to_owned))
        .collect()
}

/// The edge's status for a request to `path` (`None` when the connection failed).
pub fn edge_status(edge: SocketAddr, path: &str) -> Option<u16> {
    http(edge, "GET", path, &[], "").map(|(s, _)| s)
}

/// Median and maximum of `samples` (sorted in place).
pub fn median_and_worst(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let median = samples.get(samples.len() / 2).copied().unwrap_or_default();
    let worst = samples.last().copied().unwrap_or_default();
    (median, worst)
}

/// Issue 28, through a multi-tenant `edge` in front of [`echo_upstream`]:
/// tenant `beta.test` blocks every request and `alpha.test` none. A request judged as alpha's
/// reaches the upstream as alpha's and as nothing else: `Connection: host` does not drop its
/// `Host`, and a forged `X-Forwarded-Host` or `Forwarded: host=` naming beta never reaches the
/// upstream, which gets `X-Forwarded-Host: alpha.test`.
pub fn check_the_upstream_gets_the_judged_host(edge: SocketAddr) {
    let (status, _) = raw_exchange(
        edge,
        b"GET / HTTP/1.1\r\nHost: beta.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 403, "beta blocks every request");
    let (status, seen) = raw_exchange(
        edge,
        b"GET / HTTP/1.1\r\nHost: alpha.test\r\nConnection: host, close\r\n\r\n",
    );
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen, "host: alpha.test\nx-forwarded-host: alpha.test\n");
    let (status, seen) = raw_exchange(
        edge,
        b"GET / HTTP/1.1\r\nHost: alpha.test\r\nX-Forwarded-Host: beta.test\r\n\
          Forwarded: host=beta.test\r\nForwarded: for=192.0.2.1;host=\"beta.test\"\r\n\
          Connection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{seen}");
    assert_eq!(
        seen,
        "host: alpha.test\nx-forwarded-host: alpha.test\nforwarded: for=192.0.2.1\n"
    );
}

//! Every listener's limits, seen from outside (issue 28): `netacl serve` (the admin API), `netacl
//! edge` and the in-process edge of `serve --edge-*` close idle, half-sent, silent and trickled
//! connections after their timeouts (short ones, given by flags); 2,000 idle or half-sent
//! connections from 40 addresses and a slow body do not lock a normal client out of a `serve`
//! limited to 1,024 descriptors; SIGTERM stops `serve` within 10 s while a long analysis runs,
//! and lets a request in flight through `netacl edge` finish.
//!
//! Loopback only (Linux routes all of 127.0.0.0/8 to lo, so clients bind 127.0.0.X); every
//! wait and every loop is bounded.
//!
//! Its own test binary, apart from `tests/cli`: the load test must not share the machine's two
//! cores with the other process tests, or its one-second answer would measure them, not the
//! listener.
#[path = "cli/cluster_support/mod.rs"]
mod cluster_support;
#[path = "cli/serve_support/mod.rs"]
mod serve_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cluster_support::{edge_address, http, spawn_edge, Proc, BIN};
use serde_json::{json, Value};
use serve_support::{free_port, request, token_at, Server, CLIENT_ID, CLIENT_SECRET};

/// The bound on every wait for a connection to be closed (the timeouts under test are 1-2 s;
/// without them nothing closes at all).
const CLOSE_WITHIN: Duration = Duration::from_secs(10);

/// Starts `netacl serve` on a free loopback port with `extra` flags; with `nofile`, under that
/// descriptor limit (soft and hard, set by the shell before `exec`).
fn start_serve(data_dir: &Path, extra: &[&str], nofile: Option<u32>) -> Server {
    let domain = "limits.test";
    let mut command = match nofile {
        Some(limit) => {
            let mut sh = Command::new("sh");
            sh.args([
                "-c",
                &format!("ulimit -n {limit} && exec \"$0\" \"$@\""),
                BIN,
            ]);
            sh
        }
        None => Command::new(BIN),
    };
    let mut child = command
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--tenant-domain", domain])
        .args(["--bootstrap-client-id", CLIENT_ID])
        .args(["--bootstrap-client-secret", CLIENT_SECRET])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn netacl serve");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let addr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            let _ = child.kill();
            panic!("netacl serve did not report its address in time");
        };
        if let Some(rest) = line.strip_prefix("netacl admin API listening on http://") {
            let addr = rest.split_whitespace().next().expect("address");
            break addr.parse::<SocketAddr>().expect("socket address");
        }
    };
    Server {
        child,
        addr,
        domain: domain.to_owned(),
        output: rx,
    }
}

/// Reads one HTTP/1.1 response (status and body, `Content-Length` framing) within 10 s; `None`
/// when the connection closed or timed out first.
fn read_response(stream: &mut TcpStream) -> Option<(u16, String)> {
    stream.set_read_timeout(Some(CLOSE_WITHIN)).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let status = head.split_whitespace().nth(1)?.parse().ok()?;
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = stream.read(&mut chunk).ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).to_string();
            return Some((status, body));
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Whether the server closes `stream` (end of stream or reset) within [`CLOSE_WITHIN`],
/// whatever it sends before.
fn closed_within(stream: &mut TcpStream) -> bool {
    let deadline = Instant::now() + CLOSE_WITHIN;
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// What one slow-client check saw: its name, whether the server closed the connection within
/// 10 s, and the answer it got first.
type Check = (&'static str, bool, Option<(u16, String)>);

/// The four connections a slow client holds, each checked in its own thread: a kept-alive
/// connection after one answered `GET get_path`, a half-sent request head, a connection that
/// sends nothing, and a `POST post_path` whose body trickles in (one byte every 100 ms). Each
/// thread answers the check's name, whether the server closed the connection within 10 s, and
/// the answer it got first.
fn slow_clients(
    addr: SocketAddr,
    get_path: &'static str,
    post_path: &'static str,
) -> Vec<JoinHandle<Check>> {
    let idle = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let head = format!("GET {get_path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        stream.write_all(head.as_bytes()).expect("write");
        let answer = read_response(&mut stream);
        ("idle kept-alive", closed_within(&mut stream), answer)
    });
    let half_sent = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: limits.te")
            .expect("write");
        ("half-sent head", closed_within(&mut stream), None)
    });
    let silent = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        ("silent", closed_within(&mut stream), None)
    });
    let trickled = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let head = format!(
            "POST {post_path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: 1000\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).expect("write");
        let mut writer = stream.try_clone().expect("clone");
        let trickle = std::thread::spawn(move || {
            for _ in 0..150 {
                std::thread::sleep(Duration::from_millis(100));
                if writer.write_all(b" ").is_err() {
                    return;
                }
            }
        });
        let answer = read_response(&mut stream);
        let closed = closed_within(&mut stream);
        let _ = trickle.join();
        ("trickled body", closed, answer)
    });
    vec![idle, half_sent, silent, trickled]
}

/// Joins the checks of [`slow_clients`]: every connection closed; the answers by check name.
fn all_closed(checks: Vec<JoinHandle<Check>>) -> Vec<(&'static str, Option<(u16, String)>)> {
    checks
        .into_iter()
        .map(|check| {
            let (name, closed, answer) = check.join().expect("check thread");
            assert!(closed, "{name}: the connection was not closed within 10 s");
            (name, answer)
        })
        .collect()
}

fn answer_of<'a>(
    answers: &'a [(&'static str, Option<(u16, String)>)],
    name: &str,
) -> Option<&'a (u16, String)> {
    answers
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, a)| a.as_ref())
}

/// A test upstream that reads each request's body in full before it answers `200` with the
/// body's length (`/slow...`: after 2 s); at most 1,000 connections.
fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(1_000) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let end = loop {
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break end;
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while buf.len() < end + 4 + length {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                if head.starts_with("get /slow") {
                    std::thread::sleep(Duration::from_secs(2));
                }
                let body = format!("got {length}");
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    addr
}

/// Sends SIGTERM to `child` and waits (at most 10 s) for it to exit; how long it took.
fn terminate(child: &mut Child) -> Option<Duration> {
    let started = Instant::now();
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -TERM");
    while started.elapsed() < Duration::from_secs(10) {
        if child.try_wait().expect("try_wait").is_some() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn serve_closes_idle_half_sent_silent_and_trickled_connections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_serve(
        dir.path(),
        &[
            "--header-read-timeout",
            "1s",
            "--idle-timeout",
            "2s",
            "--body-timeout",
            "1s",
        ],
        None,
    );
    let answers = all_closed(slow_clients(
        server.addr,
        "/.well-known/jwks.json",
        "/oauth/token",
    ));
    assert_eq!(
        answer_of(&answers, "idle kept-alive").map(|a| a.0),
        Some(200),
        "the kept-alive connection was answered before it went idle"
    );
    // The token endpoint could not read the late body: a 400 (then closed).
    let trickled = answer_of(&answers, "trickled body");
    assert_eq!(trickled.map(|a| a.0), Some(400), "{trickled:?}");
    assert!(
        trickled.is_some_and(|a| a.1.contains("could not be read")),
        "{trickled:?}"
    );
    // The service still answers.
    let token = token_at(server.addr, &server.domain);
    assert!(!token.is_empty());
}

/// A connection to `addr` from the loopback address `from` (127.0.0.X).
fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::new(from.parse().expect("address"), 0))
            .expect("bind");
        tokio::time::timeout(CLOSE_WITHIN, socket.connect(addr))
            .await
            .expect("connect in time")
            .expect("connect")
    });
    let stream = stream.into_std().expect("std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream
}

/// `serve`'s one `--trusted-proxy` (the console's, whose `X-Forwarded-Proto` is believed) is
/// also the set of peers the listener does not count per client: four connections from a
/// trusted proxy are all served under `--max-connections-per-client 2`, while a fourth
/// connection from another address closes that client's oldest idle one.
#[test]
fn serves_trusted_proxies_are_not_counted_per_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_serve(
        dir.path(),
        &[
            "--max-connections-per-client",
            "2",
            "--trusted-proxy",
            "127.0.0.77",
            // Only the cap closes a connection within the test's waits.
            "--header-read-timeout",
            "60s",
        ],
        None,
    );
    let request = b"GET /.well-known/jwks.json HTTP/1.1\r\nHost: limits.test\r\n\r\n";
    // Another client: its third and fourth connections close its two oldest idle ones.
    let mut other: Vec<TcpStream> = (0..4)
        .map(|_| connect_from("127.0.0.78", server.addr))
        .collect();
    assert!(
        closed_within(&mut other[0]),
        "the per-client cap is in force for a peer that is not a trusted proxy"
    );
    // The trusted proxy: all four connections open, each answered.
    let mut proxy: Vec<TcpStream> = (0..4)
        .map(|_| connect_from("127.0.0.77", server.addr))
        .collect();
    for (i, stream) in proxy.iter_mut().enumerate() {
        stream.write_all(request).expect("send");
        assert_eq!(
            read_response(stream).map(|a| a.0),
            Some(200),
            "connection {i} of the trusted proxy"
        );
    }
}

/// Starts `netacl edge --acl off` in front of `upstream` with `extra` flags: the process, its
/// plain-HTTP and metrics addresses.
fn start_edge(upstream: SocketAddr, extra: &[&str]) -> (Proc, SocketAddr, SocketAddr) {
    let (child, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--upstream", &format!("http://{upstream}")])
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(["--acl", "off"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stderr(Stdio::null()),
    );
    (
        child,
        edge_address(&line, "http="),
        edge_address(&line, "metrics="),
    )
}

/// The value of the Prometheus series `series` (exact labels) on the metrics listener.
fn metric(metrics: SocketAddr, series: &str) -> Option<u64> {
    let (status, text) = http(metrics, "GET", "/metrics", &[], "")?;
    assert_eq!(status, 200);
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn the_edge_closes_idle_half_sent_silent_and_trickled_connections() {
    let upstream = upstream();
    let (_edge, addr, metrics) = start_edge(
        upstream,
        &[
            "--header-read-timeout",
            "1s",
            "--idle-timeout",
            "2s",
            "--body-timeout",
            "1s",
        ],
    );
    let answers = all_closed(slow_clients(addr, "/page", "/upload"));
    assert_eq!(
        answer_of(&answers, "idle kept-alive"),
        Some(&(200, "got 0".to_owned()))
    );
    let trickled = answer_of(&answers, "trickled body");
    assert_eq!(trickled.map(|a| a.0), Some(408), "{trickled:?}");
    assert!(trickled.is_some_and(|a| a.1.contains("\"errorCode\":\"request_timeout\"")));
    // A body sent at once passes.
    assert_eq!(
        http(addr, "POST", "/upload", &[], "{\"a\":1}"),
        Some((200, "got 7".to_owned()))
    );
    let proxy = "netacl_edge_listener_timeouts_total{listener=\"proxy\",";
    assert!(metric(metrics, &format!("{proxy}timeout=\"header\"}}")) >= Some(2));
    assert!(metric(metrics, &format!("{proxy}timeout=\"idle\"}}")) >= Some(1));
    assert!(metric(metrics, &format!("{proxy}timeout=\"body\"}}")) >= Some(1));
}

#[test]
fn the_in_process_edge_of_serve_closes_half_sent_and_idle_connections() {
    let upstream = upstream();
    let dir = tempfile::tempdir().expect("tempdir");
    let edge_port = free_port();
    let edge_listen = format!("127.0.0.1:{edge_port}");
    let _server = start_serve(
        dir.path(),
        &[
            "--edge-upstream",
            &format!("http://{upstream}"),
            "--edge-listen",
            &edge_listen,
            "--edge-metrics-listen",
            "off",
            "--edge-header-read-timeout",
            "1s",
            "--edge-idle-timeout",
            "2s",
            "--edge-body-timeout",
            "1s",
        ],
        None,
    );
    let addr: SocketAddr = edge_listen.parse().expect("address");
    let answers = all_closed(slow_clients(addr, "/page", "/upload"));
    assert_eq!(
        answer_of(&answers, "idle kept-alive"),
        Some(&(200, "got 0".to_owned()))
    );
    assert_eq!(answer_of(&answers, "trickled body").map(|a| a.0), Some(408));
}

/// The bounded load test of issue 28: 2,000 connections (half of them silent, half with a
/// half-sent head) from 40 loopback addresses, and a body trickling in, against a `serve`
/// limited to 1,024 descriptors; a normal client's token request and API request are each
/// answered within 1 s. Before the listener limits, the process ran out of descriptors and the
/// normal client's connection was never accepted.
#[test]
fn two_thousand_idle_or_half_sent_connections_and_a_slow_body_do_not_lock_a_client_out() {
    // The test holds 2,000 sockets itself.
    let limit = rlimit::increase_nofile_limit(u64::MAX).expect("raise the descriptor limit");
    assert!(
        limit >= 2_500,
        "the test needs 2,500 descriptors, has {limit}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    // Default limits: the cap is fitted to the descriptor limit (768 of 1,024).
    let server = start_serve(dir.path(), &[], Some(1_024));
    let addr = server.addr;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let (mut held, slow_body) = runtime.block_on(async move {
        use tokio::io::AsyncWriteExt;
        let mut held = Vec::with_capacity(2_000);
        let give_up = Instant::now() + Duration::from_secs(15);
        for i in 0..2_000u32 {
            if Instant::now() > give_up {
                break;
            }
            let from: SocketAddr = format!("127.0.0.{}:0", 10 + i % 40)
                .parse()
                .expect("address");
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket.bind(from).expect("bind");
            let connect = tokio::time::timeout(Duration::from_secs(2), socket.connect(addr)).await;
            let Ok(Ok(mut stream)) = connect else {
                continue;
            };
            if i % 2 == 1 {
                let _ = stream
                    .write_all(b"GET /api/v2/network-acls HTTP/1.1\r\nHost: limits.te")
                    .await;
            }
            held.push(stream);
        }
        let slow_body = tokio::spawn(async move {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket
                .bind("127.0.0.9:0".parse().expect("address"))
                .expect("bind");
            let Ok(mut stream) = socket.connect(addr).await else {
                return;
            };
            let head = "POST /oauth/token HTTP/1.1\r\nHost: limits.test\r\n\
                        Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for _ in 0..300 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if stream.write_all(b" ").await.is_err() {
                    return;
                }
            }
        });
        // Let the server take them all in.
        tokio::time::sleep(Duration::from_millis(500)).await;
        (held, slow_body)
    });
    let opened = held.len();
    let flood = started.elapsed();
    eprintln!("load: {opened} connections opened in {flood:?}");

    let asked = Instant::now();
    let token = token_at(addr, &server.domain);
    let token_time = asked.elapsed();
    let asked = Instant::now();
    let listed = request(addr, "GET", "/api/v2/network-acls", Some(&token), None)
        .expect("the API request is answered");
    let api_time = asked.elapsed();
    assert_eq!(listed.status, 200, "{}", listed.text);

    // How many of the flood's connections the server closed to make room.
    let evicted = runtime.block_on(async {
        let mut closed = 0;
        for stream in &mut held {
            let mut byte = [0u8; 1];
            match stream.try_read(&mut byte) {
                Ok(0) => closed += 1,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                _ => closed += 1,
            }
        }
        closed
    });
    let rss = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        });
    eprintln!(
        "load: {evicted} of them closed by the server to make room; token answered in \
         {token_time:?}, API request in {api_time:?}; serve's resident memory {rss:?}"
    );
    assert!(opened >= 1_900, "only {opened} connections could be opened");
    // Room was made by closing idle connections (the header timeout, 10 s, is not yet due for
    // most of them).
    assert!(evicted >= 1_000, "only {evicted} connections were closed");
    assert!(
        token_time < Duration::from_secs(1),
        "the token request took {token_time:?}"
    );
    assert!(
        api_time < Duration::from_secs(1),
        "the API request took {api_time:?}"
    );
    slow_body.abort();
    drop(held);
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A rule set whose analysis takes many seconds: `count` overlapping rules, each naming CIDRs,
/// ASNs and countries (and excluding some), allow and block in turn (a fixed pseudo-random
/// sequence).
fn slow_analysis_body(count: u32) -> Value {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let countries = [
        "US", "FR", "DE", "GB", "JP", "CN", "BR", "IN", "CA", "AU", "ES", "IT", "NL", "SE", "PL",
    ];
    let acls: Vec<Value> = (0..count)
        .map(|i| {
            let mut cidrs: Vec<String> = Vec::new();
            while cidrs.len() < 6 {
                let cidr = if cidrs.len() < 4 {
                    format!("10.{}.{}.0/24", next(256), next(256))
                } else {
                    format!("10.{}.0.0/16", next(256))
                };
                if !cidrs.contains(&cidr) {
                    cidrs.push(cidr);
                }
            }
            cidrs.push(
                if i % 3 == 0 {
                    "10.128.0.0/9"
                } else {
                    "10.0.0.0/9"
                }
                .to_owned(),
            );
            // Distinct values (a list with a repeated value is refused).
            let mut asns: Vec<u64> = Vec::new();
            while asns.len() < 4 {
                let asn = 1 + next(11);
                if !asns.contains(&asn) {
                    asns.push(asn);
                }
            }
            let mut codes: Vec<&str> = Vec::new();
            while codes.len() < 6 {
                let code = countries[next(countries.len() as u64) as usize];
                if !codes.contains(&code) {
                    codes.push(code);
                }
            }
            let action = if i % 2 == 1 {
                json!({"block": true})
            } else {
                json!({"allow": true})
            };
            json!({
                "description": format!("rule {i}"),
                "active": true,
                "priority": 1 + i % 100,
                "rule": {
                    "action": action,
                    "scope": "tenant",
                    "match": {"ipv4_cidrs": cidrs, "asns": asns, "geo_country_codes": codes},
                    "not_match": {
                        "ipv4_cidrs": [format!("10.{}.{}.0/24", next(256), next(256))],
                        "asns": [1 + next(11)]
                    }
                }
            })
        })
        .collect();
    json!({ "network_acls": acls })
}

/// SIGTERM while a long analysis runs (its blocking task would keep the runtime's drop
/// waiting): the process is gone within 10 s.
#[test]
fn sigterm_stops_serve_within_ten_seconds_while_an_analysis_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The analysis's own bounds (work units, deadline) lifted, so that only the stop ends it.
    let mut server = start_serve(
        dir.path(),
        &[
            "--analysis-work",
            "100000000000",
            "--analysis-deadline",
            "10m",
        ],
        None,
    );
    let token = server.token();
    let addr = server.addr;
    let body = slow_analysis_body(800);
    let (sent, analysing) = mpsc::channel();
    let poster = std::thread::spawn(move || {
        let _ = sent.send(());
        request(
            addr,
            "POST",
            "/_netacl/v1/network-acls/analyze",
            Some(&token),
            Some(&body),
        )
    });
    analysing.recv().expect("posting");
    // The request is read and the analysis under way.
    std::thread::sleep(Duration::from_millis(1_500));
    if poster.is_finished() {
        let answer = poster.join().expect("poster");
        panic!(
            "the analysis answered within 1.5 s, it is not long enough for this test: {:?}",
            answer.map(|a| (a.status, a.text.chars().take(300).collect::<String>()))
        );
    }
    let stopped = terminate(&mut server.child);
    eprintln!("serve exited {stopped:?} after SIGTERM during the analysis");
    assert!(
        stopped.is_some(),
        "netacl serve still runs 10 s after SIGTERM"
    );
    let _ = poster.join();
}

/// SIGTERM while a request through the edge waits for its upstream: the request is answered,
/// then the edge exits (within 10 s).
#[test]
fn sigterm_lets_a_request_in_flight_through_the_edge_finish_then_it_exits() {
    let upstream = upstream();
    let (mut edge, addr, _) = start_edge(upstream, &[]);
    let client = std::thread::spawn(move || http(addr, "GET", "/slow", &[], ""));
    std::thread::sleep(Duration::from_millis(500));
    let stopped = terminate(&mut edge.0);
    assert_eq!(
        client.join().expect("client"),
        Some((200, "got 0".to_owned())),
        "the request in flight was answered"
    );
    eprintln!("edge exited {stopped:?} after SIGTERM");
    assert!(
        stopped.is_some(),
        "netacl edge still runs 10 s after SIGTERM"
    );
}

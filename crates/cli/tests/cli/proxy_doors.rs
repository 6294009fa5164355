//! The shipped proxy configurations (`deploy/nginx`, `deploy/caddy`) run by the real nginx and
//! Caddy in front of a counting upstream, each asking the release `netacl edge
//! --forward-auth-listen` about every request. Clients connect from distinct loopback
//! addresses (127.0.0.X). A missing proxy binary fails the test (CI installs both).
//! Loopback only; every wait is bounded.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster_support::{edge_address, free_port, http, spawn_edge, wait_for, Proc, BIN};

const POLL: Duration = Duration::from_millis(100);

const BLOCK_IP: &str = "acl_Door111111111111111111";
const REDIRECT_IP: &str = "acl_Door222222222222222222";
const LOG_IP: &str = "acl_Door333333333333333333";
const BAD_AGENT: &str = "acl_Door444444444444444444";
const BAD_HOST: &str = "acl_Door555555555555555555";
const ADDED: &str = "acl_Door666666666666666666";
const REDIRECT_URI: &str = "https://example.com/challenge?from=acl";

/// The placeholders of the shipped templates, and nothing else (as `envsubst` restricted to
/// these names substitutes them).
const PLACEHOLDERS: [&str; 6] = [
    "NETACL_ADDR",
    "UPSTREAM_ADDR",
    "LISTEN_ADDR",
    "LISTEN_HOST",
    "LISTEN_PORT",
    "NETACL_DEPLOY_DIR",
];

/// `template` with `${NAME}` replaced by its value for the six names; any other `${...}` is a
/// placeholder the shipped files must not have, and fails the test.
fn render(template: &str, values: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').expect("a closed placeholder");
        let name = &after[..end];
        assert!(
            PLACEHOLDERS.contains(&name),
            "unknown placeholder ${{{name}}}"
        );
        let value = values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .expect("a value for every placeholder");
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Renders `deploy/<proxy>/<file>.template` into `dir/<proxy>/<file>`.
fn render_into(dir: &Path, proxy: &str, file: &str, values: &[(&str, String)]) -> PathBuf {
    let template = repository().join(format!("deploy/{proxy}/{file}.template"));
    let text = std::fs::read_to_string(&template).expect("the shipped template");
    let folder = dir.join(proxy);
    std::fs::create_dir_all(&folder).expect("proxy folder");
    let path = folder.join(file);
    std::fs::write(&path, render(&text, values)).expect("rendered file");
    path
}

fn record(id: &str, priority: u64, action: &str, criteria: &str) -> String {
    format!(
        r#"{{"id":"{id}","description":"t","active":true,"priority":{priority},
            "rule":{{"action":{action},"scope":"tenant","match":{criteria}}},
            "created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z"}}"#
    )
}

fn rules(extra: &[String]) -> String {
    let mut all = vec![
        record(
            BLOCK_IP,
            1,
            r#"{"block":true}"#,
            r#"{"ipv4_cidrs":["127.0.0.3/32"]}"#,
        ),
        record(
            REDIRECT_IP,
            2,
            &format!(r#"{{"redirect":true,"redirect_uri":"{REDIRECT_URI}"}}"#),
            r#"{"ipv4_cidrs":["127.0.0.4/32"]}"#,
        ),
        record(
            LOG_IP,
            3,
            r#"{"log":true}"#,
            r#"{"ipv4_cidrs":["127.0.0.5/32"]}"#,
        ),
        record(
            BAD_AGENT,
            4,
            r#"{"block":true}"#,
            r#"{"user_agents":["EvilBot/*"]}"#,
        ),
        record(
            BAD_HOST,
            5,
            r#"{"block":true}"#,
            r#"{"hostnames":["blocked.example"]}"#,
        ),
    ];
    all.extend_from_slice(extra);
    format!("[{}]", all.join(","))
}

fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// A loopback HTTP/1.1 upstream answering `200 upstream` (one request a connection) and
/// counting the requests it got; its thread ends with the test process.
fn counting_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(100_000) {
            let Ok(mut stream) = stream else { continue };
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65_536 {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nupstream",
                );
            });
        }
    });
    (addr, hits)
}

/// One answer: status, headers (lowercased names), body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A GET of `path` to `to` from the loopback address `from`, with `headers` (`Host` first
/// unless given); `None` when no answer came within 10 s.
fn get_from(
    from: Ipv4Addr,
    to: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<Answer> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request.push_str("Host: app.example\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    let raw = runtime.block_on(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = tokio::net::TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::from((from, 0))).ok()?;
        let mut stream = tokio::time::timeout(Duration::from_secs(5), socket.connect(to))
            .await
            .ok()?
            .ok()?;
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
            .await
            .ok()?
            .ok()?;
        Some(raw)
    })?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}

fn client(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

/// `netacl edge` with only its forward-auth door, trusting the proxy on 127.0.0.1.
fn start_netacl(rules_file: &Path) -> (Proc, SocketAddr, SocketAddr) {
    let (child, line) = spawn_edge(
        Command::new(BIN)
            .arg("edge")
            .args(["--forward-auth-listen", "127.0.0.1:0"])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .args(["--trusted-proxy", "127.0.0.1/32"])
            .args(["--rules-file", rules_file.to_str().expect("utf-8 path")])
            .args(["--rules-file-interval", "100ms"])
            .env("RUST_LOG", "warn")
            .stderr(Stdio::null()),
    );
    (
        child,
        edge_address(&line, "forward_auth="),
        edge_address(&line, "metrics="),
    )
}

/// A proxy process stopped with SIGTERM (nginx's workers go with their master), killed if it
/// is still there 10 s later.
struct ProxyProc(std::process::Child);

impl Drop for ProxyProc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's binary where the package puts it (`/usr/sbin` is not on every user's PATH), else
/// `name` from PATH (a missing one fails the test when it is started).
fn installed(name: &str, debian: &str) -> String {
    if Path::new(debian).exists() {
        debian.to_owned()
    } else {
        name.to_owned()
    }
}

fn start_proxy(mut command: Command, listen: SocketAddr) -> ProxyProc {
    let program = command.get_program().to_string_lossy().into_owned();
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} must be installed (CI installs it): {e}"));
    let mut proxy = ProxyProc(child);
    let up = wait_for(Duration::from_secs(20), POLL, || {
        if let Ok(Some(status)) = proxy.0.try_wait() {
            panic!("{program} exited at start: {status}");
        }
        TcpStream::connect_timeout(&listen, Duration::from_secs(1)).is_ok()
    });
    assert!(
        up.is_some(),
        "{program} did not listen on {listen} within 20 s"
    );
    proxy
}

fn metrics_text(metrics: SocketAddr) -> String {
    let (code, text) = http(metrics, "GET", "/metrics", &[], "").expect("metrics");
    assert_eq!(code, 200);
    text
}

/// Every case of the brief, through the proxy on `listen`.
fn check_cases(
    listen: SocketAddr,
    hits: &AtomicUsize,
    rules_file: &Path,
    netacl: Proc,
    metrics: SocketAddr,
) {
    let hits_now = || hits.load(Ordering::SeqCst);
    let expect = |from: u8, headers: &[(&str, &str)]| {
        get_from(client(from), listen, "/app?x=1", headers)
            .unwrap_or_else(|| panic!("no answer for 127.0.0.{from}"))
    };

    // Allowed: reaches the upstream.
    let before = hits_now();
    let answer = expect(2, &[]);
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert_eq!(answer.body, "upstream");
    assert_eq!(hits_now(), before + 1);

    // Blocked: 403 in the error shape, the upstream not reached; a claimed address changes
    // nothing (the proxy sets the forwarding header itself).
    let before = hits_now();
    for claim in [None, Some("127.0.0.2"), Some("127.0.0.2, 127.0.0.1")] {
        let headers: Vec<(&str, &str)> =
            claim.map(|c| ("X-Forwarded-For", c)).into_iter().collect();
        let answer = expect(3, &headers);
        assert_eq!(answer.status, 403, "claim {claim:?}: {}", answer.head);
        assert!(
            answer.body.contains(r#""errorCode":"blocked""#),
            "{}",
            answer.body
        );
    }
    assert_eq!(hits_now(), before, "a blocked client reached the upstream");

    // Redirect: 302 to the rule's redirect_uri, the upstream not reached.
    let answer = expect(4, &[]);
    assert_eq!(answer.status, 302, "{}", answer.head);
    assert_eq!(answer.header("location"), Some(REDIRECT_URI));
    assert_eq!(hits_now(), before);

    // A `log` rule's client reaches the upstream and is counted.
    let answer = expect(5, &[]);
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert_eq!(hits_now(), before + 1);
    let text = metrics_text(metrics);
    let logged = format!(
        "netacl_edge_rule_matched_total{{rule_id=\"{LOG_IP}\",action=\"log\",scope=\"tenant\"}} 1\n"
    );
    assert!(text.contains(&logged), "{text}");
    let blocked = format!(
        "netacl_edge_rule_matched_total{{rule_id=\"{BLOCK_IP}\",action=\"block\",scope=\"tenant\"}} 3\n"
    );
    assert!(text.contains(&blocked), "{text}");
    assert!(
        text.contains(
            "netacl_edge_door_requests_total{door=\"forward_auth\",answer=\"block\"} 3\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("netacl_edge_listener_connections_accepted_total{listener=\"forward_auth\"}"),
        "{text}"
    );

    // A user-agent rule.
    let before = hits_now();
    assert_eq!(expect(6, &[("User-Agent", "EvilBot/2.1")]).status, 403);
    assert_eq!(hits_now(), before);
    assert_eq!(expect(6, &[("User-Agent", "GoodBot/2.1")]).status, 200);
    assert_eq!(hits_now(), before + 1);

    // A hostname rule.
    let before = hits_now();
    assert_eq!(expect(6, &[("Host", "blocked.example")]).status, 403);
    assert_eq!(hits_now(), before);
    assert_eq!(expect(6, &[("Host", "open.example")]).status, 200);
    assert_eq!(hits_now(), before + 1);

    // A rule added to the rules file is enforced through the proxy within 5 s.
    assert_eq!(expect(7, &[]).status, 200);
    write_atomically(
        rules_file,
        &rules(&[record(
            ADDED,
            6,
            r#"{"block":true}"#,
            r#"{"ipv4_cidrs":["127.0.0.7/32"]}"#,
        )]),
    );
    let enforced = wait_for(Duration::from_secs(5), POLL, || {
        get_from(client(7), listen, "/app", &[]).is_some_and(|a| a.status == 403)
    });
    assert!(
        enforced.is_some(),
        "the added rule was not enforced within 5 s"
    );

    // netacl stopped: no 2xx, the upstream not reached (fail closed).
    drop(netacl);
    let before = hits_now();
    for from in [2, 5] {
        if let Some(answer) = get_from(client(from), listen, "/app", &[]) {
            assert!(
                !(200..300).contains(&answer.status),
                "with netacl stopped 127.0.0.{from} got {}",
                answer.status
            );
        }
    }
    assert_eq!(
        hits_now(),
        before,
        "with netacl stopped the upstream was reached"
    );
}

struct Setup {
    dir: tempfile::TempDir,
    rules_file: PathBuf,
    netacl: Proc,
    door: SocketAddr,
    metrics: SocketAddr,
    upstream: SocketAddr,
    hits: Arc<AtomicUsize>,
    listen: SocketAddr,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules_file = dir.path().join("rules.json");
    write_atomically(&rules_file, &rules(&[]));
    let (netacl, door, metrics) = start_netacl(&rules_file);
    let (upstream, hits) = counting_upstream();
    let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
    Setup {
        dir,
        rules_file,
        netacl,
        door,
        metrics,
        upstream,
        hits,
        listen,
    }
}

fn values(setup: &Setup) -> Vec<(&'static str, String)> {
    vec![
        ("NETACL_ADDR", setup.door.to_string()),
        ("UPSTREAM_ADDR", setup.upstream.to_string()),
        ("LISTEN_ADDR", setup.listen.to_string()),
        ("LISTEN_HOST", setup.listen.ip().to_string()),
        ("LISTEN_PORT", setup.listen.port().to_string()),
        (
            "NETACL_DEPLOY_DIR",
            setup.dir.path().to_str().expect("utf-8 path").to_owned(),
        ),
    ]
}

#[test]
fn nginx_with_the_shipped_template_asks_netacl_about_every_request() {
    let setup = setup();
    let config = render_into(setup.dir.path(), "nginx", "nginx.conf", &values(&setup));
    let prefix = setup.dir.path().join("nginx");
    let mut command = Command::new(installed("nginx", "/usr/sbin/nginx"));
    command
        .arg("-p")
        .arg(format!("{}/", prefix.display()))
        .arg("-c")
        .arg(&config);
    let _nginx = start_proxy(command, setup.listen);
    check_cases(
        setup.listen,
        &setup.hits,
        &setup.rules_file,
        setup.netacl,
        setup.metrics,
    );
}

#[test]
fn caddy_with_the_shipped_template_asks_netacl_about_every_request() {
    let setup = setup();
    let config = render_into(setup.dir.path(), "caddy", "Caddyfile", &values(&setup));
    let mut command = Command::new(installed("caddy", "/usr/bin/caddy"));
    command
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&config)
        // Caddy 2.6 saves the config it runs under XDG_CONFIG_HOME: keep it in the folder.
        .env("XDG_CONFIG_HOME", setup.dir.path().join("caddy"))
        .env("XDG_DATA_HOME", setup.dir.path().join("caddy"));
    let _caddy = start_proxy(command, setup.listen);
    check_cases(
        setup.listen,
        &setup.hits,
        &setup.rules_file,
        setup.netacl,
        setup.metrics,
    );
}

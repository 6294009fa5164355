//! The shipped HAProxy configuration (`deploy/haproxy/`), rendered as an operator renders it
//! and run by the real HAProxy, in front of a counting upstream, asking the agent served by this
//! process. Clients connect from distinct loopback addresses (127.0.0.X).
//!
//! Every HAProxy named in `NETACL_TEST_HAPROXY` (executables separated by `:`; default
//! `haproxy`, Debian 12's 2.6) runs each case in turn. `.ci/run` names two: Debian 12's 2.6 and
//! Debian unstable's 3.x (`.ci/haproxy_next.py`), whose SPOE is the multiplexer of 3.1 and
//! later; under CI, a run without a HAProxy of 3.1 or later fails.
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use netacl_doors::spoe::{start_spoe, SpoeConfig};
use netacl_listener::ConnectionLimits;
use netacl_model::{AclId, Limits, RuleSet};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

use crate::rule;

/// The placeholders the shipped templates may use, and nothing else (as `envsubst` with a
/// list of names substitutes).
const PLACEHOLDERS: [&str; 6] = [
    "NETACL_ADDR",
    "UPSTREAM_ADDR",
    "LISTEN_ADDR",
    "LISTEN_HOST",
    "LISTEN_PORT",
    "NETACL_DEPLOY_DIR",
];

fn render(template: &Path, values: &[(&str, String)], out: &Path) {
    let mut text = std::fs::read_to_string(template).unwrap();
    for name in PLACEHOLDERS {
        let value = &values.iter().find(|(n, _)| *n == name).unwrap().1;
        text = text.replace(&format!("${{{name}}}"), value);
    }
    assert!(
        !text.contains("${"),
        "{} uses a placeholder outside the six",
        template.display()
    );
    std::fs::write(out, text).unwrap();
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One HAProxy executable to run the shipped configuration with, and the version it reports.
#[derive(Debug, Clone)]
pub(crate) struct HaproxyBinary {
    pub(crate) path: PathBuf,
    pub(crate) version: String,
}

/// The HAProxy executables of `NETACL_TEST_HAPROXY` (see the module docs), each asked its
/// version (`haproxy -v`). Under CI, one of them must be 3.1 or later.
pub(crate) fn haproxy_binaries() -> Vec<HaproxyBinary> {
    let listed = std::env::var("NETACL_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into());
    let binaries: Vec<HaproxyBinary> = listed
        .split(':')
        .filter(|p| !p.is_empty())
        .map(|path| {
            let out = Command::new(path).arg("-v").output().unwrap_or_else(|e| {
                panic!("haproxy `{path}` does not run ({e}): .ci/run installs Debian's package")
            });
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let version = text
                .split_whitespace()
                .skip_while(|w| *w != "version")
                .nth(1)
                .unwrap_or_else(|| panic!("no version in `{path} -v`: {text}"))
                .to_owned();
            HaproxyBinary {
                path: PathBuf::from(path),
                version,
            }
        })
        .collect();
    assert!(!binaries.is_empty(), "NETACL_TEST_HAPROXY names no HAProxy");
    if std::env::var_os("CI").is_some() {
        assert!(
            binaries.iter().any(|b| at_least(&b.version, (3, 1))),
            "under CI the shipped configuration must also run on HAProxy 3.1 or later (its SPOE \
             multiplexer); NETACL_TEST_HAPROXY names {binaries:?}"
        );
    }
    binaries
}

/// Whether a version such as `3.2.26-1` is at least `major.minor`.
fn at_least(version: &str, (major, minor): (u32, u32)) -> bool {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

#[test]
fn versions_compare_by_major_then_minor() {
    assert!(at_least("3.2.26-1", (3, 1)));
    assert!(at_least("3.1.0", (3, 1)));
    assert!(!at_least("2.6.12-1+deb12u4", (3, 1)));
    assert!(!at_least("3.0.11-1+deb13u4", (3, 1)));
    assert!(at_least("10.0", (3, 1)));
}

pub(crate) struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Renders the shipped HAProxy files into `dir/haproxy/` for `agent` and `upstream` (with the
/// operator's TLS bind when `tls_pem` is given: the shipped `bind` line with `ssl crt`), starts
/// HAProxy in the foreground on them and waits until it listens. HAProxy stops when the handle
/// is dropped.
pub(crate) async fn start_haproxy(
    binary: &HaproxyBinary,
    dir: &Path,
    agent: SocketAddr,
    upstream: SocketAddr,
    tls_pem: Option<&Path>,
) -> (Haproxy, SocketAddr) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let values = [
        ("NETACL_ADDR", agent.to_string()),
        ("UPSTREAM_ADDR", upstream.to_string()),
        ("LISTEN_ADDR", listen.clone()),
        ("LISTEN_HOST", "127.0.0.1".to_string()),
        ("LISTEN_PORT", port.to_string()),
        ("NETACL_DEPLOY_DIR", dir.display().to_string()),
    ];
    for file in ["haproxy.cfg", "netacl-spoe.conf"] {
        render(
            &repo().join(format!("deploy/haproxy/{file}.template")),
            &values,
            &dir.join("haproxy").join(file),
        );
    }
    let cfg = dir.join("haproxy/haproxy.cfg");
    if let Some(pem) = tls_pem {
        let text = std::fs::read_to_string(&cfg).unwrap();
        let bind = format!("    bind {listen}\n");
        assert!(text.contains(&bind), "the shipped bind line");
        let text = text.replace(
            &bind,
            &format!("    bind {listen} ssl crt {}\n", pem.display()),
        );
        std::fs::write(&cfg, text).unwrap();
    }
    let haproxy = Haproxy(
        Command::new(&binary.path)
            .arg("-f")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("haproxy {binary:?} does not start: {e}")),
    );
    let proxy = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    while tokio::net::TcpStream::connect(proxy).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "haproxy {} did not listen",
            binary.version
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (haproxy, proxy)
}

/// The upstream: answers 200 to everything, and keeps each request's head.
pub(crate) async fn upstream() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let kept = Arc::clone(&kept);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    (addr, seen)
}

/// One request from `from` (a loopback address): the status and the response head.
async fn get(proxy: SocketAddr, from: &str, host: &str, extra: &str) -> (u16, String) {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse::<IpAddr>().unwrap(), 0))
        .unwrap();
    let mut s = tokio::time::timeout(Duration::from_secs(5), socket.connect(proxy))
        .await
        .unwrap()
        .unwrap();
    let request = format!(
        "GET /authorize?client_id=abc HTTP/1.1\r\nhost: {host}\r\n{extra}connection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut response))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (status, text)
}

fn rules(extra: Vec<Value>) -> RuleSet {
    let mut all = vec![
        rule(
            1,
            1,
            json!({"block": true}),
            json!({"match": {"ipv4_cidrs": ["127.0.0.2/32"]}}),
        ),
        rule(
            2,
            2,
            json!({"redirect": true, "redirect_uri": "https://example.test/moved"}),
            json!({"match": {"user_agents": ["moved/*"]}}),
        ),
        rule(
            3,
            3,
            json!({"log": true}),
            json!({"match": {"hostnames": ["logged.example.test"]}}),
        ),
        rule(
            4,
            4,
            json!({"block": true}),
            json!({"match": {"hostnames": ["blocked.example.test"]}}),
        ),
        rule(
            5,
            5,
            json!({"block": true}),
            json!({"match": {"user_agents": ["badbot/*"]}}),
        ),
    ];
    all.extend(extra);
    RuleSet::from_json(&Value::Array(all), 1, &Limits::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_with_the_shipped_configuration_enforces_the_agents_decisions() {
    for binary in haproxy_binaries() {
        eprintln!("HAProxy {}", binary.version);
        enforces_the_agents_decisions(&binary).await;
    }
}

async fn enforces_the_agents_decisions(binary: &HaproxyBinary) {
    let enforcer = Arc::new(crate::enforcer());
    enforcer.apply_rules(&rules(Vec::new())).unwrap();
    let agent = start_spoe(
        Arc::clone(&enforcer),
        SpoeConfig::new("127.0.0.1:0".parse().unwrap(), ConnectionLimits::default()),
    )
    .await
    .unwrap();
    let agent_addr = agent.local_addr();
    let (upstream_addr, seen) = upstream().await;

    let dir = std::env::temp_dir().join(format!(
        "netacl-haproxy-{}-{}",
        std::process::id(),
        binary.version
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("haproxy")).unwrap();
    let (_haproxy, proxy) = start_haproxy(binary, &dir, agent_addr, upstream_addr, None).await;
    let hits = || seen.lock().unwrap().len();

    // Allowed: reaches the upstream, with the decision in a header.
    let (status, _) = get(proxy, "127.0.0.1", "app.example.test", "").await;
    assert_eq!(status, 200);
    assert_eq!(hits(), 1);
    assert!(seen.lock().unwrap()[0]
        .to_ascii_lowercase()
        .contains("x-netacl-decision: none"));

    // Blocked by address: 403, the upstream not reached; claiming another address in a
    // forwarding header changes nothing.
    let (status, _) = get(proxy, "127.0.0.2", "app.example.test", "").await;
    assert_eq!(status, 403);
    let (status, _) = get(
        proxy,
        "127.0.0.2",
        "app.example.test",
        "x-forwarded-for: 198.51.100.7\r\n",
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(hits(), 1);

    // Redirect: 302 to the rule's target.
    let (status, head) = get(
        proxy,
        "127.0.0.3",
        "app.example.test",
        "user-agent: moved/2\r\n",
    )
    .await;
    assert_eq!(status, 302);
    assert!(
        head.to_ascii_lowercase()
            .contains("location: https://example.test/moved"),
        "{head}"
    );
    assert_eq!(hits(), 1);

    // A user-agent rule and a hostname rule.
    let (status, _) = get(
        proxy,
        "127.0.0.4",
        "app.example.test",
        "user-agent: badbot/1\r\n",
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = get(proxy, "127.0.0.4", "blocked.example.test", "").await;
    assert_eq!(status, 403);
    assert_eq!(hits(), 1);

    // A `log` rule: passed, counted, and named to the upstream.
    let (status, _) = get(proxy, "127.0.0.5", "logged.example.test", "").await;
    assert_eq!(status, 200);
    assert_eq!(hits(), 2);
    let logged = AclId::from_random(3);
    assert!(seen.lock().unwrap()[1]
        .to_ascii_lowercase()
        .contains(&format!("x-netacl-monitored: {logged}").to_ascii_lowercase()));
    let counted = enforcer
        .metrics()
        .rule_stats()
        .into_iter()
        .find(|s| s.rule_id == logged)
        .map(|s| s.matched);
    assert_eq!(counted, Some(1));

    // A rule added while HAProxy runs: enforced on the next request.
    enforcer
        .apply_rules(&rules(vec![rule(
            6,
            6,
            json!({"block": true}),
            json!({"match": {"ipv4_cidrs": ["127.0.0.6/32"]}}),
        )]))
        .unwrap();
    let (status, _) = get(proxy, "127.0.0.6", "app.example.test", "").await;
    assert_eq!(status, 403);
    assert_eq!(hits(), 2);

    // The agent gone: no 2xx, and the upstream is not reached.
    agent.close();
    drop(agent);
    for from in ["127.0.0.1", "127.0.0.7"] {
        let (status, _) = get(proxy, from, "app.example.test", "").await;
        assert!(
            !(200..300).contains(&status),
            "got {status} with the agent down (HAProxy {})",
            binary.version
        );
    }
    assert_eq!(hits(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

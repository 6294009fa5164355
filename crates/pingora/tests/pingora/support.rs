//! A running `netacl-pingora` (the release binary), a counting upstream, a rule file, and an
//! HTTP/1.1 client that connects from a chosen loopback address. Loopback only; every wait is
//! bounded.
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

pub const BIN: &str = env!("CARGO_BIN_EXE_netacl-pingora");

/// Rule ids of the tests' records.
pub const ID1: &str = "acl_6dL8L5Vqc1TxxXRuLhzD7c";
pub const ID2: &str = "acl_7eM9M6Wrd2UyyYSvMizE8d";

/// Kills the process when dropped.
pub struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

/// A running `netacl-pingora`, its rule file and its addresses.
pub struct Pingora {
    pub proc: Proc,
    pub http: SocketAddr,
    pub tls: Option<SocketAddr>,
    pub metrics: SocketAddr,
    pub rules: PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts `netacl-pingora` in front of `upstream` with `rules` (a JSON text) in its rule file,
/// listening on loopback (plain, and TLS with `tls`), with `extra` flags.
pub fn start(
    upstream: SocketAddr,
    rules: &str,
    tls: Option<&netacl_edge::TlsFiles>,
    extra: &[&str],
) -> Pingora {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.json");
    write_rules(&path, rules);
    let mut command = Command::new(BIN);
    command
        .args(["--upstream", &upstream.to_string()])
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .args(["--rules-file", path.to_str().expect("utf-8 path")])
        .args(["--rules-file-interval", "100ms"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(files) = tls {
        command
            .args(["--listen-tls", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(&files.cert)
            .arg("--tls-key")
            .arg(&files.key);
    }
    let mut child = command.spawn().expect("spawn netacl-pingora");
    let stdout = child.stdout.take().expect("stdout");
    let proc = Proc(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("netacl-pingora printed its addresses");
    let address = |key: &str| -> Option<SocketAddr> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|a| a.parse().ok())
    };
    Pingora {
        proc,
        http: address("http=").unwrap_or_else(|| panic!("no http= in {line:?}")),
        tls: address("tls="),
        metrics: address("metrics=").unwrap_or_else(|| panic!("no metrics= in {line:?}")),
        rules: path,
        _dir: dir,
    }
}

/// Replaces the rule file at once (a rename), as an operator's deploy does.
pub fn write_rules(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write rules");
    std::fs::rename(&tmp, path).expect("rename rules");
}

/// One rule record: `action` is the action object's JSON (`{"block":true}`), `criteria` the
/// match's.
pub fn record(id: &str, priority: u64, action: &str, criteria: &str) -> String {
    format!(
        r#"{{"id":"{id}","description":"t","active":true,"priority":{priority},
            "rule":{{"action":{action},"scope":"tenant","match":{criteria}}},
            "created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z"}}"#
    )
}

/// A JSON array of records.
pub fn rules(records: &[String]) -> String {
    format!("[{}]", records.join(","))
}

/// An upstream answering `200 upstream` to every request, counting them and keeping the last
/// request head it received.
#[derive(Clone)]
pub struct Upstream {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    last: Arc<Mutex<String>>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind upstream");
        let addr = listener.local_addr().expect("addr");
        let hits = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(Mutex::new(String::new()));
        let (h, l) = (Arc::clone(&hits), Arc::clone(&last));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (h, l) = (Arc::clone(&h), Arc::clone(&l));
                tokio::spawn(serve_upstream(stream, h, l));
            }
        });
        Upstream { addr, hits, last }
    }

    /// Requests the upstream answered.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The last request head the upstream received.
    pub fn last_head(&self) -> String {
        self.last.lock().expect("lock").clone()
    }
}

/// Serves HTTP/1.1 keep-alive requests without bodies (what the tests send).
async fn serve_upstream(mut stream: TcpStream, hits: Arc<AtomicUsize>, last: Arc<Mutex<String>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            if buf.len() > 65536 {
                return;
            }
            match tokio::time::timeout(Duration::from_secs(30), stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        }
        let end = buf
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(buf.len(), |p| p + 4);
        let head: Vec<u8> = buf.drain(..end).collect();
        *last.lock().expect("lock") = String::from_utf8_lossy(&head).into_owned();
        hits.fetch_add(1, Ordering::SeqCst);
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nupstream";
        if stream.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// An answer: status, headers (lowercased names) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A TCP connection to `to` from the loopback address `from`.
pub async fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(from, 0)).expect("bind client");
    tokio::time::timeout(Duration::from_secs(5), socket.connect(to))
        .await
        .expect("connect in time")
        .expect("connect")
}

/// A GET of `path` with `headers` (`Host` is `host`) on a new connection from `from`; the
/// connection is closed after the answer.
pub async fn get_from(
    from: IpAddr,
    to: SocketAddr,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut stream = connect_from(from, to).await;
    exchange(&mut stream, path, host, headers, true).await
}

/// A GET from 127.0.0.1 with the default host.
pub async fn get(to: SocketAddr, path: &str) -> Answer {
    get_from(local(1), to, path, "app.test", &[]).await
}

/// `127.0.0.X`.
pub fn local(x: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, x])
}

/// One request on an open connection (closed after it with `close`); the answer, read in full
/// (`content-length` bodies).
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    close: bool,
) -> Answer {
    let mut request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        request.push_str("connection: close\r\n");
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    read_answer(stream)
        .await
        .unwrap_or_else(|| panic!("an answer to GET {path}"))
}

/// Reads one answer (head and a `content-length` body) within 10 s.
pub async fn read_answer<S: AsyncRead + Unpin>(stream: &mut S) -> Option<Answer> {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let end = buf.len().min(head_end + length);
        let body = String::from_utf8_lossy(&buf[head_end..end]).into_owned();
        Some(Answer {
            status,
            headers,
            body,
        })
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()
        .flatten()
}

/// The text of `/metrics`.
pub async fn metrics(addr: SocketAddr) -> String {
    get(addr, "/metrics").await.body
}

/// The value of the metrics line starting with `series ` (0 when absent).
pub async fn metric(addr: SocketAddr, series: &str) -> u64 {
    let text = metrics(addr).await;
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Waits (at most `limit`, polling every 50 ms) for `f` to hold.
pub async fn wait_until<F, Fut>(limit: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits for the policy version shown in `/metrics` to pass `after` (a rule file reloaded).
pub async fn wait_version_after(metrics_addr: SocketAddr, after: u64) -> u64 {
    let start = Instant::now();
    loop {
        let seen = metric(metrics_addr, "netacl_edge_policy_version").await;
        if seen > after {
            return seen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the rule file was not reloaded (version {seen})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

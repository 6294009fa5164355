//! Running the real `netacl serve` binary on loopback, and a minimal HTTP/1.1 client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const CLIENT_ID: &str = "serve-test";
pub const CLIENT_SECRET: &str = "serve-test-secret-0123456789abcdefghij";

/// A running `netacl serve`.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub domain: String,
}

impl Server {
    /// Starts the binary on `data_dir` and waits (at most 60 s) until it prints where it listens.
    pub fn start(data_dir: &Path, listen: &str, domain: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_netacl"))
            .arg("serve")
            .args(["--listen", listen])
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
            let line = match rx.recv_timeout(left) {
                Ok(line) => line,
                Err(_) => {
                    let _ = child.kill();
                    panic!("netacl serve did not report its address in time");
                }
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
        }
    }

    /// SIGKILL, then reap.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A token for the bootstrap client.
    pub fn token(&self) -> String {
        let body = serde_json::json!({
            "grant_type": "client_credentials",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "audience": format!("https://{}/api/v2/", self.domain),
        });
        let answer = request(self.addr, "POST", "/oauth/token", None, Some(&body)).expect("token");
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()["access_token"]
            .as_str()
            .expect("access_token")
            .to_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound and released; a tiny race that tests accept).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text).unwrap_or(serde_json::Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), 10 s timeouts. `Err` on any
/// I/O failure (the server died mid-request).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&serde_json::Value>,
) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw).ok_or_else(|| std::io::Error::other("malformed or truncated HTTP answer"))
}

fn parse(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let body = &raw[split + 4..];
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok());
    if let Some(length) = length {
        if body.len() != length {
            return None;
        }
    }
    Some(Answer {
        status,
        headers,
        text: String::from_utf8_lossy(body).into_owned(),
    })
}

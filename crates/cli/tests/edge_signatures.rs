//! Signed-proxy rules (`http_message_signature`, RFC 9421) through running edges: the edge of
//! `netacl serve --edge-*` (keys from the tenant runtime) and a `netacl edge --rules-url` fed
//! over the watch (keys sealed to the edge with HPKE, over loopback), with a block rule
//! `not_match: {http_message_signature: {keys: [K]}}` and every way a signature can fail; a
//! remote edge whose client lacks `read:network_acl_key_material`; a rule-file edge. The first
//! test also records every HTTP answer, both processes' whole output and both edges' metrics,
//! and asserts that no key's material appears in them (base64, base64url, hex, raw bytes).
//! Real binary, loopback only, every wait bounded.
mod cluster_support;
mod serve_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::hmac;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use cluster_support::{edge_address, free_port, upstream, wait_for, BIN};
use netacl_secrets::transit::TransitKeyPair;
use netacl_secrets::SecretContext;
use serde_json::{json, Value};
use serve_support::{CLIENT_ID, CLIENT_SECRET};

const POLL: Duration = Duration::from_millis(50);

/// Everything the test saw: HTTP answers (head and body) and process output.
#[derive(Clone, Default)]
struct Transcript(Arc<Mutex<Vec<u8>>>);

impl Transcript {
    fn add(&self, bytes: &[u8]) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.extend_from_slice(bytes);
        all.push(b'\n');
    }

    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A process whose standard output and error go to the transcript (and whose stdout lines are
/// also sent to `lines`).
struct Logged {
    child: Child,
    lines: mpsc::Receiver<String>,
    drains: Vec<std::thread::JoinHandle<()>>,
}

impl Logged {
    fn spawn(command: &mut Command, transcript: &Transcript) -> Logged {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn netacl");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let out = transcript.clone();
        let err = transcript.clone();
        let drains = vec![
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    out.add(line.as_bytes());
                    let _ = tx.send(line);
                }
            }),
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stderr);
                let mut chunk = [0u8; 4096];
                loop {
                    match reader.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => err.add(&chunk[..n]),
                    }
                }
            }),
        ];
        Logged {
            child,
            lines,
            drains,
        }
    }

    /// The first stdout line satisfying `f` (at most 60 s).
    fn line(&self, f: impl Fn(&str) -> bool) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("the process printed the expected line");
            if f(&line) {
                return line;
            }
        }
    }

    /// Stops the process and waits until all its output is in the transcript.
    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for drain in self.drains.drain(..) {
            let _ = drain.join();
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request; the raw answer goes to the transcript. `(status, body)`.
fn http(
    transcript: &Transcript,
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .ok()?;
    let mut request =
        format!("{method} {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    transcript.add(&response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// The admin API, with the bootstrap client's token.
struct Admin {
    addr: SocketAddr,
    token: String,
    transcript: Transcript,
}

impl Admin {
    fn connect(addr: SocketAddr, domain: &str, transcript: &Transcript) -> Admin {
        Admin::connect_as(addr, domain, transcript, (CLIENT_ID, CLIENT_SECRET))
    }

    /// With the token of another client than the bootstrap client.
    fn connect_as(
        addr: SocketAddr,
        domain: &str,
        transcript: &Transcript,
        client: (&str, &str),
    ) -> Admin {
        let body = json!({
            "grant_type": "client_credentials", "client_id": client.0,
            "client_secret": client.1, "audience": format!("https://{domain}/api/v2/"),
        });
        let (status, text) = http(
            transcript,
            addr,
            "POST",
            "/oauth/token",
            &[("content-type", "application/json")],
            &body.to_string(),
        )
        .expect("token");
        assert_eq!(status, 200, "{text}");
        let token = serde_json::from_str::<Value>(&text).expect("json")["access_token"]
            .as_str()
            .expect("token")
            .to_owned();
        Admin {
            addr,
            token,
            transcript: transcript.clone(),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let auth = format!("Bearer {}", self.token);
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let (status, text) = http(
            &self.transcript,
            self.addr,
            method,
            path,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            &body,
        )
        .expect("admin API answers");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Creates a network ACL key; its id.
    fn create_key(&self, name: &str, material: &[u8]) -> String {
        let body = json!({"name": name, "alg": "hmac-sha256", "value": STANDARD.encode(material)});
        let (status, record) = self.call("POST", "/api/v2/keys/network-acls", Some(&body));
        assert_eq!(status, 201, "{record}");
        record["id"].as_str().expect("id").to_owned()
    }

    /// Creates the block rule `not_match: {http_message_signature: {keys: [key]}}`; its id.
    fn create_signed_only_rule(&self, key: &str) -> String {
        let body = json!({"description": "only through the proxy", "active": true,
            "priority": 5, "rule": {"action": {"block": true}, "scope": "tenant",
            "not_match": {"http_message_signature": {"keys": [{"id": key}]}}}});
        let (status, record) = self.call("POST", "/api/v2/network-acls", Some(&body));
        assert_eq!(status, 201, "{record}");
        record["id"].as_str().expect("id").to_owned()
    }
}

/// Creates an edge client of the default tenant through the operator API (the operator token
/// `netacl serve` wrote into `data`): `(client_id, client_secret)`.
fn create_edge_client(transcript: &Transcript, admin: SocketAddr, data: &Path) -> (String, String) {
    let token = std::fs::read_to_string(data.join("operator-token")).expect("operator token");
    let auth = format!("Bearer {}", token.trim());
    let (status, text) = http(
        transcript,
        admin,
        "POST",
        "/_netacl/v1/tenants/default/edge-clients",
        &[("authorization", &auth)],
        "",
    )
    .expect("operator API answers");
    assert_eq!(status, 201, "{text}");
    let created: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        created["scopes"],
        json!([
            "read:network_acls",
            "read:network_acl_key_material",
            "create:edge_summaries"
        ])
    );
    (
        created["client_id"].as_str().expect("id").to_owned(),
        created["client_secret"]
            .as_str()
            .expect("secret")
            .to_owned(),
    )
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .expect("clock")
}

/// How a request is signed (the defaults make a valid signature over method, authority, path
/// and query).
#[derive(Clone)]
struct Signing<'a> {
    material: &'a [u8],
    keyid: &'a str,
    created: i64,
    expires: Option<i64>,
    /// The path and query signed over (the request may differ).
    path: &'a str,
    query: Option<&'a str>,
    /// Adds a second label.
    two_labels: bool,
}

impl<'a> Signing<'a> {
    fn valid(material: &'a [u8], keyid: &'a str) -> Self {
        let now = unix_now();
        Signing {
            material,
            keyid,
            created: now,
            expires: Some(now + 300),
            path: "/login",
            query: Some("a=1"),
            two_labels: false,
        }
    }

    /// `Signature-Input` and `Signature` for a request to `authority`, the signature base built
    /// here by hand from RFC 9421 §2.5.
    fn headers(&self, authority: &str) -> (String, String) {
        let mut covered = String::from("\"@method\" \"@authority\" \"@path\"");
        if self.query.is_some() {
            covered.push_str(" \"@query\"");
        }
        let mut params = format!("({covered});created={}", self.created);
        if let Some(expires) = self.expires {
            params.push_str(&format!(";expires={expires}"));
        }
        params.push_str(&format!(";keyid=\"{}\"", self.keyid));
        let mut base = format!(
            "\"@method\": GET\n\"@authority\": {authority}\n\"@path\": {}\n",
            self.path
        );
        if let Some(query) = self.query {
            base.push_str(&format!("\"@query\": ?{query}\n"));
        }
        base.push_str(&format!("\"@signature-params\": {params}"));
        let mac = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, self.material),
            base.as_bytes(),
        );
        let mac = STANDARD.encode(mac.as_ref());
        let (mut input, mut signature) = (format!("sig1={params}"), format!("sig1=:{mac}:"));
        if self.two_labels {
            input.push_str(&format!(", sig2={params}"));
            signature.push_str(&format!(", sig2=:{mac}:"));
        }
        (input, signature)
    }
}

/// The edge's status for `GET target`, signed as `signing` says (unsigned: `None`).
fn status(
    transcript: &Transcript,
    edge: SocketAddr,
    target: &str,
    signing: Option<&Signing<'_>>,
) -> u16 {
    let headers = signing.map(|s| s.headers(&edge.to_string()));
    let list: Vec<(&str, &str)> = match &headers {
        Some((input, signature)) => vec![("signature-input", input), ("signature", signature)],
        None => vec![],
    };
    http(transcript, edge, "GET", target, &list, "")
        .expect("the edge answers")
        .0
}

/// Every case of the issue against `edge`, with the rule naming `key` (material `material`).
fn assert_cases(transcript: &Transcript, edge: SocketAddr, key: &str, material: &[u8], name: &str) {
    let valid = Signing::valid(material, key);
    let now = unix_now();
    let check = |what: &str, target: &str, signing: Option<Signing<'_>>, want: u16| {
        assert_eq!(
            status(transcript, edge, target, signing.as_ref()),
            want,
            "{name}: {what}"
        );
    };
    check("unsigned", "/login?a=1", None, 403);
    check("valid", "/login?a=1", Some(valid.clone()), 200);
    check("tampered path", "/logout?a=1", Some(valid.clone()), 403);
    check(
        "tampered query parameter",
        "/login?a=2",
        Some(valid.clone()),
        403,
    );
    let expired = Signing {
        created: now - 1000,
        expires: Some(now - 400),
        ..valid.clone()
    };
    check("expired", "/login?a=1", Some(expired), 403);
    let long = Signing {
        created: now,
        expires: Some(now + 3601),
        ..valid.clone()
    };
    check("lifetime over an hour", "/login?a=1", Some(long), 403);
    let future = Signing {
        created: now + 120,
        expires: Some(now + 300),
        ..valid.clone()
    };
    check("created beyond the skew", "/login?a=1", Some(future), 403);
    let no_expires = Signing {
        expires: None,
        ..valid.clone()
    };
    check("missing expires", "/login?a=1", Some(no_expires), 403);
    let two = Signing {
        two_labels: true,
        ..valid.clone()
    };
    check("two labels", "/login?a=1", Some(two), 403);
    let unknown = Signing {
        keyid: "nak_1111111111111111111111",
        ..valid.clone()
    };
    check("unknown keyid", "/login?a=1", Some(unknown), 403);
    let wrong = Signing {
        material: &[0x42; 32],
        ..valid.clone()
    };
    check("wrong key", "/login?a=1", Some(wrong), 403);
    // The floor is @method @authority @path: without @query the query is not covered.
    let no_query = Signing {
        query: None,
        ..valid.clone()
    };
    check("valid without @query", "/login?b=7", Some(no_query), 200);
}

fn random_material(seed: u8) -> Vec<u8> {
    // Distinct per run and per key, and never a byte pattern that could appear by chance.
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let mut out = Vec::with_capacity(32);
    let mut state = nanos ^ (u128::from(seed) << 64) ^ 0x9e37_79b9_7f4a_7c15;
    for _ in 0..32 {
        state = state
            .wrapping_mul(0x2545_f491_4f6c_dd1d)
            .wrapping_add(1442695040888963407);
        out.push((state >> 64) as u8);
    }
    out
}

fn start_serve(
    data: &std::path::Path,
    domain: &str,
    transcript: &Transcript,
) -> (Logged, SocketAddr, SocketAddr, SocketAddr) {
    let upstream = upstream();
    let upstream_url = format!("http://{upstream}");
    let edge = format!("127.0.0.1:{}", free_port());
    let metrics = format!("127.0.0.1:{}", free_port());
    let serve = Logged::spawn(
        Command::new(BIN)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .args(["--tenant-domain", domain])
            .args(["--bootstrap-client-id", CLIENT_ID])
            .args(["--bootstrap-client-secret", CLIENT_SECRET])
            .args(["--edge-upstream", &upstream_url, "--edge-listen", &edge])
            .args(["--edge-metrics-listen", &metrics])
            .env("RUST_LOG", "debug"),
        transcript,
    );
    let line = serve.line(|l| l.starts_with("netacl admin API listening on http://"));
    let admin: SocketAddr = line
        .trim_start_matches("netacl admin API listening on http://")
        .split_whitespace()
        .next()
        .and_then(|a| a.parse().ok())
        .expect("admin address");
    (
        serve,
        admin,
        edge.parse().expect("edge"),
        metrics.parse().expect("metrics"),
    )
}

fn start_remote_edge(
    admin: SocketAddr,
    domain: &str,
    client: (&str, &str),
    transcript: &Transcript,
) -> (Logged, SocketAddr, SocketAddr) {
    let upstream = upstream();
    let edge = Logged::spawn(
        Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(["--upstream", &format!("http://{upstream}")])
            .args(["--rules-url", &format!("http://{admin}")])
            .args(["--client-id", client.0, "--client-secret", client.1])
            .args(["--audience", &format!("https://{domain}/api/v2/")])
            .env("RUST_LOG", "debug"),
        transcript,
    );
    let line = edge.line(|l| l.contains("http="));
    (
        edge,
        edge_address(&line, "http="),
        edge_address(&line, "metrics="),
    )
}

/// The whole run: keys and rules written through the API, both edges through every case, the
/// key moved and deleted, and the grep of everything for the material.
#[test]
fn both_edges_verify_signatures_and_the_material_appears_nowhere() {
    let transcript = Transcript::default();
    let data = tempfile::tempdir().expect("tempdir");
    let domain = "edge-signatures.test";
    let (serve, admin_addr, inproc, inproc_metrics) = start_serve(data.path(), domain, &transcript);
    let admin = Admin::connect(admin_addr, domain, &transcript);

    let material = random_material(1);
    let material2 = random_material(2);
    let key = admin.create_key("edge-proxy", &material);
    let (status_code, listed) = admin.call("GET", "/api/v2/keys/network-acls", None);
    assert_eq!(status_code, 200, "{listed}");
    let (status_code, got) = admin.call("GET", &format!("/api/v2/keys/network-acls/{key}"), None);
    assert_eq!(status_code, 200, "{got}");
    let rule = admin.create_signed_only_rule(&key);

    // Key material goes only to a client given the scope explicitly: the bootstrap client's
    // token gets the rules without it; an edge client, created for the purpose, gets it.
    let probe = TransitKeyPair::generate();
    let watch_probe = format!(
        "/_netacl/v1/network-acls/watch?keys={}",
        probe.public_key().to_base64url()
    );
    let (status_code, watched) = admin.call("GET", &watch_probe, None);
    assert_eq!(status_code, 200, "{watched}");
    assert_eq!(watched["network_acl_keys_withheld"], "scope", "{watched}");
    assert!(watched.get("network_acl_keys").is_none(), "{watched}");
    let (edge_id, edge_secret) = create_edge_client(&transcript, admin_addr, data.path());
    let edge_admin = Admin::connect_as(admin_addr, domain, &transcript, (&edge_id, &edge_secret));
    let (status_code, watched) = edge_admin.call("GET", &watch_probe, None);
    assert_eq!(status_code, 200, "{watched}");
    assert_eq!(
        watched["network_acl_keys"][0]["id"],
        key.as_str(),
        "{watched}"
    );
    // And nothing else of the tenant's administration.
    let (status_code, _) = edge_admin.call("GET", "/api/v2/keys/network-acls", None);
    assert_eq!(status_code, 403);

    let (remote, remote_addr, remote_metrics) =
        start_remote_edge(admin_addr, domain, (&edge_id, &edge_secret), &transcript);
    let valid = Signing::valid(&material, &key);
    wait_for(Duration::from_secs(30), POLL, || {
        status(&transcript, remote_addr, "/login?a=1", Some(&valid)) == 200
    })
    .expect("the remote edge gets the rule and the key");

    assert_cases(&transcript, inproc, &key, &material, "in-process edge");
    assert_cases(&transcript, remote_addr, &key, &material, "remote edge");

    // The watch itself, as an edge with its own key pair sees it: sealed values only, which
    // open with that key pair (and the tenant and key id) to the material.
    let pair = TransitKeyPair::generate();
    let (status_code, watched) = edge_admin.call(
        "GET",
        &format!(
            "/_netacl/v1/network-acls/watch?keys={}",
            pair.public_key().to_base64url()
        ),
        None,
    );
    assert_eq!(status_code, 200, "{watched}");
    assert_eq!(watched["network_acl_keys"][0]["id"], key.as_str());
    let sealed = watched["network_acl_keys"][0]["sealed"]
        .as_str()
        .expect("sealed");
    assert!(sealed.starts_with("hpke-v1:"), "{watched}");
    let tenant = watched["tenant"].as_str().expect("tenant");
    let opened = pair
        .open(&SecretContext::new(tenant, "network_acl_key", &key), sealed)
        .expect("opens with the edge's key pair");
    assert!(
        opened.expose() == material.as_slice(),
        "the sealed value is the key"
    );
    assert!(pair
        .open(
            &SecretContext::new(tenant, "network_acl_key", "nak_other"),
            sealed
        )
        .is_err());
    // A public key that is no X25519 key, or a low-order point: 400 naming the parameter.
    for bad in ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not-a-key"] {
        let (status_code, body) = admin.call(
            "GET",
            &format!("/_netacl/v1/network-acls/watch?keys={bad}"),
            None,
        );
        assert_eq!(status_code, 400, "{body}");
        assert!(body.to_string().contains("keys"), "{body}");
    }

    // Key deleted after signing: the rule moves to K2, K is deleted.
    let key2 = admin.create_key("edge-proxy-2", &material2);
    let (status_code, body) = admin.call(
        "PATCH",
        &format!("/api/v2/network-acls/{rule}"),
        Some(
            &json!({"rule": {"action": {"block": true}, "scope": "tenant",
            "not_match": {"http_message_signature": {"keys": [{"id": key2}]}}}}),
        ),
    );
    assert_eq!(status_code, 200, "{body}");
    let (status_code, body) =
        admin.call("DELETE", &format!("/api/v2/keys/network-acls/{key}"), None);
    assert_eq!(status_code, 204, "{body}");
    let signed_k2 = Signing::valid(&material2, &key2);
    wait_for(Duration::from_secs(30), POLL, || {
        status(&transcript, remote_addr, "/login?a=1", Some(&signed_k2)) == 200
    })
    .expect("the remote edge follows the key change");
    for (name, edge) in [("in-process", inproc), ("remote", remote_addr)] {
        assert_eq!(
            status(&transcript, edge, "/login?a=1", Some(&valid)),
            403,
            "{name}: signed with the deleted key"
        );
        assert_eq!(
            status(&transcript, edge, "/login?a=1", Some(&signed_k2)),
            200,
            "{name}: signed with K2"
        );
    }

    // Metrics of both edges: the signature counters moved.
    for metrics in [inproc_metrics, remote_metrics] {
        let (code, text) = http(&transcript, metrics, "GET", "/metrics", &[], "").expect("metrics");
        assert_eq!(code, 200);
        assert!(
            text.contains("netacl_edge_message_signatures_total{result=\"verified\"}"),
            "{text}"
        );
    }
    remote.stop();
    serve.stop();

    let all = transcript.bytes();
    assert!(all.len() > 10_000, "the transcript holds the whole run");
    let text = String::from_utf8_lossy(&all).to_lowercase();
    // It does hold what the grep is about: answers, both processes' logs, the sealed values.
    assert!(
        text.contains(&key.to_lowercase()),
        "the key id is in the transcript"
    );
    assert!(
        text.contains(&sealed.to_lowercase()),
        "the watch answer is in it"
    );
    assert!(
        text.contains("request signature not verified"),
        "the edges' debug logs are in it"
    );
    assert!(
        text.contains("rules updated"),
        "the remote edge's log is in it"
    );
    assert!(
        text.contains("netacl_edge_message_signatures_total"),
        "the metrics are in it"
    );
    for secret in [&material, &material2] {
        let forms = [
            STANDARD.encode(secret),
            STANDARD_NO_PAD.encode(secret),
            URL_SAFE_NO_PAD.encode(secret),
        ];
        for form in &forms {
            assert!(
                !String::from_utf8_lossy(&all).contains(form.as_str()),
                "key material (base64) found in the transcript"
            );
        }
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            !text.contains(&hex),
            "key material (hex) found in the transcript"
        );
        assert!(
            !all.windows(secret.len()).any(|w| w == secret.as_slice()),
            "key material (raw bytes) found in the transcript"
        );
        // Rust's Debug of a byte slice.
        let debug = format!("{:?}", secret.as_slice());
        assert!(
            !String::from_utf8_lossy(&all).contains(&debug[1..debug.len() - 1]),
            "key material (Debug) found in the transcript"
        );
    }
}

/// A remote edge whose client lacks `read:network_acl_key_material` gets the rules without the
/// material: the valid request is blocked (signal missing) and the edge logs why.
#[test]
fn a_remote_edge_without_the_material_scope_blocks_and_warns() {
    let transcript = Transcript::default();
    let data = tempfile::tempdir().expect("tempdir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let domain = "edge-no-material.test";
    let (service, admin_addr) = runtime.block_on(async {
        use netacl_server::{AdminService, BootstrapClient, ServerConfig};
        use netacl_store::{SqliteStore, TenantId, TenantStore};
        let store = Arc::new(
            SqliteStore::open(data.path(), netacl_model::Limits::default()).expect("store"),
        );
        store
            .ensure_tenant(&TenantId::default_tenant(), domain)
            .await
            .expect("tenant");
        let kek = Arc::new(netacl_secrets::Kek::from_bytes(&[0x33; 32]).expect("kek"));
        let config = ServerConfig::new(domain).with_secrets_key(kek);
        let bootstrap = BootstrapClient {
            client_id: Some(CLIENT_ID.into()),
            client_secret: Some(CLIENT_SECRET.into()),
        };
        let (service, _) = AdminService::start(store, config, bootstrap)
            .await
            .expect("start");
        let authority = service.authority();
        authority
            .upsert_client(authority.management_client(
                "edge-without-material",
                netacl_server::auth::hash_client_secret("edge-without-material-secret-0123456789"),
                ["read:network_acls"],
            ))
            .expect("client");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = service
            .router()
            .into_make_service_with_connect_info::<SocketAddr>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (service, addr)
    });
    let admin = Admin::connect(admin_addr, domain, &transcript);
    let material = random_material(3);
    let key = admin.create_key("edge-proxy", &material);
    let rule = admin.create_signed_only_rule(&key);

    let (edge, edge_addr, _) = start_remote_edge(
        admin_addr,
        domain,
        (
            "edge-without-material",
            "edge-without-material-secret-0123456789",
        ),
        &transcript,
    );
    let valid = Signing::valid(&material, &key);
    // The rule arrives (the unsigned request is blocked), and so does the valid one.
    wait_for(Duration::from_secs(30), POLL, || {
        status(&transcript, edge_addr, "/login?a=1", None) == 403
    })
    .expect("the remote edge gets the rule");
    assert_eq!(
        status(&transcript, edge_addr, "/login?a=1", Some(&valid)),
        403
    );
    edge.stop();
    drop(service);
    runtime.shutdown_timeout(Duration::from_secs(5));
    let text = String::from_utf8_lossy(&transcript.bytes()).into_owned();
    assert!(
        text.contains("withheld network ACL key material"),
        "the edge says the material was withheld"
    );
    assert!(text.contains("scope"), "and why");
    assert!(
        text.contains(&rule) && text.contains("holds no material"),
        "the edge names the rules that cannot see a signature"
    );
}

/// A rule-file edge has no key material: the signal is always missing, and the edge says so
/// once at load, naming the rules.
#[test]
fn a_rule_file_edge_warns_and_treats_every_request_as_unsigned() {
    let transcript = Transcript::default();
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.json");
    let rule = "acl_6dL8L5Vqc1TxxXRuLhzD7c";
    let key = "nak_5KpV3mQ8rT2wX9yZ4aB6cD";
    std::fs::write(
        &rules,
        json!([{"id": rule, "description": "t", "active": true, "priority": 1,
            "rule": {"action": {"block": true}, "scope": "tenant",
                     "not_match": {"http_message_signature": {"keys": [{"id": key}]}}},
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"}])
        .to_string(),
    )
    .expect("write rules");
    let upstream = upstream();
    let edge = Logged::spawn(
        Command::new(BIN)
            .arg("edge")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(["--upstream", &format!("http://{upstream}")])
            .arg("--rules-file")
            .arg(&rules)
            .env("RUST_LOG", "warn"),
        &transcript,
    );
    let line = edge.line(|l| l.contains("http="));
    let addr = edge_address(&line, "http=");
    let material = [9u8; 32];
    let signed = Signing::valid(&material, key);
    assert_eq!(status(&transcript, addr, "/login?a=1", None), 403);
    assert_eq!(status(&transcript, addr, "/login?a=1", Some(&signed)), 403);
    edge.stop();
    let text = String::from_utf8_lossy(&transcript.bytes()).into_owned();
    let warnings = text.matches("holds no material").count();
    assert_eq!(warnings, 1, "one warning at load:\n{text}");
    assert!(text.contains(rule) && text.contains(key), "{text}");
}

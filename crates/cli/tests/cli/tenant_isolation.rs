//! Many tenants through the real `netacl serve` binary on a real socket (SQLite), each request
//! with an explicit `Host`: tenants created by the CLI before start and by the operator API at
//! run time; host routing (case, port, trailing dot, unknown, malformed, absent); isolation of
//! tokens, ids, listings, cursors and error messages across tenants, family by family; the
//! operator token and tenant tokens kept apart; deletion (tokens refused, host 421, data gone,
//! a tenant re-created under the same id sees nothing of the old one) through the operator API
//! and through the CLI while the server runs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::serve_support::{exchange, free_port, Answer, Server};
use serde_json::{json, Value};

const KEY_VALUE: &str =
    "uzvJfB4u3N0Jy4T7NZ75MDVcr8zSTInedJtkgcu46YW4XByzNJjxBdtjUkdJPBtbmHhIDi6pcl8jsasjlTMtDQ==";

fn call(
    addr: SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    exchange(&mut stream, host, method, path, token, body).expect("answer")
}

fn cli(data: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_netacl"))
        .arg("tenant")
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("NETACL_SECRETS_KEY_FILE")
        .output()
        .expect("netacl tenant");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

struct Tenant {
    host: String,
    token: String,
}

fn token(addr: SocketAddr, host: &str, created: &Value) -> String {
    let domain = created["domains"][0].as_str().expect("domain");
    let body = json!({
        "grant_type": "client_credentials",
        "client_id": created["client_id"],
        "client_secret": created["client_secret"],
        "audience": format!("https://{domain}/api/v2/"),
    });
    let answer = call(addr, host, "POST", "/oauth/token", None, Some(&body));
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()["access_token"]
        .as_str()
        .expect("token")
        .to_owned()
}

/// Gives the tenant a record in every family; returns the ids and names created.
fn fill(addr: SocketAddr, t: &Tenant, tag: &str) -> Value {
    let tok = Some(t.token.as_str());
    let mut ids = json!({});
    let acl = call(
        addr,
        &t.host,
        "POST",
        "/api/v2/network-acls",
        tok,
        Some(
            &json!({"description": format!("rule-{tag}"), "active": true, "priority": 10,
            "rule": {"action": {"block": true}, "scope": "tenant",
                     "match": {"ipv4_cidrs": ["198.51.100.0/24"]}}}),
        ),
    );
    assert_eq!(acl.status, 201, "{}", acl.text);
    ids["acl"] = acl.json()["id"].clone();
    let org = call(
        addr,
        &t.host,
        "POST",
        "/api/v2/organizations",
        tok,
        Some(&json!({"name": format!("org-{tag}"), "display_name": "Org"})),
    );
    assert_eq!(org.status, 201, "{}", org.text);
    ids["org"] = org.json()["id"].clone();
    for n in 0..3 {
        let more = call(
            addr,
            &t.host,
            "POST",
            "/api/v2/organizations",
            tok,
            Some(&json!({"name": format!("org-{tag}-{n}")})),
        );
        assert_eq!(more.status, 201, "{}", more.text);
    }
    let key = call(
        addr,
        &t.host,
        "POST",
        "/api/v2/keys/network-acls",
        tok,
        Some(&json!({"name": format!("key-{tag}"), "alg": "hmac-sha256", "value": KEY_VALUE})),
    );
    assert_eq!(key.status, 201, "{}", key.text);
    ids["key"] = key.json()["id"].clone();
    let list = call(
        addr,
        &t.host,
        "PUT",
        "/_netacl/v1/managed-lists/auth0.tor",
        tok,
        Some(&json!({"items": [if tag == "acme" { "192.0.2.77" } else { "192.0.2.88" }]})),
    );
    assert_eq!(list.status, 200, "{}", list.text);
    let branding = call(
        addr,
        &t.host,
        "PATCH",
        "/api/v2/branding",
        tok,
        Some(&json!({"logo_url": format!("https://{tag}.example/logo.png")})),
    );
    assert_eq!(branding.status, 200, "{}", branding.text);
    let at = "2024-01-02T03:04:05.000Z";
    let group = if tag == "acme" {
        "grp_AAAAAAAAAAAAAAAA"
    } else {
        "grp_BBBBBBBBBBBBBBBB"
    };
    let connection = format!("con_{}", tag.to_uppercase().repeat(4));
    let second_connection = format!("con_{}ZZZZ", tag.to_uppercase().repeat(3));
    let members: Vec<Value> = [1, 2, 3]
        .iter()
        .map(|n| {
            json!({"group_id": group, "id": format!("auth0|{tag}{n}"),
                   "member_type": "user", "type": "connection",
                   "connection_id": connection, "created_at": at})
        })
        .collect();
    let directory = json!({
        "connections": [{"id": connection, "name": format!("db-{tag}"), "strategy": "auth0"},
                        {"id": second_connection, "name": format!("db2-{tag}"), "strategy": "auth0"}],
        "users": [{"user_id": format!("auth0|{tag}"), "email": "u@example.com", "name": "U", "created_at": at}],
        "groups": [{"id": group, "name": format!("group-{tag}"), "created_at": at}],
        "members": members,
        "sessions": [{"id": format!("sess-{tag}"), "user_id": format!("auth0|{tag}"), "created_at": at,
                      "updated_at": at, "authenticated_at": at},
                     {"id": format!("sess-{tag}-2"), "user_id": format!("auth0|{tag}"), "created_at": at,
                      "updated_at": at, "authenticated_at": at}],
    });
    let imported = call(
        addr,
        &t.host,
        "POST",
        "/_netacl/v1/directory/import",
        tok,
        Some(&directory),
    );
    assert_eq!(imported.status, 200, "{}", imported.text);
    ids["group"] = group.into();
    ids["user"] = format!("auth0|{tag}").into();
    ids
}

fn wait_for(mut check: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tenants_are_selected_by_host_and_isolated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let acme_created = cli(
        &data,
        &[
            "create",
            "acme",
            "--domain",
            "acme.test",
            "--domain",
            "www.acme.test",
            "--json",
        ],
    );
    let beta_created = cli(
        &data,
        &["create", "beta", "--domain", "beta.test", "--json"],
    );
    let port = free_port();
    let server = Server::start(&data, &format!("127.0.0.1:{port}"), "main.test:8080", &[]);
    let addr = server.addr;
    let operator = std::fs::read_to_string(data.join("operator-token")).expect("operator token");
    let operator = operator.trim();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(data.join("operator-token"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let acme = Tenant {
        host: format!("acme.test:{port}"),
        token: token(addr, &format!("acme.test:{port}"), &acme_created),
    };
    let beta = Tenant {
        host: format!("beta.test:{port}"),
        token: token(addr, "beta.test", &beta_created),
    };
    let main_token = server.token_at_host(&format!("main.test:{port}"));

    // Host routing.
    for host in [
        "ACME.TEST:8443",
        "acme.test.",
        "www.acme.test",
        "Acme.Test.:1",
    ] {
        let answer = call(
            addr,
            host,
            "GET",
            "/api/v2/network-acls",
            Some(&acme.token),
            None,
        );
        assert_eq!(answer.status, 200, "{host}: {}", answer.text);
    }
    let unknown: Vec<Answer> = [
        "nobody.test",
        "other.example:8080",
        "acme.test.evil",
        "xn--bcher-kva.example",
    ]
    .iter()
    .map(|h| {
        call(
            addr,
            h,
            "GET",
            "/api/v2/network-acls",
            Some(&acme.token),
            None,
        )
    })
    .collect();
    for answer in &unknown {
        assert_eq!(answer.status, 421, "{}", answer.text);
        assert_eq!(
            answer.text, unknown[0].text,
            "one body for every unknown host"
        );
    }
    assert_eq!(unknown[0].json()["errorCode"], "unknown_host");
    for leak in ["acme", "beta", "main"] {
        assert!(!unknown[0].text.contains(leak), "{}", unknown[0].text);
    }
    // Before any other work: no rate-limit headers, same answer on the token endpoint.
    assert!(unknown[0].header("x-ratelimit-limit").is_none());
    let token_unknown = call(
        addr,
        "nobody.test",
        "POST",
        "/oauth/token",
        None,
        Some(&json!({})),
    );
    assert_eq!(
        (token_unknown.status, &token_unknown.text),
        (421, &unknown[0].text)
    );
    for bad in ["a b", "acme..test", "[::1", "acme.test:99999"] {
        let answer = call(addr, bad, "GET", "/api/v2/network-acls", None, None);
        assert_eq!(answer.status, 400, "{bad}: {}", answer.text);
        assert_eq!(answer.json()["errorCode"], "malformed_host", "{bad}");
    }
    // HTTP/1.0 without Host.
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(b"GET /api/v2/network-acls HTTP/1.0\r\n\r\n")
        .expect("write");
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw);
    assert!(
        raw.starts_with("HTTP/1.0 421") || raw.starts_with("HTTP/1.1 421"),
        "{raw}"
    );

    // Tokens: each tenant's only on its own hosts, the default tenant's too.
    for (host, token) in [
        (&beta.host, &acme.token),
        (&acme.host, &beta.token),
        (&acme.host, &main_token),
        (&format!("main.test:{port}"), &acme.token),
    ] {
        let answer = call(addr, host, "GET", "/api/v2/network-acls", Some(token), None);
        assert_eq!(answer.status, 401, "{host}: {}", answer.text);
    }
    // The token endpoint of one tenant does not know another's client, nor its audience.
    let cross = json!({"grant_type": "client_credentials", "client_id": acme_created["client_id"],
        "client_secret": acme_created["client_secret"], "audience": "https://acme.test/api/v2/"});
    let answer = call(addr, &beta.host, "POST", "/oauth/token", None, Some(&cross));
    assert!(
        answer.status == 401 || answer.status == 403,
        "{}",
        answer.text
    );

    // Each family: A's ids are 404 on B, B's listings hold nothing of A, messages name nothing of A.
    let a = fill(addr, &acme, "acme");
    let b = fill(addr, &beta, "beta");
    let b_tok = Some(beta.token.as_str());
    let mut texts = Vec::new();
    for path in [
        format!("/api/v2/network-acls/{}", a["acl"].as_str().expect("id")),
        format!("/api/v2/organizations/{}", a["org"].as_str().expect("id")),
        "/api/v2/organizations/name/org-acme".to_owned(),
        format!(
            "/api/v2/keys/network-acls/{}",
            a["key"].as_str().expect("id")
        ),
        format!(
            "/api/v2/groups/{}/members",
            a["group"].as_str().expect("id")
        ),
        "/api/v2/users/auth0%7Cacme/sessions".to_owned(),
    ] {
        let answer = call(addr, &beta.host, "GET", &path, b_tok, None);
        assert_eq!(answer.status, 404, "{path}: {}", answer.text);
        texts.push(answer.text);
    }
    for (method, path) in [
        (
            "DELETE",
            format!("/api/v2/network-acls/{}", a["acl"].as_str().expect("id")),
        ),
        (
            "DELETE",
            format!("/api/v2/organizations/{}", a["org"].as_str().expect("id")),
        ),
        (
            "DELETE",
            format!(
                "/api/v2/keys/network-acls/{}",
                a["key"].as_str().expect("id")
            ),
        ),
    ] {
        let answer = call(addr, &beta.host, method, &path, b_tok, None);
        assert_eq!(answer.status, 404, "{method} {path}: {}", answer.text);
        texts.push(answer.text);
    }
    for path in [
        "/api/v2/network-acls",
        "/api/v2/organizations",
        "/api/v2/keys/network-acls",
        "/api/v2/connections",
        "/api/v2/clients",
        "/api/v2/branding",
        "/_netacl/v1/managed-lists",
        "/_netacl/v1/managed-lists/auth0.tor",
        "/_netacl/v1/status",
        "/_netacl/v1/openapi.json",
        "/api/v2/keys/signing",
        "/.well-known/jwks.json",
    ] {
        let answer = call(addr, &beta.host, "GET", path, b_tok, None);
        assert_eq!(answer.status, 200, "{path}: {}", answer.text);
        texts.push(answer.text);
    }
    let acme_jwks = call(
        addr,
        &acme.host,
        "GET",
        "/.well-known/jwks.json",
        None,
        None,
    )
    .json();
    let acme_kid = acme_jwks["keys"][0]["kid"]
        .as_str()
        .expect("kid")
        .to_owned();
    let acme_client = acme_created["client_id"]
        .as_str()
        .expect("client")
        .to_owned();
    for text in &texts {
        for secret_of_a in [
            a["acl"].as_str().expect("id"),
            a["org"].as_str().expect("id"),
            a["key"].as_str().expect("id"),
            "org-acme",
            "key-acme",
            "rule-acme",
            "db-acme",
            "acme.example",
            "192.0.2.77",
            acme_kid.as_str(),
            acme_client.as_str(),
            "acme.test",
        ] {
            assert!(!text.contains(secret_of_a), "{secret_of_a} in {text}");
        }
    }
    // The OpenAPI document of each tenant names its own host.
    let doc = call(
        addr,
        &beta.host,
        "GET",
        "/_netacl/v1/openapi.json",
        b_tok,
        None,
    )
    .json();
    assert_eq!(doc["servers"][0]["url"], "https://beta.test");
    // Cursors are bound to their tenant (and list): for every list that pages by cursor, A's
    // `next` pages A's list on A's host, and is refused with 400 on B's host.
    let families = [
        (
            "/api/v2/organizations?take=1".to_owned(),
            "/api/v2/organizations?take=10".to_owned(),
        ),
        (
            "/api/v2/connections?take=1".to_owned(),
            "/api/v2/connections?take=10".to_owned(),
        ),
        (
            format!(
                "/api/v2/groups/{}/members?take=1",
                a["group"].as_str().expect("g")
            ),
            format!(
                "/api/v2/groups/{}/members?take=10",
                b["group"].as_str().expect("g")
            ),
        ),
        (
            "/api/v2/users/auth0%7Cacme/sessions?take=1".to_owned(),
            "/api/v2/users/auth0%7Cbeta/sessions?take=10".to_owned(),
        ),
    ];
    let mut a_cursors = Vec::new();
    for (a_path, b_path) in &families {
        let page = call(addr, &acme.host, "GET", a_path, Some(&acme.token), None);
        assert_eq!(page.status, 200, "{a_path}: {}", page.text);
        let a_next = page.json()["next"]
            .as_str()
            .unwrap_or_else(|| panic!("{a_path}: no next in {}", page.text))
            .to_owned();
        let own = call(
            addr,
            &acme.host,
            "GET",
            &format!("{a_path}&from={a_next}"),
            Some(&acme.token),
            None,
        );
        assert_eq!(own.status, 200, "{a_path} page 2: {}", own.text);
        let answer = call(
            addr,
            &beta.host,
            "GET",
            &format!("{b_path}&from={a_next}"),
            b_tok,
            None,
        );
        assert_eq!(
            answer.status, 400,
            "{b_path} with A's cursor: {}",
            answer.text
        );
        assert_eq!(answer.json()["errorCode"], "invalid_query_string");
        assert!(!answer.text.contains("acme"), "{}", answer.text);
        a_cursors.push(a_next);
    }
    // A cursor of one list is refused by another list of the same tenant.
    let answer = call(
        addr,
        &acme.host,
        "GET",
        &format!("/api/v2/connections?take=1&from={}", a_cursors[0]),
        Some(&acme.token),
        None,
    );
    assert_eq!(answer.status, 400, "{}", answer.text);

    // The operator API: its token only; tenant tokens refused; its token refused by tenants.
    let listed = call(
        addr,
        "anything.test",
        "GET",
        "/_netacl/v1/tenants",
        Some(operator),
        None,
    );
    assert_eq!(listed.status, 200, "{}", listed.text);
    let listed_json = listed.json();
    let ids: Vec<&str> = listed_json["tenants"]
        .as_array()
        .expect("tenants")
        .iter()
        .map(|t| t["tenant"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, ["acme", "beta", "default"]);
    assert!(!listed.text.contains("client_secret"));
    for token in [&acme.token, &main_token] {
        let answer = call(
            addr,
            &acme.host,
            "GET",
            "/_netacl/v1/tenants",
            Some(token),
            None,
        );
        assert_eq!(answer.status, 401, "{}", answer.text);
    }
    let answer = call(
        addr,
        &acme.host,
        "GET",
        "/api/v2/network-acls",
        Some(operator),
        None,
    );
    assert_eq!(answer.status, 401, "{}", answer.text);
    let answer = call(
        addr,
        "x.test",
        "POST",
        "/_netacl/v1/tenants",
        Some(operator),
        Some(&json!({"tenant": "gamma", "domains": ["beta.test"]})),
    );
    assert_eq!(answer.status, 409, "{}", answer.text);
    let answer = call(
        addr,
        "x.test",
        "POST",
        "/_netacl/v1/tenants",
        Some(operator),
        Some(&json!({"tenant": "gamma", "domains": ["ok.test", "bad host"]})),
    );
    assert_eq!(answer.status, 400, "{}", answer.text);
    assert!(answer.text.contains("domains[1]"), "{}", answer.text);
    let answer = call(
        addr,
        "x.test",
        "DELETE",
        "/_netacl/v1/tenants/default",
        Some(operator),
        None,
    );
    assert_eq!(answer.status, 409, "{}", answer.text);

    // Deleting through the operator API: at once, tokens and host refused.
    let answer = call(
        addr,
        "x.test",
        "DELETE",
        "/_netacl/v1/tenants/acme",
        Some(operator),
        None,
    );
    assert_eq!(answer.status, 204, "{}", answer.text);
    let answer = call(
        addr,
        &acme.host,
        "GET",
        "/api/v2/network-acls",
        Some(&acme.token),
        None,
    );
    assert_eq!((answer.status, &answer.text), (421, &unknown[0].text));
    let answer = call(addr, &beta.host, "GET", "/api/v2/network-acls", b_tok, None);
    assert_eq!(answer.status, 200, "beta goes on: {}", answer.text);
    // Re-created under the same id and domain: nothing of the old tenant.
    let answer = call(
        addr,
        "x.test",
        "POST",
        "/_netacl/v1/tenants",
        Some(operator),
        Some(&json!({"tenant": "acme", "domains": ["acme.test"]})),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);
    let again = answer.json();
    let answer = call(
        addr,
        &acme.host,
        "GET",
        "/api/v2/network-acls",
        Some(&acme.token),
        None,
    );
    assert_eq!(answer.status, 401, "the old token: {}", answer.text);
    let fresh = Tenant {
        host: acme.host.clone(),
        token: token(addr, &acme.host, &again),
    };
    for (path, empty) in [
        ("/api/v2/network-acls", json!([])),
        ("/api/v2/organizations", json!([])),
        ("/api/v2/keys/network-acls", json!({"keys": []})),
    ] {
        let answer = call(addr, &fresh.host, "GET", path, Some(&fresh.token), None);
        assert_eq!((answer.status, answer.json()), (200, empty), "{path}");
    }
    let answer = call(
        addr,
        &fresh.host,
        "GET",
        &format!("/api/v2/network-acls/{}", a["acl"].as_str().expect("id")),
        Some(&fresh.token),
        None,
    );
    assert_eq!(answer.status, 404, "{}", answer.text);

    // Deleting through the CLI while the server runs: the server notices (poll, 1 s).
    let out = Command::new(env!("CARGO_BIN_EXE_netacl"))
        .args(["tenant", "delete", "beta", "--data-dir"])
        .arg(&data)
        .output()
        .expect("delete");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(
        || call(addr, &beta.host, "GET", "/api/v2/network-acls", b_tok, None).status == 421,
        "the server stops serving a tenant the CLI deleted",
    );
    // And picks up one the CLI created.
    let delta = cli(
        &data,
        &["create", "delta", "--domain", "delta.test", "--json"],
    );
    wait_for(
        || {
            call(
                addr,
                "delta.test",
                "GET",
                "/.well-known/jwks.json",
                None,
                None,
            )
            .status
                == 200
        },
        "the server serves a tenant the CLI created",
    );
    let delta_token = token(addr, "delta.test", &delta);
    let answer = call(
        addr,
        "delta.test",
        "GET",
        "/api/v2/network-acls",
        Some(&delta_token),
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text);
    server.kill();
}

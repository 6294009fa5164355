//! `netacl serve --edge-upstream ... --edge-tenants`: the in-process edge enforces every tenant
//! the admin service serves, each request by its host's tenant. Tenants are created and deleted
//! with `netacl tenant` on the running server's data directory; the server picks them up within
//! its follow interval, the edge with it. Real binary, loopback only, every wait bounded.
mod cluster_support;
mod serve_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serve_support::{
    assert_preview_of, at_host, check_tenants_geo_rules, create_tenant, free_port, maxmind,
    preview_deleting, summary_totals, tenant_cli, tenant_token, tenant_token_when_served, Server,
};

/// The longest the test waits for the server to pick a created or deleted tenant up (its follow
/// interval is at most 5 s).
const PICK_UP: Duration = Duration::from_secs(30);

/// Waits (bounded by [`PICK_UP`]) until `GET /` through the edge with `Host: host` answers
/// `status`; panics with the last answer otherwise.
fn wait_for_edge_status(edge: SocketAddr, host: &str, status: u16) {
    let start = Instant::now();
    loop {
        let answer = at_host(edge, host, "GET", "/", None, None);
        if answer.status == status {
            return;
        }
        assert!(
            start.elapsed() < PICK_UP,
            "host {host}: still {} {} after {PICK_UP:?}, expected {status}",
            answer.status,
            answer.text
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_in_process_edge_enforces_each_tenant_by_host_and_drops_a_deleted_one() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::upstream();
    let upstream_url = format!("http://{upstream}");
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
    let edge_listen = edge.to_string();
    let server = Server::start(
        data.path(),
        "127.0.0.1:0",
        "default.test",
        &[
            "--edge-upstream",
            upstream_url.as_str(),
            "--edge-listen",
            edge_listen.as_str(),
            "--edge-metrics-listen",
            "off",
            "--edge-tenants",
            "--edge-metrics-tenant",
            "alpha",
        ],
    );

    let (alpha_id, alpha_secret) = create_tenant(data.path(), "alpha", "alpha.test");
    create_tenant(data.path(), "beta", "beta.test");
    // Both picked up: no rule in either, so both reach the upstream.
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!(answer.text, "upstream");

    // A block rule in tenant alpha, written through alpha's host with alpha's own token.
    let token = tenant_token(server.addr, "alpha.test", &alpha_id, &alpha_secret);
    let rule = cluster_support::block_rule(1, "127.0.0.1");
    let answer = at_host(
        server.addr,
        "alpha.test",
        "POST",
        "/api/v2/network-acls",
        Some(&token),
        Some(&rule),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);

    // Enforced for alpha's host as soon as the write is answered (the edge follows alpha's
    // engine), and for alpha only: beta and the default tenant's host pass.
    let answer = at_host(edge, "alpha.test", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
    assert_ne!(answer.text, "upstream");
    let answer = at_host(edge, "ALPHA.test:8080", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));
    let answer = at_host(edge, "default.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));

    // A host of no tenant: 421 with the fixed body.
    let answer = at_host(edge, "nobody.test", "GET", "/", None, None);
    assert_eq!(answer.status, 421, "{}", answer.text);
    assert_eq!(answer.text, netacl_edge::MISDIRECTED_BODY);

    // Tenant beta deleted: its host gets 421 at the edge once the server drops it; alpha's
    // rule still holds.
    tenant_cli(data.path(), &["delete", "beta"]);
    wait_for_edge_status(edge, "beta.test", 421);
    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!(answer.text, netacl_edge::MISDIRECTED_BODY);
    let answer = at_host(edge, "alpha.test", "GET", "/", None, None);
    assert_eq!(answer.status, 403, "{}", answer.text);
}

/// Every tenant's per-rule counts go into its own log (`acls_summary`, `GET /api/v2/logs` and
/// the counts) and the preview of each tenant replays that tenant's sampled requests only.
#[test]
fn the_in_process_edge_reports_each_tenants_counts_and_sample_to_that_tenant() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::upstream();
    let upstream_url = format!("http://{upstream}");
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
    let edge_listen = edge.to_string();
    let metrics = format!("127.0.0.1:{}", free_port());
    let server = Server::start(
        data.path(),
        "127.0.0.1:0",
        "default.test",
        &[
            "--edge-upstream",
            upstream_url.as_str(),
            "--edge-listen",
            edge_listen.as_str(),
            "--edge-metrics-listen",
            metrics.as_str(),
            "--edge-tenants",
            "--edge-summary-interval",
            "1s",
            "--edge-sample-every",
            "1",
        ],
    );
    let (alpha_id, alpha_secret) = create_tenant(data.path(), "alpha", "alpha.test");
    let (beta_id, beta_secret) = create_tenant(data.path(), "beta", "beta.test");
    // One request of each tenant passes (and is sampled) once the edge has it.
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    let alpha = tenant_token(server.addr, "alpha.test", &alpha_id, &alpha_secret);
    let beta = tenant_token(server.addr, "beta.test", &beta_id, &beta_secret);
    let mut rules = Vec::new();
    for (host, token, cidr) in [
        ("alpha.test", &alpha, "127.0.0.1"),
        ("beta.test", &beta, "127.0.0.0/8"),
    ] {
        let rule = cluster_support::block_rule(1, cidr);
        let answer = at_host(
            server.addr,
            host,
            "POST",
            "/api/v2/network-acls",
            Some(token),
            Some(&rule),
        );
        assert_eq!(answer.status, 201, "{}", answer.text);
        rules.push(answer.json()["id"].as_str().expect("id").to_owned());
    }
    // A rule in the default tenant too (it matches none of the requests below).
    let default = server.token_at_host("default.test");
    let answer = at_host(
        server.addr,
        "default.test",
        "POST",
        "/api/v2/network-acls",
        Some(&default),
        Some(&cluster_support::block_rule(1, "192.0.2.0/24")),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);
    // 3 requests blocked in alpha, 2 in beta, one host of no tenant.
    for (host, n) in [("alpha.test", 3), ("beta.test", 2)] {
        for _ in 0..n {
            let answer = at_host(edge, host, "GET", "/authorize", None, None);
            assert_eq!(answer.status, 403, "{host}: {}", answer.text);
        }
    }
    assert_eq!(
        at_host(edge, "nobody.test", "GET", "/", None, None).status,
        421
    );

    // Each tenant's log: its own rule, with its own counts, from the in-process edge.
    let want_alpha = [(rules[0].clone(), (3, 3))].into_iter().collect();
    let want_beta = [(rules[1].clone(), (2, 2))].into_iter().collect();
    let start = Instant::now();
    loop {
        let (alpha_totals, alpha_edges) = summary_totals(server.addr, "alpha.test", &alpha);
        let (beta_totals, _) = summary_totals(server.addr, "beta.test", &beta);
        if alpha_totals == want_alpha && beta_totals == want_beta {
            assert_eq!(alpha_edges.into_iter().collect::<Vec<_>>(), ["in-process"]);
            break;
        }
        assert!(
            start.elapsed() < PICK_UP,
            "alpha {alpha_totals:?}, beta {beta_totals:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Reported once: two more intervals add nothing.
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(
        summary_totals(server.addr, "alpha.test", &alpha).0,
        want_alpha
    );
    assert_eq!(summary_totals(server.addr, "beta.test", &beta).0, want_beta);
    // The default tenant's log has none of them.
    assert!(summary_totals(server.addr, "default.test", &default)
        .0
        .is_empty());
    // The counts endpoint sums the same events.
    let counts = at_host(
        server.addr,
        "beta.test",
        "GET",
        "/_netacl/v1/network-acls/counts",
        Some(&beta),
        None,
    );
    assert_eq!(counts.status, 200, "{}", counts.text);
    assert_eq!(counts.json()["totals"]["matched"], 2, "{}", counts.text);
    assert_eq!(
        counts.json()["network_acls"][0]["rule_id"],
        rules[1].as_str()
    );

    // Prometheus stays bounded: the verdicts of every tenant, no per-rule (or per-tenant)
    // series.
    let metrics: SocketAddr = metrics.parse().expect("metrics address");
    let text = at_host(metrics, "localhost", "GET", "/metrics", None, None).text;
    assert!(
        text.contains("netacl_edge_requests_total{verdict=\"block\"} 5\n"),
        "{text}"
    );
    assert!(!text.contains("rule_id="), "{text}");
    assert!(!text.contains("tenant=\"alpha\""), "{text}");

    // The preview of each tenant replays its own requests: the one that passed and those
    // blocked (4 in alpha, 3 in beta), each changed by deleting the tenant's rule.
    let answer = preview_deleting(server.addr, "alpha.test", &alpha, &rules[0]);
    assert_preview_of(&answer, "alpha.test", 4);
    let answer = preview_deleting(server.addr, "beta.test", &beta, &rules[1]);
    assert_preview_of(&answer, "beta.test", 3);
}

#[test]
fn the_in_process_edge_answers_each_tenants_geo_rules_from_the_databases() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::upstream();
    let upstream_url = format!("http://{upstream}");
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
    let edge_listen = edge.to_string();
    let (city, asn) = (
        maxmind("GeoIP2-City-Test.mmdb"),
        maxmind("GeoLite2-ASN-Test.mmdb"),
    );
    let server = Server::start(
        data.path(),
        "127.0.0.1:0",
        "default.test",
        &[
            "--edge-upstream",
            upstream_url.as_str(),
            "--edge-listen",
            edge_listen.as_str(),
            "--edge-metrics-listen",
            "off",
            "--edge-tenants",
            "--edge-trusted-proxy",
            "127.0.0.0/8",
            "--edge-geoip-city",
            city.to_str().expect("path"),
            "--edge-geoip-asn",
            asn.to_str().expect("path"),
        ],
    );
    let alpha = create_tenant(data.path(), "alpha", "alpha.test");
    let beta = create_tenant(data.path(), "beta", "beta.test");
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    check_tenants_geo_rules(server.addr, edge, &alpha, &beta);
}

/// `serve --edge-upstream` with the flags that choose no mode, on `data`: `(server, edge)`.
fn start_unflagged(
    data: &std::path::Path,
    extra: &[&str],
    stderr: std::process::Stdio,
) -> (Server, SocketAddr) {
    let upstream = cluster_support::upstream();
    let upstream_url = format!("http://{upstream}");
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
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
    let server = Server::start_logging(data, "127.0.0.1:0", "default.test", &args, stderr);
    (server, edge)
}

/// Issue 28: a store holding more than the default tenant when `serve --edge-upstream` starts
/// without `--edge-tenants` gets each tenant enforced by host (it used to get the default
/// tenant's rules for every host, so tenant beta's rules were never enforced at that edge).
#[test]
fn without_a_flag_the_edge_in_front_of_many_tenants_enforces_each_by_host() {
    let data = tempfile::tempdir().expect("tempdir");
    let (beta_id, beta_secret) = create_tenant(data.path(), "beta", "beta.test");
    let (server, edge) = start_unflagged(data.path(), &[], std::process::Stdio::inherit());

    let token = tenant_token_when_served(server.addr, "beta.test", &beta_id, &beta_secret, PICK_UP);
    let rule = cluster_support::block_rule(1, "127.0.0.1");
    let answer = at_host(
        server.addr,
        "beta.test",
        "POST",
        "/api/v2/network-acls",
        Some(&token),
        Some(&rule),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);

    let answer = at_host(edge, "beta.test", "GET", "/", None, None);
    assert_eq!(
        answer.status, 403,
        "beta's rule at beta's host: {}",
        answer.text
    );
    let answer = at_host(edge, "default.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));
    let answer = at_host(edge, "nobody.test", "GET", "/", None, None);
    assert_eq!(answer.status, 421, "{}", answer.text);
}

/// Issue 28: an edge that enforces the default tenant's rules for every host because the store
/// held no other tenant at start, with no flag saying so, cannot enforce a tenant created later:
/// the process stops with an error naming the tenant and the flags (started again it enforces
/// each tenant by host). `--edge-default-tenant-only` keeps the default tenant's rules for
/// every host and runs on.
#[test]
fn a_tenant_created_under_an_unflagged_single_tenant_edge_stops_the_process() {
    use std::io::Read;
    let data = tempfile::tempdir().expect("tempdir");
    let (mut server, edge) = start_unflagged(data.path(), &[], std::process::Stdio::piped());
    // The default tenant's rules for every host, as before.
    let answer = at_host(edge, "anything.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));

    create_tenant(data.path(), "beta", "beta.test");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            start.elapsed() < PICK_UP,
            "still running {PICK_UP:?} after tenant beta was created"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{status:?}");
    let mut stderr = String::new();
    server
        .child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr text");
    assert!(
        stderr.contains("tenant beta was created")
            && stderr.contains("--edge-tenants")
            && stderr.contains("--edge-default-tenant-only"),
        "{stderr}"
    );

    // Started again on the same store, with no flag: each tenant by host.
    let (_server, edge) = start_unflagged(data.path(), &[], std::process::Stdio::inherit());
    let answer = at_host(edge, "anything.test", "GET", "/", None, None);
    assert_eq!(answer.status, 421, "{}", answer.text);

    // The explicit choice: the default tenant's rules for every host, whatever is created.
    let other = tempfile::tempdir().expect("tempdir");
    let (mut server, edge) = start_unflagged(
        other.path(),
        &["--edge-default-tenant-only"],
        std::process::Stdio::inherit(),
    );
    let (gamma_id, gamma_secret) = create_tenant(other.path(), "gamma", "gamma.test");
    tenant_token_when_served(server.addr, "gamma.test", &gamma_id, &gamma_secret, PICK_UP);
    assert!(
        server.child.try_wait().expect("wait").is_none(),
        "still running"
    );
    let answer = at_host(edge, "gamma.test", "GET", "/", None, None);
    assert_eq!((answer.status, answer.text.as_str()), (200, "upstream"));
}

/// Issue 28: the in-process edge forwards the host it judged, and no other (see
/// `cluster_support::check_the_upstream_gets_the_judged_host`): beta blocks every request, and
/// a request judged as alpha's cannot reach the upstream as beta's.
#[test]
fn the_in_process_edge_forwards_the_host_it_judged() {
    let data = tempfile::tempdir().expect("tempdir");
    let upstream = cluster_support::echo_upstream();
    let upstream_url = format!("http://{upstream}");
    let edge: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("edge address");
    let edge_listen = edge.to_string();
    let server = Server::start(
        data.path(),
        "127.0.0.1:0",
        "default.test",
        &[
            "--edge-upstream",
            upstream_url.as_str(),
            "--edge-listen",
            edge_listen.as_str(),
            "--edge-metrics-listen",
            "off",
            "--edge-tenants",
        ],
    );
    create_tenant(data.path(), "alpha", "alpha.test");
    let (beta_id, beta_secret) = create_tenant(data.path(), "beta", "beta.test");
    wait_for_edge_status(edge, "alpha.test", 200);
    wait_for_edge_status(edge, "beta.test", 200);
    let beta = tenant_token(server.addr, "beta.test", &beta_id, &beta_secret);
    let answer = at_host(
        server.addr,
        "beta.test",
        "POST",
        "/api/v2/network-acls",
        Some(&beta),
        Some(&cluster_support::block_rule(1, "0.0.0.0/0")),
    );
    assert_eq!(answer.status, 201, "{}", answer.text);
    cluster_support::check_the_upstream_gets_the_judged_host(edge);
}

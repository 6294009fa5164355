//! What a request gets: allowed, blocked (the upstream not reached), redirected, logged; the
//! client address from the peer, a forged forwarding header ignored, a trusted proxy's walked;
//! user-agent and hostname rules.
use crate::support::{get, get_from, local, metrics, record, rules, start, Upstream, ID1, ID2};

const ID3: &str = "acl_3333333333333333333333";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_blocked_redirected_and_logged() {
    let upstream = Upstream::start().await;
    let policy = rules(&[
        record(
            ID1,
            1,
            r#"{"block":true}"#,
            r#"{"ipv4_cidrs":["127.0.0.2/32"]}"#,
        ),
        record(
            ID2,
            2,
            r#"{"redirect":true,"redirect_uri":"https://example.com/denied"}"#,
            r#"{"ipv4_cidrs":["127.0.0.3/32"]}"#,
        ),
        record(
            ID3,
            3,
            r#"{"log":true}"#,
            r#"{"ipv4_cidrs":["127.0.0.4/32"]}"#,
        ),
    ]);
    let proxy = start(upstream.addr, &policy, None, &[]);

    // Allowed: passed to the upstream with the forwarding headers of `netacl edge`.
    let allowed = get(proxy.http, "/login").await;
    assert_eq!((allowed.status, allowed.body.as_str()), (200, "upstream"));
    assert_eq!(upstream.hits(), 1);
    let head = upstream.last_head().to_ascii_lowercase();
    assert!(head.contains("x-forwarded-for: 127.0.0.1\r\n"), "{head}");
    assert!(head.contains("x-forwarded-proto: http\r\n"), "{head}");
    assert!(head.contains("x-forwarded-host: app.test\r\n"), "{head}");

    // Blocked: the edge's error shape, the upstream not reached.
    let blocked = get_from(local(2), proxy.http, "/login", "app.test", &[]).await;
    assert_eq!(blocked.status, 403);
    assert_eq!(blocked.body, netacl_edge::BLOCKED_BODY);
    assert_eq!(blocked.header("content-type"), Some("application/json"));
    assert_eq!(
        upstream.hits(),
        1,
        "a blocked request does not reach the upstream"
    );

    // Redirected: 302 with Location, the upstream not reached.
    let redirected = get_from(local(3), proxy.http, "/login", "app.test", &[]).await;
    assert_eq!(redirected.status, 302);
    assert_eq!(
        redirected.header("location"),
        Some("https://example.com/denied")
    );
    assert_eq!(upstream.hits(), 1);

    // Logged: passed, and counted against its rule.
    let logged = get_from(local(4), proxy.http, "/login", "app.test", &[]).await;
    assert_eq!((logged.status, logged.body.as_str()), (200, "upstream"));
    assert_eq!(upstream.hits(), 2);

    let text = metrics(proxy.metrics).await;
    for line in [
        "netacl_edge_requests_total{verdict=\"block\"} 1".to_owned(),
        "netacl_edge_requests_total{verdict=\"redirect\"} 1".to_owned(),
        format!("netacl_edge_rule_matched_total{{rule_id=\"{ID3}\",action=\"log\",scope=\"tenant\"}} 1"),
        format!("netacl_edge_rule_matched_total{{rule_id=\"{ID1}\",action=\"block\",scope=\"tenant\"}} 1"),
        "netacl_edge_listener_connections_accepted_total{listener=\"pingora\"} 4".to_owned(),
    ] {
        assert!(text.contains(&line), "{line} in {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_forwarding_header_is_ignored_and_a_trusted_proxys_is_walked() {
    let upstream = Upstream::start().await;
    let policy = rules(&[record(
        ID1,
        1,
        r#"{"block":true}"#,
        r#"{"ipv4_cidrs":["127.0.0.2/32"]}"#,
    )]);
    let proxy = start(
        upstream.addr,
        &policy,
        None,
        &["--trusted-proxy", "127.0.0.5/32"],
    );
    // The blocked client claims another address: still blocked.
    let forged = [("x-forwarded-for", "198.51.100.7")];
    let answer = get_from(local(2), proxy.http, "/", "app.test", &forged).await;
    assert_eq!(answer.status, 403);
    // Another client claims to forward the blocked one: it is not a trusted proxy, so its
    // header is not believed.
    let claims = [("x-forwarded-for", "127.0.0.2")];
    let answer = get_from(local(6), proxy.http, "/", "app.test", &claims).await;
    assert_eq!(answer.status, 200);
    // The trusted proxy forwarding the blocked client: the walk finds it.
    let answer = get_from(local(5), proxy.http, "/", "app.test", &claims).await;
    assert_eq!(answer.status, 403);
    // The trusted proxy forwarding someone else: passed, the walk's client appended to.
    let others = [("x-forwarded-for", "198.51.100.7")];
    let answer = get_from(local(5), proxy.http, "/", "app.test", &others).await;
    assert_eq!(answer.status, 200);
    let head = upstream.last_head().to_ascii_lowercase();
    assert!(
        head.contains("x-forwarded-for: 198.51.100.7, 127.0.0.5\r\n"),
        "{head}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_agent_and_hostname_rules() {
    let upstream = Upstream::start().await;
    let policy = rules(&[
        record(
            ID1,
            1,
            r#"{"block":true}"#,
            r#"{"user_agents":["bad-bot/*"]}"#,
        ),
        record(
            ID2,
            2,
            r#"{"block":true}"#,
            r#"{"hostnames":["blocked.test"]}"#,
        ),
    ]);
    let proxy = start(upstream.addr, &policy, None, &[]);
    let ua = |agent: &'static str| [("user-agent", agent)];
    let answer = get_from(local(1), proxy.http, "/", "app.test", &ua("bad-bot/2.1")).await;
    assert_eq!(answer.status, 403);
    let answer = get_from(local(1), proxy.http, "/", "app.test", &ua("curl/8.0")).await;
    assert_eq!(answer.status, 200);
    let answer = get_from(local(1), proxy.http, "/", "blocked.test", &[]).await;
    assert_eq!(answer.status, 403);
    let answer = get_from(local(1), proxy.http, "/", "blocked.test:8080", &[]).await;
    assert_eq!(answer.status, 403, "the host without its port");
    let answer = get_from(local(1), proxy.http, "/", "open.test", &[]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(upstream.hits(), 2);
}

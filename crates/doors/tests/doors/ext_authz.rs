//! The ext_authz service called as Envoy calls it: a gRPC client of Envoy's published protos
//! (`envoy-types`) over one persistent HTTP/2 channel, `Check` with the attributes Envoy fills.
use std::collections::HashMap;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::{address, Address, SocketAddress};
use envoy_types::pb::envoy::service::auth::v3::attribute_context::{
    HttpRequest, Peer, Request, TlsSession,
};
use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;
use envoy_types::pb::envoy::service::auth::v3::check_response::HttpResponse;
use envoy_types::pb::envoy::service::auth::v3::{AttributeContext, CheckRequest, CheckResponse};
use netacl_doors::ext_authz::start_ext_authz;
use netacl_edge::BLOCKED_BODY;
use netacl_listener::ConnectionLimits;
use netacl_model::{AclId, Limits, RuleSet};
use serde_json::{json, Value};

use crate::rule;

fn check(source: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> CheckRequest {
    let address = Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: source.to_string(),
            ..Default::default()
        })),
    };
    CheckRequest {
        attributes: Some(AttributeContext {
            source: Some(Peer {
                address: Some(address),
                ..Default::default()
            }),
            request: Some(Request {
                http: Some(HttpRequest {
                    method: "GET".into(),
                    path: path.into(),
                    host: host.into(),
                    scheme: "https".into(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<HashMap<_, _>>(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            tls_session: Some(TlsSession { sni: host.into() }),
            ..Default::default()
        }),
    }
}

fn header<'r>(response: &'r CheckResponse, name: &str) -> Option<&'r str> {
    let headers = match response.http_response.as_ref()? {
        HttpResponse::OkResponse(ok) => &ok.headers,
        HttpResponse::DeniedResponse(denied) => &denied.headers,
        _ => return None,
    };
    headers
        .iter()
        .filter_map(|h| h.header.as_ref())
        .find(|h| h.key.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

fn denied_status(response: &CheckResponse) -> Option<i32> {
    match response.http_response.as_ref()? {
        HttpResponse::DeniedResponse(denied) => denied.status.as_ref().map(|s| s.code),
        _ => None,
    }
}

#[tokio::test]
async fn check_over_grpc_answers_as_envoy_expects() {
    let enforcer = Arc::new(crate::enforcer());
    let rules = vec![
        rule(
            1,
            1,
            json!({"block": true}),
            json!({"match": {"ipv4_cidrs": ["192.0.2.0/24"]}}),
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
    ];
    enforcer
        .apply_rules(&RuleSet::from_json(&Value::Array(rules), 1, &Limits::default()).unwrap())
        .unwrap();
    let door = start_ext_authz(
        Arc::clone(&enforcer),
        "127.0.0.1:0".parse().unwrap(),
        ConnectionLimits::default(),
    )
    .await
    .unwrap();
    let addr = door.local_addr();
    let mut client = AuthorizationClient::connect(format!("http://{addr}"))
        .await
        .unwrap();

    // Allowed: OK with the decision headers for the upstream.
    let ok = client
        .check(check(
            "198.51.100.1",
            "app.example.test",
            "/authorize?x=1",
            &[],
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.status.as_ref().map(|s| s.code), Some(0));
    assert!(matches!(
        ok.http_response,
        Some(HttpResponse::OkResponse(_))
    ));
    assert_eq!(header(&ok, "x-netacl-decision"), Some("none"));

    // Blocked by the source address: 403 with the edge's body. A forwarding header in the
    // request never overrides Envoy's source address.
    for headers in [vec![], vec![("x-forwarded-for", "198.51.100.9")]] {
        let denied = client
            .check(check(
                "192.0.2.7",
                "app.example.test",
                "/authorize",
                &headers,
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            denied.status.as_ref().map(|s| s.code),
            Some(7),
            "PERMISSION_DENIED"
        );
        assert_eq!(denied_status(&denied), Some(403));
        match denied.http_response.as_ref() {
            Some(HttpResponse::DeniedResponse(d)) => assert_eq!(d.body, BLOCKED_BODY),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            header(&denied, "x-netacl-rule"),
            Some(AclId::from_random(1).to_string().as_str())
        );
    }

    // A redirect: 302 with the location.
    let redirect = client
        .check(check(
            "198.51.100.1",
            "app.example.test",
            "/",
            &[("user-agent", "moved/1")],
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(denied_status(&redirect), Some(302));
    assert_eq!(
        header(&redirect, "location"),
        Some("https://example.test/moved")
    );

    // A hostname rule (host and SNI), and a `log` rule: allowed, named, counted.
    let blocked = client
        .check(check("198.51.100.1", "blocked.example.test", "/", &[]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(denied_status(&blocked), Some(403));
    let logged = client
        .check(check("198.51.100.1", "logged.example.test", "/", &[]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        header(&logged, "x-netacl-monitored"),
        Some(AclId::from_random(3).to_string().as_str())
    );
    let counted = enforcer
        .metrics()
        .rule_stats()
        .into_iter()
        .find(|s| s.rule_id == AclId::from_random(3))
        .map(|s| s.matched);
    assert_eq!(counted, Some(1));

    // Malformed: INVALID_ARGUMENT, never an allow.
    for bad in [
        check("not-an-ip", "app.example.test", "/", &[]),
        check("198.51.100.1", "app.example.test", "relative", &[]),
        CheckRequest::default(),
    ] {
        let status = client.check(bad).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    }
    // Counted by answer, as the edge's /metrics shows them.
    use netacl_doors::DoorAnswer;
    use netacl_edge::AclVerdict;
    assert_eq!(
        door.counters()
            .count(DoorAnswer::Decided(AclVerdict::Block)),
        3
    );
    assert_eq!(door.counters().count(DoorAnswer::BadRequest), 3);
    let metrics = enforcer.metrics().render_prometheus();
    assert!(metrics
        .contains("netacl_edge_door_requests_total{door=\"ext_authz\",answer=\"bad_request\"} 3"));
    // Every Check timed, decided or refused: nine so far.
    assert!(
        metrics.contains("netacl_edge_door_check_seconds_count{door=\"ext_authz\"} 9\n"),
        "{metrics}"
    );
    assert_eq!(door.counters().checks(), 9);

    // A rule added while the service runs decides the next Check.
    enforcer
        .apply_rules(
            &RuleSet::from_json(
                &Value::Array(vec![rule(
                    5,
                    5,
                    json!({"block": true}),
                    json!({"match": {"ipv4_cidrs": ["198.51.100.1/32"]}}),
                )]),
                2,
                &Limits::default(),
            )
            .unwrap(),
        )
        .unwrap();
    let now_blocked = client
        .check(check("198.51.100.1", "app.example.test", "/", &[]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(denied_status(&now_blocked), Some(403));
    assert_eq!(
        header(&now_blocked, "x-netacl-rule"),
        Some(AclId::from_random(5).to_string().as_str())
    );
}

/// The fuzz target's seeds (written by `fuzz/seeds.py`, an encoder of its own) decode to the
/// facts they were written with, so the fuzzer starts from requests the service accepts.
#[test]
fn the_fuzz_seeds_are_check_requests_the_service_reads() {
    use netacl_doors::ext_authz::CheckFacts;
    use prost::Message as _;
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/check_request");
    let bytes = std::fs::read(root.join("ipv4-with-headers")).unwrap();
    let request = CheckRequest::decode(bytes.as_slice()).unwrap();
    let facts = CheckFacts::from_check(&request).unwrap();
    assert_eq!(facts.client.to_string(), "192.0.2.7");
    assert_eq!(facts.uri.query(), Some("x=1"));
    assert_eq!(facts.user_agent(), Some("curl/8"));
    assert_eq!(facts.sni, Some("app.example.test"));
    // The seed's own X-Forwarded-For is in Envoy's map, and the decision's client is still
    // the source address.
    assert!(facts.headers.0.contains_key("x-forwarded-for"));
    let decided = facts.request_facts();
    assert_eq!(decided.client_ip(), Some("192.0.2.7".parse().unwrap()));
    let bytes = std::fs::read(root.join("ipv6")).unwrap();
    let request = CheckRequest::decode(bytes.as_slice()).unwrap();
    let facts = CheckFacts::from_check(&request).unwrap();
    assert_eq!(facts.client.to_string(), "2001:db8::7");
}

/// The shipped Envoy bootstrap (`deploy/envoy/envoy.yaml.template`), rendered with its ten
/// placeholders, read by Envoy's own published protos (`tests/envoy/check_bootstrap.py`, PyPI
/// `xds-protos`, installed by `.ci/run`): every field, enum and `@type` must be Envoy's. Envoy
/// itself cannot be installed here. Without Python's `xds-protos` the test is skipped locally
/// and fails when `CI` is set.
#[test]
fn the_shipped_envoy_template_is_a_bootstrap_by_envoys_protos() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ready = std::process::Command::new("python3")
        .args(["-c", "import envoy.config.bootstrap.v3.bootstrap_pb2, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ready {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 with xds-protos and PyYAML is needed under CI (.ci/run installs them)"
        );
        eprintln!("skipped: python3 with xds-protos and PyYAML (pip) is not installed");
        return;
    }
    let mut text = std::fs::read_to_string(repo.join("deploy/envoy/envoy.yaml.template")).unwrap();
    for (name, value) in [
        ("NETACL_ADDR", "127.0.0.1:9001"),
        ("NETACL_HOST", "127.0.0.1"),
        ("NETACL_PORT", "9001"),
        ("UPSTREAM_ADDR", "127.0.0.1:8080"),
        ("UPSTREAM_HOST", "127.0.0.1"),
        ("UPSTREAM_PORT", "8080"),
        ("LISTEN_ADDR", "0.0.0.0:10000"),
        ("LISTEN_HOST", "0.0.0.0"),
        ("LISTEN_PORT", "10000"),
        ("NETACL_DEPLOY_DIR", "/etc/netacl"),
    ] {
        text = text.replace(&format!("${{{name}}}"), value);
    }
    assert!(!text.contains("${"), "a placeholder outside the ten");
    // Fail closed, the client as the TCP peer, HTTP/2 to netacl's gRPC service.
    for line in [
        "failure_mode_allow: false",
        "use_remote_address: true",
        "http2_protocol_options: {}",
    ] {
        assert!(text.contains(line), "the shipped bootstrap lacks `{line}`");
    }
    let dir = std::env::temp_dir().join(format!("netacl-envoy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rendered = dir.join("envoy.yaml");
    std::fs::write(&rendered, &text).unwrap();
    let checked = |file: &std::path::Path| {
        std::process::Command::new("python3")
            .arg(repo.join("tests/envoy/check_bootstrap.py"))
            .arg(file)
            .output()
            .unwrap()
    };
    let out = checked(&rendered);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("envoy bootstrap: ok"), "{said}");
    assert!(said.contains("ExtAuthz"), "{said}");
    // The check can fail: a misspelt field is refused, naming it.
    let misspelt = dir.join("misspelt.yaml");
    std::fs::write(
        &misspelt,
        text.replace("failure_mode_allow", "failure_mode_alow"),
    )
    .unwrap();
    let out = checked(&misspelt);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("failure_mode_alow"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scheme Envoy reports is the one an RFC 9421 signature covering `@scheme` is verified
/// with: `http` or `https` in any case, another value not taken.
#[test]
fn the_scheme_is_the_one_envoy_reports() {
    use netacl_doors::ext_authz::CheckFacts;
    let mut request = check("192.0.2.7", "app.example.test", "/login", &[]);
    let scheme = |request: &CheckRequest| CheckFacts::from_check(request).unwrap().scheme;
    assert_eq!(scheme(&request), Some("https"));
    for (given, taken) in [("HTTP", Some("http")), ("wss", None), ("", None)] {
        let http = request
            .attributes
            .as_mut()
            .and_then(|a| a.request.as_mut())
            .and_then(|r| r.http.as_mut())
            .unwrap();
        http.scheme = given.into();
        assert_eq!(scheme(&request), taken, "{given}");
        // Not taken: the TLS session Envoy reports (its SNI) makes it `https`.
        let facts = CheckFacts::from_check(&request).unwrap();
        assert_eq!(facts.request_facts().scheme(), taken.unwrap_or("https"));
    }
}

//! Per-rule counts through HTTP (`GET /_netacl/v1/network-acls/counts`): the edges'
//! `acls_summary` events summed by rule and bucket, the tenant's totals, the window's bounds,
//! scopes, and a 10,000-rule tenant with several edges.

use crate::support::{api, scoped_token};
use http::{Method, StatusCode};
use netacl_model::{AclId, AclSummary};
use serde_json::{json, Value};

fn summary(rule_id: &str, action: &str, evaluated: u64, matched: u64) -> Value {
    json!({"rule_id": rule_id, "action": action, "scope": "tenant", "policy_version": 1,
           "interval_s": 60, "evaluated": evaluated, "matched": matched,
           "connections_refused": 0})
}

fn last_bucket(series: &Value) -> u64 {
    let items = series.as_array().expect("series");
    assert_eq!(items.len(), 12, "{series}");
    // Everything was reported just now: only the newest bucket holds counts.
    assert!(items[..11].iter().all(|n| n == 0), "{series}");
    items[11].as_u64().expect("count")
}

#[tokio::test]
async fn counts_sum_every_edge_by_rule_with_the_tenants_totals() {
    let api = api().await;
    // Nothing reported yet.
    let empty = api.get_ok("/_netacl/v1/network-acls/counts").await;
    assert_eq!(empty["minutes"], 60);
    assert_eq!(empty["bucket_seconds"], 300);
    assert_eq!(empty["network_acls"], json!([]));
    assert_eq!(empty["totals"]["decisions"], 0);
    assert_eq!(empty["totals"]["blocked_share"], Value::Null);
    assert_eq!(empty["totals"]["decisions_series"], json!(vec![0u64; 12]));
    assert_eq!(empty["totals"]["blocked_series"], json!(vec![0u64; 12]));

    let (a, b) = (
        AclId::from_random(1).to_string(),
        AclId::from_random(2).to_string(),
    );
    // A remote edge: one report with a block rule and a log rule.
    let edge = scoped_token(&api.service, "edge-1", &["create:edge_summaries"]);
    let posted = api
        .send_as(
            &edge,
            Method::POST,
            "/_netacl/v1/edge/summaries",
            Some(json!({"summaries": [summary(&a, "block", 10, 4), summary(&b, "log", 6, 6)]})),
        )
        .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
    // The in-process edge: the block rule again.
    let in_process: AclSummary =
        serde_json::from_value(summary(&a, "block", 20, 5)).expect("summary");
    assert!(api.service.record_acl_summaries(&[in_process]).await);
    // A management write is no count.
    let created = api
        .send(
            Method::POST,
            "/api/v2/network-acls",
            Some(json!({"description": "r", "active": true, "priority": 1,
                "rule": {"action": {"block": true}, "scope": "tenant",
                         "match": {"ipv4_cidrs": ["192.0.2.0/24"]}}})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);

    let counts = api.get_ok("/_netacl/v1/network-acls/counts").await;
    let rules = counts["network_acls"].as_array().expect("rules");
    assert_eq!(rules.len(), 2, "{counts}");
    let rule = |id: &str| {
        rules
            .iter()
            .find(|r| r["rule_id"] == id)
            .unwrap_or_else(|| panic!("{id} in {counts}"))
    };
    assert_eq!(rule(&a)["action"], "block");
    assert_eq!(rule(&a)["evaluated"], 30);
    assert_eq!(rule(&a)["matched"], 9);
    assert_eq!(last_bucket(&rule(&a)["matched_series"]), 9);
    assert_eq!(last_bucket(&rule(&a)["evaluated_series"]), 30);
    assert_eq!(rule(&b)["action"], "log");
    assert_eq!(rule(&b)["matched"], 6);
    // Decisions: per report the largest evaluated (10 for the remote edge, 20 in process);
    // blocked: the block rule's matches.
    let totals = &counts["totals"];
    assert_eq!(totals["decisions"], 30, "{totals}");
    assert_eq!(last_bucket(&totals["decisions_series"]), 30);
    assert_eq!(totals["matched"], 15);
    assert_eq!(totals["blocked"], 9);
    // Per bucket too: the blocked matches by bucket (the log rule's are not blocks).
    assert_eq!(last_bucket(&totals["blocked_series"]), 9);
    assert_eq!(totals["blocked_share"], json!(0.3));
    assert_eq!(totals["decisions_per_second"], json!(30.0 / 3600.0));

    // A one-minute window: 5-second buckets, the same sums.
    let minute = api
        .get_ok("/_netacl/v1/network-acls/counts?minutes=1")
        .await;
    assert_eq!(minute["bucket_seconds"], 5);
    assert_eq!(minute["totals"]["decisions"], 30);
    let day = api
        .get_ok("/_netacl/v1/network-acls/counts?minutes=1440")
        .await;
    assert_eq!(day["bucket_seconds"], 7200);
    assert_eq!(day["totals"]["blocked"], 9);
}

#[tokio::test]
async fn bad_windows_and_missing_scopes_are_refused() {
    let api = api().await;
    for (query, name) in [
        ("minutes=0", "minutes"),
        ("minutes=1441", "minutes"),
        ("minutes=x", "minutes"),
        ("minutes=-5", "minutes"),
        ("hours=1", "hours"),
    ] {
        let answer = api
            .send(
                Method::GET,
                &format!("/_netacl/v1/network-acls/counts?{query}"),
                None,
            )
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}");
        let message = answer.body["message"].as_str().expect("message");
        assert!(message.contains(name), "{query}: {message}");
    }
    let reader = scoped_token(&api.service, "reader", &["read:network_acls"]);
    let ok = api
        .send_as(
            &reader,
            Method::GET,
            "/_netacl/v1/network-acls/counts",
            None,
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    let logs_only = scoped_token(&api.service, "logs", &["read:logs"]);
    let refused = api
        .send_as(
            &logs_only,
            Method::GET,
            "/_netacl/v1/network-acls/counts",
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
}

/// 10,000 rules reported by three edges (three reports each): the sums are right, and the time
/// of the answer is printed (measured, not asserted: see the README's figure).
#[tokio::test]
async fn a_ten_thousand_rule_tenant_with_several_edges_is_summed() {
    let api = api().await;
    let ids: Vec<String> = (0..10_000u128)
        .map(|i| AclId::from_random(i + 1).to_string())
        .collect();
    let mut edges = Vec::new();
    for e in 0..3 {
        let token = scoped_token(
            &api.service,
            &format!("edge-{e}"),
            &["create:edge_summaries"],
        );
        edges.push(token);
    }
    for _report in 0..3 {
        for edge in &edges {
            for chunk in ids.chunks(1_000) {
                let summaries: Vec<Value> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, id)| summary(id, "block", 1_000 - i as u64, 1))
                    .collect();
                let posted = api
                    .send_as(
                        edge,
                        Method::POST,
                        "/_netacl/v1/edge/summaries",
                        Some(json!({ "summaries": summaries })),
                    )
                    .await;
                assert_eq!(posted.status, StatusCode::OK, "{}", posted.body);
            }
        }
    }
    let started = std::time::Instant::now();
    let counts = api.get_ok("/_netacl/v1/network-acls/counts").await;
    let elapsed = started.elapsed();
    eprintln!("counts of 10,000 rules from 90,000 events: {elapsed:?}");
    let rules = counts["network_acls"].as_array().expect("rules");
    assert_eq!(rules.len(), 10_000);
    assert!(rules.iter().all(|r| r["matched"] == 9), "{}", rules[0]);
    assert_eq!(counts["totals"]["blocked"], 90_000);
    // One report per post (edge and date): its largest evaluated is 1,000.
    let decisions = counts["totals"]["decisions"].as_u64().expect("decisions");
    assert!(
        (1_000..=90_000).contains(&decisions) && decisions % 1_000 == 0,
        "{decisions}"
    );
}

/// The totals by bucket: events dated 37.5 and 2.5 minutes ago (the middles of buckets 4 and
/// 11) land in their own buckets, so the console can draw each bucket's rate and blocked share
/// (`decisions_series`, `blocked_series`).
#[tokio::test]
async fn the_totals_have_a_series_by_bucket_for_decisions_and_blocks() {
    use netacl_store::{LogRetention, LogStore, NewLogEvent, SqliteStore, TenantId};
    let api = api().await;
    let now = netacl_model::Timestamp::now().unix_millis();
    let (a, b) = (
        AclId::from_random(1).to_string(),
        AclId::from_random(2).to_string(),
    );
    let event =
        |seconds_ago: i64, rule: &str, action: &str, evaluated: u64, matched: u64| NewLogEvent {
            date_ms: now - seconds_ago * 1_000,
            event_type: "acls_summary".into(),
            client_id: None,
            record: json!({"description": "summary", "details": {
                "edge": "remote:edge-1", "rule_id": rule, "action": action, "scope": "tenant",
                "policy_version": 1, "interval_s": 60, "evaluated": evaluated,
                "matched": matched, "connections_refused": 0}}),
        };
    // Written beside the running service, as an edge's earlier reports would have been.
    let store = SqliteStore::open(api.dir(), netacl_model::Limits::default()).expect("store");
    store
        .append_log_events(
            &TenantId::default_tenant(),
            &[
                // 37.5 minutes ago (bucket 4 of 0..11): 50 decisions, 10 blocked.
                event(2_250, &a, "block", 50, 10),
                event(2_250, &b, "log", 20, 5),
                // 2.5 minutes ago (bucket 11): 200 decisions, 150 blocked.
                event(150, &a, "block", 200, 150),
            ],
            LogRetention {
                max_events: None,
                max_age_ms: None,
            },
        )
        .await
        .expect("events");
    let counts = api.get_ok("/_netacl/v1/network-acls/counts").await;
    let totals = &counts["totals"];
    let mut decisions = vec![0u64; 12];
    decisions[4] = 50;
    decisions[11] = 200;
    let mut blocked = vec![0u64; 12];
    blocked[4] = 10;
    blocked[11] = 150;
    assert_eq!(totals["decisions_series"], json!(decisions), "{totals}");
    assert_eq!(totals["blocked_series"], json!(blocked), "{totals}");
    assert_eq!(totals["decisions"], 250);
    assert_eq!(totals["blocked"], 160);
    assert_eq!(totals["blocked_share"], json!(160.0 / 250.0));
}

//! The engine: atomic publication, one snapshot per decision, failed publications.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use netacl_eval::{CompileError, Engine, Request, Verdict};
use netacl_model::{AclId, RequestScope, RuleSet};
use serde_json::json;

use crate::support;

fn id_for(version: u64, tag: u128) -> AclId {
    AclId::from_random((u128::from(version) << 8) | tag)
}

/// Version `n`: a log rule and a redirect rule whose ids and redirect target encode `n`, behind
/// `n % 4` rules that never match (so the ordinals shift from version to version).
fn versioned_rules(n: u64) -> RuleSet {
    let mut records = Vec::new();
    for filler in 0..(n % 4) {
        records.push(json!({
            "id": id_for(n, 10 + u128::from(filler)).as_str(),
            "description": "filler", "active": true, "priority": 1,
            "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [999]}},
            "created_at": support::TS, "updated_at": support::TS,
        }));
    }
    records.push(json!({
        "id": id_for(n, 1).as_str(),
        "description": "log", "active": true, "priority": 10,
        "rule": {"action": {"log": true}, "scope": "tenant", "match": {"asns": [1]}},
        "created_at": support::TS, "updated_at": support::TS,
    }));
    records.push(json!({
        "id": id_for(n, 2).as_str(),
        "description": "redirect", "active": true, "priority": 20,
        "rule": {"action": {"redirect": true, "redirect_uri": format!("https://example.com/v/{n}")},
                 "scope": "tenant", "match": {"asns": [1]}},
        "created_at": support::TS, "updated_at": support::TS,
    }));
    support::rule_set(records, n)
}

#[test]
fn decisions_never_mix_two_versions_while_versions_are_published() {
    const VERSIONS: u64 = 3_000;
    const READERS: usize = 3;
    let limit = Duration::from_secs(20);
    let sets: Vec<RuleSet> = (1..=VERSIONS).map(versioned_rules).collect();
    let engine = Arc::new(Engine::new());
    engine.publish(&sets[0]).expect("compiles");
    let done = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let engine = Arc::clone(&engine);
            let done = Arc::clone(&done);
            let checked = Arc::clone(&checked);
            std::thread::spawn(move || {
                let request = Request::new(RequestScope::Authentication).with_asn(1);
                let mut last_version = 0;
                let mut count = 0u64;
                while !done.load(Ordering::Relaxed)
                    && started.elapsed() < limit
                    && count < 5_000_000
                {
                    let evaluation = engine.evaluate(&request);
                    let version = evaluation.decision().version();
                    assert_eq!(evaluation.policy().version(), version);
                    assert!(version >= last_version, "versions went backwards");
                    last_version = version;
                    assert_eq!(evaluation.verdict(), Verdict::Redirect);
                    assert_eq!(evaluation.rule_id(), Some(&id_for(version, 2)));
                    let expected_uri = format!("https://example.com/v/{version}");
                    assert_eq!(evaluation.redirect_uri(), Some(expected_uri.as_str()));
                    let monitored: Vec<&AclId> = evaluation.monitored_ids().collect();
                    assert_eq!(monitored, vec![&id_for(version, 1)]);
                    count += 1;
                }
                checked.fetch_add(count, Ordering::Relaxed);
                last_version
            })
        })
        .collect();

    let mut published = 1;
    for set in &sets[1..] {
        if started.elapsed() > limit {
            break;
        }
        let policy = engine.publish(set).expect("compiles");
        assert_eq!(policy.version(), set.version);
        published += 1;
    }
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        let last = reader.join().expect("reader thread did not panic");
        assert!(last >= 1);
    }
    assert!(published > 100, "published only {published} versions");
    assert!(checked.load(Ordering::Relaxed) > 0);
    assert_eq!(engine.policy().version(), published);
}

#[test]
fn a_rule_set_that_fails_to_compile_leaves_the_old_policy_in_service() {
    let engine = Engine::new();
    assert_eq!(engine.policy().version(), 0);
    assert_eq!(
        engine
            .evaluate(&Request::new(RequestScope::Management).with_asn(1))
            .verdict(),
        Verdict::None
    );
    let good = versioned_rules(5);
    engine.publish(&good).expect("compiles");

    let mut bad = versioned_rules(6);
    let duplicate = bad.acls[0].clone();
    bad.acls.push(duplicate);
    let err = engine.publish(&bad).expect_err("duplicate ids are refused");
    assert!(matches!(err, CompileError::DuplicateId { .. }), "{err}");
    assert!(err.to_string().contains(bad.acls[0].id.as_str()));

    assert_eq!(engine.policy().version(), 5);
    let evaluation = engine.evaluate(&Request::new(RequestScope::Authentication).with_asn(1));
    assert_eq!(evaluation.rule_id(), Some(&id_for(5, 2)));
}

#[test]
fn install_swaps_a_precompiled_policy() {
    let engine = Engine::default();
    let policy =
        Arc::new(netacl_eval::CompiledPolicy::compile(&versioned_rules(9)).expect("compiles"));
    engine.install(Arc::clone(&policy));
    assert!(Arc::ptr_eq(&engine.policy(), &policy));
    let decision = engine
        .evaluate(&Request::new(RequestScope::Authentication).with_asn(1))
        .into_decision();
    assert_eq!(decision.version(), 9);
    assert_eq!(
        policy.rule_id(decision.rule().expect("decided")),
        &id_for(9, 2)
    );
}

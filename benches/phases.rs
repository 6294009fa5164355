//! The evaluator's phases: validate (JSON records → rule set), compile (rule set → policy),
//! evaluate (one decision, by rule-set size), evaluate_vs_reference (compiled and reference on
//! the same requests), swap (evaluating while another thread publishes policies).
//!
//! Run with `cargo bench -p netacl-benches --bench phases`. Sample sizes are kept small so the
//! whole run takes a few minutes.
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use netacl_benches::{tenant, Tenant};
use netacl_eval::{reference, CompiledPolicy, Engine, Request};
use netacl_model::RuleSet;

/// Rule-set sizes: each rule holds ten CIDRs on average, so 10,000 rules hold 100,000.
const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
const REQUESTS: usize = 20_000;

fn requests(t: &Tenant) -> Vec<Request<'_>> {
    t.requests
        .iter()
        .map(|r| r.to_request().expect("synthetic requests are valid"))
        .collect()
}

fn validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for rules in [100, 1_000, 10_000] {
        let t = tenant(rules, rules * 10, 1);
        let limits = netacl_eval::synthetic::limits_for(&t.config);
        group.throughput(Throughput::Elements(rules as u64));
        group.bench_with_input(
            BenchmarkId::new("rules", rules),
            &t.records,
            |b, records| {
                b.iter(|| RuleSet::from_json(black_box(records), 1, &limits).expect("valid"))
            },
        );
    }
    group.finish();
}

fn compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    for rules in SIZES {
        let t = tenant(rules, rules * 10, 1);
        let limits = netacl_eval::synthetic::limits_for(&t.config);
        group.throughput(Throughput::Elements(rules as u64));
        group.bench_with_input(BenchmarkId::new("rules", rules), &t.rules, |b, set| {
            b.iter(|| {
                CompiledPolicy::compile_with_limits(black_box(set), &limits).expect("compiles")
            })
        });
    }
    group.finish();
}

/// One decision per iteration, cycling through the request mix.
fn bench_decisions(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    policy: &CompiledPolicy,
    requests: &[Request<'_>],
) {
    group.bench_function(id, |b| {
        let mut at = 0;
        b.iter(|| {
            at = if at + 1 == requests.len() { 0 } else { at + 1 };
            policy.evaluate(black_box(&requests[at]))
        })
    });
}

fn evaluate(c: &mut Criterion) {
    let mut group = c.benchmark_group("evaluate");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    for rules in SIZES {
        let t = tenant(rules, rules * 10, REQUESTS);
        let reqs = requests(&t);
        bench_decisions(
            &mut group,
            BenchmarkId::new("rules", rules),
            &t.policy,
            &reqs,
        );
    }
    let t = tenant(100, 1_000_000, REQUESTS);
    let reqs = requests(&t);
    bench_decisions(
        &mut group,
        BenchmarkId::new("tenant_100_rules_1m_cidrs", 100),
        &t.policy,
        &reqs,
    );
    group.finish();
}

fn evaluate_vs_reference(c: &mut Criterion) {
    let mut group = c.benchmark_group("evaluate_vs_reference");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    for rules in [100, 1_000] {
        let t = tenant(rules, rules * 10, 2_000);
        let reqs = requests(&t);
        bench_decisions(
            &mut group,
            BenchmarkId::new("compiled", rules),
            &t.policy,
            &reqs,
        );
        group.bench_function(BenchmarkId::new("reference", rules), |b| {
            let mut at = 0;
            b.iter(|| {
                at = if at + 1 == reqs.len() { 0 } else { at + 1 };
                reference::evaluate(&t.rules, black_box(&reqs[at]))
            })
        });
    }
    group.finish();
}

fn swap(c: &mut Criterion) {
    let mut group = c.benchmark_group("swap");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    let t = tenant(1_000, 10_000, REQUESTS);
    let reqs = requests(&t);
    // Two precompiled versions to alternate between.
    let a = Arc::new(t.policy.clone());
    let b = Arc::new(
        CompiledPolicy::compile_with_limits(
            &t.rules,
            &netacl_eval::synthetic::limits_for(&t.config),
        )
        .expect("compiles"),
    );
    let engine = Arc::new(Engine::new());
    engine.install(Arc::clone(&a));

    group.bench_function("engine_evaluate_quiet", |bench| {
        let mut at = 0;
        bench.iter(|| {
            at = if at + 1 == reqs.len() { 0 } else { at + 1 };
            engine.evaluate(black_box(&reqs[at])).into_decision()
        })
    });

    let stop = Arc::new(AtomicBool::new(false));
    let publisher = {
        let engine = Arc::clone(&engine);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut flip = false;
            while !stop.load(Ordering::Relaxed) {
                engine.install(Arc::clone(if flip { &a } else { &b }));
                flip = !flip;
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    };
    group.bench_function("engine_evaluate_while_publishing", |bench| {
        let mut at = 0;
        bench.iter(|| {
            at = if at + 1 == reqs.len() { 0 } else { at + 1 };
            engine.evaluate(black_box(&reqs[at])).into_decision()
        })
    });
    stop.store(true, Ordering::Relaxed);
    publisher.join().expect("publisher thread");
    group.bench_function("publish_1000_rules", |bench| {
        bench.iter(|| engine.publish(black_box(&t.rules)).expect("compiles"))
    });
    group.finish();
}

criterion_group!(
    benches,
    validate,
    compile,
    evaluate,
    evaluate_vs_reference,
    swap
);
criterion_main!(benches);

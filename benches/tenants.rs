//! Many tenants behind one edge: selecting the tenant by host, a decision by host (selection,
//! the tenant's snapshot, the evaluation) against the same decision with the tenant's policy
//! held directly, and a rule change in one tenant of many (compile and install). Sizes 1,000
//! and 10,000 tenants of 1 to 10 rules (`netacl_eval::synthetic`).
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use netacl_edge::{TenantChange, TenantRouter};
use netacl_eval::synthetic::{self, SyntheticConfig};
use netacl_eval::{Request, RequestInput};
use netacl_model::RuleSet;

struct Platform {
    router: TenantRouter,
    rules: Vec<RuleSet>,
    requests: Vec<(String, RequestInput)>,
}

fn platform(tenants: usize) -> Platform {
    let mut rules = Vec::with_capacity(tenants);
    let mut requests = Vec::new();
    let mut changes = Vec::with_capacity(tenants);
    for i in 0..tenants {
        let config = SyntheticConfig {
            rules: 1 + i % 10,
            cidrs: 3 * (1 + i % 10),
            requests: 2,
            seed: i as u64,
        };
        let generated = synthetic::generate(&config);
        let set = generated.rule_set(&config).expect("valid");
        let host = format!("t{i}.bench.example");
        changes.push(TenantChange::put(
            &format!("tenant-{i}"),
            [&host],
            set.clone(),
        ));
        requests.extend(generated.requests.into_iter().map(|r| (host.clone(), r)));
        rules.push(set);
    }
    let router = TenantRouter::new();
    let report = router.apply(changes);
    assert!(report.failed.is_empty());
    // Spread over the tenants, not in tenant order.
    let n = requests.len();
    let stride = 7919 % n.max(1);
    let requests = (0..n)
        .map(|k| requests[(k * stride.max(1)) % n].clone())
        .collect();
    Platform {
        router,
        rules,
        requests,
    }
}

fn tenants(c: &mut Criterion) {
    let mut group = c.benchmark_group("tenants");
    for size in [1_000usize, 10_000] {
        let p = platform(size);
        let digests: Vec<(&str, Request<'_>)> = p
            .requests
            .iter()
            .map(|(h, r)| (h.as_str(), r.to_request().expect("request")))
            .collect();
        let policies: Vec<_> = digests
            .iter()
            .map(|(h, _)| p.router.select(h).expect("tenant").engine().policy())
            .collect();
        let mut i = 0usize;
        group.bench_function(BenchmarkId::new("select", size), |b| {
            b.iter(|| {
                i = (i + 1) % digests.len();
                black_box(
                    p.router
                        .with_tenant(black_box(digests[i].0), |t| t.id().len()),
                )
            })
        });
        group.bench_function(BenchmarkId::new("decide_by_host", size), |b| {
            b.iter(|| {
                i = (i + 1) % digests.len();
                let (host, request) = &digests[i];
                black_box(
                    p.router
                        .with_tenant(black_box(host), |t| t.policy().evaluate(black_box(request))),
                )
            })
        });
        group.bench_function(BenchmarkId::new("decide_policy_held", size), |b| {
            b.iter(|| {
                i = (i + 1) % digests.len();
                black_box(policies[i].evaluate(black_box(&digests[i].1)))
            })
        });
        let mut n = 0u64;
        group.bench_function(BenchmarkId::new("change_one_tenant", size), |b| {
            b.iter(|| {
                n += 1;
                let t = (n as usize * 31) % size;
                let mut rules = p.rules[t].clone();
                rules.version = 1 + n;
                let report = p.router.apply([TenantChange::put(
                    &format!("tenant-{t}"),
                    [format!("t{t}.bench.example")],
                    rules,
                )]);
                black_box(report.compiled)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, tenants);
criterion_main!(benches);

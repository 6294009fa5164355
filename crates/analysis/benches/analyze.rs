//! Criterion group `analyze`: the rule-set analysis over the synthetic tenant
//! (`netacl_eval::synthetic`) at 100 and 1,000 rules (ten CIDRs per rule). Targets: 100 rules
//! ≤ 100 ms, 10,000 ≤ 10 s; 10,000 rules take seconds per analysis (2.8 million findings), too
//! long for criterion's samples: `netacl bench --analyze --rules N --cidrs M --rounds R`
//! measures them.
use criterion::{criterion_group, criterion_main, Criterion};
use netacl_eval::synthetic::{self, SyntheticConfig};

fn analyze(c: &mut Criterion) {
    let mut group = c.benchmark_group("analyze");
    group.sample_size(10);
    for (rules, cidrs) in [(100, 1_000), (1_000, 10_000)] {
        let config = SyntheticConfig {
            rules,
            cidrs,
            requests: 1,
            ..SyntheticConfig::default()
        };
        let set = synthetic::generate(&config)
            .rule_set(&config)
            .expect("the synthetic rule set validates");
        group.bench_function(format!("rules_{rules}"), |b| {
            b.iter(|| netacl_analysis::analyze(&set))
        });
    }
    group.finish();
}

criterion_group!(benches, analyze);
criterion_main!(benches);

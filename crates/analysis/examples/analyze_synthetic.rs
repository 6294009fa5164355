//! Times the analysis of the synthetic tenant: `cargo run --release -p netacl-analysis
//! --example analyze_synthetic -- RULES CIDRS` prints rules, findings by kind, undecided rules
//! and the time of one analysis.
use std::time::Instant;

use netacl_eval::synthetic::{self, SyntheticConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let rules: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let cidrs: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(rules * 10);
    let config = SyntheticConfig {
        rules,
        cidrs,
        requests: 1,
        ..SyntheticConfig::default()
    };
    let set = synthetic::generate(&config)
        .rule_set(&config)
        .expect("the synthetic rule set validates");
    let start = Instant::now();
    let analysis = netacl_analysis::analyze(&set);
    let elapsed = start.elapsed();
    let count = |kind: &str| {
        analysis
            .findings
            .iter()
            .filter(|f| f.kind.as_str() == kind)
            .count()
    };
    println!(
        "{{\"rules\": {rules}, \"cidrs\": {cidrs}, \"shadowed\": {}, \"redundant\": {}, \"conflict\": {}, \"undecided\": {}, \"ms\": {:.1}}}",
        count("shadowed"),
        count("redundant"),
        count("conflict"),
        analysis.undecided.len(),
        elapsed.as_secs_f64() * 1000.0
    );
}

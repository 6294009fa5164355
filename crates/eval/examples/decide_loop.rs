//! A measurement driver for profilers: compiles a synthetic tenant and decides its request mix
//! `passes` times, printing compile time and a checksum. With `passes = 0` it stops after
//! compiling, so that `perf stat` or cachegrind over two runs (`0` and `N` passes) isolates the
//! decision cost: `(counter(N) - counter(0)) / (N * requests)`.
//!
//! ```text
//! cargo run --release -p netacl-eval --example decide_loop -- RULES CIDRS PASSES [REQUESTS]
//! ```
//!
//! The decisions alone, per source line, under callgrind:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='decide_loop::decide_all' \
//!     target/release/examples/decide_loop 100 1000 3
//! callgrind_annotate --auto=yes callgrind.out.*
//! ```
use std::hint::black_box;
use std::time::Instant;

use netacl_eval::synthetic::{self, SyntheticConfig};
use netacl_eval::{CompiledPolicy, Request, Verdict};

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// The measured loop, out of line so that a profiler can collect it alone
/// (`valgrind --tool=callgrind --toggle-collect='decide_loop::decide_all' ...`).
#[inline(never)]
fn decide_all(policy: &CompiledPolicy, requests: &[Request<'_>], passes: usize) -> usize {
    let mut blocked = 0usize;
    for _ in 0..passes {
        for request in requests {
            blocked += usize::from(policy.evaluate(black_box(request)).verdict() == Verdict::Block);
        }
    }
    blocked
}

fn main() {
    let config = SyntheticConfig {
        rules: arg(1, 10_000).max(1),
        cidrs: arg(2, 100_000),
        requests: arg(4, 20_000).max(1),
        ..SyntheticConfig::default()
    };
    let passes = arg(3, 10);
    let generated = synthetic::generate(&config);
    let rules = match generated.rule_set(&config) {
        Ok(rules) => rules,
        Err(e) => {
            eprintln!("the synthetic rule set does not validate: {e}");
            std::process::exit(1);
        }
    };
    let limits = synthetic::limits_for(&config);
    // Compile a few times: the first run warms the allocator.
    let mut compile_ms = Vec::new();
    let mut policy = None;
    for _ in 0..5 {
        let t = Instant::now();
        match CompiledPolicy::compile_with_limits(&rules, &limits) {
            Ok(p) => policy = Some(p),
            Err(e) => {
                eprintln!("the synthetic rule set does not compile: {e}");
                std::process::exit(1);
            }
        }
        compile_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let Some(policy) = policy else { return };
    compile_ms.sort_by(f64::total_cmp);
    // Laid out as `netacl bench` lays its mix out: copied after compilation, in order.
    let mix = generated.requests.clone();
    let requests: Vec<Request<'_>> = mix
        .iter()
        .filter_map(|input| input.to_request().ok())
        .collect();
    let t = Instant::now();
    let blocked = decide_all(&policy, &requests, passes);
    let decisions = (passes * requests.len()).max(1);
    println!(
        "rules {} cidrs {} compile_ms min {:.2} median {:.2} decisions {} ns/decision {:.1} blocked {}",
        config.rules,
        config.cidrs,
        compile_ms[0],
        compile_ms[compile_ms.len() / 2],
        passes * requests.len(),
        t.elapsed().as_secs_f64() * 1e9 / decisions as f64,
        blocked
    );
}

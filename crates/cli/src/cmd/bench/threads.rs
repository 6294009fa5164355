//! `netacl bench --threads T`: the same policy and mix decided on T threads at once.
//!
//! Each thread decides its own copy of the mix (the policy is shared, read-only: a decision
//! writes nothing shared; the user-agent memo is per thread), started together behind a
//! barrier; the aggregate is every thread's decisions over the wall time from the start to the
//! last thread's end. Median of the rounds.
use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

use netacl_eval::{CompiledPolicy, Request};

/// Aggregate decisions per second of `threads` threads, each passing `passes` times over its
/// copy of `requests`, median of `rounds`.
pub fn aggregate(
    policy: &CompiledPolicy,
    requests: &[Request<'_>],
    threads: usize,
    passes: usize,
    rounds: usize,
) -> f64 {
    let mut per_round: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let barrier = Barrier::new(threads + 1);
            let start = std::thread::scope(|scope| {
                for _ in 0..threads {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let own: Vec<Request<'_>> = requests.to_vec();
                        barrier.wait();
                        for _ in 0..passes {
                            for request in &own {
                                black_box(policy.evaluate(black_box(request)));
                            }
                        }
                    });
                }
                barrier.wait();
                Instant::now()
            });
            let seconds = start.elapsed().as_secs_f64();
            (threads * passes * requests.len()) as f64 / seconds
        })
        .collect();
    per_round.sort_by(f64::total_cmp);
    per_round[per_round.len() / 2]
}

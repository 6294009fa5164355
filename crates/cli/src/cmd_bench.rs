//! `netacl bench`: the compiled evaluator against the reference evaluator on a synthetic tenant.
//!
//! The tenant and the request mix come from `netacl_eval::synthetic` (seeded, so runs are
//! comparable). The compiled evaluator decides every request in several rounds and the median
//! round is reported, once on the mix as generated and once with no user agent repeated (the
//! cost when the per-thread memo of user-agent results never helps); the reference evaluator
//! decides a bounded sample (it is linear in the rule set) in the same run, and both must agree
//! on every request of the sample.
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use netacl_eval::synthetic::{self, SyntheticConfig};
use netacl_eval::{reference, CompiledPolicy, Request, RequestInput, Verdict};
use serde::Serialize;

/// Arguments of `netacl bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Rules in the synthetic rule set.
    #[arg(long, default_value_t = 10_000)]
    rules: usize,
    /// CIDR entries over all rules.
    #[arg(long, default_value_t = 100_000)]
    cidrs: usize,
    /// Requests in the mix (each compiled round decides all of them).
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    /// Rounds of the compiled evaluator (each passes over the mix for about 100 ms); the median
    /// is reported.
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Requests decided by the reference evaluator (a sample of the mix: it is slow).
    #[arg(long, default_value_t = 300)]
    reference_requests: usize,
    /// Seed of the synthetic tenant.
    #[arg(long, default_value_t = SyntheticConfig::default().seed)]
    seed: u64,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    rules: usize,
    active_rules: usize,
    cidrs: usize,
    entries: usize,
    requests: usize,
    rounds: usize,
    generate_ms: f64,
    validate_ms: f64,
    compile_ms: f64,
    compiled_ns_per_decision: f64,
    compiled_ns_min: f64,
    compiled_ns_max: f64,
    /// The median with every browser user agent of the mix made unique (no remembered
    /// user-agent result ever helps).
    compiled_ns_per_decision_unique_user_agents: f64,
    /// Mean on-CPU time per decision over all rounds (excludes time the thread was not
    /// scheduled).
    #[serde(skip_serializing_if = "Option::is_none")]
    compiled_cpu_ns_per_decision: Option<f64>,
    reference_requests: usize,
    reference_ns_per_decision: f64,
    speedup: f64,
    decisions_per_second: f64,
    policy_bytes: usize,
    bytes_per_cidr: f64,
    verdicts: Verdicts,
}

#[derive(Serialize, Default)]
struct Verdicts {
    block: usize,
    allow: usize,
    redirect: usize,
    none: usize,
    with_monitored: usize,
}

/// Nanoseconds this thread has spent on a CPU (Linux `/proc/thread-self/schedstat`), so that
/// time the scheduler gave to other processes does not count; `None` elsewhere.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The timed loop: every request of the mix decided `passes` times. Out of line so that a
/// profiler can collect it alone (`valgrind --tool=callgrind
/// --toggle-collect='netacl::cmd_bench::decide_passes' netacl bench ...`).
#[inline(never)]
fn decide_passes(policy: &CompiledPolicy, requests: &[Request<'_>], passes: usize) {
    for _ in 0..passes {
        for request in requests {
            black_box(policy.evaluate(black_box(request)));
        }
    }
}

/// The request digests of a mix (borrowing its strings).
fn digests(mix: &[RequestInput]) -> anyhow::Result<Vec<Request<'_>>> {
    mix.iter()
        .map(|input| input.to_request())
        .collect::<Result<_, _>>()
        .context("a synthetic request is invalid")
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Runs `netacl bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.rules > 0, "--rules must be at least 1");
    anyhow::ensure!(args.requests > 0, "--requests must be at least 1");
    let rounds = args.rounds.max(1);
    let config = SyntheticConfig {
        rules: args.rules,
        cidrs: args.cidrs,
        requests: args.requests,
        seed: args.seed,
    };

    let t = Instant::now();
    let generated = synthetic::generate(&config);
    let generate_ms = ms(t);

    let t = Instant::now();
    let rules = generated
        .rule_set(&config)
        .context("the synthetic rule set does not validate")?;
    let validate_ms = ms(t);

    let t = Instant::now();
    let policy = CompiledPolicy::compile_with_limits(&rules, &synthetic::limits_for(&config))
        .context("the synthetic rule set does not compile")?;
    let compile_ms = ms(t);

    // The mix is copied after compilation so that each request's strings lie together and the
    // requests follow one another in memory, as a proxy's parser leaves them in its buffers
    // (not scattered among the generator's other allocations).
    let mix = generated.requests.clone();
    let requests = digests(&mix)?;

    // Warm up, and count the verdicts of the mix.
    let mut verdicts = Verdicts::default();
    for request in &requests {
        let decision = policy.evaluate(request);
        match decision.verdict() {
            Verdict::Block => verdicts.block += 1,
            Verdict::Allow => verdicts.allow += 1,
            Verdict::Redirect => verdicts.redirect += 1,
            Verdict::None => verdicts.none += 1,
        }
        verdicts.with_monitored += usize::from(!decision.monitored().is_empty());
    }

    // Each round passes over the mix often enough to last about 100 ms, so that the on-CPU
    // time (which the kernel accounts in scheduler ticks) is measured to a few percent.
    let t = Instant::now();
    decide_passes(&policy, &requests, 1);
    let one_pass = t.elapsed().as_secs_f64().max(1e-6);
    let passes = ((0.1 / one_pass).ceil() as usize).clamp(1, 1_000);
    let decisions_per_round = (passes * requests.len()) as f64;
    let mut per_round = Vec::with_capacity(rounds);
    let mut cpu_total = Some(0u64);
    for _ in 0..rounds {
        let cpu = thread_cpu_ns();
        let t = Instant::now();
        decide_passes(&policy, &requests, passes);
        per_round.push(t.elapsed().as_secs_f64() * 1e9 / decisions_per_round);
        cpu_total = match (cpu_total, cpu, thread_cpu_ns()) {
            (Some(total), Some(before), Some(after)) => Some(total + after.saturating_sub(before)),
            _ => None,
        };
    }
    per_round.sort_by(f64::total_cmp);
    let compiled_ns = per_round[per_round.len() / 2];

    // The same mix with no user agent repeated: remembered user-agent results never help.
    let unique_mix = synthetic::with_unique_browser_user_agents(&generated.requests);
    let unique = digests(&unique_mix)?;
    for (a, b) in requests.iter().zip(&unique) {
        anyhow::ensure!(
            policy.evaluate(a).verdict() == policy.evaluate(b).verdict(),
            "a unique user agent changed a decision: {b:?}"
        );
    }
    let mut unique_rounds: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            decide_passes(&policy, &unique, passes);
            t.elapsed().as_secs_f64() * 1e9 / decisions_per_round
        })
        .collect();
    unique_rounds.sort_by(f64::total_cmp);
    let unique_ua_ns = unique_rounds[unique_rounds.len() / 2];
    let compiled_cpu_ns = cpu_total
        .filter(|&total| total > 0)
        .map(|total| total as f64 / (decisions_per_round * rounds as f64));

    // The reference evaluator on an evenly spread sample, checked against the compiled one.
    let sample_len = args.reference_requests.clamp(1, requests.len());
    let step = requests.len() / sample_len;
    let sample: Vec<&Request<'_>> = requests
        .iter()
        .step_by(step.max(1))
        .take(sample_len)
        .collect();
    let t = Instant::now();
    let expected: Vec<_> = sample
        .iter()
        .map(|request| reference::evaluate(&rules, black_box(request)))
        .collect();
    let reference_ns = t.elapsed().as_secs_f64() * 1e9 / sample.len() as f64;
    for (request, expected) in sample.iter().zip(&expected) {
        let got = policy.outcome(&policy.evaluate(request));
        anyhow::ensure!(
            &got == expected,
            "the compiled and reference evaluators disagree on {request:?}: {got:?} vs {expected:?}"
        );
    }

    let stats = policy.stats();
    let cidrs = generated.cidrs;
    let report = Report {
        rules: rules.acls.len(),
        active_rules: stats.active_rules,
        cidrs,
        entries: stats.entries,
        requests: requests.len(),
        rounds,
        generate_ms,
        validate_ms,
        compile_ms,
        compiled_ns_per_decision: compiled_ns,
        compiled_ns_min: per_round[0],
        compiled_ns_max: per_round[per_round.len() - 1],
        compiled_ns_per_decision_unique_user_agents: unique_ua_ns,
        compiled_cpu_ns_per_decision: compiled_cpu_ns,
        reference_requests: sample.len(),
        reference_ns_per_decision: reference_ns,
        speedup: reference_ns / compiled_ns,
        decisions_per_second: 1e9 / compiled_ns,
        policy_bytes: stats.approx_bytes,
        bytes_per_cidr: if cidrs == 0 {
            0.0
        } else {
            stats.approx_bytes as f64 / cidrs as f64
        },
        verdicts,
    };

    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let r = &report;
        println!(
            "synthetic tenant: {} rules ({} active), {} CIDRs, {} entries (seed {})",
            r.rules, r.active_rules, r.cidrs, r.entries, args.seed
        );
        println!(
            "generate {:.1} ms, validate {:.1} ms, compile {:.1} ms, policy {:.1} MiB ({:.1} bytes per CIDR)",
            r.generate_ms,
            r.validate_ms,
            r.compile_ms,
            r.policy_bytes as f64 / (1024.0 * 1024.0),
            r.bytes_per_cidr
        );
        println!(
            "compiled:  {:.0} ns per decision (median of {} rounds over {} requests; min {:.0}, max {:.0}), {:.1} M decisions/s on one thread",
            r.compiled_ns_per_decision,
            r.rounds,
            r.requests,
            r.compiled_ns_min,
            r.compiled_ns_max,
            r.decisions_per_second / 1e6
        );
        println!(
            "           {:.0} ns per decision with no user agent repeated (remembered user-agent results never help)",
            r.compiled_ns_per_decision_unique_user_agents
        );
        if let Some(cpu) = r.compiled_cpu_ns_per_decision {
            println!("           {cpu:.0} ns of CPU time per decision (mean; excludes time other processes had the core)");
        }
        println!(
            "reference: {:.0} ns per decision ({} requests, same answers) → compiled is {:.0}× faster",
            r.reference_ns_per_decision, r.reference_requests, r.speedup
        );
        println!(
            "mix: {} block, {} allow, {} redirect, {} none; {} with log matches",
            r.verdicts.block,
            r.verdicts.allow,
            r.verdicts.redirect,
            r.verdicts.none,
            r.verdicts.with_monitored
        );
    }
    Ok(ExitCode::SUCCESS)
}

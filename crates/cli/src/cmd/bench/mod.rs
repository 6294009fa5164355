//! `netacl bench`: the compiled evaluator against the reference evaluator on a synthetic tenant.
//!
//! The tenant and the request mix come from `netacl_eval::synthetic` (seeded, so runs are
//! comparable). The compiled evaluator decides every request in several rounds and the median
//! round is reported, once on the mix as generated and once with no user agent repeated (the
//! cost when the per-thread memo of user-agent results never helps); the reference evaluator
//! decides a bounded sample (it is linear in the rule set) in the same run, and both must agree
//! on every request of the sample.
//!
//! `--deny-all` adds a `match_all` block rule after every other rule (a deny-all under the
//! tenant's allow rules). `--managed-list-cidrs N` also measures a managed list of N IPv4
//! CIDRs named by `--managed-list-rules` rules against the same CIDRs written into one rule
//! (the same tenant around them, the same requests, a fifth of them from a listed network):
//! index build and compile times, and the cost per decision of each, in alternating rounds.
//!
//! Memory: `policy_bytes` (what the policy's tables hold, table by table in `policy_tables`),
//! `policy_resident_bytes` (what one more compiled policy adds to a process's resident memory,
//! measured in a child process) and `compile_resident_bytes` (this process's resident memory
//! after its compile less before); see `memory.rs`.
pub mod analyze;
pub mod enrich;
pub mod memory;
pub mod tenants;
pub mod threads;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use std::sync::Arc;

use netacl_eval::synthetic::{self, SyntheticConfig};
use netacl_eval::{reference, CompiledPolicy, ManagedIndex, Request, RequestInput, Verdict};
use netacl_model::{AclId, ManagedList, ManagedListName, ManagedLists, RuleSet};
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
    /// Add a rule blocking every request (`match_all`, scope tenant) after all the others.
    #[arg(long)]
    deny_all: bool,
    /// Also measure a managed list of this many IPv4 CIDRs (0: not measured).
    #[arg(long, default_value_t = 0)]
    managed_list_cidrs: usize,
    /// Rules naming the managed list of --managed-list-cidrs.
    #[arg(long, default_value_t = 10)]
    managed_list_rules: usize,
    /// Also decide on this many threads at once (aggregate decisions per second).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Measure geo/ASN conditions answered by intervals compiled from databases (generated:
    /// about 1,050,000 City-like and 200,000 ASN networks) for never-seen addresses; with
    /// --tenants, by the table of every tenant.
    #[arg(long)]
    enrich: bool,
    /// With --enrich: this City database instead of a generated one.
    #[arg(long, value_name = "PATH")]
    geoip_city: Option<std::path::PathBuf>,
    /// With --enrich: this ASN database instead of a generated one.
    #[arg(long, value_name = "PATH")]
    geoip_asn: Option<std::path::PathBuf>,
    /// Measure a platform of this many tenants behind one edge instead (see
    /// `cmd/bench/tenants.rs`; 0: one tenant, the usual measurement).
    #[arg(long, default_value_t = 0)]
    tenants: usize,
    /// With --tenants: tenants with --large-tenant-rules rules (the others have 1 to 10).
    #[arg(long, default_value_t = 3)]
    large_tenants: usize,
    /// With --tenants: rules of each large tenant.
    #[arg(long, default_value_t = 2_000)]
    large_tenant_rules: usize,
    /// With --tenants: rule changes timed until enforced.
    #[arg(long, default_value_t = 500)]
    change_samples: usize,
    /// Measure the rule-set analysis (`netacl lint`) of the synthetic tenant instead (see
    /// `cmd/bench/analyze.rs`; --rounds analyses, the median reported).
    #[arg(long)]
    analyze: bool,
    /// With --analyze: the rule set made to be costly to analyse
    /// (`netacl_eval::synthetic::overlapping`: --rules rules whose CIDRs, ASNs and countries
    /// all overlap) instead of the synthetic tenant.
    #[arg(long)]
    overlapping: bool,
    /// With --analyze: at most this many work units (the analysis's budget, as `netacl serve
    /// --analysis-work` gives it); default: no bound.
    #[arg(long, value_name = "UNITS")]
    work_budget: Option<u64>,
    /// With --tenants: the per-rule counters striped as on a machine of this many cores (at
    /// most 16; 0: this machine's).
    #[arg(long, default_value_t = 0)]
    stripes: usize,
    /// Internal: the resident-memory measurement of `policy_resident_bytes`, run by `netacl
    /// bench` in a child process (see `memory.rs`); prints one JSON object.
    #[arg(long, hide = true)]
    resident_child: bool,
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
    /// What compiling the policy adds to a process's resident memory (see
    /// [`crate::cmd::bench::memory`]).
    policy_resident_bytes: u64,
    /// `policy_resident_bytes` per CIDR.
    resident_bytes_per_cidr: f64,
    /// This process's resident memory after its compile less before (the request mix not yet
    /// built), with the allocator's defaults: the policy and the compile's freed scratch
    /// memory that the allocator keeps for reuse.
    compile_resident_bytes: u64,
    /// `policy_bytes` table by table.
    policy_tables: Vec<crate::cmd::bench::memory::TableBytes>,
    verdicts: Verdicts,
    /// Whether a `match_all` deny-all rule was added after the others.
    deny_all: bool,
    /// The managed-list measurement (`--managed-list-cidrs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    managed_list: Option<ManagedReport>,
    /// Threads deciding at once (`decisions_per_second` is their aggregate).
    threads: usize,
    /// One thread's decisions per second, in the same run.
    single_thread_decisions_per_second: f64,
    /// The `--enrich` measurement.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    enrich: Option<crate::cmd::bench::enrich::EnrichReport>,
}

/// A managed list named by several rules against the same CIDRs written into one rule.
#[derive(Serialize)]
struct ManagedReport {
    cidrs: usize,
    rules: usize,
    /// Validating the list's text.
    validate_ms: f64,
    /// Compiling the list into the shared index.
    index_build_ms: f64,
    /// Compiling the rule set against the index.
    compile_ms: f64,
    /// Both: what a list change costs before it is in force.
    compile_total_ms: f64,
    /// Compiling the rule set with the CIDRs written into one rule instead.
    inline_compile_ms: f64,
    /// Median cost per decision with the list.
    ns_per_decision: f64,
    /// Median cost per decision with the CIDRs written into one rule (alternating rounds).
    inline_ns_per_decision: f64,
    /// Share of the requests whose client address is on the list.
    listed_share: f64,
    index_bytes: usize,
    inline_policy_bytes: usize,
    policy_bytes: usize,
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
/// --toggle-collect='netacl::cmd::bench::decide_passes' netacl bench ...`).
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
    if args.tenants > 0 {
        return crate::cmd::bench::tenants::run(crate::cmd::bench::tenants::TenantsArgs {
            tenants: args.tenants,
            large_tenants: args.large_tenants,
            large_tenant_rules: args.large_tenant_rules,
            requests: args.requests,
            rounds: args.rounds,
            change_samples: args.change_samples,
            seed: args.seed,
            json: args.json,
            stripes: args.stripes,
            geo: (args.enrich || args.geoip_city.is_some() || args.geoip_asn.is_some()).then(
                || crate::cmd::bench::tenants::GeoDatabasesArgs {
                    city: args.geoip_city.clone(),
                    asn: args.geoip_asn.clone(),
                },
            ),
        });
    }
    anyhow::ensure!(args.rules > 0, "--rules must be at least 1");
    anyhow::ensure!(args.requests > 0, "--requests must be at least 1");
    let rounds = args.rounds.max(1);
    let config = SyntheticConfig {
        rules: args.rules,
        cidrs: args.cidrs,
        requests: args.requests,
        seed: args.seed,
    };
    if args.analyze {
        let config = SyntheticConfig {
            requests: 1,
            ..config
        };
        let bench = crate::cmd::bench::analyze::AnalyzeBench {
            overlapping: args.overlapping,
            work_budget: args.work_budget,
            rounds,
            json: args.json,
        };
        return crate::cmd::bench::analyze::run(&config, &bench);
    }

    if args.resident_child {
        return crate::cmd::bench::memory::run_resident_child(&config, || prepare(&args, &config));
    }

    let t = Instant::now();
    let (generated, databases) = prepare(&args, &config)?;
    let generate_ms = ms(t);

    let t = Instant::now();
    let rules = generated
        .rule_set(&config)
        .context("the synthetic rule set does not validate")?;
    let validate_ms = ms(t);

    let resident_before = crate::cmd::bench::memory::resident_bytes()?;
    let t = Instant::now();
    let policy = CompiledPolicy::compile_with_limits(&rules, &synthetic::limits_for(&config))
        .context("the synthetic rule set does not compile")?;
    let compile_ms = ms(t);
    let compile_resident_bytes =
        crate::cmd::bench::memory::resident_bytes()?.saturating_sub(resident_before);

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

    let managed_list = if args.managed_list_cidrs > 0 {
        Some(measure_managed_list(&args, &config, &generated, rounds)?)
    } else {
        None
    };

    let threads = args.threads.max(1);
    let single = 1e9 / compiled_ns;
    let decisions_per_second = if threads > 1 {
        crate::cmd::bench::threads::aggregate(&policy, &requests, threads, passes, rounds)
    } else {
        single
    };
    let enrich = match &databases {
        Some(databases) => Some(crate::cmd::bench::enrich::measure(
            databases, &policy, &requests, rounds,
        )?),
        None => None,
    };

    let policy_resident_bytes =
        crate::cmd::bench::memory::policy_resident_bytes(&tenant_args(&args))?;
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
        decisions_per_second,
        policy_bytes: stats.approx_bytes,
        bytes_per_cidr: if cidrs == 0 {
            0.0
        } else {
            stats.approx_bytes as f64 / cidrs as f64
        },
        policy_resident_bytes,
        resident_bytes_per_cidr: if cidrs == 0 {
            0.0
        } else {
            policy_resident_bytes as f64 / cidrs as f64
        },
        compile_resident_bytes,
        policy_tables: crate::cmd::bench::memory::policy_tables(&stats),
        verdicts,
        deny_all: args.deny_all,
        managed_list,
        threads,
        single_thread_decisions_per_second: single,
        enrich,
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
            "resident: {:.1} MiB a policy ({:.1} bytes per CIDR; {:.1} MiB after this process's first compile); by table: {}",
            r.policy_resident_bytes as f64 / (1024.0 * 1024.0),
            r.resident_bytes_per_cidr,
            r.compile_resident_bytes as f64 / (1024.0 * 1024.0),
            r.policy_tables
                .iter()
                .map(|t| format!("{} {:.1} MiB", t.name(), t.bytes() as f64 / (1024.0 * 1024.0)))
                .collect::<Vec<_>>()
                .join(", ")
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
            "mix: {} block, {} allow, {} redirect, {} none; {} with log matches{}",
            r.verdicts.block,
            r.verdicts.allow,
            r.verdicts.redirect,
            r.verdicts.none,
            r.verdicts.with_monitored,
            if r.deny_all {
                " (with a deny-all rule last)"
            } else {
                ""
            }
        );
        if r.threads > 1 {
            println!(
                "threads:   {:.1} M decisions/s on {} threads ({:.2}× one thread's {:.1} M)",
                r.decisions_per_second / 1e6,
                r.threads,
                r.decisions_per_second / r.single_thread_decisions_per_second,
                r.single_thread_decisions_per_second / 1e6
            );
        }
        if let Some(e) = &r.enrich {
            println!(
                "enriched:  {:.0} ns per decision for never-seen addresses, {:.0} ns with the values given ({:.2}×; {} addresses, {:.0}% carrying a listed value)",
                e.enriched_cold_ns_per_decision,
                e.enrich_compiled_ns_per_decision,
                e.enrich_ratio,
                e.enrich_requests,
                e.enrich_listed_share * 100.0
            );
            println!(
                "           intervals: {} networks kept, {} ranges, {:.1} MiB, rebuilt in {:.0} ms",
                e.enrich_networks,
                e.enrich_ranges,
                e.enrich_bytes as f64 / (1024.0 * 1024.0),
                e.enrich_rebuild_ms
            );
        }
        if let Some(m) = &r.managed_list {
            println!(
                "managed list: {} CIDRs named by {} rules: validate {:.1} ms, index {:.1} ms, compile {:.1} ms (total {:.1} ms; {:.1} ms with the CIDRs in one rule)",
                m.cidrs, m.rules, m.validate_ms, m.index_build_ms, m.compile_ms, m.compile_total_ms, m.inline_compile_ms
            );
            println!(
                "              {:.0} ns per decision ({:.0} ns with the CIDRs in one rule), {:.0}% of requests listed",
                m.ns_per_decision,
                m.inline_ns_per_decision,
                m.listed_share * 100.0
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The synthetic tenant of `args` (with a deny-all rule, and redrawn over the geo databases
/// with `--enrich`), and the databases.
fn prepare(
    args: &Args,
    config: &SyntheticConfig,
) -> anyhow::Result<(
    synthetic::Synthetic,
    Option<crate::cmd::bench::enrich::Databases>,
)> {
    let mut generated = synthetic::generate(config);
    if args.deny_all {
        if let serde_json::Value::Array(records) = &mut generated.records {
            records.push(serde_json::json!({
                "id": "acl_zzzzzzzzzzzzzzzzzzzzzz", "description": "deny all the rest",
                "active": true, "priority": 100,
                "rule": {"action": {"block": true}, "scope": "tenant", "match_all": true},
                "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
            }));
        }
    }
    let databases = if args.enrich || args.geoip_city.is_some() || args.geoip_asn.is_some() {
        let databases = crate::cmd::bench::enrich::Databases::prepare(
            args.geoip_city.as_deref(),
            args.geoip_asn.as_deref(),
        )?;
        databases.redraw_tenant(&mut generated.records);
        Some(databases)
    } else {
        None
    };
    Ok((generated, databases))
}

/// The arguments that make the same tenant (for the resident-memory child).
fn tenant_args(args: &Args) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = vec![
        "--rules".into(),
        args.rules.to_string().into(),
        "--cidrs".into(),
        args.cidrs.to_string().into(),
        "--requests".into(),
        args.requests.to_string().into(),
        "--seed".into(),
        args.seed.to_string().into(),
    ];
    if args.deny_all {
        out.push("--deny-all".into());
    }
    if args.enrich {
        out.push("--enrich".into());
    }
    for (flag, path) in [
        ("--geoip-city", &args.geoip_city),
        ("--geoip-asn", &args.geoip_asn),
    ] {
        if let Some(path) = path {
            out.push(flag.into());
            out.push(path.into());
        }
    }
    out
}

/// A synthetic record (the managed-list measurement's rules).
fn record(id: AclId, priority: u64, scope: &str, criteria: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "id": id.as_str(), "description": "managed-list measurement", "active": true,
        "priority": priority,
        "rule": {"action": {"block": true}, "scope": scope, "match": criteria},
        "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
    })
}

/// The managed-list measurement (see the module docs).
fn measure_managed_list(
    args: &Args,
    config: &SyntheticConfig,
    generated: &synthetic::Synthetic,
    rounds: usize,
) -> anyhow::Result<ManagedReport> {
    let n = args.managed_list_cidrs;
    let k = args.managed_list_rules.max(1);
    let cidrs = synthetic::list_cidrs(n, args.seed);
    let text = cidrs.join("\n");
    let t = Instant::now();
    let list = ManagedList::from_lines(&text, usize::MAX).context("the synthetic list")?;
    let validate_ms = ms(t);
    let mut lists = ManagedLists::new();
    lists.set(ManagedListName::LowReputation, Some(Arc::new(list)));

    // The same tenant, plus the rules naming the list (first in evaluation order: priority 1,
    // the smallest ids), or plus one rule holding its CIDRs.
    let base = generated
        .records
        .as_array()
        .context("records are an array")?;
    let scopes = [
        "management",
        "authentication",
        "dynamic_client_registration",
        "tenant",
    ];
    let mut with_list = base.clone();
    for i in 0..k {
        with_list.push(record(
            AclId::from_random(i as u128),
            1,
            scopes[i % scopes.len()],
            serde_json::json!({"auth0_managed": ["auth0.low_reputation"]}),
        ));
    }
    let mut inline = base.clone();
    inline.push(record(
        AclId::from_random(0),
        1,
        "tenant",
        serde_json::json!({"ipv4_cidrs": cidrs}),
    ));
    let base_limits = synthetic::limits_for(config);
    let limits = netacl_model::Limits::new(
        base_limits.max_entries_per_member.max(n),
        base_limits.max_entries_per_rule.max(n),
        base_limits.max_rules_per_set + k,
        base_limits.max_entries_per_set + n + k,
    );
    let with_list = RuleSet::from_json(&serde_json::Value::Array(with_list), 1, &limits)
        .context("rules naming the list")?;
    let inline = RuleSet::from_json(&serde_json::Value::Array(inline), 1, &limits)
        .context("the rule holding the CIDRs")?;

    let t = Instant::now();
    let index = Arc::new(ManagedIndex::build(&lists));
    let index_build_ms = ms(t);
    let t = Instant::now();
    let listed = CompiledPolicy::compile_with_lists(&with_list, &limits, &index)
        .context("compiling against the list")?;
    let compile_ms = ms(t);
    let t = Instant::now();
    let written = CompiledPolicy::compile_with_limits(&inline, &limits)
        .context("compiling the CIDRs in one rule")?;
    let inline_compile_ms = ms(t);

    // The mix, a fifth of it from listed networks, laid out after compilation.
    let mut rng = synthetic::Rng::new(args.seed ^ 0x6d61_6e61);
    let mut mix = generated.requests.clone();
    let mut on_list = 0usize;
    for request in &mut mix {
        if rng.chance(20) {
            let cidr = rng.pick(&cidrs).clone();
            request.client_ip = Some(synthetic::address_in(&mut rng, &cidr));
            on_list += 1;
        }
    }
    // Copied again so that each request's strings lie together (see `run`).
    let mix = mix.clone();
    let requests = digests(&mix)?;
    for request in &requests {
        anyhow::ensure!(
            listed.evaluate(request).verdict() == written.evaluate(request).verdict(),
            "the list and the inline CIDRs decide differently on {request:?}"
        );
    }
    let step = (requests.len() / args.reference_requests.max(1)).max(1);
    for request in requests.iter().step_by(step).take(args.reference_requests) {
        let expected = reference::evaluate_with_lists(&with_list, &lists, request);
        let got = listed.outcome(&listed.evaluate(request));
        anyhow::ensure!(
            got == expected,
            "the compiled and reference evaluators disagree on {request:?}"
        );
    }

    let t = Instant::now();
    decide_passes(&listed, &requests, 1);
    let one_pass = t.elapsed().as_secs_f64().max(1e-6);
    let passes = ((0.1 / one_pass).ceil() as usize).clamp(1, 1_000);
    let per_round = (passes * requests.len()) as f64;
    let (mut a, mut b) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        decide_passes(&listed, &requests, passes);
        a.push(t.elapsed().as_secs_f64() * 1e9 / per_round);
        let t = Instant::now();
        decide_passes(&written, &requests, passes);
        b.push(t.elapsed().as_secs_f64() * 1e9 / per_round);
    }
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    Ok(ManagedReport {
        cidrs: n,
        rules: k,
        validate_ms,
        index_build_ms,
        compile_ms,
        compile_total_ms: index_build_ms + compile_ms,
        inline_compile_ms,
        ns_per_decision: a[a.len() / 2],
        inline_ns_per_decision: b[b.len() / 2],
        listed_share: on_list as f64 / requests.len() as f64,
        index_bytes: index.bytes(),
        inline_policy_bytes: written.stats().approx_bytes,
        policy_bytes: listed.stats().approx_bytes,
    })
}

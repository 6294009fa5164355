//! `netacl bench --tenants N`: a synthetic platform of N tenants behind one edge.
//!
//! Most tenants have 1 to 10 rules (`netacl_eval::synthetic`, a seed per tenant), a few
//! (`--large-tenants`, default 3) have `--large-tenant-rules` rules (default 2,000). Each tenant
//! has its own host (`t{i}.bench.example`); the request mix (`--requests`) is spread over the
//! tenants by host, every tenant's requests drawn from its own synthetic mix.
//!
//! Reported:
//!
//! - `resident_bytes_per_small_tenant`: the process's resident memory (`/proc/self/statm`)
//!   before and after the small tenants go into an edge's tenant table (the large ones are in
//!   already; nothing the batch holds is freed during it), divided by their number.
//! - `tenant_select_ns`: selecting the tenant by host ([`TenantRouter::select`]).
//! - `compiled_ns_per_decision`: selection by host, the tenant's policy snapshot, the decision.
//! - `single_tenant_ns_per_decision`: the same requests, each decided as a single-tenant edge
//!   decides (one snapshot of its tenant's engine, the decision: what one edge per tenant
//!   would pay), in the same rounds.
//! - `policy_held_ns_per_decision`: the same requests, each against its tenant's policy held
//!   directly (no snapshot), in the same rounds.
//! - `load_ms`: every tenant into a fresh edge (one batch: compile each, one table).
//! - `change_enforced_p99_ms`: a rule change in one tenant (a block rule added) until the edge
//!   decides a request by it: compile, install, select, decide; over `--change-samples`
//!   changes to tenants drawn at random, p99 (and p50).
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use netacl_edge::{TenantChange, TenantPolicy, TenantRouter};
use netacl_eval::synthetic::{self, Rng, SyntheticConfig};
use netacl_eval::{CompiledPolicy, Engine, Request, RequestInput};
use netacl_model::{AclId, Priority, RequestScope, RuleSet};
use serde::Serialize;

/// What `netacl bench --tenants` measures (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct TenantsArgs {
    /// Tenants.
    pub tenants: usize,
    /// Tenants with many rules.
    pub large_tenants: usize,
    /// Rules of each large tenant.
    pub large_tenant_rules: usize,
    /// Requests in the mix.
    pub requests: usize,
    /// Rounds (median reported).
    pub rounds: usize,
    /// Rule changes timed.
    pub change_samples: usize,
    /// Seed.
    pub seed: u64,
    /// JSON output.
    pub json: bool,
}

#[derive(Serialize)]
struct TenantsReport {
    tenants: usize,
    small_tenants: usize,
    large_tenants: usize,
    large_tenant_rules: usize,
    rules: usize,
    requests: usize,
    rounds: usize,
    generate_ms: f64,
    resident_bytes_per_small_tenant: f64,
    resident_bytes_before: u64,
    resident_bytes_after: u64,
    tenant_select_ns: f64,
    compiled_ns_per_decision: f64,
    single_tenant_ns_per_decision: f64,
    overhead_percent: f64,
    policy_held_ns_per_decision: f64,
    overhead_over_policy_held_percent: f64,
    load_ms: f64,
    change_samples: usize,
    change_enforced_p50_ms: f64,
    change_enforced_p99_ms: f64,
    change_enforced_max_ms: f64,
}

/// Resident bytes of this process (Linux `/proc/self/statm`, pages × 4096).
fn resident_bytes() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").context("reading /proc/self/statm")?;
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .context("statm has no resident field")?
        .parse()
        .context("statm's resident field")?;
    Ok(pages * 4096)
}

fn host(i: usize) -> String {
    format!("t{i}.bench.example")
}

struct Generated {
    id: String,
    rules: RuleSet,
    requests: Vec<RequestInput>,
}

fn generate(i: usize, rules: usize, requests: usize, seed: u64) -> anyhow::Result<Generated> {
    let config = SyntheticConfig {
        rules,
        cidrs: rules * 3,
        requests,
        seed: seed.wrapping_add(i as u64),
    };
    let g = synthetic::generate(&config);
    let rules = g
        .rule_set(&config)
        .context("a synthetic rule set does not validate")?;
    Ok(Generated {
        id: format!("tenant-{i}"),
        rules,
        requests: g.requests,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The timed loop of the multi-tenant edge: select by host, load the tenant's snapshot, decide.
#[inline(never)]
fn decide_by_host(router: &TenantRouter, mix: &[(&str, Request<'_>)], passes: usize) {
    for _ in 0..passes {
        for (host, request) in mix {
            black_box(router.with_tenant(black_box(host), |tenant| {
                tenant.engine().snapshot().evaluate(black_box(request))
            }));
        }
    }
}

/// The same requests, each decided as a single-tenant edge decides them: one snapshot of its
/// tenant's engine (the edge's one `arc-swap` load per request), the decision.
#[inline(never)]
fn decide_single_edge(mix: &[(&Engine, &Request<'_>)], passes: usize) {
    for _ in 0..passes {
        for (engine, request) in mix {
            black_box(engine.snapshot().evaluate(black_box(request)));
        }
    }
}

/// The same requests, each against its tenant's policy held directly.
#[inline(never)]
fn decide_direct(mix: &[(&CompiledPolicy, &Request<'_>)], passes: usize) {
    for _ in 0..passes {
        for (policy, request) in mix {
            black_box(policy.evaluate(black_box(request)));
        }
    }
}

#[inline(never)]
fn select_only(router: &TenantRouter, hosts: &[&str], passes: usize) {
    for _ in 0..passes {
        for host in hosts {
            black_box(router.with_tenant(black_box(host), |t| t.id().len()));
        }
    }
}

/// Runs the measurement.
pub fn run(args: TenantsArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.tenants >= 1, "--tenants must be at least 1");
    anyhow::ensure!(args.requests >= 1, "--requests must be at least 1");
    let large = args.large_tenants.min(args.tenants.saturating_sub(1));
    let small = args.tenants - large;
    let rounds = args.rounds.max(1);
    let per_tenant_requests = (args.requests / args.tenants).clamp(2, 64);

    // Every tenant generated first (rule sets and requests), outside the measured memory.
    let t = Instant::now();
    let mut tenants = Vec::with_capacity(args.tenants);
    for i in 0..args.tenants {
        let rules = if i < large {
            args.large_tenant_rules.max(1)
        } else {
            1 + i % 10
        };
        tenants.push(generate(i, rules, per_tenant_requests, args.seed)?);
    }
    let generate_ms = t.elapsed().as_secs_f64() * 1e3;
    let change = |g: &Generated, i: usize| TenantChange::put(&g.id, [host(i)], g.rules.clone());
    let large_batch: Vec<TenantChange> = tenants[..large]
        .iter()
        .enumerate()
        .map(|(i, g)| change(g, i))
        .collect();
    let small_batch: Vec<TenantChange> = tenants[large..]
        .iter()
        .enumerate()
        .map(|(i, g)| change(g, large + i))
        .collect();

    // Memory: the large tenants in, then the small ones (the batch is borrowed, so nothing it
    // holds is freed while the tenants are built).
    let router = TenantRouter::new();
    let report = router.apply(&large_batch);
    anyhow::ensure!(report.failed.is_empty(), "{:?}", report.failed);
    let before = resident_bytes()?;
    let report = router.apply(&small_batch);
    let after = resident_bytes()?;
    anyhow::ensure!(report.failed.is_empty(), "{:?}", report.failed);
    anyhow::ensure!(router.len() == args.tenants, "tenants missing");
    let per_small = after.saturating_sub(before) as f64 / small.max(1) as f64;

    // Loading every tenant into a fresh edge, from scratch.
    let all: Vec<&TenantChange> = large_batch.iter().chain(&small_batch).collect();
    let t = Instant::now();
    let fresh = TenantRouter::new();
    let report = fresh.apply(all.iter().copied());
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    anyhow::ensure!(report.failed.is_empty(), "{:?}", report.failed);
    drop(fresh);

    // The mix: requests spread over the tenants by host, shuffled.
    let hosts: Vec<String> = (0..args.tenants).map(host).collect();
    let mut rng = Rng::new(args.seed ^ 0x7465_6e61_6e74);
    let mut picks: Vec<(usize, usize)> = (0..args.requests)
        .map(|n| {
            let tenant = n % args.tenants;
            (
                tenant,
                rng.below(tenants[tenant].requests.len() as u64) as usize,
            )
        })
        .collect();
    for i in (1..picks.len()).rev() {
        picks.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let inputs: Vec<RequestInput> = picks
        .iter()
        .map(|&(t, r)| tenants[t].requests[r].clone())
        .collect();
    let digests: Vec<Request<'_>> = inputs
        .iter()
        .map(|r| r.to_request())
        .collect::<Result<_, _>>()
        .context("a synthetic request is invalid")?;
    let mix: Vec<(&str, Request<'_>)> = picks
        .iter()
        .zip(&digests)
        .map(|(&(t, _), r)| (hosts[t].as_str(), *r))
        .collect();
    let resolved: Vec<Arc<TenantPolicy>> = picks
        .iter()
        .map(|&(t, _)| router.select(&hosts[t]).context("tenant missing"))
        .collect::<anyhow::Result<_>>()?;
    let policies: Vec<Arc<CompiledPolicy>> = resolved.iter().map(|t| t.engine().policy()).collect();
    let direct: Vec<(&CompiledPolicy, &Request<'_>)> =
        policies.iter().map(|p| &**p).zip(&digests).collect();
    let single_edge: Vec<(&Engine, &Request<'_>)> = resolved
        .iter()
        .map(|t| &**t.engine())
        .zip(&digests)
        .collect();
    let select_hosts: Vec<&str> = mix.iter().map(|(h, _)| *h).collect();

    // Warm up, and size rounds to about 100 ms.
    decide_by_host(&router, &mix, 1);
    decide_direct(&direct, 1);
    decide_single_edge(&single_edge, 1);
    let t = Instant::now();
    decide_by_host(&router, &mix, 1);
    let one = t.elapsed().as_secs_f64().max(1e-6);
    let passes = ((0.1 / one).ceil() as usize).clamp(1, 1_000);
    let per = (passes * mix.len()) as f64;
    let (mut by_host, mut alone, mut select) = (Vec::new(), Vec::new(), Vec::new());
    let mut held = Vec::new();
    // Alternating rounds, so that both see the same moments of a shared machine.
    for _ in 0..rounds {
        let t = Instant::now();
        decide_by_host(&router, &mix, passes);
        by_host.push(t.elapsed().as_secs_f64() * 1e9 / per);
        let t = Instant::now();
        decide_single_edge(&single_edge, passes);
        alone.push(t.elapsed().as_secs_f64() * 1e9 / per);
        let t = Instant::now();
        decide_direct(&direct, passes);
        held.push(t.elapsed().as_secs_f64() * 1e9 / per);
        let t = Instant::now();
        select_only(&router, &select_hosts, passes);
        select.push(t.elapsed().as_secs_f64() * 1e9 / per);
    }
    let compiled_ns = median(by_host);
    let single_ns = median(alone);
    let held_ns = median(held);
    let select_ns = median(select);

    // A rule change in one tenant until the edge enforces it.
    let probe = "198.18.0.1".parse().context("probe address")?;
    let request = Request::new(RequestScope::Authentication).with_client_ip(probe);
    let mut samples = Vec::with_capacity(args.change_samples);
    for n in 0..args.change_samples {
        let i = rng.below(args.tenants as u64) as usize;
        let g = &tenants[i];
        let mut rules = g.rules.clone();
        rules.version += 1 + n as u64;
        // The new rule goes first (priority 1, every other rule at 2 or later).
        for acl in &mut rules.acls {
            let later = u64::from(acl.spec.priority.get().max(2));
            acl.spec.priority = Priority::new(later).unwrap_or_default();
        }
        let new_id = AclId::from_random(0xc4a9_0000 + n as u128);
        rules.acls.push(
            RuleSet::from_json(
                &serde_json::json!([{
                    "id": new_id.to_string(),
                    "description": "change", "active": true, "priority": 1,
                    "rule": {"action": {"block": true}, "scope": "tenant",
                             "match": {"ipv4_cidrs": ["198.18.0.1/32"]}},
                    "created_at": "2026-01-01T00:00:00.000Z",
                    "updated_at": "2026-01-01T00:00:00.000Z"
                }]),
                1,
                &synthetic::limits_for(&SyntheticConfig::default()),
            )
            .context("the change's rule")?
            .acls
            .remove(0),
        );
        let compiles_before: u64 = resolved_compiles(&router, &hosts[i]);
        let update = TenantChange::put(&g.id, [hosts[i].as_str()], rules);
        let t = Instant::now();
        let report = router.apply([&update]);
        let decided = router.select(&hosts[i]).and_then(|tenant| {
            let policy = tenant.engine().policy();
            let decision = policy.evaluate(&request);
            decision.rule().map(|r| policy.rule_id(r).clone())
        });
        let elapsed = t.elapsed().as_secs_f64() * 1e3;
        anyhow::ensure!(
            report.failed.is_empty() && report.compiled == 1,
            "change not applied"
        );
        anyhow::ensure!(
            decided.as_ref() == Some(&new_id),
            "the change is not enforced"
        );
        anyhow::ensure!(
            resolved_compiles(&router, &hosts[i]) == compiles_before + 1,
            "the change compiled more than its tenant"
        );
        samples.push(elapsed);
        // Put the tenant back as it was (not timed).
        router.apply([change(g, i)]);
    }
    samples.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        samples
            .get(((samples.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };

    let report = TenantsReport {
        tenants: args.tenants,
        small_tenants: small,
        large_tenants: large,
        large_tenant_rules: args.large_tenant_rules,
        rules: tenants.iter().map(|g| g.rules.acls.len()).sum(),
        requests: mix.len(),
        rounds,
        generate_ms,
        resident_bytes_per_small_tenant: per_small,
        resident_bytes_before: before,
        resident_bytes_after: after,
        tenant_select_ns: select_ns,
        compiled_ns_per_decision: compiled_ns,
        single_tenant_ns_per_decision: single_ns,
        overhead_percent: (compiled_ns / single_ns - 1.0) * 100.0,
        policy_held_ns_per_decision: held_ns,
        overhead_over_policy_held_percent: (compiled_ns / held_ns - 1.0) * 100.0,
        load_ms,
        change_samples: samples.len(),
        change_enforced_p50_ms: pct(0.5),
        change_enforced_p99_ms: pct(0.99),
        change_enforced_max_ms: samples.last().copied().unwrap_or(0.0),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let r = &report;
        println!(
            "synthetic platform: {} tenants ({} with 1-10 rules, {} with {} rules), {} rules, {} requests by host",
            r.tenants, r.small_tenants, r.large_tenants, r.large_tenant_rules, r.rules, r.requests
        );
        println!(
            "resident per small tenant: {:.0} bytes; load {:.0} ms",
            r.resident_bytes_per_small_tenant, r.load_ms
        );
        println!(
            "tenant selection {:.1} ns; decision by host {:.1} ns vs the tenant's engine alone {:.1} ns ({:+.1}%), its policy held {:.1} ns ({:+.1}%)",
            r.tenant_select_ns, r.compiled_ns_per_decision, r.single_tenant_ns_per_decision, r.overhead_percent,
            r.policy_held_ns_per_decision, r.overhead_over_policy_held_percent
        );
        println!(
            "rule change enforced: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} changes)",
            r.change_enforced_p50_ms,
            r.change_enforced_p99_ms,
            r.change_enforced_max_ms,
            r.change_samples
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn resolved_compiles(router: &TenantRouter, host: &str) -> u64 {
    router.select(host).map_or(0, |t| t.compiles())
}

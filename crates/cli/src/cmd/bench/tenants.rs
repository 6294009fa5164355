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
//!   already; nothing the batch holds is freed during it), divided by their number; with
//!   `--stripes N` the per-request counters are striped as on an N-core machine (`stripes`
//!   reports the count used).
//! - `tenant_select_ns`: selecting the tenant by host ([`TenantRouter::select`]).
//! - `compiled_ns_per_decision`: selection by host, the tenant's policy snapshot (from the host
//!   table's entry), the decision (each host read from one buffer of the mix's hosts in
//!   request order, as a proxy reads it from the request it has just parsed).
//! - `single_tenant_ns_per_decision`: the same requests, each decided as a single-tenant edge
//!   decides (one snapshot of its tenant's engine, the decision: what one edge per tenant
//!   would pay), in the same rounds.
//! - `policy_held_ns_per_decision`: the same requests, each against its tenant's policy held
//!   directly (no snapshot), in the same rounds.
//! - `load_ms`: every tenant into a fresh edge (one batch: compile each, one table).
//! - `change_enforced_p99_ms`: a rule change in one tenant (a block rule added) until the edge
//!   decides a request by it: compile, install, select, decide; over `--change-samples`
//!   changes to tenants drawn at random, p99 (and p50).
//!
//! The four per-request figures are timed in rounds (`--rounds`, the median reported), each
//! round running them in another order and each after one pass untimed: each is timed in its
//! own steady state, not in the cache the one before it left.
//!
//! With `--enrich` (and optionally `--geoip-city`/`--geoip-asn`; without them the databases of
//! `netacl bench --enrich` are generated: 1,050,000 City-like and 200,000 ASN networks), the
//! tenants' geo/ASN conditions answered from the table of every tenant, as the multi-tenant
//! edge answers them ([`SharedGeoTable`]; the synthetic tenants' values are drawn from what
//! the generated databases hold), measured after everything above:
//!
//! - `geo_table_build_ms` (median of three), `geo_table_bytes`, `geo_table_location_ranges`,
//!   `geo_table_asn_ranges`: building the table from the databases.
//! - `geo_cold_ns_per_decision`: the mix replicated over 262,144 distinct client addresses
//!   (nine in ten in a network of the generated database), no geo value in the requests: the
//!   table snapshot loaded and the address's blocks prefetched before the tenant is selected,
//!   then (when the tenant's rules name a geo signal) the values read from the table, the
//!   decision. Every request another address: the table's blocks come from memory.
//! - `geo_given_ns_per_decision`: the same requests with the looked-up values given in them,
//!   decided by host without the table, in alternating rounds.
//! - `geo_change_enforced_p99_ms_during_rebuild`: rule changes as above while another thread
//!   rebuilds the table over and over (a database reload never delays a rule change).
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use netacl_edge::geo::{GeoEnricher, GeoNeeds, SharedGeoTable};
use netacl_edge::{TenantChange, TenantPolicy, TenantRouter};
use netacl_eval::synthetic::{self, Rng, SyntheticConfig};
use netacl_eval::{CompiledPolicy, Engine, GeoTable, Request, RequestInput, SignalSet};
use netacl_model::{AclId, Priority, RequestScope, RuleSet, Signal};
use serde::Serialize;

use crate::cmd::bench::memory::resident_bytes;

/// What `netacl bench --tenants` measures (see the module docs).
#[derive(Debug, Clone)]
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
    /// The per-rule counters striped as on a machine of this many cores (0: this machine's).
    pub stripes: usize,
    /// `--enrich`: the tenants' geo/ASN conditions answered from the table of every tenant,
    /// built from these databases (generated when both are `None`).
    pub geo: Option<GeoDatabasesArgs>,
}

/// The databases of `--enrich`.
#[derive(Debug, Clone, Default)]
pub struct GeoDatabasesArgs {
    /// A City database instead of the generated one.
    pub city: Option<std::path::PathBuf>,
    /// An ASN database instead of the generated one.
    pub asn: Option<std::path::PathBuf>,
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
    /// Stripes of the per-request counters (`--stripes`, else this machine's cores, at most
    /// 16): a busy tenant's rule counters have one per thread slot, a quiet tenant's one.
    stripes: usize,
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
    #[serde(flatten)]
    geo: Option<GeoReport>,
}

/// What `--enrich` adds (see the module docs).
#[derive(Serialize)]
struct GeoReport {
    geo_generated_databases: bool,
    geo_table_build_ms: f64,
    geo_table_bytes: usize,
    geo_table_location_ranges: usize,
    geo_table_asn_ranges: usize,
    geo_requests: usize,
    /// Requests whose tenant's rules name a country, subdivision or ASN.
    geo_requests_naming_geo_share: f64,
    geo_cold_ns_per_decision: f64,
    geo_given_ns_per_decision: f64,
    geo_cold_over_given: f64,
    geo_change_enforced_p50_ms_during_rebuild: f64,
    geo_change_enforced_p99_ms_during_rebuild: f64,
    geo_table_rebuilds_during_changes: usize,
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
                tenant.policy().evaluate(black_box(request))
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

/// Whether a policy's rules name the country, the subdivision or the ASN.
fn names_geo(needed: SignalSet) -> bool {
    needed.contains(Signal::Country)
        || needed.contains(Signal::Subdivision)
        || needed.contains(Signal::Asn)
}

/// The multi-tenant edge's decision with the table of every tenant (as `Enforcer::decide`):
/// one table snapshot, the client address's blocks prefetched, the tenant selected by host,
/// its policy snapshot, the address's values from the table when its rules name a geo signal,
/// the decision.
#[inline(never)]
fn decide_by_host_with_table(
    router: &TenantRouter,
    shared: &SharedGeoTable,
    mix: &[(&str, Request<'_>)],
    passes: usize,
) {
    for _ in 0..passes {
        for (host, request) in mix {
            let in_service = shared.load();
            let table: Option<&GeoTable> = in_service.as_ref().map(|t| &t.table);
            if let (Some(table), Some(ip)) = (table, request.client_ip()) {
                table.prefetch(ip);
            }
            black_box(router.with_tenant(black_box(host), |tenant| {
                let policy = tenant.policy();
                let request = match table {
                    Some(table) if names_geo(policy.needed_signals()) => table.enrich(*request),
                    _ => *request,
                };
                policy.evaluate(black_box(&request))
            }));
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
    anyhow::ensure!(
        args.stripes <= netacl_edge::MAX_STRIPES,
        "--stripes must be at most {}",
        netacl_edge::MAX_STRIPES
    );
    if args.stripes > 0 {
        anyhow::ensure!(
            netacl_edge::set_counter_stripes(args.stripes),
            "the counters were striped before --stripes could apply"
        );
    }
    let stripes = netacl_edge::counter_stripes();
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
    // Each request's host as a proxy has it: in the request just read, beside the request's
    // other fields (one buffer in mix order), not in the tenant list the bench keeps.
    let host_buffer: String = picks.iter().map(|&(t, _)| hosts[t].as_str()).collect();
    let mut at = 0;
    let mix: Vec<(&str, Request<'_>)> = picks
        .iter()
        .zip(&digests)
        .map(|(&(t, _), r)| {
            let host = &host_buffer[at..at + hosts[t].len()];
            at += host.len();
            (host, *r)
        })
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
    // Alternating rounds, so that every variant sees the same moments of a shared machine,
    // each round in another order; each variant's timed passes come after one pass untimed, so
    // that it is timed in its own steady state and not in the cache the previous variant left
    // (the decisions find their tenants' policies there, selection alone does not).
    for round in 0..rounds {
        for k in 0..4 {
            let variant = (round + k) % 4;
            let run = |passes: usize| match variant {
                0 => decide_by_host(&router, &mix, passes),
                1 => decide_single_edge(&single_edge, passes),
                2 => decide_direct(&direct, passes),
                _ => select_only(&router, &select_hosts, passes),
            };
            run(1);
            let t = Instant::now();
            run(passes);
            let ns = t.elapsed().as_secs_f64() * 1e9 / per;
            [&mut by_host, &mut alone, &mut held, &mut select][variant].push(ns);
        }
    }
    let compiled_ns = median(by_host);
    let single_ns = median(alone);
    let held_ns = median(held);
    let select_ns = median(select);

    // A rule change in one tenant until the edge enforces it.
    let mut samples =
        time_rule_changes(&router, &tenants, &hosts, &mut rng, args.change_samples, 0)?;
    samples.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        samples
            .get(((samples.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };

    let geo = match &args.geo {
        Some(databases) => Some(measure_geo(
            databases,
            &router,
            &tenants,
            &hosts,
            &mix,
            &mut rng,
            rounds,
            args.change_samples,
        )?),
        None => None,
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
        stripes,
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
        geo,
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

/// `count` rule changes, each in a tenant drawn at random (a block rule added first), timed
/// until the edge decides a request by it; the tenant is put back after each (not timed).
/// `base` keeps versions and rule ids apart from another series'.
fn time_rule_changes(
    router: &TenantRouter,
    tenants: &[Generated],
    hosts: &[String],
    rng: &mut Rng,
    count: usize,
    base: u64,
) -> anyhow::Result<Vec<f64>> {
    let probe = "198.18.0.1".parse().context("probe address")?;
    let request = Request::new(RequestScope::Authentication).with_client_ip(probe);
    let mut samples = Vec::with_capacity(count);
    for n in 0..count {
        let i = rng.below(tenants.len() as u64) as usize;
        let g = &tenants[i];
        let mut rules = g.rules.clone();
        rules.version += 1 + base + n as u64;
        // The new rule goes first (priority 1, every other rule at 2 or later).
        for acl in &mut rules.acls {
            let later = u64::from(acl.spec.priority.get().max(2));
            acl.spec.priority = Priority::new(later).unwrap_or_default();
        }
        let new_id = AclId::from_random(0xc4a9_0000 + u128::from(base) + n as u128);
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
        let compiles_before: u64 = resolved_compiles(router, &hosts[i]);
        let update = TenantChange::put(&g.id, [hosts[i].as_str()], rules);
        let t = Instant::now();
        let report = router.apply([&update]);
        // Decided as a request is: the host's entry, its policy.
        let decided = router
            .with_tenant(&hosts[i], |tenant| {
                let policy = tenant.policy();
                let decision = policy.evaluate(&request);
                decision.rule().map(|r| policy.rule_id(r).clone())
            })
            .flatten();
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
            resolved_compiles(router, &hosts[i]) == compiles_before + 1,
            "the change compiled more than its tenant"
        );
        samples.push(elapsed);
        // Put the tenant back as it was (not timed).
        router.apply([TenantChange::put(
            &g.id,
            [hosts[i].as_str()],
            g.rules.clone(),
        )]);
    }
    Ok(samples)
}

/// The `--enrich` measurement (see the module docs).
#[allow(clippy::too_many_arguments)]
fn measure_geo(
    args: &GeoDatabasesArgs,
    router: &TenantRouter,
    tenants: &[Generated],
    hosts: &[String],
    mix: &[(&str, Request<'_>)],
    rng: &mut Rng,
    rounds: usize,
    change_samples: usize,
) -> anyhow::Result<GeoReport> {
    use crate::cmd::bench::enrich::{self as bench_enrich, Databases};
    let databases = Databases::prepare(args.city.as_deref(), args.asn.as_deref())?;
    let enricher = Arc::new(
        GeoEnricher::open(databases.city.as_deref(), databases.asn.as_deref())
            .context("cannot load the GeoIP databases")?,
    );
    let mut builds = Vec::with_capacity(3);
    let mut stats = None;
    for _ in 0..3 {
        let t = Instant::now();
        let compiled = enricher
            .table()
            .context("cannot compile the GeoIP databases")?;
        builds.push(t.elapsed().as_secs_f64() * 1e3);
        stats = Some(compiled.table.stats());
    }
    let stats = stats.context("three builds")?;
    let shared = SharedGeoTable::new(Arc::clone(&enricher));
    let in_service = shared.current().context("the table was not built")?;

    // The mix over distinct client addresses, without geo values and with the looked-up ones.
    let mut addresses_rng = Rng::new(0x636f_6c64);
    let addresses: Vec<std::net::IpAddr> = (0..bench_enrich::ADDRESSES)
        .map(|_| bench_enrich::address(&mut addresses_rng, databases.generated()))
        .collect();
    let looked_up: Vec<_> = addresses
        .iter()
        .map(|&ip| enricher.lookup_direct(ip, GeoNeeds::ALL))
        .collect();
    let mut bare = Vec::with_capacity(addresses.len());
    let mut given = Vec::with_capacity(addresses.len());
    for (k, (&ip, info)) in addresses.iter().zip(&looked_up).enumerate() {
        let (host, mut request) = mix[k % mix.len()];
        request.set_client_ip(Some(ip));
        request.set_asn(None);
        request.set_country(None);
        request.set_subdivision(None);
        bare.push((host, request));
        request.set_asn(info.asn);
        request.set_country(info.country_str());
        request.set_subdivision(info.subdivision.as_deref());
        given.push((host, request));
    }
    // The table's decision is the decision with the looked-up values, request by request.
    let mut naming = 0usize;
    for ((host, b), (_, g)) in bare.iter().zip(&given) {
        let same = router.with_tenant(host, |tenant| {
            let policy = tenant.policy();
            naming += usize::from(names_geo(policy.needed_signals()));
            let from_table = policy.evaluate(&in_service.table.enrich(*b));
            policy.outcome(&from_table) == policy.outcome(&policy.evaluate(g))
        });
        anyhow::ensure!(
            same == Some(true),
            "the table's decision differs for {b:?} at {host}"
        );
    }

    decide_by_host_with_table(router, &shared, &bare, 1);
    decide_by_host(router, &given, 1);
    let t = Instant::now();
    decide_by_host_with_table(router, &shared, &bare, 1);
    let one = t.elapsed().as_secs_f64().max(1e-6);
    let passes = ((0.1 / one).ceil() as usize).clamp(1, 1_000);
    let per = (passes * bare.len()) as f64;
    let (mut cold, mut with_values) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(3) {
        let t = Instant::now();
        decide_by_host_with_table(router, &shared, &bare, passes);
        cold.push(t.elapsed().as_secs_f64() * 1e9 / per);
        let t = Instant::now();
        decide_by_host(router, &given, passes);
        with_values.push(t.elapsed().as_secs_f64() * 1e9 / per);
    }
    let (cold, with_values) = (median(cold), median(with_values));

    // Rule changes while the table is rebuilt over and over on another thread.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (samples, rebuilds) = std::thread::scope(|scope| {
        let rebuilder = scope.spawn(|| {
            let mut rebuilds = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if enricher.table().is_ok() {
                    rebuilds += 1;
                }
            }
            rebuilds
        });
        let samples = time_rule_changes(router, tenants, hosts, rng, change_samples, 1 << 32);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (samples, rebuilder.join().unwrap_or(0))
    });
    let mut samples = samples?;
    samples.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        samples
            .get(((samples.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    Ok(GeoReport {
        geo_generated_databases: databases.generated(),
        geo_table_build_ms: median(builds),
        geo_table_bytes: stats.bytes,
        geo_table_location_ranges: stats.location_ranges,
        geo_table_asn_ranges: stats.asn_ranges,
        geo_requests: bare.len(),
        geo_requests_naming_geo_share: naming as f64 / bare.len() as f64,
        geo_cold_ns_per_decision: cold,
        geo_given_ns_per_decision: with_values,
        geo_cold_over_given: cold / with_values,
        geo_change_enforced_p50_ms_during_rebuild: pct(0.5),
        geo_change_enforced_p99_ms_during_rebuild: pct(0.99),
        geo_table_rebuilds_during_changes: rebuilds,
    })
}

fn resolved_compiles(router: &TenantRouter, host: &str) -> u64 {
    router.select(host).map_or(0, |t| t.compiles())
}

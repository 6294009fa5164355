//! `netacl bench --analyze`: the rule-set analysis (`netacl_analysis::analyze`, what `netacl
//! lint` and `POST /_netacl/v1/network-acls/analyze` run) over the synthetic tenant of
//! `--rules` rules and `--cidrs` CIDRs (`netacl_eval::synthetic`, the same generator as the
//! evaluator's measurement: every signal, CIDR lists, `not_match`, log rules, mixed scopes).
//!
//! With `--overlapping`, the rule set made to be costly to analyse instead
//! (`netacl_eval::synthetic::overlapping`, `--rules` rules, `--seed`); with `--work-budget`,
//! the analysis stops at that many work units (what `netacl serve --analysis-work` does).
//!
//! The analysis runs `--rounds` times (at least once) and the median is reported as
//! `analyze_ms` (with the fastest and slowest), with the findings by kind, the number of
//! undecided rules (of which `budget`: left open when the work units ran out) and the work
//! units done (the same on every round: the analysis and its work count are deterministic).
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use netacl_eval::synthetic::{self, SyntheticConfig};
use serde::Serialize;

/// What `netacl bench --analyze` measures.
pub struct AnalyzeBench {
    /// The overlapping rule set instead of the synthetic tenant.
    pub overlapping: bool,
    /// The analysis's work units (`None`: no bound).
    pub work_budget: Option<u64>,
    /// Analyses, the median reported.
    pub rounds: usize,
    /// One JSON line instead of text.
    pub json: bool,
}

#[derive(Serialize)]
struct AnalyzeReport {
    overlapping: bool,
    rules: usize,
    active_rules: usize,
    cidrs: usize,
    rounds: usize,
    analyze_ms: f64,
    analyze_ms_min: f64,
    analyze_ms_max: f64,
    findings: usize,
    shadowed: usize,
    redundant: usize,
    conflict: usize,
    undecided: usize,
    undecided_budget: usize,
    work_units: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    work_budget: Option<u64>,
}

/// Measures the analysis of the synthetic tenant of `config` (or the overlapping rule set).
pub fn run(config: &SyntheticConfig, bench: &AnalyzeBench) -> anyhow::Result<ExitCode> {
    let (rules, cidrs) = if bench.overlapping {
        let records = synthetic::overlapping(config.rules, config.seed);
        let rules = netacl_model::RuleSet::from_json(&records, 1, &synthetic::limits_for(config))
            .context("the overlapping rule set does not validate")?;
        let cidrs = rules.acls.len() * 16;
        (rules, cidrs)
    } else {
        let generated = synthetic::generate(config);
        let rules = generated
            .rule_set(config)
            .context("the synthetic rule set does not validate")?;
        (rules, generated.cidrs)
    };
    let budget = match bench.work_budget {
        Some(units) => netacl_analysis::Budget::work(units),
        None => netacl_analysis::Budget::unlimited(),
    };
    let mut times = Vec::new();
    let mut analysis = netacl_analysis::Analysis::default();
    let mut work_units = 0;
    for _ in 0..bench.rounds.max(1) {
        // The previous round's answer is dropped before the clock starts.
        drop(std::mem::take(&mut analysis));
        let t = Instant::now();
        let (answer, done) = netacl_analysis::analyze_within(&rules, &budget);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        analysis = answer;
        work_units = done.units;
    }
    times.sort_by(f64::total_cmp);
    let count = |kind: netacl_analysis::FindingKind| {
        analysis.findings.iter().filter(|f| f.kind == kind).count()
    };
    let report = AnalyzeReport {
        overlapping: bench.overlapping,
        rules: config.rules,
        active_rules: rules.acls.iter().filter(|a| a.spec.active).count(),
        cidrs,
        rounds: times.len(),
        analyze_ms: times[times.len() / 2],
        analyze_ms_min: times[0],
        analyze_ms_max: times[times.len() - 1],
        findings: analysis.findings.len(),
        shadowed: count(netacl_analysis::FindingKind::Shadowed),
        redundant: count(netacl_analysis::FindingKind::Redundant),
        conflict: count(netacl_analysis::FindingKind::Conflict),
        undecided: analysis.undecided.len(),
        undecided_budget: analysis
            .undecided
            .iter()
            .filter(|u| u.reason == netacl_analysis::BUDGET_REASON)
            .count(),
        work_units,
        work_budget: bench.work_budget,
    };
    if bench.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let r = &report;
        println!(
            "{}: {} rules ({} active), {} CIDRs (seed {})",
            if r.overlapping {
                "overlapping rule set"
            } else {
                "synthetic tenant"
            },
            r.rules,
            r.active_rules,
            r.cidrs,
            config.seed
        );
        println!(
            "analysis: {:.1} ms (median of {} rounds; min {:.1}, max {:.1}): {} findings ({} shadowed, {} redundant, {} conflict), {} rules undecided ({} for the budget), {} work units",
            r.analyze_ms,
            r.rounds,
            r.analyze_ms_min,
            r.analyze_ms_max,
            r.findings,
            r.shadowed,
            r.redundant,
            r.conflict,
            r.undecided,
            r.undecided_budget,
            r.work_units
        );
    }
    Ok(ExitCode::SUCCESS)
}

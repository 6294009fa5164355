//! `netacl bench --analyze`: the rule-set analysis (`netacl_analysis::analyze`, what `netacl
//! lint` and `POST /_netacl/v1/network-acls/analyze` run) over the synthetic tenant of
//! `--rules` rules and `--cidrs` CIDRs (`netacl_eval::synthetic`, the same generator as the
//! evaluator's measurement: every signal, CIDR lists, `not_match`, log rules, mixed scopes).
//!
//! The analysis runs `--rounds` times (at least once) and the median is reported as
//! `analyze_ms` (with the fastest and slowest), with the findings by kind and the number of
//! undecided rules (the same on every round: the analysis is deterministic).
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use netacl_eval::synthetic::{self, SyntheticConfig};
use serde::Serialize;

#[derive(Serialize)]
struct AnalyzeReport {
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
}

/// Measures the analysis of the synthetic tenant of `config`.
pub fn run(config: &SyntheticConfig, rounds: usize, json: bool) -> anyhow::Result<ExitCode> {
    let generated = synthetic::generate(config);
    let rules = generated
        .rule_set(config)
        .context("the synthetic rule set does not validate")?;
    let mut times = Vec::new();
    let mut analysis = netacl_analysis::Analysis::default();
    for _ in 0..rounds.max(1) {
        // The previous round's answer is dropped before the clock starts.
        drop(std::mem::take(&mut analysis));
        let t = Instant::now();
        analysis = netacl_analysis::analyze(&rules);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    let count = |kind: netacl_analysis::FindingKind| {
        analysis.findings.iter().filter(|f| f.kind == kind).count()
    };
    let report = AnalyzeReport {
        rules: config.rules,
        active_rules: rules.acls.iter().filter(|a| a.spec.active).count(),
        cidrs: generated.cidrs,
        rounds: times.len(),
        analyze_ms: times[times.len() / 2],
        analyze_ms_min: times[0],
        analyze_ms_max: times[times.len() - 1],
        findings: analysis.findings.len(),
        shadowed: count(netacl_analysis::FindingKind::Shadowed),
        redundant: count(netacl_analysis::FindingKind::Redundant),
        conflict: count(netacl_analysis::FindingKind::Conflict),
        undecided: analysis.undecided.len(),
    };
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let r = &report;
        println!(
            "synthetic tenant: {} rules ({} active), {} CIDRs (seed {})",
            r.rules, r.active_rules, r.cidrs, config.seed
        );
        println!(
            "analysis: {:.1} ms (median of {} rounds; min {:.1}, max {:.1}): {} findings ({} shadowed, {} redundant, {} conflict), {} rules undecided",
            r.analyze_ms,
            r.rounds,
            r.analyze_ms_min,
            r.analyze_ms_max,
            r.findings,
            r.shadowed,
            r.redundant,
            r.conflict,
            r.undecided
        );
    }
    Ok(ExitCode::SUCCESS)
}

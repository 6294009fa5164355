//! `netacl lint RULES.json`: the rule-set analysis of `netacl-analysis` over a rule file.
//!
//! - The rule file is what `netacl eval` reads (an array of records or the
//!   `{"network_acls": [...]}` envelope), validated the same way.
//! - Prints `{"findings": [...], "undecided": [...]}` (pretty JSON) on standard output.
//! - Exit status: 0 without findings, 1 with findings (undecided rules alone are not
//!   findings), 2 when the file cannot be read or is invalid (the message on standard error).
//! - Runs to completion, however long that takes; `--work-budget UNITS` stops at that many
//!   work units as `netacl serve --analysis-work` does (the same answer as the API's when its
//!   deadline is not reached: the rules left open are `undecided` with the reason `budget`).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use netacl_model::{parse_json, JsonTextError, RuleSet, MAX_NESTING_DEPTH};

/// Arguments of `netacl lint`.
#[derive(clap::Args)]
pub struct Args {
    /// The rule file: a JSON array of network ACL records or `{"network_acls": [...]}`.
    #[arg(value_name = "RULES.json")]
    rules: PathBuf,
    #[command(flatten)]
    limits: crate::args::limits::LimitsArgs,
    /// At most this many work units (as `netacl serve --analysis-work`); default: no bound.
    #[arg(long, value_name = "UNITS")]
    work_budget: Option<u64>,
}

/// Runs `netacl lint`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rules = match read_rules(&args.rules, &args.limits.limits()) {
        Ok(rules) => rules,
        Err(message) => {
            eprintln!("netacl lint: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    let analysis = match args.work_budget {
        None => netacl_analysis::analyze(&rules),
        Some(units) => {
            netacl_analysis::analyze_within(&rules, &netacl_analysis::Budget::work(units)).0
        }
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &analysis.to_json())?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(if analysis.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Reads and validates a rule file as `netacl eval` does; the error is the message to print.
pub fn read_rules(
    path: &std::path::Path,
    limits: &netacl_model::Limits,
) -> Result<RuleSet, String> {
    let text = std::fs::read(path)
        .map_err(|err| format!("cannot read the rule file {}: {err}", path.display()))?;
    let value = match parse_json(&text, MAX_NESTING_DEPTH) {
        Ok(value) => value,
        Err(JsonTextError::Syntax(err)) => {
            return Err(format!("{} is not JSON: {err}", path.display()))
        }
        Err(err) => return Err(format!("{}: {err}", path.display())),
    };
    RuleSet::from_json(&value, 1, limits).map_err(|err| {
        format!(
            "invalid rule file {}: {}",
            path.display(),
            crate::cmd::eval::describe_invalid_rules(&err)
        )
    })
}

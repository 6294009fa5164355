//! `netacl eval`: replays requests (JSON lines) against a rule file, one decision a line.
//!
//! - The rule file is a JSON array of stored records, or the list endpoint's
//!   `{"network_acls": [...]}` envelope, validated like the admin API validates it. An invalid
//!   file is reported with the record's index, its id and the property path, exit status 2.
//! - Requests are read from `--requests FILE` or standard input, one JSON object a line, with the
//!   keys of `netacl_eval::RequestInput` (`scope` or `path`, `client_ip`, `connecting_ip`, `asn`,
//!   `country`, `subdivision`, `ja3`, `ja4`, `user_agent`, `hostname`; all optional).
//! - For each request line one outcome line is written to standard output, in order:
//!   `{"action":"block","rule_id":"acl_...","monitored":[]}`. A line that is not a valid request
//!   gets `{"error":"line N: ..."}` instead and the run goes on; the count of such lines is
//!   reported on standard error at the end (the exit status stays 0).
//! - Blank lines (empty or only whitespace) are skipped and produce no output line.
//! - `--managed-list NAME=PATH` (repeatable) gives a managed list's content, one entry a line
//!   (read once, at start); a malformed file is reported with its line, exit status 2. Rules
//!   naming a list without entries are named on standard error (they match nothing through
//!   it; in `not_match` the condition holds).
//! - `--compare OLD NEW` (instead of `--rules`): the impact preview. Every request line is decided
//!   under both rule files and one JSON object is printed, `{requests, changed, transitions,
//!   by_rule, examples}` (see `netacl_analysis::Preview`); invalid lines are left out and counted
//!   on standard error.
//!
//! The run streams in constant memory: lines are parsed with borrowed strings and outcomes are
//! serialised straight into a large output buffer.
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use netacl_eval::{CompiledPolicy, ManagedIndex, RequestInputRef};
use netacl_model::{parse_json, JsonTextError, RuleSet, ValidationError, MAX_NESTING_DEPTH};

const BUFFER: usize = 1 << 20;

/// Arguments of `netacl eval`.
#[derive(clap::Args)]
pub struct Args {
    /// The rule file: a JSON array of network ACL records or `{"network_acls": [...]}`.
    #[arg(long, value_name = "RULES.json", required_unless_present = "compare")]
    rules: Option<PathBuf>,
    /// Impact preview: decide every request under OLD and NEW (two rule files) and print one
    /// JSON object `{requests, changed, transitions, by_rule, examples}` instead of decisions.
    #[arg(long, num_args = 2, value_names = ["OLD.json", "NEW.json"], conflicts_with = "rules")]
    compare: Option<Vec<PathBuf>>,
    /// Requests, one JSON object a line (default: standard input).
    #[arg(long, value_name = "REQUESTS.jsonl")]
    requests: Option<PathBuf>,
    /// The version number to give the rule set (shown in no output; kept for symmetry with the
    /// server's dry run).
    #[arg(long, default_value_t = 1)]
    rules_version: u64,
    #[command(flatten)]
    limits: crate::args::limits::LimitsArgs,
    /// The content of a managed list (`auth0_managed`): NAME=PATH, one entry a line (blank
    /// lines and `#` comments ignored); repeatable.
    #[arg(
        long = "managed-list",
        value_name = "NAME=PATH",
        value_parser = netacl_edge::list_files::parse_flag
    )]
    managed_list: Vec<(netacl_model::ManagedListName, PathBuf)>,
    /// A GeoIP2/GeoLite2 City (or Country) database: request lines with a client address and
    /// no country, subdivision or ASN of their own take them from it (compiled into the policy,
    /// as the edge does). Lines carrying any of the three keep theirs.
    #[arg(long, value_name = "PATH")]
    geoip_city: Option<PathBuf>,
    /// A GeoLite2/GeoIP2 ASN database (see --geoip-city).
    #[arg(long, value_name = "PATH")]
    geoip_asn: Option<PathBuf>,
}

/// The record index a rule-set validation path starts with (`[3].rule...`,
/// `network_acls[3].rule...`).
fn record_index(path: &str) -> Option<usize> {
    let open = path.find('[')?;
    let close = open + path[open..].find(']')?;
    path[open + 1..close].parse().ok()
}

pub(crate) fn describe_invalid_rules(err: &ValidationError) -> String {
    let mut at = String::new();
    match (record_index(&err.path), &err.rule_id) {
        (Some(index), Some(id)) => at = format!("rule {index} (id {id}): "),
        (Some(index), None) => at = format!("rule {index}: "),
        (None, Some(id)) => at = format!("rule {id}: "),
        (None, None) => {}
    }
    if err.path.is_empty() {
        format!("{at}{}", err.reason)
    } else {
        format!("{at}{} (property {})", err.reason, err.path)
    }
}

/// Validates and compiles one rule file with the run's limits, managed lists and databases;
/// the error is the exit status, its message already printed.
fn load_policy(
    args: &Args,
    path: &std::path::Path,
) -> anyhow::Result<Result<CompiledPolicy, ExitCode>> {
    let text = std::fs::read(path)
        .with_context(|| format!("cannot read the rule file {}", path.display()))?;
    let value = match parse_json(&text, MAX_NESTING_DEPTH) {
        Ok(value) => value,
        Err(JsonTextError::Syntax(err)) => {
            eprintln!("netacl eval: {} is not JSON: {err}", path.display());
            return Ok(Err(ExitCode::from(2)));
        }
        Err(err) => {
            eprintln!("netacl eval: {}: {err}", path.display());
            return Ok(Err(ExitCode::from(2)));
        }
    };
    drop(text);
    let rules = match RuleSet::from_json(&value, args.rules_version, &args.limits.limits()) {
        Ok(rules) => rules,
        Err(err) => {
            eprintln!(
                "netacl eval: invalid rule file {}: {}",
                path.display(),
                describe_invalid_rules(&err)
            );
            return Ok(Err(ExitCode::from(2)));
        }
    };
    drop(value);
    let lists = match netacl_edge::list_files::load_all(
        &args.managed_list,
        args.limits.limits().max_entries_per_set,
    ) {
        Ok((lists, _)) => lists,
        Err(err) => {
            eprintln!("netacl eval: invalid {err}");
            return Ok(Err(ExitCode::from(2)));
        }
    };
    let index = std::sync::Arc::new(ManagedIndex::build(&lists));
    let policy = match CompiledPolicy::compile_with_lists(&rules, &args.limits.limits(), &index) {
        Ok(policy) => policy,
        Err(err) => {
            eprintln!(
                "netacl eval: the rule file {} cannot be compiled: {err}",
                path.display()
            );
            return Ok(Err(ExitCode::from(2)));
        }
    };
    drop(rules);
    let policy = match crate::args::geoip::enrich(
        policy,
        args.geoip_city.as_deref(),
        args.geoip_asn.as_deref(),
    ) {
        Ok(policy) => policy,
        Err(err) => {
            eprintln!("netacl eval: {err:#}");
            return Ok(Err(ExitCode::from(2)));
        }
    };
    for rule in policy.stats().rules_naming_empty_lists {
        let what = if rule.configured {
            "is empty"
        } else {
            "has no content (give it with --managed-list)"
        };
        eprintln!(
            "netacl eval: warning: rule {} names {}, which {what}: it matches nothing through it \
             (in not_match the condition holds)",
            rule.rule_id, rule.list
        );
    }
    Ok(Ok(policy))
}

fn open_requests(args: &Args) -> anyhow::Result<Box<dyn Read>> {
    Ok(match &args.requests {
        Some(path) => Box::new(
            File::open(path)
                .with_context(|| format!("cannot open the request file {}", path.display()))?,
        ),
        None => Box::new(io::stdin().lock()),
    })
}

/// Runs `netacl eval`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(files) = &args.compare {
        return run_compare(&args, &files[0], &files[1]);
    }
    let Some(rules) = &args.rules else {
        anyhow::bail!("give --rules or --compare");
    };
    let policy = match load_policy(&args, rules)? {
        Ok(policy) => policy,
        Err(code) => return Ok(code),
    };

    let input = open_requests(&args)?;
    let stdout = io::stdout().lock();
    let mut output = BufWriter::with_capacity(BUFFER, stdout);
    let report = evaluate_lines(
        &policy,
        BufReader::with_capacity(BUFFER, input),
        &mut output,
    );
    let flushed = output.flush();
    let report = match report {
        Ok(report) => report,
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Err(err) => return Err(err).context("cannot read requests or write decisions"),
    };
    match flushed {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        other => other.context("cannot write decisions")?,
    }
    if report.invalid > 0 {
        eprintln!(
            "netacl eval: {} of {} request lines were invalid (see the \"error\" lines)",
            report.invalid,
            report.invalid + report.decided
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `netacl eval --compare OLD NEW`: every request line decided under both rule files, one
/// preview object printed.
fn run_compare(
    args: &Args,
    old: &std::path::Path,
    new: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let old = match load_policy(args, old)? {
        Ok(policy) => policy,
        Err(code) => return Ok(code),
    };
    let new = match load_policy(args, new)? {
        Ok(policy) => policy,
        Err(code) => return Ok(code),
    };
    let mut input = BufReader::with_capacity(BUFFER, open_requests(args)?);
    let (preview, report) =
        compare_lines(&old, &new, &mut input).context("cannot read requests")?;
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &preview.to_json())?;
    out.write_all(b"\n")?;
    out.flush()?;
    if report.invalid > 0 {
        eprintln!(
            "netacl eval: {} of {} request lines were invalid and left out",
            report.invalid,
            report.invalid + report.decided
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Decides every request line of `input` under `old` and `new`: the preview, and the lines
/// decided and refused.
pub fn compare_lines(
    old: &CompiledPolicy,
    new: &CompiledPolicy,
    input: &mut impl BufRead,
) -> io::Result<(netacl_analysis::Preview, LinesReport)> {
    let mut comparison = netacl_analysis::Comparison::new(old, new);
    let mut report = LinesReport::default();
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok((comparison.finish(), report));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            report.invalid += 1;
            continue;
        };
        let Ok(parsed) = RequestInputRef::from_json_line(text) else {
            report.invalid += 1;
            continue;
        };
        let Ok(request) = parsed.to_request() else {
            report.invalid += 1;
            continue;
        };
        comparison.add(&request, || {
            serde_json::to_value(&parsed).unwrap_or_default()
        });
        report.decided += 1;
    }
}

/// What a run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LinesReport {
    /// Requests decided.
    pub decided: u64,
    /// Lines that were not valid requests.
    pub invalid: u64,
}

/// Decides every request line of `input` and writes one line per request to `output`.
pub fn evaluate_lines(
    policy: &CompiledPolicy,
    mut input: impl BufRead,
    output: &mut impl Write,
) -> io::Result<LinesReport> {
    let mut report = LinesReport::default();
    let mut line = Vec::with_capacity(4096);
    let mut number = 0u64;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(report);
        }
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // One UTF-8 check of the whole line, then string slices borrow from it unchecked.
        let parsed = std::str::from_utf8(&line)
            .map_err(|e| format!("not UTF-8: {e}"))
            .and_then(|text| RequestInputRef::from_json_line(text).map_err(|e| e.to_string()))
            .and_then(|input| {
                input
                    .to_request()
                    .map(|request| policy.evaluate(&request))
                    .map_err(|e| e.to_string())
            });
        match parsed {
            Ok(decision) => {
                policy.outcome_ref(&decision).write_json(output)?;
                report.decided += 1;
            }
            Err(message) => {
                serde_json::to_writer(
                    &mut *output,
                    &serde_json::json!({ "error": format!("line {number}: {message}") }),
                )?;
                report.invalid += 1;
            }
        }
        output.write_all(b"\n")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_index_reads_both_path_forms() {
        assert_eq!(record_index("[3].rule.match.asns"), Some(3));
        assert_eq!(record_index("network_acls[12].id"), Some(12));
        assert_eq!(record_index(""), None);
        assert_eq!(record_index("network_acls"), None);
    }

    #[test]
    fn lines_are_decided_in_order_with_errors_in_band() {
        let rules = serde_json::json!([{
            "id": "acl_1111111111111111111111", "description": "d", "active": true, "priority": 1,
            "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [7]}},
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
        }]);
        let rules = RuleSet::from_json(&rules, 1, &netacl_model::Limits::default()).unwrap();
        let policy = CompiledPolicy::compile(&rules).unwrap();
        let input = b"{\"asn\": 7}\n\n  \n{\"asn\": 8}\nnot json\n{\"scope\": \"x\"}\n{\"asn\": 7, \"bogus\": 1}\n{\"asn\":7}";
        let mut out = Vec::new();
        let report = evaluate_lines(&policy, &input[..], &mut out).unwrap();
        assert_eq!(
            report,
            LinesReport {
                decided: 3,
                invalid: 3
            }
        );
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 6);
        assert_eq!(lines[0]["action"], "block");
        assert_eq!(lines[0]["rule_id"], "acl_1111111111111111111111");
        assert_eq!(lines[1]["action"], "none");
        assert!(lines[2]["error"].as_str().unwrap().starts_with("line 5: "));
        assert!(lines[3]["error"]
            .as_str()
            .unwrap()
            .contains("unknown scope"));
        assert!(lines[4]["error"].as_str().unwrap().contains("bogus"));
        assert_eq!(lines[5]["action"], "block");
    }

    #[test]
    fn invalid_rules_name_the_rule_and_the_property() {
        let err = ValidationError::new("[2].rule.match.asns", "Array items are not unique")
            .with_rule_id("acl_2222222222222222222222");
        assert_eq!(
            describe_invalid_rules(&err),
            "rule 2 (id acl_2222222222222222222222): Array items are not unique (property [2].rule.match.asns)"
        );
    }
}

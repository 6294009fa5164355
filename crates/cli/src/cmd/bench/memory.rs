//! The memory figures of `netacl bench`: what a compiled policy adds to a process's resident
//! memory, and where its bytes go, table by table.
//!
//! `policy_resident_bytes` is measured in a child process (`netacl bench --resident-child`
//! with the same tenant arguments), because a process's resident memory after a compile holds
//! more than the policy: glibc's allocator keeps memory the compile freed (its scratch: the
//! collected entries, sorted copies, interval lists) resident for reuse, up to 64 MiB at the
//! top of its heap once its thresholds have grown, plus every free piece below a live one.
//! The child
//!
//! 1. runs with glibc told to return freed memory to the system (`GLIBC_TUNABLES` with
//!    `glibc.malloc.trim_threshold=0` and a fixed `glibc.malloc.mmap_threshold` of 64 KiB:
//!    a freed block from 64 KiB is unmapped, the heap's free top always trimmed);
//! 2. generates and validates the tenant as the bench does, then compiles it once and keeps
//!    that policy, so that the small free pieces its scratch leaves in the heap are there to be
//!    reused, as they are for every later compile of a long-running edge;
//! 3. reads its resident memory (`/proc/self/statm`), compiles the same rules again, keeps
//!    that policy too, and reads it again: the difference is `policy_resident_bytes`, the
//!    resident memory one more compiled policy takes.
//!
//! The bench's own process also reports `compile_resident_bytes`, its resident memory after
//! its (first) compile less before, with the allocator's defaults: the policy and the scratch
//! the allocator kept.
use std::ffi::OsString;
use std::hint::black_box;
use std::process::{Command, ExitCode, Stdio};

use anyhow::Context;
use netacl_eval::synthetic::{self, SyntheticConfig};
use netacl_eval::{CompiledPolicy, IndexKind, PolicyStats};
use serde::Serialize;

/// The glibc settings of the child (see the module docs).
const RETURN_FREED_MEMORY: &str = "glibc.malloc.trim_threshold=0:glibc.malloc.mmap_threshold=65536";

/// `policy_resident_bytes` of the tenant `tenant_args` describe (`--rules`, `--cidrs`, ...),
/// measured in a child process (see the module docs).
pub fn policy_resident_bytes(tenant_args: &[OsString]) -> anyhow::Result<u64> {
    let exe = std::env::current_exe().context("the path of this program")?;
    let output = Command::new(exe)
        .arg("bench")
        .args(tenant_args)
        .arg("--resident-child")
        .env("GLIBC_TUNABLES", RETURN_FREED_MEMORY)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running the resident-memory measurement")?;
    anyhow::ensure!(
        output.status.success(),
        "the resident-memory measurement failed: {}",
        output.status
    );
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("the resident-memory measurement")?;
    report["policy_resident_bytes"]
        .as_u64()
        .context("the resident-memory measurement gave no figure")
}

/// The child's side (see the module docs): `prepare` gives the tenant.
pub fn run_resident_child<D>(
    config: &SyntheticConfig,
    prepare: impl FnOnce() -> anyhow::Result<(synthetic::Synthetic, D)>,
) -> anyhow::Result<ExitCode> {
    let (generated, databases) = prepare()?;
    drop(databases);
    let rules = generated
        .rule_set(config)
        .context("the synthetic rule set does not validate")?;
    let limits = synthetic::limits_for(config);
    let first = CompiledPolicy::compile_with_limits(&rules, &limits)
        .context("the synthetic rule set does not compile")?;
    let before = resident_bytes()?;
    let second = CompiledPolicy::compile_with_limits(&rules, &limits)
        .context("the synthetic rule set does not compile")?;
    let after = resident_bytes()?;
    black_box((&first, &second));
    println!(
        "{}",
        serde_json::json!({
            "policy_resident_bytes": after.saturating_sub(before),
            "policy_bytes": second.stats().approx_bytes,
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// Resident bytes of this process (Linux `/proc/self/statm`: resident pages × 4096).
pub fn resident_bytes() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").context("reading /proc/self/statm")?;
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .context("statm has no resident field")?
        .parse()
        .context("statm's resident field")?;
    Ok(pages * 4096)
}

/// One part of a compiled policy's `policy_bytes`.
#[derive(Serialize)]
pub struct TableBytes {
    /// The index (`client_ip_v4`, `asn`, ...), or `rules_and_postings` for the rest (the
    /// rules' metadata, the posting lists, the listed geo values).
    name: &'static str,
    /// The index's layout (absent for the rest).
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<IndexKind>,
    /// Distinct keys (networks, values, patterns).
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<usize>,
    /// Elementary intervals (address indexes).
    #[serde(skip_serializing_if = "Option::is_none")]
    intervals: Option<usize>,
    bytes: usize,
    /// Bytes per key (networks for an address index).
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_per_key: Option<f64>,
}

/// The policy's bytes by table: every index that holds something, then the rules' metadata
/// and posting lists together (`approx_bytes` less the indexes). They add up to
/// `approx_bytes`.
pub fn policy_tables(stats: &PolicyStats) -> Vec<TableBytes> {
    let mut out: Vec<TableBytes> = stats
        .indexes
        .iter()
        .filter(|i| i.bytes > 0)
        .map(|i| TableBytes {
            name: i.name,
            kind: Some(i.kind),
            keys: Some(i.keys),
            intervals: i.intervals,
            bytes: i.bytes,
            bytes_per_key: (i.keys > 0).then(|| i.bytes as f64 / i.keys as f64),
        })
        .collect();
    let indexes: usize = out.iter().map(|t| t.bytes).sum();
    out.push(TableBytes {
        name: "rules_and_postings",
        kind: None,
        keys: None,
        intervals: None,
        bytes: stats.approx_bytes.saturating_sub(indexes),
        bytes_per_key: None,
    });
    out
}

impl TableBytes {
    /// The part's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

//! `netacl fingerprint`.
use std::process::ExitCode;

/// Arguments of `netacl fingerprint`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `netacl fingerprint`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`netacl fingerprint` is not built yet")
}

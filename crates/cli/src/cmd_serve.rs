//! `netacl serve`.
use std::process::ExitCode;

/// Arguments of `netacl serve`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `netacl serve`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`netacl serve` is not built yet")
}

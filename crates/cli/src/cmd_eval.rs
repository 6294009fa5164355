//! `netacl eval`.
use std::process::ExitCode;

/// Arguments of `netacl eval`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `netacl eval`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`netacl eval` is not built yet")
}

//! `netacl directory`.
use std::process::ExitCode;

/// Arguments of `netacl directory`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `netacl directory`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`netacl directory` is not built yet")
}

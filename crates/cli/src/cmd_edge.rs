//! `netacl edge`.
use std::process::ExitCode;

/// Arguments of `netacl edge`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `netacl edge`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`netacl edge` is not built yet")
}

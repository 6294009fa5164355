//! `netacl bench`.
use std::process::ExitCode;

/// Arguments of `netacl bench`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `netacl bench`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`netacl bench` is not built yet")
}

//! `netacl secrets-key new PATH`: a key-encryption key file for `--secrets-key-file`.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

/// `netacl secrets-key`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Write a new random key to PATH (mode 0600; an existing file is never overwritten) and
    /// print its id. Give the same file to every node sharing a database.
    New {
        /// Where to write the key.
        path: PathBuf,
    },
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::New { path } => {
            let kek = netacl_secrets::Kek::generate_file(&path)
                .context("cannot write the key-encryption key")?;
            println!(
                "wrote key-encryption key {} to {}",
                kek.id(),
                path.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

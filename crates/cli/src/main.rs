//! `netacl`: the one binary. Subcommands: `serve` (admin API), `eval` (replay requests against a
//! rule set), `lint` (analyse a rule set), `bench` (measure the evaluator), `edge` (the enforcing proxy), `fingerprint`
//! (JA3/JA4 of ClientHello records), `directory` (import directory data), `tenant` (the tenants of a deployment).
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod cmd;

use cmd::{bench, directory, edge, eval, fingerprint, lint, secrets_key, serve, tenant};

/// A network ACL evaluation engine and the tenant admin service that feeds it.
#[derive(Parser)]
#[command(name = "netacl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the admin API (and the engine it feeds).
    Serve(Box<serve::Args>),
    /// Evaluate requests (JSON lines) against a rule file; one decision a line.
    Eval(eval::Args),
    /// Analyse a rule file: shadowed, redundant and conflicting rules (exit 1 with findings).
    Lint(lint::Args),
    /// Measure the compiled evaluator against the reference evaluator on a synthetic rule set.
    Bench(bench::Args),
    /// Run the enforcing reverse proxy.
    Edge(Box<edge::Args>),
    /// Print JA3/JA4 of TLS ClientHello records given as hex, one a line.
    Fingerprint(fingerprint::Args),
    /// Manage directory data (users, groups, members, sessions, connections).
    Directory(directory::Args),
    /// Write a new key-encryption key file for --secrets-key-file.
    SecretsKey(secrets_key::Args),
    /// Manage the tenants of the deployment (create, list, show, delete).
    Tenant(tenant::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Eval(args) => eval::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Edge(args) => edge::run(*args),
        Command::Fingerprint(args) => fingerprint::run(args),
        Command::Directory(args) => directory::run(args),
        Command::SecretsKey(args) => secrets_key::run(args),
        Command::Tenant(args) => tenant::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("netacl: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every flag of every subcommand has its own id (two flattened groups with a field of the
    /// same name would collide only when parsed).
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}

//! `netacl`: the one binary. Subcommands: `serve` (admin API), `eval` (replay requests against a
//! rule set), `lint` (analyse a rule set), `bench` (measure the evaluator), `edge` (the enforcing proxy), `fingerprint`
//! (JA3/JA4 of ClientHello records), `directory` (import directory data), `tenant` (the tenants of a deployment).
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench_enrich;
mod bench_memory;
mod bench_threads;
mod cmd_bench;
mod cmd_bench_analyze;
mod cmd_bench_tenants;
mod cmd_directory;
mod cmd_edge;
mod cmd_eval;
mod cmd_fingerprint;
mod cmd_lint;
mod cmd_secrets_key;
mod cmd_serve;
mod cmd_tenant;
mod console_args;
mod duration_arg;
mod geoip_args;
mod limits_args;
mod listener_args;
mod managed_list_args;
mod serve_tenants;
mod tls;

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
    Serve(Box<cmd_serve::Args>),
    /// Evaluate requests (JSON lines) against a rule file; one decision a line.
    Eval(cmd_eval::Args),
    /// Analyse a rule file: shadowed, redundant and conflicting rules (exit 1 with findings).
    Lint(cmd_lint::Args),
    /// Measure the compiled evaluator against the reference evaluator on a synthetic rule set.
    Bench(cmd_bench::Args),
    /// Run the enforcing reverse proxy.
    Edge(Box<cmd_edge::Args>),
    /// Print JA3/JA4 of TLS ClientHello records given as hex, one a line.
    Fingerprint(cmd_fingerprint::Args),
    /// Manage directory data (users, groups, members, sessions, connections).
    Directory(cmd_directory::Args),
    /// Write a new key-encryption key file for --secrets-key-file.
    SecretsKey(cmd_secrets_key::Args),
    /// Manage the tenants of the deployment (create, list, show, delete).
    Tenant(cmd_tenant::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => cmd_serve::run(*args),
        Command::Eval(args) => cmd_eval::run(args),
        Command::Lint(args) => cmd_lint::run(args),
        Command::Bench(args) => cmd_bench::run(args),
        Command::Edge(args) => cmd_edge::run(*args),
        Command::Fingerprint(args) => cmd_fingerprint::run(args),
        Command::Directory(args) => cmd_directory::run(args),
        Command::SecretsKey(args) => cmd_secrets_key::run(args),
        Command::Tenant(args) => cmd_tenant::run(args),
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

//! `netacl directory import FILE.json`: loads connections, users, groups, group members and
//! sessions into the store the server uses (the embedded database of `--data-dir`, or the
//! PostgreSQL database of `--database-url`), upserting by id in one transaction.
//!
//! The server need not be stopped: it reads directory data from the store on every request, and
//! SQLite's WAL lets this process write while the server reads (a server write waits for the
//! import's transaction, up to its 5 s busy timeout). The file format is described in
//! `testdata/README.md` ("Directory data") and in `netacl_model::DirectoryData`.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use netacl_model::{parse_json, DirectoryData, JsonTextError, Limits, MAX_NESTING_DEPTH};
use netacl_store::{PostgresStore, SqliteStore, Store, TenantId};

/// Arguments of `netacl directory`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Import a directory file (connections, users, groups, members, sessions); records are
    /// upserted by id, so importing the same file twice changes nothing. All or nothing: the
    /// first invalid record is named (`sessions[12].user_id: unknown user auth0|x`) and nothing
    /// is written.
    Import(ImportArgs),
}

#[derive(clap::Args)]
struct ImportArgs {
    /// The JSON file to import.
    file: PathBuf,
    /// Directory of the embedded database (the one `netacl serve --data-dir` uses).
    #[arg(long, env = "NETACL_DATA_DIR", default_value = "./netacl-data")]
    data_dir: PathBuf,
    /// A PostgreSQL database instead of the embedded one (the one `netacl serve
    /// --database-url` uses).
    #[arg(long, env = "NETACL_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The host recorded for the tenant when the store has none yet (`netacl serve` sets its
    /// own at start).
    #[arg(long, env = "NETACL_TENANT_DOMAIN", default_value = "localhost:8080")]
    tenant_domain: String,
}

/// Runs `netacl directory`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Import(args) => import(args),
    }
}

/// Reads and validates an import file; errors name the file and the failing record's path.
fn read_file(path: &Path) -> anyhow::Result<DirectoryData> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value = match parse_json(text.as_bytes(), MAX_NESTING_DEPTH) {
        Ok(value) => value,
        Err(JsonTextError::Syntax(err)) => {
            anyhow::bail!("{} is not valid JSON: {err}", path.display())
        }
        Err(err) => anyhow::bail!("{}: {err}", path.display()),
    };
    DirectoryData::from_json(&value).map_err(|err| {
        let at = if err.path.is_empty() {
            String::new()
        } else {
            format!("{}: ", err.path)
        };
        anyhow::anyhow!("{}: {at}{}", path.display(), err.reason)
    })
}

fn import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let data = read_file(&args.file)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(async {
        let store: Arc<dyn Store> = match &args.database_url {
            Some(url) => Arc::new(
                PostgresStore::connect(url, Limits::default())
                    .await
                    .context("cannot use the database of --database-url")?,
            ),
            None => Arc::new(
                SqliteStore::open(&args.data_dir, Limits::default()).with_context(|| {
                    format!("cannot open the database in {}", args.data_dir.display())
                })?,
            ),
        };
        let tenant = TenantId::default_tenant();
        if store.tenant(&tenant).await?.is_none() {
            store.ensure_tenant(&tenant, &args.tenant_domain).await?;
        }
        store
            .import_directory(&tenant, &data)
            .await
            .with_context(|| format!("cannot import {}", args.file.display()))
    })?;
    println!(
        "imported {}: {} connections, {} users, {} groups, {} members, {} sessions \
         ({} inserted, {} updated, {} unchanged)",
        args.file.display(),
        data.connections.len(),
        data.users.len(),
        data.groups.len(),
        data.members.len(),
        data.sessions.len(),
        report.inserted,
        report.updated,
        report.unchanged
    );
    Ok(ExitCode::SUCCESS)
}

//! `netacl tenant create|list|show|delete`: the tenants of a deployment, managed on the store
//! the servers use (the embedded database of `--data-dir`, or the PostgreSQL database of
//! `--database-url`), like `netacl directory import`. Servers need not be stopped: a running
//! server picks a created tenant up and drops a deleted one within its follow interval (at most
//! 5 s). Creation goes through the same provisioning function as the operator API
//! (`POST /_netacl/v1/tenants`).
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use netacl_model::Limits;
use netacl_server::provisioning::{self, tenant_json};
use netacl_store::{PostgresStore, SqliteStore, Store, TenantId};

/// Arguments of `netacl tenant`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(clap::Args)]
struct StoreArgs {
    /// Directory of the embedded database (the one `netacl serve --data-dir` uses).
    #[arg(
        long,
        env = "NETACL_DATA_DIR",
        default_value = "./netacl-data",
        global = true
    )]
    data_dir: PathBuf,
    /// A PostgreSQL database instead of the embedded one (the one `netacl serve
    /// --database-url` uses).
    #[arg(
        long,
        env = "NETACL_DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    database_url: Option<String>,
    /// The key-encryption key the servers use (`netacl serve --secrets-key-file`): a new
    /// tenant's signing key is sealed with it. Default: DATA_DIR/secrets.key (generated when
    /// absent, as `netacl serve` does); required with --database-url.
    #[arg(
        long,
        env = "NETACL_SECRETS_KEY_FILE",
        value_name = "PATH",
        global = true
    )]
    secrets_key_file: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Create a tenant: its signing key and a bootstrap client holding every management scope;
    /// the client's secret is printed once.
    Create {
        /// The tenant's id (1 to 64 of ASCII letters, digits, '-' and '_').
        name: String,
        /// A host the tenant is served on (its first one names the issuer and audience);
        /// repeatable. Lowercased, port and trailing dot removed, IDN converted to A-labels.
        #[arg(long = "domain", value_name = "HOST", required = true)]
        domains: Vec<String>,
        /// Print one JSON object (`tenant`, `domains`, `issuer`, `audience`, `client_id`,
        /// `client_secret`, `created_at`).
        #[arg(long)]
        json: bool,
    },
    /// List the tenants (the default tenant included).
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show one tenant (no secret).
    Show {
        /// The tenant's id.
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Delete a tenant and everything it owns (rules, keys, clients, directory, ...). The
    /// default tenant cannot be deleted.
    Delete {
        /// The tenant's id.
        name: String,
    },
}

/// Runs `netacl tenant`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run_async(args))
}

async fn open_store(args: &StoreArgs) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match &args.database_url {
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
    })
}

fn load_secrets_key(args: &StoreArgs) -> anyhow::Result<netacl_secrets::Kek> {
    crate::cmd::serve::resolve_secrets_key(
        args.secrets_key_file.as_deref(),
        args.database_url.as_deref(),
        &args.data_dir,
    )
}

async fn run_async(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Create {
            name,
            domains,
            json,
        } => {
            let kek = load_secrets_key(&args.store)?;
            let store = open_store(&args.store).await?;
            provisioning::check_secrets_key(&store, &kek).await?;
            let created = provisioning::create_tenant(&store, &kek, &name, &domains)
                .await
                .with_context(|| format!("cannot create tenant {name}"))?;
            if json {
                println!("{}", created.to_json());
            } else {
                println!("created tenant {}", created.record.id);
                println!("  domains:       {}", created.record.domains.join(", "));
                println!("  issuer:        {}", created.issuer);
                println!("  audience:      {}", created.audience);
                println!("  client id:     {}", created.client_id);
                println!("  client secret: {} (shown once)", created.client_secret);
            }
        }
        Command::List { json } => {
            let store = open_store(&args.store).await?;
            let mut all = Vec::new();
            let mut after: Option<TenantId> = None;
            loop {
                let page = store.list_tenants(after.as_ref(), 1000).await?;
                let Some(last) = page.last() else { break };
                after = Some(last.id.clone());
                all.extend(page);
            }
            if json {
                let list: Vec<_> = all.iter().map(tenant_json).collect();
                println!("{}", serde_json::Value::Array(list));
            } else {
                for record in &all {
                    let domains = if record.domains.is_empty() {
                        record.domain.clone()
                    } else {
                        record.domains.join(",")
                    };
                    println!("{}\t{domains}", record.id);
                }
            }
        }
        Command::Show { name, json } => {
            let store = open_store(&args.store).await?;
            let record = match TenantId::new(&name) {
                Some(id) => store.tenant_record(&id).await?,
                None => None,
            };
            let Some(record) = record else {
                anyhow::bail!("tenant {name} does not exist");
            };
            let value = tenant_json(&record);
            if json {
                println!("{value}");
            } else {
                println!("tenant {}", record.id);
                for key in ["domains", "issuer", "audience", "created_at"] {
                    println!("  {key}: {}", value[key]);
                }
            }
        }
        Command::Delete { name } => {
            let store = open_store(&args.store).await?;
            provisioning::delete_tenant(&store, &name)
                .await
                .with_context(|| format!("cannot delete tenant {name}"))?;
            println!("deleted tenant {name} and everything it owned");
        }
    }
    Ok(ExitCode::SUCCESS)
}

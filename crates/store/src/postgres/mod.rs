//! The networked backend: PostgreSQL, shared by several `netacl serve` nodes.
//!
//! Same semantics as the embedded store: every write is one transaction; a tenant's rule-set
//! version is bumped in that transaction, conditioned on the version the writer expected (the
//! `UPDATE ... WHERE acl_version = $expected` takes the tenant row's lock, so racing writers queue
//! and all but one see a newer version); uniqueness of a tenant's priorities and ids is enforced by
//! the database's constraints. A committed ACL change also sends
//! `NOTIFY netacl_changes, '<tenant>:<version>'` from inside the transaction, so listeners
//! ([`PostgresStore::listen`]) hear of it exactly when it becomes visible.
//!
//! Connections come from a small pool (deadpool-postgres) that replaces broken connections by
//! itself: while the database is away every call fails fast with [`StoreError::Unavailable`], and
//! the first call after it returns gets a fresh connection.
mod acl_keys;
mod branding;
mod credentials;
mod directory;
mod history;
mod listen;
mod logs;
mod managed_lists;
mod migrations;
mod network_acls;
mod organizations;
mod tenants;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use netacl_model::Limits;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use crate::{HistoryRetention, StoreError};

pub use listen::{ChangeListener, ChangeNotice, CHANGES_CHANNEL};

/// Connections the pool keeps at most, by default.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// How long a call waits for a connection (free or new) before failing as unavailable.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest time one store call may take (queries included) before it fails as unavailable.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The PostgreSQL store. Cheap to clone (the pool is shared).
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use netacl_model::Limits;
/// use netacl_store::{ChangeNotice, PostgresStore, TenantId, TenantStore};
///
/// let store =
///     PostgresStore::connect("postgres://netacl@127.0.0.1:5432/netacl", Limits::default()).await?;
/// let mut changes = store.listen();
/// let tenant = store.ensure_tenant(&TenantId::default_tenant(), "acl.example.com").await?;
/// println!("rule-set version {}", tenant.acl_version);
/// // Another node commits a change: every listener hears `<tenant>:<version>`.
/// while let Some(notice) = changes.recv().await {
///     if let ChangeNotice::Changed { tenant, version } = notice {
///         println!("{tenant} is now at version {version}");
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    config: tokio_postgres::Config,
    limits: Limits,
    retention: HistoryRetention,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The configuration may hold a password: show only where it points.
        f.debug_struct("PostgresStore")
            .field("hosts", &self.config.get_hosts())
            .field("dbname", &self.config.get_dbname())
            .field("pool_size", &self.pool.status().max_size)
            .finish()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/dbname`, or the
    /// `key=value` form), applies pending schema migrations under an advisory lock (so nodes
    /// starting together migrate once), and keeps a pool of up to [`DEFAULT_POOL_SIZE`]
    /// connections. Stored records are re-validated against `limits` when they are loaded.
    pub async fn connect(url: &str, limits: Limits) -> Result<Self, StoreError> {
        Self::connect_with_pool_size(url, limits, DEFAULT_POOL_SIZE).await
    }

    /// [`PostgresStore::connect`] with another pool size (at least 1).
    pub async fn connect_with_pool_size(
        url: &str,
        limits: Limits,
        pool_size: usize,
    ) -> Result<Self, StoreError> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|err| StoreError::Setup(format!("invalid database URL: {err}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECTION_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("netacl");
        }
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(10));
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECTION_TIMEOUT))
            .create_timeout(Some(CONNECTION_TIMEOUT))
            .recycle_timeout(Some(CONNECTION_TIMEOUT))
            .build()
            .map_err(|err| StoreError::Setup(format!("cannot build the connection pool: {err}")))?;
        let store = Self {
            pool,
            config,
            limits,
            retention: HistoryRetention::default(),
        };
        let mut client = store.pool.get().await.map_err(|err| {
            StoreError::Setup(format!(
                "cannot connect to the database: {}",
                pool_error(&err)
            ))
        })?;
        migrations::apply(&mut client).await?;
        Ok(store)
    }

    /// How long the rule-set history is kept (default [`HistoryRetention::default`]); applied
    /// by every later write of this value.
    pub fn with_history_retention(mut self, retention: HistoryRetention) -> Self {
        self.retention = retention;
        self
    }

    /// Starts listening for committed changes on a dedicated connection (see
    /// [`ChangeListener`]); it reconnects by itself when the connection drops.
    pub fn listen(&self) -> ChangeListener {
        ChangeListener::start(self.config.clone())
    }

    /// Runs one store call with a pooled connection, failing as unavailable after
    /// [`CALL_TIMEOUT`].
    async fn call<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(deadpool_postgres::Object) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let work = async {
            let client = self
                .pool
                .get()
                .await
                .map_err(|err| StoreError::Unavailable(pool_error(&err)))?;
            f(client).await
        };
        tokio::time::timeout(CALL_TIMEOUT, work)
            .await
            .map_err(|_| StoreError::Unavailable("the database did not answer in time".into()))?
    }
}

/// A read-only transaction on one snapshot (repeatable read), for reads that must agree with
/// each other (a version and its records, an owner and its page).
async fn read_snapshot(
    client: &mut deadpool_postgres::ClientWrapper,
) -> Result<deadpool_postgres::Transaction<'_>, tokio_postgres::Error> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
}

/// A pool error in words (without connection details).
fn pool_error(err: &PoolError) -> String {
    match err {
        PoolError::Backend(err) => db_message(err),
        other => other.to_string(),
    }
}

/// A database error in words: the server's message when there is one.
fn db_message(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => match std::error::Error::source(err) {
            // "error connecting to server: Connection refused (os error 111)"
            Some(cause) => format!("{err}: {cause}"),
            None => err.to_string(),
        },
    }
}

/// The name of the unique constraint a statement violated, `None` for any other error.
fn unique_violation(err: &tokio_postgres::Error) -> Option<&str> {
    let db = err.as_db_error()?;
    (db.code() == &SqlState::UNIQUE_VIOLATION).then(|| db.constraint().unwrap_or_default())
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(err: tokio_postgres::Error) -> Self {
        StoreError::Unavailable(db_message(&err))
    }
}

/// Milliseconds since the UNIX epoch, for bookkeeping columns.
fn now_ms() -> i64 {
    netacl_model::Timestamp::now().unix_millis()
}

/// Converts a BIGINT column to a version (never negative: a CHECK constraint says so).
fn to_version(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Converts a version to a BIGINT.
fn from_version(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Unavailable("rule-set version overflow".into()))
}

#[cfg(test)]
mod tests;

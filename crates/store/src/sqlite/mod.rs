//! The embedded backend: one SQLite file in the data directory.
//!
//! Durability: WAL journal with `synchronous=FULL` (every commit is fsynced before it returns),
//! both checked after being set. One writer connection and one reader connection, each behind a
//! mutex and used from `spawn_blocking`, so no async worker ever blocks on the disk.
//! `secure_delete=ON`: deleted or replaced content is overwritten in the file (a sealed signing
//! key replacing its plaintext PEM leaves no copy in a free page).
mod acl_keys;
mod branding;
mod credentials;
mod directory;
mod history;
mod logs;
mod managed_lists;
mod migrations;
mod network_acls;
mod organizations;
mod private_files;
mod tenants;

pub use private_files::prepare_data_dir;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use netacl_model::Limits;
use rusqlite::{Connection, OpenFlags};

use crate::{HistoryRetention, StoreError};

/// The database file's name inside the data directory.
pub const DATABASE_FILE: &str = "netacl.db";

/// How long a connection waits for a lock held by another process before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite store. Cheap to clone (the connections are shared).
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
    retention: HistoryRetention,
}

struct Inner {
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
    limits: Limits,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the database in `data_dir` (the directory `0700`, the files
    /// `0600`: [`prepare_data_dir`]), checks that WAL and
    /// `synchronous=FULL` are in force and applies pending schema migrations. Stored records are
    /// re-validated against `limits` when they are loaded.
    pub fn open(data_dir: &Path, limits: Limits) -> Result<Self, StoreError> {
        prepare_data_dir(data_dir)?;
        let path = data_dir.join(DATABASE_FILE);
        private_files::prepare_database_file(&path)?;
        let mut writer = open_connection(&path)?;
        migrations::apply(&mut writer)?;
        let reader = open_connection(&path)?;
        Ok(Self {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                reader: Mutex::new(reader),
                limits,
                path,
            }),
            retention: HistoryRetention::default(),
        })
    }

    /// How long the rule-set history is kept (default [`HistoryRetention::default`]); applied
    /// by every later write of this value.
    pub fn with_history_retention(mut self, retention: HistoryRetention) -> Self {
        self.retention = retention;
        self
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the writer connection on a blocking thread.
    async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Limits) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = inner
                .writer
                .lock()
                .map_err(|_| StoreError::Unavailable("writer connection poisoned".into()))?;
            f(&mut conn, &inner.limits)
        })
        .await
        .map_err(|err| StoreError::Unavailable(format!("database task failed: {err}")))?
    }

    /// Runs `f` on the reader connection on a blocking thread.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Limits) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let mut conn = inner
                .reader
                .lock()
                .map_err(|_| StoreError::Unavailable("reader connection poisoned".into()))?;
            f(&mut conn, &inner.limits)
        })
        .await
        .map_err(|err| StoreError::Unavailable(format!("database task failed: {err}")))?
    }
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|err| StoreError::Setup(format!("cannot open {}: {err}", path.display())))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|err| StoreError::Setup(format!("cannot set busy_timeout: {err}")))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .map_err(|err| StoreError::Setup(format!("cannot set journal_mode=WAL: {err}")))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Setup(format!(
            "the filesystem of {} refused WAL mode (journal_mode is {mode}); \
             use a local filesystem for the data directory",
            path.display()
        )));
    }
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON;")
        .map_err(|err| StoreError::Setup(format!("cannot set pragmas: {err}")))?;
    let synchronous: i64 = conn
        .query_row("PRAGMA synchronous", [], |row| row.get(0))
        .map_err(|err| StoreError::Setup(format!("cannot read synchronous: {err}")))?;
    if synchronous != 2 {
        return Err(StoreError::Setup(format!(
            "synchronous is {synchronous}, not FULL (2)"
        )));
    }
    Ok(conn)
}

/// Milliseconds since the UNIX epoch, for bookkeeping columns.
fn now_ms() -> i64 {
    netacl_model::Timestamp::now().unix_millis()
}

/// Converts an SQLite integer column to a version (never negative in a database we wrote).
fn to_version(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

#[cfg(test)]
mod tests;

//! The embedded SQLite backend: one file, no server, for a newcomer or a sidecar with a volume.
//! [`Store`](super::Store) is implemented in `reads.rs`, [`WriteTx`](super::WriteTx) in `tx.rs`.
//!
//! WAL mode with `synchronous = FULL` (an acknowledged commit survives a power cut), foreign keys
//! on, and every write transaction opened with `BEGIN IMMEDIATE`: it takes the database's write
//! lock up front, which serializes writes across connections and processes.

mod backfill;
mod lifecycle;
mod reads;
mod search;
mod tx;

pub use tx::SqliteTx;

use sqlx::SqlitePool;
use sqlx::error::DatabaseError;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteError, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating the file and its folder if missing) and applies the migrations.
    pub async fn open(
        url: &str,
        pool_size: u32,
        acquire_timeout: Duration,
    ) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            // A writer waits this long for another's lock before the request is answered 503.
            .busy_timeout(acquire_timeout);
        if let Some(folder) = options
            .get_filename()
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(folder).map_err(|e| {
                anyhow::anyhow!("cannot create the data folder {}: {e}", folder.display())
            })?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(acquire_timeout)
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// SQLite faults a retry may fix: BUSY and LOCKED, and their extended forms (another writer held
/// the database longer than the busy timeout).
pub(super) fn is_transient(e: &dyn DatabaseError) -> bool {
    e.try_downcast_ref::<SqliteError>().is_some_and(|sqlite| {
        matches!(
            sqlite.code().as_deref(),
            Some("5" | "6" | "261" | "262" | "517" | "773")
        )
    })
}

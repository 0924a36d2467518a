//! The embedded SQLite backend: one file, no server, for a newcomer or a sidecar with a volume.
//!
//! WAL mode with `synchronous = FULL` (an acknowledged commit survives a power cut), foreign keys
//! on, and every write transaction opened with `BEGIN IMMEDIATE`: it takes the database's write
//! lock up front, which serializes appends and decisions across connections and processes.

mod backfill;
mod checkpoints;
mod idempotency;
mod reads;
mod turns;

use super::*;
use checkpoints::turn_facts;
use sqlx::SqlitePool;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::str::FromStr;
use std::time::Duration;

pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating the file and its folder if missing) and applies the migrations.
    pub async fn connect(
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

    /// A write transaction that holds the database's write lock from its first statement.
    async fn begin_write(&self) -> R<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }
}

impl SqliteStore {
    /// The latest checkpoint id of a conversation: one primary-key read.
    async fn read_latest_checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<Option<Option<i64>>> {
        sqlx::query_scalar(
            "SELECT latest_checkpoint FROM conversations WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&self.pool)
        .await
    }
}

storage_over_inherent_methods!(SqliteStore);

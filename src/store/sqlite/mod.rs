//! The embedded SQLite backend: one file, no server, for a newcomer or a sidecar with a volume.
//!
//! WAL mode with `synchronous = FULL` (an acknowledged commit survives a power cut), foreign keys
//! on, and every write transaction opened with `BEGIN IMMEDIATE`: it takes the database's write
//! lock up front, which serializes appends and decisions across connections and processes.

mod checkpoints;
mod idempotency;
mod reads;
mod turns;

use super::*;
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
    /// The same key committed concurrently: its answer stands.
    async fn answer_after_race(
        &self,
        tenant: &TenantId,
        claim: &IdempotencyClaim,
        e: sqlx::Error,
    ) -> R<StoredAnswer> {
        self.read_answer(tenant, &claim.key, claim.not_before)
            .await?
            .ok_or(e)
    }
}

impl Storage for SqliteStore {
    async fn ready(&self) -> R<bool> {
        let applied: i64 =
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.pool)
                .await?;
        Ok(applied as usize >= MIGRATOR.iter().count())
    }
    async fn close(&self) {
        self.pool.close().await;
    }
    async fn append(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: Vec<PreparedTurn>,
        claim: Option<&IdempotencyClaim>,
    ) -> R<AppendResult> {
        match (
            self.append_batch(tenant, conversation, batch, claim).await,
            claim,
        ) {
            (Err(e), Some(claim)) if is_duplicate_key(&e) => self
                .answer_after_race(tenant, claim, e)
                .await
                .map(AppendResult::AlreadyAnswered),
            (result, _) => result,
        }
    }
    async fn stored_answer(
        &self,
        tenant: &TenantId,
        key: &str,
        not_before: i64,
    ) -> R<Option<StoredAnswer>> {
        self.read_answer(tenant, key, not_before).await
    }
    async fn latest_checkpoint(
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
    async fn turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
    ) -> R<Option<StoredTurn>> {
        self.read_turn(tenant, conversation, id).await
    }
    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<Option<ConversationRow>> {
        self.read_conversation(tenant, conversation).await
    }
    async fn propose(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        input: ProposeInput,
        claim: Option<&IdempotencyClaim>,
    ) -> R<ProposeResult> {
        match (
            self.decide_and_persist(tenant, conversation, input, claim)
                .await,
            claim,
        ) {
            (Err(e), Some(claim)) if is_duplicate_key(&e) => self
                .answer_after_race(tenant, claim, e)
                .await
                .map(ProposeResult::AlreadyAnswered),
            (result, _) => result,
        }
    }
    async fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<Vec<CheckpointRow>> {
        self.list_checkpoints(tenant, conversation).await
    }
    async fn checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> R<Option<CheckpointRow>> {
        self.read_checkpoint(tenant, conversation, checkpoint_id)
            .await
    }
    async fn reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> R<Option<ReconstructRow>> {
        self.read_for_reconstruct(tenant, conversation, turn).await
    }
    async fn context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<(Vec<ContextTurn>, Vec<ContextCheckpoint>)> {
        self.read_context(tenant, conversation).await
    }
    async fn token_counts_from(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> R<Vec<(i64, Role, u32)>> {
        self.read_token_counts(tenant, conversation, from).await
    }
}

//! Postgres: the raw turn log and the checkpoints. Queries are checked at run time, so building
//! never needs a database; migrations are embedded and applied at start.

mod checkpoints;
mod reads;
mod turns;

pub use checkpoints::{CheckpointRow, DecisionTx};
pub use reads::{ContextCheckpoint, ContextTurn, ReconstructRow, SpanningCheckpoint};
pub use turns::{AppendResult, ConversationRow, StoredTurn};

use crate::config::DatabaseConfig;
use crate::coverage::Role;
use sqlx::migrate::{MigrateDatabase, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use std::str::FromStr;

pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

#[derive(Clone, Debug)]
pub struct Store {
    pool: PgPool,
}

impl Store {
    /// Connects, creating the database if it does not exist, and applies the migrations.
    pub async fn connect(config: &DatabaseConfig) -> anyhow::Result<Self> {
        let url = &config.database_url;
        let options = PgConnectOptions::from_str(url)?;
        if !Postgres::database_exists(url).await? {
            tracing::info!(
                database = options.get_database().unwrap_or_default(),
                "creating the database"
            );
            // Another process may create it at the same moment; that is fine.
            if let Err(e) = Postgres::create_database(url).await
                && !Postgres::database_exists(url).await.unwrap_or(false)
            {
                return Err(e.into());
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(config.pool_size)
            .acquire_timeout(config.acquire_timeout())
            .connect_with(options)
            .await?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }

    /// Wraps a pool whose database is already migrated (tests).
    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool }
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Reachable and migrated: every embedded migration is applied.
    pub async fn ready(&self) -> Result<bool, sqlx::Error> {
        let applied: i64 =
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.pool)
                .await?;
        Ok(applied as usize >= MIGRATOR.iter().count())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn parse_role(raw: &str) -> Result<Role, sqlx::Error> {
    raw.parse()
        .map_err(|e: String| sqlx::Error::Decode(e.into()))
}

/// Content is stored as bytes (so `\u0000` survives); it was UTF-8 when it arrived.
fn decode_text(bytes: Vec<u8>) -> Result<String, sqlx::Error> {
    String::from_utf8(bytes).map_err(|e| sqlx::Error::Decode(e.into()))
}

fn decode_tokens(raw: i64) -> Result<u32, sqlx::Error> {
    u32::try_from(raw).map_err(|e| sqlx::Error::Decode(e.into()))
}

//! The Postgres backend: for teams that share one gatekeeper database across many agents.
//! [`Store`](super::Store) is implemented in `reads.rs`, [`WriteTx`](super::WriteTx) in `tx.rs`.

mod backfill;
mod feed;
mod reads;
mod tx;

pub use tx::PgTx;

use sqlx::PgPool;
use sqlx::error::DatabaseError;
use sqlx::migrate::{MigrateDatabase, Migrator};
use sqlx::postgres::{PgConnectOptions, PgDatabaseError, PgPoolOptions};
use std::str::FromStr;
use std::time::Duration;

pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// The `application_name` of each process's checkpoint feed connection, as
    /// `pg_stat_activity` shows it.
    pub const FEED_APPLICATION_NAME: &str = feed::APPLICATION_NAME;

    /// Connects, creating the database if it does not exist, and applies the migrations. While
    /// the server is not up yet (a container starting beside it), retries with backoff for up
    /// to `startup_wait`, saying what it waits for.
    pub async fn connect_waiting(
        url: &str,
        pool_size: u32,
        acquire_timeout: Duration,
        startup_wait: Duration,
    ) -> anyhow::Result<Self> {
        let options = PgConnectOptions::from_str(url)?;
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(250);
        let exists = loop {
            match sqlx::Postgres::database_exists(url).await {
                Ok(exists) => break exists,
                Err(e) if is_not_up_yet(&e) && started.elapsed() + pause <= startup_wait => {
                    tracing::warn!(
                        server = format!("{}:{}", options.get_host(), options.get_port()),
                        error = %e,
                        retry_in_ms = pause.as_millis() as u64,
                        "waiting for Postgres to accept connections"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => {
                    return Err(anyhow::anyhow!(
                        "cannot reach Postgres at {}:{} (waited {:.1}s): {e}",
                        options.get_host(),
                        options.get_port(),
                        started.elapsed().as_secs_f64()
                    ));
                }
            }
        };
        if !exists {
            tracing::info!(
                database = options.get_database().unwrap_or_default(),
                "creating the database"
            );
            // Another process may create it at the same moment; that is fine.
            if let Err(e) = sqlx::Postgres::create_database(url).await
                && !sqlx::Postgres::database_exists(url).await.unwrap_or(false)
            {
                return Err(e.into());
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(acquire_timeout)
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Self { pool })
    }

    /// Wraps a pool whose database is already migrated.
    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Errors that mean "the server is not accepting connections yet": refused, reset, or starting up.
fn is_not_up_yet(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| c == "57P03"),
        _ => false,
    }
}

/// Postgres faults a retry may fix: 08xxx connection exceptions, 57P01..03 shutdown or not
/// accepting connections yet, 53300 too many connections, 40001/40P01 serialization failure or
/// deadlock.
pub(super) fn is_transient(e: &dyn DatabaseError) -> bool {
    e.try_downcast_ref::<PgDatabaseError>().is_some_and(|pg| {
        let code = pg.code();
        code.starts_with("08")
            || code.starts_with("57P")
            || matches!(code, "53300" | "40001" | "40P01")
    })
}

//! Streaming replicas for reads. A poller keeps each replica's replayed position (and the
//! primary's) a few milliseconds fresh; a read picks a replica from those numbers without a
//! round trip, or waits a bounded while for one to replay the position it carries, else the
//! primary answers. A replica that fails its poll, lags past the bound or is no longer in
//! recovery (promoted away) is skipped until a poll says otherwise.

use super::reconstructs::Reconstructs;
use crate::domain::Position;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How often the poller reads each replica's replayed position.
const POLL_EVERY: Duration = Duration::from_millis(20);
/// A poll slower than this counts as a failure.
const POLL_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Replica {
    /// `host:port`, the metrics label (never the URL: it may hold a password).
    name: String,
    pool: PgPool,
    reconstructs: Arc<Reconstructs>,
    replayed: AtomicU64,
    healthy: AtomicBool,
}

#[derive(Debug)]
pub struct Replicas {
    list: Vec<Replica>,
    primary_position: AtomicU64,
    next: AtomicUsize,
    max_wait: Duration,
    max_lag: u64,
}

impl Replicas {
    /// Pools for each URL (connected lazily: a replica down at start is skipped, not fatal) and
    /// the poller, which stops when the primary pool closes.
    pub fn start(
        primary: &PgPool,
        urls: &[String],
        partitioned: bool,
        pool_size: u32,
        acquire_timeout: Duration,
        max_wait: Duration,
        max_lag: u64,
    ) -> anyhow::Result<Arc<Self>> {
        let mut list = Vec::new();
        for url in urls {
            let options: sqlx::postgres::PgConnectOptions = url.trim().parse()?;
            let name = format!("{}:{}", options.get_host(), options.get_port());
            let pool = PgPoolOptions::new()
                .max_connections(pool_size)
                .acquire_timeout(acquire_timeout.min(POLL_TIMEOUT))
                .connect_lazy_with(super::layout::session_options(options, partitioned));
            list.push(Replica {
                name,
                reconstructs: Reconstructs::new(&pool),
                pool,
                replayed: AtomicU64::new(0),
                healthy: AtomicBool::new(false),
            });
        }
        let replicas = Arc::new(Self {
            list,
            primary_position: AtomicU64::new(0),
            next: AtomicUsize::new(0),
            max_wait,
            max_lag,
        });
        tokio::spawn(poll(replicas.clone(), primary.clone()));
        Ok(replicas)
    }

    /// The pool a read should use, with its reconstruct batches: a healthy replica that has
    /// replayed `min` (waiting up to the bound for one), one within the lag bound when there is
    /// no `min`, else `None` (the primary).
    pub async fn pool_for(&self, min: Option<Position>) -> Option<(PgPool, Arc<Reconstructs>)> {
        let deadline = tokio::time::Instant::now() + self.max_wait;
        loop {
            if let Some(replica) = self.pick(min) {
                metrics::counter!("gatekeeper_replica_reads_total", "replica" => replica.name.clone())
                    .increment(1);
                return Some((replica.pool.clone(), replica.reconstructs.clone()));
            }
            let any_healthy = self.list.iter().any(|r| r.healthy.load(Ordering::Acquire));
            if min.is_none() || !any_healthy || tokio::time::Instant::now() >= deadline {
                metrics::counter!("gatekeeper_replica_reads_total", "replica" => "primary")
                    .increment(1);
                return None;
            }
            tokio::time::sleep(POLL_EVERY / 4).await;
        }
    }

    fn pick(&self, min: Option<Position>) -> Option<&Replica> {
        let primary = self.primary_position.load(Ordering::Acquire);
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..self.list.len())
            .map(|k| &self.list[(start + k) % self.list.len()])
            .find(|r| {
                let replayed = r.replayed.load(Ordering::Acquire);
                r.healthy.load(Ordering::Acquire)
                    && match min {
                        Some(Position(min)) => replayed >= min,
                        None => primary.saturating_sub(replayed) <= self.max_lag,
                    }
            })
    }

    pub async fn close(&self) {
        for r in &self.list {
            r.pool.close().await;
            r.reconstructs.close().await;
        }
    }
}

async fn poll(replicas: Arc<Replicas>, primary: PgPool) {
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !primary.is_closed() {
        tick.tick().await;
        if let Ok(Ok(Some(at))) = tokio::time::timeout(POLL_TIMEOUT, lsn(&primary, PRIMARY)).await {
            replicas.primary_position.store(at, Ordering::Release);
        }
        let primary_at = replicas.primary_position.load(Ordering::Acquire);
        for r in &replicas.list {
            let polled = tokio::time::timeout(POLL_TIMEOUT, lsn(&r.pool, REPLAYED)).await;
            let replayed = match polled {
                Ok(Ok(Some(at))) => Some(at),
                // Not in recovery (promoted away: it no longer follows this primary), or down.
                _ => None,
            };
            let was = r.healthy.swap(replayed.is_some(), Ordering::AcqRel);
            if let Some(at) = replayed {
                r.replayed.store(at, Ordering::Release);
                let lag = primary_at.saturating_sub(at) as f64;
                metrics::gauge!("gatekeeper_replica_lag_bytes", "replica" => r.name.clone())
                    .set(lag);
            }
            metrics::gauge!("gatekeeper_replica_healthy", "replica" => r.name.clone())
                .set(if replayed.is_some() { 1.0 } else { 0.0 });
            if was != replayed.is_some() {
                match polled {
                    Ok(Ok(_)) if replayed.is_some() => {
                        tracing::info!(replica = %r.name, "read replica healthy: reads go to it")
                    }
                    Ok(Ok(_)) => tracing::warn!(
                        replica = %r.name,
                        "read replica is not in recovery (promoted?): skipped"
                    ),
                    Ok(Err(e)) => {
                        tracing::warn!(replica = %r.name, error = %e, "read replica unreachable: skipped")
                    }
                    Err(_) => {
                        tracing::warn!(replica = %r.name, "read replica too slow to answer: skipped")
                    }
                }
            }
        }
    }
}

const PRIMARY: &str = "SELECT (pg_current_wal_lsn() - '0/0')::int8";
/// NULL when not in recovery.
const REPLAYED: &str = "SELECT CASE WHEN pg_is_in_recovery() \
     THEN (pg_last_wal_replay_lsn() - '0/0')::int8 END";

async fn lsn(pool: &PgPool, sql: &str) -> Result<Option<u64>, sqlx::Error> {
    let at: Option<i64> = sqlx::query_scalar(sql).fetch_one(pool).await?;
    Ok(at.map(|a| a as u64))
}

/// The primary's position now: at least that of every commit that has returned.
pub async fn position(primary: &PgPool) -> Result<Position, sqlx::Error> {
    Ok(Position(lsn(primary, PRIMARY).await?.unwrap_or(0)))
}

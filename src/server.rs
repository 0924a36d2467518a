//! Starting and stopping: state from configuration, serving on a given listener, draining.

use crate::config::ServeConfig;
use crate::http::admission::Admission;
use crate::http::rate_limit::RateLimiter;
use crate::http::reconstruct_cache::ReconstructCache;
use crate::http::{AppState, Shared, router};
use crate::service::{Retention, Service};
use crate::store::{Backend, PgStore, SqliteStore, Store};
use crate::tokens::TokenCounter;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;

impl<S: Store> AppState<S> {
    /// The state `serve` runs with: settings validated, over a connected store. Tests build
    /// their apps with this too.
    pub fn from_config(store: S, config: &ServeConfig) -> Result<Self, String> {
        let keys = config.validate()?;
        let decision = &config.decision;
        let tokens = TokenCounter::new(decision.tokenizer);
        Ok(Shared {
            service: Service::new(
                store,
                decision.policy(),
                tokens,
                i64::from(config.max_checkpoints_per_conversation),
                match config.cpu_tasks_per_tenant {
                    0 => crate::config::default_cpu_tasks_per_tenant(
                        std::thread::available_parallelism().map_or(1, |n| n.get()),
                        keys.tenant_count(),
                    ),
                    n => n,
                },
            ),
            keys: Arc::new(keys.clone()),
            default_mode: decision.default_mode,
            limits: config.limits(),
            max_body_bytes: config.max_body_bytes,
            request_timeout: config.request_timeout(),
            rate_limiter: RateLimiter::new(config.rate_limit_per_sec, config.rate_limit_burst)
                .map(Arc::new),
            reconstruct_cache: ReconstructCache::new(config.reconstruct_cache_mib * 1024 * 1024)
                .map(Arc::new),
            feed_heartbeat: config.database.feed_heartbeat(),
            idempotency_ttl: Duration::from_secs(config.idempotency_ttl_secs),
            draining: Arc::new(AtomicBool::new(false)),
            readiness: Arc::default(),
            retention: Retention {
                default_days: config.retention_days,
                tenants: keys.retention().to_vec(),
            },
            retention_every: Duration::from_secs(config.retention_sweep_secs),
            admission: Arc::new(Admission::new(
                config.max_in_flight,
                config.max_in_flight_per_tenant,
            )),
        }
        .into())
    }
}

/// Serves until `shutdown` resolves, then stops accepting, marks the service unready and lets
/// in-flight requests finish for at most `drain_timeout`.
pub async fn serve<S: Store>(
    listener: TcpListener,
    state: AppState<S>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain_timeout: Duration,
) -> std::io::Result<()> {
    crate::http::metrics::spawn_upkeep();
    // Stopped with the server (dropping the guard aborts it).
    let _feed = state.reconstruct_cache.clone().map(|cache| {
        let store = state.service.store().clone();
        let heartbeat = state.feed_heartbeat;
        AbortOnDrop(tokio::spawn(async move {
            let follow = store.follow_checkpoints(heartbeat, |event| cache.on_feed(event));
            tokio::join!(follow, cache.clone().forget_reported_erasures());
        }))
    });
    // Ready or not from the first request on; then kept by a probe, not by `/readyz` itself.
    state.readiness.probe(state.service.store()).await;
    let _probe = {
        let (readiness, store) = (state.readiness.clone(), state.service.store().clone());
        AbortOnDrop(tokio::spawn(
            async move { readiness.keep_probing(store).await },
        ))
    };
    let _retention = (!state.retention.is_off()).then(|| {
        let state = state.clone();
        AbortOnDrop(tokio::spawn(async move { keep_erasing_idle(state).await }))
    });
    let draining = state.draining.clone();
    let (started_draining, drain_started) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(listener, router(state))
        .with_graceful_shutdown(async move {
            shutdown.await;
            draining.store(true, Ordering::SeqCst);
            tracing::info!(
                drain_timeout_secs = drain_timeout.as_secs_f64(),
                "shutting down: draining in-flight requests"
            );
            let _ = started_draining.send(());
        })
        .into_future();
    tokio::pin!(server);
    tokio::select! {
        finished = &mut server => return finished,
        _ = drain_started => {}
    }
    match tokio::time::timeout(drain_timeout, server).await {
        Ok(finished) => finished,
        Err(_) => {
            tracing::warn!(
                "the drain timeout passed with requests still in flight; they are abandoned (their transactions roll back)"
            );
            Ok(())
        }
    }
}

/// Conversations erased per look and rule; a full batch is followed by another at once.
const RETENTION_BATCH: u32 = 100;

/// Retention: erases idle conversations in bounded batches, now and then every
/// `retention_every`, forgetting their cached answers here (other processes hear of it from the
/// feed).
async fn keep_erasing_idle<S: Store>(state: AppState<S>) {
    loop {
        match (state.service)
            .erase_idle(&state.retention, chrono::Utc::now(), RETENTION_BATCH)
            .await
        {
            Ok(erased) => {
                let full_batch = erased.len() >= RETENTION_BATCH as usize;
                if let Some(cache) = &state.reconstruct_cache
                    && !erased.is_empty()
                {
                    cache.conversations_erased(erased).await;
                }
                if full_batch {
                    continue;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "retention: erasing idle conversations failed; trying again later")
            }
        }
        tokio::time::sleep(state.retention_every).await;
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// `gatekeeper serve`: validate, connect, migrate, listen, serve, drain, close. The backend is
/// chosen here, once, by the database URL.
pub async fn run(config: ServeConfig) -> anyhow::Result<()> {
    let keys = config.validate().map_err(anyhow::Error::msg)?;
    let telemetry =
        crate::telemetry::init(config.log_format, &config.log_level).map_err(anyhow::Error::msg)?;
    if keys.is_empty() {
        tracing::warn!(listen = %config.listen, "no API keys configured: single tenant, loopback only");
    }
    tracing::info!(?config, "starting");
    let served = match Backend::of_url(&config.database.url()).map_err(anyhow::Error::msg)? {
        Backend::Postgres => launch::<PgStore>(config).await,
        Backend::Sqlite => launch::<SqliteStore>(config).await,
    };
    // After the drain: the spans of the last requests go out before the process exits.
    telemetry.shutdown().await;
    served
}

async fn launch<S: Store>(config: ServeConfig) -> anyhow::Result<()> {
    let store = S::connect(&config.database).await?;
    let profiled = store.backfill_profiles().await?;
    if profiled > 0 {
        tracing::info!(
            turns = profiled,
            "term profiles computed for turns stored before them"
        );
    }
    let indexed = store.backfill_search().await?;
    if indexed > 0 {
        tracing::info!(
            turns = indexed,
            "turns stored before the search index indexed"
        );
    }
    tracing::info!(backend = ?store.backend(), "database ready");
    let listener = TcpListener::bind(config.listen).await?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    let state = AppState::from_config(store.clone(), &config).map_err(anyhow::Error::msg)?;
    serve(
        listener,
        state,
        shutdown_signal(),
        Duration::from_secs(config.drain_timeout_secs),
    )
    .await?;
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

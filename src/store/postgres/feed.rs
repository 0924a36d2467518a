//! The checkpoint feed: `LISTEN` on the channel the `checkpoints_notify` trigger (and the
//! erasure trigger, `conversations_notify_erased`) writes to.
//!
//! A connection can die without a word: the server's host gone or the network cut, no FIN, no
//! RST. Waiting for a notification, the feed would then see a quiet channel, not a dead one, and
//! its process would go on answering from memory without other processes' checkpoints. sqlx
//! offers no TCP keepalive, so the feed checks for itself: after [`FeedHeartbeat::every`] without
//! a message it runs `SELECT 1` on its connection, which must answer within
//! [`FeedHeartbeat::timeout`]. A dead connection is thus reported [`FeedEvent::Lost`] within
//! [`FeedHeartbeat::bound`] of its death, and a new one is made.

use crate::store::{FeedEvent, FeedHeartbeat};
use serde::Deserialize;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use std::time::Duration;

const CHANNEL: &str = "gatekeeper_checkpoints";

/// How the feed's connection shows in `pg_stat_activity`.
pub(super) const APPLICATION_NAME: &str = "gatekeeper checkpoint feed";

/// Connecting and `LISTEN` must be done within this, or the attempt counts as failed.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct Payload {
    tenant: String,
    conversation: String,
    /// Set by the erasure trigger (migration 0009).
    #[serde(default)]
    erased: bool,
}

/// Reports every checkpoint committed by any process, forever; reconnects with backoff.
/// Its own connection, outside the request pool, so it never takes a request's slot.
pub(super) async fn follow(
    pool: &PgPool,
    heartbeat: FeedHeartbeat,
    mut on: impl FnMut(FeedEvent<'_>) + Send,
) {
    let options = (*pool.connect_options())
        .clone()
        .application_name(APPLICATION_NAME);
    let mut pause = Duration::from_millis(100);
    loop {
        let failed = match tokio::time::timeout(LISTEN_TIMEOUT, listen(&options)).await {
            Ok(Ok(mut listener)) => {
                pause = Duration::from_millis(100);
                on(FeedEvent::Connected);
                report(&mut listener, heartbeat, &mut on).await;
                on(FeedEvent::Lost);
                // Dropping the listener sends `UNLISTEN` on its connection, in a task of its
                // own; on a dead connection that task waits until the socket gives up, but the
                // connection has a pool of its own, so the next one is made at once.
                continue;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {} s", LISTEN_TIMEOUT.as_secs()),
        };
        tracing::warn!(error = %failed, retry_in_ms = pause.as_millis() as u64, "checkpoint feed: cannot listen");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// Reports what arrives on the listener's connection until it is lost, fails, or does not
/// answer the heartbeat in time.
async fn report(
    listener: &mut PgListener,
    heartbeat: FeedHeartbeat,
    on: &mut (impl FnMut(FeedEvent<'_>) + Send),
) {
    loop {
        // Cancel-safe: a message half read when the wait ends is read whole by the next call.
        let Ok(received) = tokio::time::timeout(heartbeat.every, listener.try_recv()).await else {
            // Quiet for a while: make sure the server is still there. A notification arriving
            // meanwhile is buffered by the listener and returned by the next `try_recv`.
            let check = ping(listener);
            match tokio::time::timeout(heartbeat.timeout, check).await {
                Ok(Ok(_)) => continue,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "checkpoint feed: heartbeat failed");
                }
                Err(_) => {
                    tracing::warn!(
                        timeout_secs = heartbeat.timeout.as_secs_f64(),
                        "checkpoint feed: the server did not answer the heartbeat; connecting again"
                    );
                }
            }
            return;
        };
        match received {
            Ok(Some(notification)) => match serde_json::from_str::<Payload>(notification.payload())
            {
                Ok(p) if p.erased => on(FeedEvent::Erased {
                    tenant: &p.tenant,
                    conversation: &p.conversation,
                }),
                Ok(p) => on(FeedEvent::Checkpoint {
                    tenant: &p.tenant,
                    conversation: &p.conversation,
                }),
                // Not knowing which conversation moved, forget them all.
                Err(e) => {
                    tracing::warn!(error = %e, "checkpoint feed: unreadable payload");
                    on(FeedEvent::Lost);
                    on(FeedEvent::Connected);
                }
            },
            Ok(None) => {
                tracing::warn!("checkpoint feed: connection lost");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint feed: connection failed");
                return;
            }
        }
    }
}

/// A boxed future: sqlx 0.8's `Executor` for `&mut PgListener` is not general enough for the
/// `Send` check of an async trait method's future when awaited inline.
fn ping(
    listener: &mut PgListener,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), sqlx::Error>> + Send + '_>> {
    use sqlx::Executor;
    Box::pin(async move { listener.execute("SELECT 1").await.map(drop) })
}

async fn listen(options: &PgConnectOptions) -> Result<PgListener, sqlx::Error> {
    // A pool of one, for this connection alone: a dead one still held by its clean-up never
    // stands in the way of the next.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(LISTEN_TIMEOUT)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with(options.clone());
    let mut listener = PgListener::connect_with(&pool).await?;
    // Report a loss at once, and reconnect here, where `Connected` can be said.
    listener.eager_reconnect(false);
    listener.ignore_pool_close_event(true);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

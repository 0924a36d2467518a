//! The checkpoint feed: `LISTEN` on the channel the `checkpoints_notify` trigger writes to.

use crate::store::FeedEvent;
use serde::Deserialize;
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use std::time::Duration;

const CHANNEL: &str = "gatekeeper_checkpoints";

#[derive(Deserialize)]
struct Payload {
    tenant: String,
    conversation: String,
}

/// Reports every checkpoint committed by any process, forever; reconnects with backoff.
/// Its own connection, outside the request pool, so it never takes a request's slot.
pub(super) async fn follow(pool: &PgPool, mut on: impl FnMut(FeedEvent<'_>) + Send) {
    let feed_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with((*pool.connect_options()).clone());
    let mut pause = Duration::from_millis(100);
    loop {
        let mut listener = match listen(&feed_pool).await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(error = %e, retry_in_ms = pause.as_millis() as u64, "checkpoint feed: cannot listen");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        pause = Duration::from_millis(100);
        on(FeedEvent::Connected);
        loop {
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    match serde_json::from_str::<Payload>(notification.payload()) {
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
                    }
                }
                Ok(None) => {
                    tracing::warn!("checkpoint feed: connection lost");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "checkpoint feed: connection failed");
                    break;
                }
            }
        }
        on(FeedEvent::Lost);
    }
}

async fn listen(pool: &sqlx::PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // Report a loss at once, and reconnect here, where `Connected` can be said.
    listener.eager_reconnect(false);
    listener.ignore_pool_close_event(true);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

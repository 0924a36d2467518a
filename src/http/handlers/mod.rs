//! Handlers: parse → load → decide → persist → respond; nothing else.

pub mod compactions;
pub mod health;
pub mod reads;
pub mod turns;

use super::Error;
use crate::domain::ConversationId;

/// A conversation id from the path; a malformed one is a 400 naming the parameter.
fn conversation_id(raw: &str) -> Result<ConversationId, Error> {
    ConversationId::parse(raw).map_err(|e| Error::BadRequest {
        detail: e.message,
        field: Some(e.field),
    })
}

fn conversation_not_found(id: &ConversationId) -> Error {
    Error::NotFound(format!("conversation {id} does not exist"))
}

/// Runs CPU-heavy work (token counting, anchor derivation, a large decision) off the async
/// workers, so one big request does not stall every other.
async fn cpu<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("a blocking task failed: {e}")))
}

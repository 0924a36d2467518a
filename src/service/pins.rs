//! Pinning a turn: under the conversation's lock, so no proposal covers it meanwhile.

use super::{Error, LockHeld, Result, Service};
use crate::api::TurnResponse;
use crate::domain::{ConversationId, TenantId};
use crate::store::{Store, WriteTx};

impl<S: Store> Service<S> {
    /// Pins or unpins the turn. A turn a checkpoint covers cannot be pinned: its summary
    /// already stands for it. Moves the conversation's facts version, so a proposal decided
    /// before the pin is decided again.
    pub async fn set_pinned(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
        pinned: bool,
    ) -> Result<TurnResponse> {
        let not_in_log = || Error::TurnNotInLog {
            conversation: conversation.clone(),
            turn,
        };
        let mut tx = self.store.begin().await?;
        if tx.lock_conversation(tenant, conversation).await?.is_none() {
            return Err(not_in_log());
        }
        let _held = LockHeld::now("pin");
        if pinned
            && let Some(decider) = tx.deciding_checkpoint(tenant, conversation, turn).await?
            && decider.covers_turn
        {
            return Err(Error::PinCovered {
                checkpoint_id: decider.checkpoint_id,
                turn,
            });
        }
        let stored =
            (tx.set_pinned(tenant, conversation, turn, pinned).await?).ok_or_else(not_in_log)?;
        tx.commit().await?;
        let action = if pinned { "pin" } else { "unpin" };
        metrics::counter!("gatekeeper_turn_pins_total", "action" => action).increment(1);
        tracing::info!(tenant = %tenant, conversation = %conversation, turn, pinned, "turn pin set");
        Ok(super::reads::turn_response(stored))
    }
}

//! Appending a batch: prepared off the lock, placed and written under it.

use super::{CpuWork, Error, LockHeld, Reply, Result, Service, answer_after_race};
use crate::api::AppendTurnsResponse;
use crate::append::{Appended, PreparedTurn, plan_append};
use crate::domain::{AppendRequest, ConversationId, TenantId};
use crate::store::{self, IdempotencyClaim, Store, WriteTx};
use foldhash::HashMap;

impl<S: Store> Service<S> {
    /// Appends the batch in one transaction, all or nothing. Turns already stored identically
    /// are replays; derived anchors are ranked by rarity in the conversation.
    pub async fn append(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        request: AppendRequest,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<Reply<Appended>> {
        let tokens = self.tokens.clone();
        let batch = self
            .cpu(tenant, CpuWork::Append, move || {
                let turns = request.turns.into_iter();
                turns.map(|t| PreparedTurn::new(t, &tokens)).collect()
            })
            .await?;
        let written = self.write_batch(tenant, conversation, batch, claim).await;
        let reply = answer_after_race(&self.store, (tenant, conversation), claim, written).await?;
        if let Reply::New(appended) = &reply {
            metrics::counter!("gatekeeper_turns_appended_total")
                .increment(appended.new.len() as u64);
        }
        Ok(reply)
    }

    async fn write_batch(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: Vec<PreparedTurn>,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<Reply<Appended>> {
        let mut tx = self.store.begin().await?;
        let locked = tx.lock_or_create_conversation(tenant, conversation).await?;
        let _held = LockHeld::now("append");
        // Under the lock: a retry racing its own first try finds the answer here.
        if let Some(claim) = claim
            && let Some(answer) = tx
                .find_answer(tenant, conversation, &claim.key, claim.not_before)
                .await?
        {
            return Ok(Reply::Stored(answer));
        }
        let named: Vec<i64> = batch
            .iter()
            .filter_map(|t| t.id)
            .filter(|&id| id < locked.next_id)
            .collect();
        let stored = if named.is_empty() {
            Vec::new()
        } else {
            tx.logged_turns(tenant, conversation, &named).await?
        };
        let plan = plan_append(locked.next_id, batch, &stored).map_err(Error::AppendConflict)?;
        let keys = plan.candidate_keys();
        let seen = if keys.is_empty() {
            HashMap::default()
        } else {
            tx.term_counts(tenant, conversation, &keys).await?
        };
        let appended = plan.rank(&seen, self.policy.anchor_count);
        if !appended.new.is_empty() {
            tx.insert_turns(tenant, conversation, &appended).await?;
        }
        if let Some(claim) = claim {
            // A batch of replays is answered (and recorded) 200: the key is spent either way.
            let status = if appended.new.is_empty() { 200 } else { 201 };
            let answer = AppendTurnsResponse::from_plan(conversation.as_str(), &appended);
            let body = serde_json::to_vec(&answer).map_err(store::Error::invariant)?;
            tx.record_answer(tenant, conversation, claim, status, &body)
                .await?;
        }
        tx.commit().await?;
        Ok(Reply::New(appended))
    }
}

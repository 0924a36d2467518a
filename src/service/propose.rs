//! Deciding a compaction proposal: decided before the conversation's lock, persisted under it.
//!
//! Turns are immutable once appended and ids have no gaps, so the range's facts can be read and
//! the decision made with no lock held. Under the lock only what can change is checked: the
//! `Idempotency-Key`, the latest checkpoint against `expected_checkpoint`, and the
//! conversation's facts version (a pin or the profile backfill moves it; the decision is then
//! made again on the facts as they now are). The lock is held for the insert, not the decision.

use super::{CpuWork, Error, LockHeld, Reply, Result, Service, answer_after_race};
use crate::api::VerdictResponse;
use crate::coverage::{
    Decision, IdRange, IdRanges, Outcome, Proposal, TurnFacts, TurnStatus, Verdict,
};
use crate::domain::{CompactionRequest, ConversationId, ExpectedCheckpoint, TenantId};
use crate::store::{
    self, ConversationRow, IdempotencyClaim, NewCheckpoint, Store, StoredAnswer, WriteTx,
};

/// A decided proposal; persisted (with its id) unless rejected or a dry run.
#[derive(Debug, Clone)]
pub struct Proposed {
    pub verdict: Verdict,
    pub checkpoint_id: Option<i64>,
    pub dry_run: bool,
}

impl<S: Store> Service<S> {
    pub async fn propose(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        request: CompactionRequest,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<Reply<Proposed>> {
        let CompactionRequest {
            mut proposal,
            expected_checkpoint: expected,
            dry_run,
        } = request;
        let tokens = self.tokens.clone();
        let (from, to) = (proposal.from, proposal.to);
        // Counting the summary and reading the range need nothing of each other: one runs
        // while the other waits on the database. Both are awaited, so the count never outlives
        // the request, and its failure comes first, as when it ran first.
        let (counted, read) = tokio::join!(
            self.cpu(tenant, CpuWork::CountSummary, move || {
                proposal.summary_tokens = tokens.count(&proposal.summary);
                proposal
            }),
            self.read_range(tenant, conversation, (from, to), expected, dry_run, claim)
        );
        let proposal = counted?;
        let (seen, facts) = match read? {
            RangeRead::Facts(seen, facts) => (seen, facts),
            RangeRead::Answered(answer) => return Ok(Reply::Stored(answer)),
        };
        let (proposal, decision) = self.decide(tenant, proposal, facts).await?;
        if dry_run {
            if let Some(claim) = claim {
                let body = answer_body(conversation, &decision.verdict, None, true)?;
                let recorded = self.record_alone((tenant, conversation), claim, body).await;
                if let Reply::Stored(answer) =
                    answer_after_race(&self.store, (tenant, conversation), Some(claim), recorded)
                        .await?
                {
                    return Ok(Reply::Stored(answer));
                }
            }
            return Ok(Reply::New(proposed(
                (tenant, conversation),
                decision.verdict,
                None,
                true,
            )));
        }
        let decided = Decided {
            proposal,
            decision,
            facts_version: seen.facts_version,
            expected,
        };
        let persisted = self.persist(tenant, conversation, decided, claim).await;
        Ok(
            match answer_after_race(&self.store, (tenant, conversation), claim, persisted).await? {
                Reply::New((verdict, id)) => {
                    Reply::New(proposed((tenant, conversation), verdict, id, false))
                }
                Reply::Stored(answer) => Reply::Stored(answer),
            },
        )
    }

    /// What can be checked before the decision (the conversation, `expected_checkpoint`, the
    /// checkpoint limit, the ids in the log), then the range's facts.
    async fn read_range(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        (from, to): (i64, i64),
        expected: ExpectedCheckpoint,
        dry_run: bool,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<RangeRead> {
        let seen = self
            .store
            .conversation(tenant, conversation)
            .await?
            .ok_or_else(|| Error::NoConversation(conversation.clone()))?;
        let latest = seen.latest.map(|l| l.checkpoint_id);
        if !expected.admits(latest) {
            // The latest checkpoint only moves forward, so the lock would say the same, unless
            // it is this request's own first try that moved it.
            return match self.answer_for((tenant, conversation), claim).await? {
                Some(answer) => Ok(RangeRead::Answered(answer)),
                None => Err(Error::Stale { expected, latest }),
            };
        }
        if seen.checkpoint_count >= self.max_checkpoints && !dry_run {
            return Err(self.too_many_checkpoints(conversation));
        }
        if to >= seen.next_id {
            let missing = IdRange::new(seen.next_id.max(from), to);
            return Err(Error::IdsNotInLog(IdRanges::from_ranges([missing])));
        }
        let facts = (self.store)
            .range_facts(tenant, conversation, from, to)
            .await?;
        Ok(RangeRead::Facts(seen, facts))
    }

    /// Decides off the async workers (a 32,000-turn range takes tens of milliseconds).
    async fn decide(
        &self,
        tenant: &TenantId,
        proposal: Proposal,
        facts: Vec<TurnFacts>,
    ) -> Result<(Proposal, Decision)> {
        let policy = self.policy;
        let (proposal, decision) = self
            .cpu(tenant, CpuWork::Decide, move || {
                let decision = crate::coverage::decide_with_evidence(&proposal, &facts, &policy);
                (proposal, decision)
            })
            .await?;
        let decision = decision?;
        if decision.matching_cut {
            // Fail closed, loudly: the turns it leaves uncovered are answered from the raw log.
            tracing::warn!(
                tenant = %tenant,
                from = proposal.from,
                to = proposal.to,
                "the anchor matcher ran out of its work budget; anchors not yet found count as absent"
            );
            metrics::counter!("gatekeeper_anchor_matching_cut_total").increment(1);
        }
        Ok((proposal, decision))
    }

    /// Under the lock: checks what can have changed since the decision, and persists it.
    async fn persist(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        decided: Decided,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<Reply<(Verdict, Option<i64>)>> {
        let Decided {
            proposal,
            mut decision,
            facts_version,
            expected,
        } = decided;
        let mut tx = self.store.begin().await?;
        let locked = tx
            .lock_conversation(tenant, conversation)
            .await?
            .ok_or_else(|| Error::NoConversation(conversation.clone()))?;
        let _held = LockHeld::now("propose");
        if let Some(claim) = claim
            && let Some(answer) = tx
                .find_answer(tenant, conversation, &claim.key, claim.not_before)
                .await?
        {
            return Ok(Reply::Stored(answer));
        }
        if !expected.admits(locked.latest_checkpoint) {
            return Err(Error::Stale {
                expected,
                latest: locked.latest_checkpoint,
            });
        }
        if locked.facts_version != facts_version {
            let facts = tx
                .turn_facts(tenant, conversation, proposal.from, proposal.to)
                .await?;
            tracing::info!(tenant = %tenant, conversation = %conversation, "the range's facts changed during the decision; deciding again");
            metrics::counter!("gatekeeper_compaction_redecisions_total").increment(1);
            decision = self.decide(tenant, proposal.clone(), facts).await?.1;
        }
        let verdict = decision.verdict;
        if verdict.outcome == Outcome::Rejected {
            // The churn guard's memory: one more rejection from `from`.
            tx.count_rejection(tenant, conversation, verdict.from)
                .await?;
            if let Some(claim) = claim {
                let (status, body) = answer_body(conversation, &verdict, None, false)?;
                tx.record_answer(tenant, conversation, claim, status, &body)
                    .await?;
            }
            tx.commit().await?;
            return Ok(Reply::New((verdict, None)));
        }
        if locked.checkpoint_count >= self.max_checkpoints {
            return Err(self.too_many_checkpoints(conversation));
        }
        let checkpoint_id = locked.checkpoint_count + 1;
        let advanced_to = verdict
            .advanced_to
            .ok_or_else(|| store::Error::invariant("a verdict that is not rejected advances"))?;
        let checkpoint = NewCheckpoint {
            checkpoint_id,
            verdict: &verdict,
            advanced_to,
            summary: &proposal.summary,
            candidates_used: &decision.candidates_used,
        };
        tx.insert_checkpoint(tenant, conversation, &checkpoint)
            .await?;
        if let Some(claim) = claim {
            let (status, body) = answer_body(conversation, &verdict, Some(checkpoint_id), false)?;
            tx.record_answer(tenant, conversation, claim, status, &body)
                .await?;
        }
        tx.commit().await?;
        Ok(Reply::New((verdict, Some(checkpoint_id))))
    }

    fn too_many_checkpoints(&self, conversation: &ConversationId) -> Error {
        Error::TooManyCheckpoints {
            conversation: conversation.clone(),
            max: self.max_checkpoints,
        }
    }

    async fn answer_for(
        &self,
        (tenant, conversation): (&TenantId, &ConversationId),
        claim: Option<&IdempotencyClaim>,
    ) -> Result<Option<store::StoredAnswer>> {
        let Some(claim) = claim else { return Ok(None) };
        Ok(self
            .store
            .stored_answer(tenant, conversation, &claim.key, claim.not_before)
            .await?)
    }
}

/// What the client is answered, as an Idempotency-Key records it: 201 persisted, 200 a dry run,
/// 422 (problem+json) rejected.
fn answer_body(
    conversation: &ConversationId,
    verdict: &Verdict,
    checkpoint_id: Option<i64>,
    dry_run: bool,
) -> Result<(u16, Vec<u8>)> {
    let response = VerdictResponse {
        conversation: conversation.to_string(),
        checkpoint_id,
        dry_run,
        verdict: verdict.clone(),
    };
    let (status, body) = match (verdict.outcome, dry_run) {
        (Outcome::Rejected, _) => (422, serde_json::to_vec(&response.rejection_problem())),
        (_, true) => (200, serde_json::to_vec(&response)),
        (_, false) => (201, serde_json::to_vec(&response)),
    };
    Ok((status, body.map_err(store::Error::invariant)?))
}

/// What the reads before the decision found.
enum RangeRead {
    /// The conversation as seen, and the range's facts.
    Facts(ConversationRow, Vec<TurnFacts>),
    /// This request's own first try answered it already (its retry came stale).
    Answered(StoredAnswer),
}

/// A decision made before the lock, and what it was made against.
struct Decided {
    proposal: Proposal,
    decision: Decision,
    facts_version: i64,
    expected: ExpectedCheckpoint,
}

fn proposed(
    on: (&TenantId, &ConversationId),
    verdict: Verdict,
    checkpoint_id: Option<i64>,
    dry_run: bool,
) -> Proposed {
    record(on, checkpoint_id, &verdict, dry_run);
    Proposed {
        verdict,
        checkpoint_id,
        dry_run,
    }
}

/// Every decision is loud: one log event and the counters, whatever the outcome.
fn record(
    (tenant, conversation): (&TenantId, &ConversationId),
    checkpoint_id: Option<i64>,
    v: &Verdict,
    dry_run: bool,
) {
    if !dry_run {
        metrics::counter!("gatekeeper_compactions_total", "outcome" => v.outcome.as_str())
            .increment(1);
        // Turn counts describe persisted pointer sets; a rejected verdict persists none.
        if checkpoint_id.is_some() {
            metrics::counter!("gatekeeper_compaction_turns_total", "status" => "covered")
                .increment(v.covered.count());
            metrics::counter!("gatekeeper_compaction_turns_total", "status" => "uncovered")
                .increment(v.uncovered.count());
            metrics::counter!("gatekeeper_compaction_turns_total", "status" => "not_compacted")
                .increment(v.not_compacted.count());
        }
        for signal in &v.truncation_signals {
            metrics::counter!("gatekeeper_truncated_summaries_total", "signal" => signal.as_str())
                .increment(1);
        }
        metrics::counter!("gatekeeper_coverage_contradictions_total")
            .increment(v.contradictions.count());
    }
    let signals: Vec<&str> = v.truncation_signals.iter().map(|s| s.as_str()).collect();
    let not_compacted = v
        .turns
        .iter()
        .filter(|t| t.status == TurnStatus::NotCompacted)
        .count();
    macro_rules! event {
        ($level:ident) => {
            tracing::$level!(
                tenant = %tenant,
                conversation = %conversation,
                checkpoint = ?checkpoint_id,
                outcome = v.outcome.as_str(),
                dry_run,
                from = v.from,
                to = v.to,
                advanced_to = ?v.advanced_to,
                covered = v.covered.count(),
                uncovered = v.uncovered.count(),
                not_compacted,
                contradictions = v.contradictions.count(),
                over_ceiling = v.over_ceiling,
                truncation_signals = ?signals,
                "compaction decided"
            )
        };
    }
    if v.outcome == Outcome::Accepted {
        event!(info);
    } else {
        event!(warn);
    }
}

//! The reads: the log, the checkpoints, reconstruct, the working context and the compaction
//! plan. None waits for a write; none ever answers a false negative.

use super::{CpuWork, Error, Result, Service};
use crate::api::{
    AnchorOrigin, CheckpointItem, CheckpointRef, CompactionPlanResponse, ContextItem,
    ContextResponse, ConversationResponse, PlannedTurn, ReconstructResponse, Source, TurnResponse,
};
use crate::context;
use crate::coverage::{Policy, Reason, TurnFacts, distinctive, locate};
use crate::domain::{ConversationId, TenantId};
use crate::plan::{self, Rejections};
use crate::store::{self, CheckpointRow, Head, ReconstructRow, Store, StoredTurn, TurnSize};

impl<S: Store> Service<S> {
    pub async fn turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<TurnResponse> {
        let stored = self.store.turn(tenant, conversation, turn).await?;
        Ok(turn_response(stored.ok_or_else(|| {
            Error::TurnNotInLog {
                conversation: conversation.clone(),
                turn,
            }
        })?))
    }

    pub async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<ConversationResponse> {
        let row = (self.store.conversation(tenant, conversation).await?)
            .ok_or_else(|| Error::NoConversation(conversation.clone()))?;
        Ok(ConversationResponse {
            conversation: conversation.to_string(),
            next_id: row.next_id,
            total_tokens: row.total_tokens,
            checkpoints: row.checkpoint_count,
            latest_checkpoint: row.latest.map(|l| CheckpointRef {
                checkpoint_id: l.checkpoint_id,
                from: l.from,
                advanced_to: l.advanced_to,
                outcome: l.outcome,
            }),
        })
    }

    /// At most `limit` turns from `from` on, without their content, and where the next page
    /// starts (`None`: this page reaches the end of the log).
    pub async fn turn_sizes(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        limit: u32,
    ) -> Result<(Vec<TurnSize>, Option<i64>)> {
        // One more than asked shows whether another page follows.
        let mut turns = (self.store)
            .turn_sizes(tenant, conversation, from, limit.saturating_add(1))
            .await?;
        // An empty page costs a second look: is there a conversation at all?
        if turns.is_empty() && (self.store.head(tenant, conversation).await?).is_none() {
            return Err(Error::NoConversation(conversation.clone()));
        }
        let next = (turns.len() > limit as usize).then(|| turns[limit as usize].id);
        turns.truncate(limit as usize);
        Ok((turns, next))
    }

    /// Newest first, without summaries or per-turn detail: a page of at most `limit`, older
    /// than `before` when given, and the cursor for the next page (`None`: this was the last).
    pub async fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        before: Option<i64>,
        limit: u32,
    ) -> Result<(Vec<CheckpointItem>, Option<i64>)> {
        if (self.store.conversation(tenant, conversation).await?).is_none() {
            return Err(Error::NoConversation(conversation.clone()));
        }
        // One more than asked shows whether another page follows.
        let mut rows = (self.store)
            .checkpoints(tenant, conversation, before, limit.saturating_add(1))
            .await?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next = more.then(|| rows.last().map(|r| r.checkpoint_id)).flatten();
        Ok((rows.into_iter().map(checkpoint_item).collect(), next))
    }

    pub async fn checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> Result<CheckpointRow> {
        (self
            .store
            .checkpoint(tenant, conversation, checkpoint_id)
            .await?)
            .ok_or_else(|| Error::NoCheckpoint {
                conversation: conversation.clone(),
                checkpoint_id,
            })
    }

    /// The conversation's incarnation and latest checkpoint id, which key a cached reconstruct
    /// answer; a missing conversation does not hold `turn`.
    pub async fn head(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<Head> {
        (self.store.head(tenant, conversation).await?).ok_or_else(|| Error::TurnNotInLog {
            conversation: conversation.clone(),
            turn,
        })
    }

    /// Covered: the summary, with where the turn's anchors stand in it. Spanned but not
    /// covered: the raw turn and why. In no checkpoint: the raw turn. An error means only that
    /// the log does not hold the turn, or a fault; never a missing fact.
    pub async fn reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<ReconstructResponse> {
        let row = self.store.reconstruct(tenant, conversation, turn).await?;
        let row = row.ok_or_else(|| Error::TurnNotInLog {
            conversation: conversation.clone(),
            turn,
        })?;
        // Locating anchors costs up to 16 steps a byte of summary and anchors: a few
        // microseconds for most summaries, which a CPU slot's hand-over would cost again; the
        // longer ones go to a CPU slot.
        if evidence_bytes(&row) > INLINE_EVIDENCE_BYTES {
            return self
                .cpu(tenant, CpuWork::Evidence, move || {
                    reconstruct_answer(turn, row)
                })
                .await;
        }
        Ok(reconstruct_answer(turn, row))
    }

    /// Summaries and uncovered turns in turn order.
    /// Summaries and uncovered turns in turn order; with `max_tokens`, within that budget
    /// (the policy is [`context::working_context`]'s), stubs standing for the turns left out.
    pub async fn context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        max_tokens: Option<u64>,
    ) -> Result<ContextResponse> {
        let stored = self.store.context(tenant, conversation).await?;
        if stored.turns.is_empty() {
            return Err(Error::NoConversation(conversation.clone()));
        }
        let tokens = self.tokens.clone();
        let recall_prefix = format!("/v1/conversations/{conversation}/reconstruct/");
        let assembled = self
            .cpu(tenant, CpuWork::Context, move || {
                let count_tokens = |text: &str| tokens.count(text);
                let budget = max_tokens.map(|max_tokens| context::Budget {
                    max_tokens,
                    recall_prefix: &recall_prefix,
                    count_tokens: &count_tokens,
                });
                context::working_context(
                    stored.turns,
                    &stored.spans,
                    &stored.summaries,
                    budget.as_ref(),
                )
            })
            .await?
            .map_err(store::Error::invariant)?;
        let stubs = (assembled.items.iter())
            .filter(|item| matches!(item, ContextItem::Stub { .. }))
            .count();
        metrics::counter!("gatekeeper_context_stubs_total").increment(stubs as u64);
        if assembled.fits == Some(false) {
            metrics::counter!("gatekeeper_context_over_budget_total").increment(1);
            tracing::info!(
                tenant = %tenant,
                conversation = %conversation,
                max_tokens,
                smallest_max_tokens = assembled.smallest_max_tokens,
                "a working context does not fit its budget: the smallest one is answered"
            );
        }
        let total_tokens = (assembled.items.iter())
            .map(|item| u64::from(context::item_tokens(item)))
            .sum();
        Ok(ContextResponse {
            conversation: conversation.to_string(),
            items: assembled.items,
            total_tokens,
            max_tokens,
            fits: assembled.fits,
            smallest_max_tokens: assembled.smallest_max_tokens,
        })
    }

    /// The largest range from `from` (default: after the latest checkpoint) that a summary of
    /// `summary_budget` tokens can cover, what the decision will check for each of its turns,
    /// and the advice.
    pub async fn compaction_plan(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        summary_budget: i64,
        from: Option<i64>,
    ) -> Result<CompactionPlanResponse> {
        let row = (self.store.conversation(tenant, conversation).await?)
            .ok_or_else(|| Error::NoConversation(conversation.clone()))?;
        let from = from.unwrap_or_else(|| row.latest.map_or(0, |l| l.advanced_to + 1));
        if from < 0 || from >= row.next_id {
            return Err(Error::FromNotInLog {
                conversation: conversation.clone(),
                from,
                next_id: row.next_id,
            });
        }
        let counts = self
            .store
            .token_counts_from(tenant, conversation, from)
            .await?;
        let policy = self.policy;
        let reach = plan::reach(from, counts, summary_budget, &policy);
        let facts = match reach.to() {
            Some(to) => {
                self.store
                    .range_facts(tenant, conversation, from, to)
                    .await?
            }
            None => Vec::new(),
        };
        let rejections = Rejections {
            from: row.rejected_from,
            streak: row.rejected_streak,
        };
        let tokens = self.tokens.clone();
        let (plan, turns) = self
            .cpu(tenant, CpuWork::Plan, move || {
                let plan = plan::plan(&reach, &facts, summary_budget, rejections, &policy, |a| {
                    tokens.count(a)
                });
                let planned = plan.to.map_or(0, |to| (to - from + 1) as usize);
                let turns = planned_turns(&facts[..planned.min(facts.len())], &policy);
                (plan, turns)
            })
            .await?;
        metrics::counter!("gatekeeper_compaction_advice_total", "advice" => plan.advice.as_str())
            .increment(1);
        Ok(CompactionPlanResponse {
            from,
            to: plan.to,
            prefix_tokens: plan.prefix_tokens,
            required_budget: plan.required_budget,
            summary_budget,
            anchor_tokens: plan.anchor_tokens,
            advice: plan.advice,
            advice_reason: plan.reason,
            recent_rejections: plan.recent_rejections,
            worthwhile_tokens: plan.worthwhile_tokens,
            budget_for_next_turn: plan.budget_for_next_turn,
            turns,
        })
    }
}

pub(super) fn turn_response(stored: StoredTurn) -> TurnResponse {
    let t = stored.turn;
    TurnResponse {
        id: t.id,
        role: t.role,
        content: t.content,
        tokens: t.tokens,
        anchors: t.anchors,
        anchor_origin: AnchorOrigin::of(t.anchors_given),
        pinned: t.pinned,
        external_id: t.external_id,
        created_at: stored.created_at,
    }
}

fn checkpoint_item(row: CheckpointRow) -> CheckpointItem {
    let v = row.verdict;
    CheckpointItem {
        checkpoint_id: row.checkpoint_id,
        created_at: row.created_at,
        from: v.from,
        to: v.to,
        advanced_to: v.advanced_to.unwrap_or(v.to),
        outcome: v.outcome,
        covered: v.covered,
        uncovered: v.uncovered,
        not_compacted: v.not_compacted,
        summary_tokens: v.summary_tokens,
    }
}

/// Summary and anchor bytes at most located on the async worker that answers.
const INLINE_EVIDENCE_BYTES: usize = 16 * 1024;

/// What locating the turn's anchors would read: the summary and anchors of a checkpoint that
/// covers it (the store reads neither for any other turn).
fn evidence_bytes(row: &ReconstructRow) -> usize {
    let summary = (row.checkpoint.as_ref())
        .and_then(|checkpoint| checkpoint.summary.as_deref())
        .map_or(0, str::len);
    summary + row.deciding_anchors.iter().map(String::len).sum::<usize>()
}

fn reconstruct_answer(turn: i64, row: ReconstructRow) -> ReconstructResponse {
    match row.checkpoint {
        Some(checkpoint) if checkpoint.covered => {
            let summary = checkpoint.summary.unwrap_or_default();
            ReconstructResponse {
                turn,
                source: Source::Summary,
                checkpoint_id: Some(checkpoint.checkpoint_id),
                evidence: locate(&row.deciding_anchors, &summary),
                text: summary,
                role: row.role,
                reason: None,
            }
        }
        Some(checkpoint) => ReconstructResponse {
            turn,
            source: Source::RawLog,
            checkpoint_id: Some(checkpoint.checkpoint_id),
            text: row.content,
            role: row.role,
            reason: checkpoint.reason,
            evidence: Vec::new(),
        },
        None => ReconstructResponse {
            turn,
            source: Source::Live,
            checkpoint_id: None,
            text: row.content,
            role: row.role,
            reason: None,
            evidence: Vec::new(),
        },
    }
}

/// What the decision will check for each turn of the planned range (rules 2, 2b and pins).
fn planned_turns(facts: &[TurnFacts], policy: &Policy) -> Vec<PlannedTurn> {
    let turns: Vec<&TurnFacts> = facts.iter().collect();
    distinctive::checks(&turns, policy)
        .into_iter()
        .zip(&turns)
        .map(|(check, turn)| {
            let unanchored = if turn.pinned {
                Some(Reason::Pinned)
            } else if check.is_empty() {
                Some(Reason::NoAnchors)
            } else {
                None
            };
            PlannedTurn {
                id: turn.id,
                anchors: if turn.pinned {
                    Vec::new()
                } else {
                    check.anchors().map(str::to_owned).collect()
                },
                anchor_origin: AnchorOrigin::of(!check.is_derived()),
                unanchored,
                evidence: check.evidence(),
            }
        })
        .collect()
}

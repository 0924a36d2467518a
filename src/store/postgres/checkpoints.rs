//! Deciding and persisting checkpoints, one conversation at a time.

use super::PgStore;
use super::idempotency::{find_answer, record_answer};
use super::turns::lock_conversation;
use crate::coverage::{IdRanges, Outcome, TurnFacts, Verdict};
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::{encode_candidates_used, stored_facts};
use crate::store::{
    CheckpointRow, IdempotencyClaim, ProposeInput, ProposeResult, decide_loaded, decode_text,
    decode_tokens, parse_role, persists, precheck, verdict_answer,
};
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row, Transaction};

impl PgStore {
    pub(super) async fn decide_and_persist(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        input: ProposeInput,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<ProposeResult, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        // The row lock serializes this decision with appends and other decisions on the
        // conversation, across service processes; dropping `tx` unpersisted rolls back.
        let Some(next_id) = lock_conversation(&mut tx, tenant, conversation).await? else {
            return Ok(ProposeResult::NoConversation);
        };
        // Under the conversation's lock: a retry racing its own first try finds the answer here.
        if let Some(claim) = claim
            && let Some(answer) = find_answer(&mut tx, tenant, &claim.key, claim.not_before).await?
        {
            return Ok(ProposeResult::AlreadyAnswered(answer));
        }
        let (latest, count): (Option<i64>, i64) = sqlx::query_as(
            "SELECT latest_checkpoint, checkpoint_count FROM conversations WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_one(&mut *tx)
        .await?;
        if let Some(early) = precheck(&input, next_id, latest) {
            return Ok(early);
        }
        let turns = turn_facts(
            &mut tx,
            tenant,
            conversation,
            input.proposal.from,
            input.proposal.to,
        )
        .await?;
        let decision = match decide_loaded(&input, turns).await? {
            Ok(decision) => decision,
            Err(invalid) => return Ok(ProposeResult::Invalid(invalid)),
        };
        let verdict = decision.verdict;
        if !persists(&input, &verdict) {
            if verdict.outcome == Outcome::Rejected && !input.dry_run {
                count_rejection(&mut tx, tenant, conversation, verdict.from).await?;
                tx.commit().await?;
            }
            return Ok(ProposeResult::Decided {
                verdict,
                checkpoint_id: None,
            });
        }
        let checkpoint_id = count + 1;
        insert_checkpoint(
            &mut tx,
            tenant,
            conversation,
            checkpoint_id,
            &verdict,
            &encode_candidates_used(&decision.candidates_used),
            &input.proposal.summary,
        )
        .await?;
        if let Some(claim) = claim {
            let answer = verdict_answer(conversation, checkpoint_id, &verdict)?;
            record_answer(&mut tx, tenant, claim, 201, &answer).await?;
        }
        tx.commit().await?;
        Ok(ProposeResult::Decided {
            verdict,
            checkpoint_id: Some(checkpoint_id),
        })
    }

    pub(super) async fn list_checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Vec<CheckpointRow>, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT checkpoint_id, created_at, jsonb_set(verdict, '{turns}', '[]') AS verdict FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 ORDER BY checkpoint_id DESC",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let Json(verdict): Json<Verdict> = row.try_get("verdict")?;
                Ok(CheckpointRow {
                    checkpoint_id: row.try_get("checkpoint_id")?,
                    created_at: row.try_get("created_at")?,
                    summary: None,
                    verdict,
                })
            })
            .collect()
    }

    pub(super) async fn read_checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> Result<Option<CheckpointRow>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT checkpoint_id, created_at, summary, verdict FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 AND checkpoint_id = $3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let Json(verdict): Json<Verdict> = row.try_get("verdict")?;
            Ok(CheckpointRow {
                checkpoint_id: row.try_get("checkpoint_id")?,
                created_at: row.try_get("created_at")?,
                summary: Some(decode_text(row.try_get("summary")?)?),
                verdict,
            })
        })
        .transpose()
    }
}

/// The facts of the turns `[from, to]`, in id order (content only for a turn still without a
/// profile).
pub(in crate::store) async fn turn_facts(
    conn: &mut PgConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    from: i64,
    to: i64,
) -> Result<Vec<TurnFacts>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, role, tokens, anchors, anchors_given, pinned, profile, \
           CASE WHEN profile IS NULL THEN content END AS content FROM turns \
         WHERE tenant = $1 AND conversation = $2 AND id BETWEEN $3 AND $4 ORDER BY id",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
            stored_facts(
                row.try_get("id")?,
                parse_role(row.try_get("role")?)?,
                decode_tokens(row.try_get("tokens")?)?,
                anchors,
                row.try_get("anchors_given")?,
                row.try_get("pinned")?,
                row.try_get("profile")?,
                row.try_get("content")?,
            )
        })
        .collect()
}

/// The churn guard's memory: one more rejection from `from` (a rejection from another `from`
/// starts a new streak).
async fn count_rejection(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &TenantId,
    conversation: &ConversationId,
    from: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE conversations SET \
           rejected_streak = CASE WHEN rejected_from = $3 THEN rejected_streak + 1 ELSE 1 END, \
           rejected_from = $3 \
         WHERE tenant = $1 AND conversation = $2",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(from)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn insert_checkpoint(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &TenantId,
    conversation: &ConversationId,
    checkpoint_id: i64,
    verdict: &Verdict,
    candidates_used: &[u8],
    summary: &str,
) -> Result<(), sqlx::Error> {
    let advanced_to = verdict
        .advanced_to
        .ok_or_else(|| sqlx::Error::Protocol("a persisted verdict always advances".into()))?;
    sqlx::query(
        "INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, advanced_to, outcome, \
           covered, uncovered, not_compacted, summary, summary_tokens, verdict, candidates_used) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, \
           $8::int8multirange, $9::int8multirange, $10::int8multirange, $11, $12, $13, $14)",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(checkpoint_id)
    .bind(verdict.from)
    .bind(verdict.to)
    .bind(advanced_to)
    .bind(verdict.outcome.as_str())
    .bind(multirange(&verdict.covered))
    .bind(multirange(&verdict.uncovered))
    .bind(multirange(&verdict.not_compacted))
    .bind(summary.as_bytes())
    .bind(i64::from(verdict.summary_tokens))
    .bind(Json(verdict))
    .bind(candidates_used)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE conversations SET latest_checkpoint = $3, checkpoint_count = $3, \
           rejected_from = NULL, rejected_streak = 0 \
         WHERE tenant = $1 AND conversation = $2",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(checkpoint_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The text form of an `int8multirange`, `{[1,3],[7,7]}`, cast by the server, rather than arrays
/// folded by the `inclusive_ranges` SQL function (the INSERT's bind fell from 1.3 to 0.75 ms).
fn multirange(set: &IdRanges) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(2 + set.ranges().len() * 12);
    text.push('{');
    for (i, r) in set.ranges().iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        let _ = write!(text, "{comma}[{},{}]", r.start, r.end);
    }
    text.push('}');
    text
}

//! Deciding and persisting checkpoints under SQLite's write lock.

use super::SqliteStore;
use super::idempotency::{find_answer, record_answer};
use crate::coverage::{Outcome, TurnFacts, Verdict};
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::{encode_candidates_used, stored_facts};
use crate::store::{
    CheckpointRow, IdempotencyClaim, ProposeInput, ProposeResult, decide_loaded, decode_json,
    decode_text, decode_tokens, parse_role, persists, precheck, verdict_answer,
};
use sqlx::{Row, SqliteConnection};

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, sqlx::Error> {
    serde_json::to_string(value).map_err(|e| sqlx::Error::Encode(e.into()))
}

impl SqliteStore {
    pub(super) async fn decide_and_persist(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        input: ProposeInput,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<ProposeResult, sqlx::Error> {
        let mut tx = self.begin_write().await?;
        // Under the write lock: a retry racing its own first try finds the answer here.
        if let Some(claim) = claim
            && let Some(answer) = find_answer(&mut tx, tenant, &claim.key, claim.not_before).await?
        {
            return Ok(ProposeResult::AlreadyAnswered(answer));
        }
        let row = sqlx::query(
            "SELECT next_id, latest_checkpoint, checkpoint_count FROM conversations \
             WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(ProposeResult::NoConversation);
        };
        let (next_id, latest, count): (i64, Option<i64>, i64) = (
            row.try_get("next_id")?,
            row.try_get("latest_checkpoint")?,
            row.try_get("checkpoint_count")?,
        );
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
                // The churn guard's memory: one more rejection from `from`.
                sqlx::query(
                    "UPDATE conversations SET \
                       rejected_streak = CASE WHEN rejected_from = ?3 THEN rejected_streak + 1 ELSE 1 END, \
                       rejected_from = ?3 \
                     WHERE tenant = ?1 AND conversation = ?2",
                )
                .bind(tenant.as_str())
                .bind(conversation.as_str())
                .bind(verdict.from)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
            return Ok(ProposeResult::Decided {
                verdict,
                checkpoint_id: None,
            });
        }
        let checkpoint_id = count + 1;
        let advanced_to = verdict
            .advanced_to
            .ok_or_else(|| sqlx::Error::Protocol("a persisted verdict always advances".into()))?;
        sqlx::query(
            "INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, advanced_to, outcome, \
               covered, uncovered, not_compacted, summary, summary_tokens, verdict, candidates_used) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint_id)
        .bind(verdict.from)
        .bind(verdict.to)
        .bind(advanced_to)
        .bind(verdict.outcome.as_str())
        .bind(to_json(&verdict.covered)?)
        .bind(to_json(&verdict.uncovered)?)
        .bind(to_json(&verdict.not_compacted)?)
        .bind(input.proposal.summary.as_bytes())
        .bind(i64::from(verdict.summary_tokens))
        .bind(to_json(&verdict)?)
        .bind(encode_candidates_used(&decision.candidates_used))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE conversations SET latest_checkpoint = ?3, checkpoint_count = ?3, \
               rejected_from = NULL, rejected_streak = 0 \
             WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint_id)
        .execute(&mut *tx)
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
            "SELECT checkpoint_id, created_at, json_set(verdict, '$.turns', json('[]')) AS verdict FROM checkpoints \
             WHERE tenant = ?1 AND conversation = ?2 ORDER BY checkpoint_id DESC",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(CheckpointRow {
                    checkpoint_id: row.try_get("checkpoint_id")?,
                    created_at: row.try_get("created_at")?,
                    summary: None,
                    verdict: decode_json(row.try_get("verdict")?)?,
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
             WHERE tenant = ?1 AND conversation = ?2 AND checkpoint_id = ?3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let verdict: Verdict = decode_json(row.try_get("verdict")?)?;
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
    conn: &mut SqliteConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    from: i64,
    to: i64,
) -> Result<Vec<TurnFacts>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, role, tokens, anchors, anchors_given, pinned, profile, \
           CASE WHEN profile IS NULL THEN content END AS content FROM turns \
         WHERE tenant = ?1 AND conversation = ?2 AND id BETWEEN ?3 AND ?4 ORDER BY id",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            stored_facts(
                row.try_get("id")?,
                parse_role(row.try_get("role")?)?,
                decode_tokens(row.try_get("tokens")?)?,
                decode_json(row.try_get("anchors")?)?,
                row.try_get("anchors_given")?,
                row.try_get("pinned")?,
                row.try_get("profile")?,
                row.try_get("content")?,
            )
        })
        .collect()
}

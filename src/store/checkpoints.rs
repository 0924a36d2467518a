//! Deciding and persisting checkpoints, one conversation at a time.

use super::turns::lock_conversation;
use super::{Store, decode_text, decode_tokens, parse_role};
use crate::coverage::{IdRanges, Outcome, TurnFacts, Verdict};
use crate::domain::{ConversationId, TenantId};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{Postgres, Row, Transaction};

/// An open decision: the conversation's row is locked until it commits or drops.
pub struct DecisionTx<'a> {
    tx: Transaction<'static, Postgres>,
    tenant: &'a TenantId,
    conversation: &'a ConversationId,
    pub next_id: i64,
    pub latest_checkpoint: Option<i64>,
    checkpoint_count: i64,
}

#[derive(Debug, Clone)]
pub struct CheckpointRow {
    pub checkpoint_id: i64,
    pub created_at: DateTime<Utc>,
    pub summary: Option<String>,
    pub verdict: Verdict,
}

impl Store {
    /// Starts a decision on a conversation, or `None` if the conversation does not exist.
    pub async fn begin_decision<'a>(
        &self,
        tenant: &'a TenantId,
        conversation: &'a ConversationId,
    ) -> Result<Option<DecisionTx<'a>>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let Some(next_id) = lock_conversation(&mut tx, tenant, conversation).await? else {
            return Ok(None);
        };
        let (latest_checkpoint, checkpoint_count): (Option<i64>, i64) = sqlx::query_as(
            "SELECT latest_checkpoint, checkpoint_count FROM conversations WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_one(&mut *tx)
        .await?;
        Ok(Some(DecisionTx {
            tx,
            tenant,
            conversation,
            next_id,
            latest_checkpoint,
            checkpoint_count,
        }))
    }

    pub async fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Vec<CheckpointRow>, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT checkpoint_id, created_at, verdict - 'turns' AS verdict FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 ORDER BY checkpoint_id DESC",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let Json(mut verdict): Json<serde_json::Value> = row.try_get("verdict")?;
                verdict["turns"] = serde_json::json!([]);
                Ok(CheckpointRow {
                    checkpoint_id: row.try_get("checkpoint_id")?,
                    created_at: row.try_get("created_at")?,
                    summary: None,
                    verdict: serde_json::from_value(verdict)
                        .map_err(|e| sqlx::Error::Decode(e.into()))?,
                })
            })
            .collect()
    }

    pub async fn checkpoint(
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

impl DecisionTx<'_> {
    /// The facts of the turns `[from, to]`, in id order.
    pub async fn turn_facts(&mut self, from: i64, to: i64) -> Result<Vec<TurnFacts>, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT id, role, tokens, anchors FROM turns \
             WHERE tenant = $1 AND conversation = $2 AND id BETWEEN $3 AND $4 ORDER BY id",
        )
        .bind(self.tenant.as_str())
        .bind(self.conversation.as_str())
        .bind(from)
        .bind(to)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter()
            .map(|row| {
                let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
                Ok(TurnFacts {
                    id: row.try_get("id")?,
                    role: parse_role(row.try_get("role")?)?,
                    tokens: decode_tokens(row.try_get("tokens")?)?,
                    anchors,
                })
            })
            .collect()
    }

    /// Persists an accepted, narrowed or partial verdict as the next checkpoint and commits.
    pub async fn persist(mut self, verdict: &Verdict, summary: &str) -> Result<i64, sqlx::Error> {
        debug_assert!(
            verdict.outcome != Outcome::Rejected,
            "rejected verdicts are never persisted"
        );
        let checkpoint_id = self.checkpoint_count + 1;
        let advanced_to = verdict
            .advanced_to
            .ok_or_else(|| sqlx::Error::Protocol("a persisted verdict always advances".into()))?;
        sqlx::query(
            "INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, advanced_to, outcome, \
               covered, uncovered, not_compacted, summary, summary_tokens, verdict) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, \
               inclusive_ranges($8::int8[], $9::int8[]), inclusive_ranges($10::int8[], $11::int8[]), inclusive_ranges($12::int8[], $13::int8[]), \
               $14, $15, $16)",
        )
        .bind(self.tenant.as_str())
        .bind(self.conversation.as_str())
        .bind(checkpoint_id)
        .bind(verdict.from)
        .bind(verdict.to)
        .bind(advanced_to)
        .bind(verdict.outcome.as_str())
        .bind(starts(&verdict.covered))
        .bind(ends(&verdict.covered))
        .bind(starts(&verdict.uncovered))
        .bind(ends(&verdict.uncovered))
        .bind(starts(&verdict.not_compacted))
        .bind(ends(&verdict.not_compacted))
        .bind(summary.as_bytes())
        .bind(i64::from(verdict.summary_tokens))
        .bind(Json(verdict))
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            "UPDATE conversations SET latest_checkpoint = $3, checkpoint_count = $3 \
             WHERE tenant = $1 AND conversation = $2",
        )
        .bind(self.tenant.as_str())
        .bind(self.conversation.as_str())
        .bind(checkpoint_id)
        .execute(&mut *self.tx)
        .await?;
        self.tx.commit().await?;
        Ok(checkpoint_id)
    }
}

fn starts(set: &IdRanges) -> Vec<i64> {
    set.ranges().iter().map(|r| r.start).collect()
}

fn ends(set: &IdRanges) -> Vec<i64> {
    set.ranges().iter().map(|r| r.end).collect()
}

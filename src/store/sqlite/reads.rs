//! The read paths behind reconstruct, context and the compaction plan.

use super::SqliteStore;
use crate::coverage::{IdRanges, Reason, Role};
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::deciding_anchors;
use crate::store::{
    ContextCheckpoint, ContextTurn, ReconstructRow, SpanningCheckpoint, decode_json, decode_text,
    decode_tokens, parse_role,
};
use sqlx::Row;

impl SqliteStore {
    pub(super) async fn read_for_reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<Option<ReconstructRow>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT t.role, t.content, t.anchors, t.anchors_given, k.checkpoint_id, k.covered \
             FROM turns t LEFT JOIN checkpoints k ON k.tenant = t.tenant AND k.conversation = t.conversation \
               AND k.checkpoint_id = ( \
                 SELECT max(c.checkpoint_id) FROM checkpoints c \
                 WHERE c.tenant = t.tenant AND c.conversation = t.conversation \
                   AND c.from_id <= t.id AND t.id <= c.advanced_to) \
             WHERE t.tenant = ?1 AND t.conversation = ?2 AND t.id = ?3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(turn)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        // A covered turn's profile and the checkpoint's candidates used for it.
        type Deciding = (Option<Vec<u8>>, Option<Vec<u8>>);
        let mut deciding: Option<Deciding> = None;
        let checkpoint = match row.try_get::<Option<i64>, _>("checkpoint_id")? {
            None => None,
            Some(checkpoint_id) => {
                let covered: IdRanges = decode_json(row.try_get("covered")?)?;
                // Checkpoints never change once written, so these follow-up reads agree with
                // the first one.
                let mut spanning = SpanningCheckpoint {
                    checkpoint_id,
                    covered: covered.contains(turn),
                    summary: None,
                    reason: None,
                };
                if spanning.covered {
                    let covering = sqlx::query(
                        "SELECT k.summary, substr(k.candidates_used, 2 * (t.id - k.from_id) + 1, 2) AS used, \
                           CASE WHEN t.anchors_given = 0 THEN t.profile END AS profile \
                         FROM checkpoints k JOIN turns t ON t.tenant = k.tenant AND t.conversation = k.conversation \
                         WHERE k.tenant = ?1 AND k.conversation = ?2 AND k.checkpoint_id = ?3 AND t.id = ?4",
                    )
                    .bind(tenant.as_str())
                    .bind(conversation.as_str())
                    .bind(checkpoint_id)
                    .bind(turn)
                    .fetch_one(&self.pool)
                    .await?;
                    spanning.summary = Some(decode_text(covering.try_get("summary")?)?);
                    deciding = Some((covering.try_get("profile")?, covering.try_get("used")?));
                } else {
                    let reason: Option<String> = sqlx::query_scalar(
                        "SELECT json_extract(j.value, '$.reason') FROM checkpoints k, json_each(k.verdict, '$.turns') j \
                         WHERE k.tenant = ?1 AND k.conversation = ?2 AND k.checkpoint_id = ?3 \
                           AND json_extract(j.value, '$.id') = ?4",
                    )
                    .bind(tenant.as_str())
                    .bind(conversation.as_str())
                    .bind(checkpoint_id)
                    .bind(turn)
                    .fetch_optional(&self.pool)
                    .await?;
                    spanning.reason = reason
                        .map(|r| decode_json::<Reason>(&format!("\"{r}\"")))
                        .transpose()?;
                }
                Some(spanning)
            }
        };
        Ok(Some(ReconstructRow {
            role: parse_role(row.try_get("role")?)?,
            content: decode_text(row.try_get("content")?)?,
            deciding_anchors: match deciding {
                Some((profile, used)) => deciding_anchors(
                    decode_json(row.try_get("anchors")?)?,
                    row.try_get("anchors_given")?,
                    profile,
                    used,
                )?,
                None => Vec::new(),
            },
            checkpoint,
        }))
    }

    pub(super) async fn read_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<(Vec<ContextTurn>, Vec<ContextCheckpoint>), sqlx::Error> {
        // One read transaction: in WAL mode both reads see the same snapshot.
        let mut tx = self.pool.begin().await?;
        let turns = sqlx::query("SELECT id, role, content, tokens FROM turns WHERE tenant = ?1 AND conversation = ?2 ORDER BY id")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|row| {
                Ok(ContextTurn {
                    id: row.try_get("id")?,
                    role: parse_role(row.try_get("role")?)?,
                    content: decode_text(row.try_get("content")?)?,
                    tokens: decode_tokens(row.try_get("tokens")?)?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let checkpoints = sqlx::query(
            "SELECT checkpoint_id, from_id, advanced_to, covered, summary, summary_tokens \
             FROM checkpoints WHERE tenant = ?1 AND conversation = ?2 ORDER BY checkpoint_id",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| {
            Ok(ContextCheckpoint {
                checkpoint_id: row.try_get("checkpoint_id")?,
                from: row.try_get("from_id")?,
                advanced_to: row.try_get("advanced_to")?,
                covered: decode_json(row.try_get("covered")?)?,
                summary: decode_text(row.try_get("summary")?)?,
                summary_tokens: decode_tokens(row.try_get("summary_tokens")?)?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
        tx.commit().await?;
        Ok((turns, checkpoints))
    }

    pub(super) async fn read_token_counts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> Result<Vec<(i64, Role, u32)>, sqlx::Error> {
        sqlx::query("SELECT id, role, tokens FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id >= ?3 ORDER BY id")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(from)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| Ok((row.try_get("id")?, parse_role(row.try_get("role")?)?, decode_tokens(row.try_get("tokens")?)?)))
            .collect()
    }
}

//! The read paths behind reconstruct, context and the compaction plan.

use super::PgStore;
use crate::coverage::{IdRanges, Reason, Role};
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::deciding_anchors;
use crate::store::{
    ContextCheckpoint, ContextTurn, ReconstructRow, SpanningCheckpoint, decode_text, decode_tokens,
    parse_role,
};
use sqlx::Row;
use sqlx::types::Json;

impl PgStore {
    /// One round trip: the turn, its deciding checkpoint, and the summary only when it covers.
    pub(super) async fn read_for_reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<Option<ReconstructRow>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT t.role, t.content, t.anchors, t.anchors_given, c.checkpoint_id, c.covered_turn, \
               CASE WHEN c.covered_turn THEN c.summary END AS summary, \
               CASE WHEN c.covered_turn AND t.anchors_given = false THEN t.profile END AS profile, \
               CASE WHEN c.covered_turn THEN \
                 substring(c.candidates_used from (2 * (t.id - c.from_id) + 1)::int for 2) \
               END AS used, \
               CASE WHEN NOT c.covered_turn THEN \
                 jsonb_path_query_first(c.verdict, '$.turns[*] ? (@.id == $id).reason', jsonb_build_object('id', t.id)) \
               END AS reason \
             FROM turns t \
             LEFT JOIN LATERAL ( \
               SELECT k.checkpoint_id, k.covered @> t.id AS covered_turn, k.summary, k.verdict, \
                 k.from_id, k.candidates_used \
               FROM checkpoints k \
               WHERE k.tenant = t.tenant AND k.conversation = t.conversation \
                 AND k.from_id <= t.id AND t.id <= k.advanced_to \
               ORDER BY k.checkpoint_id DESC LIMIT 1 \
             ) c ON true \
             WHERE t.tenant = $1 AND t.conversation = $2 AND t.id = $3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(turn)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
        let deciding_anchors = deciding_anchors(
            anchors,
            row.try_get("anchors_given")?,
            row.try_get("profile")?,
            row.try_get("used")?,
        )?;
        let checkpoint = match row.try_get::<Option<i64>, _>("checkpoint_id")? {
            None => None,
            Some(checkpoint_id) => {
                let summary: Option<Vec<u8>> = row.try_get("summary")?;
                let reason: Option<Json<Reason>> = row.try_get("reason")?;
                Some(SpanningCheckpoint {
                    checkpoint_id,
                    covered: row.try_get("covered_turn")?,
                    summary: summary.map(decode_text).transpose()?,
                    reason: reason.map(|Json(r)| r),
                })
            }
        };
        Ok(Some(ReconstructRow {
            role: parse_role(row.try_get("role")?)?,
            content: decode_text(row.try_get("content")?)?,
            deciding_anchors,
            checkpoint,
        }))
    }

    /// Every turn and checkpoint of a conversation, both in id order.
    pub(super) async fn read_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<(Vec<ContextTurn>, Vec<ContextCheckpoint>), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        // One snapshot for both reads, so a checkpoint never refers to turns this read misses.
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *tx)
            .await?;
        let turns = sqlx::query(
            "SELECT id, role, content, tokens FROM turns WHERE tenant = $1 AND conversation = $2 ORDER BY id",
        )
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
            "SELECT checkpoint_id, from_id, advanced_to, verdict -> 'covered' AS covered, summary, summary_tokens \
             FROM checkpoints WHERE tenant = $1 AND conversation = $2 ORDER BY checkpoint_id",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| {
            let Json(covered): Json<IdRanges> = row.try_get("covered")?;
            Ok(ContextCheckpoint {
                checkpoint_id: row.try_get("checkpoint_id")?,
                from: row.try_get("from_id")?,
                advanced_to: row.try_get("advanced_to")?,
                covered,
                summary: decode_text(row.try_get("summary")?)?,
                summary_tokens: decode_tokens(row.try_get("summary_tokens")?)?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
        tx.commit().await?;
        Ok((turns, checkpoints))
    }

    /// Role and tokens of every turn from `from` on, in id order.
    pub(super) async fn read_token_counts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> Result<Vec<(i64, Role, u32)>, sqlx::Error> {
        sqlx::query("SELECT id, role, tokens FROM turns WHERE tenant = $1 AND conversation = $2 AND id >= $3 ORDER BY id")
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

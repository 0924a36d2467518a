//! Appending to and reading from the raw turn log.

use super::PgStore;
use super::idempotency::{find_answer, record_answer};
use crate::append::{LoggedTurn, PreparedTurn, plan_append};
use crate::domain::{ConversationId, TenantId};
use crate::store::{
    AppendResult, ConversationRow, IdempotencyClaim, LatestCheckpoint, StoredTurn, append_answer,
    decode_text, decode_tokens, parse_outcome, parse_role,
};
use sqlx::types::Json;
use sqlx::{Postgres, Row, Transaction};

impl PgStore {
    /// Appends a batch in one transaction, all or nothing, serialized per conversation.
    pub(super) async fn append_batch(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: Vec<PreparedTurn>,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<AppendResult, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO conversations (tenant, conversation) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .execute(&mut *tx)
            .await?;
        let next_id: i64 = lock_conversation(&mut tx, tenant, conversation)
            .await?
            .ok_or_else(|| {
                sqlx::Error::Protocol("the conversation row vanished inside its transaction".into())
            })?;
        // Under the conversation's lock: a retry racing its own first try finds the answer here.
        if let Some(claim) = claim
            && let Some(answer) = find_answer(&mut tx, tenant, &claim.key, claim.not_before).await?
        {
            return Ok(AppendResult::AlreadyAnswered(answer));
        }
        let named: Vec<i64> = batch
            .iter()
            .filter_map(|t| t.id)
            .filter(|&id| id < next_id)
            .collect();
        let stored = if named.is_empty() {
            Vec::new()
        } else {
            load_turns(&mut tx, tenant, conversation, &named).await?
        };
        let plan = match plan_append(next_id, batch, &stored) {
            Ok(plan) => plan,
            Err(conflict) => return Ok(AppendResult::Conflict(conflict)),
        };
        if !plan.new.is_empty() {
            for chunk in in_chunks(&plan.new) {
                insert_turns(&mut tx, tenant, conversation, chunk).await?;
            }
            let added: i64 = plan.new.iter().map(|t| i64::from(t.tokens)).sum();
            sqlx::query(
                "UPDATE conversations SET next_id = $3, total_tokens = total_tokens + $4 \
                 WHERE tenant = $1 AND conversation = $2",
            )
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(plan.next_id)
            .bind(added)
            .execute(&mut *tx)
            .await?;
            if let Some(claim) = claim {
                record_answer(
                    &mut tx,
                    tenant,
                    claim,
                    201,
                    &append_answer(conversation, &plan)?,
                )
                .await?;
            }
        }
        tx.commit().await?;
        Ok(AppendResult::Done(plan))
    }

    pub(super) async fn read_turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
    ) -> Result<Option<StoredTurn>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT id, role, content, tokens, anchors, external_id, created_at FROM turns \
             WHERE tenant = $1 AND conversation = $2 AND id = $3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(StoredTurn {
                created_at: row.try_get("created_at")?,
                turn: logged_turn(&row)?,
            })
        })
        .transpose()
    }

    pub(super) async fn read_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<ConversationRow>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT c.next_id, c.total_tokens, c.checkpoint_count, k.checkpoint_id, k.from_id, k.advanced_to, k.outcome \
             FROM conversations c LEFT JOIN checkpoints k ON k.tenant = c.tenant \
               AND k.conversation = c.conversation AND k.checkpoint_id = c.latest_checkpoint \
             WHERE c.tenant = $1 AND c.conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let latest = match row.try_get::<Option<i64>, _>("checkpoint_id")? {
                Some(checkpoint_id) => Some(LatestCheckpoint {
                    checkpoint_id,
                    from: row.try_get("from_id")?,
                    advanced_to: row.try_get("advanced_to")?,
                    outcome: parse_outcome(row.try_get("outcome")?)?,
                }),
                None => None,
            };
            Ok(ConversationRow {
                next_id: row.try_get("next_id")?,
                total_tokens: row.try_get("total_tokens")?,
                checkpoint_count: row.try_get("checkpoint_count")?,
                latest,
            })
        })
        .transpose()
    }
}

/// Locks the conversation's row for the rest of the transaction: appends and decisions on one
/// conversation queue here, across service processes. Returns its next id, if it exists.
pub(super) async fn lock_conversation(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT next_id FROM conversations WHERE tenant = $1 AND conversation = $2 FOR UPDATE",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .fetch_optional(&mut **tx)
    .await
}

async fn load_turns(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &TenantId,
    conversation: &ConversationId,
    ids: &[i64],
) -> Result<Vec<LoggedTurn>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, role, content, tokens, anchors, external_id FROM turns \
         WHERE tenant = $1 AND conversation = $2 AND id = ANY($3)",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(logged_turn).collect()
}

/// Content per INSERT, about. A connection keeps its largest message's buffer for as long as it
/// lives, so one INSERT for a 10,000-turn batch left every pooled connection holding ~9 MB
/// (heaptrack); chunks of this size bound that, for a round trip per 256 KiB (1 MiB chunks left
/// 7 MiB more RSS after six such batches).
const INSERT_CHUNK_BYTES: usize = 256 << 10;

/// `turns` cut into runs of about [`INSERT_CHUNK_BYTES`] of content (a longer turn alone).
fn in_chunks(turns: &[LoggedTurn]) -> impl Iterator<Item = &[LoggedTurn]> {
    let mut rest = turns;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let len = rest
            .iter()
            .position(|t| {
                bytes += t.content.len();
                bytes > INSERT_CHUNK_BYTES
            })
            .map_or(rest.len(), |i| i.max(1));
        let (chunk, tail) = rest.split_at(len);
        rest = tail;
        Some(chunk)
    })
}

async fn insert_turns(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &TenantId,
    conversation: &ConversationId,
    turns: &[LoggedTurn],
) -> Result<(), sqlx::Error> {
    // One multi-row INSERT over UNNEST: a round trip per chunk, not per turn.
    let ids: Vec<i64> = turns.iter().map(|t| t.id).collect();
    let roles: Vec<&str> = turns.iter().map(|t| t.role.as_str()).collect();
    let contents: Vec<&[u8]> = turns.iter().map(|t| t.content.as_bytes()).collect();
    let tokens: Vec<i64> = turns.iter().map(|t| i64::from(t.tokens)).collect();
    let anchors: Vec<Json<&Vec<String>>> = turns.iter().map(|t| Json(&t.anchors)).collect();
    let external_ids: Vec<Option<&str>> = turns.iter().map(|t| t.external_id.as_deref()).collect();
    sqlx::query(
        "INSERT INTO turns (tenant, conversation, id, role, content, tokens, anchors, external_id) \
         SELECT $1, $2, u.id, u.role, u.content, u.tokens, u.anchors, u.external_id \
         FROM UNNEST($3::int8[], $4::text[], $5::bytea[], $6::int8[], $7::jsonb[], $8::text[]) \
           AS u(id, role, content, tokens, anchors, external_id)",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(ids)
    .bind(roles)
    .bind(contents)
    .bind(tokens)
    .bind(anchors)
    .bind(external_ids)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn logged_turn(row: &sqlx::postgres::PgRow) -> Result<LoggedTurn, sqlx::Error> {
    let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
    Ok(LoggedTurn {
        id: row.try_get("id")?,
        role: parse_role(row.try_get("role")?)?,
        content: decode_text(row.try_get("content")?)?,
        tokens: decode_tokens(row.try_get("tokens")?)?,
        anchors,
        external_id: row.try_get("external_id")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::Role;

    fn turns(sizes: &[usize]) -> Vec<LoggedTurn> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| LoggedTurn {
                id: i as i64,
                role: Role::User,
                content: "x".repeat(size),
                tokens: 1,
                anchors: vec![],
                external_id: None,
            })
            .collect()
    }

    fn chunk_ids(turns: &[LoggedTurn]) -> Vec<Vec<i64>> {
        in_chunks(turns)
            .map(|c| c.iter().map(|t| t.id).collect())
            .collect()
    }

    #[test]
    fn chunks_hold_every_turn_once_in_order_and_about_a_chunk_of_content_each() {
        let half = INSERT_CHUNK_BYTES / 2;
        assert_eq!(chunk_ids(&turns(&[])), Vec::<Vec<i64>>::new());
        assert_eq!(chunk_ids(&turns(&[10, 10, 10])), vec![vec![0, 1, 2]]);
        assert_eq!(
            chunk_ids(&turns(&[half, half, half, half, 1])),
            vec![vec![0, 1], vec![2, 3], vec![4]]
        );
        // A turn larger than a chunk goes alone.
        assert_eq!(
            chunk_ids(&turns(&[10, 3 * INSERT_CHUNK_BYTES, 10])),
            vec![vec![0], vec![1], vec![2]]
        );
    }
}

//! Appending to and reading from the raw turn log.

use super::PgStore;
use super::idempotency::{find_answer, record_answer};
use crate::append::{LoggedTurn, PreparedTurn, plan_append};
use crate::coverage::TermProfile;
use crate::coverage::terms::TermKey;
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::{term_column, term_from_column};
use crate::store::{
    AppendResult, ConversationRow, IdempotencyClaim, LatestCheckpoint, PinResult, StoredTurn,
    append_answer, decode_text, decode_tokens, parse_outcome, parse_role,
};
use foldhash::HashMap;
use sqlx::types::Json;
use sqlx::{Postgres, Row, Transaction};

impl PgStore {
    /// Appends a batch in one transaction, all or nothing, serialized per conversation.
    pub(super) async fn append_batch(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: Vec<PreparedTurn>,
        anchor_count: usize,
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
        let keys = plan.candidate_keys();
        let seen = if keys.is_empty() {
            HashMap::default()
        } else {
            term_counts(&mut tx, tenant, conversation, &keys).await?
        };
        let plan = plan.rank(&seen, anchor_count);
        if !plan.new.is_empty() {
            for chunk in in_chunks(&plan.new) {
                insert_turns(&mut tx, tenant, conversation, chunk).await?;
            }
            add_term_counts(&mut tx, tenant, conversation, &plan.counts_added).await?;
            let added: i64 = plan.new.iter().map(|(t, _)| i64::from(t.tokens)).sum();
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
            "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id, created_at \
             FROM turns WHERE tenant = $1 AND conversation = $2 AND id = $3",
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
            "SELECT c.next_id, c.total_tokens, c.checkpoint_count, c.rejected_from, c.rejected_streak, \
               k.checkpoint_id, k.from_id, k.advanced_to, k.outcome \
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
                rejected_from: row.try_get("rejected_from")?,
                rejected_streak: u32::try_from(row.try_get::<i32, _>("rejected_streak")?)
                    .map_err(|e| sqlx::Error::Decode(e.into()))?,
            })
        })
        .transpose()
    }
}

impl PgStore {
    /// Pins or unpins a turn under the conversation's lock, so no decision is half-way through
    /// it; a turn a checkpoint covers cannot be pinned (its summary already stands for it).
    pub(super) async fn write_pinned(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
        pinned: bool,
    ) -> Result<PinResult, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        if lock_conversation(&mut tx, tenant, conversation)
            .await?
            .is_none()
        {
            return Ok(PinResult::NotInLog);
        }
        if pinned {
            // The checkpoint that decides the turn, if any, and whether it covers it.
            let decider: Option<(i64, bool)> = sqlx::query_as(
                "SELECT checkpoint_id, covered @> $3::int8 FROM checkpoints \
                 WHERE tenant = $1 AND conversation = $2 AND from_id <= $3 AND $3 <= advanced_to \
                 ORDER BY checkpoint_id DESC LIMIT 1",
            )
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some((checkpoint_id, true)) = decider {
                return Ok(PinResult::Covered { checkpoint_id });
            }
        }
        let row = sqlx::query(
            "UPDATE turns SET pinned = $4 WHERE tenant = $1 AND conversation = $2 AND id = $3 \
             RETURNING id, role, content, tokens, anchors, anchors_given, pinned, external_id, created_at",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(id)
        .bind(pinned)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            return Ok(PinResult::NotInLog);
        };
        let turn = StoredTurn {
            created_at: row.try_get("created_at")?,
            turn: logged_turn(&row)?,
        };
        tx.commit().await?;
        Ok(PinResult::Done(turn))
    }
}

/// How many earlier turns of the conversation kept each of `keys` as a candidate.
async fn term_counts(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &TenantId,
    conversation: &ConversationId,
    keys: &[TermKey],
) -> Result<HashMap<TermKey, u32>, sqlx::Error> {
    let terms: Vec<i32> = keys.iter().map(|&k| term_column(k)).collect();
    let rows: Vec<(i32, i32)> = sqlx::query_as(
        "SELECT term, turns FROM term_counts WHERE tenant = $1 AND conversation = $2 AND term = ANY($3)",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(terms)
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(term, turns)| (term_from_column(term), turns.max(0) as u32))
        .collect())
}

pub(super) async fn add_term_counts(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &TenantId,
    conversation: &ConversationId,
    added: &HashMap<TermKey, u32>,
) -> Result<(), sqlx::Error> {
    if added.is_empty() {
        return Ok(());
    }
    let (terms, turns): (Vec<i32>, Vec<i32>) = added
        .iter()
        .map(|(&k, &n)| (term_column(k), i32::try_from(n).unwrap_or(i32::MAX)))
        .unzip();
    sqlx::query(
        "INSERT INTO term_counts (tenant, conversation, term, turns) \
         SELECT $1, $2, u.term, u.turns FROM UNNEST($3::int4[], $4::int4[]) AS u(term, turns) \
         ON CONFLICT (tenant, conversation, term) DO UPDATE SET turns = term_counts.turns + EXCLUDED.turns",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(terms)
    .bind(turns)
    .execute(&mut **tx)
    .await?;
    Ok(())
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
        "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id FROM turns \
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
fn in_chunks(
    turns: &[(LoggedTurn, TermProfile)],
) -> impl Iterator<Item = &[(LoggedTurn, TermProfile)]> {
    let mut rest = turns;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let len = rest
            .iter()
            .position(|(t, _)| {
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
    turns: &[(LoggedTurn, TermProfile)],
) -> Result<(), sqlx::Error> {
    // One multi-row INSERT over UNNEST: a round trip per chunk, not per turn.
    let ids: Vec<i64> = turns.iter().map(|(t, _)| t.id).collect();
    let roles: Vec<&str> = turns.iter().map(|(t, _)| t.role.as_str()).collect();
    let contents: Vec<&[u8]> = turns.iter().map(|(t, _)| t.content.as_bytes()).collect();
    let tokens: Vec<i64> = turns.iter().map(|(t, _)| i64::from(t.tokens)).collect();
    let anchors: Vec<Json<&Vec<String>>> = turns.iter().map(|(t, _)| Json(&t.anchors)).collect();
    let given: Vec<bool> = turns.iter().map(|(t, _)| t.anchors_given).collect();
    let pinned: Vec<bool> = turns.iter().map(|(t, _)| t.pinned).collect();
    let profiles: Vec<Vec<u8>> = turns.iter().map(|(_, p)| p.to_bytes()).collect();
    let external_ids: Vec<Option<&str>> = turns
        .iter()
        .map(|(t, _)| t.external_id.as_deref())
        .collect();
    sqlx::query(
        "INSERT INTO turns (tenant, conversation, id, role, content, tokens, anchors, anchors_given, \
           pinned, profile, external_id) \
         SELECT $1, $2, u.id, u.role, u.content, u.tokens, u.anchors, u.given, u.pinned, u.profile, u.external_id \
         FROM UNNEST($3::int8[], $4::text[], $5::bytea[], $6::int8[], $7::jsonb[], $8::bool[], $9::bool[], \
           $10::bytea[], $11::text[]) \
           AS u(id, role, content, tokens, anchors, given, pinned, profile, external_id)",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(ids)
    .bind(roles)
    .bind(contents)
    .bind(tokens)
    .bind(anchors)
    .bind(given)
    .bind(pinned)
    .bind(profiles)
    .bind(external_ids)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) fn logged_turn(row: &sqlx::postgres::PgRow) -> Result<LoggedTurn, sqlx::Error> {
    let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
    Ok(LoggedTurn {
        id: row.try_get("id")?,
        role: parse_role(row.try_get("role")?)?,
        content: decode_text(row.try_get("content")?)?,
        tokens: decode_tokens(row.try_get("tokens")?)?,
        anchors,
        // Turns stored before rule 2b read as given until the backfill classifies them.
        anchors_given: row
            .try_get::<Option<bool>, _>("anchors_given")?
            .unwrap_or(true),
        external_id: row.try_get("external_id")?,
        pinned: row.try_get("pinned")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::Role;

    fn turns(sizes: &[usize]) -> Vec<(LoggedTurn, TermProfile)> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let turn = LoggedTurn {
                    id: i as i64,
                    role: Role::User,
                    content: "x".repeat(size),
                    tokens: 1,
                    anchors: vec![],
                    anchors_given: false,
                    external_id: None,
                    pinned: false,
                };
                (turn, TermProfile::default())
            })
            .collect()
    }

    fn chunk_ids(turns: &[(LoggedTurn, TermProfile)]) -> Vec<Vec<i64>> {
        in_chunks(turns)
            .map(|c| c.iter().map(|(t, _)| t.id).collect())
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

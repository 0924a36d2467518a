//! Appending to and reading from the raw turn log.

use super::SqliteStore;
use super::idempotency::{find_answer, record_answer};
use crate::append::{LoggedTurn, PreparedTurn, plan_append};
use crate::coverage::terms::TermKey;
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::{term_column, term_from_column};
use crate::store::{
    AppendResult, ConversationRow, IdempotencyClaim, LatestCheckpoint, PinResult, StoredTurn,
    append_answer, decode_json, decode_text, decode_tokens, parse_outcome, parse_role,
};
use foldhash::HashMap;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, Transaction};

impl SqliteStore {
    pub(super) async fn append_batch(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: Vec<PreparedTurn>,
        anchor_count: usize,
        claim: Option<&IdempotencyClaim>,
    ) -> Result<AppendResult, sqlx::Error> {
        let mut tx = self.begin_write().await?;
        // Under the write lock: a retry racing its own first try finds the answer here.
        if let Some(claim) = claim
            && let Some(answer) = find_answer(&mut tx, tenant, &claim.key, claim.not_before).await?
        {
            return Ok(AppendResult::AlreadyAnswered(answer));
        }
        sqlx::query("INSERT INTO conversations (tenant, conversation) VALUES (?1, ?2) ON CONFLICT DO NOTHING")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .execute(&mut *tx)
            .await?;
        let next_id: i64 = sqlx::query_scalar(
            "SELECT next_id FROM conversations WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_one(&mut *tx)
        .await?;
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
            for (t, profile) in &plan.new {
                sqlx::query(
                    "INSERT INTO turns (tenant, conversation, id, role, content, tokens, anchors, \
                       anchors_given, pinned, profile, external_id) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .bind(tenant.as_str())
                .bind(conversation.as_str())
                .bind(t.id)
                .bind(t.role.as_str())
                .bind(t.content.as_bytes())
                .bind(i64::from(t.tokens))
                .bind(serde_json::to_string(&t.anchors).map_err(|e| sqlx::Error::Encode(e.into()))?)
                .bind(t.anchors_given)
                .bind(t.pinned)
                .bind(profile.to_bytes())
                .bind(t.external_id.as_deref())
                .execute(&mut *tx)
                .await?;
            }
            add_term_counts(&mut tx, tenant, conversation, &plan.counts_added).await?;
            let added: i64 = plan.new.iter().map(|(t, _)| i64::from(t.tokens)).sum();
            sqlx::query(
                "UPDATE conversations SET next_id = ?3, total_tokens = total_tokens + ?4 \
                 WHERE tenant = ?1 AND conversation = ?2",
            )
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(plan.next_id)
            .bind(added)
            .execute(&mut *tx)
            .await?;
            if let Some(claim) = claim {
                let answer = append_answer(conversation, &plan)?;
                record_answer(&mut tx, tenant, claim, 201, &answer).await?;
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
             FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id = ?3",
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
             WHERE c.tenant = ?1 AND c.conversation = ?2",
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
                rejected_streak: u32::try_from(row.try_get::<i64, _>("rejected_streak")?)
                    .map_err(|e| sqlx::Error::Decode(e.into()))?,
            })
        })
        .transpose()
    }
}

async fn load_turns(
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &TenantId,
    conversation: &ConversationId,
    ids: &[i64],
) -> Result<Vec<LoggedTurn>, sqlx::Error> {
    let ids = serde_json::to_string(ids).map_err(|e| sqlx::Error::Encode(e.into()))?;
    let rows = sqlx::query(
        "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id FROM turns \
         WHERE tenant = ?1 AND conversation = ?2 AND id IN (SELECT value FROM json_each(?3))",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(logged_turn).collect()
}

fn logged_turn(row: &SqliteRow) -> Result<LoggedTurn, sqlx::Error> {
    Ok(LoggedTurn {
        id: row.try_get("id")?,
        role: parse_role(row.try_get("role")?)?,
        content: decode_text(row.try_get("content")?)?,
        tokens: decode_tokens(row.try_get("tokens")?)?,
        anchors: decode_json(row.try_get("anchors")?)?,
        // Turns stored before rule 2b read as given until the backfill classifies them.
        anchors_given: row
            .try_get::<Option<bool>, _>("anchors_given")?
            .unwrap_or(true),
        external_id: row.try_get("external_id")?,
        pinned: row.try_get("pinned")?,
    })
}

impl SqliteStore {
    /// Pins or unpins a turn under the write lock; a turn a checkpoint covers cannot be pinned
    /// (its summary already stands for it).
    pub(super) async fn write_pinned(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
        pinned: bool,
    ) -> Result<PinResult, sqlx::Error> {
        let mut tx = self.begin_write().await?;
        if pinned {
            let decider: Option<(i64, String)> = sqlx::query_as(
                "SELECT checkpoint_id, covered FROM checkpoints \
                 WHERE tenant = ?1 AND conversation = ?2 AND from_id <= ?3 AND ?3 <= advanced_to \
                 ORDER BY checkpoint_id DESC LIMIT 1",
            )
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some((checkpoint_id, covered)) = decider {
                let covered: crate::coverage::IdRanges = decode_json(&covered)?;
                if covered.contains(id) {
                    return Ok(PinResult::Covered { checkpoint_id });
                }
            }
        }
        let row = sqlx::query(
            "UPDATE turns SET pinned = ?4 WHERE tenant = ?1 AND conversation = ?2 AND id = ?3 \
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
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &TenantId,
    conversation: &ConversationId,
    keys: &[TermKey],
) -> Result<HashMap<TermKey, u32>, sqlx::Error> {
    let terms: Vec<i32> = keys.iter().map(|&k| term_column(k)).collect();
    let terms = serde_json::to_string(&terms).map_err(|e| sqlx::Error::Encode(e.into()))?;
    let rows: Vec<(i32, i64)> = sqlx::query_as(
        "SELECT term, turns FROM term_counts WHERE tenant = ?1 AND conversation = ?2 \
           AND term IN (SELECT value FROM json_each(?3))",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(terms)
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(term, turns)| {
            (
                term_from_column(term),
                turns.clamp(0, i64::from(u32::MAX)) as u32,
            )
        })
        .collect())
}

pub(super) async fn add_term_counts(
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &TenantId,
    conversation: &ConversationId,
    added: &HashMap<TermKey, u32>,
) -> Result<(), sqlx::Error> {
    if added.is_empty() {
        return Ok(());
    }
    let pairs: Vec<(i32, u32)> = added.iter().map(|(&k, &n)| (term_column(k), n)).collect();
    let pairs = serde_json::to_string(&pairs).map_err(|e| sqlx::Error::Encode(e.into()))?;
    sqlx::query(
        "INSERT INTO term_counts (tenant, conversation, term, turns) \
         SELECT ?1, ?2, j.value ->> 0, j.value ->> 1 FROM json_each(?3) AS j WHERE true \
         ON CONFLICT (tenant, conversation, term) DO UPDATE SET turns = turns + excluded.turns",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(pairs)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

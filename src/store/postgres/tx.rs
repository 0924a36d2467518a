//! [`WriteTx`] on Postgres: one transaction, the conversation's row lock serializing writers.

use crate::append::{Appended, LoggedTurn};
use crate::coverage::terms::TermKey;
use crate::coverage::{IdRanges, TermProfile, TurnFacts};
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::{encode_candidates_used, stored_facts};
use crate::store::{
    DecidingCheckpoint, Error, IdempotencyClaim, LockedConversation, NewCheckpoint, Restored,
    Result, StoredAnswer, StoredTurn, WriteTx, decode,
};
use foldhash::HashMap;
use futures_util::{StreamExt, TryStreamExt};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Row, Transaction};

/// A write transaction; dropped uncommitted, it rolls back. It keeps the term count rows it read,
/// for its append to merge into.
pub struct PgTx(
    pub(super) Transaction<'static, Postgres>,
    pub(super) super::term_buckets::HeldRows,
);

impl WriteTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "lock_conversation"))]
    async fn lock_conversation(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<LockedConversation>> {
        let row: Option<(i64, Option<i64>, i64, i64)> = sqlx::query_as(
            "SELECT next_id, latest_checkpoint, checkpoint_count, facts_version FROM conversations \
             WHERE tenant = $1 AND conversation = $2 FOR UPDATE",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&mut *self.0)
        .await?;
        Ok(row.map(
            |(next_id, latest_checkpoint, checkpoint_count, facts_version)| LockedConversation {
                next_id,
                latest_checkpoint,
                checkpoint_count,
                facts_version,
            },
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "lock_or_create_conversation"))]
    async fn lock_or_create_conversation(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<LockedConversation> {
        // The lock first: most writes find the conversation, so they need one round trip, not
        // an insert before it. The row an insert finds can be erased before the lock is granted
        // (the erasure held it); the next insert then creates it afresh.
        for inserts in 0.. {
            if let Some(locked) = self.lock_conversation(tenant, conversation).await? {
                return Ok(locked);
            }
            if inserts == 3 {
                break;
            }
            sqlx::query("INSERT INTO conversations (tenant, conversation) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(tenant.as_str())
                .bind(conversation.as_str())
                .execute(&mut *self.0)
                .await?;
        }
        Err(Error::invariant(
            "the conversation was erased three times while this write waited for it",
        ))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "find_answer"))]
    async fn find_answer(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        key: &str,
        not_before: i64,
    ) -> Result<Option<StoredAnswer>> {
        find_answer(&mut self.0, tenant, conversation, key, not_before).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "record_answer"))]
    async fn record_answer(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        claim: &IdempotencyClaim,
        status: u16,
        body: &[u8],
    ) -> Result<()> {
        sqlx::query("DELETE FROM idempotency_keys WHERE tenant = $1 AND created_at < $2")
            .bind(tenant.as_str())
            .bind(claim.not_before)
            .execute(&mut *self.0)
            .await?;
        sqlx::query(
            "INSERT INTO idempotency_keys \
             (tenant, conversation, key, fingerprint, status, response, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(&claim.key)
        .bind(&claim.fingerprint[..])
        .bind(status as i16)
        .bind(body)
        .bind(claim.now)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "logged_turns"))]
    async fn logged_turns(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[i64],
    ) -> Result<Vec<LoggedTurn>> {
        let rows = sqlx::query(
            "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id FROM turns \
             WHERE tenant = $1 AND conversation = $2 AND id = ANY($3)",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(ids)
        .fetch_all(&mut *self.0)
        .await?;
        rows.iter().map(logged_turn).collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "term_counts"))]
    async fn term_counts(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        keys: &[TermKey],
    ) -> Result<HashMap<TermKey, u32>> {
        let (tenant, conversation) = (tenant.as_str(), conversation.as_str());
        super::term_buckets::read(&mut self.0, &mut self.1, tenant, conversation, keys).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "insert_turns"))]
    async fn insert_turns(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: &Appended,
    ) -> Result<()> {
        let (buckets, counts) =
            super::term_buckets::counted(std::mem::take(&mut self.1), &batch.counts_added)?;
        let finish = Finish {
            buckets,
            counts,
            next_id: batch.next_id,
            tokens_added: batch.new.iter().map(|(t, _)| i64::from(t.tokens)).sum(),
        };
        let chunks: Vec<_> = in_chunks(&batch.new).collect();
        let Some((last, first)) = chunks.split_last() else {
            return Ok(());
        };
        for chunk in first {
            insert_chunk(&mut self.0, tenant, conversation, chunk, None).await?;
        }
        insert_chunk(&mut self.0, tenant, conversation, last, Some(finish)).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "turn_facts"))]
    async fn turn_facts(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> Result<Vec<TurnFacts>> {
        turn_facts(&mut self.0, tenant, conversation, from, to).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "insert_checkpoint"))]
    async fn insert_checkpoint(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint: &NewCheckpoint<'_>,
    ) -> Result<()> {
        let verdict = checkpoint.verdict;
        // The checkpoint and its conversation's row in one statement: a round trip fewer.
        sqlx::query(
            "WITH inserted AS (INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, \
               advanced_to, outcome, covered, uncovered, not_compacted, summary, summary_tokens, verdict, \
               candidates_used, reasons) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, \
               $8::int8multirange, $9::int8multirange, $10::int8multirange, $11, $12, $13, $14, $15)) \
             UPDATE conversations SET latest_checkpoint = $3, checkpoint_count = $3, \
               rejected_from = NULL, rejected_streak = 0 \
             WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint.checkpoint_id)
        .bind(verdict.from)
        .bind(verdict.to)
        .bind(checkpoint.advanced_to)
        .bind(verdict.outcome.as_str())
        .bind(multirange(&verdict.covered))
        .bind(multirange(&verdict.uncovered))
        .bind(multirange(&verdict.not_compacted))
        .bind(checkpoint.summary.as_bytes())
        .bind(i64::from(verdict.summary_tokens))
        .bind(serde_json::to_vec(verdict).map_err(Error::invariant)?)
        .bind(encode_candidates_used(checkpoint.candidates_used))
        .bind(super::reasons::encode(verdict)?)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "count_rejection"))]
    async fn count_rejection(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE conversations SET \
               rejected_streak = CASE WHEN rejected_from = $3 THEN rejected_streak + 1 ELSE 1 END, \
               rejected_from = $3 \
             WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(from)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "deciding_checkpoint"))]
    async fn deciding_checkpoint(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<Option<DecidingCheckpoint>> {
        let row: Option<(i64, bool)> = sqlx::query_as(
            "SELECT checkpoint_id, covered @> $3::int8 FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 AND from_id <= $3 AND $3 <= advanced_to \
             ORDER BY checkpoint_id DESC LIMIT 1",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(turn)
        .fetch_optional(&mut *self.0)
        .await?;
        Ok(row.map(|(checkpoint_id, covers_turn)| DecidingCheckpoint {
            checkpoint_id,
            covers_turn,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "set_pinned"))]
    async fn set_pinned(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
        pinned: bool,
    ) -> Result<Option<StoredTurn>> {
        let row = sqlx::query(
            "UPDATE turns SET pinned = $4 WHERE tenant = $1 AND conversation = $2 AND id = $3 \
             RETURNING id, role, content, tokens, anchors, anchors_given, pinned, external_id, created_at",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(id)
        .bind(pinned)
        .fetch_optional(&mut *self.0)
        .await?;
        let Some(row) = row else { return Ok(None) };
        sqlx::query(
            "UPDATE conversations SET facts_version = facts_version + 1 \
             WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .execute(&mut *self.0)
        .await?;
        stored_turn(&row).map(Some)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "erase"))]
    async fn erase(&mut self, tenant: &TenantId, conversation: &ConversationId) -> Result<bool> {
        super::lifecycle::erase(&mut self.0, tenant, conversation).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "restore"))]
    async fn restore(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        restored: &Restored<'_>,
    ) -> Result<()> {
        super::lifecycle::restore(&mut self.0, tenant, conversation, restored).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "commit"))]
    async fn commit(self) -> Result<()> {
        Ok(self.0.commit().await?)
    }
}

pub(super) async fn find_answer(
    conn: &mut PgConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    key: &str,
    not_before: i64,
) -> Result<Option<StoredAnswer>> {
    let row = sqlx::query(
        "SELECT fingerprint, status, response FROM idempotency_keys \
         WHERE tenant = $1 AND conversation = $2 AND key = $3 AND created_at >= $4",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(key)
    .bind(not_before)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(StoredAnswer {
        fingerprint: row.try_get("fingerprint")?,
        status: u16::try_from(row.try_get::<i16, _>("status")?).map_err(Error::invariant)?,
        body: row.try_get("response")?,
    }))
}

/// The facts of the turns `[from, to]`, in id order (content only for a turn still without a
/// profile).
pub(super) async fn turn_facts(
    conn: &mut PgConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    from: i64,
    to: i64,
) -> Result<Vec<TurnFacts>> {
    sqlx::query(
        // The LIMIT (exact: ids are unique) keeps the planner on the primary key. The rows of one
        // conversation's id range are estimated from ids over all conversations, so a long
        // conversation's range was estimated at ten times its rows and read by a parallel
        // scan of the whole table (25 ms instead of 1 ms for 2,000 turns).
        "SELECT id, role, tokens, CASE WHEN anchors_given IS NOT FALSE THEN anchors END, \
           anchors_given, pinned, profile, CASE WHEN profile IS NULL THEN content END FROM turns \
         WHERE tenant = $1 AND conversation = $2 AND id BETWEEN $3 AND $4 ORDER BY id \
         LIMIT $5",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(from)
    .bind(to)
    .bind(to.saturating_sub(from).saturating_add(1).max(0))
    // Each row is decoded as it arrives, while Postgres is still sending the next ones: decoded
    // after the last, the decoding added its whole time to the read's.
    .fetch(conn)
    .map(|row| facts_of(&row?))
    .try_collect()
    .await
}

/// A row of [`turn_facts`]' SELECT, its columns by position (by name was a hash lookup per
/// column per row).
fn facts_of(row: &PgRow) -> Result<TurnFacts> {
    let anchors: Option<Json<Vec<String>>> = row.try_get(3)?;
    stored_facts(
        row.try_get(0)?,
        decode::role(row.try_get(1)?)?,
        decode::tokens(row.try_get(2)?)?,
        anchors.map(|Json(a)| a),
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
    )
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

/// The turns of a chunk and their search blocks, one statement.
static INSERT_CHUNK_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{LOGGED} {}", super::search::insert_blocks_sql(12)));

/// An append's last chunk: its turns and blocks, the append's term counts and the conversation's
/// row, one statement (a round trip fewer than writing the counts apart).
static LAST_CHUNK_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{LOGGED}, indexed AS ({}), {} \
         UPDATE conversations SET next_id = $23, total_tokens = total_tokens + $24, \
           last_append_at = now() WHERE tenant = $1 AND conversation = $2",
        super::search::insert_blocks_sql(12),
        super::term_buckets::upsert_sql(21)
    )
});

/// The turns of a chunk, `$3`…`$11` their columns.
const LOGGED: &str = "WITH logged AS (INSERT INTO turns (tenant, conversation, id, role, content, tokens, \
     anchors, anchors_given, pinned, profile, external_id) \
   SELECT $1, $2, u.* FROM UNNEST($3::int8[], $4::text[], $5::bytea[], $6::int8[], $7::jsonb[], \
     $8::bool[], $9::bool[], $10::bytea[], $11::text[]) \
     AS u(id, role, content, tokens, anchors, given, pinned, profile, external_id))";

/// What the last chunk of an append writes besides its turns.
struct Finish {
    buckets: Vec<i16>,
    counts: Vec<Vec<u8>>,
    next_id: i64,
    tokens_added: i64,
}

async fn insert_chunk(
    conn: &mut PgConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    turns: &[(LoggedTurn, TermProfile)],
    finish: Option<Finish>,
) -> Result<()> {
    // One statement over UNNEST: a round trip per chunk, not per turn, writing the turns and
    // their search index blocks.
    let ids: Vec<i64> = turns.iter().map(|(t, _)| t.id).collect();
    let roles: Vec<&str> = turns.iter().map(|(t, _)| t.role.as_str()).collect();
    let contents: Vec<&[u8]> = turns.iter().map(|(t, _)| t.content.as_bytes()).collect();
    let tokens: Vec<i64> = turns.iter().map(|(t, _)| i64::from(t.tokens)).collect();
    let anchors: Vec<Json<&Vec<String>>> = turns.iter().map(|(t, _)| Json(&t.anchors)).collect();
    let given: Vec<bool> = turns.iter().map(|(t, _)| t.anchors_given).collect();
    let pinned: Vec<bool> = turns.iter().map(|(t, _)| t.pinned).collect();
    // The profiles in one buffer, bound as slices of it: one allocation a chunk, not a turn.
    let mut profile_bytes = Vec::new();
    let mut bounds = vec![0];
    for (_, profile) in turns {
        profile.write_bytes(&mut profile_bytes);
        bounds.push(profile_bytes.len());
    }
    let profiles: Vec<&[u8]> = (bounds.windows(2))
        .map(|w| &profile_bytes[w[0]..w[1]])
        .collect();
    let external_ids: Vec<Option<&str>> = turns
        .iter()
        .map(|(t, _)| t.external_id.as_deref())
        .collect();
    let blocks = super::search::blocks(
        tenant.as_str(),
        conversation.as_str(),
        turns.iter().map(|(t, p)| (t.id, t.role, t.tokens, p)),
    );
    let sql: &str = if finish.is_some() {
        &LAST_CHUNK_SQL
    } else {
        &INSERT_CHUNK_SQL
    };
    let query = sqlx::query(sql)
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
        .bind(external_ids);
    let mut query = super::search::bind_blocks(query, blocks);
    if let Some(f) = finish {
        query = query
            .bind(f.buckets)
            .bind(f.counts)
            .bind(f.next_id)
            .bind(f.tokens_added);
    }
    query.execute(conn).await?;
    Ok(())
}

/// The text form of an `int8multirange`, `{[1,3],[7,7]}`, cast by the server, rather than arrays
/// folded by the `inclusive_ranges` SQL function (the INSERT's bind fell from 1.3 to 0.75 ms).
pub(super) fn multirange(set: &IdRanges) -> String {
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

fn logged_turn(row: &PgRow) -> Result<LoggedTurn> {
    let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
    Ok(LoggedTurn {
        id: row.try_get("id")?,
        role: decode::role(row.try_get("role")?)?,
        content: decode::text(row.try_get("content")?)?,
        tokens: decode::tokens(row.try_get("tokens")?)?,
        anchors,
        // Turns stored before rule 2b read as given until the backfill classifies them.
        anchors_given: row
            .try_get::<Option<bool>, _>("anchors_given")?
            .unwrap_or(true),
        external_id: row.try_get("external_id")?,
        pinned: row.try_get("pinned")?,
    })
}

pub(super) fn stored_turn(row: &PgRow) -> Result<StoredTurn> {
    Ok(StoredTurn {
        created_at: row.try_get("created_at")?,
        turn: logged_turn(row)?,
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

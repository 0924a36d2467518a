//! [`WriteTx`] on SQLite: one `BEGIN IMMEDIATE` transaction, which holds the database's write
//! lock from its start, so the conversation is locked before any step runs.

use crate::append::{Appended, CountsAdded, LoggedTurn};
use crate::coverage::terms::TermKey;
use crate::coverage::{IdRanges, TurnFacts};
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::{encode_candidates_used, stored_facts, term_column, term_from_column};
use crate::store::{
    DecidingCheckpoint, Error, IdempotencyClaim, LockedConversation, NewCheckpoint, Restored,
    Result, StoredAnswer, StoredTurn, WriteTx, decode,
};
use foldhash::HashMap;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection, Transaction};

/// A write transaction; dropped uncommitted, it rolls back.
pub struct SqliteTx(pub(super) Transaction<'static, Sqlite>);

impl WriteTx for SqliteTx {
    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "lock_conversation"))]
    async fn lock_conversation(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<LockedConversation>> {
        let row: Option<(i64, Option<i64>, i64, i64)> = sqlx::query_as(
            "SELECT next_id, latest_checkpoint, checkpoint_count, facts_version FROM conversations \
             WHERE tenant = ?1 AND conversation = ?2",
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

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "lock_or_create_conversation"))]
    async fn lock_or_create_conversation(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<LockedConversation> {
        // SQLite has no sequences: a random incarnation (see the migration 0007).
        sqlx::query("INSERT INTO conversations (tenant, conversation, incarnation) VALUES (?1, ?2, random()) ON CONFLICT DO NOTHING")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .execute(&mut *self.0)
            .await?;
        self.lock_conversation(tenant, conversation)
            .await?
            .ok_or_else(|| Error::invariant("the conversation row vanished inside its transaction"))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "find_answer"))]
    async fn find_answer(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        key: &str,
        not_before: i64,
    ) -> Result<Option<StoredAnswer>> {
        find_answer(&mut self.0, tenant, conversation, key, not_before).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "record_answer"))]
    async fn record_answer(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        claim: &IdempotencyClaim,
        status: u16,
        body: &[u8],
    ) -> Result<()> {
        sqlx::query("DELETE FROM idempotency_keys WHERE tenant = ?1 AND created_at < ?2")
            .bind(tenant.as_str())
            .bind(claim.not_before)
            .execute(&mut *self.0)
            .await?;
        sqlx::query(
            "INSERT INTO idempotency_keys \
             (tenant, conversation, key, fingerprint, status, response, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(&claim.key)
        .bind(&claim.fingerprint[..])
        .bind(i64::from(status))
        .bind(body)
        .bind(claim.now)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "logged_turns"))]
    async fn logged_turns(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[i64],
    ) -> Result<Vec<LoggedTurn>> {
        let rows = sqlx::query(
            "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id FROM turns \
             WHERE tenant = ?1 AND conversation = ?2 AND id IN (SELECT value FROM json_each(?3))",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(decode::to_json(&ids)?)
        .fetch_all(&mut *self.0)
        .await?;
        rows.iter().map(logged_turn).collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "term_counts"))]
    async fn term_counts(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        keys: &[TermKey],
    ) -> Result<HashMap<TermKey, u32>> {
        let terms: Vec<i32> = keys.iter().map(|&k| term_column(k)).collect();
        let rows: Vec<(i32, i64)> = sqlx::query_as(
            "SELECT term, turns FROM term_counts WHERE tenant = ?1 AND conversation = ?2 \
               AND term IN (SELECT value FROM json_each(?3))",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(decode::to_json(&terms)?)
        .fetch_all(&mut *self.0)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(term, turns)| {
                let turns = turns.clamp(0, i64::from(u32::MAX)) as u32;
                (term_from_column(term), turns)
            })
            .collect())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "insert_turns"))]
    async fn insert_turns(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: &Appended,
    ) -> Result<()> {
        // One INSERT per turn: SQLite runs in this process, so a statement costs no round trip.
        for (t, profile) in &batch.new {
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
            .bind(decode::to_json(&t.anchors)?)
            .bind(t.anchors_given)
            .bind(t.pinned)
            .bind(profile.to_bytes())
            .bind(t.external_id.as_deref())
            .execute(&mut *self.0)
            .await?;
            super::search::index_turn(
                &mut self.0,
                tenant.as_str(),
                conversation.as_str(),
                (t.id, t.role, t.tokens, profile),
            )
            .await?;
        }
        add_term_counts(
            &mut self.0,
            tenant.as_str(),
            conversation.as_str(),
            &batch.counts_added,
        )
        .await?;
        let added: i64 = batch.new.iter().map(|(t, _)| i64::from(t.tokens)).sum();
        sqlx::query(
            "UPDATE conversations SET next_id = ?3, total_tokens = total_tokens + ?4, \
               last_append_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(batch.next_id)
        .bind(added)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "turn_facts"))]
    async fn turn_facts(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> Result<Vec<TurnFacts>> {
        turn_facts(&mut self.0, tenant, conversation, from, to).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "insert_checkpoint"))]
    async fn insert_checkpoint(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint: &NewCheckpoint<'_>,
    ) -> Result<()> {
        let verdict = checkpoint.verdict;
        sqlx::query(
            "INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, advanced_to, outcome, \
               covered, uncovered, not_compacted, summary, summary_tokens, verdict, candidates_used) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint.checkpoint_id)
        .bind(verdict.from)
        .bind(verdict.to)
        .bind(checkpoint.advanced_to)
        .bind(verdict.outcome.as_str())
        .bind(decode::to_json(&verdict.covered)?)
        .bind(decode::to_json(&verdict.uncovered)?)
        .bind(decode::to_json(&verdict.not_compacted)?)
        .bind(checkpoint.summary.as_bytes())
        .bind(i64::from(verdict.summary_tokens))
        .bind(decode::to_json(verdict)?)
        .bind(encode_candidates_used(checkpoint.candidates_used))
        .execute(&mut *self.0)
        .await?;
        sqlx::query(
            "UPDATE conversations SET latest_checkpoint = ?3, checkpoint_count = ?3, \
               rejected_from = NULL, rejected_streak = 0 \
             WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint.checkpoint_id)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "count_rejection"))]
    async fn count_rejection(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE conversations SET \
               rejected_streak = CASE WHEN rejected_from = ?3 THEN rejected_streak + 1 ELSE 1 END, \
               rejected_from = ?3 \
             WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(from)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "deciding_checkpoint"))]
    async fn deciding_checkpoint(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<Option<DecidingCheckpoint>> {
        let row: Option<(i64, String)> = sqlx::query_as(
            "SELECT checkpoint_id, covered FROM checkpoints \
             WHERE tenant = ?1 AND conversation = ?2 AND from_id <= ?3 AND ?3 <= advanced_to \
             ORDER BY checkpoint_id DESC LIMIT 1",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(turn)
        .fetch_optional(&mut *self.0)
        .await?;
        row.map(|(checkpoint_id, covered)| {
            let covered: IdRanges = decode::json(&covered)?;
            Ok(DecidingCheckpoint {
                checkpoint_id,
                covers_turn: covered.contains(turn),
            })
        })
        .transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "set_pinned"))]
    async fn set_pinned(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
        pinned: bool,
    ) -> Result<Option<StoredTurn>> {
        let row = sqlx::query(
            "UPDATE turns SET pinned = ?4 WHERE tenant = ?1 AND conversation = ?2 AND id = ?3 \
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
             WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .execute(&mut *self.0)
        .await?;
        stored_turn(&row).map(Some)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "erase"))]
    async fn erase(&mut self, tenant: &TenantId, conversation: &ConversationId) -> Result<bool> {
        super::lifecycle::erase(&mut self.0, tenant, conversation).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "restore"))]
    async fn restore(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        restored: &Restored<'_>,
    ) -> Result<()> {
        super::lifecycle::restore(&mut self.0, tenant, conversation, restored).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "commit"))]
    async fn commit(self) -> Result<()> {
        Ok(self.0.commit().await?)
    }
}

pub(super) async fn find_answer(
    conn: &mut SqliteConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    key: &str,
    not_before: i64,
) -> Result<Option<StoredAnswer>> {
    let row = sqlx::query(
        "SELECT fingerprint, status, response FROM idempotency_keys \
         WHERE tenant = ?1 AND conversation = ?2 AND key = ?3 AND created_at >= ?4",
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
        status: u16::try_from(row.try_get::<i64, _>("status")?).map_err(Error::invariant)?,
        body: row.try_get("response")?,
    }))
}

/// The facts of the turns `[from, to]`, in id order (content only for a turn still without a
/// profile).
pub(super) async fn turn_facts(
    conn: &mut SqliteConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    from: i64,
    to: i64,
) -> Result<Vec<TurnFacts>> {
    let rows = sqlx::query(
        "SELECT id, role, tokens, CASE WHEN anchors_given IS NOT 0 THEN anchors END, \
           anchors_given, pinned, profile, CASE WHEN profile IS NULL THEN content END FROM turns \
         WHERE tenant = ?1 AND conversation = ?2 AND id BETWEEN ?3 AND ?4 ORDER BY id",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(conn)
    .await?;
    // Columns by position, as on Postgres.
    rows.iter()
        .map(|row| {
            let anchors: Option<&str> = row.try_get(3)?;
            stored_facts(
                row.try_get(0)?,
                decode::role(row.try_get(1)?)?,
                decode::tokens(row.try_get(2)?)?,
                anchors.map(decode::json).transpose()?,
                row.try_get(4)?,
                row.try_get(5)?,
                row.try_get(6)?,
                row.try_get(7)?,
            )
        })
        .collect()
}

/// Adds to the conversation's candidate counts: an UPDATE for the keys it counts already and
/// an INSERT for the others (as on Postgres; the write lock is held, so nothing races).
pub(super) async fn add_term_counts(
    conn: &mut SqliteConnection,
    tenant: &str,
    conversation: &str,
    added: &CountsAdded,
) -> Result<()> {
    let pairs = |counts: &[(TermKey, u32)]| -> Vec<(i32, u32)> {
        counts.iter().map(|&(k, n)| (term_column(k), n)).collect()
    };
    if !added.raised.is_empty() {
        sqlx::query(
            "UPDATE term_counts SET turns = turns + j.value ->> 1 FROM json_each(?3) AS j \
             WHERE tenant = ?1 AND conversation = ?2 AND term = j.value ->> 0",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(decode::to_json(&pairs(&added.raised))?)
        .execute(&mut *conn)
        .await?;
    }
    if !added.started.is_empty() {
        sqlx::query(
            "INSERT INTO term_counts (tenant, conversation, term, turns) \
             SELECT ?1, ?2, j.value ->> 0, j.value ->> 1 FROM json_each(?3) AS j",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(decode::to_json(&pairs(&added.started))?)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

fn logged_turn(row: &SqliteRow) -> Result<LoggedTurn> {
    Ok(LoggedTurn {
        id: row.try_get("id")?,
        role: decode::role(row.try_get("role")?)?,
        content: decode::text(row.try_get("content")?)?,
        tokens: decode::tokens(row.try_get("tokens")?)?,
        anchors: decode::json(row.try_get("anchors")?)?,
        // Turns stored before rule 2b read as given until the backfill classifies them.
        anchors_given: row
            .try_get::<Option<bool>, _>("anchors_given")?
            .unwrap_or(true),
        external_id: row.try_get("external_id")?,
        pinned: row.try_get("pinned")?,
    })
}

pub(super) fn stored_turn(row: &SqliteRow) -> Result<StoredTurn> {
    Ok(StoredTurn {
        created_at: row.try_get("created_at")?,
        turn: logged_turn(row)?,
    })
}

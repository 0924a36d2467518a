//! [`Store`] on SQLite: opening, and the reads, each on a pooled connection (in WAL mode a
//! read never waits for the writer).

use super::{MIGRATOR, SqliteStore, SqliteTx};
use crate::config::DatabaseConfig;
use crate::context::{self, CheckpointSpan, ContextSummary, ContextTurn};
use crate::coverage::terms::TermKey;
use crate::coverage::{IdRanges, Reason, Role, TurnFacts, Verdict};
use crate::domain::{ConversationId, Position, TenantId};
use crate::search::{Posting, Scope};
use crate::store::profiles::deciding_anchors;
use crate::store::{
    Backend, CheckpointRow, ConversationListing, ConversationRow, Error, ExportedCheckpoint,
    ExportedTurn, FeedEvent, FeedHeartbeat, Head, LatestCheckpoint, ListPage, ReconstructRow,
    Result, SpanningCheckpoint, Store, StoredAnswer, StoredContext, StoredTurn, TenantFilter,
    TurnSize, decode,
};
use chrono::{DateTime, Utc};
use sqlx::Row;

impl Store for SqliteStore {
    type Tx = SqliteTx;

    async fn connect(db: &DatabaseConfig) -> anyhow::Result<Self> {
        Self::open(&db.url(), db.pool_size, db.acquire_timeout()).await
    }

    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn ready(&self) -> Result<bool> {
        let applied: i64 =
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.pool)
                .await?;
        Ok(applied as usize >= MIGRATOR.iter().count())
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    /// One file: every read sees every commit.
    async fn for_reads(&self, _min: Option<Position>) -> Self {
        self.clone()
    }

    async fn position(&self) -> Result<Option<Position>> {
        Ok(None)
    }

    /// Holds the database's write lock from its first statement.
    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "begin"))]
    async fn begin(&self) -> Result<SqliteTx> {
        Ok(SqliteTx(self.pool.begin_with("BEGIN IMMEDIATE").await?))
    }

    async fn backfill_profiles(&self) -> Result<u64> {
        super::backfill::run(&self.pool).await
    }

    async fn backfill_search(&self) -> Result<u64> {
        super::search::backfill(&self.pool).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "search_postings"))]
    async fn search_postings(
        &self,
        tenant: &TenantId,
        scope: Scope<'_>,
        keys: &[TermKey],
        per_key: u32,
    ) -> Result<Vec<Vec<Posting>>> {
        super::search::postings(&self.pool, tenant.as_str(), scope, keys, per_key).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "tenant_turns"))]
    async fn tenant_turns(&self, tenant: &TenantId, prefix: Option<&str>) -> Result<u64> {
        super::search::tenant_turns(&self.pool, tenant.as_str(), prefix).await
    }

    /// SQLite has no feed: callers keep checking.
    async fn follow_checkpoints(
        &self,
        _heartbeat: FeedHeartbeat,
        _on: impl FnMut(FeedEvent<'_>) + Send,
    ) {
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "stored_answer"))]
    async fn stored_answer(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        key: &str,
        not_before: i64,
    ) -> Result<Option<StoredAnswer>> {
        let mut conn = self.pool.acquire().await?;
        super::tx::find_answer(&mut conn, tenant, conversation, key, not_before).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "head"))]
    async fn head(&self, tenant: &TenantId, conversation: &ConversationId) -> Result<Option<Head>> {
        let row: Option<(i64, Option<i64>)> = sqlx::query_as(
            "SELECT incarnation, latest_checkpoint FROM conversations WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(incarnation, latest_checkpoint)| Head {
            incarnation,
            latest_checkpoint,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "conversations"))]
    async fn conversations(
        &self,
        tenant: &TenantId,
        page: ListPage<'_>,
    ) -> Result<Vec<ConversationListing>> {
        super::lifecycle::conversations(&self.pool, tenant, page).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "export_turns"))]
    async fn export_turns(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        range: (i64, i64),
        limit: u32,
    ) -> Result<Vec<ExportedTurn>> {
        super::lifecycle::export_turns(&self.pool, tenant, conversation, range, limit).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "export_checkpoints"))]
    async fn export_checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        range: (i64, i64),
        limit: u32,
    ) -> Result<Vec<ExportedCheckpoint>> {
        super::lifecycle::export_checkpoints(&self.pool, tenant, conversation, range, limit).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "idle_conversations"))]
    async fn idle_conversations(
        &self,
        tenants: TenantFilter<'_>,
        idle_since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(TenantId, ConversationId)>> {
        super::lifecycle::idle_conversations(&self.pool, tenants, idle_since, limit).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "conversation"))]
    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<ConversationRow>> {
        let row = sqlx::query(
            "SELECT c.created_at, c.last_append_at, c.next_id, c.total_tokens, c.checkpoint_count, c.rejected_from, c.rejected_streak, \
               c.facts_version, k.checkpoint_id, k.from_id, k.advanced_to, k.outcome \
             FROM conversations c LEFT JOIN checkpoints k ON k.tenant = c.tenant \
               AND k.conversation = c.conversation AND k.checkpoint_id = c.latest_checkpoint \
             WHERE c.tenant = ?1 AND c.conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let latest = match row.try_get::<Option<i64>, _>("checkpoint_id")? {
            Some(checkpoint_id) => Some(LatestCheckpoint {
                checkpoint_id,
                from: row.try_get("from_id")?,
                advanced_to: row.try_get("advanced_to")?,
                outcome: decode::outcome(row.try_get("outcome")?)?,
            }),
            None => None,
        };
        Ok(Some(ConversationRow {
            created_at: row.try_get("created_at")?,
            last_append_at: row.try_get("last_append_at")?,
            next_id: row.try_get("next_id")?,
            total_tokens: row.try_get("total_tokens")?,
            checkpoint_count: row.try_get("checkpoint_count")?,
            latest,
            rejected_from: row.try_get("rejected_from")?,
            rejected_streak: u32::try_from(row.try_get::<i64, _>("rejected_streak")?)
                .map_err(Error::invariant)?,
            facts_version: row.try_get("facts_version")?,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "turn"))]
    async fn turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
    ) -> Result<Option<StoredTurn>> {
        let row = sqlx::query(
            "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id, created_at \
             FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id = ?3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(super::tx::stored_turn).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "range_facts"))]
    async fn range_facts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> Result<Vec<TurnFacts>> {
        let mut conn = self.pool.acquire().await?;
        super::tx::turn_facts(&mut conn, tenant, conversation, from, to).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "turn_sizes"))]
    async fn turn_sizes(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        limit: u32,
    ) -> Result<Vec<TurnSize>> {
        sqlx::query("SELECT id, role, tokens, pinned FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id >= ?3 ORDER BY id LIMIT ?4")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(from)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok(TurnSize {
                    id: row.try_get(0)?,
                    role: decode::role(row.try_get(1)?)?,
                    tokens: decode::tokens(row.try_get(2)?)?,
                    pinned: row.try_get(3)?,
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "token_counts_from"))]
    async fn token_counts_from(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> Result<Vec<(i64, Role, u32)>> {
        sqlx::query("SELECT id, role, tokens FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id >= ?3 ORDER BY id")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(from)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| Ok((row.try_get("id")?, decode::role(row.try_get("role")?)?, decode::tokens(row.try_get("tokens")?)?)))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "checkpoints"))]
    async fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<CheckpointRow>> {
        let rows = sqlx::query(
            "SELECT checkpoint_id, created_at, json_set(verdict, '$.turns', json('[]')) AS verdict FROM checkpoints \
             WHERE tenant = ?1 AND conversation = ?2 AND (?3 IS NULL OR checkpoint_id < ?3) \
             ORDER BY checkpoint_id DESC LIMIT ?4",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(CheckpointRow {
                    checkpoint_id: row.try_get("checkpoint_id")?,
                    created_at: row.try_get("created_at")?,
                    summary: None,
                    verdict: decode::json(row.try_get("verdict")?)?,
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "checkpoint"))]
    async fn checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> Result<Option<CheckpointRow>> {
        let row = sqlx::query(
            "SELECT checkpoint_id, created_at, summary, verdict FROM checkpoints \
             WHERE tenant = ?1 AND conversation = ?2 AND checkpoint_id = ?3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let verdict: Verdict = decode::json(row.try_get("verdict")?)?;
        Ok(Some(CheckpointRow {
            checkpoint_id: row.try_get("checkpoint_id")?,
            created_at: row.try_get("created_at")?,
            summary: Some(decode::text(row.try_get("summary")?)?),
            verdict,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "reconstruct"))]
    async fn reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<Option<ReconstructRow>> {
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
                let covered: IdRanges = decode::json(row.try_get("covered")?)?;
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
                    spanning.summary = Some(decode::text(covering.try_get("summary")?)?);
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
                        .map(|r| decode::json::<Reason>(&format!("\"{r}\"")))
                        .transpose()?;
                }
                Some(spanning)
            }
        };
        Ok(Some(ReconstructRow {
            role: decode::role(row.try_get("role")?)?,
            content: decode::text(row.try_get("content")?)?,
            deciding_anchors: match deciding {
                Some((profile, used)) => deciding_anchors(
                    decode::json(row.try_get("anchors")?)?,
                    row.try_get("anchors_given")?,
                    profile,
                    used,
                )?,
                None => Vec::new(),
            },
            checkpoint,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "sqlite", db.operation.name = "context"))]
    async fn context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<StoredContext> {
        // One read transaction: in WAL mode every read sees the same snapshot.
        let mut tx = self.pool.begin().await?;
        let end: Option<i64> = sqlx::query_scalar(
            "SELECT next_id FROM conversations WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(end) = end else {
            return Ok(StoredContext::default());
        };
        let spans = sqlx::query(
            "SELECT checkpoint_id, from_id, advanced_to, covered FROM checkpoints \
             WHERE tenant = ?1 AND conversation = ?2 ORDER BY checkpoint_id",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| {
            Ok(CheckpointSpan {
                checkpoint_id: row.try_get(0)?,
                from: row.try_get(1)?,
                advanced_to: row.try_get(2)?,
                covered: decode::json(row.try_get(3)?)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
        let reads = context::reads(end, &spans);
        let summaries = sqlx::query(
            "SELECT checkpoint_id, summary, summary_tokens FROM checkpoints \
             WHERE tenant = ?1 AND conversation = ?2 \
               AND checkpoint_id IN (SELECT value FROM json_each(?3))",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(decode::to_json(&reads.summaries)?)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| {
            let summary = ContextSummary {
                text: decode::text(row.try_get(1)?)?,
                tokens: decode::tokens(row.try_get(2)?)?,
            };
            Ok((row.try_get(0)?, summary))
        })
        .collect::<Result<_>>()?;
        // Contents by range, ranges outermost: each is one index range scan.
        let mut contents = sqlx::query(
            "SELECT t.id, t.content, t.anchors FROM json_each(?3) AS r CROSS JOIN turns t \
             WHERE t.tenant = ?1 AND t.conversation = ?2 \
               AND t.id BETWEEN r.value ->> 0 AND r.value ->> 1 ORDER BY t.id",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(decode::to_json(&reads.verbatim)?)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|row| {
            let anchors: Vec<String> = decode::json(row.try_get(2)?)?;
            Ok((
                row.try_get::<i64, _>(0)?,
                decode::text(row.try_get(1)?)?,
                anchors,
            ))
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .peekable();
        let turns = sqlx::query(
            "SELECT id, role, tokens, pinned FROM turns WHERE tenant = ?1 AND conversation = ?2 ORDER BY id",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| {
            let id: i64 = row.try_get(0)?;
            let (content, anchors) = match contents.next_if(|(c, _, _)| *c == id) {
                Some((_, text, anchors)) => (Some(text), anchors),
                None => (None, Vec::new()),
            };
            Ok(ContextTurn {
                id,
                role: decode::role(row.try_get(1)?)?,
                tokens: decode::tokens(row.try_get(2)?)?,
                pinned: row.try_get(3)?,
                content,
                anchors,
            })
        })
        .collect::<Result<Vec<_>>>()?;
        tx.commit().await?;
        Ok(StoredContext {
            turns,
            spans,
            summaries,
        })
    }
}

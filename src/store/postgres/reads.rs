//! [`Store`] on Postgres: connecting, and the reads, each on a pooled connection.

use super::tx::multirange;
use super::{MIGRATOR, PgStore, PgTx};
use crate::config::DatabaseConfig;
use crate::context::{self, CheckpointSpan, ContextSummary, ContextTurn};
use crate::coverage::terms::TermKey;
use crate::coverage::{IdRange, IdRanges, Role, TurnFacts, Verdict};
use crate::domain::{ConversationId, Position, TenantId};
use crate::search::{Posting, Scope};
use crate::store::{
    Backend, CheckpointRow, ConversationListing, ConversationRow, Error, ExportedCheckpoint,
    ExportedTurn, FeedEvent, FeedHeartbeat, Head, LatestCheckpoint, ListPage, ReconstructRow,
    Result, Store, StoredAnswer, StoredContext, StoredTurn, TenantFilter, TurnSize, decode,
};
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::types::Json;
use std::time::Duration;

impl Store for PgStore {
    type Tx = PgTx;

    async fn connect(db: &DatabaseConfig) -> anyhow::Result<Self> {
        Self::connect_waiting(
            &db.url(),
            db.pool_size,
            db.acquire_timeout(),
            db.startup_wait(),
            db.pg_partitions,
        )
        .await?
        .with_replicas(
            &db.read_database_urls,
            db.pool_size,
            db.acquire_timeout(),
            Duration::from_millis(db.read_max_wait_ms),
            db.read_max_lag_bytes,
        )
    }

    async fn for_reads(&self, min: Option<Position>) -> Self {
        let Some(replicas) = &self.replicas else {
            return self.clone();
        };
        match replicas.pool_for(min).await {
            Some((pool, reconstructs)) => Self {
                read_pool: pool,
                reconstructs,
                on_replica: true,
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    fn on_replica(&self) -> bool {
        self.on_replica
    }

    fn reads_may_use_replicas(&self) -> bool {
        self.replicas.is_some()
    }

    async fn position(&self) -> Result<Option<Position>> {
        match &self.replicas {
            Some(_) => Ok(Some(super::replicas::position(&self.primary).await?)),
            None => Ok(None),
        }
    }

    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn ready(&self) -> Result<bool> {
        let applied: i64 =
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.primary)
                .await?;
        Ok(applied as usize >= MIGRATOR.iter().count())
    }

    async fn close(&self) {
        self.primary.close().await;
        self.reconstructs.close().await;
        if let Some(replicas) = &self.replicas {
            replicas.close().await;
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "begin"))]
    async fn begin(&self) -> Result<PgTx> {
        Ok(PgTx(self.primary.begin().await?, Default::default()))
    }

    async fn backfill_profiles(&self) -> Result<u64> {
        super::backfill::run(&self.primary).await
    }

    async fn backfill_search(&self) -> Result<u64> {
        super::search::backfill(&self.primary).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "search_postings"))]
    async fn search_postings(
        &self,
        tenant: &TenantId,
        scope: Scope<'_>,
        keys: &[TermKey],
        per_key: u32,
    ) -> Result<Vec<Vec<Posting>>> {
        super::search::postings(&self.read_pool, tenant.as_str(), scope, keys, per_key).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "tenant_turns"))]
    async fn tenant_turns(&self, tenant: &TenantId, prefix: Option<&str>) -> Result<u64> {
        super::search::tenant_turns(&self.read_pool, tenant.as_str(), prefix).await
    }

    async fn follow_checkpoints(
        &self,
        heartbeat: FeedHeartbeat,
        on: impl FnMut(FeedEvent<'_>) + Send,
    ) {
        super::feed::follow(&self.primary, heartbeat, on).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "stored_answer"))]
    async fn stored_answer(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        key: &str,
        not_before: i64,
    ) -> Result<Option<StoredAnswer>> {
        let mut conn = self.read_pool.acquire().await?;
        super::tx::find_answer(&mut conn, tenant, conversation, key, not_before).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "head"))]
    async fn head(&self, tenant: &TenantId, conversation: &ConversationId) -> Result<Option<Head>> {
        let row: Option<(i64, Option<i64>)> = sqlx::query_as(
            "SELECT incarnation, latest_checkpoint FROM conversations WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&self.read_pool)
        .await?;
        Ok(row.map(|(incarnation, latest_checkpoint)| Head {
            incarnation,
            latest_checkpoint,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "conversations"))]
    async fn conversations(
        &self,
        tenant: &TenantId,
        page: ListPage<'_>,
    ) -> Result<Vec<ConversationListing>> {
        super::lifecycle::conversations(&self.read_pool, tenant, page).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "export_turns"))]
    async fn export_turns(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        range: (i64, i64),
        limit: u32,
    ) -> Result<Vec<ExportedTurn>> {
        super::lifecycle::export_turns(&self.read_pool, tenant, conversation, range, limit).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "export_checkpoints"))]
    async fn export_checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        range: (i64, i64),
        limit: u32,
    ) -> Result<Vec<ExportedCheckpoint>> {
        super::lifecycle::export_checkpoints(&self.read_pool, tenant, conversation, range, limit)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "idle_conversations"))]
    async fn idle_conversations(
        &self,
        tenants: TenantFilter<'_>,
        idle_since: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<(TenantId, ConversationId)>> {
        // On the primary: what it finds is erased there next.
        super::lifecycle::idle_conversations(&self.primary, tenants, idle_since, limit).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "conversation"))]
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
             WHERE c.tenant = $1 AND c.conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&self.read_pool)
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
            rejected_streak: u32::try_from(row.try_get::<i32, _>("rejected_streak")?)
                .map_err(Error::invariant)?,
            facts_version: row.try_get("facts_version")?,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "turn"))]
    async fn turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
    ) -> Result<Option<StoredTurn>> {
        let row = sqlx::query(
            "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id, created_at \
             FROM turns WHERE tenant = $1 AND conversation = $2 AND id = $3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(id)
        .fetch_optional(&self.read_pool)
        .await?;
        row.as_ref().map(super::tx::stored_turn).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "range_facts"))]
    async fn range_facts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> Result<Vec<TurnFacts>> {
        let mut conn = self.read_pool.acquire().await?;
        super::tx::turn_facts(&mut conn, tenant, conversation, from, to).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "turn_sizes"))]
    async fn turn_sizes(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        limit: u32,
    ) -> Result<Vec<TurnSize>> {
        sqlx::query("SELECT id, role, tokens, pinned FROM turns WHERE tenant = $1 AND conversation = $2 AND id >= $3 ORDER BY id LIMIT $4")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(from)
            .bind(i64::from(limit))
            .fetch_all(&self.read_pool)
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

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "token_counts_from"))]
    async fn token_counts_from(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> Result<Vec<(i64, Role, u32)>> {
        sqlx::query("SELECT id, role, tokens FROM turns WHERE tenant = $1 AND conversation = $2 AND id >= $3 ORDER BY id")
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(from)
            .fetch_all(&self.read_pool)
            .await?
            .iter()
            .map(|row| Ok((row.try_get("id")?, decode::role(row.try_get("role")?)?, decode::tokens(row.try_get("tokens")?)?)))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "checkpoints"))]
    async fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<CheckpointRow>> {
        let rows = sqlx::query(
            "SELECT checkpoint_id, created_at, verdict FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 AND ($3::int8 IS NULL OR checkpoint_id < $3) \
             ORDER BY checkpoint_id DESC LIMIT $4",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&self.read_pool)
        .await?;
        rows.iter()
            .map(|row| {
                // The listing's items leave the per-turn detail out (service::reads).
                let verdict = verdict_of(row)?;
                Ok(CheckpointRow {
                    checkpoint_id: row.try_get("checkpoint_id")?,
                    created_at: row.try_get("created_at")?,
                    summary: None,
                    verdict,
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "checkpoint"))]
    async fn checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> Result<Option<CheckpointRow>> {
        let row = sqlx::query(
            "SELECT checkpoint_id, created_at, summary, verdict FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 AND checkpoint_id = $3",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(checkpoint_id)
        .fetch_optional(&self.read_pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let verdict = verdict_of(&row)?;
        Ok(Some(CheckpointRow {
            checkpoint_id: row.try_get("checkpoint_id")?,
            created_at: row.try_get("created_at")?,
            summary: Some(decode::text(row.try_get("summary")?)?),
            verdict,
        }))
    }

    /// The turn, its deciding checkpoint, and the summary only when it covers: one lookup of a
    /// batched statement (`reconstructs.rs`).
    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "reconstruct"))]
    async fn reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Result<Option<ReconstructRow>> {
        self.reconstructs.read(tenant, conversation, turn).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(db.system = "postgresql", db.operation.name = "context"))]
    async fn context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<StoredContext> {
        let mut tx = self.read_pool.begin().await?;
        // One snapshot for every read, so the spans name exactly the summaries and turns read.
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *tx)
            .await?;
        let end: Option<i64> = sqlx::query_scalar(
            "SELECT next_id FROM conversations WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(end) = end else {
            return Ok(StoredContext::default());
        };
        let spans = sqlx::query(
            "SELECT checkpoint_id, from_id, advanced_to, \
               ARRAY(SELECT lower(r) FROM unnest(covered) AS r), \
               ARRAY(SELECT upper(r) - 1 FROM unnest(covered) AS r) \
             FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 ORDER BY checkpoint_id",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| {
            let (starts, ends): (Vec<i64>, Vec<i64>) = (row.try_get(3)?, row.try_get(4)?);
            let covered = IdRanges::from_ranges(
                starts
                    .into_iter()
                    .zip(ends)
                    .map(|(s, e)| IdRange::new(s, e)),
            );
            Ok(CheckpointSpan {
                checkpoint_id: row.try_get(0)?,
                from: row.try_get(1)?,
                advanced_to: row.try_get(2)?,
                covered,
            })
        })
        .collect::<Result<Vec<_>>>()?;
        let reads = context::reads(end, &spans);
        let summaries = sqlx::query(
            "SELECT checkpoint_id, summary, summary_tokens FROM checkpoints \
             WHERE tenant = $1 AND conversation = $2 AND checkpoint_id = ANY($3)",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(&reads.summaries)
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
        let turns = sqlx::query(
            "SELECT id, role, tokens, pinned, \
               CASE WHEN id <@ $3::int8multirange THEN content END, \
               CASE WHEN id <@ $3::int8multirange THEN anchors END \
             FROM turns WHERE tenant = $1 AND conversation = $2 ORDER BY id",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(multirange(&reads.verbatim))
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| {
            let content: Option<Vec<u8>> = row.try_get(4)?;
            let anchors: Option<Json<Vec<String>>> = row.try_get(5)?;
            Ok(ContextTurn {
                id: row.try_get(0)?,
                role: decode::role(row.try_get(1)?)?,
                tokens: decode::tokens(row.try_get(2)?)?,
                pinned: row.try_get(3)?,
                content: content.map(decode::text).transpose()?,
                anchors: anchors.map(|Json(a)| a).unwrap_or_default(),
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

/// A checkpoint's verdict: the JSON the service wrote, kept as bytes (migration 0012).
pub(super) fn verdict_of(row: &sqlx::postgres::PgRow) -> Result<Verdict> {
    let bytes: &[u8] = row.try_get("verdict")?;
    serde_json::from_slice(bytes).map_err(Error::invariant)
}

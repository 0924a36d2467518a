//! A conversation's life on Postgres beyond appends and checkpoints: listing, erasure,
//! retention's search for idle conversations, and the reads and restore of export and import.

use super::tx::stored_turn;
use crate::domain::{ConversationId, TenantId};
use crate::store::{
    ConversationListing, Error, ExportedCheckpoint, ExportedTurn, ListPage, Restored, Result,
    TenantFilter, decode,
};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool, Row};

pub(super) async fn conversations(
    pool: &PgPool,
    tenant: &TenantId,
    page: ListPage<'_>,
) -> Result<Vec<ConversationListing>> {
    sqlx::query(
        "SELECT conversation, next_id, latest_checkpoint, last_append_at FROM conversations \
         WHERE tenant = $1 AND ($2::text IS NULL OR starts_with(conversation, $2)) \
           AND ($3::text IS NULL OR conversation > $3) \
         ORDER BY conversation COLLATE \"C\" LIMIT $4",
    )
    .bind(tenant.as_str())
    .bind(page.prefix)
    .bind(page.after)
    .bind(i64::from(page.limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(|row| {
        Ok(ConversationListing {
            conversation: row.try_get(0)?,
            next_id: row.try_get(1)?,
            latest_checkpoint: row.try_get(2)?,
            last_append_at: row.try_get(3)?,
        })
    })
    .collect()
}

/// Children first: `turns` and `checkpoints` hold foreign keys to the conversation's row.
pub(super) async fn erase(
    conn: &mut PgConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<bool> {
    for table in [
        "search_blocks",
        "search_backlog",
        "term_counts",
        "idempotency_keys",
        "checkpoints",
        "turns",
    ] {
        sqlx::query(&format!(
            "DELETE FROM {table} WHERE tenant = $1 AND conversation = $2"
        ))
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .execute(&mut *conn)
        .await?;
    }
    let deleted = sqlx::query("DELETE FROM conversations WHERE tenant = $1 AND conversation = $2")
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(deleted.rows_affected() > 0)
}

pub(super) async fn idle_conversations(
    pool: &PgPool,
    tenants: TenantFilter<'_>,
    idle_since: DateTime<Utc>,
    limit: u32,
) -> Result<Vec<(TenantId, ConversationId)>> {
    let (only, all_but): (Option<&str>, Vec<&str>) = match tenants {
        TenantFilter::Only(tenant) => (Some(tenant.as_str()), Vec::new()),
        TenantFilter::AllBut(tenants) => (None, tenants.iter().map(TenantId::as_str).collect()),
    };
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT tenant, conversation FROM conversations WHERE last_append_at < $1 \
           AND ($2::text IS NULL OR tenant = $2) AND tenant <> ALL($3::text[]) \
         ORDER BY last_append_at LIMIT $4",
    )
    .bind(idle_since)
    .bind(only)
    .bind(all_but)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(decode::conversation_key).collect()
}

pub(super) async fn export_turns(
    pool: &PgPool,
    tenant: &TenantId,
    conversation: &ConversationId,
    (from, end): (i64, i64),
    limit: u32,
) -> Result<Vec<ExportedTurn>> {
    sqlx::query(
        "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id, created_at, profile \
         FROM turns WHERE tenant = $1 AND conversation = $2 AND id >= $3 AND id < $4 ORDER BY id LIMIT $5",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(from)
    .bind(end)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(|row| {
        Ok(ExportedTurn {
            turn: stored_turn(row)?,
            profile: row.try_get("profile")?,
        })
    })
    .collect()
}

pub(super) async fn export_checkpoints(
    pool: &PgPool,
    tenant: &TenantId,
    conversation: &ConversationId,
    (after, last): (i64, i64),
    limit: u32,
) -> Result<Vec<ExportedCheckpoint>> {
    sqlx::query(
        "SELECT checkpoint_id, created_at, summary, verdict, candidates_used FROM checkpoints \
         WHERE tenant = $1 AND conversation = $2 AND checkpoint_id > $3 AND checkpoint_id <= $4 \
         ORDER BY checkpoint_id LIMIT $5",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(after)
    .bind(last)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(|row| {
        let verdict = super::reads::verdict_of(row)?;
        let used: Option<Vec<u8>> = row.try_get("candidates_used")?;
        Ok(ExportedCheckpoint {
            checkpoint_id: row.try_get("checkpoint_id")?,
            created_at: row.try_get("created_at")?,
            summary: decode::text(row.try_get("summary")?)?,
            verdict,
            candidates_used: decode::candidates_used(used.as_deref())?,
        })
    })
    .collect()
}

pub(super) async fn restore(
    conn: &mut PgConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    restored: &Restored<'_>,
) -> Result<()> {
    let streak = i32::try_from(restored.rejected_streak).map_err(Error::invariant)?;
    sqlx::query(
        "UPDATE conversations SET created_at = $3, last_append_at = $4, rejected_from = $5, \
           rejected_streak = $6 WHERE tenant = $1 AND conversation = $2",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(restored.created_at)
    .bind(restored.last_append_at)
    .bind(restored.rejected_from)
    .bind(streak)
    .execute(&mut *conn)
    .await?;
    for (table, id, times) in [
        ("turns", "id", restored.turn_times),
        ("checkpoints", "checkpoint_id", restored.checkpoint_times),
    ] {
        let (ids, at): (Vec<i64>, Vec<DateTime<Utc>>) = times.iter().copied().unzip();
        sqlx::query(&format!(
            "UPDATE {table} t SET created_at = u.at \
             FROM UNNEST($3::int8[], $4::timestamptz[]) AS u(id, at) \
             WHERE t.tenant = $1 AND t.conversation = $2 AND t.{id} = u.id"
        ))
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(ids)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

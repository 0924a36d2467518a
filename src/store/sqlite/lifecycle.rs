//! A conversation's life on SQLite beyond appends and checkpoints: listing, erasure,
//! retention's search for idle conversations, and the reads and restore of export and import.

use super::tx::stored_turn;
use crate::coverage::TermProfile;
use crate::domain::{ConversationId, TenantId};
use crate::search;
use crate::store::{
    ConversationListing, Error, ExportedCheckpoint, ExportedTurn, ListPage, Restored, Result,
    TenantFilter, decode,
};
use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection, SqlitePool};

/// Timestamps as the schema's defaults write them (`strftime('%Y-%m-%dT%H:%M:%fZ')`), with
/// microseconds, so that text order is time order and an imported time survives whole.
fn timestamp(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

pub(super) async fn conversations(
    pool: &SqlitePool,
    tenant: &TenantId,
    page: ListPage<'_>,
) -> Result<Vec<ConversationListing>> {
    sqlx::query(
        "SELECT conversation, next_id, latest_checkpoint, last_append_at FROM conversations \
         WHERE tenant = ?1 AND (?2 IS NULL OR substr(conversation, 1, length(?2)) = ?2) \
           AND (?3 IS NULL OR conversation > ?3) \
         ORDER BY conversation LIMIT ?4",
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

/// The search index is contentless FTS5, whose rows are deleted by giving back the keys they
/// were indexed under: recomputed from each indexed turn's profile, as the append computed them.
pub(super) async fn erase(
    conn: &mut SqliteConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<bool> {
    let indexed = sqlx::query(
        "SELECT d.doc, t.profile FROM search_docs d JOIN turns t ON t.tenant = d.tenant \
           AND t.conversation = d.conversation AND t.id = d.turn \
         WHERE d.tenant = ?1 AND d.conversation = ?2",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .fetch_all(&mut *conn)
    .await?;
    for row in &indexed {
        let doc: i64 = row.try_get(0)?;
        let profile: Option<Vec<u8>> = row.try_get(1)?;
        let profile = profile.ok_or_else(|| Error::invariant("an indexed turn has no profile"))?;
        let profile = TermProfile::from_bytes(&profile).map_err(Error::invariant)?;
        let keys = search::index_keys(
            search::conversation_key(tenant.as_str(), conversation.as_str()),
            profile.terms(),
        );
        sqlx::query("INSERT INTO turn_search (turn_search, rowid, keys) VALUES ('delete', ?1, ?2)")
            .bind(doc)
            .bind(search::key_document(&keys))
            .execute(&mut *conn)
            .await?;
    }
    // Children first: `turns` and `checkpoints` hold foreign keys to the conversation's row.
    for table in [
        "search_docs",
        "search_backlog",
        "term_counts",
        "idempotency_keys",
        "checkpoints",
        "turns",
    ] {
        sqlx::query(&format!(
            "DELETE FROM {table} WHERE tenant = ?1 AND conversation = ?2"
        ))
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .execute(&mut *conn)
        .await?;
    }
    let deleted = sqlx::query("DELETE FROM conversations WHERE tenant = ?1 AND conversation = ?2")
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(deleted.rows_affected() > 0)
}

pub(super) async fn idle_conversations(
    pool: &SqlitePool,
    tenants: TenantFilter<'_>,
    idle_since: DateTime<Utc>,
    limit: u32,
) -> Result<Vec<(TenantId, ConversationId)>> {
    let (only, all_but) = match tenants {
        TenantFilter::Only(tenant) => (Some(tenant.as_str()), String::from("[]")),
        TenantFilter::AllBut(tenants) => {
            let names: Vec<&str> = tenants.iter().map(TenantId::as_str).collect();
            (None, decode::to_json(&names)?)
        }
    };
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT tenant, conversation FROM conversations WHERE last_append_at < ?1 \
           AND (?2 IS NULL OR tenant = ?2) \
           AND tenant NOT IN (SELECT value FROM json_each(?3)) \
         ORDER BY last_append_at LIMIT ?4",
    )
    .bind(timestamp(idle_since))
    .bind(only)
    .bind(all_but)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(decode::conversation_key).collect()
}

pub(super) async fn export_turns(
    pool: &SqlitePool,
    tenant: &TenantId,
    conversation: &ConversationId,
    (from, end): (i64, i64),
    limit: u32,
) -> Result<Vec<ExportedTurn>> {
    sqlx::query(
        "SELECT id, role, content, tokens, anchors, anchors_given, pinned, external_id, created_at, profile \
         FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id >= ?3 AND id < ?4 ORDER BY id LIMIT ?5",
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
    pool: &SqlitePool,
    tenant: &TenantId,
    conversation: &ConversationId,
    (after, last): (i64, i64),
    limit: u32,
) -> Result<Vec<ExportedCheckpoint>> {
    sqlx::query(
        "SELECT checkpoint_id, created_at, summary, verdict, candidates_used FROM checkpoints \
         WHERE tenant = ?1 AND conversation = ?2 AND checkpoint_id > ?3 AND checkpoint_id <= ?4 \
         ORDER BY checkpoint_id LIMIT ?5",
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
        let used: Option<Vec<u8>> = row.try_get("candidates_used")?;
        Ok(ExportedCheckpoint {
            checkpoint_id: row.try_get("checkpoint_id")?,
            created_at: row.try_get("created_at")?,
            summary: decode::text(row.try_get("summary")?)?,
            verdict: decode::json(row.try_get("verdict")?)?,
            candidates_used: decode::candidates_used(used.as_deref())?,
        })
    })
    .collect()
}

pub(super) async fn restore(
    conn: &mut SqliteConnection,
    tenant: &TenantId,
    conversation: &ConversationId,
    restored: &Restored<'_>,
) -> Result<()> {
    sqlx::query(
        "UPDATE conversations SET created_at = ?3, last_append_at = ?4, rejected_from = ?5, \
           rejected_streak = ?6 WHERE tenant = ?1 AND conversation = ?2",
    )
    .bind(tenant.as_str())
    .bind(conversation.as_str())
    .bind(timestamp(restored.created_at))
    .bind(timestamp(restored.last_append_at))
    .bind(restored.rejected_from)
    .bind(i64::from(restored.rejected_streak))
    .execute(&mut *conn)
    .await?;
    for (table, id, times) in [
        ("turns", "id", restored.turn_times),
        ("checkpoints", "checkpoint_id", restored.checkpoint_times),
    ] {
        let times: Vec<(i64, String)> = times.iter().map(|&(i, at)| (i, timestamp(at))).collect();
        sqlx::query(&format!(
            "UPDATE {table} SET created_at = j.value ->> '$[1]' \
             FROM json_each(?3) AS j \
             WHERE {table}.tenant = ?1 AND {table}.conversation = ?2 \
               AND {table}.{id} = j.value ->> '$[0]'"
        ))
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(decode::to_json(&times)?)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

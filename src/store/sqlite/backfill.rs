//! Term profiles for turns stored before they existed, one conversation per transaction.

use super::tx::add_term_counts;
use crate::store::profiles::{Backfill, BackfillTurn};
use crate::store::{Result, decode};
use sqlx::{Row, SqliteConnection, SqlitePool};

/// Turns read (and written) per round trip.
const CHUNK: i64 = 500;

pub(super) async fn run(pool: &SqlitePool) -> Result<u64> {
    let mut profiled = 0;
    loop {
        // The partial index holds exactly the turns still to do.
        let pending: Vec<(String, String)> = sqlx::query_as(
            "SELECT DISTINCT tenant, conversation FROM turns WHERE profile IS NULL LIMIT 64",
        )
        .fetch_all(pool)
        .await?;
        if pending.is_empty() {
            return Ok(profiled);
        }
        for (tenant, conversation) in pending {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            let n = backfill_conversation(&mut tx, &tenant, &conversation).await?;
            tx.commit().await?;
            tracing::info!(
                turns = n,
                "term profiles computed for a conversation stored before them"
            );
            profiled += n;
        }
    }
}

async fn backfill_conversation(
    conn: &mut SqliteConnection,
    tenant: &str,
    conversation: &str,
) -> Result<u64> {
    // A proposal decided meanwhile on the turns' old facts is decided again.
    sqlx::query("UPDATE conversations SET facts_version = facts_version + 1 WHERE tenant = ?1 AND conversation = ?2")
        .bind(tenant)
        .bind(conversation)
        .execute(&mut *conn)
        .await?;
    let mut backfill = Backfill::default();
    let (mut after, mut profiled) = (-1i64, 0u64);
    loop {
        let rows = sqlx::query(
            "SELECT id, role, anchors, profile, CASE WHEN profile IS NULL THEN content END AS content \
             FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id > ?3 ORDER BY id LIMIT ?4",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(after)
        .bind(CHUNK)
        .fetch_all(&mut *conn)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.try_get("id")?;
        for row in &rows {
            let turn = BackfillTurn {
                id: row.try_get("id")?,
                role: decode::role(row.try_get("role")?)?,
                anchors: decode::json(row.try_get("anchors")?)?,
                profile: row.try_get("profile")?,
                content: row.try_get("content")?,
            };
            let Some(done) = backfill.next(turn)? else {
                continue;
            };
            sqlx::query(
                "UPDATE turns SET anchors_given = ?4, profile = ?5 \
                 WHERE tenant = ?1 AND conversation = ?2 AND id = ?3",
            )
            .bind(tenant)
            .bind(conversation)
            .bind(done.id)
            .bind(done.anchors_given)
            .bind(done.profile.to_bytes())
            .execute(&mut *conn)
            .await?;
            profiled += 1;
        }
    }
    sqlx::query("DELETE FROM term_counts WHERE tenant = ?1 AND conversation = ?2")
        .bind(tenant)
        .bind(conversation)
        .execute(&mut *conn)
        .await?;
    add_term_counts(conn, tenant, conversation, &backfill.counts()).await?;
    Ok(profiled)
}

//! Term profiles for turns stored before they existed, one conversation per transaction.

use crate::store::profiles::{Backfill, BackfillTurn};
use crate::store::{Result, decode};
use sqlx::types::Json;
use sqlx::{PgPool, Postgres, Row, Transaction};

/// Turns read (and written) per round trip.
const CHUNK: i64 = 500;

pub(super) async fn run(pool: &PgPool) -> Result<u64> {
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
            let mut tx = pool.begin().await?;
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
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    conversation: &str,
) -> Result<u64> {
    // Appends to the conversation wait, so its counts are rebuilt from a log that holds still;
    // a proposal decided meanwhile on the turns' old facts is decided again.
    sqlx::query("UPDATE conversations SET facts_version = facts_version + 1 WHERE tenant = $1 AND conversation = $2")
        .bind(tenant)
        .bind(conversation)
        .execute(&mut **tx)
        .await?;
    let mut backfill = Backfill::default();
    let (mut after, mut profiled) = (-1i64, 0u64);
    loop {
        let rows = sqlx::query(
            "SELECT id, role, anchors, profile, CASE WHEN profile IS NULL THEN content END AS content \
             FROM turns WHERE tenant = $1 AND conversation = $2 AND id > $3 ORDER BY id LIMIT $4",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(after)
        .bind(CHUNK)
        .fetch_all(&mut **tx)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.try_get("id")?;
        let (mut ids, mut given, mut profiles) = (Vec::new(), Vec::new(), Vec::new());
        for row in &rows {
            let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
            let turn = BackfillTurn {
                id: row.try_get("id")?,
                role: decode::role(row.try_get("role")?)?,
                anchors,
                profile: row.try_get("profile")?,
                content: row.try_get("content")?,
            };
            if let Some(done) = backfill.next(turn)? {
                ids.push(done.id);
                given.push(done.anchors_given);
                profiles.push(done.profile.to_bytes());
            }
        }
        profiled += ids.len() as u64;
        sqlx::query(
            "UPDATE turns t SET anchors_given = u.given, profile = u.profile \
             FROM UNNEST($3::int8[], $4::bool[], $5::bytea[]) AS u(id, given, profile) \
             WHERE t.tenant = $1 AND t.conversation = $2 AND t.id = u.id",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(ids)
        .bind(given)
        .bind(profiles)
        .execute(&mut **tx)
        .await?;
    }
    super::term_buckets::rebuild(tx, tenant, conversation, &backfill.counts()).await?;
    Ok(profiled)
}

//! Term profiles for turns stored before they existed, one conversation per transaction.

use super::SqliteStore;
use super::turns::add_term_counts;
use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::{Backfill, BackfillTurn};
use crate::store::{decode_json, parse_role};
use sqlx::{Row, Sqlite, Transaction};

/// Turns read (and written) per round trip.
const CHUNK: i64 = 500;

impl SqliteStore {
    pub(super) async fn backfill(&self) -> Result<u64, sqlx::Error> {
        let mut profiled = 0;
        loop {
            // The partial index holds exactly the turns still to do.
            let pending: Vec<(String, String)> = sqlx::query_as(
                "SELECT DISTINCT tenant, conversation FROM turns WHERE profile IS NULL LIMIT 64",
            )
            .fetch_all(&self.pool)
            .await?;
            if pending.is_empty() {
                return Ok(profiled);
            }
            for (tenant, conversation) in pending {
                let (Ok(tenant), Ok(conversation)) = (
                    TenantId::parse(&tenant),
                    ConversationId::parse(&conversation),
                ) else {
                    return Err(sqlx::Error::Decode(
                        format!("stored names {tenant:?}/{conversation:?} do not parse").into(),
                    ));
                };
                let mut tx = self.begin_write().await?;
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
}

async fn backfill_conversation(
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<u64, sqlx::Error> {
    let mut backfill = Backfill::default();
    let (mut after, mut profiled) = (-1i64, 0u64);
    loop {
        let rows = sqlx::query(
            "SELECT id, role, anchors, profile, CASE WHEN profile IS NULL THEN content END AS content \
             FROM turns WHERE tenant = ?1 AND conversation = ?2 AND id > ?3 ORDER BY id LIMIT ?4",
        )
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .bind(after)
        .bind(CHUNK)
        .fetch_all(&mut **tx)
        .await?;
        let Some(last) = rows.last() else { break };
        after = last.try_get("id")?;
        for row in &rows {
            let turn = BackfillTurn {
                id: row.try_get("id")?,
                role: parse_role(row.try_get("role")?)?,
                anchors: decode_json(row.try_get("anchors")?)?,
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
            .bind(tenant.as_str())
            .bind(conversation.as_str())
            .bind(done.id)
            .bind(done.anchors_given)
            .bind(done.profile.to_bytes())
            .execute(&mut **tx)
            .await?;
            profiled += 1;
        }
    }
    sqlx::query("DELETE FROM term_counts WHERE tenant = ?1 AND conversation = ?2")
        .bind(tenant.as_str())
        .bind(conversation.as_str())
        .execute(&mut **tx)
        .await?;
    add_term_counts(tx, tenant, conversation, &backfill.counts()).await?;
    Ok(profiled)
}

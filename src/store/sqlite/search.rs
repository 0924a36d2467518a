//! Search reads and the search-index backfill on SQLite: FTS5 over each turn's index keys.

use crate::coverage::terms::TermKey;
use crate::coverage::{Role, TermProfile};
use crate::search::{self, Posting, Scope};
use crate::store::{Error, Result, decode};
use sqlx::{Row, SqliteConnection, SqlitePool};

/// Indexes one turn: what a hit needs in `search_docs`, its keys in the FTS5 table under that
/// row.
pub(super) async fn index_turn(
    conn: &mut SqliteConnection,
    tenant: &str,
    conversation: &str,
    (turn, role, tokens, profile): (i64, Role, u32, &TermProfile),
) -> Result<()> {
    let doc: i64 = sqlx::query_scalar(
        "INSERT INTO search_docs (tenant, conversation, turn, role, tokens) \
         VALUES (?1, ?2, ?3, ?4, ?5) RETURNING doc",
    )
    .bind(tenant)
    .bind(conversation)
    .bind(turn)
    .bind(role.as_str())
    .bind(i64::from(tokens))
    .fetch_one(&mut *conn)
    .await?;
    let keys = search::index_keys(
        search::conversation_key(tenant, conversation),
        profile.terms(),
    );
    sqlx::query("INSERT INTO turn_search (rowid, keys) VALUES (?1, ?2)")
        .bind(doc)
        .bind(search::key_document(&keys))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

pub(super) async fn postings(
    pool: &SqlitePool,
    tenant: &str,
    scope: Scope<'_>,
    keys: &[TermKey],
    per_key: u32,
) -> Result<Vec<Vec<Posting>>> {
    let (conversation, prefix) = match scope {
        Scope::Conversation(c) => (Some(c), None),
        Scope::Tenant {
            conversation_prefix,
        } => (None, conversation_prefix),
    };
    // One read transaction, so every key sees the same log.
    let mut conn = pool.begin().await?;
    let mut lists = Vec::with_capacity(keys.len());
    for &key in keys {
        // The scope is checked again on the rows, since keys are hashes.
        let rows = sqlx::query(
            "SELECT d.conversation, d.turn, d.role, d.tokens \
             FROM turn_search s JOIN search_docs d ON d.doc = s.rowid \
             WHERE turn_search MATCH ?1 AND d.tenant = ?2 \
               AND (?3 IS NULL OR d.conversation = ?3) \
               AND (?4 IS NULL OR substr(d.conversation, 1, length(?4)) = ?4) \
             LIMIT ?5",
        )
        .bind(match scope.key(tenant) {
            // FTS5 ANDs the tokens: the conversation's turns that hold the term.
            Some(scope) => format!("{} {}", search::key_token(scope), search::key_token(key)),
            None => search::key_token(key),
        })
        .bind(tenant)
        .bind(conversation)
        .bind(prefix)
        .bind(i64::from(per_key))
        .fetch_all(&mut *conn)
        .await?;
        let list = (rows.iter())
            .map(|row| {
                Ok(Posting {
                    conversation: row.try_get(0)?,
                    turn: row.try_get(1)?,
                    role: decode::role(row.try_get(2)?)?,
                    tokens: decode::tokens(row.try_get(3)?)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        lists.push(list);
    }
    conn.commit().await?;
    Ok(lists)
}

pub(super) async fn tenant_turns(
    pool: &SqlitePool,
    tenant: &str,
    prefix: Option<&str>,
) -> Result<u64> {
    let turns: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(next_id), 0) FROM conversations \
         WHERE tenant = ?1 AND (?2 IS NULL OR substr(conversation, 1, length(?2)) = ?2)",
    )
    .bind(tenant)
    .bind(prefix)
    .fetch_one(pool)
    .await?;
    Ok(u64::try_from(turns).unwrap_or(0))
}

/// Turns indexed per transaction.
const CHUNK: i64 = 1000;

/// Indexes the turns the migration put in the backlog, from their profiles (run after the
/// profile backfill, so every turn has one).
pub(super) async fn backfill(pool: &SqlitePool) -> Result<u64> {
    let mut indexed = 0;
    loop {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(
            "SELECT b.tenant, b.conversation, b.turn, t.role, t.tokens, t.profile FROM search_backlog b \
             JOIN turns t ON t.tenant = b.tenant AND t.conversation = b.conversation AND t.id = b.turn \
             LIMIT ?1",
        )
        .bind(CHUNK)
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(indexed);
        }
        for row in &rows {
            let (tenant, conversation, turn): (String, String, i64) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            let role = decode::role(row.try_get(3)?)?;
            let tokens = decode::tokens(row.try_get(4)?)?;
            let profile: Option<Vec<u8>> = row.try_get(5)?;
            let profile = profile.ok_or_else(|| Error::invariant("a turn without a profile"))?;
            let profile = TermProfile::from_bytes(&profile).map_err(Error::invariant)?;
            index_turn(
                &mut tx,
                &tenant,
                &conversation,
                (turn, role, tokens, &profile),
            )
            .await?;
            sqlx::query(
                "DELETE FROM search_backlog WHERE tenant = ?1 AND conversation = ?2 AND turn = ?3",
            )
            .bind(&tenant)
            .bind(&conversation)
            .bind(turn)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        indexed += rows.len() as u64;
    }
}

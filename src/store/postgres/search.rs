//! Search reads and the search-index backfill on Postgres: `turn_search`, a GIN index over
//! each turn's index keys (its conversation's and its terms').

use crate::coverage::terms::TermKey;
use crate::coverage::{Role, TermProfile};
use crate::search::{self, Posting, Scope};
use crate::store::{Error, Result, decode};
use sqlx::{PgConnection, PgPool, Row};

/// A key as Postgres stores it: the same 32 bits, as an `integer`.
fn stored(key: TermKey) -> i32 {
    key.0 as i32
}

/// Each turn's index keys in the text form of an `integer[]`, cast by the server (arrays of
/// different lengths cannot travel as one two-dimensional array).
pub(super) fn keys_texts<'a>(
    tenant: &str,
    conversation: &str,
    profiles: impl Iterator<Item = &'a TermProfile>,
) -> Vec<String> {
    use std::fmt::Write;
    profiles
        .map(|profile| {
            let keys = search::index_keys(tenant, conversation, profile.terms());
            let mut text = String::with_capacity(2 + keys.len() * 11);
            text.push('{');
            for (i, &key) in keys.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(text, "{comma}{}", stored(key));
            }
            text.push('}');
            text
        })
        .collect()
}

/// Indexes turns of one conversation stored before the index: one INSERT over UNNEST.
async fn index_turns(
    conn: &mut PgConnection,
    tenant: &str,
    conversation: &str,
    turns: &[(i64, Role, u32, TermProfile)],
) -> Result<()> {
    let ids: Vec<i64> = turns.iter().map(|t| t.0).collect();
    let roles: Vec<&str> = turns.iter().map(|t| t.1.as_str()).collect();
    let tokens: Vec<i64> = turns.iter().map(|t| i64::from(t.2)).collect();
    let keys = keys_texts(tenant, conversation, turns.iter().map(|t| &t.3));
    sqlx::query(
        "INSERT INTO turn_search (tenant, conversation, turn, role, tokens, keys) \
         SELECT $1, $2, u.id, u.role, u.tokens, u.keys::int4[] \
         FROM UNNEST($3::int8[], $4::text[], $5::int8[], $6::text[]) AS u(id, role, tokens, keys)",
    )
    .bind(tenant)
    .bind(conversation)
    .bind(ids)
    .bind(roles)
    .bind(tokens)
    .bind(keys)
    .execute(conn)
    .await?;
    Ok(())
}

pub(super) async fn postings(
    pool: &PgPool,
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
    let wanted: Vec<i32> = keys.iter().map(|&k| stored(k)).collect();
    // Per term, one GIN lookup of its key (and the conversation's, which the index
    // intersects with it); the scope is checked again on the rows, since keys are hashes.
    let scope_keys: Vec<i32> = scope.key(tenant).into_iter().map(stored).collect();
    let rows = sqlx::query(
        "SELECT k.i, s.conversation, s.turn, s.role, s.tokens \
         FROM unnest($2::int4[]) WITH ORDINALITY AS k(key, i) \
         CROSS JOIN LATERAL ( \
           SELECT conversation, turn, role, tokens FROM turn_search \
           WHERE keys @> (ARRAY[k.key] || $6::int4[]) AND tenant = $1 \
             AND ($3::text IS NULL OR conversation = $3) \
             AND ($4::text IS NULL OR starts_with(conversation, $4)) \
           LIMIT $5) s",
    )
    .bind(tenant)
    .bind(&wanted)
    .bind(conversation)
    .bind(prefix)
    .bind(i64::from(per_key))
    .bind(&scope_keys)
    .fetch_all(pool)
    .await?;
    let mut lists = vec![Vec::new(); keys.len()];
    for row in rows {
        let i: i64 = row.try_get(0)?;
        let list = (usize::try_from(i - 1).ok())
            .and_then(|i| lists.get_mut(i))
            .ok_or_else(|| Error::invariant(format!("search key index {i} out of range")))?;
        list.push(Posting {
            conversation: row.try_get(1)?,
            turn: row.try_get(2)?,
            role: decode::role(row.try_get(3)?)?,
            tokens: decode::tokens(row.try_get(4)?)?,
        });
    }
    Ok(lists)
}

pub(super) async fn tenant_turns(pool: &PgPool, tenant: &str, prefix: Option<&str>) -> Result<u64> {
    let turns: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(next_id), 0)::int8 FROM conversations \
         WHERE tenant = $1 AND ($2::text IS NULL OR starts_with(conversation, $2))",
    )
    .bind(tenant)
    .bind(prefix)
    .fetch_one(pool)
    .await?;
    Ok(u64::try_from(turns).unwrap_or(0))
}

/// Backlog turns indexed per transaction.
const CHUNK: i64 = 1000;

/// Indexes the turns the migration put in the backlog, from their profiles (run after the
/// profile backfill, so every turn has one), one conversation's chunk per transaction.
pub(super) async fn backfill(pool: &PgPool) -> Result<u64> {
    let mut indexed = 0;
    loop {
        let mut tx = pool.begin().await?;
        let n = backfill_chunk(&mut tx).await?;
        tx.commit().await?;
        if n == 0 {
            return Ok(indexed);
        }
        indexed += n;
    }
}

async fn backfill_chunk(conn: &mut PgConnection) -> Result<u64> {
    let Some((tenant, conversation)): Option<(String, String)> =
        sqlx::query_as("SELECT tenant, conversation FROM search_backlog LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?
    else {
        return Ok(0);
    };
    let done: Vec<i64> = sqlx::query_scalar(
        "DELETE FROM search_backlog \
         WHERE (tenant, conversation, turn) IN ( \
           SELECT tenant, conversation, turn FROM search_backlog \
           WHERE tenant = $1 AND conversation = $2 ORDER BY turn LIMIT $3) \
         RETURNING turn",
    )
    .bind(&tenant)
    .bind(&conversation)
    .bind(CHUNK)
    .fetch_all(&mut *conn)
    .await?;
    let rows = sqlx::query(
        "SELECT id, role, tokens, profile FROM turns \
         WHERE tenant = $1 AND conversation = $2 AND id = ANY($3)",
    )
    .bind(&tenant)
    .bind(&conversation)
    .bind(&done)
    .fetch_all(&mut *conn)
    .await?;
    let mut turns = Vec::with_capacity(rows.len());
    for row in &rows {
        let profile: Option<Vec<u8>> = row.try_get(3)?;
        let profile = profile.ok_or_else(|| Error::invariant("a turn without a profile"))?;
        turns.push((
            row.try_get::<i64, _>(0)?,
            decode::role(row.try_get(1)?)?,
            decode::tokens(row.try_get(2)?)?,
            TermProfile::from_bytes(&profile).map_err(Error::invariant)?,
        ));
    }
    index_turns(conn, &tenant, &conversation, &turns).await?;
    Ok(done.len() as u64)
}

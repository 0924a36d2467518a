//! Search reads and the search-index backfill on Postgres: `search_blocks`, a GIN index over
//! the keys (its conversation's and its terms') of runs of up to 64 consecutive turns, with a
//! mask per key that says which of the run's turns hold it.

use crate::coverage::terms::TermKey;
use crate::coverage::{Role, TermProfile};
use crate::search::{self, Posting, Scope};
use crate::store::{Error, Result, decode};
use sqlx::{PgConnection, PgPool, Row};

/// Most turns a block holds: one bit each in a `bigint` mask.
const BLOCK_TURNS: usize = 64;
/// Most keys a block holds, unless one turn alone has more: 12 bytes each (key and mask), so a
/// block of 64 turns stays under the table's tuple target (8,160 bytes) and is stored as it is.
/// A compressed block costs every search that reads it a decompression (3× the read).
const BLOCK_KEYS: usize = 512;

/// A key as Postgres stores it: the same 32 bits, as an `integer`.
fn stored(key: TermKey) -> i32 {
    key.0 as i32
}

/// A role as `search_blocks.roles` stores it.
fn role_code(role: Role) -> i16 {
    match role {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    }
}

fn role_of(code: i16) -> Result<Role> {
    match code {
        0 => Ok(Role::System),
        1 => Ok(Role::User),
        2 => Ok(Role::Assistant),
        3 => Ok(Role::Tool),
        _ => Err(Error::invariant(format!("search role code {code}"))),
    }
}

/// A turn as the index takes it: id, role, tokens, term profile.
pub(super) type IndexedTurn<'a> = (i64, Role, u32, &'a TermProfile);

/// The `search_blocks` rows of some turns of one conversation. Arrays of different lengths
/// cannot travel as one two-dimensional array, so each block's arrays are consecutive slices of
/// one flat array per column, bound in binary and cut by the server ([`insert_blocks_sql`]): their text
/// forms cost the service the formatting and Postgres the parsing, 1.4 µs a turn of its time.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Blocks {
    pub first: Vec<i64>,
    /// Per block, the 1-based bounds of its slice of `keys` and `masks`, both ends included.
    pub key_from: Vec<i32>,
    pub key_to: Vec<i32>,
    /// Per block, the 1-based bounds of its slice of `roles` and `tokens`, both ends included.
    pub turn_from: Vec<i32>,
    pub turn_to: Vec<i32>,
    pub keys: Vec<i32>,
    pub masks: Vec<i64>,
    pub roles: Vec<i16>,
    pub tokens: Vec<i64>,
}

impl Blocks {
    /// Block `i`'s keys, masks, roles and tokens, as its row will hold them.
    #[cfg(test)]
    fn block(&self, i: usize) -> (&[i32], &[i64], &[i16], &[i64]) {
        let keys = self.key_from[i] as usize - 1..self.key_to[i] as usize;
        let turns = self.turn_from[i] as usize - 1..self.turn_to[i] as usize;
        (
            &self.keys[keys.clone()],
            &self.masks[keys],
            &self.roles[turns.clone()],
            &self.tokens[turns],
        )
    }
}

/// The `INSERT` of [`Blocks`] as `search_blocks` rows: `$1`, `$2` the tenant and conversation,
/// `$n`…`$n+8` its columns in the order of [`Blocks`]' fields, `n` the first.
pub(super) fn insert_blocks_sql(n: usize) -> String {
    let [first, kf, kt, tf, tt, keys, masks, roles, tokens] = std::array::from_fn(|i| n + i);
    format!(
        "INSERT INTO search_blocks (tenant, conversation, first_turn, keys, masks, roles, tokens) \
         SELECT $1, $2, b.first, (${keys}::int4[])[b.kf:b.kt], (${masks}::int8[])[b.kf:b.kt], \
           (${roles}::int2[])[b.tf:b.tt], (${tokens}::int8[])[b.tf:b.tt] \
         FROM UNNEST(${first}::int8[], ${kf}::int4[], ${kt}::int4[], ${tf}::int4[], ${tt}::int4[]) \
           AS b(first, kf, kt, tf, tt)"
    )
}

/// Binds [`Blocks`]' columns, in the order [`insert_blocks_sql`] reads them.
pub(super) fn bind_blocks<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    blocks: Blocks,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    query
        .bind(blocks.first)
        .bind(blocks.key_from)
        .bind(blocks.key_to)
        .bind(blocks.turn_from)
        .bind(blocks.turn_to)
        .bind(blocks.keys)
        .bind(blocks.masks)
        .bind(blocks.roles)
        .bind(blocks.tokens)
}

/// `turns`, in id order, cut into blocks of consecutive ids, at most [`BLOCK_TURNS`] turns and
/// [`BLOCK_KEYS`] keys each: per block the sorted union of its turns' index keys, and per key
/// the mask of the turns holding it.
pub(super) fn blocks<'a>(
    tenant: &str,
    conversation: &str,
    turns: impl IntoIterator<Item = IndexedTurn<'a>>,
) -> Blocks {
    let mut out = Blocks::default();
    let mut run: Vec<(IndexedTurn<'a>, Vec<i32>)> = Vec::with_capacity(BLOCK_TURNS);
    let mut union: foldhash::HashSet<i32> = Default::default();
    let conversation = search::conversation_key(tenant, conversation);
    for turn in turns {
        let keys: Vec<i32> = (search::index_keys(conversation, turn.3.terms()).into_iter())
            .map(stored)
            .collect();
        let follows = run.last().is_some_and(|(last, _)| last.0 + 1 == turn.0);
        let new_keys = keys.iter().filter(|k| !union.contains(k)).count();
        let full = run.len() == BLOCK_TURNS || union.len() + new_keys > BLOCK_KEYS;
        if !run.is_empty() && (!follows || full) {
            push_block(&mut out, &run);
            run.clear();
            union.clear();
        }
        union.extend(keys.iter().copied());
        run.push((turn, keys));
    }
    if !run.is_empty() {
        push_block(&mut out, &run);
    }
    out
}

fn push_block(out: &mut Blocks, run: &[(IndexedTurn<'_>, Vec<i32>)]) {
    let mut held: Vec<(i32, u64)> = Vec::new();
    for (bit, (_, keys)) in run.iter().enumerate() {
        held.extend(keys.iter().map(|&key| (key, 1u64 << bit)));
    }
    held.sort_unstable_by_key(|&(key, _)| key);
    let mut keys: Vec<i32> = Vec::with_capacity(held.len());
    let mut masks: Vec<i64> = Vec::with_capacity(held.len());
    for (key, bit) in held {
        match (keys.last(), masks.last_mut()) {
            (Some(&last), Some(mask)) if last == key => *mask |= bit as i64,
            _ => {
                keys.push(key);
                masks.push(bit as i64);
            }
        }
    }
    out.first.push(run[0].0.0);
    // Postgres bounds: 1-based, both ends included (an empty slice is `[n + 1:n]`).
    out.key_from.push(bound(out.keys.len() + 1));
    out.keys.extend(keys);
    out.masks.extend(masks);
    out.key_to.push(bound(out.keys.len()));
    out.turn_from.push(bound(out.roles.len() + 1));
    out.roles.extend(run.iter().map(|(t, _)| role_code(t.1)));
    out.tokens.extend(run.iter().map(|(t, _)| i64::from(t.2)));
    out.turn_to.push(bound(out.roles.len()));
}

/// An array subscript: a batch's blocks hold far fewer than 2³¹ keys (appends are chunked by
/// bytes, the backfill by turns).
fn bound(index: usize) -> i32 {
    i32::try_from(index).expect("a batch's blocks hold fewer than 2^31 keys")
}

/// Indexes turns of one conversation stored before the index: one INSERT over UNNEST.
async fn index_turns(
    conn: &mut PgConnection,
    tenant: &str,
    conversation: &str,
    turns: &[(i64, Role, u32, TermProfile)],
) -> Result<()> {
    let blocks = blocks(
        tenant,
        conversation,
        turns
            .iter()
            .map(|(id, role, tokens, profile)| (*id, *role, *tokens, profile)),
    );
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| insert_blocks_sql(3));
    let query = sqlx::query(&SQL).bind(tenant).bind(conversation);
    bind_blocks(query, blocks).execute(conn).await?;
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
    // intersects with it); the scope is checked again on the rows, since keys are hashes. Each
    // block's mask for the term is found once (`keys` is sorted and distinct, so width_bucket's
    // binary search gives the key's position; OFFSET 0 keeps the mask a column) and unrolled
    // into its turns in the target list, so the LIMIT stops reading blocks once it has enough.
    let scope_keys: Vec<i32> = scope.key(tenant).into_iter().map(stored).collect();
    let rows = sqlx::query(
        "SELECT k.i, s.conversation, s.first_turn + s.bit, s.roles[s.bit + 1], s.tokens[s.bit + 1] \
         FROM unnest($2::int4[]) WITH ORDINALITY AS k(key, i) \
         CROSS JOIN LATERAL ( \
           SELECT b.conversation, b.first_turn, b.roles, b.tokens, \
             unnest(ARRAY(SELECT bit FROM generate_series(0, 63) bit WHERE (b.mask >> bit) & 1 = 1)) AS bit \
           FROM (SELECT conversation, first_turn, roles, tokens, masks[width_bucket(k.key, keys)] AS mask \
             FROM search_blocks \
             WHERE keys @> (ARRAY[k.key] || $6::int4[]) AND tenant = $1 \
               AND ($3::text IS NULL OR conversation = $3) \
               AND ($4::text IS NULL OR starts_with(conversation, $4)) \
             OFFSET 0) b \
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
            role: role_of(row.try_get(3)?)?,
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
         WHERE tenant = $1 AND conversation = $2 AND id = ANY($3) ORDER BY id",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(terms: &[u32]) -> TermProfile {
        TermProfile::new([], terms.iter().map(|&t| TermKey(t)))
    }

    /// The blocks of turns `ids` (each a user turn of 7 tokens holding `terms`).
    fn blocks_of(ids: &[i64], terms: &[u32]) -> Blocks {
        let profile = profile(terms);
        blocks(
            "t",
            "c",
            ids.iter().map(|&id| (id, Role::User, 7, &profile)),
        )
    }

    #[test]
    fn consecutive_turns_share_a_block_of_at_most_64_and_a_gap_starts_a_new_one() {
        for (ids, firsts) in [
            ((0..64).collect::<Vec<i64>>(), vec![0]),
            ((0..65).collect(), vec![0, 64]),
            ((10..140).collect(), vec![10, 74, 138]),
            (vec![3, 4, 6, 7], vec![3, 6]),
            (vec![5], vec![5]),
            (vec![], vec![]),
        ] {
            let blocks = blocks_of(&ids, &[1]);
            assert_eq!(blocks.first, firsts, "{ids:?}");
            for column in [
                &blocks.key_from,
                &blocks.key_to,
                &blocks.turn_from,
                &blocks.turn_to,
            ] {
                assert_eq!(column.len(), firsts.len());
            }
            // Each block's turns are its slice of the flat columns, in order.
            let turns: Vec<usize> = (0..firsts.len()).map(|i| blocks.block(i).2.len()).collect();
            let expected: Vec<usize> = (0..firsts.len())
                .map(|i| {
                    let end = firsts
                        .get(i + 1)
                        .copied()
                        .unwrap_or(ids.last().map_or(0, |l| l + 1));
                    ids.iter()
                        .filter(|&&id| id >= firsts[i] && id < end)
                        .count()
                })
                .collect();
            assert_eq!(turns, expected, "{ids:?}");
            assert_eq!(blocks.roles.len(), ids.len());
        }
    }

    #[test]
    fn a_block_holds_the_sorted_union_of_its_keys_with_a_mask_of_the_turns_holding_each() {
        let (a, b) = (profile(&[30, 10]), profile(&[10, 20]));
        let conversation = stored(search::conversation_key("t", "c"));
        let turns = [
            (0, Role::User, 5, &a),
            (1, Role::Tool, 9, &b),
            (2, Role::Assistant, 0, &a),
        ];
        let blocks = blocks("t", "c", turns);
        let mut expected = [(conversation, 0b111), (10, 0b111), (20, 0b010), (30, 0b101)];
        expected.sort();
        let keys: Vec<i32> = expected.iter().map(|e| e.0).collect();
        let masks: Vec<i64> = expected.iter().map(|e| e.1).collect();
        assert_eq!(
            blocks.block(0),
            (&keys[..], &masks[..], &[1, 3, 2][..], &[5, 9, 0][..])
        );
    }

    #[test]
    fn a_turn_whose_new_keys_would_take_a_block_past_512_starts_the_next_one() {
        // With the conversation's key: 301 keys a turn, 300 of them its own.
        let own = |turn: u32| profile(&(0..300).map(|k| turn * 1000 + k).collect::<Vec<_>>());
        let (a, b, shared) = (own(1), own(2), profile(&(1000..1200).collect::<Vec<_>>()));
        let big = profile(&(0..700).collect::<Vec<_>>());
        let (fits, one_over) = (
            profile(&(5000..5211).collect::<Vec<_>>()),
            profile(&(5000..5212).collect::<Vec<_>>()),
        );
        for (turns, firsts) in [
            (vec![&a, &b], vec![0, 1]),
            // 301 keys and 211 new ones: 512, which fit; 513 do not.
            (vec![&a, &fits], vec![0]),
            (vec![&a, &one_over], vec![0, 1]),
            // The middle turn holds only keys of the first's: the two make one block.
            (vec![&a, &shared, &b], vec![0, 2]),
            (vec![&big, &a], vec![0, 1]),
            (vec![&a, &big, &b], vec![0, 1, 2]),
        ] {
            let blocks = blocks(
                "t",
                "c",
                turns
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (i as i64, Role::User, 1, *p)),
            );
            assert_eq!(blocks.first, firsts);
            for i in 0..firsts.len() {
                let n = blocks.block(i).0.len();
                assert!(n <= BLOCK_KEYS || n == 701, "{n} keys");
            }
        }
    }

    #[test]
    fn the_64th_turn_of_a_block_is_its_masks_sign_bit() {
        let ids: Vec<i64> = (0..64).collect();
        assert_eq!(blocks_of(&ids, &[1]).masks, [-1, -1]);
        let last_only = profile(&[2]);
        let common = profile(&[]);
        let turns = (0..64).map(|id| {
            (
                id,
                Role::User,
                1,
                if id == 63 { &last_only } else { &common },
            )
        });
        let masks = blocks("t", "c", turns).masks;
        assert!(masks.contains(&i64::MIN), "{masks:?}");
    }

    #[test]
    fn role_codes_decode_to_their_roles_and_an_unknown_code_is_an_invariant_broken() {
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            assert_eq!(role_of(role_code(role)).unwrap(), role);
        }
        assert!(role_of(4).is_err());
        assert!(role_of(-1).is_err());
    }
}

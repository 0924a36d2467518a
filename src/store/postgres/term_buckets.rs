//! A conversation's candidate counts in [`BUCKETS`] rows of packed counts (migration 0011): an
//! append rewrites the few rows its keys fall in, instead of raising or starting a row per key
//! (about 2,000 for a batch of 500 turns, a fifth of what the append cost Postgres).
//!
//! A row's `counts` holds its keys' counts, 8 bytes each (the key, then its count; both
//! big-endian u32), ordered by key. Callers hold the conversation's lock, so a read, merge and
//! write of a row cannot race another append's.

use crate::append::CountsAdded;
use crate::coverage::terms::TermKey;
use crate::store::{Error, Result};
use foldhash::{HashMap, HashSet};
use sqlx::PgConnection;

/// Rows per conversation: a key's top 6 bits name its row.
pub(super) const BUCKETS: u32 = 64;

const ENTRY: usize = 8;

fn bucket_of(key: TermKey) -> i16 {
    (key.0 >> (32 - BUCKETS.trailing_zeros())) as i16
}

/// The `(key, count)` entries of one row, in its order.
fn entries(counts: &[u8]) -> Result<impl Iterator<Item = (u32, u32)> + '_> {
    if counts.len() % ENTRY != 0 {
        return Err(Error::invariant(format!(
            "a term_counts row of {} bytes, not a multiple of {ENTRY}",
            counts.len()
        )));
    }
    Ok(counts.chunks_exact(ENTRY).map(|e| {
        let word = |at: usize| u32::from_be_bytes([e[at], e[at + 1], e[at + 2], e[at + 3]]);
        (word(0), word(4))
    }))
}

/// A row's entries with `added` (ascending by key) added in: counts summed, new keys placed in
/// order. Both inputs are ordered by key, so this is one merge pass.
fn merged(counts: &[u8], added: &[(u32, u32)]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(counts.len() + added.len() * ENTRY);
    let mut push = |(key, count): (u32, u32)| {
        out.extend_from_slice(&key.to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
    };
    let mut old = entries(counts)?.peekable();
    let mut new = added.iter().copied().peekable();
    loop {
        match (old.peek().copied(), new.peek().copied()) {
            (Some((ko, co)), Some((kn, cn))) if ko == kn => {
                push((ko, co.saturating_add(cn)));
                old.next();
                new.next();
            }
            (Some(o), Some(n)) if o.0 < n.0 => push(old.next().unwrap_or(o)),
            (_, Some(n)) => push(new.next().unwrap_or(n)),
            (Some(o), None) => push(old.next().unwrap_or(o)),
            (None, None) => break,
        }
    }
    Ok(out)
}

/// The stored counts of `keys` (keys the conversation never counted are absent).
pub(super) async fn read(
    conn: &mut PgConnection,
    tenant: &str,
    conversation: &str,
    keys: &[TermKey],
) -> Result<HashMap<TermKey, u32>> {
    let wanted: HashSet<u32> = keys.iter().map(|k| k.0).collect();
    let mut counts = HashMap::default();
    for (_, row) in rows(conn, tenant, conversation, keys.iter().copied()).await? {
        for (key, count) in entries(&row)? {
            if wanted.contains(&key) {
                counts.insert(TermKey(key), count);
            }
        }
    }
    Ok(counts)
}

/// Adds `added` to the conversation's counts: each row its keys fall in read, merged and
/// written back, in one statement for all of them.
pub(super) async fn add(
    conn: &mut PgConnection,
    tenant: &str,
    conversation: &str,
    added: &CountsAdded,
) -> Result<()> {
    let mut by_bucket: HashMap<i16, Vec<(u32, u32)>> = HashMap::default();
    for &(key, count) in added.raised.iter().chain(&added.started) {
        by_bucket
            .entry(bucket_of(key))
            .or_default()
            .push((key.0, count));
    }
    if by_bucket.is_empty() {
        return Ok(());
    }
    let touched = by_bucket.values().flatten().map(|&(k, _)| TermKey(k));
    let mut stored: HashMap<i16, Vec<u8>> = rows(conn, tenant, conversation, touched)
        .await?
        .into_iter()
        .collect();
    let mut buckets = Vec::with_capacity(by_bucket.len());
    let mut rows_out = Vec::with_capacity(by_bucket.len());
    for (bucket, mut keys) in by_bucket {
        keys.sort_unstable();
        let row = stored.remove(&bucket).unwrap_or_default();
        rows_out.push(merged(&row, &keys)?);
        buckets.push(bucket);
    }
    sqlx::query(
        "INSERT INTO term_counts (tenant, conversation, bucket, counts) \
         SELECT $1, $2, u.bucket, u.counts FROM UNNEST($3::int2[], $4::bytea[]) AS u(bucket, counts) \
         ON CONFLICT (tenant, conversation, bucket) DO UPDATE SET counts = EXCLUDED.counts",
    )
    .bind(tenant)
    .bind(conversation)
    .bind(buckets)
    .bind(rows_out)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The stored rows of the buckets `keys` fall in.
async fn rows(
    conn: &mut PgConnection,
    tenant: &str,
    conversation: &str,
    keys: impl Iterator<Item = TermKey>,
) -> Result<Vec<(i16, Vec<u8>)>> {
    let mut buckets: Vec<i16> = keys.map(bucket_of).collect();
    buckets.sort_unstable();
    buckets.dedup();
    Ok(sqlx::query_as(
        "SELECT bucket, counts FROM term_counts \
         WHERE tenant = $1 AND conversation = $2 AND bucket = ANY($3::int2[])",
    )
    .bind(tenant)
    .bind(conversation)
    .bind(buckets)
    .fetch_all(&mut *conn)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(entries: &[(u32, u32)]) -> Vec<u8> {
        merged(&[], entries).unwrap()
    }

    fn unpacked(counts: &[u8]) -> Vec<(u32, u32)> {
        entries(counts).unwrap().collect()
    }

    #[test]
    fn a_keys_top_six_bits_name_its_bucket() {
        assert_eq!(bucket_of(TermKey(0)), 0);
        assert_eq!(bucket_of(TermKey((1 << 26) - 1)), 0);
        assert_eq!(bucket_of(TermKey(1 << 26)), 1);
        assert_eq!(bucket_of(TermKey(u32::MAX)), 63);
    }

    #[test]
    fn counts_merge_in_key_order_summing_the_keys_both_hold() {
        let row = packed(&[(5, 1), (9, 2), (0xffff_fff0, 7)]);
        let added = [(1, 4), (9, 3), (10, 1), (0xffff_ffff, 2)];
        assert_eq!(
            unpacked(&merged(&row, &added).unwrap()),
            [
                (1, 4),
                (5, 1),
                (9, 5),
                (10, 1),
                (0xffff_fff0, 7),
                (0xffff_ffff, 2)
            ]
        );
        assert_eq!(unpacked(&merged(&row, &[]).unwrap()), unpacked(&row));
    }

    #[test]
    fn entries_are_big_endian_key_then_count_as_the_migration_packs_them() {
        // int4send(term) || int4send(turns), as migration 0011 wrote the rows it converted.
        let row = [0x80, 0, 0, 1, 0, 0, 0, 3];
        assert_eq!(unpacked(&row), [(0x8000_0001, 3)]);
    }

    #[test]
    fn a_row_that_is_not_whole_entries_is_an_error_not_a_guess() {
        assert!(entries(&[0; 7]).is_err());
        assert!(merged(&[0; 9], &[(1, 1)]).is_err());
    }
}

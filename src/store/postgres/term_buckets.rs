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

/// The rows a transaction has read under its conversation's lock, by bucket (empty for a bucket
/// that has none yet), so that its append merges into them without reading them again. One
/// transaction reads and adds for one conversation only: the append's.
pub(super) type HeldRows = HashMap<i16, Vec<u8>>;

/// The stored counts of `keys` (keys the conversation never counted are absent); the rows they
/// were read from are kept in `held`.
pub(super) async fn read(
    conn: &mut PgConnection,
    held: &mut HeldRows,
    tenant: &str,
    conversation: &str,
    keys: &[TermKey],
) -> Result<HashMap<TermKey, u32>> {
    let wanted: HashSet<u32> = keys.iter().map(|k| k.0).collect();
    let buckets = buckets_of(keys.iter().copied());
    let mut counts = HashMap::default();
    let stored = rows(conn, tenant, conversation, &buckets).await?;
    for (_, row) in &stored {
        for (key, count) in entries(row)? {
            if wanted.contains(&key) {
                counts.insert(TermKey(key), count);
            }
        }
    }
    held.extend(buckets.into_iter().map(|b| (b, Vec::new())));
    held.extend(stored);
    Ok(counts)
}

/// Replaces the conversation's counts with `counts` (the backfill's, rebuilt from its log).
pub(super) async fn rebuild(
    conn: &mut PgConnection,
    tenant: &str,
    conversation: &str,
    counts: &CountsAdded,
) -> Result<()> {
    sqlx::query("DELETE FROM term_counts WHERE tenant = $1 AND conversation = $2")
        .bind(tenant)
        .bind(conversation)
        .execute(&mut *conn)
        .await?;
    let none_left = (0..BUCKETS as i16).map(|b| (b, Vec::new())).collect();
    let (buckets, rows) = counted(none_left, counts)?;
    sqlx::query(&format!("WITH {} SELECT 1", upsert_sql(3)))
        .bind(tenant)
        .bind(conversation)
        .bind(buckets)
        .bind(rows)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// `counted AS (…)`, a common table expression writing the rows [`counted`] returns, bound as
/// `$1` tenant, `$2` conversation, `$n` buckets and `$n+1` rows.
pub(super) fn upsert_sql(n: usize) -> String {
    format!(
        "counted AS (INSERT INTO term_counts (tenant, conversation, bucket, counts) \
           SELECT $1, $2, u.bucket, u.counts FROM UNNEST(${n}::int2[], ${}::bytea[]) AS u(bucket, counts) \
           ON CONFLICT (tenant, conversation, bucket) DO UPDATE SET counts = EXCLUDED.counts)",
        n + 1
    )
}

/// The rows `added` falls in with it merged in, by bucket, from the rows the transaction
/// holds. A bucket it does not hold is an error: writing it would erase the counts in it.
pub(super) fn counted(mut held: HeldRows, added: &CountsAdded) -> Result<(Vec<i16>, Vec<Vec<u8>>)> {
    let mut by_bucket: HashMap<i16, Vec<(u32, u32)>> = HashMap::default();
    for &(key, count) in added.raised.iter().chain(&added.started) {
        by_bucket
            .entry(bucket_of(key))
            .or_default()
            .push((key.0, count));
    }
    let mut buckets = Vec::with_capacity(by_bucket.len());
    let mut counts = Vec::with_capacity(by_bucket.len());
    for (bucket, mut keys) in by_bucket {
        let row = held.remove(&bucket).ok_or_else(|| {
            Error::invariant(format!(
                "counts added to bucket {bucket}, which was not read"
            ))
        })?;
        keys.sort_unstable();
        counts.push(merged(&row, &keys)?);
        buckets.push(bucket);
    }
    Ok((buckets, counts))
}

/// The buckets `keys` fall in, each once.
fn buckets_of(keys: impl Iterator<Item = TermKey>) -> Vec<i16> {
    let mut buckets: Vec<i16> = keys.map(bucket_of).collect();
    buckets.sort_unstable();
    buckets.dedup();
    buckets
}

/// The stored rows of `buckets` (a bucket without counts has none).
async fn rows(
    conn: &mut PgConnection,
    tenant: &str,
    conversation: &str,
    buckets: &[i16],
) -> Result<Vec<(i16, Vec<u8>)>> {
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

    fn added(raised: &[(u32, u32)], started: &[(u32, u32)]) -> CountsAdded {
        let keyed = |pairs: &[(u32, u32)]| pairs.iter().map(|&(k, c)| (TermKey(k), c)).collect();
        CountsAdded {
            raised: keyed(raised),
            started: keyed(started),
        }
    }

    #[test]
    fn counts_added_merge_into_the_rows_read_under_the_lock_one_row_per_bucket() {
        let high = 63 << 26;
        let held = HeldRows::from_iter([
            (0, packed(&[(5, 2)])),
            (1, Vec::new()),
            (63, packed(&[(high, 1)])),
        ]);
        let (buckets, rows) =
            counted(held, &added(&[(5, 1), (high, 4)], &[(7, 1), (1 << 26, 1)])).unwrap();
        let mut by_bucket: Vec<(i16, Vec<(u32, u32)>)> = buckets
            .into_iter()
            .zip(rows.iter().map(|r| unpacked(r)))
            .collect();
        by_bucket.sort();
        assert_eq!(
            by_bucket,
            [
                (0, vec![(5, 3), (7, 1)]),
                (1, vec![(1 << 26, 1)]),
                (63, vec![(high, 5)])
            ]
        );
    }

    #[test]
    fn counts_added_to_a_bucket_that_was_not_read_are_an_error_not_an_erasure() {
        let held = HeldRows::from_iter([(0, packed(&[(5, 2)]))]);
        assert!(counted(held, &added(&[], &[(1 << 26, 1)])).is_err());
        assert_eq!(
            counted(HeldRows::default(), &added(&[], &[])).unwrap(),
            (vec![], vec![])
        );
    }

    #[test]
    fn a_row_that_is_not_whole_entries_is_an_error_not_a_guess() {
        assert!(entries(&[0; 7]).is_err());
        assert!(merged(&[0; 9], &[(1, 1)]).is_err());
    }
}

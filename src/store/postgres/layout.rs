//! Optional declarative hash partitioning of the big tables by the distribution key
//! `(tenant, conversation)` (`GATEKEEPER_PG_PARTITIONS`). Every key of the schema leads with that
//! pair, so a partition holds whole conversations and every statement the service sends, which
//! names one conversation, touches one partition.
//!
//! Applied at start, after the migrations, in one transaction: a table whose layout differs
//! from the one asked for is rebuilt (renamed away, created again with the new layout, its rows
//! copied, its keys, indexes and triggers recreated under their old names). Requests wait for the
//! rebuild; a start that finds the layout already right changes nothing.

use sqlx::postgres::PgConnectOptions;
use sqlx::{PgPool, Postgres, Transaction};
use std::time::Instant;

/// The tables that grow with the turns; `conversations` and `idempotency_keys` stay whole.
pub const PARTITIONED_TABLES: [&str; 4] = ["turns", "search_blocks", "term_counts", "checkpoints"];

/// Most partitions a table may be split into.
pub const MAX_PARTITIONS: u32 = 256;

/// Gives every table of [`PARTITIONED_TABLES`] `partitions` hash partitions (0: none).
pub(super) async fn apply(pool: &PgPool, partitions: u32) -> anyhow::Result<()> {
    anyhow::ensure!(
        partitions <= MAX_PARTITIONS,
        "at most {MAX_PARTITIONS} partitions"
    );
    let mut tx = pool.begin().await?;
    // Two processes starting together: the second waits, then finds the layout done.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('gatekeeper_layout'))")
        .execute(&mut *tx)
        .await?;
    for table in PARTITIONED_TABLES {
        let before = partitions_of(&mut tx, table).await?;
        if before == partitions {
            continue;
        }
        let started = Instant::now();
        let rows = rebuild(&mut tx, table, partitions).await?;
        tracing::info!(
            table,
            partitions_before = before,
            partitions,
            rows,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "table rebuilt with its new partitioning"
        );
    }
    tx.commit().await?;
    Ok(())
}

/// Whether any of [`PARTITIONED_TABLES`] is partitioned.
pub(super) async fn is_partitioned(pool: &PgPool) -> Result<bool, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    for table in PARTITIONED_TABLES {
        if partitions_of(&mut conn, table).await? > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The session settings of a connection to a partitioned database: generic plans. A custom
/// plan is made again for every execution of a statement over partitions, and planning the
/// reconstruct read over 8 partitions of two tables took 0.75 ms, three times its execution;
/// the generic plan prunes the partitions when it runs (each statement names one conversation).
pub(super) fn session_options(options: PgConnectOptions, partitioned: bool) -> PgConnectOptions {
    if partitioned {
        options.options([("plan_cache_mode", "force_generic_plan")])
    } else {
        options
    }
}

/// How many hash partitions `table` has (0: it is a plain table).
pub async fn partitions_of(conn: &mut sqlx::PgConnection, table: &str) -> Result<u32, sqlx::Error> {
    let n: i64 = sqlx::query_scalar(
        "SELECT CASE c.relkind WHEN 'p' THEN \
             (SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid) ELSE 0 END \
         FROM pg_class c WHERE c.oid = $1::regclass",
    )
    .bind(table)
    .fetch_one(conn)
    .await?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

async fn rebuild(
    tx: &mut Transaction<'_, Postgres>,
    table: &str,
    partitions: u32,
) -> anyhow::Result<u64> {
    // What LIKE does not copy, as the statements that recreate it. Keys first, so that the
    // foreign keys find them; an index of a partitioned table reads `ON ONLY`, which would
    // leave the new partitions without it.
    let keys: Vec<(String, String)> = sqlx::query_as(
        "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint \
         WHERE conrelid = $1::regclass AND contype IN ('p', 'u', 'f') \
         ORDER BY array_position(ARRAY['p', 'u', 'f'], contype::text), conname",
    )
    .bind(table)
    .fetch_all(&mut **tx)
    .await?;
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ') FROM pg_index i \
         WHERE i.indrelid = $1::regclass AND NOT EXISTS \
             (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid) \
         ORDER BY i.indexrelid",
    )
    .bind(table)
    .fetch_all(&mut **tx)
    .await?;
    let triggers: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger \
         WHERE tgrelid = $1::regclass AND NOT tgisinternal AND tgparentid = 0 ORDER BY tgname",
    )
    .bind(table)
    .fetch_all(&mut **tx)
    .await?;

    // Storage parameters (search_blocks' tuple target) belong to the table that holds the rows:
    // the plain table, or each partition (a partitioned table takes none).
    let options: Option<Vec<String>> = sqlx::query_scalar(
        "SELECT coalesce(c.reloptions, (SELECT p.reloptions FROM pg_inherits i \
             JOIN pg_class p ON p.oid = i.inhrelid WHERE i.inhparent = c.oid LIMIT 1)) \
         FROM pg_class c WHERE c.oid = $1::regclass",
    )
    .bind(table)
    .fetch_one(&mut **tx)
    .await?;
    // NULL when the table has none.
    let with = match options {
        Some(options) => format!(" WITH ({})", options.join(", ")),
        None => String::new(),
    };

    let old = format!("{table}_before_layout");
    let mut statements = vec![
        format!("ALTER TABLE {table} RENAME TO {old}"),
        format!(
            "CREATE TABLE {table} (LIKE {old} INCLUDING ALL EXCLUDING INDEXES){}",
            if partitions == 0 {
                &with
            } else {
                " PARTITION BY HASH (tenant, conversation)"
            }
        ),
    ];
    statements.extend((0..partitions).map(|i| {
        format!(
            "CREATE TABLE {table}_p{i}_of_{partitions} PARTITION OF {table} \
             FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i}){with}"
        )
    }));
    for statement in statements {
        sqlx::query(&statement).execute(&mut **tx).await?;
    }
    let rows = sqlx::query(&format!("INSERT INTO {table} SELECT * FROM {old}"))
        .execute(&mut **tx)
        .await?
        .rows_affected();
    let mut statements = vec![format!("DROP TABLE {old}")];
    statements.extend(keys.iter().map(|(name, definition)| {
        format!("ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    }));
    statements.extend(indexes);
    statements.extend(triggers);
    statements.push(format!("ANALYZE {table}"));
    for statement in statements {
        sqlx::query(&statement).execute(&mut **tx).await?;
    }
    Ok(rows)
}

//! The partition-ready Postgres schema: every key leads with the distribution key
//! `(tenant, conversation)`, checked in `pg_catalog`; `GATEKEEPER_PG_PARTITIONS` hash-partitions
//! the big tables by it, and a database moved between layouts answers exactly as before.

use crate::support::*;
use crate::test_db::{EmptyDb, backend};
use gatekeeper::store::{Backend, PARTITIONED_TABLES};
use gatekeeper_test_support::AnyStore;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

fn pool(store: &AnyStore) -> &PgPool {
    match store {
        AnyStore::Postgres(s) => s.pool(),
        AnyStore::Sqlite(_) => unreachable!("Postgres only"),
    }
}

/// Every primary key, unique constraint or index and foreign key of the service's tables
/// (partitions included), with the columns it leads with (and those it references).
async fn keys(pool: &PgPool) -> Vec<(String, String, Vec<String>)> {
    sqlx::query_as(
        "WITH ours AS (
             SELECT c.oid, c.relname::text AS name FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
               AND c.relname <> '_sqlx_migrations'),
         columns AS (
             SELECT rel, id, key, array_agg(a.attname::text ORDER BY k.ord) AS names
             FROM (SELECT conrelid AS rel, oid AS id, conname::text AS key, conkey AS attnums
                       FROM pg_constraint WHERE contype IN ('p', 'u', 'f')
                   UNION ALL
                   SELECT confrelid, oid, conname::text || ' (referenced)', confkey
                       FROM pg_constraint WHERE contype = 'f'
                   UNION ALL
                   SELECT indrelid, indexrelid, indexrelid::regclass::text || ' (index)', indkey::int2[]
                       FROM pg_index WHERE indisunique) AS k0
             CROSS JOIN LATERAL unnest(k0.attnums) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = k0.rel AND a.attnum = k.attnum
             GROUP BY rel, id, key)
         SELECT ours.name, columns.key, columns.names FROM columns JOIN ours ON ours.oid = rel
         ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// What a layout must keep: the keys, checks, indexes and triggers of the tables themselves
/// (not of their partitions), as the statements that would recreate them; and the storage of
/// the tables that hold the rows (a plain table, or each partition, under its parent's name):
/// their storage parameters, the columns stored otherwise than their type's default, and the
/// columns compressed otherwise than the server's default.
async fn schema(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT t.relname || ': ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
             FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
             JOIN pg_namespace n ON n.oid = t.relnamespace
             WHERE n.nspname = 'public' AND NOT t.relispartition
         UNION ALL
         SELECT replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ')
             FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
             JOIN pg_namespace n ON n.oid = t.relnamespace
             WHERE n.nspname = 'public' AND NOT t.relispartition
         UNION ALL
         SELECT pg_get_triggerdef(g.oid) FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid
             WHERE NOT g.tgisinternal AND g.tgparentid = 0
         UNION
         SELECT coalesce(p.inhparent::regclass::text, t.relname) || ' stored: ' || t.reloptions::text
             FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
             LEFT JOIN pg_inherits p ON p.inhrelid = t.oid
             WHERE n.nspname = 'public' AND t.relkind = 'r' AND t.reloptions IS NOT NULL
         UNION
         SELECT coalesce(p.inhparent::regclass::text, t.relname) || '.' || a.attname || ' storage ' || a.attstorage::text
             FROM pg_attribute a JOIN pg_class t ON t.oid = a.attrelid
             JOIN pg_type y ON y.oid = a.atttypid
             JOIN pg_namespace n ON n.oid = t.relnamespace
             LEFT JOIN pg_inherits p ON p.inhrelid = t.oid
             WHERE n.nspname = 'public' AND t.relkind = 'r' AND a.attnum > 0
               AND a.attstorage <> y.typstorage
         UNION
         SELECT coalesce(p.inhparent::regclass::text, t.relname) || '.' || a.attname || ' compression ' || a.attcompression::text
             FROM pg_attribute a JOIN pg_class t ON t.oid = a.attrelid
             JOIN pg_namespace n ON n.oid = t.relnamespace
             LEFT JOIN pg_inherits p ON p.inhrelid = t.oid
             WHERE n.nspname = 'public' AND t.relkind = 'r' AND a.attnum > 0
               AND a.attcompression <> ''
         ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Each big table's partition count (0: a plain table).
async fn layout(pool: &PgPool) -> Vec<i64> {
    let mut counts = vec![];
    for table in PARTITIONED_TABLES {
        let n: i64 = sqlx::query_scalar(
            "SELECT CASE relkind WHEN 'p' THEN (SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass) \
             ELSE 0 END FROM pg_class WHERE oid = $1::regclass",
        )
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap();
        counts.push(n);
    }
    counts
}

async fn plan_cache_mode(pool: &PgPool) -> String {
    sqlx::query_scalar("SHOW plan_cache_mode")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn assert_keys_lead_with_the_distribution_key(keys: &[(String, String, Vec<String>)]) {
    for (table, key, columns) in keys {
        assert!(
            columns.len() >= 2 && columns[..2] == ["tenant", "conversation"],
            "{table}.{key} leads with {columns:?}, not (tenant, conversation)"
        );
    }
    // Not vacuous: every table but the search index (which has no key) has its primary key.
    for table in [
        "conversations",
        "turns",
        "checkpoints",
        "term_counts",
        "idempotency_keys",
        "search_backlog",
    ] {
        assert!(
            keys.iter()
                .any(|(t, k, _)| t == table && k == &format!("{table}_pkey")),
            "{table} has a primary key: {keys:?}"
        );
    }
}

#[tokio::test]
async fn every_key_of_the_postgres_schema_leads_with_tenant_and_conversation() {
    if backend() != Backend::Postgres {
        return;
    }
    let db = EmptyDb::new().await.connect_with(None).await;
    let keys = keys(pool(&db.store)).await;
    assert_keys_lead_with_the_distribution_key(&keys);
    assert!(
        keys.iter().any(|(t, _, c)| t == "turns" && c.len() == 3),
        "foreign keys are listed too: {keys:?}"
    );
}

/// A real conversation through every write: appends with and without a key, a pin, a
/// compaction; then every read that crosses the tables, as JSON to compare.
async fn exercise(app: &TestApp) -> Value {
    let turns = tau_turns(12);
    let first = json!({ "turns": turns[..8] });
    let keyed = (app.client.post(app.url("/v1/conversations/c/turns")))
        .header("Idempotency-Key", "k")
        .json(&first)
        .send()
        .await
        .unwrap();
    expect(keyed, StatusCode::CREATED).await;
    expect(
        app.append("c", json!(turns[8..])).await,
        StatusCode::CREATED,
    )
    .await;
    expect(
        app.append("d", json!(turns[..3])).await,
        StatusCode::CREATED,
    )
    .await;
    expect(app.pin("c", 2, true).await, StatusCode::OK).await;
    let summary = format!("{} {}", turns[1]["content"], turns[3]["content"]);
    let proposal = json!({ "from": 0, "to": 5, "summary": summary, "summary_budget": 8192 });
    expect(
        app.post("/v1/conversations/c/compactions", &proposal).await,
        StatusCode::CREATED,
    )
    .await;
    reads(app).await
}

async fn reads(app: &TestApp) -> Value {
    let mut answers = vec![];
    for path in [
        "/v1/conversations/c",
        "/v1/conversations/c/compactions",
        "/v1/conversations/c/context",
        "/v1/conversations/c/search?q=reservation&limit=50",
        "/v1/search?q=reservation&limit=50",
    ] {
        answers.push(expect(app.get(path).await, StatusCode::OK).await);
    }
    for turn in 0..12 {
        let path = format!("/v1/conversations/c/reconstruct/{turn}");
        answers.push(expect(app.get(&path).await, StatusCode::OK).await);
    }
    Value::Array(answers)
}

/// The columns an append or a checkpoint writes compressed, as the schema lists them: lz4,
/// which this machine's Postgres has (migrations 0012 and 0013).
const LZ4_COLUMNS: [&str; 15] = [
    "checkpoints.candidates_used compression l",
    "checkpoints.covered compression l",
    "checkpoints.not_compacted compression l",
    "checkpoints.reasons compression l",
    "checkpoints.summary compression l",
    "checkpoints.uncovered compression l",
    "checkpoints.verdict compression l",
    "search_blocks.keys compression l",
    "search_blocks.masks compression l",
    "search_blocks.roles compression l",
    "search_blocks.tokens compression l",
    "term_counts.counts compression l",
    "turns.anchors compression l",
    "turns.content compression l",
    "turns.profile compression l",
];

#[tokio::test]
async fn a_database_moved_between_partition_layouts_keeps_its_rows_keys_and_answers() {
    if backend() != Backend::Postgres {
        return;
    }
    let plain = EmptyDb::new().await.connect_with(Some(0)).await;
    let plain_schema = schema(pool(&plain.store)).await;
    for kept in [
        "search_blocks stored: {toast_tuple_target=8160}",
        "search_blocks.keys storage m",
        "search_blocks.masks storage m",
        "search_blocks.roles storage m",
        "search_blocks.tokens storage m",
    ]
    .into_iter()
    .chain(LZ4_COLUMNS)
    {
        assert!(
            plain_schema.iter().any(|s| s == kept),
            "{kept}: {plain_schema:#?}"
        );
    }

    let empty = EmptyDb::new().await;
    let url = empty.url.clone();
    let app = spawn_app_on(empty.connect_with(Some(4)).await, defaults()).await;
    assert_eq!(layout(pool(&app.store)).await, [4, 4, 4, 4]);
    assert_eq!(
        plan_cache_mode(pool(&app.store)).await,
        "force_generic_plan"
    );
    assert_eq!(plan_cache_mode(pool(&plain.store)).await, "auto");
    assert_eq!(schema(pool(&app.store)).await, plain_schema);
    assert_keys_lead_with_the_distribution_key(&keys(pool(&app.store)).await);
    let mut answers = exercise(&app).await;
    // A partition holds whole conversations.
    let homes: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT tableoid) FROM turns WHERE conversation = 'c'")
            .fetch_one(pool(&app.store))
            .await
            .unwrap();
    assert_eq!(homes, 1);

    let turns_table = "SELECT 'turns'::regclass::oid::int8";
    let before: i64 = sqlx::query_scalar(turns_table)
        .fetch_one(pool(&app.store))
        .await
        .unwrap();
    let again = AnyStore::connect_with(&url, Some(4)).await.unwrap();
    let unchanged: i64 = sqlx::query_scalar(turns_table)
        .fetch_one(pool(&again))
        .await
        .unwrap();
    assert_eq!(unchanged, before, "the same layout is not rebuilt");
    let unset = AnyStore::connect_with(&url, None).await.unwrap();
    assert_eq!(layout(pool(&unset)).await, [4, 4, 4, 4], "unset leaves it");

    for partitions in [0, 3] {
        let app = app
            .restarted_on(
                AnyStore::connect_with(&url, Some(partitions))
                    .await
                    .unwrap(),
            )
            .await;
        assert_eq!(layout(pool(&app.store)).await, [i64::from(partitions); 4]);
        assert_eq!(
            plan_cache_mode(pool(&app.store)).await,
            if partitions == 0 {
                "auto"
            } else {
                "force_generic_plan"
            },
            "a partitioned database is planned generically, each run pruning to one partition"
        );
        assert_eq!(schema(pool(&app.store)).await, plain_schema);
        assert_eq!(reads(&app).await, answers, "{partitions} partitions");
        // Writes go on: the retried keyed append is still answered from its record.
        let retried = (app.client.post(app.url("/v1/conversations/c/turns")))
            .header("Idempotency-Key", "k")
            .json(&json!({ "turns": tau_turns(8) }))
            .send()
            .await
            .unwrap();
        assert!(retried.headers().get("idempotent-replayed").is_some());
        let next = json!([{ "role": "user", "content": format!("one more after {partitions}") }]);
        expect(app.append("d", next).await, StatusCode::CREATED).await;
        answers = reads(&app).await;
    }
}

#[tokio::test]
async fn partitions_made_before_migration_0013_are_given_lz4_with_their_tables() {
    if backend() != Backend::Postgres {
        return;
    }
    let empty = EmptyDb::new().await;
    let url = empty.url.clone();
    let partitioned = empty.connect_with(Some(2)).await;
    let expected = schema(pool(&partitioned.store)).await;
    // Back to before 0013 (and as 0012 left a database partitioned before it ran: its setting
    // reached the partitioned table only): every column of every table and partition on the
    // server's default.
    for statement in [
        "DELETE FROM _sqlx_migrations WHERE version = 13",
        "DO $$ DECLARE c record; BEGIN
             FOR c IN SELECT a.attrelid::regclass AS rel, a.attname FROM pg_attribute a
                 JOIN pg_class t ON t.oid = a.attrelid JOIN pg_namespace n ON n.oid = t.relnamespace
                 WHERE n.nspname = 'public' AND a.attcompression <> ''
             LOOP
                 EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET COMPRESSION default', c.rel, c.attname);
             END LOOP;
         END $$",
    ] {
        sqlx::query(statement)
            .execute(pool(&partitioned.store))
            .await
            .unwrap();
    }
    let before = schema(pool(&partitioned.store)).await;
    assert!(
        LZ4_COLUMNS.iter().all(|c| !before.iter().any(|s| s == c)),
        "{before:#?}"
    );
    let upgraded = AnyStore::connect_with(&url, Some(2)).await.unwrap();
    assert_eq!(schema(pool(&upgraded)).await, expected);
}

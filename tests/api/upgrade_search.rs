//! Upgrading a Postgres database whose search index has a row per turn (`turn_search`, before
//! migration 0010) to blocks of turns (`search_blocks`): the migration puts every indexed turn in
//! the backlog, and the start-up backfill indexes them again, so every search answers as before.

use crate::support::*;
use crate::test_db::{EmptyDb, backend};
use gatekeeper::coverage::TermProfile;
use gatekeeper::search::conversation_key;
use gatekeeper::store::Backend;
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

const SEARCHES: [&str; 4] = [
    "/v1/conversations/a/search?q=reservation&limit=50",
    "/v1/conversations/b/search?q=flight&limit=50",
    "/v1/conversations/a/search?q=cancel%20refund&limit=50",
    "/v1/search?q=reservation%20flight&limit=50",
];

async fn searches(app: &TestApp) -> Vec<Value> {
    let mut answers = vec![];
    for path in SEARCHES {
        answers.push(expect(app.get(path).await, StatusCode::OK).await);
    }
    answers
}

/// Takes the database back to migration 0009: the index as a row per turn, written from each
/// turn's stored profile as the previous version wrote it, and 0010 not applied.
async fn index_per_turn(pool: &PgPool) {
    let rows: Vec<(String, String, i64, String, i64, Vec<u8>)> = sqlx::query_as(
        "SELECT tenant, conversation, id, role, tokens, profile FROM turns ORDER BY conversation, id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for statement in [
        "DROP TABLE search_blocks",
        "DELETE FROM _sqlx_migrations WHERE version = 10",
        "CREATE TABLE turn_search (tenant text NOT NULL, conversation text NOT NULL, \
           turn bigint NOT NULL, role text NOT NULL, tokens bigint NOT NULL, keys integer[] NOT NULL)",
        "CREATE INDEX turn_search_keys ON turn_search USING gin (keys)",
    ] {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
    for (tenant, conversation, id, role, tokens, profile) in rows {
        let profile = TermProfile::from_bytes(&profile).unwrap();
        let keys: Vec<i32> = gatekeeper::search::index_keys(
            conversation_key(&tenant, &conversation),
            profile.terms(),
        )
        .into_iter()
        .map(|k| k.0 as i32)
        .collect();
        sqlx::query("INSERT INTO turn_search VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(&tenant)
            .bind(&conversation)
            .bind(id)
            .bind(&role)
            .bind(tokens)
            .bind(keys)
            .execute(pool)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_search_index_with_a_row_per_turn_is_rebuilt_in_blocks_at_start_and_answers_the_same() {
    if backend() != Backend::Postgres {
        return;
    }
    let empty = EmptyDb::new().await;
    let url = empty.url.clone();
    let app = spawn_app_on(empty.connect().await, defaults()).await;
    let turns = tau_turns(150);
    // 130 turns in one append (blocks of at most 64 turns, one more where a block's keys would
    // pass 512), and 20 one at a time (a block each).
    expect(
        app.append("a", json!(turns[..130])).await,
        StatusCode::CREATED,
    )
    .await;
    for turn in &turns[130..] {
        expect(app.append("b", json!([turn])).await, StatusCode::CREATED).await;
    }
    let before = searches(&app).await;
    let hits = |answers: &[Value]| -> usize {
        answers
            .iter()
            .map(|a| a["hits"].as_array().unwrap().len())
            .sum()
    };
    assert!(
        hits(&before) > 40,
        "the searches find something: {before:?}"
    );
    let blocks: i64 = sqlx::query_scalar("SELECT count(*) FROM search_blocks")
        .fetch_one(pool(&app.store))
        .await
        .unwrap();
    assert_eq!(blocks, 4 + 20);
    let compressed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM search_blocks WHERE num_nonnulls(pg_column_compression(keys), \
           pg_column_compression(masks), pg_column_compression(roles), pg_column_compression(tokens)) > 0",
    )
    .fetch_one(pool(&app.store))
    .await
    .unwrap();
    assert_eq!(compressed, 0, "blocks are stored as they are");

    index_per_turn(pool(&app.store)).await;
    let store = AnyStore::connect(&url).await.unwrap();
    let backlog: i64 = sqlx::query_scalar("SELECT count(*) FROM search_backlog")
        .fetch_one(pool(&store))
        .await
        .unwrap();
    assert_eq!(
        backlog, 150,
        "every turn the old index held waits to be indexed again"
    );
    assert_eq!(store.backfill_search().await.unwrap(), 150);
    assert_eq!(store.backfill_search().await.unwrap(), 0, "once is enough");
    let app = app.restarted_on(store).await;
    assert_eq!(searches(&app).await, before);
}

//! Upgrading a Postgres database whose candidate counts have a row per term (before migration
//! 0011) to packed rows of 64 buckets per conversation: the migration packs them byte for byte as
//! an append writes them, and appends after the upgrade count on from there.

use crate::support::*;
use crate::test_db::{EmptyDb, backend};
use gatekeeper::store::Backend;
use gatekeeper_test_support::AnyStore;
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;

fn pool(store: &AnyStore) -> &PgPool {
    match store {
        AnyStore::Postgres(s) => s.pool(),
        AnyStore::Sqlite(_) => unreachable!("Postgres only"),
    }
}

type Row = (String, String, i16, Vec<u8>);

async fn packed_counts(pool: &PgPool) -> Vec<Row> {
    sqlx::query_as("SELECT tenant, conversation, bucket, counts FROM term_counts ORDER BY 1, 2, 3")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Takes the database back to migration 0010: a row per term with its count, as the previous
/// version wrote them (keys above `i32::MAX` stored as negative integers).
async fn count_per_term(pool: &PgPool, packed: &[Row]) -> usize {
    for statement in [
        "DROP TABLE term_counts",
        "DELETE FROM _sqlx_migrations WHERE version = 11",
        "CREATE TABLE term_counts (tenant text NOT NULL, conversation text NOT NULL, \
           term integer NOT NULL, turns integer NOT NULL CHECK (turns > 0), \
           PRIMARY KEY (tenant, conversation, term))",
    ] {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
    let mut rows = 0;
    for (tenant, conversation, _, counts) in packed {
        let word = |b: &[u8]| i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let (terms, turns): (Vec<i32>, Vec<i32>) = counts
            .chunks_exact(8)
            .map(|e| (word(&e[..4]), word(&e[4..])))
            .unzip();
        rows += terms.len();
        sqlx::query(
            "INSERT INTO term_counts SELECT $1, $2, t, n FROM UNNEST($3::int4[], $4::int4[]) AS u(t, n)",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(terms)
        .bind(turns)
        .execute(pool)
        .await
        .unwrap();
    }
    rows
}

#[tokio::test]
async fn counts_kept_a_row_per_term_are_packed_at_start_into_the_rows_an_append_writes() {
    if backend() != Backend::Postgres {
        return;
    }
    let empty = EmptyDb::new().await;
    let url = empty.url.clone();
    let app = spawn_app_on(empty.connect().await, defaults()).await;
    let turns = tau_turns(260);
    for batch in turns[..200].chunks(50) {
        expect(app.append("a", json!(batch)).await, StatusCode::CREATED).await;
    }
    expect(
        app.append("b", json!(turns[..40])).await,
        StatusCode::CREATED,
    )
    .await;
    let before = packed_counts(pool(&app.store)).await;
    // Not vacuous: keys in both halves of the key space (the signed column's negative half), and
    // terms counted in more than one turn.
    assert!(before.iter().any(|r| r.2 < 32) && before.iter().any(|r| r.2 >= 32));
    assert!(
        before
            .iter()
            .flat_map(|r| r.3.chunks_exact(8))
            .any(|e| e[4..] != [0, 0, 0, 1])
    );

    let per_term = count_per_term(pool(&app.store), &before).await;
    assert!(per_term > 500, "{per_term} terms counted");
    let store = AnyStore::connect(&url).await.unwrap();
    assert_eq!(packed_counts(pool(&store)).await, before);

    // Appends after the upgrade add to the converted rows as to rows they wrote themselves.
    let app = app.restarted_on(store).await;
    expect(
        app.append("a", json!(turns[200..])).await,
        StatusCode::CREATED,
    )
    .await;
    let never_upgraded = spawn_app().await;
    for batch in turns[..200].chunks(50) {
        expect(
            never_upgraded.append("a", json!(batch)).await,
            StatusCode::CREATED,
        )
        .await;
    }
    expect(
        never_upgraded.append("a", json!(turns[200..])).await,
        StatusCode::CREATED,
    )
    .await;
    let conversation_a =
        |rows: Vec<Row>| -> Vec<Row> { rows.into_iter().filter(|r| r.1 == "a").collect() };
    assert_eq!(
        conversation_a(packed_counts(pool(&app.store)).await),
        conversation_a(packed_counts(pool(&never_upgraded.store)).await)
    );
}

//! `DELETE /v1/conversations/{c}`: everything of the conversation goes, in every process's
//! memory too, and a conversation of the same name starts again from nothing.

use crate::context_plan::{append_conversation, compact, skippable};
use crate::support::*;
use gatekeeper::domain::{ConversationId, TenantId};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

/// How many rows of `conversation` each table that holds some has (as each backend names
/// them; SQLite's full-text rows counted by the conversation's own index key, which every one of
/// its documents holds).
pub(crate) async fn rows_of(store: &AnyStore, conversation: &str) -> Vec<(&'static str, i64)> {
    let mut tables = vec![
        "conversations",
        "turns",
        "checkpoints",
        "idempotency_keys",
        "term_counts",
        "search_backlog",
    ];
    let mut counts = Vec::new();
    match store {
        AnyStore::Postgres(pg) => {
            tables.push("search_blocks");
            for table in tables {
                let sql = format!("SELECT count(*) FROM {table} WHERE conversation = $1");
                let n: i64 = sqlx::query_scalar(&sql)
                    .bind(conversation)
                    .fetch_one(pg.pool())
                    .await
                    .unwrap();
                counts.push((table, n));
            }
        }
        AnyStore::Sqlite(lite) => {
            tables.push("search_docs");
            for table in tables {
                let sql = format!("SELECT count(*) FROM {table} WHERE conversation = ?1");
                let n: i64 = sqlx::query_scalar(&sql)
                    .bind(conversation)
                    .fetch_one(lite.pool())
                    .await
                    .unwrap();
                counts.push((table, n));
            }
            let own = gatekeeper::search::conversation_key("default", conversation);
            let n: i64 =
                sqlx::query_scalar("SELECT count(*) FROM turn_search WHERE turn_search MATCH ?1")
                    .bind(gatekeeper::search::key_token(own))
                    .fetch_one(lite.pool())
                    .await
                    .unwrap();
            counts.push(("turn_search", n));
        }
    }
    counts
}

fn key(conversation: &str) -> (TenantId, ConversationId) {
    (
        TenantId::single(),
        ConversationId::parse(conversation).unwrap(),
    )
}

#[tokio::test]
async fn an_erased_conversation_leaves_no_row_and_every_read_of_it_is_404() {
    let app = spawn_app().await;
    let log = append_conversation(&app, "gone", 0).await;
    append_conversation(&app, "kept", 1).await;
    let last = log.len() - 1;
    let skip = skippable(&log, 0, last - 4, 2);
    compact(&app, "gone", &log, 0, last - 4, &skip).await;
    let keyed = app
        .client
        .post(app.url("/v1/conversations/gone/turns"))
        .header("idempotency-key", "erase-me-0001")
        .json(&json!({ "turns": [{ "role": "user", "content": "one more, under a key" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(keyed.status(), StatusCode::CREATED);
    expect(app.reconstruct("gone", 0).await, StatusCode::OK).await;
    let before = rows_of(&app.store, "gone").await;
    assert!(
        before
            .iter()
            .all(|(table, n)| *n > 0 || *table == "search_backlog"),
        "every table held rows of it: {before:?}"
    );
    let erased_before = metric(
        &app.metrics_text().await,
        r#"gatekeeper_conversations_erased_total{cause="request"}"#,
    );

    let response = app.erase("gone").await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert!(response.text().await.unwrap().is_empty());

    let after = rows_of(&app.store, "gone").await;
    assert!(after.iter().all(|(_, n)| *n == 0), "rows left: {after:?}");
    assert!(
        rows_of(&app.store, "kept")
            .await
            .iter()
            .any(|(t, n)| *t == "turns" && *n > 0),
        "another conversation keeps its rows"
    );
    for path in [
        "/v1/conversations/gone",
        "/v1/conversations/gone/turns/0",
        "/v1/conversations/gone/reconstruct/0",
        "/v1/conversations/gone/compactions",
        "/v1/conversations/gone/compactions/1",
        "/v1/conversations/gone/context",
        "/v1/conversations/gone/export",
        "/v1/conversations/gone/compaction-plan?summary_budget=100",
    ] {
        problem(app.get(path).await, StatusCode::NOT_FOUND).await;
    }
    let word = log[0].anchors[0].clone();
    let hits = expect(
        app.get(&format!("/v1/search?q={word}")).await,
        StatusCode::OK,
    )
    .await;
    assert!(
        hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["conversation"] != "gone"),
        "the search index forgot it: {hits}"
    );
    let erased = metric(
        &app.metrics_text().await,
        r#"gatekeeper_conversations_erased_total{cause="request"}"#,
    );
    assert!(erased >= erased_before + 1.0);
    problem(app.erase("gone").await, StatusCode::NOT_FOUND).await;
    assert!(
        !app.cache.as_ref().unwrap().holds(&key("gone")),
        "nothing of it in memory"
    );
}

/// The first turn answered from a summary.
async fn first_covered(app: &TestApp, conversation: &str) -> i64 {
    for turn in 0..=8 {
        let answer = expect(app.reconstruct(conversation, turn).await, StatusCode::OK).await;
        if answer["source"] == "summary" {
            return turn;
        }
    }
    panic!("no turn of 0..=8 is covered");
}

#[tokio::test]
async fn a_conversation_created_again_after_erasure_is_answered_as_itself_never_as_the_old_one() {
    let app = spawn_app().await;
    let old = append_conversation(&app, "again", 0).await;
    let skip = skippable(&old, 0, 8, 1);
    compact(&app, "again", &old, 0, 8, &skip).await;
    // Answers of the old life in memory: a covered turn (checkpoint 1's summary) and a live one.
    let covered = first_covered(&app, "again").await;
    let old_covered = expect(app.reconstruct("again", covered).await, StatusCode::OK).await;
    let old_live = expect(app.reconstruct("again", 10).await, StatusCode::OK).await;
    assert_eq!(app.erase("again").await.status(), StatusCode::NO_CONTENT);

    let new = append_conversation(&app, "again", 2).await;
    let first = expect(app.turn("again", 0).await, StatusCode::OK).await;
    assert_eq!(
        first["content"],
        new[0].content.as_str(),
        "appending starts again at id 0"
    );
    let skip = skippable(&new, 0, 8, 1);
    compact(&app, "again", &new, 0, 8, &skip).await;
    let covered = first_covered(&app, "again").await;
    let answer = expect(app.reconstruct("again", covered).await, StatusCode::OK).await;
    assert_eq!(answer["checkpoint_id"], 1, "checkpoint ids start again too");
    assert_ne!(
        answer["text"], old_covered["text"],
        "the new checkpoint's summary"
    );
    let live = expect(app.reconstruct("again", 10).await, StatusCode::OK).await;
    assert_eq!(live["text"], new[10].content.as_str());
    assert_ne!(live["text"], old_live["text"]);
    // An Idempotency-Key spent in the old life is new in this one.
    let turn = json!({ "turns": [{ "role": "user", "content": "same key, new life" }] });
    for _ in 0..2 {
        let response = app
            .client
            .post(app.url("/v1/conversations/again/turns"))
            .header("idempotency-key", "life-key-0001")
            .json(&turn)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
    }
}

#[tokio::test]
async fn an_erasure_through_one_process_is_forgotten_by_another_processs_answers() {
    let a = spawn_app().await;
    let b = a.another_process().await;
    let feed = b.feed_up().await;
    let log = append_conversation(&a, "shared", 0).await;
    let text = expect(b.reconstruct("shared", 3).await, StatusCode::OK).await["text"].clone();
    assert_eq!(text, log[3].content.as_str());
    assert_eq!(a.erase("shared").await.status(), StatusCode::NO_CONTENT);
    // Postgres: B hears of it from the feed a moment after the commit; SQLite: B reads the
    // conversation's head on every request, so at once.
    let mut answered = StatusCode::OK;
    for _ in 0..500 {
        answered = b.reconstruct("shared", 3).await.status();
        if answered == StatusCode::NOT_FOUND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        answered,
        StatusCode::NOT_FOUND,
        "B stops answering the erased turn"
    );
    if feed {
        // The 404 may come from B reading the head before the feed's report arrives.
        let cache = b.cache.as_ref().unwrap();
        for _ in 0..500 {
            if !cache.holds(&key("shared")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!cache.holds(&key("shared")), "B's memory forgot it");
    }
    append_conversation(&a, "shared", 1).await;
    let again = expect(b.reconstruct("shared", 3).await, StatusCode::OK).await;
    assert_ne!(
        again["text"], text,
        "B answers the new conversation, not the old"
    );
}

#[tokio::test]
async fn an_append_that_waited_for_an_erasure_starts_the_conversation_afresh() {
    let app = spawn_app().await;
    append_conversation(&app, "raced", 0).await;
    let mut lock = HeldLock::take(&app.store, "default", "raced").await;
    let appending = {
        let app = app.clone();
        tokio::spawn(async move {
            app.append(
                "raced",
                json!([{ "role": "user", "content": "after the erasure" }]),
            )
            .await
        })
    };
    lock.wait_for_waiters(1).await;
    // What an erasure's transaction does on Postgres, committed while the append waits for
    // the row (SQLite's write lock makes the append wait before it reads anything at all).
    let search = match app.store.backend() {
        gatekeeper::store::Backend::Postgres => {
            "DELETE FROM search_blocks WHERE conversation = 'raced'"
        }
        gatekeeper::store::Backend::Sqlite => {
            "DELETE FROM search_docs WHERE conversation = 'raced'"
        }
    };
    for sql in [
        search,
        "DELETE FROM term_counts WHERE conversation = 'raced'",
        "DELETE FROM turns WHERE conversation = 'raced'",
        "DELETE FROM conversations WHERE conversation = 'raced'",
    ] {
        lock.execute(sql).await;
    }
    lock.release().await;
    let appended = expect(appending.await.unwrap(), StatusCode::CREATED).await;
    assert_eq!(
        appended["turns"][0]["id"], 0,
        "the conversation began again"
    );
}

//! Two service processes on one database: a checkpoint made through one reaches the other's
//! cached reconstruct answers (on Postgres through the checkpoint feed, without a query per
//! request), and every answer on the way is true.

use crate::reconstruct::{propose_body, setup};
use crate::support::*;
use gatekeeper_test_support::AnyStore;
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

/// Asks `app` for `turn` until the answer comes from checkpoint `checkpoint_id`, for at most 5 s;
/// every answer before that must be exactly `before` (the answer as it stood, still true).
async fn converges(app: &TestApp, turn: i64, before: &Value, checkpoint_id: i64) -> Value {
    for _ in 0..500 {
        let now = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        if now["checkpoint_id"].as_i64() == Some(checkpoint_id) {
            return now;
        }
        assert_eq!(
            &now, before,
            "until the new checkpoint shows, the old answer stands"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("turn {turn} was not answered from checkpoint {checkpoint_id} within 5 s");
}

fn source_and_checkpoint(answer: &Value) -> (Option<&str>, Option<i64>) {
    (answer["source"].as_str(), answer["checkpoint_id"].as_i64())
}

#[tokio::test]
async fn a_checkpoint_made_through_another_process_reaches_its_cached_answers() {
    let a = spawn_app().await;
    let b = a.another_process().await;
    let feeds = (a.feed_up().await, b.feed_up().await);
    setup(&a, "c", 4).await;
    // B answers (and caches) turns 1 and 3 as live.
    let mut live = Vec::new();
    for turn in [1, 3] {
        let answer = expect(b.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(answer["source"], "live");
        assert_eq!(
            expect(b.reconstruct("c", turn).await, StatusCode::OK).await,
            answer,
            "a repeat is the same answer"
        );
        live.push(answer);
    }
    // A checkpoint through A covers turn 1 and not turn 3.
    expect(
        a.propose("c", propose_body(0, 3, &[0, 1, 2])).await,
        StatusCode::CREATED,
    )
    .await;
    let covered = converges(&b, 1, &live[0], 1).await;
    assert_eq!(source_and_checkpoint(&covered), (Some("summary"), Some(1)));
    let uncovered = converges(&b, 3, &live[1], 1).await;
    assert_eq!(
        (uncovered["source"].as_str(), uncovered["reason"].as_str()),
        (Some("raw_log"), Some("anchor_missing"))
    );
    // A second checkpoint through B covers turn 3: B answers from it at once, A soon after.
    let before = expect(a.reconstruct("c", 3).await, StatusCode::OK).await;
    expect(
        b.propose("c", propose_body(3, 3, &[3])).await,
        StatusCode::CREATED,
    )
    .await;
    let at_b = expect(b.reconstruct("c", 3).await, StatusCode::OK).await;
    assert_eq!(source_and_checkpoint(&at_b), (Some("summary"), Some(2)));
    let at_a = converges(&a, 3, &before, 2).await;
    assert_eq!(at_a, at_b);
    assert!(
        feeds == (true, true) || a.store.backend() != gatekeeper::store::Backend::Postgres,
        "on Postgres both feeds were up: {feeds:?}"
    );
}

#[tokio::test]
async fn answers_stay_true_when_the_feed_connections_are_killed_and_the_feed_comes_back() {
    let a = spawn_app().await;
    let AnyStore::Postgres(pg) = &a.store else {
        return; // SQLite has no feed: every answer reads the latest checkpoint id.
    };
    let b = a.another_process().await;
    assert!(a.feed_up().await && b.feed_up().await);
    setup(&a, "c", 4).await;
    let live = expect(b.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(live["source"], "live");

    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%') AS t",
    )
    .fetch_one(pg.pool())
    .await
    .unwrap();
    assert_eq!(killed, 2, "both processes' feed connections");
    // Whether or not the feeds are back yet, the checkpoint reaches B's answers.
    expect(
        a.propose("c", propose_body(0, 3, &[0, 1, 2])).await,
        StatusCode::CREATED,
    )
    .await;
    let covered = converges(&b, 1, &live, 1).await;
    assert_eq!(source_and_checkpoint(&covered), (Some("summary"), Some(1)));

    // Back up, the feed carries the next checkpoint too.
    assert!(b.feed_up().await);
    let before = expect(b.reconstruct("c", 3).await, StatusCode::OK).await;
    expect(
        a.propose("c", propose_body(3, 3, &[3])).await,
        StatusCode::CREATED,
    )
    .await;
    let now = converges(&b, 3, &before, 2).await;
    assert_eq!(source_and_checkpoint(&now), (Some("summary"), Some(2)));
}

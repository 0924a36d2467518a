//! Two service processes on one database: a checkpoint made through one reaches the other's
//! cached reconstruct answers (on Postgres through the checkpoint feed, without a query per
//! request), and every answer on the way is true; a feed whose connection goes half-open is
//! noticed within its heartbeat's bound. On SQLite, which has no feed, the feed tests check
//! what stands in for it: every answer reads the latest checkpoint id.

use crate::reconstruct::{propose_body, setup};
use crate::support::*;
use gatekeeper::store::PgStore;
use gatekeeper_test_support::AnyStore;
use reqwest::StatusCode;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Asks `app` for `turn` until the answer comes from checkpoint `checkpoint_id`, for at most 5 s;
/// every answer before that must be exactly `before` (the answer as it stood, still true).
async fn converges(app: &TestApp, turn: i64, before: &Value, checkpoint_id: i64) -> Value {
    converges_within(app, turn, before, checkpoint_id, Duration::from_secs(5)).await
}

async fn converges_within(
    app: &TestApp,
    turn: i64,
    before: &Value,
    checkpoint_id: i64,
    within: Duration,
) -> Value {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
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
    panic!(
        "turn {turn} was not answered from checkpoint {checkpoint_id} within {:.1} s",
        within.as_secs_f64()
    );
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

/// SQLite: no feed, so no process trusts a remembered checkpoint id; each request reads it (a
/// primary-key read) and a checkpoint made through one process shows in the other's very next
/// answer, with no wait, though that answer was cached.
async fn without_a_feed_every_answer_reads_the_latest_checkpoint(a: &TestApp) {
    let b = a.another_process().await;
    for app in [a, &b] {
        let cache = app
            .cache
            .as_ref()
            .expect("the answer cache is on by default");
        assert!(!cache.feed_is_up(), "SQLite has no checkpoint feed");
    }
    setup(a, "c", 4).await;
    let live = expect(b.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(live["source"], "live");
    assert_eq!(
        expect(b.reconstruct("c", 1).await, StatusCode::OK).await,
        live,
        "a repeat is the same answer"
    );
    expect(
        a.propose("c", propose_body(0, 3, &[0, 1, 2])).await,
        StatusCode::CREATED,
    )
    .await;
    let covered = expect(b.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(source_and_checkpoint(&covered), (Some("summary"), Some(1)));
    // And the other way round.
    let before = expect(a.reconstruct("c", 3).await, StatusCode::OK).await;
    assert_eq!(source_and_checkpoint(&before), (Some("raw_log"), Some(1)));
    expect(
        b.propose("c", propose_body(3, 3, &[3])).await,
        StatusCode::CREATED,
    )
    .await;
    let now = expect(a.reconstruct("c", 3).await, StatusCode::OK).await;
    assert_eq!(source_and_checkpoint(&now), (Some("summary"), Some(2)));
}

#[tokio::test]
async fn answers_stay_true_when_the_feed_connections_are_killed_and_the_feed_comes_back() {
    let a = spawn_app().await;
    let AnyStore::Postgres(pg) = &a.store else {
        // SQLite has no feed to kill: what stands in for it is checked instead.
        return without_a_feed_every_answer_reads_the_latest_checkpoint(&a).await;
    };
    let b = a.another_process().await;
    assert!(a.feed_up().await && b.feed_up().await);
    setup(&a, "c", 4).await;
    let live = expect(b.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(live["source"], "live");

    let killed = terminate_backends(pg, PgStore::FEED_APPLICATION_NAME).await;
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

/// The backend pids of the feed connections to the test's database, whichever process's.
async fn feed_pids(pg: &PgStore) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = $1 ORDER BY pid",
    )
    .bind(PgStore::FEED_APPLICATION_NAME)
    .fetch_all(pg.pool())
    .await
    .unwrap()
}

/// A Postgres backend stopped with SIGSTOP: its connection stays open, but nothing on it is
/// answered, as when the server's host or the network vanishes without a FIN or RST. Continued
/// with SIGCONT when dropped, also when the test fails (or the database could not be dropped).
struct Stopped(i32);

impl Stopped {
    fn new(pid: i32) -> Stopped {
        assert!(
            signal(pid, "STOP"),
            "kill -STOP {pid}: the tests must be allowed to signal the Postgres server's processes"
        );
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !signal(self.0, "CONT") {
            eprintln!("kill -CONT {} failed: continue it by hand", self.0);
        }
    }
}

fn signal(pid: i32, name: &str) -> bool {
    std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `pid` is a process of a Postgres server on this host (the test server may be remote).
fn is_local_postgres(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "postgres")
}

#[tokio::test]
async fn a_feed_whose_server_stops_answering_is_noticed_within_its_bound_and_answers_stay_true() {
    let mut config = defaults();
    config.database.feed_heartbeat_secs = 1;
    config.database.feed_timeout_secs = 1;
    let bound = config.database.feed_heartbeat().bound();
    let a = spawn_app_with(config).await;
    let AnyStore::Postgres(pg) = &a.store else {
        // SQLite has no feed to go half-open: what stands in for it is checked instead.
        return without_a_feed_every_answer_reads_the_latest_checkpoint(&a).await;
    };
    assert!(a.feed_up().await);
    let [a_feed] = feed_pids(pg).await[..] else {
        panic!("one feed connection so far: A's");
    };
    if !is_local_postgres(a_feed) {
        eprintln!(
            "skipped: the Postgres server is not on this host, so its backend cannot be stopped"
        );
        return;
    }
    let b = a.another_process().await;
    assert!(b.feed_up().await);
    let b_feed: Vec<i32> = feed_pids(pg)
        .await
        .into_iter()
        .filter(|&p| p != a_feed)
        .collect();
    setup(&a, "c", 4).await;
    // A's feed vouches for the conversation's latest checkpoint id: A answers from memory.
    let live = expect(a.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(live["source"], "live");

    // A's feed connection goes half-open, and B makes a checkpoint whose notification cannot
    // reach A. Within the heartbeat's bound A notices, and answers from the checkpoint.
    let stopped = Stopped::new(a_feed);
    let since = Instant::now();
    expect(
        b.propose("c", propose_body(0, 3, &[0, 1, 2])).await,
        StatusCode::CREATED,
    )
    .await;
    let margin = Duration::from_secs(2);
    let covered = converges_within(&a, 1, &live, 1, bound + margin).await;
    assert_eq!(source_and_checkpoint(&covered), (Some("summary"), Some(1)));
    eprintln!(
        "A answered from B's checkpoint {:.2} s after its feed's server stopped (bound {} s + {} s margin)",
        since.elapsed().as_secs_f64(),
        bound.as_secs(),
        margin.as_secs()
    );

    // The feed is up again on a new connection, though the old one's server is still stopped,
    // and it carries the next checkpoint.
    assert!(a.feed_up().await);
    let feeds = feed_pids(pg).await;
    assert!(
        feeds.iter().any(|p| *p != a_feed && !b_feed.contains(p)),
        "A listens on a new connection: {feeds:?}, was {a_feed}, B's {b_feed:?}"
    );
    let before = expect(a.reconstruct("c", 3).await, StatusCode::OK).await;
    expect(
        b.propose("c", propose_body(3, 3, &[3])).await,
        StatusCode::CREATED,
    )
    .await;
    let now = converges(&a, 3, &before, 2).await;
    assert_eq!(source_and_checkpoint(&now), (Some("summary"), Some(2)));

    // Continued, the old connection's server answers at last, and A closes that connection.
    drop(stopped);
    for _ in 0..1000 {
        if !feed_pids(pg).await.contains(&a_feed) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the stopped feed connection was not closed within 10 s of its server continuing");
}

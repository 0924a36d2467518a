//! Reconstructs read together (on Postgres, lookups that arrive while others are at the
//! database share one statement): each request still gets its own answer, whichever tenant,
//! conversation, turn or source its neighbours in the statement have, and a missing turn is a
//! 404 of its own.

use crate::reconstruct::{propose_body, setup_from as turns};
use crate::support::*;
use gatekeeper::config::ServeConfig;
use gatekeeper::store::PgStore;
use gatekeeper_test_support::{AnyStore, terminate_backends};
use reqwest::StatusCode;
use serde_json::Value;

const KEY_A: &str = "tenant-a-key-0123456789";
const KEY_B: &str = "tenant-b-key-9876543210";

/// Status and body of every path, all requests in flight at once.
async fn all_at_once(reads: &[(TestApp, String)]) -> Vec<(StatusCode, Value)> {
    let requests: Vec<_> = (reads.iter().cloned())
        .map(|(app, path)| {
            tokio::spawn(async move {
                let response = app.get(&path).await;
                let status = response.status();
                (status, response.json::<Value>().await.expect("a JSON body"))
            })
        })
        .collect();
    let mut answers = Vec::new();
    for request in requests {
        answers.push(request.await.expect("the request's task"));
    }
    answers
}

#[tokio::test]
async fn concurrent_reconstructs_each_get_their_own_answer_whatever_else_is_read_with_them() {
    // No answer cache: every request goes to the store.
    let app = spawn_app_with(ServeConfig {
        api_keys: Some(format!("tenantA:{KEY_A},tenantB:{KEY_B}")),
        reconstruct_cache_mib: 0,
        ..Default::default()
    })
    .await;
    let (a, b) = (app.with_key(KEY_A), app.with_key(KEY_B));
    // The same conversation name in both tenants with other contents, and a second
    // conversation: summary, raw_log and live turns in each.
    turns(&a, "shared", 0, 8).await;
    turns(&b, "shared", 20, 8).await;
    turns(&a, "other", 40, 6).await;
    for (tenant, conversation) in [(&a, "shared"), (&b, "shared"), (&a, "other")] {
        let path = format!("/v1/conversations/{conversation}/compactions");
        expect(
            tenant.post(&path, &propose_body(0, 3, &[0, 2])).await,
            StatusCode::CREATED,
        )
        .await;
    }
    let mut reads = Vec::new();
    for (tenant, conversation, n) in [(&a, "shared", 8), (&b, "shared", 8), (&a, "other", 6)] {
        // Past the log's end and in no conversation: 404s among the answers.
        for turn in 0..n + 2 {
            reads.push((
                tenant.clone(),
                format!("/v1/conversations/{conversation}/reconstruct/{turn}"),
            ));
        }
    }
    reads.push((b.clone(), "/v1/conversations/other/reconstruct/0".into()));
    // One at a time, then all at once, three times over.
    let mut alone = Vec::new();
    for read in &reads {
        alone.extend(all_at_once(std::slice::from_ref(read)).await);
    }
    let sources: Vec<&str> = alone
        .iter()
        .filter_map(|(_, v)| v["source"].as_str())
        .collect();
    for source in ["summary", "raw_log", "live"] {
        assert!(sources.contains(&source), "{source} among {sources:?}");
    }
    let missing = alone
        .iter()
        .filter(|(s, _)| *s == StatusCode::NOT_FOUND)
        .count();
    assert_eq!(
        missing, 7,
        "two past each log's end, and tenant B's unknown conversation"
    );
    // The two tenants' "shared" logs differ: an answer given to the wrong tenant would show.
    assert_ne!(alone[5].1["text"], alone[15].1["text"]);
    for _ in 0..3 {
        let together = all_at_once(&reads).await;
        for ((read, expected), got) in reads.iter().zip(&alone).zip(&together) {
            assert_eq!(got, expected, "{}", read.1);
        }
    }
}

#[tokio::test]
async fn a_reconstruct_whose_idle_connection_died_is_answered_on_a_new_one() {
    let app = uncached_app().await;
    let AnyStore::Postgres(pg) = &app.store else {
        return; // SQLite reads on the pool, with no connection of reconstruct's own.
    };
    turns(&app, "c", 0, 3).await;
    let first = expect(app.reconstruct("c", 0).await, StatusCode::OK).await;
    // As a server restart or an idle timeout would: the connection the read used, now idle.
    let killed = terminate_backends(pg, PgStore::RECONSTRUCT_APPLICATION_NAME).await;
    assert_eq!(killed, 1, "one lookup at a time needs one connection");
    let again = expect(app.reconstruct("c", 0).await, StatusCode::OK).await;
    assert_eq!(again, first);
}

#[tokio::test]
async fn once_the_store_closes_a_reconstruct_without_a_cached_answer_is_503() {
    let app = uncached_app().await;
    turns(&app, "c", 0, 2).await;
    // Reconstruct's own connection, if the backend has one, is open and idle now.
    expect(app.reconstruct("c", 0).await, StatusCode::OK).await;
    app.store.close().await;
    problem(
        app.reconstruct("c", 1).await,
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
}

/// A service with no answer cache: every reconstruct goes to the store.
async fn uncached_app() -> TestApp {
    spawn_app_with(ServeConfig {
        reconstruct_cache_mib: 0,
        ..Default::default()
    })
    .await
}

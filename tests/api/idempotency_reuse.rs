//! An `Idempotency-Key` reused on an append: with another body it is refused and writes
//! nothing, the first answer still replays after that refusal, and on another conversation it
//! is a new request there. (The proposal side: `idempotency.rs`.)

use crate::support::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn post_with_key(app: &TestApp, path: &str, key: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn replayed(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

/// Two real turns without ids, so only the key keeps a retry from appending them again.
fn batch(skip: usize) -> Value {
    json!({ "turns": tau_turns(skip + 2)[skip..].to_vec() })
}

#[tokio::test]
async fn an_append_key_reused_with_another_body_is_422_writes_nothing_and_the_first_answer_still_replays()
 {
    let app = spawn_app().await;
    let path = "/v1/conversations/c/turns";
    let first = post_with_key(&app, path, "append-1", &batch(0)).await;
    assert!(!replayed(&first));
    let first = expect(first, StatusCode::CREATED).await;
    assert_eq!(first["next_id"], 2);
    let before = app.full_snapshot("c").await;

    let other = post_with_key(&app, path, "append-1", &batch(2)).await;
    assert!(!replayed(&other));
    let other = problem(other, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(other["type"], "urn:gatekeeper:problem:invalid-request");
    assert_eq!(other["field"], "Idempotency-Key");
    assert_eq!(app.full_snapshot("c").await, before, "nothing written");

    // The refusal did not spend or change the key: the first request's retry gets its answer.
    let retried = post_with_key(&app, path, "append-1", &batch(0)).await;
    assert!(replayed(&retried), "the first answer is replayed");
    assert_eq!(expect(retried, StatusCode::CREATED).await, first);
    assert_eq!(app.full_snapshot("c").await, before, "and nothing appended");
}

#[tokio::test]
async fn an_append_key_used_on_another_conversation_is_a_new_append_there() {
    let app = spawn_app().await;
    let on = |conversation: &str| format!("/v1/conversations/{conversation}/turns");
    let first = expect(
        post_with_key(&app, &on("c"), "k", &batch(0)).await,
        StatusCode::CREATED,
    )
    .await;
    let there = post_with_key(&app, &on("d"), "k", &batch(0)).await;
    assert!(!replayed(&there), "not c's answer");
    let there = expect(there, StatusCode::CREATED).await;
    assert_eq!(
        (&there["conversation"], &there["appended"]),
        (&json!("d"), &json!(2))
    );
    // Each conversation's retry replays its own answer and appends nothing.
    for (conversation, answer) in [("c", &first), ("d", &there)] {
        let again = post_with_key(&app, &on(conversation), "k", &batch(0)).await;
        assert!(replayed(&again), "{conversation}");
        assert_eq!(&expect(again, StatusCode::CREATED).await, answer);
        let (_, snapshot) = app.snapshot(conversation).await;
        assert_eq!(snapshot["next_id"], 2, "{conversation}");
    }
}

#[tokio::test]
async fn a_proposal_key_refused_for_another_body_still_replays_its_first_answer() {
    let app = spawn_app().await;
    crate::reconstruct::setup(&app, "c", 4).await;
    let path = "/v1/conversations/c/compactions";
    let proposal = crate::reconstruct::propose_body(0, 3, &[0, 1, 3]);
    let first = expect(
        post_with_key(&app, path, "p", &proposal).await,
        StatusCode::CREATED,
    )
    .await;
    let mut other = proposal.clone();
    other["summary"] = json!("K0-000 only.");
    problem(
        post_with_key(&app, path, "p", &other).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    let retried = post_with_key(&app, path, "p", &proposal).await;
    assert!(replayed(&retried));
    assert_eq!(expect(retried, StatusCode::CREATED).await, first);
    let (_, snapshot) = app.snapshot("c").await;
    assert_eq!(snapshot["checkpoints"], 1);
}

//! Proposals are decided before the conversation's lock is taken; under it, only what can change
//! is checked. These tests hold the lock from another connection while a proposal waits for it,
//! and change things meanwhile, as a concurrent request would.

use crate::support::*;
use gatekeeper::domain::TenantId;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A summary holding every anchor the plan names for turns 0..=2 of "c", none pinned yet.
async fn covering_summary(app: &TestApp) -> String {
    let plan = expect(app.plan("c", "summary_budget=100000").await, StatusCode::OK).await;
    let anchors: Vec<&str> = plan["turns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["anchors"].as_array().unwrap())
        .map(|a| a.as_str().unwrap())
        .collect();
    format!("<summary>\n{}, done.\n</summary>", anchors.join(", "))
}

/// Runs `change` (SQL) inside a transaction that holds the conversation's write lock while the
/// proposals, decided, wait for it; returns their answers in order.
async fn propose_while_locked(
    app: &TestApp,
    bodies: Vec<Value>,
    change: &[&'static str],
) -> Vec<(StatusCode, Value)> {
    let mut lock = HeldLock::take(&app.store, TenantId::single().as_str(), "c").await;
    let proposals: Vec<_> = bodies.into_iter().map(|b| in_background(app, b)).collect();
    lock.wait_for_waiters(proposals.len()).await;
    for sql in change {
        lock.execute(sql).await;
    }
    lock.release().await;
    answers(proposals).await
}

fn in_background(app: &TestApp, body: Value) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let app = app.clone();
    tokio::spawn(async move {
        let response = app.propose("c", body).await;
        let status = response.status();
        (status, response.json::<Value>().await.unwrap())
    })
}

async fn answers(
    proposals: Vec<tokio::task::JoinHandle<(StatusCode, Value)>>,
) -> Vec<(StatusCode, Value)> {
    let mut answers = Vec::new();
    for proposal in proposals {
        answers.push(proposal.await.unwrap());
    }
    answers
}

#[tokio::test]
async fn a_turn_pinned_while_a_proposal_waits_for_the_lock_is_not_covered_the_proposal_is_decided_again()
 {
    let app = spawn_app().await;
    let turns = tau_turns(4).split_off(1);
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let summary = covering_summary(&app).await;
    let body = json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 100000 });
    let before = metric(
        &app.metrics_text().await,
        "gatekeeper_compaction_redecisions_total",
    );

    // As PATCH .../turns/1 {"pinned": true} writes it, committed between decision and lock.
    let answers = propose_while_locked(
        &app,
        vec![body],
        &[
            "UPDATE turns SET pinned = true WHERE conversation = 'c' AND id = 1",
            "UPDATE conversations SET facts_version = facts_version + 1 WHERE conversation = 'c'",
        ],
    )
    .await;
    let (status, verdict) = &answers[0];
    assert_eq!(*status, StatusCode::CREATED, "{verdict}");
    assert_eq!(verdict["covered"], json!([[0, 0], [2, 2]]));
    assert_eq!(
        verdict["turns"],
        json!([{ "id": 1, "status": "uncovered", "reason": "pinned", "missing_anchors": [] }])
    );
    let after = metric(
        &app.metrics_text().await,
        "gatekeeper_compaction_redecisions_total",
    );
    assert!(after >= before + 1.0, "decided again: {before} → {after}");
    let answer = expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "raw_log");
}

#[tokio::test]
async fn of_two_proposals_decided_before_either_holds_the_lock_only_one_meets_its_expectation() {
    let app = spawn_app().await;
    let turns = tau_turns(4).split_off(1);
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let summary = covering_summary(&app).await;
    let body = json!({
        "from": 0, "to": 2, "summary": summary, "summary_budget": 100000,
        "expected_checkpoint": null
    });
    // Both are decided against a conversation without checkpoints; whichever takes the lock
    // second finds checkpoint 1 there.
    let answers = propose_while_locked(&app, vec![body.clone(), body], &[]).await;
    let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| s.as_u16()).collect();
    statuses.sort();
    assert_eq!(statuses, [201, 409], "{answers:?}");
    let stale = answers
        .iter()
        .find(|(s, _)| *s == StatusCode::CONFLICT)
        .unwrap();
    assert_eq!(stale.1["latest_checkpoint"], 1);
    let conversation = expect(app.get("/v1/conversations/c").await, StatusCode::OK).await;
    assert_eq!(conversation["checkpoints"], 1);
}

#[tokio::test]
async fn every_write_times_how_long_it_holds_the_conversations_lock() {
    let app = spawn_app().await;
    let held = |text: &str, operation: &str| {
        let series = format!("gatekeeper_write_lock_seconds_count{{operation=\"{operation}\"}}");
        metric(text, &series)
    };
    let before = app.metrics_text().await;
    expect(
        app.append("c", json!(tau_turns(3))).await,
        StatusCode::CREATED,
    )
    .await;
    let summary = covering_summary(&app).await;
    let body = json!({ "from": 0, "to": 0, "summary": summary, "summary_budget": 100000 });
    expect(app.propose("c", body).await, StatusCode::CREATED).await;
    let pin = json!({ "pinned": true });
    let pinned = app.patch("/v1/conversations/c/turns/2", &pin).await;
    expect(pinned, StatusCode::OK).await;
    let after = app.metrics_text().await;
    for operation in ["append", "propose", "pin"] {
        let (was, is) = (held(&before, operation), held(&after, operation));
        assert!(is >= was + 1.0, "{operation}: {was} → {is}");
    }
}

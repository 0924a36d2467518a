//! Pinned turns (rule 2c): never covered, answered from the raw log, kept verbatim in the
//! working context; unpinned (or pinned later) with `PATCH .../turns/{id}`.

use crate::support::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Three real turns after a system prompt (whose policy text holds most words the others use);
/// the middle one pinned.
fn three_turns() -> Vec<Value> {
    tau_turns(4).split_off(1)
}

async fn pinned_conversation(app: &TestApp) -> Vec<Value> {
    let mut turns = three_turns();
    turns[1]["pinned"] = json!(true);
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    turns
}

/// A clean summary holding what the plan says every turn from `from` on needs.
async fn full_summary(app: &TestApp, from: i64) -> String {
    let query = format!("summary_budget=100000&from={from}");
    let plan = expect(app.plan("c", &query).await, StatusCode::OK).await;
    let mut summary = String::from("<summary>\n");
    for t in plan["turns"].as_array().unwrap() {
        for a in t["anchors"].as_array().unwrap() {
            summary.push_str(a.as_str().unwrap());
            summary.push_str(", ");
        }
    }
    summary.push_str("done.\n</summary>");
    summary
}

#[tokio::test]
async fn a_pinned_turn_is_never_covered_and_always_answered_from_the_raw_log() {
    let app = spawn_app().await;
    let turns = pinned_conversation(&app).await;
    let stored = expect(app.turn("c", 1).await, StatusCode::OK).await;
    assert_eq!(stored["pinned"], true);
    let plan = expect(app.plan("c", "summary_budget=100000").await, StatusCode::OK).await;
    assert_eq!(plan["turns"][1]["unanchored"], "pinned");
    assert_eq!(plan["turns"][1]["anchors"], json!([]));

    let summary = full_summary(&app, 0).await;
    let body = json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 100000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["covered"], json!([[0, 0], [2, 2]]));
    assert_eq!(
        verdict["turns"],
        json!([{ "id": 1, "status": "uncovered", "reason": "pinned", "missing_anchors": [] }])
    );

    let answer = expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(
        (&answer["source"], &answer["reason"], &answer["text"]),
        (&json!("raw_log"), &json!("pinned"), &turns[1]["content"])
    );
    let context = expect(app.context("c").await, StatusCode::OK).await;
    let verbatim = context["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "turn" && i["id"] == 1)
        .expect("the pinned turn is in the working context");
    assert_eq!(verbatim["content"], turns[1]["content"]);
}

#[tokio::test]
async fn an_unpinned_turn_can_be_covered_by_a_later_checkpoint() {
    let app = spawn_app().await;
    pinned_conversation(&app).await;
    let summary = full_summary(&app, 0).await;
    let body = json!({ "from": 0, "to": 2, "summary": summary.clone(), "summary_budget": 100000 });
    expect(app.propose("c", body).await, StatusCode::CREATED).await;

    let before = app.metrics_text().await;
    let unpinned = expect(app.pin("c", 1, false).await, StatusCode::OK).await;
    assert_eq!(
        (unpinned["id"].as_i64(), &unpinned["pinned"]),
        (Some(1), &json!(false))
    );
    let after = app.metrics_text().await;
    assert!(
        metric(&after, "gatekeeper_turn_pins_total{action=\"unpin\"}")
            > metric(&before, "gatekeeper_turn_pins_total{action=\"unpin\"}")
    );
    // The checkpoint made while it was pinned stands: still the raw log.
    let answer = expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(answer["reason"], "pinned");
    // A new summary of the turn covers it now.
    let summary = full_summary(&app, 1).await;
    let body = json!({ "from": 1, "to": 2, "summary": summary, "summary_budget": 100000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["covered"], json!([[1, 2]]));
    let answer = expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "summary");
}

#[tokio::test]
async fn a_turn_a_checkpoint_covers_cannot_be_pinned_and_nothing_changes() {
    let app = spawn_app().await;
    expect(
        app.append("c", json!(three_turns())).await,
        StatusCode::CREATED,
    )
    .await;
    let summary = full_summary(&app, 0).await;
    let body = json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 100000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    let covered = expand(&verdict["covered"])[0];
    let refused = problem(app.pin("c", covered, true).await, StatusCode::CONFLICT).await;
    assert_eq!(refused["checkpoint_id"], 1);
    let stored = expect(app.turn("c", covered).await, StatusCode::OK).await;
    assert_eq!(stored["pinned"], false);
    // Unpinning is always allowed (a no-op here).
    expect(app.pin("c", covered, false).await, StatusCode::OK).await;
}

#[tokio::test]
async fn a_live_turn_pinned_later_stays_out_of_every_later_summary() {
    let app = spawn_app().await;
    expect(
        app.append("c", json!(three_turns())).await,
        StatusCode::CREATED,
    )
    .await;
    let pinned = expect(app.pin("c", 2, true).await, StatusCode::OK).await;
    assert_eq!(pinned["pinned"], true);
    let summary = full_summary(&app, 0).await;
    let body = json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 100000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert!(!expand(&verdict["covered"]).contains(&2));
    assert_eq!(verdict["turns"][0]["reason"], "pinned");
}

#[tokio::test]
async fn pinning_an_unknown_turn_is_404_and_a_malformed_patch_is_422() {
    let app = spawn_app().await;
    pinned_conversation(&app).await;
    problem(app.pin("c", 3, true).await, StatusCode::NOT_FOUND).await;
    problem(app.pin("nobody", 0, true).await, StatusCode::NOT_FOUND).await;
    let path = "/v1/conversations/c/turns/0";
    for body in [
        json!({}),
        json!({ "pinned": "yes" }),
        json!({ "pinned": true, "x": 1 }),
    ] {
        problem(
            app.patch(path, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let stored = expect(app.turn("c", 0).await, StatusCode::OK).await;
    assert_eq!(stored["pinned"], false, "nothing changed");
}

#[tokio::test]
async fn pinning_is_not_part_of_a_turns_identity_so_a_replay_does_not_change_it() {
    let app = spawn_app().await;
    let turns = pinned_conversation(&app).await;
    let mut replay: Vec<Value> = turns.clone();
    for (i, t) in replay.iter_mut().enumerate() {
        t["id"] = json!(i);
        t["pinned"] = json!(false);
    }
    let answer = expect(app.append("c", json!(replay)).await, StatusCode::OK).await;
    assert_eq!(answer["replayed"], 3);
    let stored = expect(app.turn("c", 1).await, StatusCode::OK).await;
    assert_eq!(stored["pinned"], true);
}

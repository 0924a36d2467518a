//! `GET .../turns/{id}` and `GET /v1/conversations/{c}`.

use crate::support::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[tokio::test]
async fn a_stored_turn_is_read_back_with_every_field() {
    let app = spawn_app().await;
    let started = chrono::Utc::now();
    let real = tau_turns(2);
    let turns = json!([
        { "id": 0, "role": "user", "content": real[0]["content"], "tokens": 12, "anchors": ["INV-2093"], "external_id": "msg_01" },
        { "role": "tool", "content": real[1]["content"] },
    ]);
    expect(app.append("c", turns.clone()).await, StatusCode::CREATED).await;

    let first = expect(app.turn("c", 0).await, StatusCode::OK).await;
    assert_eq!(
        keys(&first),
        BTreeSet::from([
            "id",
            "role",
            "content",
            "tokens",
            "anchors",
            "anchor_origin",
            "pinned",
            "external_id",
            "created_at"
        ])
    );
    assert_eq!(first["id"], 0);
    assert_eq!(first["role"], "user");
    assert_eq!(first["content"], real[0]["content"]);
    assert_eq!(first["tokens"], 12);
    assert_eq!(first["anchors"], json!(["INV-2093"]));
    assert_eq!(first["anchor_origin"], "given");
    assert_eq!(first["pinned"], false);
    assert_eq!(first["external_id"], "msg_01");
    let created_at: chrono::DateTime<chrono::Utc> = first["created_at"]
        .as_str()
        .unwrap()
        .parse()
        .expect("created_at is an RFC 3339 timestamp");
    assert!(
        created_at >= started - chrono::Duration::seconds(5)
            && created_at <= chrono::Utc::now() + chrono::Duration::seconds(5)
    );

    let second = expect(app.turn("c", 1).await, StatusCode::OK).await;
    assert_eq!(second["id"], 1);
    assert_eq!(second["role"], "tool");
    assert_eq!(second["external_id"], Value::Null);
    let content = real[1]["content"].as_str().unwrap();
    assert_eq!(
        second["tokens"].as_u64(),
        Some(u64::from(count_tokens(content)))
    );
    let sent: Vec<Value> = turns.as_array().unwrap().clone();
    assert_eq!(second["anchors"], json!(provisional_anchors(&sent)[1]));
    assert_eq!(second["anchor_origin"], "derived");
}

#[tokio::test]
async fn a_turn_id_the_log_does_not_hold_is_404() {
    let app = spawn_app().await;
    expect(
        app.append("c", json!(tau_turns(3))).await,
        StatusCode::CREATED,
    )
    .await;
    for id in [3, 4, 1_000_000, i64::MAX, -1] {
        problem(app.turn("c", id).await, StatusCode::NOT_FOUND).await;
    }
    problem(app.turn("unknown", 0).await, StatusCode::NOT_FOUND).await;
    expect(app.turn("c", 2).await, StatusCode::OK).await;
}

#[tokio::test]
async fn the_conversation_reports_next_id_total_tokens_and_its_latest_checkpoint() {
    let app = spawn_app().await;
    let turns: Vec<Value> = tau_turns(6)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("REF-{i}")]);
            t
        })
        .collect();
    let appended = expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let total: u64 = appended["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tokens"].as_u64().unwrap())
        .sum();

    let fresh = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(
        keys(&fresh),
        BTreeSet::from([
            "conversation",
            "next_id",
            "total_tokens",
            "checkpoints",
            "latest_checkpoint"
        ])
    );
    assert_eq!(fresh["conversation"], "c");
    assert_eq!(fresh["next_id"], 6);
    assert_eq!(fresh["total_tokens"].as_u64(), Some(total));
    assert_eq!(fresh["checkpoints"], 0);
    assert_eq!(fresh["latest_checkpoint"], Value::Null);

    // Checkpoint 1: [0, 2], everything covered.
    let summary = "The customer gave REF-0, REF-1 and REF-2.";
    let one = json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 1000 });
    expect(app.propose("c", one).await, StatusCode::CREATED).await;
    let after_one = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(after_one["checkpoints"], 1);
    assert_eq!(
        after_one["latest_checkpoint"],
        json!({ "checkpoint_id": 1, "from": 0, "advanced_to": 2, "outcome": "accepted" })
    );
    assert_eq!(after_one["next_id"], 6);
    assert_eq!(
        after_one["total_tokens"].as_u64(),
        Some(total),
        "a checkpoint does not change the raw log"
    );

    // Checkpoint 2: [3, 5], truncated and unreported, anchors reach only turn 3: partial.
    let two =
        json!({ "from": 3, "to": 5, "summary": "Then REF-3 came up and", "summary_budget": 1000 });
    let verdict = expect(app.propose("c", two).await, StatusCode::CREATED).await;
    assert_eq!(verdict["outcome"], "partial");
    let after_two = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(after_two["checkpoints"], 2);
    let latest = &after_two["latest_checkpoint"];
    assert_eq!(
        keys(latest),
        BTreeSet::from(["checkpoint_id", "from", "advanced_to", "outcome"])
    );
    assert_eq!(
        latest,
        &json!({ "checkpoint_id": 2, "from": 3, "advanced_to": 3, "outcome": "partial" })
    );

    // A dry run and a rejected proposal change nothing.
    let dry = json!({ "from": 0, "to": 5, "summary": "REF-0 to REF-5.", "summary_budget": 1000, "dry_run": true });
    expect(app.propose("c", dry).await, StatusCode::OK).await;
    let rejected =
        json!({ "from": 0, "to": 5, "summary": "Nothing useful.", "summary_budget": 1000 });
    problem(
        app.propose("c", rejected).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(
        expect(app.conversation("c").await, StatusCode::OK).await,
        after_two
    );

    // Appending more turns moves next_id and total_tokens only.
    let more = expect(
        app.append("c", json!(tau_turns(2))).await,
        StatusCode::CREATED,
    )
    .await;
    let added: u64 = more["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tokens"].as_u64().unwrap())
        .sum();
    let after_more = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(after_more["next_id"], 8);
    assert_eq!(after_more["total_tokens"].as_u64(), Some(total + added));
    assert_eq!(
        after_more["latest_checkpoint"],
        after_two["latest_checkpoint"]
    );
}

#[tokio::test]
async fn an_unknown_conversation_is_404() {
    let app = spawn_app().await;
    let body = problem(app.conversation("nobody-here").await, StatusCode::NOT_FOUND).await;
    assert!(
        body["detail"].as_str().unwrap().contains("nobody-here"),
        "{body}"
    );
    expect(
        app.append("somebody", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    problem(app.conversation("somebody2").await, StatusCode::NOT_FOUND).await;
    problem(app.conversation("Somebody").await, StatusCode::NOT_FOUND).await;
}

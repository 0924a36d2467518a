//! `GET .../context` after a partial checkpoint: the turns past its `advanced_to` were never
//! compacted, so they are live (verbatim, never stubbed), not spanned by the checkpoint.

use crate::reconstruct::setup;
use crate::support::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The context's items as `(type, id or checkpoint id, source)`, in order.
fn shape(context: &Value) -> Vec<(String, i64, Option<String>)> {
    (context["items"].as_array().unwrap().iter())
        .map(|i| {
            let kind = i["type"].as_str().unwrap().to_owned();
            let id = i[if kind == "summary" {
                "checkpoint_id"
            } else {
                "id"
            }]
            .as_i64()
            .unwrap();
            (kind, id, i["source"].as_str().map(str::to_owned))
        })
        .collect()
}

fn row(kind: &str, id: i64, source: Option<&str>) -> (String, i64, Option<String>) {
    (kind.to_owned(), id, source.map(str::to_owned))
}

#[tokio::test]
async fn the_turns_a_partial_checkpoint_did_not_compact_are_live_in_the_context() {
    let app = spawn_app().await;
    let turns = setup(&app, "c", 6).await;
    // Truncated, no report: the anchors reach turn 2 only, so it advances to 2 and 3-5 stay.
    let body =
        json!({ "from": 0, "to": 5, "summary": "K0-000, K2-222 and then", "summary_budget": 5000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(
        (&verdict["outcome"], &verdict["advanced_to"]),
        (&json!("partial"), &json!(2))
    );
    assert_eq!(verdict["not_compacted"], json!([[3, 5]]));

    let context = expect(app.context("c").await, StatusCode::OK).await;
    assert_eq!(
        shape(&context),
        [
            row("summary", 1, None),
            row("turn", 1, Some("raw_log")),
            row("turn", 3, Some("live")),
            row("turn", 4, Some("live")),
            row("turn", 5, Some("live")),
        ],
        "{context}"
    );
    let items = context["items"].as_array().unwrap();
    assert_eq!(items[0]["covers"], json!([[0, 0], [2, 2]]));
    for item in &items[1..] {
        let id = item["id"].as_u64().unwrap() as usize;
        assert_eq!(item["content"], turns[id]["content"], "turn {id} verbatim");
    }

    // Under the smallest budget a spanned turn may become a stub (turn 1 here is smaller than
    // its stub, so it stays); the live tail never does, however big (turn 4 is).
    let tight = expect(
        app.get("/v1/conversations/c/context?max_tokens=0").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(tight["fits"], false);
    assert_eq!(shape(&tight), shape(&context), "{tight}");
    assert!(
        items[3]["tokens"].as_u64().unwrap() > 100,
        "a turn worth stubbing"
    );
}

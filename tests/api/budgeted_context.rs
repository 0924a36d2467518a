//! `GET .../context?max_tokens=N` on a real tau-bench conversation: stubs for what does not fit,
//! each recallable byte-exact, and never a silent cut.

use crate::context_plan::{append_conversation, compact, skippable};
use crate::support::*;
use reqwest::StatusCode;
use serde_json::Value;

async fn budgeted(app: &TestApp, conversation: &str, max_tokens: u64) -> Value {
    let path = format!("/v1/conversations/{conversation}/context?max_tokens={max_tokens}");
    expect(app.get(&path).await, StatusCode::OK).await
}

fn items_of<'v>(context: &'v Value, kind: &str) -> Vec<&'v Value> {
    (context["items"].as_array().unwrap().iter())
        .filter(|i| i["type"] == kind)
        .collect()
}

fn total(context: &Value) -> u64 {
    let items = context["items"].as_array().unwrap();
    (items.iter())
        .map(|i| {
            i[if i["type"] == "stub" {
                "stub_tokens"
            } else {
                "tokens"
            }]
            .as_u64()
            .unwrap()
        })
        .sum()
}

#[tokio::test]
async fn a_budget_stubs_the_uncovered_turns_that_do_not_fit_and_each_stub_recalls_its_turn() {
    let app = spawn_app().await;
    let log = append_conversation(&app, "airline", 0).await;
    let last = log.len() - 1;
    let skip = skippable(&log, 0, last - 4, 4);
    compact(&app, "airline", &log, 0, last - 4, &skip).await;
    let whole = expect(app.context("airline").await, StatusCode::OK).await;
    assert!(
        whole.get("fits").is_none(),
        "without max_tokens, the answer as before"
    );
    let whole_tokens = whole["total_tokens"].as_u64().unwrap();

    // As small as it gets: every left-out turn a stub (or itself, when smaller than its stub).
    let tight = budgeted(&app, "airline", 1).await;
    assert_eq!(tight["fits"], false);
    let smallest = tight["smallest_max_tokens"].as_u64().unwrap();
    assert_eq!(tight["total_tokens"].as_u64(), Some(smallest));
    assert_eq!(total(&tight), smallest, "stubs count what they take");
    assert!(smallest < whole_tokens);
    let stubs = items_of(&tight, "stub");
    assert!(!stubs.is_empty());
    let live: Vec<&Value> = items_of(&tight, "turn")
        .into_iter()
        .filter(|t| t["source"] == "live")
        .collect();
    assert_eq!(live.len(), 4, "the live tail stays verbatim");
    for stub in &stubs {
        let id = stub["id"].as_u64().unwrap() as usize;
        assert!(skip.contains(&id), "only turns the summary left out: {id}");
        assert_eq!(stub["tokens"].as_u64(), Some(log[id].tokens));
        assert!(
            log[id]
                .content
                .starts_with(stub["preview"].as_str().unwrap())
        );
        let anchors: Vec<&str> = (stub["anchors"].as_array().unwrap().iter())
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(anchors, log[id].anchors);
        let recalled = expect(
            app.get(stub["recall"].as_str().unwrap()).await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(
            recalled["text"].as_str(),
            Some(log[id].content.as_str()),
            "byte-exact"
        );
        assert_eq!(recalled["source"], "raw_log");
    }

    // Exactly the smallest budget fits; a little more brings the newest left-out turn back
    // first.
    let exact = budgeted(&app, "airline", smallest).await;
    assert_eq!(
        (exact["fits"].as_bool(), exact["total_tokens"].as_u64()),
        (Some(true), Some(smallest))
    );
    let newest = stubs.last().unwrap();
    let newest_id = newest["id"].as_u64().unwrap();
    let more = newest["tokens"].as_u64().unwrap() - newest["stub_tokens"].as_u64().unwrap();
    let roomier = budgeted(&app, "airline", smallest + more).await;
    assert_eq!(roomier["fits"], true);
    assert!(total(&roomier) <= smallest + more);
    let verbatim: Vec<u64> = (items_of(&roomier, "turn").iter())
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    assert!(verbatim.contains(&newest_id), "newest first");
    assert_eq!(items_of(&roomier, "stub").len(), stubs.len() - 1);

    // Room for everything: the whole context, verbatim.
    let all = budgeted(&app, "airline", whole_tokens).await;
    assert_eq!(all["fits"], true);
    assert_eq!(all["items"], whole["items"]);
}

#[tokio::test]
async fn a_pinned_turn_stays_verbatim_in_any_budget() {
    let app = spawn_app().await;
    let log = append_conversation(&app, "airline", 0).await;
    let last = log.len() - 1;
    let skip = skippable(&log, 0, last, 2);
    let pinned = skip[0];
    compact(&app, "airline", &log, 0, last, &skip).await;
    expect(
        app.pin("airline", pinned as i64, true).await,
        StatusCode::OK,
    )
    .await;
    let tight = budgeted(&app, "airline", 0).await;
    assert_eq!(tight["fits"], false);
    let verbatim: Vec<usize> = (items_of(&tight, "turn").iter())
        .map(|t| t["id"].as_u64().unwrap() as usize)
        .collect();
    assert!(verbatim.contains(&pinned), "{verbatim:?}");
    let stubbed: Vec<usize> = (items_of(&tight, "stub").iter())
        .map(|t| t["id"].as_u64().unwrap() as usize)
        .collect();
    assert!(!stubbed.contains(&pinned));
}

#[tokio::test]
async fn a_budget_that_is_not_a_count_of_tokens_is_400_and_an_unknown_parameter_too() {
    let app = spawn_app().await;
    append_conversation(&app, "airline", 0).await;
    for query in [
        "max_tokens=-1",
        "max_tokens=many",
        "max_tokens=1.5",
        "budget=10",
    ] {
        let path = format!("/v1/conversations/airline/context?{query}");
        problem(app.get(&path).await, StatusCode::BAD_REQUEST).await;
    }
}

//! Which work runs in a tenant's CPU slots, off the async workers, as
//! `gatekeeper_cpu_tasks_total{work}` counts it. A test binary of its own: the metrics recorder
//! is global to a process, and no other test's requests may move these counters.

use gatekeeper_test_support::{expect, metric, spawn_app, tau_turns};
use reqwest::StatusCode;
use serde_json::json;

async fn cpu_tasks(app: &gatekeeper_test_support::TestApp, work: &str) -> f64 {
    let text = app.metrics_text().await;
    metric(
        &text,
        &format!("gatekeeper_cpu_tasks_total{{work=\"{work}\"}}"),
    )
}

#[tokio::test]
async fn long_summaries_are_located_in_a_cpu_slot_short_ones_and_raw_turns_on_the_worker() {
    let app = spawn_app().await;
    let turns: Vec<_> = tau_turns(3)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("K{i}-{i}{i}{i}")]);
            t
        })
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    // Turn 0 under a short summary; turn 1 under one of 20 KB (past the 16 KiB kept inline).
    let short = json!({ "from": 0, "to": 0, "summary": "The agent handled K0-000.",
                        "summary_budget": 5000 });
    expect(app.propose("c", short).await, StatusCode::CREATED).await;
    let long = format!(
        "The agent handled K1-111. {}",
        "The customer asked again about the same booking. ".repeat(400)
    );
    assert!(long.len() > 16 * 1024);
    let long = json!({ "from": 1, "to": 1, "summary": long, "summary_budget": 50_000 });
    expect(app.propose("c", long).await, StatusCode::CREATED).await;

    let before = cpu_tasks(&app, "evidence").await;
    for (turn, source) in [(0, "summary"), (2, "live")] {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(answer["source"], source);
    }
    assert_eq!(
        cpu_tasks(&app, "evidence").await,
        before,
        "short work stays inline"
    );
    let answer = expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "summary");
    assert_eq!(answer["evidence"][0]["anchor"], "K1-111", "{answer}");
    assert_eq!(cpu_tasks(&app, "evidence").await, before + 1.0);
}

#[tokio::test]
async fn the_working_context_is_assembled_in_a_cpu_slot() {
    let app = spawn_app().await;
    expect(
        app.append("w", json!(tau_turns(4))).await,
        StatusCode::CREATED,
    )
    .await;
    let before = cpu_tasks(&app, "context").await;
    let context = expect(app.get("/v1/conversations/w/context").await, StatusCode::OK).await;
    assert_eq!(context["items"].as_array().unwrap().len(), 4);
    assert_eq!(cpu_tasks(&app, "context").await, before + 1.0);
}

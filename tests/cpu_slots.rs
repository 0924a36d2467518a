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

/// A summary of exactly `len` bytes that holds `anchor`.
fn summary_of(anchor: &str, len: usize) -> String {
    let filler = "The customer asked again about the same booking. ".repeat(len / 40 + 1);
    let mut summary = format!("The agent handled {anchor}. {filler}");
    summary.truncate(len);
    assert_eq!(summary.len(), len);
    summary
}

#[tokio::test]
async fn long_summaries_are_located_in_a_cpu_slot_short_ones_and_raw_turns_on_the_worker() {
    let app = spawn_app().await;
    let turns: Vec<_> = tau_turns(6)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("K{i}-{i}{i}{i}")]);
            t
        })
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    // Turn 0 under a short summary; turn 1 under one at the 16 KiB kept inline (its bytes and
    // its anchor's, 6); turns 2 to 4 under one past it alone, which holds turn 2's and 4's
    // anchors only (turn 3, uncovered, is answered from the log: nothing to locate).
    let proposals = [
        (0, 0, summary_of("K0-000", 30)),
        (1, 1, summary_of("K1-111", 16 * 1024 - 6)),
        (2, 4, summary_of("K2-222 and K4-444", 16 * 1024 + 1)),
    ];
    for (from, to, summary) in proposals {
        let body = json!({ "from": from, "to": to, "summary": summary, "summary_budget": 50_000 });
        expect(app.propose("c", body).await, StatusCode::CREATED).await;
    }

    let before = cpu_tasks(&app, "evidence").await;
    for (turn, source) in [(0, "summary"), (1, "summary"), (3, "raw_log"), (5, "live")] {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(answer["source"], source, "{turn}");
    }
    assert_eq!(
        cpu_tasks(&app, "evidence").await,
        before,
        "short work stays inline"
    );
    let answer = expect(app.reconstruct("c", 2).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "summary");
    assert_eq!(answer["evidence"][0]["anchor"], "K2-222", "{answer}");
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

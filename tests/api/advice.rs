//! The churn guard: `compaction-plan` advises `compact`, `raise_budget` or `wait`, with the
//! numbers behind it, and counts each advice.

use crate::support::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn the_plan_advises_compacting_a_range_worth_a_summary() {
    let app = spawn_app().await;
    let turns = vec![turn("user", "Rebook ZFA04Y for the honeymoon.", 200, &[])];
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let plan = expect(app.plan("c", "summary_budget=200").await, StatusCode::OK).await;
    assert_eq!(
        (
            &plan["advice"],
            &plan["advice_reason"],
            &plan["worthwhile_tokens"]
        ),
        (&json!("compact"), &json!("fits"), &json!(200))
    );
}

#[tokio::test]
async fn the_plan_advises_waiting_while_the_range_holds_less_than_the_budget() {
    let app = spawn_app().await;
    let turns = vec![turn("user", "Rebook ZFA04Y for the honeymoon.", 199, &[])];
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let plan = expect(app.plan("c", "summary_budget=200").await, StatusCode::OK).await;
    assert_eq!(
        (
            &plan["advice"],
            &plan["advice_reason"],
            &plan["to"],
            &plan["prefix_tokens"]
        ),
        (
            &json!("wait"),
            &json!("range_too_small"),
            &json!(0),
            &json!(199)
        )
    );
}

#[tokio::test]
async fn the_plan_advises_a_bigger_budget_when_not_even_the_first_turn_fits() {
    let app = spawn_app().await;
    let turns = vec![turn("tool", "{\"flights\": []}", 3001, &[])];
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let plan = expect(app.plan("c", "summary_budget=1000").await, StatusCode::OK).await;
    assert_eq!(
        (
            &plan["advice"],
            &plan["advice_reason"],
            &plan["to"],
            &plan["required_budget"]
        ),
        (
            &json!("raise_budget"),
            &json!("first_turn_over_budget"),
            &json!(null),
            &json!(1001)
        )
    );
    assert_eq!(plan["turns"], json!([]));
}

#[tokio::test]
async fn the_plan_advises_a_bigger_budget_when_a_small_range_is_cut_short_by_its_next_turn() {
    let app = spawn_app().await;
    let turns = vec![
        turn(
            "user",
            "Find flights from JFK to SEA on 2024-05-20.",
            40,
            &[],
        ),
        turn("tool", "{\"flights\": [\"HAT136\", \"HAT271\"]}", 3001, &[]),
    ];
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let plan = expect(app.plan("c", "summary_budget=200").await, StatusCode::OK).await;
    assert_eq!(
        (&plan["advice"], &plan["advice_reason"], &plan["to"]),
        (
            &json!("raise_budget"),
            &json!("next_turn_over_budget"),
            &json!(0)
        )
    );
    let raised = plan["budget_for_next_turn"].as_i64().expect("a budget");
    let plan = expect(
        app.plan("c", &format!("summary_budget={raised}")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["to"], 1, "the raised budget takes in the tool output");
}

#[tokio::test]
async fn three_rejections_from_one_from_advise_waiting_until_a_checkpoint_moves_on() {
    let app = spawn_app().await;
    let turns = vec![
        turn("user", "Rebook ZFA04Y for the honeymoon.", 300, &["ZFA04Y"]),
        turn("user", "And a wheelchair at Boston.", 300, &["Boston"]),
    ];
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let rejected =
        json!({ "from": 0, "to": 1, "summary": "Nothing useful.", "summary_budget": 200 });
    let advice = |plan: &serde_json::Value| {
        (
            plan["advice"].as_str().unwrap().to_owned(),
            plan["recent_rejections"].as_u64().unwrap(),
        )
    };
    let before = app.metrics_text().await;
    for n in 1..=3 {
        problem(
            app.propose("c", rejected.clone()).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        // A dry run decides the same but is not counted.
        let dry = json!({ "dry_run": true, "from": 0, "to": 1, "summary": "Nothing.", "summary_budget": 200 });
        problem(
            app.propose("c", dry).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        let plan = expect(app.plan("c", "summary_budget=200").await, StatusCode::OK).await;
        let expected = if n < 3 { "compact" } else { "wait" };
        assert_eq!(
            advice(&plan),
            (expected.to_owned(), n),
            "after {n} rejections"
        );
    }
    let plan = expect(app.plan("c", "summary_budget=200").await, StatusCode::OK).await;
    assert_eq!(plan["advice_reason"], "recent_rejections");
    let after = app.metrics_text().await;
    let waits = |m: &str| metric(m, "gatekeeper_compaction_advice_total{advice=\"wait\"}");
    assert!(
        waits(&after) >= waits(&before) + 2.0,
        "each advice is counted"
    );

    // Another `from` starts from zero; a checkpoint clears the streak.
    let plan = expect(
        app.plan("c", "summary_budget=200&from=1").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["recent_rejections"], 0);
    let good = json!({ "from": 0, "to": 0, "summary": "ZFA04Y.", "summary_budget": 200 });
    expect(app.propose("c", good).await, StatusCode::CREATED).await;
    let plan = expect(
        app.plan("c", "summary_budget=200&from=0").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["recent_rejections"], 0);
}

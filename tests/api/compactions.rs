//! `POST/GET .../compactions`: what is persisted, when, under which id, and what is refused.

use crate::support::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Six real turns with hand-set anchors `REF-0` .. `REF-5`.
async fn six_turns(app: &TestApp, conversation: &str) {
    let turns: Vec<Value> = tau_turns(6)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("REF-{i}")]);
            t
        })
        .collect();
    expect(
        app.append(conversation, json!(turns)).await,
        StatusCode::CREATED,
    )
    .await;
}

fn covering(from: i64, to: i64) -> String {
    let refs: Vec<String> = (from..=to).map(|i| format!("REF-{i}")).collect();
    format!("<summary>The agent handled {}.</summary>", refs.join(", "))
}

fn proposal(from: i64, to: i64) -> Value {
    json!({ "from": from, "to": to, "summary": covering(from, to), "summary_budget": 2000 })
}

/// Nothing is persisted: the list is empty and the conversation counts no checkpoint.
async fn assert_no_checkpoint(app: &TestApp, conversation: &str) {
    let list = expect(app.checkpoints(conversation).await, StatusCode::OK).await;
    assert_eq!(list["checkpoints"], json!([]));
    let state = expect(app.conversation(conversation).await, StatusCode::OK).await;
    assert_eq!(
        (state["checkpoints"].as_i64(), &state["latest_checkpoint"]),
        (Some(0), &Value::Null)
    );
    problem(app.checkpoint(conversation, 1).await, StatusCode::NOT_FOUND).await;
}

const VERDICT_FIELDS: [&str; 18] = [
    "checkpoint_id",
    "outcome",
    "from",
    "to",
    "advanced_to",
    "covered",
    "uncovered",
    "not_compacted",
    "prefix_tokens",
    "required_budget",
    "summary_budget",
    "summary_tokens",
    "over_ceiling",
    "truncated",
    "truncation_signals",
    "coverage_path",
    "contradictions",
    "turns",
];

#[tokio::test]
async fn an_accepted_proposal_is_201_with_the_whole_verdict() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let summary = covering(0, 3);
    let body = json!({ "from": 0, "to": 3, "summary": summary, "summary_budget": 2000, "end_marker": "</summary>", "finish_reason": "stop", "consumed": [[0, 3]] });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    let keys: BTreeSet<&str> = verdict
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for field in VERDICT_FIELDS {
        assert!(keys.contains(field), "{field} missing from {verdict}");
    }
    assert_eq!(verdict["checkpoint_id"], 1);
    assert_eq!(verdict["outcome"], "accepted");
    assert_eq!(
        (
            verdict["from"].as_i64(),
            verdict["to"].as_i64(),
            verdict["advanced_to"].as_i64()
        ),
        (Some(0), Some(3), Some(3))
    );
    assert_eq!(verdict["covered"], json!([[0, 3]]));
    assert_eq!(verdict["uncovered"], json!([]));
    assert_eq!(verdict["not_compacted"], json!([]));
    assert_eq!(verdict["contradictions"], json!([]));
    assert_eq!(verdict["turns"], json!([]));
    assert_eq!(
        verdict["summary_tokens"].as_u64(),
        Some(u64::from(count_tokens(&summary)))
    );
    assert_eq!(verdict["summary_budget"], 2000);
    assert_eq!(verdict["truncated"], false);
    assert_eq!(verdict["truncation_signals"], json!([]));
    assert_eq!(verdict["coverage_path"], "reported");
    assert_eq!(verdict["over_ceiling"], false);
}

#[tokio::test]
async fn a_rejected_verdict_is_422_problem_json_and_persists_nothing() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let body = json!({ "from": 0, "to": 5, "summary": "The customer called about a flight.", "summary_budget": 2000 });
    let rejected = problem(
        app.propose("c", body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(rejected["outcome"], "rejected");
    assert_eq!(rejected["checkpoint_id"], Value::Null);
    assert_eq!(rejected["covered"], json!([]));
    assert_eq!(rejected["uncovered"], json!([[0, 5]]));
    assert_eq!(rejected["turns"].as_array().unwrap().len(), 6);
    for field in VERDICT_FIELDS {
        assert!(
            rejected.get(field).is_some(),
            "{field} missing from the rejection {rejected}"
        );
    }
    assert_no_checkpoint(&app, "c").await;
}

#[tokio::test]
async fn a_dry_run_answers_200_with_a_null_checkpoint_and_persists_nothing() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let mut body = proposal(0, 4);
    body["dry_run"] = json!(true);
    let verdict = expect(app.propose("c", body.clone()).await, StatusCode::OK).await;
    assert_eq!(verdict["checkpoint_id"], Value::Null);
    assert_eq!(verdict["outcome"], "accepted");
    assert_eq!(verdict["covered"], json!([[0, 4]]));
    assert_no_checkpoint(&app, "c").await;
    // A reconstruct after a dry run still answers from the raw log.
    assert_eq!(
        expect(app.reconstruct("c", 2).await, StatusCode::OK).await["source"],
        "live"
    );

    // The same proposal for real gets checkpoint 1: the dry run used up no id.
    body["dry_run"] = json!(false);
    let real = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(real["checkpoint_id"], 1);
    assert_eq!(real["covered"], verdict["covered"]);
}

#[tokio::test]
async fn a_misspelled_or_unknown_field_is_422_and_persists_nothing() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    for (field, value) in [
        ("consumd", json!([[0, 5]])),
        ("finishReason", json!("length")),
        ("dryrun", json!(true)),
        ("expected", json!(null)),
    ] {
        let mut body = proposal(0, 5);
        body[field] = value;
        problem(
            app.propose("c", body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    assert_no_checkpoint(&app, "c").await;
}

#[tokio::test]
async fn a_range_beyond_the_log_is_422_with_the_missing_ids() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let body = problem(
        app.propose("c", proposal(0, 9)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["missing_ids"], json!([[6, 9]]));
    let body = problem(
        app.propose("c", proposal(8, 12)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["missing_ids"], json!([[8, 12]]));
    assert_no_checkpoint(&app, "c").await;
}

#[tokio::test]
async fn expected_checkpoint_null_succeeds_on_a_fresh_conversation_and_a_stale_one_is_409() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let with_expected = |from, to, expected: Value| {
        let mut body = proposal(from, to);
        body["expected_checkpoint"] = expected;
        body
    };
    // A number on a fresh conversation is stale.
    let body = problem(
        app.propose("c", with_expected(0, 1, json!(1))).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(body["latest_checkpoint"], Value::Null);
    assert_no_checkpoint(&app, "c").await;

    let first = expect(
        app.propose("c", with_expected(0, 1, json!(null))).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(first["checkpoint_id"], 1);
    // `null` again: there is a checkpoint now.
    let body = problem(
        app.propose("c", with_expected(2, 3, json!(null))).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(body["latest_checkpoint"], 1);
    problem(
        app.propose("c", with_expected(2, 3, json!(2))).await,
        StatusCode::CONFLICT,
    )
    .await;
    problem(
        app.propose("c", with_expected(2, 3, json!(0))).await,
        StatusCode::CONFLICT,
    )
    .await;
    let second = expect(
        app.propose("c", with_expected(2, 3, json!(1))).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(second["checkpoint_id"], 2);
    // Absent: no check.
    let third = expect(app.propose("c", proposal(4, 5)).await, StatusCode::CREATED).await;
    assert_eq!(third["checkpoint_id"], 3);
    let state = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(state["checkpoints"], 3);
}

#[tokio::test]
async fn a_proposal_on_an_unknown_conversation_is_404_and_creates_nothing() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    problem(
        app.propose("nope", proposal(0, 1)).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    problem(app.conversation("nope").await, StatusCode::NOT_FOUND).await;
    problem(app.checkpoints("nope").await, StatusCode::NOT_FOUND).await;
    problem(app.checkpoint("nope", 1).await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn checkpoint_ids_are_1_2_3_per_conversation() {
    let app = spawn_app().await;
    six_turns(&app, "a").await;
    six_turns(&app, "b").await;
    for (i, (from, to)) in [(0, 1), (2, 3), (4, 5)].into_iter().enumerate() {
        let a = expect(
            app.propose("a", proposal(from, to)).await,
            StatusCode::CREATED,
        )
        .await;
        assert_eq!(a["checkpoint_id"].as_i64(), Some(i as i64 + 1));
    }
    // A rejected proposal in between takes no id.
    let nothing =
        json!({ "from": 0, "to": 1, "summary": "nothing relevant.", "summary_budget": 2000 });
    problem(
        app.propose("b", nothing).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    let b = expect(app.propose("b", proposal(0, 5)).await, StatusCode::CREATED).await;
    assert_eq!(b["checkpoint_id"], 1, "ids count per conversation");
    let b = expect(app.propose("b", proposal(0, 5)).await, StatusCode::CREATED).await;
    assert_eq!(b["checkpoint_id"], 2);
}

#[tokio::test]
async fn the_list_is_newest_first_and_one_checkpoint_carries_its_summary() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let empty = expect(app.checkpoints("c").await, StatusCode::OK).await;
    assert_eq!(empty, json!({ "conversation": "c", "checkpoints": [] }));

    let mut verdicts = Vec::new();
    verdicts.push(expect(app.propose("c", proposal(0, 1)).await, StatusCode::CREATED).await);
    // Narrowed: REF-3 missing from the summary.
    let narrowed = json!({ "from": 2, "to": 4, "summary": "<summary>REF-2 and REF-4.</summary>", "summary_budget": 2000 });
    verdicts.push(expect(app.propose("c", narrowed).await, StatusCode::CREATED).await);
    // Partial: truncated, the anchors reach turn 4 only.
    let partial =
        json!({ "from": 3, "to": 5, "summary": "REF-3 and REF-4, then", "summary_budget": 2000 });
    verdicts.push(expect(app.propose("c", partial).await, StatusCode::CREATED).await);
    assert_eq!(
        verdicts
            .iter()
            .map(|v| v["outcome"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["accepted", "narrowed", "partial"]
    );

    let list = expect(app.checkpoints("c").await, StatusCode::OK).await;
    assert_eq!(list["conversation"], "c");
    let items = list["checkpoints"].as_array().unwrap();
    assert_eq!(
        items
            .iter()
            .map(|c| c["checkpoint_id"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [3, 2, 1]
    );
    for (item, verdict) in items.iter().zip(verdicts.iter().rev()) {
        for field in [
            "from",
            "to",
            "advanced_to",
            "outcome",
            "covered",
            "uncovered",
            "not_compacted",
            "summary_tokens",
        ] {
            assert_eq!(
                item[field], verdict[field],
                "{field} of checkpoint {}",
                item["checkpoint_id"]
            );
        }
        assert!(
            item["created_at"]
                .as_str()
                .unwrap()
                .parse::<chrono::DateTime<chrono::Utc>>()
                .is_ok()
        );
    }
    assert_eq!(items[0]["advanced_to"], 4);
    assert_eq!(items[0]["not_compacted"], json!([[5, 5]]));

    let summaries = [
        covering(0, 1),
        "<summary>REF-2 and REF-4.</summary>".to_owned(),
        "REF-3 and REF-4, then".to_owned(),
    ];
    for (i, (summary, verdict)) in summaries.iter().zip(&verdicts).enumerate() {
        let id = i as i64 + 1;
        let one = expect(app.checkpoint("c", id).await, StatusCode::OK).await;
        assert_eq!(one["checkpoint_id"], id);
        assert_eq!(one["conversation"], "c");
        assert_eq!(one["summary"].as_str(), Some(summary.as_str()));
        assert!(one["created_at"].is_string());
        for field in VERDICT_FIELDS.iter().filter(|f| **f != "checkpoint_id") {
            assert_eq!(one[field], verdict[*field], "{field} of checkpoint {id}");
        }
    }
    problem(app.checkpoint("c", 4).await, StatusCode::NOT_FOUND).await;
    problem(app.checkpoint("c", 0).await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn a_summary_with_nul_emoji_and_rtl_text_round_trips_byte_exactly() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let summary = format!(
        "<summary>\u{0000}REF-0 👩‍👩‍👧‍👦 REF-1 — العميل ألغى الحجز REF-2; הלקוח ביקש REF-3 \u{202E}txet\u{202C} cafe\u{301}\r\n{}</summary>",
        tau_turns(1)[0]["content"].as_str().unwrap()
    );
    let body = json!({ "from": 0, "to": 3, "summary": summary, "summary_budget": 100_000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["covered"], json!([[0, 3]]));
    assert_eq!(
        verdict["summary_tokens"].as_u64(),
        Some(u64::from(count_tokens(&summary)))
    );
    let one = expect(app.checkpoint("c", 1).await, StatusCode::OK).await;
    assert!(one["summary"].as_str().unwrap().as_bytes() == summary.as_bytes());
    let answer = expect(app.reconstruct("c", 2).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "summary");
    assert!(answer["text"].as_str().unwrap().as_bytes() == summary.as_bytes());
    let chars: Vec<char> = summary.chars().collect();
    let e = &answer["evidence"][0];
    let slice: String = chars
        [e["start"].as_u64().unwrap() as usize..e["end"].as_u64().unwrap() as usize]
        .iter()
        .collect();
    assert_eq!(
        slice, "REF-2",
        "character offsets past NUL, emoji and RTL text"
    );
    let context = expect(app.context("c").await, StatusCode::OK).await;
    assert!(context["items"][0]["text"].as_str().unwrap().as_bytes() == summary.as_bytes());
}

#[tokio::test]
async fn decisions_and_reconstructions_are_counted_in_the_metrics() {
    let app = spawn_app().await;
    six_turns(&app, "c").await;
    let scrape = || async { app.get("/metrics").await.text().await.unwrap() };
    let series = [
        "gatekeeper_compactions_total{outcome=\"narrowed\"}",
        "gatekeeper_compaction_turns_total{status=\"covered\"}",
        "gatekeeper_compaction_turns_total{status=\"uncovered\"}",
        "gatekeeper_coverage_contradictions_total",
        "gatekeeper_truncated_summaries_total{signal=\"finish_reason_length\"}",
        "gatekeeper_reconstructions_total{source=\"raw_log\"}",
        "gatekeeper_reconstructions_total{source=\"summary\"}",
        "gatekeeper_reconstructions_total{source=\"live\"}",
    ];
    let before = scrape().await;
    // Reported [0, 4] with REF-1 and REF-3 missing: 2 contradictions; 5 not reported.
    let body = json!({
        "from": 0, "to": 5, "summary": "REF-0, REF-2 and REF-4.", "summary_budget": 2000,
        "consumed": [[0, 4]], "finish_reason": "length"
    });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["outcome"], "narrowed");
    assert_eq!(verdict["uncovered"], json!([[1, 1], [3, 3], [5, 5]]));
    expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    expect(app.reconstruct("c", 2).await, StatusCode::OK).await;
    expect(
        app.append("c", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    expect(app.reconstruct("c", 6).await, StatusCode::OK).await;
    let after = scrape().await;
    // Other tests share the process-wide recorder: counters only grow, so check at least
    // (tests/observability.rs, a binary of its own, checks them exactly).
    let minimum = [1.0, 3.0, 3.0, 2.0, 1.0, 1.0, 1.0, 1.0];
    for (name, min) in series.iter().zip(minimum) {
        let delta = metric(&after, name) - metric(&before, name);
        assert!(
            delta >= min,
            "{name} grew by {delta}, expected at least {min}"
        );
    }
}

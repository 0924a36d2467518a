//! The rules of issue 2 (1–8), each reached through HTTP.

use crate::support::*;
use gatekeeper::config::DecisionConfig;
use gatekeeper::config::ServeConfig;
use gatekeeper::coverage::Mode;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Appends real tau-bench content with the given roles, tokens and anchors.
async fn setup(app: &TestApp, conversation: &str, spec: &[(&str, u32, &[&str])]) {
    let real = tau_turns(spec.len());
    let turns: Vec<Value> = spec
        .iter()
        .zip(&real)
        .map(|((role, tokens, anchors), t)| {
            turn(role, t["content"].as_str().unwrap(), *tokens, anchors)
        })
        .collect();
    expect(
        app.append(conversation, json!(turns)).await,
        StatusCode::CREATED,
    )
    .await;
}

fn dry(mut body: Value) -> Value {
    body["dry_run"] = json!(true);
    body
}

fn signals(verdict: &Value) -> BTreeSet<String> {
    verdict["truncation_signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn rule_1_the_ceiling_is_ceil_of_prose_over_5_plus_tool_over_3() {
    let app = spawn_app().await;
    setup(
        &app,
        "mixed",
        &[
            ("user", 1200, &["R1A"]),
            ("tool", 1000, &["R1B"]),
            ("assistant", 800, &["R1C"]),
        ],
    )
    .await;
    let summary = "The customer gave R1A, the tool returned R1B and the agent confirmed R1C.";
    // prose 2000 / 5 + tool 1000 / 3 = 733.33… → 734.
    for (budget, over) in [(734, false), (733, true), (5000, false), (1, true)] {
        let body = dry(json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": budget }));
        let verdict = expect(app.propose("mixed", body).await, StatusCode::OK).await;
        assert_eq!(verdict["prefix_tokens"], 3000, "budget {budget}");
        assert_eq!(verdict["required_budget"], 734, "budget {budget}");
        assert_eq!(verdict["summary_budget"], budget);
        assert_eq!(verdict["over_ceiling"], over, "budget {budget}");
    }
    // A sub-range counts only its own turns.
    let body = dry(json!({ "from": 1, "to": 1, "summary": "R1B.", "summary_budget": 334 }));
    let verdict = expect(app.propose("mixed", body).await, StatusCode::OK).await;
    assert_eq!(
        (
            verdict["prefix_tokens"].as_u64(),
            verdict["required_budget"].as_u64()
        ),
        (Some(1000), Some(334))
    );
    assert_eq!(verdict["over_ceiling"], false);

    // All prose: the seed's `prefix_tokens > summary_budget × 5`.
    setup(
        &app,
        "prose",
        &[("user", 600, &["P1"]), ("assistant", 401, &["P2"])],
    )
    .await;
    for (budget, over) in [(201, false), (200, true)] {
        let body =
            dry(json!({ "from": 0, "to": 1, "summary": "P1 and P2.", "summary_budget": budget }));
        let verdict = expect(app.propose("prose", body).await, StatusCode::OK).await;
        assert_eq!(
            (
                verdict["prefix_tokens"].as_u64(),
                verdict["required_budget"].as_u64()
            ),
            (Some(1001), Some(201))
        );
        assert_eq!(verdict["over_ceiling"], over, "budget {budget}");
    }
}

#[tokio::test]
async fn rule_1_the_compression_ratios_come_from_the_configuration() {
    let decision = DecisionConfig {
        prose_ratio: "2.5".parse().unwrap(),
        tool_ratio: "2".parse().unwrap(),
        ..Default::default()
    };
    let app = spawn_app_with(ServeConfig {
        decision,
        ..Default::default()
    })
    .await;
    setup(
        &app,
        "c",
        &[("user", 2000, &["R1A"]), ("tool", 1001, &["R1B"])],
    )
    .await;
    // 2000 / 2.5 + 1001 / 2 = 800 + 500.5 → 1301.
    let body =
        dry(json!({ "from": 0, "to": 1, "summary": "R1A and R1B.", "summary_budget": 1301 }));
    let verdict = expect(app.propose("c", body).await, StatusCode::OK).await;
    assert_eq!(verdict["required_budget"], 1301);
    assert_eq!(verdict["over_ceiling"], false);
}

#[tokio::test]
async fn rule_2_anchors_are_matched_normalised_and_at_word_boundaries() {
    let app = spawn_app().await;
    let anchors: [&[&str]; 10] = [
        &["cat"],      // 0: only inside "concatenate"
        &["v1.2"],     // 1: "(v1.2,"
        &["New York"], // 2: "new\n  YORK"
        &["ﬁle"],      // 3: ligature vs "file"
        &["INV-2093"], // 4: only as "XINV-2093": a letter before it
        &["Straße"],   // 5: "STRASSE" under full case folding
        &["HAT123"],   // 6: full-width "ＨＡＴ１２３"
        &["2093"],     // 7: after "-" and before a space: bounded
        &["ZFA04"],    // 8: only inside "ZFA04Y"
        &["café"],     // 9: composed anchor, decomposed in the summary
    ];
    let spec: Vec<(&str, u32, &[&str])> = anchors.iter().map(|a| ("user", 20, *a)).collect();
    setup(&app, "c", &spec).await;
    let summary = "We concatenate logs (v1.2, stable); the flight to new\n  YORK left; the file was sent; \
                   invoice XINV-2093 paid; STRASSE 5; seat ＨＡＴ１２３; reservation ZFA04Y; cafe\u{301} closed.";
    let body = json!({ "from": 0, "to": 9, "summary": summary, "summary_budget": 1000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["coverage_path"], "anchors");
    assert_eq!(verdict["covered"], ranges_of(&[1, 2, 3, 5, 6, 7, 9]));
    assert_eq!(verdict["uncovered"], ranges_of(&[0, 4, 8]));
    let details: Vec<(i64, String, Value)> = verdict["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_i64().unwrap(),
                t["reason"].as_str().unwrap().to_owned(),
                t["missing_anchors"].clone(),
            )
        })
        .collect();
    assert_eq!(
        details,
        [
            (0, "anchor_missing".to_owned(), json!(["cat"])),
            (4, "anchor_missing".to_owned(), json!(["INV-2093"])),
            (8, "anchor_missing".to_owned(), json!(["ZFA04"])),
        ]
    );
    // Every anchor of a turn must be present, not just one.
    setup(
        &app,
        "all",
        &[
            ("user", 20, &["ZFA04Y", "HAT069"]),
            ("user", 20, &["ZFA04Y"]),
        ],
    )
    .await;
    let body = json!({ "from": 0, "to": 1, "summary": "Reservation ZFA04Y only.", "summary_budget": 1000 });
    let verdict = expect(app.propose("all", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["covered"], json!([[1, 1]]));
    assert_eq!(verdict["turns"][0]["missing_anchors"], json!(["HAT069"]));
}

#[tokio::test]
async fn rule_3_each_truncation_signal_is_reported_by_name() {
    let app = spawn_app().await;
    setup(&app, "c", &[("assistant", 10, &["ZFA04Y"])]).await;
    let base = "Reservation ZFA04Y was cancelled.";
    let n = i64::from(count_tokens(base));
    let wrapped = format!("<summary>{base}</summary>");
    // (name, summary, finish_reason, end_marker, budget, expected signals)
    type Case<'a> = (
        &'a str,
        String,
        Option<&'a str>,
        Option<&'a str>,
        i64,
        &'a [&'a str],
    );
    let cases: Vec<Case> = vec![
        ("clean", base.into(), None, None, 1000, &[]),
        ("finish stop", base.into(), Some("stop"), None, 1000, &[]),
        (
            "finish end_turn",
            base.into(),
            Some("end_turn"),
            None,
            1000,
            &[],
        ),
        (
            "finish length",
            base.into(),
            Some("length"),
            None,
            1000,
            &["finish_reason_length"],
        ),
        (
            "finish max_tokens",
            base.into(),
            Some("max_tokens"),
            None,
            1000,
            &["finish_reason_length"],
        ),
        (
            "finish max_output_tokens",
            base.into(),
            Some("max_output_tokens"),
            None,
            1000,
            &["finish_reason_length"],
        ),
        (
            "end marker present",
            wrapped.clone(),
            None,
            Some("</summary>"),
            1000,
            &[],
        ),
        (
            "end marker then whitespace",
            format!("{wrapped}\n  "),
            None,
            Some("</summary>"),
            1000,
            &[],
        ),
        (
            "end marker missing",
            base.into(),
            None,
            Some("</summary>"),
            1000,
            &["end_marker_missing"],
        ),
        (
            "end marker cut",
            "<summary>Reservation ZFA04Y was cancelled.</summ".into(),
            None,
            Some("</summary>"),
            1000,
            &["end_marker_missing", "mid_clause"],
        ),
        (
            "at budget exactly",
            base.into(),
            None,
            None,
            n,
            &["at_budget"],
        ),
        (
            "over budget",
            base.into(),
            None,
            None,
            n - 1,
            &["at_budget"],
        ),
        ("one under budget", base.into(), None, None, n + 1, &[]),
        (
            "ends on a letter",
            "Reservation ZFA04Y was".into(),
            None,
            None,
            1000,
            &["mid_clause"],
        ),
        (
            "ends on a digit",
            "Reservation ZFA04Y on 2024".into(),
            None,
            None,
            1000,
            &["mid_clause"],
        ),
        (
            "ends on a comma",
            "Reservation ZFA04Y,".into(),
            None,
            None,
            1000,
            &["mid_clause"],
        ),
        (
            "ends on a semicolon",
            "Reservation ZFA04Y;".into(),
            None,
            None,
            1000,
            &["mid_clause"],
        ),
        (
            "ends on a colon",
            "Reservation ZFA04Y:".into(),
            None,
            None,
            1000,
            &["mid_clause"],
        ),
        (
            "ends on a hyphen",
            "Reservation ZFA04Y re-".into(),
            None,
            None,
            1000,
            &["mid_clause"],
        ),
        (
            "comma then whitespace",
            "Reservation ZFA04Y, \n\t ".into(),
            None,
            None,
            1000,
            &["mid_clause"],
        ),
        (
            "ends on !",
            "Reservation ZFA04Y cancelled!".into(),
            None,
            None,
            1000,
            &[],
        ),
        (
            "ends on ?",
            "Reservation ZFA04Y cancelled?".into(),
            None,
            None,
            1000,
            &[],
        ),
        (
            "ends on )",
            "Cancelled (ZFA04Y)".into(),
            None,
            None,
            1000,
            &[],
        ),
        (
            "all four",
            "<summary>Reservation ZFA04Y was".into(),
            Some("length"),
            Some("</summary>"),
            3,
            &[
                "finish_reason_length",
                "end_marker_missing",
                "at_budget",
                "mid_clause",
            ],
        ),
    ];
    for (name, summary, finish_reason, end_marker, budget, expected) in cases {
        let mut body = json!({ "from": 0, "to": 0, "summary": summary, "summary_budget": budget, "dry_run": true });
        if let Some(reason) = finish_reason {
            body["finish_reason"] = json!(reason);
        }
        if let Some(marker) = end_marker {
            body["end_marker"] = json!(marker);
        }
        let verdict = expect(app.propose("c", body).await, StatusCode::OK).await;
        assert_eq!(signals(&verdict), set(expected), "{name}: {verdict}");
        assert_eq!(verdict["truncated"], !expected.is_empty(), "{name}");
    }
}

#[tokio::test]
async fn rule_4_a_report_is_trusted_only_as_far_as_the_anchors_bear_it_out() {
    let app = spawn_app().await;
    setup(
        &app,
        "c",
        &[
            ("user", 100, &["A0-111"]),
            ("assistant", 100, &["A1-222"]),
            ("user", 100, &[]),
            ("tool", 100, &["A3-444"]),
            ("assistant", 100, &["A4-555", "A4-556"]),
            ("user", 100, &["A5-666"]),
        ],
    )
    .await;
    let summary = "Covered A0-111, A3-444, A4-555 and A5-666.";
    let body = json!({ "from": 0, "to": 5, "summary": summary, "summary_budget": 1000, "consumed": [[4, 5], [0, 2]] });
    let verdict = expect(app.propose("c", dry(body)).await, StatusCode::OK).await;
    assert_eq!(verdict["coverage_path"], "reported");
    assert_eq!(verdict["outcome"], "narrowed");
    assert_eq!(verdict["advanced_to"], 5);
    assert_eq!(
        verdict["covered"],
        json!([[0, 0], [2, 2], [5, 5]]),
        "an unanchored turn of an untruncated summary is covered"
    );
    assert_eq!(verdict["uncovered"], json!([[1, 1], [3, 4]]));
    assert_eq!(verdict["not_compacted"], json!([]));
    assert_eq!(verdict["contradictions"], json!([[1, 1], [4, 4]]));
    assert_eq!(
        verdict["turns"],
        json!([
            { "id": 1, "status": "uncovered", "reason": "anchor_missing", "missing_anchors": ["A1-222"] },
            { "id": 3, "status": "uncovered", "reason": "not_reported", "missing_anchors": [] },
            { "id": 4, "status": "uncovered", "reason": "anchor_missing", "missing_anchors": ["A4-556"] },
        ])
    );

    // Truncated and over the ceiling: the report still decides the range (advanced_to = to),
    // but the turn without anchors can no longer be vouched for.
    let body = json!({
        "from": 0, "to": 5, "summary": summary, "summary_budget": 100, "consumed": [[0, 2], [4, 5]],
        "finish_reason": "length"
    });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(
        (
            verdict["over_ceiling"].as_bool(),
            verdict["truncated"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert_eq!(verdict["coverage_path"], "reported");
    assert_eq!(verdict["advanced_to"], 5);
    assert_eq!(verdict["covered"], json!([[0, 0], [5, 5]]));
    assert_eq!(verdict["uncovered"], json!([[1, 4]]));
    assert_eq!(verdict["not_compacted"], json!([]));
    assert_eq!(
        verdict["contradictions"],
        json!([[1, 1], [4, 4]]),
        "a turn without anchors contradicts nothing"
    );
    let reasons: Vec<(i64, &str)> = verdict["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_i64().unwrap(), t["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [
            (1, "anchor_missing"),
            (2, "no_anchors"),
            (3, "not_reported"),
            (4, "anchor_missing")
        ]
    );
    assert_eq!(
        expect(app.reconstruct("c", 2).await, StatusCode::OK).await["reason"],
        "no_anchors"
    );
    assert_eq!(
        expect(app.reconstruct("c", 3).await, StatusCode::OK).await["reason"],
        "not_reported"
    );
}

#[tokio::test]
async fn rule_5_without_a_report_the_anchors_decide_each_turn() {
    let app = spawn_app().await;
    setup(
        &app,
        "c",
        &[
            ("user", 50, &["B0-101"]),
            ("tool", 50, &["B1-202"]),
            ("assistant", 50, &[]),
            ("user", 50, &["B3-303"]),
        ],
    )
    .await;
    let body = json!({ "from": 0, "to": 3, "summary": "B0-101 and B3-303 were discussed.", "summary_budget": 500 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(
        (
            verdict["over_ceiling"].as_bool(),
            verdict["truncated"].as_bool()
        ),
        (Some(false), Some(false))
    );
    assert_eq!(verdict["coverage_path"], "anchors");
    assert_eq!(verdict["advanced_to"], 3);
    assert_eq!(verdict["outcome"], "narrowed");
    assert_eq!(verdict["covered"], json!([[0, 0], [3, 3]]));
    assert_eq!(verdict["uncovered"], json!([[1, 2]]));
    assert_eq!(verdict["not_compacted"], json!([]));
    assert_eq!(verdict["contradictions"], json!([]));
    assert_eq!(
        verdict["turns"],
        json!([
            { "id": 1, "status": "uncovered", "reason": "anchor_missing", "missing_anchors": ["B1-202"] },
            { "id": 2, "status": "uncovered", "reason": "no_anchors", "missing_anchors": [] },
        ])
    );
}

#[tokio::test]
async fn rule_6_without_a_report_an_over_ceiling_or_truncated_summary_fails_closed() {
    let app = spawn_app().await;
    let spec: [(&str, u32, &[&str]); 6] = [
        ("user", 1000, &["C0-100"]),
        ("assistant", 1000, &["C1-200"]),
        ("tool", 1000, &["C2-300"]),
        ("user", 1000, &[]),
        ("assistant", 1000, &["C4-500"]),
        ("user", 1000, &["C5-600"]),
    ];
    setup(&app, "c", &spec).await;
    let summary = "C0-100 and C2-300 were handled.";

    // Over the ceiling (5 × 1000 / 5 + 1000 / 3 = 1334 > 1000), not truncated.
    let body = json!({ "from": 0, "to": 5, "summary": summary, "summary_budget": 1000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(
        (
            verdict["over_ceiling"].as_bool(),
            verdict["truncated"].as_bool()
        ),
        (Some(true), Some(false))
    );
    assert_eq!(verdict["coverage_path"], "anchors");
    assert_eq!(verdict["outcome"], "partial");
    assert_eq!(verdict["advanced_to"], 2, "the last anchored turn");
    assert_eq!(verdict["covered"], json!([[0, 0], [2, 2]]));
    assert_eq!(verdict["uncovered"], json!([[1, 1]]));
    assert_eq!(verdict["not_compacted"], json!([[3, 5]]));
    let detail: Vec<(i64, &str, &str)> = verdict["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_i64().unwrap(),
                t["status"].as_str().unwrap(),
                t["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        detail,
        [
            (1, "uncovered", "anchor_missing"),
            (3, "not_compacted", "beyond_last_anchor"),
            (4, "not_compacted", "beyond_last_anchor"),
            (5, "not_compacted", "beyond_last_anchor"),
        ]
    );
    let state = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(
        state["latest_checkpoint"],
        json!({ "checkpoint_id": 1, "from": 0, "advanced_to": 2, "outcome": "partial" })
    );

    // Truncated (finish reason), under the ceiling: the same fail-closed narrowing.
    let body = json!({ "from": 0, "to": 5, "summary": summary, "summary_budget": 5000, "finish_reason": "length" });
    let verdict = expect(app.propose("c", dry(body)).await, StatusCode::OK).await;
    assert_eq!(
        (
            verdict["over_ceiling"].as_bool(),
            verdict["truncated"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert_eq!(verdict["advanced_to"], 2);
    assert_eq!(verdict["not_compacted"], json!([[3, 5]]));
    assert_eq!(verdict["outcome"], "partial");

    // The last anchored turn is the last of the range: nothing is left out.
    let all = "C0-100, C1-200, C2-300, C4-500 and C5-600 were handled, then";
    let body = json!({ "from": 0, "to": 5, "summary": all, "summary_budget": 5000 });
    let verdict = expect(app.propose("c", dry(body)).await, StatusCode::OK).await;
    assert_eq!(signals(&verdict), set(&["mid_clause"]));
    assert_eq!(verdict["advanced_to"], 5);
    assert_eq!(verdict["uncovered"], json!([[3, 3]]));
    assert_eq!(verdict["not_compacted"], json!([]));
    assert_eq!(verdict["outcome"], "narrowed");

    // No anchored turn at all: rejected, and nothing persisted.
    let body =
        json!({ "from": 0, "to": 5, "summary": "The customer called and", "summary_budget": 5000 });
    let rejected = problem(
        app.propose("c", body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(rejected["outcome"], "rejected");
    assert_eq!(rejected["advanced_to"], Value::Null);
    assert_eq!(rejected["covered"], json!([]));
    assert_eq!(rejected["not_compacted"], json!([[0, 5]]));
    let state = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(state["checkpoints"], 1);
}

#[tokio::test]
async fn rule_7_outcomes_accepted_narrowed_partial_rejected() {
    let app = spawn_app().await;
    setup(
        &app,
        "c",
        &[
            ("user", 10, &["D0"]),
            ("assistant", 10, &["D1"]),
            ("user", 10, &["D2"]),
        ],
    )
    .await;
    let cases = [
        ("D0, D1 and D2.", StatusCode::OK, "accepted"),
        ("D0 and D2.", StatusCode::OK, "narrowed"),
        ("D0 and", StatusCode::OK, "partial"),
        (
            "Nothing of note.",
            StatusCode::UNPROCESSABLE_ENTITY,
            "rejected",
        ),
    ];
    for (summary, status, outcome) in cases {
        let body = dry(json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 100 }));
        let verdict = expect(app.propose("c", body).await, status).await;
        assert_eq!(verdict["outcome"], outcome, "{summary}");
        assert_eq!(verdict["checkpoint_id"], Value::Null);
    }
    let state = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(state["checkpoints"], 0);
}

#[tokio::test]
async fn rule_7_strict_mode_rejects_anything_short_of_full_untruncated_coverage_and_persists_nothing()
 {
    let app = spawn_app().await;
    setup(
        &app,
        "c",
        &[
            ("user", 10, &["E0-11"]),
            ("assistant", 10, &["E1-22"]),
            ("tool", 10, &["E2-33"]),
        ],
    )
    .await;
    let strict = |summary: &str, extra: Value| {
        let mut body = json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 100, "mode": "strict" });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    // Uncovered (narrowed in narrow mode).
    let body = problem(
        app.propose("c", strict("E0-11 and E2-33.", json!({})))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["outcome"], "rejected");
    assert_eq!(body["checkpoint_id"], Value::Null);
    assert_eq!(body["covered"], json!([[0, 0], [2, 2]]));
    assert_eq!(body["uncovered"], json!([[1, 1]]));
    assert_eq!(
        body["turns"],
        json!([{ "id": 1, "status": "uncovered", "reason": "anchor_missing", "missing_anchors": ["E1-22"] }])
    );
    for field in [
        "from",
        "to",
        "advanced_to",
        "not_compacted",
        "prefix_tokens",
        "required_budget",
        "summary_budget",
        "summary_tokens",
    ] {
        assert!(body.get(field).is_some(), "{field} in {body}");
    }
    assert_eq!(body["type"].as_str().map(|t| t.is_empty()), Some(false));

    // Not compacted (partial in narrow mode).
    let body = problem(
        app.propose("c", strict("E0-11 and", json!({}))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["not_compacted"], json!([[1, 2]]));
    // Every turn covered, but the summary is truncated.
    let body = problem(
        app.propose(
            "c",
            strict(
                "E0-11, E1-22 and E2-33.",
                json!({ "finish_reason": "length", "consumed": [[0, 2]] }),
            ),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["covered"], json!([[0, 2]]));
    assert_eq!(body["truncated"], true);
    assert_eq!(signals(&body), set(&["finish_reason_length"]));
    // Also in a dry run.
    problem(
        app.propose("c", strict("E0-11.", json!({ "dry_run": true })))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;

    // Nothing of it was persisted.
    let list = expect(app.checkpoints("c").await, StatusCode::OK).await;
    assert_eq!(list["checkpoints"], json!([]));
    let state = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(
        (state["checkpoints"].as_i64(), &state["latest_checkpoint"]),
        (Some(0), &Value::Null)
    );
    assert_eq!(
        expect(app.reconstruct("c", 1).await, StatusCode::OK).await["source"],
        "live"
    );

    // Full, untruncated coverage passes strict mode.
    let verdict = expect(
        app.propose("c", strict("E0-11, E1-22 and E2-33.", json!({})))
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(
        (
            verdict["outcome"].as_str(),
            verdict["checkpoint_id"].as_i64()
        ),
        (Some("accepted"), Some(1))
    );
}

#[tokio::test]
async fn rule_7_a_configured_strict_default_applies_when_the_proposal_names_no_mode() {
    let decision = DecisionConfig {
        default_mode: Mode::Strict,
        ..Default::default()
    };
    let app = spawn_app_with(ServeConfig {
        decision,
        ..Default::default()
    })
    .await;
    setup(
        &app,
        "c",
        &[("user", 10, &["F0-1"]), ("user", 10, &["F1-2"])],
    )
    .await;
    let body = json!({ "from": 0, "to": 1, "summary": "F0-1 only.", "summary_budget": 100 });
    let rejected = problem(
        app.propose("c", body.clone()).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(rejected["outcome"], "rejected");
    assert_eq!(
        expect(app.conversation("c").await, StatusCode::OK).await["checkpoints"],
        0
    );
    let mut narrow = body;
    narrow["mode"] = json!("narrow");
    let verdict = expect(app.propose("c", narrow).await, StatusCode::CREATED).await;
    assert_eq!(verdict["outcome"], "narrowed");
}

#[tokio::test]
async fn rule_8_validation_errors_are_422_naming_the_field_and_persist_nothing() {
    let app = spawn_app().await;
    setup(
        &app,
        "c",
        &[
            ("user", 10, &["G0"]),
            ("user", 10, &["G1"]),
            ("user", 10, &["G2"]),
            ("user", 10, &["G3"]),
        ],
    )
    .await;
    let before = app.snapshot("c").await;
    let base =
        json!({ "from": 0, "to": 3, "summary": "G0, G1, G2 and G3.", "summary_budget": 100 });
    let with = |pairs: Value| {
        let mut body = base.clone();
        for (k, v) in pairs.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        ("from after to", with(json!({ "from": 3, "to": 1 })), "to"),
        ("negative from", with(json!({ "from": -1 })), "from"),
        (
            "zero budget",
            with(json!({ "summary_budget": 0 })),
            "summary_budget",
        ),
        (
            "negative budget",
            with(json!({ "summary_budget": -5 })),
            "summary_budget",
        ),
        (
            "malformed consumed",
            with(json!({ "consumed": [[3, 1]] })),
            "consumed",
        ),
        (
            "consumed past to",
            with(json!({ "consumed": [[0, 4]] })),
            "consumed",
        ),
        (
            "consumed before from",
            with(json!({ "from": 1, "consumed": [[0, 2]] })),
            "consumed",
        ),
        (
            "second consumed range bad",
            with(json!({ "consumed": [[0, 1], [2, 9]] })),
            "consumed",
        ),
        ("range beyond the log", with(json!({ "to": 7 })), "to"),
        (
            "control character in the end marker",
            with(json!({ "end_marker": "</s>\u{0000}" })),
            "end_marker",
        ),
    ];
    for (name, body, field) in cases {
        let problem_body = problem(
            app.propose("c", body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        let named = problem_body["field"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no field in {problem_body}"));
        assert!(
            named.starts_with(field),
            "{name}: field {named:?}, expected {field:?}"
        );
        assert_ne!(
            problem_body["outcome"], "rejected",
            "{name}: a validation error is not a verdict"
        );
        assert_eq!(app.snapshot("c").await, before, "{name}");
    }
    // Wrong types and shapes are 422 as well.
    for body in [
        with(json!({ "from": "0" })),
        with(json!({ "consumed": [[0]] })),
        with(json!({ "consumed": [0, 3] })),
        with(json!({ "mode": "lenient" })),
        with(json!({ "dry_run": "yes" })),
        json!({ "from": 0, "to": 3, "summary_budget": 100 }),
        json!({ "from": 0, "summary": "G0.", "summary_budget": 100 }),
        json!({ "from": 0, "to": 3, "summary": "G0." }),
    ] {
        problem(
            app.propose("c", body.clone()).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    assert_eq!(app.snapshot("c").await, before);
    assert_eq!(
        expect(app.checkpoints("c").await, StatusCode::OK).await["checkpoints"],
        json!([])
    );
}

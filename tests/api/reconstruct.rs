//! `GET .../reconstruct/{turn}`: summary, raw_log, live, 404, and which checkpoint decides.

use crate::support::*;
use gatekeeper::coverage::anchor_present;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Real turns with hand-set anchors `K{i}-{i}{i}{i}`; returns the contents.
pub(crate) async fn setup(app: &TestApp, conversation: &str, n: usize) -> Vec<Value> {
    setup_from(app, conversation, 0, n).await
}

/// The same, starting `skip` turns into the data (other contents, the same anchors).
pub(crate) async fn setup_from(
    app: &TestApp,
    conversation: &str,
    skip: usize,
    n: usize,
) -> Vec<Value> {
    let turns: Vec<Value> = tau_turns(skip + n)
        .into_iter()
        .skip(skip)
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([anchor(i as i64)]);
            t
        })
        .collect();
    expect(
        app.append(conversation, json!(turns)).await,
        StatusCode::CREATED,
    )
    .await;
    turns
}

fn anchor(i: i64) -> String {
    format!("K{i}-{i}{i}{i}")
}

/// A clean summary carrying the anchors of `ids`.
fn summary_of(ids: &[i64]) -> String {
    let anchors: Vec<String> = ids.iter().map(|&i| anchor(i)).collect();
    format!("The agent handled {}.", anchors.join(", "))
}

pub(crate) fn propose_body(from: i64, to: i64, ids: &[i64]) -> Value {
    json!({ "from": from, "to": to, "summary": summary_of(ids), "summary_budget": 5000 })
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[tokio::test]
async fn a_covered_turn_is_answered_from_the_summary_with_evidence_that_slices_to_its_anchors() {
    let app = spawn_app().await;
    // Real turns with the anchors the service derives, and a summary that mentions them in
    // mixed case, with accents and line breaks around, so offsets are character offsets.
    let turns = tau_conversation(1);
    let appended = expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let anchors: Vec<Vec<String>> = appended["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["anchors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect()
        })
        .collect();
    let target = anchors
        .iter()
        .rposition(|a| a.len() >= 2)
        .expect("a real turn with two or more anchors");
    let mut summary = String::from("Résumé — «conversation» 👩‍✈️:\n");
    for (i, a) in anchors.iter().enumerate() {
        if !a.is_empty() {
            summary.push_str(&format!(
                "  • turn {i}: {}\n",
                a.iter()
                    .map(|x| x.to_uppercase())
                    .collect::<Vec<_>>()
                    .join(" /\n ")
            ));
        }
    }
    summary.push_str("Done.");
    let last = turns.len() as i64 - 1;
    let body = json!({ "from": 0, "to": last, "summary": summary, "summary_budget": 100_000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert!(
        expand(&verdict["covered"]).contains(&(target as i64)),
        "{verdict}"
    );

    let answer = expect(app.reconstruct("c", target as i64).await, StatusCode::OK).await;
    assert_eq!(
        keys(&answer),
        BTreeSet::from([
            "turn",
            "source",
            "checkpoint_id",
            "text",
            "role",
            "reason",
            "evidence"
        ])
    );
    assert_eq!(answer["turn"], target as i64);
    assert_eq!(answer["source"], "summary");
    assert_eq!(answer["checkpoint_id"], 1);
    assert_eq!(answer["text"].as_str(), Some(summary.as_str()));
    assert_eq!(answer["role"], turns[target]["role"]);
    assert_eq!(answer["reason"], Value::Null);
    let chars: Vec<char> = summary.chars().collect();
    let evidence = answer["evidence"].as_array().unwrap();
    let named: BTreeSet<&str> = evidence
        .iter()
        .map(|e| e["anchor"].as_str().unwrap())
        .collect();
    assert_eq!(
        named,
        anchors[target].iter().map(String::as_str).collect(),
        "one evidence per anchor"
    );
    for e in evidence {
        let (start, end) = (
            e["start"].as_u64().unwrap() as usize,
            e["end"].as_u64().unwrap() as usize,
        );
        assert!(start < end && end <= chars.len(), "{e}");
        let slice: String = chars[start..end].iter().collect();
        let anchor = e["anchor"].as_str().unwrap();
        assert!(anchor_present(anchor, &slice), "{e} points at {slice:?}");
        assert_eq!(
            slice.to_lowercase(),
            anchor.to_lowercase(),
            "{e} points at {slice:?}"
        );
    }
}

#[tokio::test]
async fn an_uncovered_turn_is_answered_from_the_raw_log_with_the_verdicts_reason() {
    let app = spawn_app().await;
    let turns = setup(&app, "c", 5).await;
    // Turn 3 has no anchors at all.
    let bare = json!({ "role": "user", "content": turns[3]["content"], "anchors": [] });
    expect(app.append("c", json!([bare])).await, StatusCode::CREATED).await;
    // Reported [0, 2] and [5, 5]; turn 1's anchor is missing, 3 and 4 are not reported.
    let body = json!({
        "from": 0, "to": 5, "summary": summary_of(&[0, 2, 3, 4]), "summary_budget": 5000,
        "consumed": [[0, 2], [5, 5]]
    });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(
        verdict["covered"],
        json!([[0, 0], [2, 2], [5, 5]]),
        "turn 5 has no anchors and the summary is clean"
    );
    let id = verdict["checkpoint_id"].as_i64().unwrap();

    for (turn, reason) in [
        (1, "anchor_missing"),
        (3, "not_reported"),
        (4, "not_reported"),
    ] {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(answer["source"], "raw_log", "turn {turn}");
        assert_eq!(answer["checkpoint_id"], id);
        assert_eq!(
            answer["text"], turns[turn as usize]["content"],
            "turn {turn}: the raw turn, never the summary"
        );
        assert_eq!(answer["role"], turns[turn as usize]["role"]);
        assert_eq!(answer["reason"], reason, "turn {turn}");
        assert_eq!(answer["evidence"], json!([]));
    }

    // Truncated: the anchorless turn 5 cannot be vouched for.
    expect(
        app.append(
            "c",
            json!([{ "role": "user", "content": "ok", "anchors": [] }]),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let body = json!({
        "from": 6, "to": 6, "summary": "ok", "summary_budget": 5000, "consumed": [[6, 6]], "dry_run": true
    });
    let rejected = problem(
        app.propose("c", body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(rejected["turns"][0]["reason"], "no_anchors");
    let body = json!({ "from": 4, "to": 6, "summary": summary_of(&[4]), "summary_budget": 5000, "finish_reason": "length", "consumed": [[4, 6]] });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["covered"], json!([[4, 4]]));
    let answer = expect(app.reconstruct("c", 5).await, StatusCode::OK).await;
    assert_eq!(
        (answer["source"].as_str(), answer["reason"].as_str()),
        (Some("raw_log"), Some("no_anchors"))
    );
    assert_eq!(answer["text"], turns[3]["content"]);
    assert_eq!(answer["checkpoint_id"], 2);
}

#[tokio::test]
async fn a_turn_without_a_spanning_checkpoint_is_live() {
    let app = spawn_app().await;
    let turns = setup(&app, "c", 6).await;
    // No checkpoint at all.
    for turn in 0..6 {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(answer["source"], "live");
        assert_eq!(answer["checkpoint_id"], Value::Null);
        assert_eq!(answer["text"], turns[turn as usize]["content"]);
        assert_eq!(answer["role"], turns[turn as usize]["role"]);
        assert_eq!(answer["reason"], Value::Null);
        assert_eq!(answer["evidence"], json!([]));
    }
    // A checkpoint over [1, 3]: turns 0, 4 and 5 stay live.
    expect(
        app.propose("c", propose_body(1, 3, &[1, 2, 3])).await,
        StatusCode::CREATED,
    )
    .await;
    for turn in [0, 4, 5] {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(
            (answer["source"].as_str(), &answer["checkpoint_id"]),
            (Some("live"), &Value::Null),
            "turn {turn}"
        );
        assert_eq!(answer["text"], turns[turn as usize]["content"]);
    }
    for turn in 1..=3 {
        assert_eq!(
            expect(app.reconstruct("c", turn).await, StatusCode::OK).await["source"],
            "summary",
            "turn {turn}"
        );
    }
    // A turn appended after the checkpoint is live too.
    expect(
        app.append("c", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(
        expect(app.reconstruct("c", 6).await, StatusCode::OK).await["source"],
        "live"
    );
}

#[tokio::test]
async fn the_not_compacted_turns_of_a_partial_checkpoint_are_live() {
    let app = spawn_app().await;
    let turns = setup(&app, "c", 6).await;
    // Truncated, no report: the anchors reach turn 2 only.
    let body =
        json!({ "from": 0, "to": 5, "summary": "K0-000, K2-222 and then", "summary_budget": 5000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["outcome"], "partial");
    assert_eq!(verdict["not_compacted"], json!([[3, 5]]));
    for turn in 3..=5 {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(answer["source"], "live", "turn {turn}");
        assert_eq!(answer["checkpoint_id"], Value::Null);
        assert_eq!(answer["text"], turns[turn as usize]["content"]);
    }
    let one = expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(
        (one["source"].as_str(), one["reason"].as_str()),
        (Some("raw_log"), Some("anchor_missing"))
    );
    assert_eq!(
        expect(app.reconstruct("c", 2).await, StatusCode::OK).await["source"],
        "summary"
    );
}

#[tokio::test]
async fn a_turn_the_log_does_not_hold_or_an_unknown_conversation_is_404() {
    let app = spawn_app().await;
    setup(&app, "c", 3).await;
    expect(
        app.propose("c", propose_body(0, 2, &[0, 1, 2])).await,
        StatusCode::CREATED,
    )
    .await;
    for turn in [3, 100, -1, i64::MAX] {
        let body = problem(app.reconstruct("c", turn).await, StatusCode::NOT_FOUND).await;
        assert!(
            body["detail"].as_str().unwrap().contains(&turn.to_string()),
            "{body}"
        );
    }
    problem(app.reconstruct("unknown", 0).await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn a_newer_checkpoint_that_covers_a_turn_decides_over_an_older_one_that_did_not() {
    let app = spawn_app().await;
    let turns = setup(&app, "c", 8).await;
    // Checkpoint 1 over [0, 5] leaves turn 3 uncovered.
    let first = expect(
        app.propose("c", propose_body(0, 5, &[0, 1, 2, 4, 5])).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(first["uncovered"], json!([[3, 3]]));
    let answer = expect(app.reconstruct("c", 3).await, StatusCode::OK).await;
    assert_eq!(
        (answer["source"].as_str(), answer["checkpoint_id"].as_i64()),
        (Some("raw_log"), Some(1))
    );
    assert_eq!(answer["text"], turns[3]["content"]);

    // Checkpoint 2 over [3, 6] covers it: its summary answers now.
    let second_summary = summary_of(&[3, 4, 5, 6]);
    expect(
        app.propose("c", propose_body(3, 6, &[3, 4, 5, 6])).await,
        StatusCode::CREATED,
    )
    .await;
    let answer = expect(app.reconstruct("c", 3).await, StatusCode::OK).await;
    assert_eq!(
        (answer["source"].as_str(), answer["checkpoint_id"].as_i64()),
        (Some("summary"), Some(2))
    );
    assert_eq!(answer["text"].as_str(), Some(second_summary.as_str()));
    assert_eq!(answer["evidence"][0]["anchor"], anchor(3));

    // Turns only checkpoint 1 spans are still its; a later checkpoint elsewhere changes nothing.
    expect(
        app.propose("c", propose_body(7, 7, &[7])).await,
        StatusCode::CREATED,
    )
    .await;
    for turn in [0, 1, 2] {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(
            (answer["source"].as_str(), answer["checkpoint_id"].as_i64()),
            (Some("summary"), Some(1)),
            "turn {turn}"
        );
        assert_eq!(
            answer["text"].as_str(),
            Some(summary_of(&[0, 1, 2, 4, 5]).as_str())
        );
    }
    for turn in [4, 5, 6] {
        let answer = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(answer["checkpoint_id"], 2, "turn {turn}");
    }
    assert_eq!(
        expect(app.reconstruct("c", 7).await, StatusCode::OK).await["checkpoint_id"],
        3
    );
}

#[tokio::test]
async fn a_newer_checkpoint_that_leaves_a_turn_uncovered_decides_over_an_older_one_that_covered_it()
{
    let app = spawn_app().await;
    let turns = setup(&app, "c", 6).await;
    expect(
        app.propose("c", propose_body(0, 5, &[0, 1, 2, 3, 4, 5]))
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(
        expect(app.reconstruct("c", 3).await, StatusCode::OK).await["source"],
        "summary"
    );

    // Checkpoint 2 re-compacts [2, 5] and loses turn 3: the raw turn is the answer, never the
    // older summary that still mentions it.
    let second = expect(
        app.propose("c", propose_body(2, 5, &[2, 4, 5])).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(second["uncovered"], json!([[3, 3]]));
    let answer = expect(app.reconstruct("c", 3).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "raw_log");
    assert_eq!(answer["checkpoint_id"], 2);
    assert_eq!(answer["reason"], "anchor_missing");
    assert_eq!(answer["text"], turns[3]["content"]);
    assert_eq!(answer["evidence"], json!([]));

    // Checkpoint 3 is partial over [1, 5]: it spans only [1, 2] and decides those; turns 3-5
    // fall back to the newest checkpoint that spans them (2).
    let body =
        json!({ "from": 1, "to": 5, "summary": "K1-111 and K2-222 and", "summary_budget": 5000 });
    let third = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(
        (third["advanced_to"].as_i64(), third["outcome"].as_str()),
        (Some(2), Some("partial"))
    );
    let answer = expect(app.reconstruct("c", 2).await, StatusCode::OK).await;
    assert_eq!(
        (answer["source"].as_str(), answer["checkpoint_id"].as_i64()),
        (Some("summary"), Some(3))
    );
    let answer = expect(app.reconstruct("c", 3).await, StatusCode::OK).await;
    assert_eq!(
        (answer["source"].as_str(), answer["checkpoint_id"].as_i64()),
        (Some("raw_log"), Some(2))
    );
    let answer = expect(app.reconstruct("c", 4).await, StatusCode::OK).await;
    assert_eq!(
        (answer["source"].as_str(), answer["checkpoint_id"].as_i64()),
        (Some("summary"), Some(2))
    );
    let answer = expect(app.reconstruct("c", 0).await, StatusCode::OK).await;
    assert_eq!(
        (answer["source"].as_str(), answer["checkpoint_id"].as_i64()),
        (Some("summary"), Some(1))
    );
}

#[tokio::test]
async fn a_database_fault_is_503_never_404() {
    let app = spawn_app().await;
    setup(&app, "c", 3).await;
    expect(
        app.propose("c", propose_body(0, 1, &[0, 1])).await,
        StatusCode::CREATED,
    )
    .await;
    expect(app.get("/readyz").await, StatusCode::OK).await;
    // The database goes away under the running service.
    app.store.close().await;
    for path in [
        "/v1/conversations/c/reconstruct/0",
        "/v1/conversations/c/reconstruct/2",
        "/v1/conversations/c/reconstruct/99",
        "/v1/conversations/unknown/reconstruct/0",
        "/v1/conversations/c/turns/0",
        "/v1/conversations/c",
        "/v1/conversations/c/context",
        "/v1/conversations/c/compactions",
    ] {
        let response = app.get(path).await;
        assert_eq!(
            response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("1"),
            "{path}"
        );
        problem(response, StatusCode::SERVICE_UNAVAILABLE).await;
    }
    problem(
        app.append("c", json!(tau_turns(1))).await,
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
    problem(
        app.propose("c", propose_body(2, 2, &[2])).await,
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
    // `/readyz` answers the background probe's verdict: unready within its period.
    let mut ready = app.get("/readyz").await;
    for _ in 0..40 {
        if ready.status() == StatusCode::SERVICE_UNAVAILABLE {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        ready = app.get("/readyz").await;
    }
    assert_eq!(
        ready
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    problem(ready, StatusCode::SERVICE_UNAVAILABLE).await;
    expect(app.get("/healthz").await, StatusCode::OK).await;
}

#[tokio::test]
async fn evidence_offsets_point_into_the_original_summary_when_normalisation_changes_lengths() {
    let app = spawn_app().await;
    let anchors: [&str; 6] = ["STRASSE", "file", "café", "HAT123", "New York", "ZFA04Y"];
    let real = tau_turns(anchors.len());
    let turns: Vec<Value> = anchors
        .iter()
        .zip(&real)
        .map(|(a, t)| turn("user", t["content"].as_str().unwrap(), 20, &[a]))
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    // Characters that grow or shrink under NFKC and case folding come before each anchor.
    let summary = "İstanbul ßß ﬃ: Die Straße 5; the ﬁle; cafe\u{301} au lait; seat ＨＡＴ１２３; \
                   a new\n  YORK trip; ﬀ İ ß then ZFA04Y.";
    let body = json!({ "from": 0, "to": 5, "summary": summary, "summary_budget": 1000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["covered"], json!([[0, 5]]));
    let chars: Vec<char> = summary.chars().collect();
    let expected = [
        "Straße",
        "ﬁle",
        "cafe\u{301}",
        "ＨＡＴ１２３",
        "new\n  YORK",
        "ZFA04Y",
    ];
    for (id, want) in expected.iter().enumerate() {
        let answer = expect(app.reconstruct("c", id as i64).await, StatusCode::OK).await;
        assert_eq!(answer["source"], "summary");
        let e = &answer["evidence"][0];
        assert_eq!(e["anchor"], anchors[id]);
        let (start, end) = (
            e["start"].as_u64().unwrap() as usize,
            e["end"].as_u64().unwrap() as usize,
        );
        let slice: String = chars[start..end.min(chars.len())].iter().collect();
        assert_eq!(&slice, want, "turn {id}: {e}");
    }
}

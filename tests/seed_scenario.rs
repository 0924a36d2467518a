//! The seed's incident, end to end over HTTP. Its own test binary, so the process-wide metrics
//! it asserts on are moved by this test alone.

#[path = "api/support.rs"]
mod support;
#[path = "api/test_db.rs"]
mod test_db;

use gatekeeper::coverage::anchor_present;
use gatekeeper::coverage::derive::{AnchorSource, derive_anchors};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

/// 400 real tau-bench turns that each yield anchors, and a summary that carries the anchors of
/// turns 0–359 only and stops mid-sentence. Tail turns are chosen so that at least one of their
/// anchors is absent from that summary (real conversations repeat dates and codes).
fn scenario() -> (Vec<Value>, String) {
    let candidates = tau().iter().flat_map(|c| &c.turns).filter_map(|t| {
        let source = if t.role == "tool" {
            AnchorSource::ToolOutput
        } else {
            AnchorSource::Prose
        };
        let text = t.text().into_owned();
        let anchors = derive_anchors(&text, source, 3);
        (!anchors.is_empty()).then_some((t.role.clone(), text, anchors))
    });
    let mut candidates = candidates.collect::<Vec<_>>().into_iter();
    let head: Vec<_> = candidates.by_ref().take(360).collect();
    let mut summary = String::from("<summary>\n");
    for (i, (_, _, anchors)) in head.iter().enumerate() {
        summary.push_str(&format!("Turn {i} concerned {}.\n", anchors.join(", ")));
    }
    summary
        .push_str("Finally the customer asked to change the return flight and the agent began to");
    let tail: Vec<_> = candidates
        .filter(|(_, _, anchors)| anchors.iter().any(|a| !anchor_present(a, &summary)))
        .take(40)
        .collect();
    assert_eq!(tail.len(), 40, "the data holds enough distinct turns");
    let turns = head
        .into_iter()
        .chain(tail)
        .map(|(role, content, _)| json!({ "role": role, "content": content }))
        .collect();
    (turns, summary)
}

#[tokio::test]
async fn a_truncated_summary_that_claims_the_whole_range_is_narrowed_and_the_dropped_turns_stay_reachable()
 {
    let app = spawn_app().await;
    let (turns, summary) = scenario();
    let appended = expect(app.append("seed", json!(turns)).await, StatusCode::CREATED).await;
    assert_eq!(
        (appended["appended"].as_u64(), appended["next_id"].as_i64()),
        (Some(400), Some(400))
    );
    // The anchors the service derived are the ones the orchestrator is told to preserve.
    for (sent, got) in turns.iter().zip(appended["turns"].as_array().unwrap()) {
        let source = if sent["role"] == "tool" {
            AnchorSource::ToolOutput
        } else {
            AnchorSource::Prose
        };
        assert_eq!(
            got["anchors"],
            json!(derive_anchors(sent["content"].as_str().unwrap(), source, 3))
        );
    }

    let verdict = expect(
        app.propose(
            "seed",
            json!({
                "from": 0, "to": 399, "summary": summary, "summary_budget": 4096,
                "consumed": [[0, 399]], "finish_reason": "length", "end_marker": "</summary>"
            }),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(verdict["outcome"], "narrowed");
    assert_eq!(verdict["covered"], json!([[0, 359]]));
    assert_eq!(verdict["uncovered"], json!([[360, 399]]));
    assert_eq!(verdict["contradictions"], json!([[360, 399]]));
    assert_eq!(verdict["not_compacted"], json!([]));
    assert_eq!(verdict["advanced_to"], 399);
    assert_eq!(verdict["coverage_path"], "reported");
    assert_eq!(verdict["truncated"], true);
    let signals = verdict["truncation_signals"].as_array().unwrap();
    for signal in ["finish_reason_length", "end_marker_missing", "mid_clause"] {
        assert!(signals.contains(&json!(signal)), "{signal} in {signals:?}");
    }
    let turns_detail = verdict["turns"].as_array().unwrap();
    assert_eq!(turns_detail.len(), 40);
    assert!(
        turns_detail
            .iter()
            .all(|t| t["status"] == "uncovered" && t["reason"] == "anchor_missing")
    );
    let checkpoint = verdict["checkpoint_id"].as_i64().unwrap();

    // The fact from turn 388 is not in the summary: the answer is the raw turn, never the summary.
    let answer = expect(app.reconstruct("seed", 388).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "raw_log");
    assert_eq!(answer["text"], turns[388]["content"]);
    assert_eq!(answer["reason"], "anchor_missing");
    assert_eq!(answer["checkpoint_id"], checkpoint);
    assert_ne!(answer["text"].as_str(), Some(summary.as_str()));

    // A covered turn is answered from the summary, with evidence pointing at its anchors.
    let covered = expect(app.reconstruct("seed", 12).await, StatusCode::OK).await;
    assert_eq!(covered["source"], "summary");
    assert_eq!(covered["text"], summary);
    let chars: Vec<char> = summary.chars().collect();
    let evidence = covered["evidence"].as_array().unwrap();
    assert_eq!(
        evidence.len(),
        appended["turns"][12]["anchors"].as_array().unwrap().len()
    );
    for e in evidence {
        let (start, end) = (
            e["start"].as_u64().unwrap() as usize,
            e["end"].as_u64().unwrap() as usize,
        );
        let found: String = chars[start..end].iter().collect();
        assert!(
            anchor_present(e["anchor"].as_str().unwrap(), &found),
            "{e} points at {found:?}"
        );
    }

    // Loud: the metrics carry the narrowing.
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        metric(
            &metrics,
            "gatekeeper_compactions_total{outcome=\"narrowed\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            "gatekeeper_compaction_turns_total{status=\"uncovered\"}"
        ),
        40.0
    );
    assert_eq!(
        metric(
            &metrics,
            "gatekeeper_compaction_turns_total{status=\"covered\"}"
        ),
        360.0
    );
    assert_eq!(
        metric(&metrics, "gatekeeper_coverage_contradictions_total"),
        40.0
    );
    assert_eq!(
        metric(
            &metrics,
            "gatekeeper_truncated_summaries_total{signal=\"finish_reason_length\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            "gatekeeper_reconstructions_total{source=\"raw_log\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            "gatekeeper_reconstructions_total{source=\"summary\"}"
        ),
        1.0
    );
    assert!(metric(&metrics, "gatekeeper_http_requests_total{status=\"201\"}") >= 2.0);
}

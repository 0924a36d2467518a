//! The seed's incident, end to end over HTTP. Its own test binary, so the process-wide metrics
//! it asserts on are moved by this test alone.

use gatekeeper_test_support as support;

use gatekeeper::coverage::derive::{AnchorSource, Draft, rank_by_rarity};
use gatekeeper::coverage::{
    Role, TermProfile, TurnAnchors, TurnFacts, anchor_present, distinctive,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

/// The anchors rule 2b checks for each of `turns` (role, text) when they are one range of a new
/// conversation: what `compaction-plan` tells the orchestrator to preserve.
fn decided_anchors(turns: &[(String, String)]) -> Vec<Vec<String>> {
    let drafts = turns.iter().map(|(role, text)| {
        let source = if role == "tool" {
            AnchorSource::ToolOutput
        } else {
            AnchorSource::Prose
        };
        Draft::new(text, source)
    });
    let (profiles, _) = rank_by_rarity(drafts, &Default::default());
    let facts: Vec<TurnFacts> = profiles
        .into_iter()
        .zip(turns)
        .enumerate()
        .map(
            |(i, (profile, (role, text))): (usize, (TermProfile, &(String, String)))| TurnFacts {
                id: i as i64,
                role: role.parse::<Role>().unwrap(),
                // As the service counts them: a long turn needs more anchors (one per 40 tokens).
                tokens: count_tokens(text),
                anchors: TurnAnchors::Derived,
                pinned: false,
                profile,
            },
        )
        .collect();
    let refs: Vec<&TurnFacts> = facts.iter().collect();
    distinctive::checks(&refs, &gatekeeper::coverage::Policy::default())
        .into_iter()
        .map(|c| c.anchors().map(str::to_owned).collect())
        .collect()
}

/// 400 real tau-bench turns that each have anchors of their own in the range they form (rule
/// 2b: no other of the 400 turns holds them), and a summary that carries the anchors of turns
/// 0–359 only and stops mid-sentence.
fn scenario() -> (Vec<Value>, Vec<Vec<String>>, String) {
    let mut pool = tau()
        .iter()
        .flat_map(|c| &c.turns)
        .map(|t| (t.role.clone(), t.text().into_owned()))
        .filter(|(_, text)| !text.trim().is_empty());
    let mut chosen: Vec<(String, String)> = pool.by_ref().take(400).collect();
    let summary_of = |anchors: &[Vec<String>]| {
        let mut summary = String::from("<summary>\n");
        for (i, anchors) in anchors.iter().take(360).enumerate() {
            summary.push_str(&format!("Turn {i} concerned {}.\n", anchors.join(", ")));
        }
        summary.push_str(
            "Finally the customer asked to change the return flight and the agent began to",
        );
        summary
    };
    // Turns without anchors, and tail turns whose anchors the head's happen to hold, are
    // replaced until there are none.
    let (anchors, summary) = loop {
        let anchors = decided_anchors(&chosen);
        let summary = summary_of(&anchors);
        let keep: Vec<bool> = anchors
            .iter()
            .enumerate()
            .map(|(i, a)| {
                !a.is_empty() && (i < 360 || a.iter().any(|a| !anchor_present(a, &summary)))
            })
            .collect();
        if keep.iter().all(|k| *k) {
            break (anchors, summary);
        }
        let mut kept: Vec<(String, String)> = chosen
            .into_iter()
            .zip(keep)
            .filter_map(|(t, k)| k.then_some(t))
            .collect();
        kept.extend(pool.by_ref().take(400 - kept.len()));
        assert_eq!(kept.len(), 400, "the data holds enough distinct turns");
        chosen = kept;
    };
    let turns = chosen
        .into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect();
    (turns, anchors, summary)
}

#[tokio::test]
async fn a_truncated_summary_that_claims_the_whole_range_is_narrowed_and_the_dropped_turns_stay_reachable()
 {
    let app = spawn_app().await;
    let (turns, anchors, summary) = scenario();
    let appended = expect(app.append("seed", json!(turns)).await, StatusCode::CREATED).await;
    assert_eq!(
        (appended["appended"].as_u64(), appended["next_id"].as_i64()),
        (Some(400), Some(400))
    );
    // Every turn got provisional anchors at append, ranked by rarity in the conversation.
    let provisional = provisional_anchors(&turns);
    for (i, got) in appended["turns"].as_array().unwrap().iter().enumerate() {
        assert_eq!(got["anchors"], json!(provisional[i]), "turn {i}");
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
    // The evidence is the anchors that decided: the turn's own, distinctive in the range.
    let decided: Vec<&str> = evidence
        .iter()
        .map(|e| e["anchor"].as_str().unwrap())
        .collect();
    assert_eq!(decided, anchors[12]);
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

//! Metrics and log lines, checked exactly. A test binary of its own whose tests take turns (one
//! lock): the metrics recorder and the log subscriber are global to a process, so here each
//! test's deltas and lines are its own requests' and nothing else's, and an exact count can
//! fail where an "at least" against ~100 parallel tests could hardly.

use gatekeeper::config::ServeConfig;
use gatekeeper_test_support::{TestApp, expect, metric, spawn_app_with, tau_turns};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, OnceLock};

/// Held for the whole of each test.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const KEY: &str = "acme-key-0123456789abcdef";

/// The log, as the JSON lines `GATEKEEPER_LOG_FORMAT=json` writes, captured in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

fn captured() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(log.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        log
    })
}

/// Every captured line that names `conversation`, parsed.
fn lines_about(conversation: &str) -> Vec<Value> {
    let bytes = captured().0.lock().unwrap().clone();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON log line"))
        .filter(|l| l["fields"]["conversation"] == conversation)
        .collect()
}

/// A keyed service (tenant `acme`), with the log captured from its start.
async fn app() -> TestApp {
    captured();
    let app = spawn_app_with(ServeConfig {
        api_keys: Some(format!("acme:{KEY}")),
        ..Default::default()
    })
    .await;
    app.with_key(KEY)
}

/// Six real turns with anchors `REF-{i}`.
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

/// How much each series grew between two scrapes.
fn deltas<'s>(before: &str, after: &str, series: &[&'s str]) -> Vec<(&'s str, f64)> {
    (series.iter())
        .map(|s| (*s, metric(after, s) - metric(before, s)))
        .collect()
}

const DECISION_SERIES: [&str; 11] = [
    "gatekeeper_compactions_total{outcome=\"accepted\"}",
    "gatekeeper_compactions_total{outcome=\"narrowed\"}",
    "gatekeeper_compactions_total{outcome=\"partial\"}",
    "gatekeeper_compactions_total{outcome=\"rejected\"}",
    "gatekeeper_compaction_turns_total{status=\"covered\"}",
    "gatekeeper_compaction_turns_total{status=\"uncovered\"}",
    "gatekeeper_compaction_turns_total{status=\"not_compacted\"}",
    "gatekeeper_coverage_contradictions_total",
    "gatekeeper_truncated_summaries_total{signal=\"finish_reason_length\"}",
    "gatekeeper_truncated_summaries_total{signal=\"mid_clause\"}",
    "gatekeeper_truncated_summaries_total",
];

#[tokio::test]
async fn a_narrowing_and_the_reads_after_it_move_each_counter_by_exactly_what_they_did() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = app().await;
    let before = app.metrics_text().await;
    six_turns(&app, "c").await;
    // Reported [0, 4] with REF-1 and REF-3 missing: 2 contradictions; 5 not reported.
    let body = json!({
        "from": 0, "to": 5, "summary": "REF-0, REF-2 and REF-4.", "summary_budget": 2000,
        "consumed": [[0, 4]], "finish_reason": "length"
    });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    assert_eq!(verdict["outcome"], "narrowed");
    assert_eq!(verdict["uncovered"], json!([[1, 1], [3, 3], [5, 5]]));
    for turn in [1, 2, 2] {
        expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
    }
    expect(
        app.append("c", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    expect(app.reconstruct("c", 6).await, StatusCode::OK).await;
    let after = app.metrics_text().await;

    let mut series = DECISION_SERIES.to_vec();
    series.extend([
        "gatekeeper_reconstructions_total{source=\"raw_log\"}",
        "gatekeeper_reconstructions_total{source=\"summary\"}",
        "gatekeeper_reconstructions_total{source=\"live\"}",
        "gatekeeper_turns_appended_total",
        "gatekeeper_http_requests_total{route=\"/v1/conversations/{conversation}/compactions\",method=\"POST\",status=\"201\"}",
        "gatekeeper_http_requests_total{route=\"/v1/conversations/{conversation}/turns\",method=\"POST\",status=\"201\"}",
    ]);
    let expected = [
        0.0, 1.0, 0.0, 0.0, // outcomes
        3.0, 3.0, 0.0, // covered 0, 2, 4; uncovered 1, 3, 5
        2.0, // contradictions
        1.0, 0.0, 1.0, // truncation signals: finish_reason_length only
        1.0, 2.0, 1.0, // reconstructions, a repeat (from memory) counted too
        7.0, 1.0, 2.0,
    ];
    let got = deltas(&before, &after, &series);
    let want: Vec<(&str, f64)> = series.iter().copied().zip(expected).collect();
    assert_eq!(got, want);
    // The three reads the cache did not answer went to Postgres, each alone: nothing else was
    // in flight. SQLite reads each on its own, without batches.
    let batches = [
        "gatekeeper_reconstruct_batch_lookups_sum",
        "gatekeeper_reconstruct_batch_lookups_count",
    ];
    let sent = match app.store.backend() {
        gatekeeper::store::Backend::Postgres => 3.0,
        gatekeeper::store::Backend::Sqlite => 0.0,
    };
    assert_eq!(
        deltas(&before, &after, &batches),
        [(batches[0], sent), (batches[1], sent)]
    );
}

#[tokio::test]
async fn a_partial_checkpoint_a_rejection_and_a_dry_run_each_count_only_what_they_persisted() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = app().await;
    six_turns(&app, "c").await;
    let before = app.metrics_text().await;
    // Truncated mid-clause, no report: the anchors reach turn 2, so 3-5 are not compacted.
    let partial =
        json!({ "from": 0, "to": 5, "summary": "REF-0, REF-2 and then", "summary_budget": 2000 });
    let verdict = expect(app.propose("c", partial).await, StatusCode::CREATED).await;
    assert_eq!(verdict["outcome"], "partial");
    // Nothing of the range kept: rejected, 422, nothing persisted.
    let rejected =
        json!({ "from": 3, "to": 5, "summary": "Nothing of note.", "summary_budget": 2000 });
    let rejection = app.propose("c", rejected).await;
    assert_eq!(rejection.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A dry run decides and counts nothing.
    let dry = json!({ "from": 3, "to": 5, "summary": "REF-3 and REF-4.", "summary_budget": 2000, "dry_run": true });
    expect(app.propose("c", dry).await, StatusCode::OK).await;
    let after = app.metrics_text().await;
    let expected = [
        0.0, 0.0, 1.0, 1.0, // outcomes: the partial one, the rejection
        2.0, 1.0, 3.0, // the partial checkpoint's turns only
        0.0, // contradictions
        0.0, 1.0, 1.0, // mid_clause, once: the rejection's summary ends in a period
    ];
    let got = deltas(&before, &after, &DECISION_SERIES);
    let want: Vec<(&str, f64)> = DECISION_SERIES.iter().copied().zip(expected).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_narrowing_logs_one_warn_line_with_tenant_and_conversation_and_a_full_coverage_none() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = app().await;
    for conversation in ["narrowed-c", "accepted-c"] {
        six_turns(&app, conversation).await;
    }
    let narrowing = json!({ "from": 0, "to": 5, "summary": "REF-0, REF-1, REF-2, REF-4 and REF-5.", "summary_budget": 2000 });
    let verdict = expect(
        app.propose("narrowed-c", narrowing).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(verdict["outcome"], "narrowed");
    let full = json!({ "from": 0, "to": 5, "summary": "REF-0, REF-1, REF-2, REF-3, REF-4 and REF-5.", "summary_budget": 2000 });
    let verdict = expect(app.propose("accepted-c", full).await, StatusCode::CREATED).await;
    assert_eq!(verdict["outcome"], "accepted");

    let decided = |conversation: &str| -> Vec<Value> {
        lines_about(conversation)
            .into_iter()
            .filter(|l| l["fields"]["message"] == "compaction decided")
            .collect()
    };
    let narrowed = decided("narrowed-c");
    assert_eq!(narrowed.len(), 1, "one line per decision: {narrowed:#?}");
    let line = &narrowed[0];
    assert_eq!(line["level"], "WARN", "{line}");
    let fields = &line["fields"];
    assert_eq!(
        (&fields["tenant"], &fields["outcome"], &fields["uncovered"]),
        (&json!("acme"), &json!("narrowed"), &json!(1)),
        "{line}"
    );
    let counts = ["covered", "not_compacted", "from", "to", "contradictions"].map(|f| &fields[f]);
    assert_eq!(
        counts,
        [5, 0, 0, 5, 0].map(|n| json!(n)).each_ref(),
        "{line}"
    );
    assert_eq!(fields["checkpoint"], "Some(1)", "{line}");
    assert_eq!(fields["dry_run"], false, "{line}");
    let accepted = decided("accepted-c");
    assert_eq!(accepted.len(), 1, "{accepted:#?}");
    assert_eq!(accepted[0]["level"], "INFO", "{}", accepted[0]);
    let warned: Vec<Value> = lines_about("accepted-c")
        .into_iter()
        .filter(|l| l["level"] == "WARN")
        .collect();
    assert!(
        warned.is_empty(),
        "a full coverage warns of nothing: {warned:#?}"
    );
}

#[tokio::test]
async fn pins_searches_plans_and_budgeted_contexts_are_each_counted_once() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = app().await;
    six_turns(&app, "c").await;
    // Only turn 0 covered: turns 1-5 are spanned and uncovered, so a budget may stub them.
    let body = json!({ "from": 0, "to": 5, "summary": "REF-0.", "summary_budget": 2000 });
    expect(app.propose("c", body).await, StatusCode::CREATED).await;
    let before = app.metrics_text().await;
    expect(app.pin("c", 1, true).await, StatusCode::OK).await;
    expect(app.pin("c", 1, false).await, StatusCode::OK).await;
    expect(app.pin("c", 2, true).await, StatusCode::OK).await;
    expect(
        app.get("/v1/conversations/c/search?q=REF").await,
        StatusCode::OK,
    )
    .await;
    expect(app.get("/v1/search?q=REF").await, StatusCode::OK).await;
    expect(
        app.plan("c", "summary_budget=100&from=0").await,
        StatusCode::OK,
    )
    .await;
    let tight = expect(
        app.get("/v1/conversations/c/context?max_tokens=0").await,
        StatusCode::OK,
    )
    .await;
    let stubs = (tight["items"].as_array().unwrap().iter())
        .filter(|i| i["type"] == "stub")
        .count() as f64;
    assert!(stubs > 0.0, "{tight}");
    assert_eq!(tight["fits"], false);
    let after = app.metrics_text().await;
    let series = [
        "gatekeeper_turn_pins_total{action=\"pin\"}",
        "gatekeeper_turn_pins_total{action=\"unpin\"}",
        "gatekeeper_searches_total{scope=\"conversation\"}",
        "gatekeeper_searches_total{scope=\"tenant\"}",
        "gatekeeper_compaction_advice_total",
        "gatekeeper_context_stubs_total",
        "gatekeeper_context_over_budget_total",
    ];
    let want: Vec<(&str, f64)> = series
        .iter()
        .copied()
        .zip([2.0, 1.0, 1.0, 1.0, 1.0, stubs, 1.0])
        .collect();
    assert_eq!(deltas(&before, &after, &series), want);
}

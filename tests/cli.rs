//! The `gatekeeper` binary end to end: its client commands against the real router on port 0
//! and a fresh database (SQLite, or Postgres with `GATEKEEPER_TEST_BACKEND=postgres`).
//! Exit codes: 0 done, 1 error, 2 usage, 3 proposal rejected, 4 not found.

use gatekeeper::config::ServeConfig;
use gatekeeper_test_support as support;

use gatekeeper::api::{
    CompactionPlanResponse, ContextItem, ContextResponse, ReconstructResponse, SearchResponse,
    Source, VerdictResponse,
};
use gatekeeper::coverage::Outcome;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::*;

// ---------------------------------------------------------------------------------------------
// Running the binary.
// ---------------------------------------------------------------------------------------------

/// What a run of the binary ended with.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Asserts the exit code, showing both streams when it differs.
    #[track_caller]
    fn exits(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    fn json<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not the expected JSON ({e}):\n{}", self.stdout))
    }
}

/// Runs `gatekeeper args…` with `envs` (and nothing of the caller's `GATEKEEPER_*`), feeding
/// `stdin` when given; killed after 60 s so a hanging command fails the test instead of
/// hanging it.
async fn run_with(args: Vec<String>, envs: Vec<(String, String)>, stdin: Option<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gatekeeper"));
        command
            .args(&args)
            .env_remove("GATEKEEPER_URL")
            .env_remove("GATEKEEPER_KEY")
            .envs(envs)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the gatekeeper binary starts");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                let _ = pipe.write_all(input.as_bytes());
            });
        }
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                pipe.read_to_string(&mut text).expect("UTF-8 output");
                text
            })
        };
        let stdout = drain(Box::new(child.stdout.take().unwrap()));
        let stderr = drain(Box::new(child.stderr.take().unwrap()));
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("gatekeeper {args:?} did not finish within 60 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        Run {
            code: status
                .code()
                .expect("the binary exited rather than being killed"),
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        }
    })
    .await
    .unwrap()
}

/// `gatekeeper args… --url <app>` (plus `--key` when the app has one).
async fn gk(app: &TestApp, args: &[&str]) -> Run {
    gk_stdin(app, args, None).await
}

async fn gk_stdin(app: &TestApp, args: &[&str], stdin: Option<String>) -> Run {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["--url".to_owned(), app.base.clone()]);
    if let Some(key) = &app.key {
        all.extend(["--key".to_owned(), key.clone()]);
    }
    run_with(all, Vec::new(), stdin).await
}

/// A directory of its own under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "gk_cli_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One `{"role", "content"}` object per line.
fn jsonl(turns: &[Value]) -> String {
    turns.iter().map(|t| format!("{t}\n")).collect()
}

fn tau_path() -> String {
    let path = gatekeeper::tau_bench::default_path();
    assert!(
        Path::new(&path).exists(),
        "the tau-bench data is at {}",
        path.display()
    );
    path.display().to_string()
}

// ---------------------------------------------------------------------------------------------
// Reading the service's state through the API.
// ---------------------------------------------------------------------------------------------

async fn next_id(app: &TestApp, conversation: &str) -> i64 {
    let body = expect(app.conversation(conversation).await, StatusCode::OK).await;
    body["next_id"].as_i64().unwrap()
}

/// Every stored turn of the conversation as `(role, content)`, in id order, read one by one.
async fn stored_turns(app: &TestApp, conversation: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for id in 0..next_id(app, conversation).await {
        let turn = expect(app.turn(conversation, id).await, StatusCode::OK).await;
        assert_eq!(turn["id"], id);
        out.push((
            turn["role"].as_str().unwrap().to_owned(),
            turn["content"].as_str().unwrap().to_owned(),
        ));
    }
    out
}

fn role_content(turns: &[Value]) -> Vec<(String, String)> {
    turns
        .iter()
        .map(|t| {
            (
                t["role"].as_str().unwrap().to_owned(),
                t["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn checkpoint_count(app: &TestApp, conversation: &str) -> usize {
    let list = expect(app.checkpoints(conversation).await, StatusCode::OK).await;
    list["checkpoints"].as_array().unwrap().len()
}

// ---------------------------------------------------------------------------------------------
// A small conversation with hand-set anchors, for the compaction commands.
// ---------------------------------------------------------------------------------------------

fn anchor(i: i64) -> String {
    format!("K{i}-{i}{i}{i}")
}

/// `n` real tau-bench turns, turn `i` with the single anchor `K{i}-{i}{i}{i}`.
async fn setup(app: &TestApp, conversation: &str, n: usize) -> Vec<Value> {
    let turns: Vec<Value> = tau_turns(n)
        .into_iter()
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

/// A clean, finished summary carrying the anchors of `ids`.
fn summary_of(ids: &[i64]) -> String {
    let anchors: Vec<String> = ids.iter().map(|&i| anchor(i)).collect();
    format!("The agent handled {}.", anchors.join(", "))
}

/// Covers 0–2 of the range 0–3: narrowed, turn 3 uncovered (its anchor is missing).
fn narrowed_proposal() -> Value {
    json!({ "from": 0, "to": 3, "summary": summary_of(&[0, 1, 2]), "summary_budget": 5000 })
}

/// Mentions no anchor of 0–3: rejected.
fn rejected_proposal() -> Value {
    json!({ "from": 0, "to": 3, "summary": "The customer called about a flight.", "summary_budget": 5000 })
}

/// Five turns and checkpoint 1 over 0–3 covering 0–2: turn 1 comes from the summary, turn 3
/// from the raw log, turn 4 is live.
async fn compacted(app: &TestApp, conversation: &str) -> Vec<Value> {
    let turns = setup(app, conversation, 5).await;
    let verdict = expect(
        app.propose(conversation, narrowed_proposal()).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(verdict["checkpoint_id"], 1, "{verdict}");
    turns
}

// ---------------------------------------------------------------------------------------------
// append
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn append_of_the_real_tau_bench_file_with_a_limit_creates_those_conversations_with_every_turn()
 {
    let app = spawn_app().await;
    let run = gk(&app, &["append", &tau_path(), "--limit", "3"]).await;
    run.exits(0);
    assert!(
        run.stderr.is_empty(),
        "no progress bar or noise when stderr is not a terminal: {:?}",
        run.stderr
    );
    let chosen = &tau()[..3];
    for conversation in chosen {
        let name = &conversation.conversation;
        assert_eq!(
            next_id(&app, name).await,
            conversation.turns.len() as i64,
            "{name} holds every turn of the data"
        );
        let expected: Vec<(String, String)> = conversation
            .turns
            .iter()
            .map(|t| (t.role.clone(), t.text().into_owned()))
            .collect();
        assert_eq!(
            stored_turns(&app, name).await,
            expected,
            "{name}: turn i is line i"
        );
        let line = format!(
            "{name} · appended {n} · already stored 0 · next id {n}",
            n = conversation.turns.len()
        );
        assert!(run.stdout.contains(&line), "{line:?} in {}", run.stdout);
    }
    // The limit is respected: the fourth conversation was not touched.
    problem(
        app.conversation(&tau()[3].conversation).await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

#[tokio::test]
async fn append_of_the_tau_bench_file_a_second_time_appends_nothing() {
    let app = spawn_app().await;
    gk(&app, &["append", &tau_path(), "--limit", "3"])
        .await
        .exits(0);
    let again = gk(&app, &["append", &tau_path(), "--limit", "3", "--json"]).await;
    let summaries: Vec<Value> = again.exits(0).json();
    assert_eq!(summaries.len(), 3, "{summaries:?}");
    for (summary, conversation) in summaries.iter().zip(&tau()[..3]) {
        let n = conversation.turns.len();
        assert_eq!(
            summary,
            &json!({
                "conversation": conversation.conversation,
                "already_stored": n,
                "appended": 0,
                "next_id": n,
            })
        );
        assert_eq!(
            next_id(&app, &conversation.conversation).await,
            n as i64,
            "nothing was added"
        );
    }
}

#[tokio::test]
async fn append_of_a_jsonl_turn_file_fills_the_named_conversation_with_ids_matching_line_numbers() {
    let app = spawn_app().await;
    let dir = TempDir::new();
    let turns = tau_conversation(2);
    let file = dir.write("turns.jsonl", &jsonl(&turns));
    let run = gk(&app, &["append", &file, "--conversation", "x"]).await;
    run.exits(0);
    let n = turns.len();
    assert_eq!(
        run.stdout.trim(),
        format!("x · appended {n} · already stored 0 · next id {n}")
    );
    assert_eq!(stored_turns(&app, "x").await, role_content(&turns));
}

#[tokio::test]
async fn append_of_a_gzipped_turn_file_with_blank_lines_numbers_only_the_turns() {
    use flate2::{Compression, write::GzEncoder};
    let app = spawn_app().await;
    let dir = TempDir::new();
    let turns = tau_conversation(1);
    let text: String = turns.iter().map(|t| format!("{t}\n\n")).collect();
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let path = dir.0.join("turns.jsonl.gz");
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let run = gk(
        &app,
        &["append", path.to_str().unwrap(), "--conversation", "z"],
    )
    .await;
    run.exits(0);
    assert_eq!(stored_turns(&app, "z").await, role_content(&turns));
}

#[tokio::test]
async fn append_of_a_turn_file_resumes_after_a_partial_append_through_the_api() {
    let app = spawn_app().await;
    let dir = TempDir::new();
    let turns = tau_conversation(3);
    let n = turns.len();
    let half = n / 2;
    expect(
        app.append("r", json!(turns[..half])).await,
        StatusCode::CREATED,
    )
    .await;
    let file = dir.write("turns.jsonl", &jsonl(&turns));
    // Small batches: the rest goes in several requests.
    let run = gk(
        &app,
        &["append", &file, "-c", "r", "--batch", "7", "--json"],
    )
    .await;
    let summaries: Vec<Value> = run.exits(0).json();
    assert_eq!(
        summaries,
        vec![
            json!({ "conversation": "r", "already_stored": half, "appended": n - half, "next_id": n })
        ]
    );
    assert_eq!(stored_turns(&app, "r").await, role_content(&turns));
}

#[tokio::test]
async fn append_of_a_turn_file_resumes_after_a_shorter_file_and_appends_only_the_rest() {
    let app = spawn_app().await;
    let dir = TempDir::new();
    let turns = tau_conversation(4);
    let n = turns.len();
    let short = dir.write("short.jsonl", &jsonl(&turns[..10]));
    let whole = dir.write("whole.jsonl", &jsonl(&turns));
    let first = gk(&app, &["append", &short, "--conversation", "s"]).await;
    assert_eq!(
        first.exits(0).stdout.trim(),
        "s · appended 10 · already stored 0 · next id 10"
    );
    let second = gk(&app, &["append", &whole, "--conversation", "s"]).await;
    assert_eq!(
        second.exits(0).stdout.trim(),
        format!("s · appended {} · already stored 10 · next id {n}", n - 10)
    );
    assert_eq!(stored_turns(&app, "s").await, role_content(&turns));
    // And a third run has nothing left to do.
    let third = gk(&app, &["append", &whole, "--conversation", "s"]).await;
    assert_eq!(
        third.exits(0).stdout.trim(),
        format!("s · appended 0 · already stored {n} · next id {n}")
    );
}

#[tokio::test]
async fn append_of_a_file_that_no_longer_matches_the_stored_log_fails_with_a_conflict_and_writes_nothing()
 {
    let app = spawn_app().await;
    let dir = TempDir::new();
    let turns = tau_conversation(2);
    let half = turns.len() / 2;
    let short = dir.write("short.jsonl", &jsonl(&turns[..half]));
    gk(&app, &["append", &short, "--conversation", "m"])
        .await
        .exits(0);
    // The file's copy of the last stored turn now says something else.
    let mut edited = turns.clone();
    edited[half - 1]["content"] = json!("This line was rewritten after it was appended.");
    let file = dir.write("edited.jsonl", &jsonl(&edited));
    let run = gk(&app, &["append", &file, "--conversation", "m"]).await;
    assert_ne!(run.code, 0, "a mismatch is an error: {}", run.stdout);
    run.exits(1);
    assert!(
        run.stderr.contains("409"),
        "the conflict is named: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("{}", half - 1)),
        "the conflicting id is named: {}",
        run.stderr
    );
    assert_eq!(
        stored_turns(&app, "m").await,
        role_content(&turns[..half]),
        "nothing was appended after a different history"
    );
}

#[tokio::test]
async fn append_with_only_and_conversation_appends_that_one_tau_bench_conversation_under_the_new_name()
 {
    let app = spawn_app().await;
    let source = &tau()[1];
    let run = gk(
        &app,
        &[
            "append",
            &tau_path(),
            "--only",
            &source.conversation,
            "--conversation",
            "renamed",
        ],
    )
    .await;
    run.exits(0);
    let n = source.turns.len();
    assert_eq!(
        run.stdout.trim(),
        format!("renamed · appended {n} · already stored 0 · next id {n}")
    );
    let expected: Vec<(String, String)> = source
        .turns
        .iter()
        .map(|t| (t.role.clone(), t.text().into_owned()))
        .collect();
    assert_eq!(stored_turns(&app, "renamed").await, expected);
    problem(
        app.conversation(&source.conversation).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    problem(
        app.conversation(&tau()[0].conversation).await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

#[tokio::test]
async fn append_with_only_keeps_the_conversations_own_name() {
    let app = spawn_app().await;
    let source = &tau()[7];
    gk(
        &app,
        &["append", &tau_path(), "--only", &source.conversation],
    )
    .await
    .exits(0);
    assert_eq!(
        next_id(&app, &source.conversation).await,
        source.turns.len() as i64
    );
    problem(
        app.conversation(&tau()[0].conversation).await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

#[tokio::test]
async fn append_with_only_naming_no_conversation_of_the_file_fails() {
    let app = spawn_app().await;
    let run = gk(&app, &["append", &tau_path(), "--only", "airline-none-0"]).await;
    run.exits(1);
    assert!(run.stderr.contains("no conversation"), "{}", run.stderr);
}

#[tokio::test]
async fn append_of_a_turn_file_without_a_conversation_fails_and_says_which_flag_is_missing() {
    let app = spawn_app().await;
    let dir = TempDir::new();
    let file = dir.write("turns.jsonl", &jsonl(&tau_conversation(1)));
    let run = gk(&app, &["append", &file]).await;
    run.exits(1);
    assert!(run.stderr.contains("--conversation"), "{}", run.stderr);
}

#[tokio::test]
async fn append_of_a_missing_file_fails_naming_the_file() {
    let app = spawn_app().await;
    let run = gk(&app, &["append", "/nonexistent/turns.jsonl", "-c", "x"]).await;
    run.exits(1);
    assert!(
        run.stderr.contains("/nonexistent/turns.jsonl"),
        "{}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// compact
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn compact_from_stdin_persists_the_checkpoint_and_prints_the_coverage_line() {
    let app = spawn_app().await;
    setup(&app, "c", 5).await;
    let run = gk_stdin(
        &app,
        &["compact", "c"],
        Some(narrowed_proposal().to_string()),
    )
    .await;
    run.exits(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "narrowed · checkpoint 1", "{}", run.stdout);
    assert_eq!(lines[1], "covered 0-2 · uncovered 3", "{}", run.stdout);
    assert!(lines[2].starts_with("prefix "), "{}", run.stdout);
    assert_eq!(checkpoint_count(&app, "c").await, 1);
    // `-` reads stdin too.
    let proposal =
        json!({ "from": 3, "to": 4, "summary": summary_of(&[3, 4]), "summary_budget": 5000 });
    let dash = gk_stdin(&app, &["compact", "c", "-"], Some(proposal.to_string())).await;
    let lines: Vec<&str> = dash.exits(0).stdout.lines().collect();
    assert_eq!(lines[0], "accepted · checkpoint 2", "{}", dash.stdout);
    assert_eq!(lines[1], "covered 3-4", "{}", dash.stdout);
    assert_eq!(checkpoint_count(&app, "c").await, 2);
}

#[tokio::test]
async fn compact_from_a_file_with_json_prints_a_verdict_response() {
    let app = spawn_app().await;
    setup(&app, "c", 5).await;
    let dir = TempDir::new();
    let file = dir.write("proposal.json", &narrowed_proposal().to_string());
    let run = gk(&app, &["compact", "c", &file, "--json"]).await;
    let verdict: VerdictResponse = run.exits(0).json();
    assert_eq!(verdict.conversation, "c");
    assert_eq!(verdict.checkpoint_id, Some(1));
    assert!(!verdict.dry_run);
    assert_eq!(verdict.verdict.outcome, Outcome::Narrowed);
    assert_eq!(verdict.verdict.covered.to_string(), "0-2");
    assert_eq!(verdict.verdict.uncovered.to_string(), "3");
    // What was printed is what the service stored.
    let stored = expect(app.checkpoint("c", 1).await, StatusCode::OK).await;
    assert_eq!(stored["covered"], json!([[0, 2]]));
    assert_eq!(stored["uncovered"], json!([[3, 3]]));
}

#[tokio::test]
async fn compact_with_dry_run_decides_but_persists_nothing() {
    let app = spawn_app().await;
    setup(&app, "c", 5).await;
    let human = gk_stdin(
        &app,
        &["compact", "c", "--dry-run"],
        Some(narrowed_proposal().to_string()),
    )
    .await;
    let lines: Vec<&str> = human.exits(0).stdout.lines().collect();
    assert_eq!(lines[0], "narrowed · dry run, nothing persisted");
    assert_eq!(lines[1], "covered 0-2 · uncovered 3");
    let dir = TempDir::new();
    let file = dir.write("proposal.json", &narrowed_proposal().to_string());
    let json_run = gk(&app, &["compact", "c", &file, "--dry-run", "--json"]).await;
    let verdict: VerdictResponse = json_run.exits(0).json();
    assert!(verdict.dry_run);
    assert_eq!(verdict.checkpoint_id, None);
    assert_eq!(verdict.verdict.outcome, Outcome::Narrowed);
    assert_eq!(checkpoint_count(&app, "c").await, 0);
    let status = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(status["checkpoints"], 0);
    assert_eq!(status["latest_checkpoint"], Value::Null);
}

#[tokio::test]
async fn a_rejected_compaction_exits_3_and_still_prints_the_verdict() {
    let app = spawn_app().await;
    setup(&app, "c", 5).await;
    let human = gk_stdin(
        &app,
        &["compact", "c"],
        Some(rejected_proposal().to_string()),
    )
    .await;
    let lines: Vec<&str> = human.exits(3).stdout.lines().collect();
    assert_eq!(lines[0], "rejected · nothing persisted", "{}", human.stdout);
    assert_eq!(lines[1], "covered - · uncovered 0-3", "{}", human.stdout);
    let json_run = gk_stdin(
        &app,
        &["compact", "c", "--json"],
        Some(rejected_proposal().to_string()),
    )
    .await;
    let verdict: VerdictResponse = json_run.exits(3).json();
    assert_eq!(verdict.verdict.outcome, Outcome::Rejected);
    assert_eq!(verdict.checkpoint_id, None);
    assert!(verdict.verdict.covered.is_empty());
    assert_eq!(verdict.verdict.uncovered.to_string(), "0-3");
    assert_eq!(checkpoint_count(&app, "c").await, 0);
}

#[tokio::test]
async fn compact_on_an_unknown_conversation_exits_4() {
    let app = spawn_app().await;
    let run = gk_stdin(
        &app,
        &["compact", "nobody"],
        Some(narrowed_proposal().to_string()),
    )
    .await;
    run.exits(4);
    assert!(run.stderr.contains("not found"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[tokio::test]
async fn compact_of_a_proposal_that_is_not_json_for_the_api_exits_1_and_sends_nothing() {
    let app = spawn_app().await;
    setup(&app, "c", 5).await;
    let garbage = gk_stdin(&app, &["compact", "c"], Some("{ not json".into())).await;
    garbage.exits(1);
    assert!(
        garbage.stderr.contains("not valid JSON"),
        "{}",
        garbage.stderr
    );
    // A misspelled field is refused before it reaches the service.
    let misspelled =
        json!({ "from": 0, "to": 3, "summary": "x.", "summary_budget": 10, "consumd": [[0, 3]] });
    gk_stdin(&app, &["compact", "c"], Some(misspelled.to_string()))
        .await
        .exits(1);
    gk(&app, &["compact", "c", "/nonexistent/proposal.json"])
        .await
        .exits(1);
    assert_eq!(checkpoint_count(&app, "c").await, 0);
}

#[tokio::test]
async fn compact_of_an_invalid_range_exits_1_with_the_services_problem() {
    let app = spawn_app().await;
    setup(&app, "c", 5).await;
    let proposal =
        json!({ "from": 0, "to": 9, "summary": summary_of(&[0]), "summary_budget": 5000 });
    let run = gk_stdin(&app, &["compact", "c"], Some(proposal.to_string())).await;
    run.exits(1);
    assert!(run.stderr.contains("422"), "{}", run.stderr);
    assert!(
        run.stderr.contains("5-9"),
        "names the missing ids: {}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// reconstruct, context, plan
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn reconstruct_answers_from_the_summary_the_raw_log_or_the_live_log() {
    let app = spawn_app().await;
    let turns = compacted(&app, "c").await;
    let summary = summary_of(&[0, 1, 2]);

    let covered = gk(&app, &["reconstruct", "c", "1"]).await;
    let (head, text) = covered.exits(0).stdout.split_once('\n').unwrap();
    assert_eq!(
        head,
        format!(
            "turn 1 · {} · summary of checkpoint 1",
            turns[1]["role"].as_str().unwrap()
        )
    );
    assert_eq!(text.trim_end(), summary);

    let raw = gk(&app, &["reconstruct", "c", "3"]).await;
    let (head, text) = raw.exits(0).stdout.split_once('\n').unwrap();
    assert_eq!(
        head,
        format!(
            "turn 3 · {} · raw log (checkpoint 1: anchor_missing)",
            turns[3]["role"].as_str().unwrap()
        )
    );
    assert_eq!(
        text.trim_end(),
        turns[3]["content"].as_str().unwrap().trim_end()
    );

    let live = gk(&app, &["reconstruct", "c", "4"]).await;
    let (head, text) = live.exits(0).stdout.split_once('\n').unwrap();
    assert_eq!(
        head,
        format!("turn 4 · {} · live", turns[4]["role"].as_str().unwrap())
    );
    assert_eq!(
        text.trim_end(),
        turns[4]["content"].as_str().unwrap().trim_end()
    );
}

#[tokio::test]
async fn reconstruct_with_json_parses_as_a_reconstruct_response() {
    let app = spawn_app().await;
    let turns = compacted(&app, "c").await;
    let expected = [
        (0, Source::Summary, Some(1)),
        (3, Source::RawLog, Some(1)),
        (4, Source::Live, None),
    ];
    for (turn, source, checkpoint) in expected {
        let run = gk(&app, &["reconstruct", "c", &turn.to_string(), "--json"]).await;
        let answer: ReconstructResponse = run.exits(0).json();
        assert_eq!(answer.turn, turn);
        assert_eq!(answer.source, source, "turn {turn}");
        assert_eq!(answer.checkpoint_id, checkpoint, "turn {turn}");
        assert_eq!(answer.role.as_str(), turns[turn as usize]["role"]);
        let from_api = expect(app.reconstruct("c", turn).await, StatusCode::OK).await;
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            from_api,
            "the CLI prints the service's answer"
        );
    }
}

#[tokio::test]
async fn reconstruct_of_a_turn_or_conversation_that_does_not_exist_exits_4() {
    let app = spawn_app().await;
    compacted(&app, "c").await;
    let beyond = gk(&app, &["reconstruct", "c", "5"]).await;
    beyond.exits(4);
    assert!(beyond.stderr.contains("not found"), "{}", beyond.stderr);
    gk(&app, &["reconstruct", "nobody", "0"]).await.exits(4);
    gk(&app, &["reconstruct", "nobody", "0", "--json"])
        .await
        .exits(4);
}

#[tokio::test]
async fn context_lists_summaries_and_uncovered_turns_and_json_parses_as_a_context_response() {
    let app = spawn_app().await;
    compacted(&app, "c").await;
    let run = gk(&app, &["context", "c", "--json"]).await;
    let context: ContextResponse = run.exits(0).json();
    assert_eq!(context.conversation, "c");
    let shape: Vec<String> = context
        .items
        .iter()
        .map(|item| match item {
            ContextItem::Summary {
                checkpoint_id,
                covers,
                ..
            } => format!("summary {checkpoint_id} {covers}"),
            ContextItem::Turn { id, source, .. } => format!("turn {id} {}", source.as_str()),
            ContextItem::Stub { id, .. } => format!("stub {id}"),
        })
        .collect();
    assert_eq!(
        shape,
        ["summary 1 0-2", "turn 3 raw_log", "turn 4 live"],
        "{context:?}"
    );
    let from_api = expect(app.context("c").await, StatusCode::OK).await;
    assert_eq!(serde_json::to_value(&context).unwrap(), from_api);

    let human = gk(&app, &["context", "c"]).await;
    let lines: Vec<&str> = human.exits(0).stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("c · 3 items · {} tokens", context.total_tokens)
    );
    assert!(
        lines[1].starts_with("[summary 1] covers 0-2 · "),
        "{lines:?}"
    );
    assert!(lines[2].starts_with("[turn 3] "), "{lines:?}");
    assert!(lines[2].contains(" · raw_log · "), "{lines:?}");
    assert!(lines[3].starts_with("[turn 4] "), "{lines:?}");
    assert!(lines[3].contains(" · live · "), "{lines:?}");

    gk(&app, &["context", "nobody"]).await.exits(4);
}

#[tokio::test]
async fn plan_with_a_budget_prints_the_largest_range_that_fits_and_json_parses() {
    let app = spawn_app().await;
    let dir = TempDir::new();
    let turns = tau_conversation(3);
    let file = dir.write("turns.jsonl", &jsonl(&turns));
    gk(&app, &["append", &file, "-c", "p"]).await.exits(0);
    let from_api = expect(app.plan("p", "summary_budget=300").await, StatusCode::OK).await;
    let to = from_api["to"].as_i64().expect("some range fits 300");
    assert!(
        to < turns.len() as i64 - 1,
        "the budget is binding: {from_api}"
    );

    let run = gk(&app, &["plan", "p", "--budget", "300", "--json"]).await;
    let plan: CompactionPlanResponse = run.exits(0).json();
    assert_eq!(serde_json::to_value(&plan).unwrap(), from_api);
    assert_eq!(
        (plan.from, plan.to, plan.summary_budget),
        (0, Some(to), 300)
    );
    assert!(plan.required_budget <= 300);

    let human = gk(&app, &["plan", "p", "--budget", "300"]).await;
    let stdout = &human.exits(0).stdout;
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "range 0-{to} · {} tokens · needs budget {} of 300 · anchors take {} tokens",
            plan.prefix_tokens, plan.required_budget, plan.anchor_tokens
        )
    );
    assert!(
        lines[1].starts_with(&format!("advice: {} (", plan.advice.as_str())),
        "{stdout}"
    );
    assert_eq!(lines[2], "the summary must keep, per turn:");
    // One line per planned turn: its id, then its anchors (or why it has none).
    assert_eq!(lines.len(), 3 + plan.turns.len(), "{stdout}");
    for (line, turn) in lines[3..].iter().zip(&plan.turns) {
        let (id, what) = line.trim_start().split_once("  ").unwrap();
        assert_eq!(id, turn.id.to_string());
        if turn.unanchored.is_none() {
            assert_eq!(what, turn.anchors.join(", "));
        }
    }

    // `--from` moves the start.
    let later: CompactionPlanResponse = gk(
        &app,
        &["plan", "p", "--budget", "300", "--from", "5", "--json"],
    )
    .await
    .exits(0)
    .json();
    assert_eq!(later.from, 5);
    assert_eq!(
        serde_json::to_value(&later).unwrap(),
        expect(
            app.plan("p", "summary_budget=300&from=5").await,
            StatusCode::OK
        )
        .await
    );

    // A budget too small for the first turn (the system prompt).
    let nothing = gk(&app, &["plan", "p", "--budget", "1"]).await;
    assert!(
        nothing
            .exits(0)
            .stdout
            .starts_with("nothing fits: turn 0 alone needs budget "),
        "{}",
        nothing.stdout
    );

    gk(&app, &["plan", "nobody", "--budget", "300"])
        .await
        .exits(4);
}

#[tokio::test]
async fn plan_without_a_budget_is_a_usage_error_with_exit_2() {
    let app = spawn_app().await;
    let run = gk(&app, &["plan", "c"]).await;
    run.exits(2);
    assert!(run.stderr.contains("--budget"), "{}", run.stderr);
}

// ---------------------------------------------------------------------------------------------
// status, reachability, keys
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn status_of_a_running_service_is_ready_and_exits_0() {
    let app = spawn_app().await;
    let run = gk(&app, &["status"]).await;
    assert_eq!(run.exits(0).stdout.trim(), format!("{} · ready", app.base));
    let json_run: Value = gk(&app, &["status", "--json"]).await.exits(0).json();
    assert_eq!(json_run, json!({ "url": app.base, "ready": true }));
}

#[tokio::test]
async fn status_takes_the_url_from_gatekeeper_url() {
    let app = spawn_app().await;
    let run = run_with(
        vec!["status".into()],
        vec![("GATEKEEPER_URL".into(), app.base.clone())],
        None,
    )
    .await;
    assert_eq!(run.exits(0).stdout.trim(), format!("{} · ready", app.base));
}

#[tokio::test]
async fn status_of_a_conversation_shows_its_log_and_latest_checkpoint() {
    let app = spawn_app().await;
    compacted(&app, "c").await;
    let conversation = expect(app.conversation("c").await, StatusCode::OK).await;
    let run = gk(&app, &["status", "c"]).await;
    assert_eq!(
        run.exits(0).stdout.trim(),
        format!(
            "c · 5 turns · {} tokens · 1 checkpoints · latest checkpoint 1 (narrowed, 0-3)",
            conversation["total_tokens"]
        )
    );
    let json_run: Value = gk(&app, &["status", "c", "--json"]).await.exits(0).json();
    assert_eq!(json_run, conversation);

    setup(&app, "fresh", 2).await;
    let fresh = gk(&app, &["status", "fresh"]).await;
    assert!(
        fresh
            .exits(0)
            .stdout
            .trim()
            .ends_with("0 checkpoints · no checkpoint"),
        "{}",
        fresh.stdout
    );

    gk(&app, &["status", "nobody"]).await.exits(4);
}

#[tokio::test]
async fn status_of_a_service_whose_database_is_gone_is_not_ready_and_exits_1() {
    let app = spawn_app().await;
    app.store.close().await;
    let run = gk(&app, &["status"]).await;
    run.exits(1);
    assert_eq!(run.stdout.trim(), format!("{} · not ready", app.base));
    assert!(run.stderr.contains("not ready"), "{}", run.stderr);
}

/// A local port that nothing listens on.
async fn closed_port_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test]
async fn a_service_that_is_not_running_exits_1_with_a_clear_message() {
    let url = closed_port_url().await;
    for args in [
        vec!["status"],
        vec!["status", "c"],
        vec!["context", "c"],
        vec!["reconstruct", "c", "0"],
        vec!["plan", "c", "--budget", "10"],
    ] {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend(["--url".to_owned(), url.clone()]);
        let run = run_with(all, Vec::new(), None).await;
        run.exits(1);
        assert!(
            run.stderr.contains("cannot reach the gatekeeper"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
    let dir = TempDir::new();
    let file = dir.write("turns.jsonl", &jsonl(&tau_conversation(1)));
    let run = run_with(
        vec![
            "append".into(),
            file,
            "-c".into(),
            "x".into(),
            "--url".into(),
            url,
        ],
        Vec::new(),
        None,
    )
    .await;
    run.exits(1);
    assert!(
        run.stderr.contains("cannot reach the gatekeeper"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn a_wrong_key_against_a_keyed_service_exits_1_mentioning_401() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("t:0123456789abcdef".into()),
        ..Default::default()
    })
    .await;
    let keyed = app.with_key("0123456789abcdef");
    setup(&keyed, "c", 3).await;
    // The right key, passed with --key (by `gk`) or GATEKEEPER_KEY.
    gk(&keyed, &["status", "c"]).await.exits(0);
    let from_env = run_with(
        vec![
            "status".into(),
            "c".into(),
            "--url".into(),
            app.base.clone(),
        ],
        vec![("GATEKEEPER_KEY".into(), "0123456789abcdef".into())],
        None,
    )
    .await;
    assert!(from_env.exits(0).stdout.starts_with("c · 3 turns"));

    for key in [Some("fedcba9876543210"), None] {
        let app = match key {
            Some(key) => app.with_key(key),
            None => app.clone(),
        };
        for args in [vec!["status", "c"], vec!["context", "c"]] {
            let run = gk(&app, &args).await;
            run.exits(1);
            assert!(
                run.stderr.contains("401") && run.stderr.contains("Unauthorized"),
                "{key:?} {args:?}: {}",
                run.stderr
            );
        }
    }
    let dir = TempDir::new();
    let file = dir.write("turns.jsonl", &jsonl(&tau_conversation(1)));
    let run = gk(
        &app.with_key("fedcba9876543210"),
        &["append", &file, "-c", "c"],
    )
    .await;
    run.exits(1);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
}

#[tokio::test]
async fn a_conversation_name_with_url_characters_never_addresses_another_conversation() {
    // `?`, `#` and `/` are not part of any conversation id: such a name must be refused, not
    // read as the path of conversation `x`.
    let app = spawn_app().await;
    setup(&app, "x", 2).await;
    let mut wrong = Vec::new();
    for name in ["x?y", "x#y"] {
        let run = gk(&app, &["status", name]).await;
        if run.code == 0 {
            wrong.push(format!("status {name:?} exited 0: {}", run.stdout.trim()));
        }
    }
    let dir = TempDir::new();
    let file = dir.write("turns.jsonl", &jsonl(&tau_conversation(1)));
    let run = gk(&app, &["append", &file, "-c", "x/turns?"]).await;
    if run.code == 0 {
        wrong.push(format!(
            "append -c \"x/turns?\" exited 0: {}",
            run.stdout.trim()
        ));
    }
    let stored = next_id(&app, "x").await;
    if stored != 2 {
        wrong.push(format!(
            "conversation x now holds {stored} turns instead of 2"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Exit codes, side by side.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn exit_codes_are_0_done_1_error_2_usage_3_rejected_4_not_found() {
    let app = spawn_app().await;
    setup(&app, "c", 5).await;
    let dry = |p: Value| Some(p.to_string());
    assert_eq!(
        gk_stdin(
            &app,
            &["compact", "c", "--dry-run"],
            dry(narrowed_proposal())
        )
        .await
        .code,
        0
    );
    assert_eq!(
        run_with(
            vec!["status".into(), "--url".into(), closed_port_url().await],
            Vec::new(),
            None
        )
        .await
        .code,
        1
    );
    assert_eq!(gk(&app, &["plan", "c"]).await.code, 2);
    assert_eq!(gk(&app, &["no-such-command"]).await.code, 2);
    assert_eq!(
        gk(&app, &["reconstruct", "c", "not-a-number"]).await.code,
        2
    );
    assert_eq!(
        gk_stdin(
            &app,
            &["compact", "c", "--dry-run"],
            dry(rejected_proposal())
        )
        .await
        .code,
        3
    );
    assert_eq!(gk(&app, &["reconstruct", "c", "99"]).await.code, 4);
}

#[tokio::test]
async fn append_pinned_pins_every_turn_and_pin_unpins_one() {
    let app = spawn_app().await;
    let dir = TempDir::new();
    let file = dir.write("turns.jsonl", &jsonl(&tau_turns(3)));
    gk(&app, &["append", &file, "-c", "p", "--pinned"])
        .await
        .exits(0);
    for id in 0..3 {
        let turn = expect(app.turn("p", id).await, StatusCode::OK).await;
        assert_eq!(turn["pinned"], true, "turn {id}");
    }
    let plan = gk(&app, &["plan", "p", "--budget", "100000"]).await;
    assert!(
        plan.exits(0).stdout.contains("(pinned: never covered)"),
        "{}",
        plan.stdout
    );

    let run = gk(&app, &["pin", "p", "1", "--unpin"]).await;
    assert_eq!(
        run.exits(0).stdout.trim(),
        "turn 1 unpinned: later summaries may cover it"
    );
    let turn = expect(app.turn("p", 1).await, StatusCode::OK).await;
    assert_eq!(turn["pinned"], false);
    let json: serde_json::Value = gk(&app, &["pin", "p", "1", "--json"]).await.exits(0).json();
    assert_eq!(json["pinned"], true);
    gk(&app, &["pin", "p", "7"]).await.exits(4);
}

#[tokio::test]
async fn context_with_max_tokens_says_whether_it_fits_and_the_smallest_budget_that_does() {
    let app = spawn_app().await;
    compacted(&app, "c").await;
    let tight: ContextResponse = gk(&app, &["context", "c", "--max-tokens", "1", "--json"])
        .await
        .exits(0)
        .json();
    assert_eq!((tight.max_tokens, tight.fits), (Some(1), Some(false)));
    let smallest = tight.smallest_max_tokens.unwrap();
    assert_eq!(
        tight.total_tokens, smallest,
        "the smallest context is the answer"
    );
    let human = gk(&app, &["context", "c", "--max-tokens", "1"]).await;
    let first = human.exits(0).stdout.lines().next().unwrap().to_owned();
    assert!(
        first.ends_with(&format!(
            "does not fit 1: the smallest context takes {smallest}"
        )),
        "{first}"
    );
    let enough = smallest.to_string();
    let fits: ContextResponse = gk(&app, &["context", "c", "--max-tokens", &enough, "--json"])
        .await
        .exits(0)
        .json();
    assert_eq!(fits.fits, Some(true));
    assert!(fits.total_tokens <= smallest);
}

#[tokio::test]
async fn search_finds_a_turn_by_its_words_in_one_conversation_or_across_them() {
    let app = spawn_app().await;
    gk(&app, &["append", &tau_path(), "--limit", "2"])
        .await
        .exits(0);
    let in_one: SearchResponse = gk(
        &app,
        &["search", "mia_li_3668", "-c", "airline-0-0", "--json"],
    )
    .await
    .exits(0)
    .json();
    assert!(!in_one.hits.is_empty());
    for hit in &in_one.hits {
        assert_eq!(hit.conversation, "airline-0-0");
        let turn = expect(app.turn("airline-0-0", hit.turn).await, StatusCode::OK).await;
        let content = turn["content"].as_str().unwrap();
        assert!(content.contains("mia_li_3668"), "{content}");
    }
    let limited: SearchResponse = gk(&app, &["search", "flight", "--limit", "3", "--json"])
        .await
        .exits(0)
        .json();
    assert_eq!(limited.hits.len(), 3);
    let conversations: std::collections::BTreeSet<&str> =
        (limited.terms.iter()).map(|t| t.term.as_str()).collect();
    assert_eq!(conversations, ["flight"].into());
    let human = gk(&app, &["search", "mia_li_3668", "--prefix", "airline-0"]).await;
    let out = &human.exits(0).stdout;
    let head = out.lines().next().unwrap();
    assert!(
        head.starts_with(&format!("{} hits for mia_li_3668", in_one.hits.len())),
        "{head}"
    );
    assert!(
        out.contains("airline-0-0/") && out.contains("· live ·"),
        "{out}"
    );
    gk(&app, &["search", "flight", "-c", "nobody"])
        .await
        .exits(4);
    let unsearchable = gk(&app, &["search", "the of", "-c", "airline-0-0"]).await;
    let first = unsearchable
        .exits(0)
        .stdout
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(first, "0 hits for  · not searched: the, of");
}

// ---------------------------------------------------------------------------------------------
// delete, export, import
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn export_writes_what_import_restores_and_delete_erases_it() {
    let app = spawn_app().await;
    let turns = compacted(&app, "moving").await;
    let exported = gk(&app, &["export", "moving"]).await;
    exported.exits(0);
    assert_eq!(
        exported.stdout,
        app.export("moving").await,
        "the service's export, as is"
    );
    assert_eq!(exported.stdout.lines().count(), 1 + turns.len() + 1);

    gk(&app, &["delete", "moving"]).await.exits(0);
    problem(
        app.get("/v1/conversations/moving").await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let again = gk(&app, &["delete", "moving"]).await;
    again.exits(4);
    assert!(again.stderr.contains("not found"), "{}", again.stderr);

    let imported = gk_stdin(&app, &["import", "moving"], Some(exported.stdout.clone())).await;
    imported.exits(0);
    assert!(
        imported
            .stdout
            .contains(&format!("{} turns, 1 checkpoints", turns.len())),
        "{}",
        imported.stdout
    );
    assert_eq!(app.export("moving").await, exported.stdout);
    let over = gk_stdin(&app, &["import", "moving"], Some(exported.stdout)).await;
    over.exits(1);
    assert!(
        over.stderr.contains("already holds turns"),
        "{}",
        over.stderr
    );
}

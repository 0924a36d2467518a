//! The typed Rust client (`gatekeeper::client::Client`): against the real router on port 0 and
//! a fresh database (SQLite, or Postgres with `GATEKEEPER_TEST_BACKEND=postgres`), and against
//! a small local stand-in for an overloaded gatekeeper for its retries.

use gatekeeper::config::ServeConfig;
use gatekeeper_test_support as support;

use axum::http::{HeaderMap, Method, StatusCode as AxumStatus, Uri, header};
use axum::response::{IntoResponse, Response};
use gatekeeper::api::{
    AppendTurn, AppendTurnsRequest, AppendTurnsResponse, CheckpointListResponse,
    CheckpointResponse, CompactionPlanResponse, CompactionRequestBody, ContextResponse,
    ConversationResponse, ReconstructResponse, Source, TurnResponse,
};
use gatekeeper::client::{Client, ClientError, Problem};
use gatekeeper::coverage::{Outcome, Rejection, Role};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

// ---------------------------------------------------------------------------------------------
// Helpers against the real service.
// ---------------------------------------------------------------------------------------------

fn client(app: &TestApp) -> Client {
    Client::new(&app.base, app.key.clone()).with_retries(0, Duration::from_millis(1))
}

fn anchor(i: i64) -> String {
    format!("K{i}-{i}{i}{i}")
}

/// `n` real tau-bench turns, turn `i` with the single anchor `K{i}-{i}{i}{i}`.
fn anchored_turns(n: usize) -> Vec<AppendTurn> {
    tau_turns(n)
        .into_iter()
        .enumerate()
        .map(|(i, t)| AppendTurn {
            id: None,
            role: t["role"].as_str().unwrap().parse().unwrap(),
            content: t["content"].as_str().unwrap().to_owned(),
            tokens: None,
            anchors: Some(vec![anchor(i as i64)]),
            external_id: None,
            pinned: false,
        })
        .collect()
}

fn summary_of(ids: &[i64]) -> String {
    let anchors: Vec<String> = ids.iter().map(|&i| anchor(i)).collect();
    format!("The agent handled {}.", anchors.join(", "))
}

fn proposal(from: i64, to: i64, summary: String) -> CompactionRequestBody {
    CompactionRequestBody {
        from,
        to,
        summary,
        summary_budget: 5000,
        consumed: None,
        finish_reason: None,
        end_marker: None,
        mode: None,
        dry_run: false,
        expected_checkpoint: None,
    }
}

async fn setup(client: &Client, conversation: &str, n: usize) -> Vec<AppendTurn> {
    let turns = anchored_turns(n);
    client
        .append(
            conversation,
            &AppendTurnsRequest {
                turns: turns.clone(),
            },
        )
        .await
        .expect("the turns are appended");
    turns
}

#[track_caller]
fn expect_problem<T: std::fmt::Debug>(result: Result<T, ClientError>, status: u16) -> Problem {
    match result {
        Err(ClientError::Problem(problem)) => {
            assert_eq!(problem.status, status, "{problem:?}");
            assert!(!problem.title.is_empty() && !problem.detail.is_empty());
            problem
        }
        other => panic!("expected a {status} problem, got {other:?}"),
    }
}

/// The same GET, raw, decoded into the type the client claims it returns.
async fn raw<T: serde::de::DeserializeOwned>(app: &TestApp, path: &str) -> T {
    serde_json::from_value(expect(app.get(path).await, StatusCode::OK).await).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Typed round trip against the real service.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn append_is_typed_and_a_replay_appends_nothing() {
    let app = spawn_app().await;
    let client = client(&app);
    let turns = anchored_turns(5);
    let request = AppendTurnsRequest {
        turns: turns.clone(),
    };
    let first = client.append("c", &request).await.unwrap();
    assert_eq!(first.conversation, "c");
    assert_eq!((first.appended, first.replayed, first.next_id), (5, 0, 5));
    for (i, (stored, sent)) in first.turns.iter().zip(&turns).enumerate() {
        assert_eq!(stored.id, i as i64);
        assert_eq!(stored.anchors, vec![anchor(i as i64)]);
        assert_eq!(stored.tokens, count_tokens(&sent.content));
    }
    // The same turns with their ids: an idempotent replay.
    let with_ids = AppendTurnsRequest {
        turns: turns
            .iter()
            .enumerate()
            .map(|(i, t)| AppendTurn {
                id: Some(i as i64),
                ..t.clone()
            })
            .collect(),
    };
    let again = client.append("c", &with_ids).await.unwrap();
    assert_eq!((again.appended, again.replayed, again.next_id), (0, 5, 5));
}

#[tokio::test]
async fn an_accepted_or_narrowed_proposal_is_a_verdict_response_with_its_checkpoint_id() {
    let app = spawn_app().await;
    let client = client(&app);
    setup(&client, "c", 6).await;
    let narrowed = client
        .propose("c", &proposal(0, 3, summary_of(&[0, 1, 2])), None)
        .await
        .unwrap();
    assert_eq!(narrowed.conversation, "c");
    assert_eq!(narrowed.checkpoint_id, Some(1));
    assert!(!narrowed.dry_run);
    assert_eq!(narrowed.verdict.outcome, Outcome::Narrowed);
    assert_eq!(narrowed.verdict.covered.to_string(), "0-2");
    assert_eq!(narrowed.verdict.uncovered.to_string(), "3");
    assert_eq!(narrowed.verdict.advanced_to, Some(3));

    let mut next = proposal(4, 5, summary_of(&[4, 5]));
    next.expected_checkpoint = Some(Some(1));
    let accepted = client
        .propose("c", &next, Some("caller-key"))
        .await
        .unwrap();
    assert_eq!(accepted.checkpoint_id, Some(2));
    assert_eq!(accepted.verdict.outcome, Outcome::Accepted);

    // A dry run decides the same and persists nothing.
    let mut dry = proposal(0, 5, summary_of(&[0, 1, 2, 3, 4, 5]));
    dry.dry_run = true;
    let verdict = client.propose("c", &dry, None).await.unwrap();
    assert!(verdict.dry_run);
    assert_eq!(verdict.checkpoint_id, None);
    assert_eq!(verdict.verdict.outcome, Outcome::Accepted);
    assert_eq!(client.checkpoints("c").await.unwrap().checkpoints.len(), 2);
}

#[tokio::test]
async fn a_rejected_proposal_is_a_rejected_error_carrying_the_whole_verdict() {
    let app = spawn_app().await;
    let client = client(&app);
    setup(&client, "c", 4).await;
    let result = client
        .propose(
            "c",
            &proposal(0, 3, "The customer called about a flight.".into()),
            None,
        )
        .await;
    let Err(ClientError::Rejected(verdict)) = result else {
        panic!("expected a rejected verdict, got {result:?}");
    };
    assert_eq!(verdict.conversation, "c");
    assert_eq!(verdict.checkpoint_id, None);
    assert_eq!(verdict.verdict.outcome, Outcome::Rejected);
    assert_eq!(verdict.verdict.rejection, Some(Rejection::NothingCovered));
    assert!(verdict.verdict.covered.is_empty());
    assert_eq!(verdict.verdict.uncovered.to_string(), "0-3");
    assert_eq!(verdict.verdict.turns.len(), 4);
    assert!(
        ClientError::Rejected(verdict.clone())
            .to_string()
            .contains("rejected")
    );
    assert!(
        client
            .checkpoints("c")
            .await
            .unwrap()
            .checkpoints
            .is_empty()
    );

    // Strict mode rejects a proposal that leaves a turn uncovered.
    let mut strict = proposal(0, 3, summary_of(&[0, 1, 2]));
    strict.mode = Some(gatekeeper::coverage::Mode::Strict);
    match client.propose("c", &strict, None).await {
        Err(ClientError::Rejected(v)) => {
            assert_eq!(v.verdict.rejection, Some(Rejection::StrictMode));
            assert_eq!(v.verdict.covered.to_string(), "0-2");
        }
        other => panic!("expected a strict rejection, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_conversation_turn_or_checkpoint_is_a_not_found_problem() {
    let app = spawn_app().await;
    let client = client(&app);
    let problem = expect_problem(client.conversation("nobody").await, 404);
    assert_eq!(problem.slug(), "not-found");
    assert_eq!(problem.kind, "urn:gatekeeper:problem:not-found");
    assert!(problem.detail.contains("nobody"), "{problem:?}");
    assert!(
        ClientError::Problem(problem.clone())
            .to_string()
            .starts_with("404 ")
    );

    setup(&client, "c", 3).await;
    for problem in [
        expect_problem(client.turn("c", 3).await, 404),
        expect_problem(client.checkpoint("c", 1).await, 404),
        expect_problem(client.reconstruct("c", 7).await, 404),
        expect_problem(client.reconstruct("nobody", 0).await, 404),
        expect_problem(client.context("nobody", None).await, 404),
        expect_problem(client.checkpoints("nobody").await, 404),
        expect_problem(client.plan("nobody", 100, None).await, 404),
        expect_problem(
            client
                .propose("nobody", &proposal(0, 0, summary_of(&[0])), None)
                .await,
            404,
        ),
    ] {
        assert_eq!(problem.slug(), "not-found", "{problem:?}");
    }
}

#[tokio::test]
async fn a_conflicting_append_is_a_conflict_problem_naming_the_conflicting_ids() {
    let app = spawn_app().await;
    let client = client(&app);
    let turns = setup(&client, "c", 3).await;
    let mut changed = turns[1].clone();
    changed.id = Some(1);
    changed.content = "Something else entirely.".into();
    let problem = expect_problem(
        client
            .append(
                "c",
                &AppendTurnsRequest {
                    turns: vec![changed],
                },
            )
            .await,
        409,
    );
    assert_eq!(problem.slug(), "conflict");
    assert_eq!(problem.extra["conflicting_ids"], json!([1]));

    // A gap names the id the log expects.
    let mut gap = turns[0].clone();
    gap.id = Some(10);
    let problem = expect_problem(
        client
            .append("c", &AppendTurnsRequest { turns: vec![gap] })
            .await,
        409,
    );
    assert_eq!(problem.slug(), "conflict");
    assert_eq!(problem.extra["expected_id"], json!(3));

    // A stale expected checkpoint.
    let mut stale = proposal(0, 1, summary_of(&[0, 1]));
    stale.expected_checkpoint = Some(Some(4));
    let problem = expect_problem(client.propose("c", &stale, None).await, 409);
    assert_eq!(problem.slug(), "conflict");
    assert_eq!(problem.extra["latest_checkpoint"], Value::Null);
    assert_eq!(client.conversation("c").await.unwrap().next_id, 3);
}

#[tokio::test]
async fn an_invalid_proposal_is_an_invalid_request_problem_with_its_field() {
    let app = spawn_app().await;
    let client = client(&app);
    setup(&client, "c", 3).await;
    let backwards = expect_problem(
        client
            .propose("c", &proposal(2, 1, summary_of(&[1])), None)
            .await,
        422,
    );
    assert_eq!(backwards.slug(), "invalid-request");
    assert_eq!(backwards.extra["field"], "to");
    let beyond = expect_problem(
        client
            .propose("c", &proposal(0, 5, summary_of(&[0])), None)
            .await,
        422,
    );
    assert_eq!(beyond.extra["missing_ids"], json!([[3, 5]]));
}

#[tokio::test]
async fn reads_are_typed_and_equal_the_services_json() {
    let app = spawn_app().await;
    let client = client(&app);
    let turns = setup(&client, "c", 5).await;
    client
        .propose("c", &proposal(0, 3, summary_of(&[0, 1, 2])), None)
        .await
        .unwrap();
    let base = "/v1/conversations/c";

    let conversation = client.conversation("c").await.unwrap();
    assert_eq!(conversation.next_id, 5);
    assert_eq!(conversation.checkpoints, 1);
    let latest = conversation.latest_checkpoint.as_ref().unwrap();
    assert_eq!(
        (latest.checkpoint_id, latest.from, latest.advanced_to),
        (1, 0, 3)
    );
    assert_eq!(conversation, raw::<ConversationResponse>(&app, base).await);

    let turn = client.turn("c", 3).await.unwrap();
    assert_eq!(turn.id, 3);
    assert_eq!(turn.role, turns[3].role);
    assert_eq!(turn.content, turns[3].content);
    assert_eq!(turn.anchors, vec![anchor(3)]);
    assert_eq!(
        turn,
        raw::<TurnResponse>(&app, &format!("{base}/turns/3")).await
    );

    let list = client.checkpoints("c").await.unwrap();
    assert_eq!(list.checkpoints.len(), 1);
    assert_eq!(list.checkpoints[0].outcome, Outcome::Narrowed);
    assert_eq!(
        list,
        raw::<CheckpointListResponse>(&app, &format!("{base}/compactions")).await
    );

    let checkpoint = client.checkpoint("c", 1).await.unwrap();
    assert_eq!(checkpoint.summary, summary_of(&[0, 1, 2]));
    assert_eq!(checkpoint.verdict.covered.to_string(), "0-2");
    assert_eq!(
        checkpoint,
        raw::<CheckpointResponse>(&app, &format!("{base}/compactions/1")).await
    );

    for (id, source) in [(1, Source::Summary), (3, Source::RawLog), (4, Source::Live)] {
        let answer = client.reconstruct("c", id).await.unwrap();
        assert_eq!(answer.source, source, "turn {id}");
        assert_eq!(
            answer,
            raw::<ReconstructResponse>(&app, &format!("{base}/reconstruct/{id}")).await
        );
    }

    let context = client.context("c", None).await.unwrap();
    assert_eq!(context.items.len(), 3);
    assert_eq!(
        context,
        raw::<ContextResponse>(&app, &format!("{base}/context")).await
    );

    let plan = client.plan("c", 5000, None).await.unwrap();
    assert_eq!((plan.from, plan.to), (4, Some(4)), "after the checkpoint");
    assert_eq!(
        plan,
        raw::<CompactionPlanResponse>(&app, &format!("{base}/compaction-plan?summary_budget=5000"))
            .await
    );
    let from = client.plan("c", 5000, Some(1)).await.unwrap();
    assert_eq!(from.from, 1);
    assert_eq!(
        from,
        raw::<CompactionPlanResponse>(
            &app,
            &format!("{base}/compaction-plan?summary_budget=5000&from=1")
        )
        .await
    );

    assert!(client.ready().await.unwrap());
}

#[tokio::test]
async fn a_base_url_with_a_trailing_slash_works() {
    let app = spawn_app().await;
    let client = Client::new(format!("{}/", app.base), None);
    setup(&client, "c", 2).await;
    assert_eq!(client.conversation("c").await.unwrap().next_id, 2);
    assert!(client.ready().await.unwrap());
}

/// A result for a failure message, long bodies cut short.
fn brief<T: std::fmt::Debug>(result: &Result<T, ClientError>) -> String {
    let text = format!("{result:?}");
    match text.char_indices().nth(160) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[tokio::test]
async fn a_conversation_name_is_sent_as_one_path_segment() {
    // `?`, `#` and `/` are not part of any conversation id: the client must send such a name
    // percent-encoded, as one path segment, so that the service refuses it rather than the
    // name silently addressing another resource.
    let app = spawn_app().await;
    let client = client(&app);
    setup(&client, "x", 2).await;
    let mut wrong = Vec::new();
    for name in ["x?y", "x#y", "x/turns/0"] {
        let result = client.conversation(name).await;
        if !matches!(&result, Err(ClientError::Problem(p)) if (400..500).contains(&p.status)) {
            wrong.push(format!(
                "conversation({name:?}) answered {}",
                brief(&result)
            ));
        }
    }
    // Nor may a name make an append land in another conversation.
    let result = client
        .append(
            "x/turns?",
            &AppendTurnsRequest {
                turns: anchored_turns(1),
            },
        )
        .await;
    if !matches!(&result, Err(ClientError::Problem(p)) if (400..500).contains(&p.status)) {
        wrong.push(format!("append(\"x/turns?\") answered {}", brief(&result)));
    }
    let stored = client.conversation("x").await.unwrap().next_id;
    if stored != 2 {
        wrong.push(format!(
            "conversation x now holds {stored} turns instead of 2"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn a_keyed_service_takes_the_right_key_and_answers_401_unauthorized_to_a_wrong_or_missing_one()
 {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("t:0123456789abcdef".into()),
        ..Default::default()
    })
    .await;
    let right = Client::new(&app.base, Some("0123456789abcdef".into()));
    setup(&right, "c", 2).await;
    assert_eq!(right.conversation("c").await.unwrap().next_id, 2);
    for key in [Some("fedcba9876543210".to_owned()), None] {
        let wrong = Client::new(&app.base, key);
        let problem = expect_problem(wrong.conversation("c").await, 401);
        assert_eq!(problem.slug(), "unauthorized");
        assert_eq!(problem.title, "Unauthorized");
        let problem = expect_problem(
            wrong
                .append(
                    "c",
                    &AppendTurnsRequest {
                        turns: anchored_turns(1),
                    },
                )
                .await,
            401,
        );
        assert_eq!(problem.slug(), "unauthorized");
        // Readiness is for probes: no key needed.
        assert!(wrong.ready().await.unwrap());
    }
}

#[tokio::test]
async fn a_service_that_is_not_running_is_a_transport_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let client = Client::new(&url, None).with_retries(3, Duration::from_millis(1));
    let result = client.conversation("c").await;
    assert!(
        matches!(result, Err(ClientError::Transport(_))),
        "{result:?}"
    );
    let message = result.unwrap_err().to_string();
    assert!(message.contains("cannot reach the gatekeeper"), "{message}");
    assert!(matches!(
        client.ready().await,
        Err(ClientError::Transport(_))
    ));
}

#[tokio::test]
async fn a_service_whose_database_is_closed_answers_503_and_the_client_returns_it_after_its_retries()
 {
    let app = spawn_app().await;
    let client = Client::new(&app.base, None);
    setup(&client, "c", 2).await;
    app.store.close().await;
    let client = client.with_retries(2, Duration::from_millis(10));
    let started = Instant::now();
    let problem = expect_problem(client.conversation("c").await, 503);
    assert_eq!(problem.slug(), "unavailable");
    // The service says `Retry-After: 1`; the client waits at least that before each retry.
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "two retries honouring Retry-After: 1 took {:?}",
        started.elapsed()
    );
    let problem = expect_problem(
        client
            .append(
                "c",
                &AppendTurnsRequest {
                    turns: anchored_turns(1),
                },
            )
            .await,
        503,
    );
    assert_eq!(problem.slug(), "unavailable");
    assert!(!client.ready().await.unwrap());
}

// ---------------------------------------------------------------------------------------------
// Retries, against a stand-in for an overloaded gatekeeper.
// ---------------------------------------------------------------------------------------------

/// One request the stand-in received.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    idempotency_key: Option<String>,
}

/// Answers each request with the next status of its script (then 200 for good): 503 or 429
/// as problem+json with `Retry-After`, 200 with a valid body for the route.
#[derive(Clone)]
struct Overloaded {
    script: Arc<Mutex<VecDeque<u16>>>,
    retry_after: &'static str,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Overloaded {
    async fn start(script: &[u16], retry_after: &'static str) -> (Overloaded, String) {
        let stub = Overloaded {
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            retry_after,
            seen: Arc::default(),
        };
        let router = axum::Router::new()
            .fallback(answer)
            .with_state(stub.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (stub, base)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn keys(&self) -> Vec<Option<String>> {
        self.seen().into_iter().map(|s| s.idempotency_key).collect()
    }
}

async fn answer(
    axum::extract::State(stub): axum::extract::State<Overloaded>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    stub.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        path: uri.path().to_owned(),
        idempotency_key: headers
            .get("idempotency-key")
            .map(|v| v.to_str().unwrap().to_owned()),
    });
    let status = stub.script.lock().unwrap().pop_front().unwrap_or(200);
    if status != 200 {
        let status = AxumStatus::from_u16(status).unwrap();
        let slug = if status == AxumStatus::TOO_MANY_REQUESTS {
            "rate-limited"
        } else {
            "unavailable"
        };
        let body = json!({
            "type": format!("urn:gatekeeper:problem:{slug}"),
            "title": status.canonical_reason().unwrap(),
            "status": status.as_u16(),
            "detail": "overloaded; retry shortly",
        });
        return (
            status,
            [
                (header::CONTENT_TYPE, "application/problem+json"),
                (header::RETRY_AFTER, stub.retry_after),
            ],
            body.to_string(),
        )
            .into_response();
    }
    let body = if method == Method::POST && uri.path().ends_with("/turns") {
        json!({
            "conversation": "c", "appended": 1, "replayed": 0, "next_id": 1,
            "turns": [{ "id": 0, "tokens": 3, "anchors": ["K0-000"] }],
        })
    } else {
        json!({
            "conversation": "c", "next_id": 1, "total_tokens": 3, "checkpoints": 0,
            "latest_checkpoint": null,
        })
    };
    axum::Json(body).into_response()
}

fn one_turn() -> AppendTurnsRequest {
    AppendTurnsRequest {
        turns: vec![AppendTurn {
            id: None,
            role: Role::User,
            content: "I need to change my flight to May 20.".into(),
            tokens: None,
            anchors: None,
            external_id: None,
            pinned: false,
        }],
    }
}

fn appended() -> AppendTurnsResponse {
    serde_json::from_value(json!({
        "conversation": "c", "appended": 1, "replayed": 0, "next_id": 1,
        "turns": [{ "id": 0, "tokens": 3, "anchors": ["K0-000"] }],
    }))
    .unwrap()
}

#[tokio::test]
async fn a_post_answered_503_and_429_is_retried_with_the_same_idempotency_key_until_it_succeeds() {
    let (stub, base) = Overloaded::start(&[503, 503, 429], "0").await;
    let client = Client::new(&base, None).with_retries(5, Duration::from_millis(1));
    let response = client.append("c", &one_turn()).await.unwrap();
    assert_eq!(response, appended());
    let seen = stub.seen();
    assert_eq!(seen.len(), 4, "three retries: {seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.method == Method::POST && s.path == "/v1/conversations/c/turns"),
        "{seen:?}"
    );
    let keys = stub.keys();
    let first = keys[0].clone().expect("a POST carries an Idempotency-Key");
    assert!(!first.is_empty());
    assert!(
        keys.iter().all(|k| k.as_deref() == Some(first.as_str())),
        "every retry reuses the key: {keys:?}"
    );
}

#[tokio::test]
async fn a_caller_given_idempotency_key_is_sent_on_the_request_and_every_retry() {
    let (stub, base) = Overloaded::start(&[503, 429], "0").await;
    let client = Client::new(&base, None).with_retries(5, Duration::from_millis(1));
    // The stand-in answers with a conversation body, not a verdict: only the key matters here.
    let result = client
        .propose("c", &proposal(0, 0, "x.".into()), Some("orchestrator-42"))
        .await;
    assert!(
        matches!(result, Err(ClientError::Unexpected { status: 200, .. })),
        "{result:?}"
    );
    assert_eq!(
        stub.keys(),
        vec![Some("orchestrator-42".to_owned()); 3],
        "{:?}",
        stub.seen()
    );
}

#[tokio::test]
async fn with_one_retry_the_client_gives_up_and_returns_the_503_problem() {
    let (stub, base) = Overloaded::start(&[503, 503, 503], "0").await;
    let client = Client::new(&base, None).with_retries(1, Duration::from_millis(1));
    let problem = expect_problem(client.append("c", &one_turn()).await, 503);
    assert_eq!(problem.slug(), "unavailable");
    assert_eq!(problem.detail, "overloaded; retry shortly");
    let keys = stub.keys();
    assert_eq!(keys.len(), 2, "one try and one retry: {keys:?}");
    assert!(keys[0].is_some() && keys[0] == keys[1], "{keys:?}");
}

#[tokio::test]
async fn with_no_retries_a_429_comes_back_at_once_as_a_problem() {
    let (stub, base) = Overloaded::start(&[429], "0").await;
    let client = Client::new(&base, None).with_retries(0, Duration::from_millis(1));
    let problem = expect_problem(client.conversation("c").await, 429);
    assert_eq!(problem.slug(), "rate-limited");
    assert_eq!(stub.seen().len(), 1);
}

#[tokio::test]
async fn gets_carry_no_idempotency_key_and_are_retried_too() {
    let (stub, base) = Overloaded::start(&[503, 429], "0").await;
    let client = Client::new(&base, None).with_retries(5, Duration::from_millis(1));
    let status = client.conversation("c").await.unwrap();
    assert_eq!(status.next_id, 1);
    let seen = stub.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.method == Method::GET && s.idempotency_key.is_none()),
        "{seen:?}"
    );
}

#[tokio::test]
async fn two_separate_posts_get_different_idempotency_keys() {
    let (stub, base) = Overloaded::start(&[], "0").await;
    let client = Client::new(&base, None);
    client.append("c", &one_turn()).await.unwrap();
    client.append("c", &one_turn()).await.unwrap();
    let keys = stub.keys();
    assert_eq!(keys.len(), 2);
    assert!(keys[0].is_some() && keys[1].is_some(), "{keys:?}");
    assert_ne!(keys[0], keys[1], "each call is its own operation");
}

#[tokio::test]
async fn the_wait_between_retries_starts_at_the_first_backoff_and_doubles() {
    let (stub, base) = Overloaded::start(&[503, 503, 503], "0").await;
    let client = Client::new(&base, None).with_retries(5, Duration::from_millis(40));
    let started = Instant::now();
    client.append("c", &one_turn()).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(stub.seen().len(), 4);
    // 40 + 80 + 160 ms.
    assert!(elapsed >= Duration::from_millis(280), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}

#[tokio::test]
async fn a_retry_after_longer_than_the_backoff_is_honoured() {
    let (stub, base) = Overloaded::start(&[503], "1").await;
    let client = Client::new(&base, None).with_retries(5, Duration::from_millis(1));
    let started = Instant::now();
    client.append("c", &one_turn()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(stub.seen().len(), 2);
}

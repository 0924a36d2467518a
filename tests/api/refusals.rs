//! Refusals that must write nothing and say what they are: each error status's problem `type`,
//! a request past its timeout (503, its transaction rolled back), a rate-limited write, and the
//! length limit of `finish_reason` and `end_marker`.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use gatekeeper_test_support::{AnyStore, HeldLock};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

/// Three real turns with anchors `R{i}` in "c".
async fn three_turns(app: &TestApp) {
    let turns: Vec<_> = tau_turns(3)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("R{i}")]);
            t
        })
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
}

async fn execute(store: &AnyStore, sql: &str) {
    match store {
        AnyStore::Postgres(pg) => sqlx::query(sql).execute(pg.pool()).await.map(|_| ()),
        AnyStore::Sqlite(lite) => sqlx::query(sql).execute(lite.pool()).await.map(|_| ()),
    }
    .unwrap();
}

#[tokio::test]
async fn each_error_status_has_its_documented_problem_type() {
    let app = spawn_app_with(ServeConfig {
        max_body_bytes: 16 * 1024,
        ..Default::default()
    })
    .await;
    three_turns(&app).await;
    let turns = "/v1/conversations/c/turns";
    // A stored answer whose status no HTTP answer has: data that breaks an invariant, the one
    // way from outside to a 500 (the store's own faults are 503s).
    let key_path = app.url(turns);
    let keyed = || {
        app.client
            .post(&key_path)
            .header("Idempotency-Key", "corrupt")
            .json(&json!({ "turns": [{ "role": "user", "content": "hello" }] }))
    };
    expect(keyed().send().await.unwrap(), StatusCode::CREATED).await;
    execute(&app.store, "UPDATE idempotency_keys SET status = -1").await;
    let before = app.full_snapshot("c").await;

    let big = json!({ "turns": [{ "role": "tool", "content": tau_tool_output().repeat(40) }] });
    assert!(big.to_string().len() > 16 * 1024);
    let cases: Vec<(&str, reqwest::Response, StatusCode, &str)> = vec![
        (
            "malformed JSON",
            app.post_raw(turns, "application/json", "{\"turns\": [")
                .await,
            StatusCode::BAD_REQUEST,
            "bad-request",
        ),
        (
            "a method the route lacks",
            app.client.put(app.url(turns)).send().await.unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method-not-allowed",
        ),
        (
            "a body over the limit",
            app.post(turns, &big).await,
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
        ),
        (
            "a body that is not JSON",
            app.post_raw(turns, "text/plain", "turns").await,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
        ),
        (
            "a stored answer that breaks an invariant",
            keyed().send().await.unwrap(),
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
        ),
    ];
    let mut wrong = Vec::new();
    for (name, response, status, slug) in cases {
        let body = problem(response, status).await;
        if body["type"] != format!("urn:gatekeeper:problem:{slug}") {
            wrong.push(format!("{name}: {status} has type {}", body["type"]));
        }
        if status.is_server_error() {
            assert_eq!(
                body["detail"], "an internal error occurred; it has been logged",
                "a 500 never shows its cause"
            );
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(app.full_snapshot("c").await, before, "nothing written");
}

#[tokio::test]
async fn a_request_past_its_timeout_is_503_and_its_write_is_rolled_back() {
    let app = spawn_app_with(ServeConfig {
        request_timeout_secs: 1,
        ..Default::default()
    })
    .await;
    three_turns(&app).await;
    let before = app.full_snapshot("c").await;
    // The append waits for the conversation's lock, held from outside past the timeout.
    let lock = HeldLock::take(&app.store, "default", "c").await;
    let waiting = {
        let app = app.clone();
        tokio::spawn(async move { app.append("c", json!(tau_turns(1))).await })
    };
    let answer = tokio::time::timeout(Duration::from_secs(8), waiting)
        .await
        .expect("answered within the timeout, not after the lock")
        .unwrap();
    assert_eq!(answer.headers()["retry-after"], "1");
    let body = problem(answer, StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(body["type"], "urn:gatekeeper:problem:unavailable");
    // Let the lock go: an append that went on behind the answer would now be written.
    lock.release().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(app.full_snapshot("c").await, before, "nothing written");
    // The conversation takes the next append as if the timed-out one never happened.
    let next = expect(
        app.append("c", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(next["turns"][0]["id"], 3);
}

#[tokio::test]
async fn a_rate_limited_write_is_429_and_writes_nothing() {
    // The key's tenant is the one a keyless service serves, so a second service on the same
    // database, without keys or limits, can read what the first one stored.
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("default:tenant-a-key-0123456789".into()),
        rate_limit_per_sec: 0.01,
        rate_limit_burst: 1,
        ..Default::default()
    })
    .await;
    let a = app.with_key("tenant-a-key-0123456789");
    three_turns(&a).await; // the burst's one request
    let reader = app.another_process().await;
    let before = reader.full_snapshot("c").await;
    let proposal =
        json!({ "from": 0, "to": 2, "summary": "R0, R1 and R2.", "summary_budget": 5000 });
    for response in [
        a.append("c", json!(tau_turns(2))).await,
        a.propose("c", proposal).await,
        a.pin("c", 0, true).await,
    ] {
        let body = problem(response, StatusCode::TOO_MANY_REQUESTS).await;
        assert_eq!(body["type"], "urn:gatekeeper:problem:rate-limited");
    }
    assert_eq!(reader.full_snapshot("c").await, before, "nothing written");
}

#[tokio::test]
async fn finish_reason_and_end_marker_take_256_characters_and_refuse_257() {
    let app = spawn_app().await;
    three_turns(&app).await;
    let before = app.full_snapshot("c").await;
    // Characters, not bytes: 256 two-byte letters are 512 bytes and still fit.
    let (fits, over) = ("é".repeat(256), "é".repeat(257));
    for field in ["finish_reason", "end_marker"] {
        let mut proposal =
            json!({ "from": 0, "to": 2, "summary": "R0, R1 and R2.", "summary_budget": 5000 });
        proposal[field] = json!(fits);
        proposal["dry_run"] = json!(true);
        let verdict = expect(app.propose("c", proposal.clone()).await, StatusCode::OK).await;
        assert_eq!(verdict["dry_run"], true, "{field}: {verdict}");
        proposal[field] = json!(over);
        proposal["dry_run"] = json!(false);
        let refused = problem(
            app.propose("c", proposal).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(refused["field"], field, "{refused}");
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains("longer than 256 characters"),
            "{refused}"
        );
    }
    assert_eq!(app.full_snapshot("c").await, before, "nothing written");
}

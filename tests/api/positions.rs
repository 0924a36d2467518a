//! Commit positions without replicas: writes carry none (every read sees every write), and a
//! read's `Gatekeeper-Min-Position` is checked like any input. With a replica:
//! tests/faults/replicas.rs.

use crate::support::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn without_replicas_write_answers_carry_no_position() {
    let app = spawn_app().await;
    let turns = json!([turn("user", "Rebook ZFA04Y for the honeymoon.", 20, &[])]);
    let answer = app.append("c", turns).await;
    assert_eq!(answer.status(), StatusCode::CREATED);
    assert!(answer.headers().get("gatekeeper-position").is_none());
}

#[tokio::test]
async fn a_malformed_min_position_is_a_400_naming_the_header_and_a_good_one_is_answered() {
    let app = spawn_app().await;
    let turns = json!([turn("user", "Rebook ZFA04Y for the honeymoon.", 20, &[])]);
    expect(app.append("c", turns).await, StatusCode::CREATED).await;
    let url = app.url("/v1/conversations/c/reconstruct/0");
    for bad in ["zz", "0/", "1/2/3", "0/x", "-1/0"] {
        let answer = app
            .client
            .get(&url)
            .header("Gatekeeper-Min-Position", bad)
            .send()
            .await
            .unwrap();
        let body = problem(answer, StatusCode::BAD_REQUEST).await;
        assert_eq!(body["field"], "Gatekeeper-Min-Position", "{bad}");
    }
    let answer = app
        .client
        .get(&url)
        .header("Gatekeeper-Min-Position", "0/16B3D48")
        .send()
        .await
        .unwrap();
    let body = expect(answer, StatusCode::OK).await;
    assert_eq!(body["text"], "Rebook ZFA04Y for the honeymoon.");
}

#[tokio::test]
async fn without_replicas_a_read_the_store_cannot_answer_is_a_503_and_not_retried() {
    let app = spawn_app().await;
    let turns = json!([turn("user", "Rebook ZFA04Y for the honeymoon.", 20, &[])]);
    expect(app.append("c", turns).await, StatusCode::CREATED).await;
    let retries = "gatekeeper_replica_read_retries_total";
    let before = metric(&app.metrics_text().await, retries);
    // The pool closed under the service: every read it tries fails at once.
    app.store.close().await;
    let answer = app.reconstruct("c", 0).await;
    problem(answer, StatusCode::SERVICE_UNAVAILABLE).await;
    // Only a read a replica answered is tried again on the primary: here there is none.
    assert_eq!(metric(&app.metrics_text().await, retries), before);
}

//! `Idempotency-Key` on POSTs: one change per key, the stored answer for retries, 422 for reuse.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn post_with_key(app: &TestApp, path: &str, key: &str, body: &Value) -> reqwest::Response {
    let mut request = app
        .client
        .post(app.url(path))
        .header("Idempotency-Key", key)
        .json(body);
    if let Some(k) = &app.key {
        request = request.bearer_auth(k);
    }
    request.send().await.unwrap()
}

async fn seeded(app: &TestApp, conversation: &str) {
    let turns: Vec<Value> = tau_turns(4)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["id"] = json!(i);
            t["anchors"] = json!([format!("K{i}-{i}{i}{i}")]);
            t
        })
        .collect();
    expect(
        app.append(conversation, json!(turns)).await,
        StatusCode::CREATED,
    )
    .await;
}

fn proposal() -> Value {
    json!({ "from": 0, "to": 3, "summary": "K0-000, K1-111 and K3-333.", "summary_budget": 4096 })
}

#[tokio::test]
async fn a_retried_proposal_with_the_same_key_gets_the_stored_answer_and_creates_nothing() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/compactions";
    let first = post_with_key(&app, path, "retry-1", &proposal()).await;
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first = expect(first, StatusCode::CREATED).await;
    for _ in 0..3 {
        let again = post_with_key(&app, path, "retry-1", &proposal()).await;
        assert_eq!(
            again
                .headers()
                .get("idempotent-replayed")
                .and_then(|v| v.to_str().ok()),
            Some("true")
        );
        assert_eq!(expect(again, StatusCode::CREATED).await, first);
    }
    let list = expect(
        app.get("/v1/conversations/c/compactions").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(list["checkpoints"].as_array().unwrap().len(), 1);
    // The same body under a new key is a new request.
    let second = expect(
        post_with_key(&app, path, "retry-2", &proposal()).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(second["checkpoint_id"], 2);
}

#[tokio::test]
async fn the_same_key_with_a_different_body_is_422_and_changes_nothing() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/compactions";
    expect(
        post_with_key(&app, path, "k", &proposal()).await,
        StatusCode::CREATED,
    )
    .await;
    let before = app.snapshot("c").await;
    let mut other = proposal();
    other["summary"] = json!("K0-000 only.");
    let problem = expect(
        post_with_key(&app, path, "k", &other).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(problem["field"], "Idempotency-Key");
    // Used on another endpoint or conversation, it is another request too.
    expect(
        post_with_key(
            &app,
            "/v1/conversations/c/turns",
            "k",
            &json!({"turns": [{"role": "user", "content": "hi"}]}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(app.snapshot("c").await, before);
}

#[tokio::test]
async fn whitespace_and_member_order_do_not_make_a_different_request() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/compactions";
    let first = expect(
        post_with_key(&app, path, "k", &proposal()).await,
        StatusCode::CREATED,
    )
    .await;
    let reordered = r#"{ "summary_budget": 4096, "to": 3,
        "summary": "K0-000, K1-111 and K3-333.", "from": 0 }"#;
    let response = app
        .client
        .post(app.url(path))
        .header("Idempotency-Key", "k")
        .header("content-type", "application/json")
        .body(reordered)
        .send()
        .await
        .unwrap();
    assert_eq!(expect(response, StatusCode::CREATED).await, first);
}

#[tokio::test]
async fn concurrent_retries_with_one_key_make_exactly_one_checkpoint() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/compactions";
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let app = app.clone();
        // Spawned together, so the tries really race.
        set.spawn(async move { post_with_key(&app, path, "race", &proposal()).await });
    }
    let mut bodies = Vec::new();
    while let Some(answer) = set.join_next().await {
        bodies.push(expect(answer.unwrap(), StatusCode::CREATED).await);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "every try got the one answer"
    );
    let list = expect(
        app.get("/v1/conversations/c/compactions").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(list["checkpoints"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_id_less_append_retried_with_its_key_is_appended_once() {
    let app = spawn_app().await;
    let body = json!({ "turns": tau_turns(3) });
    let path = "/v1/conversations/c/turns";
    let first = expect(
        post_with_key(&app, path, "append-1", &body).await,
        StatusCode::CREATED,
    )
    .await;
    let again = post_with_key(&app, path, "append-1", &body).await;
    assert_eq!(
        again
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    assert_eq!(expect(again, StatusCode::CREATED).await, first);
    let conversation = expect(app.get("/v1/conversations/c").await, StatusCode::OK).await;
    assert_eq!(
        conversation["next_id"], 3,
        "without the key the retry would have appended three more"
    );
}

#[tokio::test]
async fn keys_belong_to_their_tenant() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("a:tenant-a-key-0123456789,b:tenant-b-key-0123456789".into()),
        ..Default::default()
    })
    .await;
    let (a, b) = (
        app.with_key("tenant-a-key-0123456789"),
        app.with_key("tenant-b-key-0123456789"),
    );
    seeded(&a, "c").await;
    seeded(&b, "c").await;
    let path = "/v1/conversations/c/compactions";
    let from_a = expect(
        post_with_key(&a, path, "shared", &proposal()).await,
        StatusCode::CREATED,
    )
    .await;
    let from_b = post_with_key(&b, path, "shared", &proposal()).await;
    assert!(
        from_b.headers().get("idempotent-replayed").is_none(),
        "B's first use of the key is B's own request"
    );
    let from_b = expect(from_b, StatusCode::CREATED).await;
    assert_eq!(
        (
            from_a["checkpoint_id"].clone(),
            from_b["checkpoint_id"].clone()
        ),
        (json!(1), json!(1))
    );
}

#[tokio::test]
async fn malformed_keys_are_400_and_change_nothing() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let before = app.snapshot("c").await;
    for key in ["", "has space", &"x".repeat(256), "tab\there"] {
        let response = app
            .client
            .post(app.url("/v1/conversations/c/compactions"))
            .header("Idempotency-Key", key)
            .json(&proposal())
            .send()
            .await
            .unwrap();
        let problem = expect(response, StatusCode::BAD_REQUEST).await;
        assert_eq!(problem["field"], "Idempotency-Key", "{key:?}");
    }
    assert_eq!(app.snapshot("c").await, before);
}

#[tokio::test]
async fn an_expired_key_is_forgotten() {
    let app = spawn_app_with(ServeConfig {
        idempotency_ttl_secs: 1,
        ..Default::default()
    })
    .await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/compactions";
    expect(
        post_with_key(&app, path, "k", &proposal()).await,
        StatusCode::CREATED,
    )
    .await;
    // Records are kept in whole seconds: two seconds later the key is past its time.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let again = post_with_key(&app, path, "k", &proposal()).await;
    assert!(again.headers().get("idempotent-replayed").is_none());
    let again = expect(again, StatusCode::CREATED).await;
    assert_eq!(again["checkpoint_id"], 2);
}

/// Whether the answer carries `Idempotent-Replayed: true`.
fn replayed(response: &reqwest::Response) -> bool {
    response.headers().get("idempotent-replayed").is_some()
}

#[tokio::test]
async fn a_key_whose_batch_was_all_replays_is_spent_and_refuses_another_body() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/turns";
    let again = json!({ "turns": [tau_turns(4)[0].clone()] });
    let mut replay = again.clone();
    replay["turns"][0]["id"] = json!(0);
    replay["turns"][0]["anchors"] = json!(["K0-000"]);
    let first = post_with_key(&app, path, "replays-1", &replay).await;
    assert!(!replayed(&first));
    let first = expect(first, StatusCode::OK).await;
    assert_eq!(first["appended"], 0);
    let retried = post_with_key(&app, path, "replays-1", &replay).await;
    assert!(replayed(&retried));
    assert_eq!(expect(retried, StatusCode::OK).await, first);
    // The same key with a batch that would append: refused, nothing written.
    let other = post_with_key(&app, path, "replays-1", &again).await;
    problem(other, StatusCode::UNPROCESSABLE_ENTITY).await;
    let (_, conversation) = app.snapshot("c").await;
    assert_eq!(conversation["next_id"], 4);
}

#[tokio::test]
async fn a_key_whose_proposal_was_rejected_replays_the_rejection_and_refuses_another_body() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/compactions";
    let rejected =
        json!({ "from": 0, "to": 3, "summary": "nothing of note", "summary_budget": 4096 });
    let first = post_with_key(&app, path, "rejected-1", &rejected).await;
    assert!(!replayed(&first));
    let first = problem(first, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(first["outcome"], "rejected");
    let retried = post_with_key(&app, path, "rejected-1", &rejected).await;
    assert!(replayed(&retried));
    assert_eq!(
        problem(retried, StatusCode::UNPROCESSABLE_ENTITY).await,
        first
    );
    // A proposal that would persist, under the spent key: refused, no checkpoint.
    let other = post_with_key(&app, path, "rejected-1", &proposal()).await;
    let other = problem(other, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(other["field"], "Idempotency-Key");
    let (_, conversation) = app.snapshot("c").await;
    assert_eq!(conversation["checkpoints"], 0);
}

#[tokio::test]
async fn a_key_whose_proposal_was_a_dry_run_is_spent_too() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let path = "/v1/conversations/c/compactions";
    let mut dry = proposal();
    dry["dry_run"] = json!(true);
    let first = expect(
        post_with_key(&app, path, "dry-1", &dry).await,
        StatusCode::OK,
    )
    .await;
    let retried = post_with_key(&app, path, "dry-1", &dry).await;
    assert!(replayed(&retried));
    assert_eq!(expect(retried, StatusCode::OK).await, first);
    let other = post_with_key(&app, path, "dry-1", &proposal()).await;
    let other = problem(other, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(other["field"], "Idempotency-Key");
    let (_, conversation) = app.snapshot("c").await;
    assert_eq!(conversation["checkpoints"], 0);
}

#[tokio::test]
async fn a_key_belongs_to_its_conversation_so_on_another_one_it_is_a_new_request() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    seeded(&app, "d").await;
    let on = |conversation: &str| format!("/v1/conversations/{conversation}/compactions");
    let first = post_with_key(&app, &on("c"), "k", &proposal()).await;
    let first = expect(first, StatusCode::CREATED).await;
    let other = post_with_key(&app, &on("d"), "k", &proposal()).await;
    assert!(other.headers().get("idempotent-replayed").is_none());
    let other = expect(other, StatusCode::CREATED).await;
    assert_eq!(
        (&first["conversation"], &other["conversation"]),
        (&json!("c"), &json!("d"))
    );
    // Each conversation's retry gets its own answer back.
    for (conversation, answer) in [("c", &first), ("d", &other)] {
        let again = post_with_key(&app, &on(conversation), "k", &proposal()).await;
        assert!(again.headers().get("idempotent-replayed").is_some());
        assert_eq!(&expect(again, StatusCode::CREATED).await, answer);
        let (_, snapshot) = app.snapshot(conversation).await;
        assert_eq!(snapshot["checkpoints"], 1, "{conversation}");
    }
}

/// The flow itself, past the HTTP layer's look-up: a retry whose first try committed between
/// that look-up and the flow's own read finds the latest checkpoint moved past its
/// `expected_checkpoint`, by that first try; it gets the first try's answer, not a 409.
#[tokio::test]
async fn a_retry_that_finds_its_first_try_moved_the_latest_checkpoint_gets_that_answer() {
    let app = spawn_app().await;
    seeded(&app, "c").await;
    let mut body = proposal();
    body["expected_checkpoint"] = Value::Null;
    let path = "/v1/conversations/c/compactions";
    let first = post_with_key(&app, path, "first-try", &body).await;
    let first = expect(first, StatusCode::CREATED).await;
    let (status, answer) = match &app.store {
        AnyStore::Postgres(store) => retried_in_the_flow(store.clone(), &body).await,
        AnyStore::Sqlite(store) => retried_in_the_flow(store.clone(), &body).await,
    };
    assert_eq!((status, answer), (201, first));
}

/// `body` proposed on "c" through the flow with the key "first-try": the stored answer it gets.
async fn retried_in_the_flow<S: gatekeeper::store::Store>(store: S, body: &Value) -> (u16, Value) {
    use gatekeeper::domain::{CompactionRequest, ConversationId, TenantId};
    use gatekeeper::service::Reply;
    let config = defaults();
    let state = gatekeeper::http::AppState::from_config(store, &config).unwrap();
    let body = serde_json::from_value(body.clone()).unwrap();
    let request =
        CompactionRequest::parse(body, config.decision.default_mode, config.limits()).unwrap();
    let claim = gatekeeper::store::IdempotencyClaim {
        key: "first-try".into(),
        fingerprint: [0; 32],
        now: i64::MAX,
        not_before: 0,
    };
    let (tenant, conversation) = (TenantId::parse("default"), ConversationId::parse("c"));
    let reply = (state.service)
        .propose(
            &tenant.unwrap(),
            &conversation.unwrap(),
            request,
            Some(&claim),
        )
        .await
        .unwrap();
    match reply {
        Reply::Stored(answer) => (answer.status, serde_json::from_slice(&answer.body).unwrap()),
        Reply::New(proposed) => panic!("decided again: {proposed:?}"),
    }
}

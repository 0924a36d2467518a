//! What a request may cost, whoever sends it (issue 13): label sets bounded, limits answered
//! before the work.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn requests_with_unknown_methods_add_no_metric_labels() {
    let app = spawn_app().await;
    // Warm the `other` series, then count the series.
    let warm = Method::from_bytes(b"WARMUP").unwrap();
    app.client
        .request(warm, app.url("/healthz"))
        .send()
        .await
        .unwrap();
    // Only `/healthz`'s series: other tests of this process add their own meanwhile.
    let series = |text: &str| {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains("route=\"/healthz\""))
            .count()
    };
    app.metrics_text().await; // the scrape's own series
    let before = app.metrics_text().await;
    for i in 0..300 {
        let method = Method::from_bytes(format!("X{i:04}YZ").as_bytes()).unwrap();
        let response = app
            .client
            .request(method, app.url("/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
    let after = app.metrics_text().await;
    assert!(!after.contains("X0001YZ"), "a method token became a label");
    assert!(
        series(&after) <= series(&before) + 4,
        "300 odd methods added {} series",
        series(&after) - series(&before)
    );
    assert!(metric(&after, "gatekeeper_http_requests_total{method=\"other\"}") >= 300.0);
}

#[tokio::test]
async fn readyz_answers_from_the_probe_without_a_connection_of_its_own() {
    let app = spawn_app().await;
    expect(app.get("/readyz").await, StatusCode::OK).await;
    // Every pooled connection busy (the test database's pool holds 5): a `/readyz` that queried
    // would wait for one, and a flood of them would keep tenants waiting too.
    let held: Vec<Box<dyn Send>> = match &app.store {
        AnyStore::Postgres(pg) => hold(pg.pool(), 5).await,
        AnyStore::Sqlite(lite) => hold(lite.pool(), 5).await,
    };
    assert_eq!(held.len(), 5);
    let answers = readyz_flood(&app).await;
    assert!(answers.iter().all(|s| *s == 200), "{answers:?}");
}

async fn hold<DB: sqlx::Database>(pool: &sqlx::Pool<DB>, n: usize) -> Vec<Box<dyn Send>> {
    let mut held: Vec<Box<dyn Send>> = Vec::new();
    for _ in 0..n {
        held.push(Box::new(pool.acquire().await.unwrap()));
    }
    held
}

/// 100 concurrent `/readyz`, each given 1 s (a query would wait 10 s for a connection).
async fn readyz_flood(app: &TestApp) -> Vec<u16> {
    let requests = (0..100).map(|_| {
        let (client, url) = (app.client.clone(), app.url("/readyz"));
        tokio::spawn(async move {
            let response = client
                .get(url)
                .timeout(std::time::Duration::from_secs(1))
                .send()
                .await;
            response.map_or(0, |r| r.status().as_u16())
        })
    });
    let mut statuses = Vec::new();
    for request in requests.collect::<Vec<_>>() {
        statuses.push(request.await.unwrap());
    }
    statuses
}

const KEYS: &str = "a:tenant-a-key-0123456789,b:tenant-b-key-0123456789";

/// Tenant a's append to "c" waiting for the conversation's lock, held from outside: one of a's
/// requests in flight for as long as the test likes.
async fn one_request_of_a_in_flight(app: &TestApp) -> (HeldLock, tokio::task::JoinHandle<u16>) {
    let a = app.with_key("tenant-a-key-0123456789");
    expect(
        a.append("c", json!(tau_turns(2))).await,
        StatusCode::CREATED,
    )
    .await;
    let lock = HeldLock::take(&app.store, "a", "c").await;
    let waiting =
        tokio::spawn(async move { a.append("c", json!(tau_turns(1))).await.status().as_u16() });
    lock.wait_for_waiters(1).await;
    (lock, waiting)
}

#[tokio::test]
async fn a_tenant_at_its_in_flight_limit_is_shed_with_503_and_other_tenants_are_served() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some(KEYS.into()),
        max_in_flight_per_tenant: 1,
        ..Default::default()
    })
    .await;
    let (lock, waiting) = one_request_of_a_in_flight(&app).await;
    let a = app.with_key("tenant-a-key-0123456789");
    let shed = a.get("/v1/conversations/c").await;
    assert_eq!(
        shed.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let shed = problem(shed, StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(shed["type"], "urn:gatekeeper:problem:overloaded");
    let detail = shed["detail"].as_str().unwrap();
    assert!(detail.contains("this tenant is at its"), "{shed}");
    let b = app.with_key("tenant-b-key-0123456789");
    // b is admitted (a read: on SQLite the held lock is the whole database's write lock).
    problem(b.get("/v1/conversations/d").await, StatusCode::NOT_FOUND).await;
    lock.release().await;
    assert_eq!(
        waiting.await.unwrap(),
        201,
        "the admitted request completes"
    );
    let (status, conversation) = a.snapshot("c").await;
    assert_eq!(
        (status, &conversation["next_id"]),
        (StatusCode::OK, &json!(3))
    );
    let metrics = app.metrics_text().await;
    assert!(metric(&metrics, "gatekeeper_requests_shed_total{scope=\"tenant\"}") >= 1.0);
}

#[tokio::test]
async fn the_service_at_its_overall_in_flight_limit_sheds_every_tenant() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some(KEYS.into()),
        max_in_flight: 1,
        ..Default::default()
    })
    .await;
    let (lock, waiting) = one_request_of_a_in_flight(&app).await;
    let b = app.with_key("tenant-b-key-0123456789");
    let shed = problem(
        b.get("/v1/conversations/d").await,
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
    assert_eq!(shed["type"], "urn:gatekeeper:problem:overloaded");
    // Probes and scrapes are not requests of a tenant: they stay answered.
    expect(app.get("/healthz").await, StatusCode::OK).await;
    expect(app.get("/readyz").await, StatusCode::OK).await;
    lock.release().await;
    assert_eq!(waiting.await.unwrap(), 201);
    problem(b.get("/v1/conversations/d").await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn a_body_of_millions_of_tiny_values_is_refused_while_it_is_parsed() {
    let app = spawn_app().await;
    // 4 MB of `0,`: 2 million values, each 32 bytes or more once parsed into a tree.
    let body = format!("{{\"turns\": [{}0]}}", "0,".repeat(2_000_000));
    let refused = app
        .post_raw("/v1/conversations/c/turns", "application/json", body)
        .await;
    let refused = problem(refused, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(refused["field"], "body", "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("more JSON values"),
        "{refused}"
    );
    let (status, _) = app.snapshot("c").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was written");
}

#[tokio::test]
async fn the_value_budget_follows_the_configured_limits_and_admits_every_valid_batch() {
    let app = spawn_app_with(ServeConfig {
        max_batch_turns: 3,
        max_anchors_per_turn: 2,
        decision: gatekeeper::config::DecisionConfig {
            anchor_count: 2,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    // The largest valid batch: 3 turns with every member, 2 anchors each.
    let turns: Vec<_> = tau_turns(3)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["id"] = json!(i);
            t["tokens"] = json!(10);
            t["anchors"] = json!(["a1", "a2"]);
            t["external_id"] = json!(format!("x{i}"));
            t["pinned"] = json!(false);
            t
        })
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    // 3 × (16 + 2) + 1,024 values at most: a member of 2,000 numbers is more.
    let over = json!({ "turns": [tau_turns(1)[0]], "padding": vec![0; 2_000] });
    let over = problem(
        app.post("/v1/conversations/c/turns", &over).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(over["field"], "body", "{over}");
}

#[tokio::test]
async fn a_summary_over_the_configured_size_is_refused_before_it_is_read() {
    let app = spawn_app_with(ServeConfig {
        max_summary_bytes: 1_000,
        ..Default::default()
    })
    .await;
    expect(
        app.append("c", json!(tau_turns(3))).await,
        StatusCode::CREATED,
    )
    .await;
    let long = json!({ "from": 0, "to": 2, "summary": "x ".repeat(501), "summary_budget": 100000 });
    let refused = problem(
        app.propose("c", long).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(refused["field"], "summary", "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("1002 bytes"),
        "{refused}"
    );
    let fits = json!({ "from": 0, "to": 2, "summary": "x ".repeat(500), "summary_budget": 100000, "dry_run": true });
    // Within the size, it is decided (and rejected: it holds no turn's facts).
    let decided = problem(
        app.propose("c", fits).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(decided["type"], "urn:gatekeeper:problem:proposal-rejected");
}

#[tokio::test]
async fn an_overlong_anchor_is_refused_naming_it_however_it_normalizes() {
    let app = spawn_app().await;
    // NFKC expands `ﷺ` (3 bytes) to 18 Arabic letters: 300 of them are 300 characters.
    let anchor = "\u{FDFA}".repeat(300);
    let turn = json!({ "role": "user", "content": "hello", "anchors": [anchor] });
    let refused = problem(
        app.append("c", json!([turn])).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(refused["field"], "turns[0].anchors[0]", "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("longer than 256"),
        "{refused}"
    );
}

/// Three turns of "c" with given anchors, and `n` checkpoints of the same range (each persisted
/// proposal is one); returns the proposal.
pub(crate) async fn checkpoints_of_one_range(app: &TestApp, n: usize) -> serde_json::Value {
    let turns: Vec<_> = (0..3)
        .map(|i| {
            turn(
                "user",
                &format!("turn {i}"),
                10,
                &[&format!("K{i}-{i}{i}{i}")],
            )
        })
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let body =
        json!({ "from": 0, "to": 2, "summary": "K0-000, K1-111, K2-222.", "summary_budget": 1000 });
    for _ in 0..n {
        expect(app.propose("c", body.clone()).await, StatusCode::CREATED).await;
    }
    body
}

#[tokio::test]
async fn a_conversation_at_its_checkpoint_limit_refuses_new_checkpoints_with_409() {
    let app = spawn_app_with(ServeConfig {
        max_checkpoints_per_conversation: 2,
        ..Default::default()
    })
    .await;
    let body = checkpoints_of_one_range(&app, 2).await;
    let refused = problem(app.propose("c", body.clone()).await, StatusCode::CONFLICT).await;
    assert_eq!(refused["max_checkpoints"], 2, "{refused}");
    let mut dry = body;
    dry["dry_run"] = json!(true);
    expect(app.propose("c", dry).await, StatusCode::OK).await;
    let (_, conversation) = app.snapshot("c").await;
    assert_eq!(conversation["checkpoints"], 2);
}

#[tokio::test]
async fn checkpoints_are_listed_a_page_at_a_time_newest_first() {
    let app = spawn_app().await;
    checkpoints_of_one_range(&app, 5).await;
    let mut seen = Vec::new();
    let mut path = "/v1/conversations/c/compactions?limit=2".to_owned();
    for _ in 0..5 {
        let page = expect(app.get(&path).await, StatusCode::OK).await;
        let ids: Vec<i64> = page["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["checkpoint_id"].as_i64().unwrap())
            .collect();
        assert!(ids.len() <= 2, "{page}");
        seen.extend(ids);
        match page["next_cursor"].as_i64() {
            Some(cursor) => {
                path = format!("/v1/conversations/c/compactions?limit=2&cursor={cursor}")
            }
            None => break,
        }
    }
    assert_eq!(seen, [5, 4, 3, 2, 1]);
    let all = expect(
        app.get("/v1/conversations/c/compactions").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(all["checkpoints"].as_array().unwrap().len(), 5);
    assert_eq!(all["next_cursor"], serde_json::Value::Null);
    // A page that ends exactly at the oldest checkpoint says there is no more.
    let exact = "/v1/conversations/c/compactions?limit=5";
    let exact = expect(app.get(exact).await, StatusCode::OK).await;
    assert_eq!(exact["checkpoints"].as_array().unwrap().len(), 5);
    assert_eq!(exact["next_cursor"], serde_json::Value::Null, "{exact}");
    for bad in ["limit=0", "limit=1001", "limit=x", "cursor=y"] {
        let path = format!("/v1/conversations/c/compactions?{bad}");
        problem(app.get(&path).await, StatusCode::BAD_REQUEST).await;
    }
}

#[tokio::test]
async fn anchors_built_to_make_the_matcher_walk_are_decided_in_linear_work() {
    let app = spawn_app().await;
    let (turns, summary) = matcher_worst_case();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let verdict = problem(
        app.propose(
            "c",
            json!({ "from": 0, "to": 9, "summary": summary, "summary_budget": 1_000_000 }),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(verdict["outcome"], "rejected", "{verdict}");
    let turns = verdict["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 10);
    assert!(
        turns.iter().all(|t| t["reason"] == "anchor_missing"
            && t["missing_anchors"].as_array().unwrap().len() == 64),
        "{verdict}"
    );
}

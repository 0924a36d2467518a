//! Bearer keys per tenant: 401 without a valid key, another tenant's data is 404.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

const KEY_A: &str = "tenant-a-key-0123456789";
const KEY_B: &str = "tenant-b-key-9876543210";

async fn two_tenants() -> TestApp {
    spawn_app_with(ServeConfig {
        api_keys: Some("tenantA:tenant-a-key-0123456789,tenantB:tenant-b-key-9876543210".into()),
        ..Default::default()
    })
    .await
}

/// Tenant A's conversation "shared" with a checkpoint; returns its turns.
async fn tenant_a_data(a: &TestApp) -> Vec<Value> {
    let turns: Vec<Value> = tau_turns(4)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("AUTH-{i}")]);
            t
        })
        .collect();
    expect(a.append("shared", json!(turns)).await, StatusCode::CREATED).await;
    let body = json!({ "from": 0, "to": 2, "summary": "AUTH-0, AUTH-1 and AUTH-2.", "summary_budget": 1000 });
    expect(a.propose("shared", body).await, StatusCode::CREATED).await;
    turns
}

const READS: [&str; 7] = [
    "/v1/conversations/shared",
    "/v1/conversations/shared/turns/0",
    "/v1/conversations/shared/reconstruct/0",
    "/v1/conversations/shared/context",
    "/v1/conversations/shared/compactions",
    "/v1/conversations/shared/compactions/1",
    "/v1/conversations/shared/compaction-plan?summary_budget=100&from=0",
];

#[tokio::test]
async fn without_a_key_every_api_route_is_401_problem_json_with_www_authenticate() {
    let app = two_tenants().await;
    let a = app.with_key(KEY_A);
    tenant_a_data(&a).await;
    let before = a.snapshot("shared").await;

    for path in READS {
        let response = app.get(path).await;
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer"),
            "{path}"
        );
        let body = problem(response, StatusCode::UNAUTHORIZED).await;
        assert!(
            !body.to_string().contains("AUTH-"),
            "{path}: nothing of the data leaks"
        );
    }
    let writes = [
        (
            "/v1/conversations/shared/turns",
            json!({ "turns": tau_turns(1) }),
        ),
        (
            "/v1/conversations/shared/compactions",
            json!({ "from": 0, "to": 3, "summary": "AUTH-3.", "summary_budget": 1000 }),
        ),
        (
            "/v1/conversations/fresh/turns",
            json!({ "turns": tau_turns(1) }),
        ),
    ];
    for (path, body) in &writes {
        let response = app.post(path, body).await;
        assert!(
            response.headers().contains_key("www-authenticate"),
            "{path}"
        );
        problem(response, StatusCode::UNAUTHORIZED).await;
    }
    // Authentication comes first: a bad body or a bad id tells an anonymous caller nothing.
    let response = app
        .post_raw(
            "/v1/conversations/shared/turns",
            "application/json",
            b"{not json".to_vec(),
        )
        .await;
    problem(response, StatusCode::UNAUTHORIZED).await;
    let response = app
        .post_raw(
            "/v1/conversations/shared/turns",
            "text/plain",
            b"hello".to_vec(),
        )
        .await;
    problem(response, StatusCode::UNAUTHORIZED).await;
    problem(
        app.get("/v1/conversations/a%20b").await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    problem(
        app.get("/v1/conversations/shared/turns/abc").await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    assert_eq!(a.snapshot("shared").await, before);
    problem(a.conversation("fresh").await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn a_malformed_or_unknown_authorization_header_is_401() {
    let app = two_tenants().await;
    let a = app.with_key(KEY_A);
    tenant_a_data(&a).await;
    let headers = [
        "Basic xyz".to_owned(),
        format!("Basic {KEY_A}"),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
        "Bearer wrong-key-but-long-enough".to_owned(),
        format!("Bearer {KEY_A}x"),
        format!("Bearer {}", &KEY_A[..KEY_A.len() - 1]),
        format!("Token {KEY_A}"),
        KEY_A.to_owned(),
        "tenantA:tenant-a-key-0123456789".to_owned(),
    ];
    for header in &headers {
        for path in [
            "/v1/conversations/shared",
            "/v1/conversations/shared/reconstruct/1",
        ] {
            let response = app
                .client
                .get(app.url(path))
                .header("authorization", header)
                .send()
                .await
                .unwrap();
            assert!(
                response.headers().contains_key("www-authenticate"),
                "{header:?}"
            );
            problem(response, StatusCode::UNAUTHORIZED).await;
        }
        let response = app
            .client
            .post(app.url("/v1/conversations/shared/turns"))
            .header("authorization", header)
            .json(&json!({ "turns": tau_turns(1) }))
            .send()
            .await
            .unwrap();
        problem(response, StatusCode::UNAUTHORIZED).await;
    }
    assert_eq!(
        expect(a.conversation("shared").await, StatusCode::OK).await["next_id"],
        4
    );
    // Each tenant's own key works.
    expect(a.conversation("shared").await, StatusCode::OK).await;
    problem(
        app.with_key(KEY_B).conversation("shared").await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

#[tokio::test]
async fn tenant_b_cannot_see_or_touch_tenant_a_conversation() {
    let app = two_tenants().await;
    let a = app.with_key(KEY_A);
    let b = app.with_key(KEY_B);
    let turns = tenant_a_data(&a).await;
    let before = a.snapshot("shared").await;

    for path in READS {
        let body = problem(b.get(path).await, StatusCode::NOT_FOUND).await;
        assert!(!body.to_string().contains("AUTH-"), "{path}: {body}");
        expect(a.get(path).await, StatusCode::OK).await;
    }
    for turn in [1, 3] {
        problem(b.reconstruct("shared", turn).await, StatusCode::NOT_FOUND).await;
    }
    // Proposing on A's conversation is as if it did not exist.
    let body = json!({ "from": 0, "to": 3, "summary": "AUTH-3.", "summary_budget": 1000 });
    problem(
        b.propose("shared", body.clone()).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(a.snapshot("shared").await, before);

    // B appending under the same name gets a conversation of its own, numbered from 0.
    let b_turns = tau_turns(7)[5..].to_vec();
    let appended = expect(
        b.append("shared", json!(b_turns)).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(appended["turns"][0]["id"], 0);
    assert_eq!(appended["next_id"], 2);
    let mine = expect(b.conversation("shared").await, StatusCode::OK).await;
    assert_eq!(
        (mine["next_id"].as_i64(), mine["checkpoints"].as_i64()),
        (Some(2), Some(0))
    );
    assert_eq!(
        expect(b.turn("shared", 0).await, StatusCode::OK).await["content"],
        b_turns[0]["content"]
    );
    assert_eq!(
        expect(b.reconstruct("shared", 0).await, StatusCode::OK).await["source"],
        "live"
    );
    problem(b.turn("shared", 2).await, StatusCode::NOT_FOUND).await;
    problem(b.checkpoint("shared", 1).await, StatusCode::NOT_FOUND).await;
    assert_eq!(
        expect(b.checkpoints("shared").await, StatusCode::OK).await["checkpoints"],
        json!([])
    );
    // A's data is unchanged and still A's.
    assert_eq!(a.snapshot("shared").await, before);
    assert_eq!(
        expect(a.turn("shared", 0).await, StatusCode::OK).await["content"],
        turns[0]["content"]
    );
    assert_eq!(
        expect(a.reconstruct("shared", 0).await, StatusCode::OK).await["source"],
        "summary"
    );
    // Replaying A's turn 0 as B is not a replay against A's log.
    let mut replay = turns[0].clone();
    replay["id"] = json!(0);
    problem(
        b.append("shared", json!([replay])).await,
        StatusCode::CONFLICT,
    )
    .await;
}

#[tokio::test]
async fn health_readiness_and_metrics_need_no_key() {
    let app = two_tenants().await;
    for path in ["/healthz", "/readyz"] {
        let response = app.get(path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let response = app.get("/metrics").await;
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = response.text().await.unwrap();
    assert!(text.contains("gatekeeper_http_requests_total"), "{text}");
    // Unknown routes are 404 with or without a key.
    problem(app.get("/nope").await, StatusCode::NOT_FOUND).await;
}

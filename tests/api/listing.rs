//! `GET /v1/conversations`: the tenant's conversations in name order, a page at a time.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::json;

fn names(page: &serde_json::Value) -> Vec<&str> {
    (page["conversations"].as_array().unwrap().iter())
        .map(|c| c["conversation"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn conversations_are_listed_by_name_a_page_at_a_time_with_their_sizes() {
    let app = spawn_app().await;
    for (name, n) in [("list-b", 3), ("other", 1), ("list-a", 2), ("list-c", 1)] {
        expect(
            app.append(name, json!(tau_turns(n))).await,
            StatusCode::CREATED,
        )
        .await;
    }
    let all = expect(app.get("/v1/conversations").await, StatusCode::OK).await;
    assert_eq!(names(&all), ["list-a", "list-b", "list-c", "other"]);
    assert!(all.get("next_cursor").is_none(), "one page");
    let b = &all["conversations"][1];
    assert_eq!(b["turns"], 3);
    assert_eq!(b["latest_checkpoint_id"], serde_json::Value::Null);
    assert!(
        b["last_append_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .is_ok()
    );

    let first = expect(
        app.get("/v1/conversations?prefix=list-&limit=2").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(names(&first), ["list-a", "list-b"]);
    assert_eq!(first["next_cursor"], "list-b");
    let second = expect(
        app.get("/v1/conversations?prefix=list-&limit=2&cursor=list-b")
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(names(&second), ["list-c"]);
    assert!(second.get("next_cursor").is_none());
}

#[tokio::test]
async fn a_tenant_lists_only_its_own_conversations() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("tenantA:tenant-a-key-0123456789,tenantB:tenant-b-key-9876543210".into()),
        ..Default::default()
    })
    .await;
    let a = app.with_key("tenant-a-key-0123456789");
    let b = app.with_key("tenant-b-key-9876543210");
    expect(
        a.append("mine", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    let seen = expect(b.get("/v1/conversations").await, StatusCode::OK).await;
    assert_eq!(names(&seen), Vec::<&str>::new());
    problem(app.get("/v1/conversations").await, StatusCode::UNAUTHORIZED).await;
}

#[tokio::test]
async fn a_bad_page_size_prefix_or_cursor_is_400() {
    let app = spawn_app().await;
    for query in [
        "limit=0",
        "limit=1001",
        "limit=x",
        "prefix=a%2Fb",
        "cursor=a%20b",
        "unknown=1",
    ] {
        problem(
            app.get(&format!("/v1/conversations?{query}")).await,
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
}

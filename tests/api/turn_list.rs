//! `GET .../turns`: the log's turns without their content (id, role, tokens, pinned), a page at
//! a time: what the coverage map draws to scale.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn ids(page: &Value) -> Vec<i64> {
    (page["turns"].as_array().unwrap().iter())
        .map(|t| t["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn the_turn_list_gives_each_turns_role_tokens_and_pin_as_the_log_holds_them() {
    let app = spawn_app().await;
    let mut turns = tau_turns(7);
    turns[3]["pinned"] = json!(true);
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let page = expect(app.get("/v1/conversations/c/turns").await, StatusCode::OK).await;
    assert_eq!(page["conversation"], "c");
    assert_eq!(ids(&page), (0..7).collect::<Vec<_>>());
    assert!(page.get("next_from").is_none(), "one page holds the log");
    for (id, listed) in page["turns"].as_array().unwrap().iter().enumerate() {
        let stored = expect(app.turn("c", id as i64).await, StatusCode::OK).await;
        let expected = json!({
            "id": id, "role": stored["role"], "tokens": stored["tokens"], "pinned": stored["pinned"],
        });
        assert_eq!(listed, &expected, "turn {id}: no content, nothing else");
    }
    assert_eq!(page["turns"][3]["pinned"], true);
    assert_eq!(page["turns"][2]["pinned"], false);
    // The sizes add up to what the conversation says it holds.
    let total: i64 = (page["turns"].as_array().unwrap().iter())
        .map(|t| t["tokens"].as_i64().unwrap())
        .sum();
    let conversation = expect(app.get("/v1/conversations/c").await, StatusCode::OK).await;
    assert_eq!(conversation["total_tokens"], total);

    // A pin set later shows.
    let unpin = app
        .patch("/v1/conversations/c/turns/3", &json!({ "pinned": false }))
        .await;
    expect(unpin, StatusCode::OK).await;
    let page = expect(app.get("/v1/conversations/c/turns").await, StatusCode::OK).await;
    assert_eq!(page["turns"][3]["pinned"], false);
}

#[tokio::test]
async fn the_turn_list_pages_by_from_until_the_end_of_the_log() {
    let app = spawn_app().await;
    expect(
        app.append("c", json!(tau_turns(7))).await,
        StatusCode::CREATED,
    )
    .await;
    let mut seen = Vec::new();
    let mut from = Some(0);
    let mut pages = 0;
    while let Some(f) = from {
        let path = format!("/v1/conversations/c/turns?from={f}&limit=3");
        let page = expect(app.get(&path).await, StatusCode::OK).await;
        assert!(ids(&page).len() <= 3);
        seen.extend(ids(&page));
        from = page.get("next_from").map(|n| n.as_i64().unwrap());
        pages += 1;
        assert!(pages <= 3, "no end to the pages: {page}");
    }
    assert_eq!(seen, (0..7).collect::<Vec<_>>());
    assert_eq!(pages, 3, "3 + 3 + 1");

    // A page that ends exactly at the log's end says there is no more.
    let page = expect(
        app.get("/v1/conversations/c/turns?from=4&limit=3").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(ids(&page), [4, 5, 6]);
    assert!(page.get("next_from").is_none());
    // Past the end, an empty page: the conversation exists.
    let page = expect(
        app.get("/v1/conversations/c/turns?from=7").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(ids(&page), Vec::<i64>::new());
    assert!(page.get("next_from").is_none());
}

#[tokio::test]
async fn the_turn_list_of_a_conversation_the_tenant_does_not_hold_is_404() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("tenantA:tenant-a-key-0123456789,tenantB:tenant-b-key-9876543210".into()),
        ..Default::default()
    })
    .await;
    let a = app.with_key("tenant-a-key-0123456789");
    let b = app.with_key("tenant-b-key-9876543210");
    expect(
        a.append("c", json!(tau_turns(2))).await,
        StatusCode::CREATED,
    )
    .await;
    let listed = expect(a.get("/v1/conversations/c/turns").await, StatusCode::OK).await;
    assert_eq!(ids(&listed), [0, 1]);
    for path in [
        "/v1/conversations/c/turns",
        "/v1/conversations/c/turns?from=5",
    ] {
        let refused = problem(b.get(path).await, StatusCode::NOT_FOUND).await;
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains("does not exist")
        );
    }
    problem(
        a.get("/v1/conversations/absent/turns").await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

#[tokio::test]
async fn a_bad_from_or_page_size_is_400_naming_it() {
    let app = spawn_app().await;
    expect(
        app.append("c", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    for (query, field, says) in [
        ("from=-1", "from", "must not be negative"),
        ("limit=0", "limit", "between 1 and 10000"),
        ("limit=10001", "limit", "between 1 and 10000"),
        ("limit=-3", "limit", "between 1 and 10000"),
    ] {
        let path = format!("/v1/conversations/c/turns?{query}");
        let refused = problem(app.get(&path).await, StatusCode::BAD_REQUEST).await;
        assert_eq!(refused["field"], field, "{query}");
        assert!(
            refused["detail"].as_str().unwrap().contains(says),
            "{query}"
        );
    }
    for query in ["from=x", "limit=1.5", "to=3"] {
        let path = format!("/v1/conversations/c/turns?{query}");
        problem(app.get(&path).await, StatusCode::BAD_REQUEST).await;
    }
}

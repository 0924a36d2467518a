//! Client errors: each a clear 4xx in problem+json, and nothing written.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::json;

async fn seeded(app: &TestApp) -> (StatusCode, serde_json::Value) {
    let turns: Vec<serde_json::Value> = tau_turns(3)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("ERR-{i}")]);
            t
        })
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    app.snapshot("c").await
}

/// Bodies that are not JSON, each built around a body the endpoint would otherwise accept
/// (`{string}` marks where a string value goes).
fn malformed(valid: &str) -> Vec<Vec<u8>> {
    let filled = valid.replace("{string}", "\"fine\"");
    let mut bodies: Vec<Vec<u8>> = vec![
        filled[..filled.len() / 2].into(),
        format!("{filled}}}").into(),
        format!("{filled} x").into(),
        format!("{},}}", &filled[..filled.len() - 1]).into(),
        b"{turns: [], from: 0}".to_vec(),
        b"".to_vec(),
        filled.replacen(':', " ", 1).into(),
        valid
            .replace("{string}", "\"lone \\ud800 surrogate\"")
            .into(),
        valid.replace("{string}", "\"bad \\x escape\"").into(),
        valid.replace("{string}", "\"raw \n newline\"").into(),
    ];
    let mut invalid_utf8 = valid.replace("{string}", "\"\u{1}\"").into_bytes();
    let at = invalid_utf8.iter().position(|b| *b == 1).unwrap();
    invalid_utf8.splice(at..=at, [0xff, 0xfe]);
    bodies.push(invalid_utf8);
    bodies
}

#[tokio::test]
async fn malformed_json_is_400_problem_json_and_writes_nothing() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    let turns = r#"{"turns": [{"role": "user", "content": {string}}]}"#;
    let proposal = r#"{"from": 0, "to": 2, "summary": {string}, "summary_budget": 1000}"#;
    for (path, valid) in [
        ("/v1/conversations/c/turns", turns),
        ("/v1/conversations/new/turns", turns),
        ("/v1/conversations/c/compactions", proposal),
    ] {
        for body in malformed(valid) {
            let shown = String::from_utf8_lossy(&body).into_owned();
            let response = app.post_raw(path, "application/json", body).await;
            let status = response.status();
            let text = response.text().await.unwrap();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {shown:?}: {text}");
            let problem_body: serde_json::Value = serde_json::from_str(&text).unwrap();
            check_problem(&problem_body, StatusCode::BAD_REQUEST);
        }
        // The valid body itself is accepted.
        let ok = valid.replace("{string}", "\"REF fine.\"");
        let status = app
            .post_raw(path, "application/json", ok.into_bytes())
            .await
            .status();
        assert!(
            status.is_success() || status == StatusCode::UNPROCESSABLE_ENTITY,
            "{path}: {status}"
        );
    }
    let after = app.snapshot("c").await;
    assert_eq!(
        after.1["next_id"].as_i64(),
        before.1["next_id"].as_i64().map(|n| n + 1),
        "only the valid append was written"
    );
    assert_eq!(after.1["checkpoints"], before.1["checkpoints"]);
}

#[tokio::test]
async fn a_wrong_content_type_is_415_and_writes_nothing() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    let body = serde_json::to_vec(&json!({ "turns": tau_turns(1) })).unwrap();
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
        "multipart/form-data; boundary=x",
    ] {
        for path in [
            "/v1/conversations/c/turns",
            "/v1/conversations/c/compactions",
        ] {
            problem(
                app.post_raw(path, content_type, body.clone()).await,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            )
            .await;
        }
    }
    // No content type at all.
    let response = app
        .client
        .post(app.url("/v1/conversations/c/turns"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    problem(response, StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
    assert_eq!(app.snapshot("c").await, before);
    // A JSON content type with parameters is fine.
    let ok = app
        .post_raw(
            "/v1/conversations/c/turns",
            "application/json; charset=utf-8",
            body,
        )
        .await;
    expect(ok, StatusCode::CREATED).await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_and_writes_nothing() {
    let app = spawn_app_with(ServeConfig {
        max_body_bytes: 1024,
        ..Default::default()
    })
    .await;
    let short = json!([
        { "role": "user", "content": "Cancel reservation ZFA04Y, please.", "anchors": ["ERR-0"] },
        { "role": "assistant", "content": "Done.", "anchors": ["ERR-1"] },
        { "role": "user", "content": "Thanks!", "anchors": ["ERR-2"] },
    ]);
    expect(app.append("c", short).await, StatusCode::CREATED).await;
    let before = app.snapshot("c").await;
    let big = tau_tool_output().repeat(2);
    assert!(big.len() > 1024);
    let turns = json!({ "turns": [{ "role": "tool", "content": big }] });
    let body = problem(
        app.post("/v1/conversations/c/turns", &turns).await,
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
    assert!(!body["detail"].as_str().unwrap().is_empty());
    let proposal = json!({ "from": 0, "to": 2, "summary": big, "summary_budget": 1000 });
    problem(
        app.propose("c", proposal).await,
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
    problem(
        app.post("/v1/conversations/new/turns", &turns).await,
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
    assert_eq!(app.snapshot("c").await, before);
    problem(app.conversation("new").await, StatusCode::NOT_FOUND).await;
    assert_eq!(
        expect(app.checkpoints("c").await, StatusCode::OK).await["checkpoints"],
        json!([])
    );
    // A body under the limit still goes through.
    expect(
        app.append("c", json!([{ "role": "user", "content": "short" }]))
            .await,
        StatusCode::CREATED,
    )
    .await;
}

#[tokio::test]
async fn a_bad_conversation_id_in_the_path_is_400_naming_the_field() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    let too_long = "x".repeat(129);
    let bad = [
        "a%20b",
        "%2F",
        "a%2Fb",
        "%C3%A9t%C3%A9",
        "%E4%BC%9A%E8%AF%9D",
        "a%00b",
        too_long.as_str(),
        "a%3Bb",
        "c%20",
    ];
    for id in bad {
        for path in [
            format!("/v1/conversations/{id}"),
            format!("/v1/conversations/{id}/turns/0"),
            format!("/v1/conversations/{id}/reconstruct/0"),
            format!("/v1/conversations/{id}/context"),
            format!("/v1/conversations/{id}/compactions"),
            format!("/v1/conversations/{id}/compaction-plan?summary_budget=10"),
        ] {
            let raw = app.raw("GET", &path, None, b"").await;
            let body = raw.problem(StatusCode::BAD_REQUEST);
            assert_eq!(body["field"], "conversation", "{path}: {body}");
        }
        let turns = serde_json::to_vec(&json!({ "turns": tau_turns(1) })).unwrap();
        let raw = app
            .raw(
                "POST",
                &format!("/v1/conversations/{id}/turns"),
                Some("application/json"),
                &turns,
            )
            .await;
        assert_eq!(
            raw.problem(StatusCode::BAD_REQUEST)["field"],
            "conversation",
            "{id}"
        );
        let proposal = serde_json::to_vec(
            &json!({ "from": 0, "to": 0, "summary": "x.", "summary_budget": 10 }),
        )
        .unwrap();
        let raw = app
            .raw(
                "POST",
                &format!("/v1/conversations/{id}/compactions"),
                Some("application/json"),
                &proposal,
            )
            .await;
        assert_eq!(
            raw.problem(StatusCode::BAD_REQUEST)["field"],
            "conversation",
            "{id}"
        );
    }
    assert_eq!(app.snapshot("c").await, before);
    // The longest valid id and every character of the alphabet are fine.
    let longest = "y".repeat(128);
    for id in [longest.as_str(), "A.b_c:d-e", "airline-12-0"] {
        expect(
            app.append(id, json!(tau_turns(1))).await,
            StatusCode::CREATED,
        )
        .await;
        expect(app.conversation(id).await, StatusCode::OK).await;
    }
}

#[tokio::test]
async fn dot_segments_are_not_conversation_ids() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    // Sent over a raw socket: a client library would resolve `..` before sending it.
    for id in ["..", ".", "%2E%2E", "%2e."] {
        let raw = app
            .raw("GET", &format!("/v1/conversations/{id}"), None, b"")
            .await;
        assert_eq!(
            raw.problem(StatusCode::BAD_REQUEST)["field"],
            "conversation",
            "{id}"
        );
        let turns = serde_json::to_vec(&json!({ "turns": tau_turns(1) })).unwrap();
        let raw = app
            .raw(
                "POST",
                &format!("/v1/conversations/{id}/turns"),
                Some("application/json"),
                &turns,
            )
            .await;
        assert_eq!(
            raw.status, 400,
            "appending to {id:?} must be refused: {}",
            raw.body
        );
        raw.problem(StatusCode::BAD_REQUEST);
    }
    assert_eq!(app.snapshot("c").await, before);
}

#[tokio::test]
async fn a_non_numeric_turn_or_checkpoint_id_is_400() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    for id in [
        "abc",
        "1.5",
        "1e3",
        "0x1",
        "%20",
        "99999999999999999999",
        "-",
    ] {
        for path in [
            format!("/v1/conversations/c/turns/{id}"),
            format!("/v1/conversations/c/reconstruct/{id}"),
            format!("/v1/conversations/c/compactions/{id}"),
        ] {
            let body = app
                .raw("GET", &path, None, b"")
                .await
                .problem(StatusCode::BAD_REQUEST);
            assert!(body["field"].is_string(), "{path}: {body}");
        }
    }
    assert_eq!(app.snapshot("c").await, before);
}

#[tokio::test]
async fn an_unknown_route_is_404_problem_json() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    for path in [
        "/",
        "/v1",
        "/v2/conversations/c",
        "/v1/conversation",
        "/v1/conversations/c/turn/0",
        "/v1/conversations/c/turns/0/extra",
        "/v1/conversations/c/unknown",
        "/metrics/extra",
    ] {
        problem(app.get(path).await, StatusCode::NOT_FOUND).await;
    }
    problem(
        app.post(
            "/v1/conversations/c/turn",
            &json!({ "turns": tau_turns(1) }),
        )
        .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(app.snapshot("c").await, before);
}

#[tokio::test]
async fn a_wrong_method_is_405_problem_json() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    let cases = [
        ("PUT", "/v1/conversations/c"),
        ("PUT", "/v1/conversations/c/turns"),
        ("DELETE", "/v1/conversations"),
        ("POST", "/v1/conversations/c/export"),
        ("GET", "/v1/conversations/c/import"),
        ("PATCH", "/v1/conversations/c/turns"),
        ("POST", "/v1/conversations/c/reconstruct/0"),
        ("DELETE", "/v1/conversations/c/compactions/1"),
    ];
    for (method, path) in cases {
        let raw = app.raw(method, path, Some("application/json"), b"{}").await;
        assert_eq!(raw.status, 405, "{method} {path}");
        raw.problem(StatusCode::METHOD_NOT_ALLOWED);
    }
    assert_eq!(app.snapshot("c").await, before);
}

#[tokio::test]
async fn a_large_body_is_judged_like_a_small_one() {
    let app = spawn_app().await;
    let before = seeded(&app).await;
    let path = "/v1/conversations/c/turns";
    let big = "REF ".repeat(80 * 1024);
    let turn = format!(r#"{{"role": "user", "content": "{big}"}}"#);
    let valid = format!(r#"{{"turns": [{turn}]}}"#);
    let cases = [
        (
            valid[..valid.len() - 3].to_owned(),
            StatusCode::BAD_REQUEST,
            "body",
        ),
        (
            format!(r#"{{"turns": [{turn}], "turns": [{turn}]}}"#),
            StatusCode::UNPROCESSABLE_ENTITY,
            "turns",
        ),
        (
            format!(r#"{{"turns": [{{"role": "user", "content": "{big}", "tokens": "many"}}]}}"#),
            StatusCode::UNPROCESSABLE_ENTITY,
            "turns[0].tokens",
        ),
    ];
    for (body, status, field) in cases {
        let response = app.post_raw(path, "application/json", body).await;
        assert_eq!(response.status(), status);
        let problem: serde_json::Value = response.json().await.unwrap();
        check_problem(&problem, status);
        assert_eq!(problem["field"], field, "{problem}");
    }
    assert_eq!(app.snapshot("c").await, before, "nothing was written");
    let response = app.post_raw(path, "application/json", valid).await;
    assert_eq!(response.status(), StatusCode::CREATED);
}

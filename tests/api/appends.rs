//! `POST /v1/conversations/{c}/turns`: ids, tokens, anchors, replays, conflicts, gaps and
//! byte-exact content.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn ids_of(response: &Value) -> Vec<i64> {
    response["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn ids_are_assigned_from_zero_when_omitted_and_next_id_follows_them() {
    let app = spawn_app().await;
    let turns = tau_turns(5);

    let first = expect(
        app.append("c1", json!(turns[..3])).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(first["conversation"], "c1");
    assert_eq!(ids_of(&first), [0, 1, 2]);
    assert_eq!(
        (first["appended"].as_u64(), first["replayed"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(first["next_id"], 3);

    let second = expect(
        app.append("c1", json!(turns[3..])).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(ids_of(&second), [3, 4]);
    assert_eq!(second["next_id"], 5);

    // An explicit next id and then an omitted one: the omitted one follows it.
    let mut explicit = turns[0].clone();
    explicit["id"] = json!(5);
    let third = expect(
        app.append("c1", json!([explicit, turns[1]])).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(ids_of(&third), [5, 6]);
    assert_eq!(third["next_id"], 7);

    let conversation = expect(app.conversation("c1").await, StatusCode::OK).await;
    assert_eq!(conversation["next_id"], 7);
    for id in 0..7 {
        let stored = expect(app.turn("c1", id).await, StatusCode::OK).await;
        assert_eq!(stored["id"], id);
    }
    // Another conversation numbers its turns from 0 again.
    let other = expect(
        app.append("c2", json!(turns[..1])).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(ids_of(&other), [0]);
}

#[tokio::test]
async fn tokens_are_counted_when_absent_and_kept_when_given() {
    let app = spawn_app().await;
    let mut turns = tau_turns(6);
    turns[2]["tokens"] = json!(7);
    turns[4]["tokens"] = json!(0);
    let response = expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let mut total = 0u64;
    for (i, (sent, got)) in turns
        .iter()
        .zip(response["turns"].as_array().unwrap())
        .enumerate()
    {
        let expected = match sent.get("tokens") {
            Some(given) => given.as_u64().unwrap(),
            None => u64::from(count_tokens(sent["content"].as_str().unwrap())),
        };
        assert_eq!(got["tokens"].as_u64(), Some(expected), "turn {i}");
        let stored = expect(app.turn("c", i as i64).await, StatusCode::OK).await;
        assert_eq!(stored["tokens"].as_u64(), Some(expected), "stored turn {i}");
        total += expected;
    }
    assert!(
        response["turns"][0]["tokens"].as_u64().unwrap() > 0,
        "real text has tokens"
    );
    let conversation = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(conversation["total_tokens"].as_u64(), Some(total));
}

#[tokio::test]
async fn anchors_are_derived_when_absent_and_kept_verbatim_when_given_even_empty() {
    let app = spawn_app().await;
    // A whole real conversation: prose and JSON tool results.
    let mut turns = tau_conversation(0);
    assert!(turns.iter().any(|t| t["role"] == "tool"));
    let given = ["INV-2093", "New York", "  spaced  anchor "];
    turns[1]["anchors"] = json!(given);
    // Explicitly no anchors: the service must not derive any, though the content has some.
    let tool = turns.iter().position(|t| t["role"] == "tool").unwrap();
    assert!(!legacy_anchors("tool", turns[tool]["content"].as_str().unwrap()).is_empty());
    turns[tool]["anchors"] = json!([]);

    let response = expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let provisional = provisional_anchors(&turns);
    let mut derived_some = 0;
    for (i, (sent, got)) in turns
        .iter()
        .zip(response["turns"].as_array().unwrap())
        .enumerate()
    {
        let expected = json!(provisional[i]);
        assert_eq!(got["anchors"], expected, "turn {i}");
        let stored = expect(app.turn("c", i as i64).await, StatusCode::OK).await;
        assert_eq!(stored["anchors"], expected, "stored turn {i}");
        derived_some +=
            usize::from(sent.get("anchors").is_none() && !expected.as_array().unwrap().is_empty());
    }
    assert!(derived_some > 5, "real turns yield anchors");
    assert_eq!(response["turns"][tool]["anchors"], json!([]));
    // A tool result with a user record yields its identifying value, not its keys.
    let user_lookup = turns
        .iter()
        .position(|t| t["content"].as_str().unwrap().contains("mia_li_3668"))
        .unwrap();
    assert!(
        response["turns"].as_array().unwrap()[user_lookup..]
            .iter()
            .any(|t| t["anchors"]
                .as_array()
                .unwrap()
                .contains(&json!("mia_li_3668")))
    );
}

#[tokio::test]
async fn an_identical_batch_replayed_is_200_and_writes_nothing() {
    let app = spawn_app().await;
    let mut turns = tau_turns(5);
    for (i, t) in turns.iter_mut().enumerate() {
        t["id"] = json!(i);
        t["external_id"] = json!(format!("msg_{i:02}"));
    }
    turns[1]["tokens"] = json!(42);
    turns[2]["anchors"] = json!(["HAT069", "JFK"]);
    let first = expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let (_, before) = app.snapshot("c").await;
    let mut created_at = Vec::new();
    for i in 0..5 {
        created_at.push(expect(app.turn("c", i).await, StatusCode::OK).await["created_at"].clone());
    }

    // The same batch again, tokens and anchors omitted where they were omitted the first time.
    let replay = expect(app.append("c", json!(turns)).await, StatusCode::OK).await;
    assert_eq!(
        (replay["appended"].as_u64(), replay["replayed"].as_u64()),
        (Some(0), Some(5))
    );
    assert_eq!(replay["next_id"], 5);
    assert_eq!(
        replay["turns"], first["turns"],
        "a retried batch gets the answer the first try got"
    );
    assert_eq!(app.snapshot("c").await, (StatusCode::OK, before.clone()));
    for (i, at) in created_at.iter().enumerate() {
        assert_eq!(
            &expect(app.turn("c", i as i64).await, StatusCode::OK).await["created_at"],
            at,
            "turn {i} untouched"
        );
    }

    // A replay of a subset, and a replay followed by a new turn.
    let subset = expect(app.append("c", json!(turns[2..4])).await, StatusCode::OK).await;
    assert_eq!(
        (subset["appended"].as_u64(), subset["replayed"].as_u64()),
        (Some(0), Some(2))
    );
    assert_eq!(app.snapshot("c").await, (StatusCode::OK, before));
    let fresh =
        json!({ "role": "user", "content": "And one more thing about reservation ZFA04Y." });
    let mixed = expect(
        app.append("c", json!([turns[4], fresh])).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(
        (mixed["appended"].as_u64(), mixed["replayed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(ids_of(&mixed), [4, 5]);
    assert_eq!(mixed["next_id"], 6);
}

#[tokio::test]
async fn a_conflicting_replay_is_409_listing_the_ids_and_writes_nothing_of_the_batch() {
    let app = spawn_app().await;
    let mut turns = tau_turns(4);
    for (i, t) in turns.iter_mut().enumerate() {
        t["id"] = json!(i);
        t["external_id"] = json!(format!("msg_{i}"));
        t["tokens"] = json!(10 + i);
        t["anchors"] = json!([format!("ANCHOR-{i}")]);
    }
    expect(
        app.append("c", json!(turns[..3])).await,
        StatusCode::CREATED,
    )
    .await;
    let before = app.snapshot("c").await;

    // Same id, different content, in a batch that also carries a new turn (id 3).
    let mut changed = turns[1].clone();
    changed["content"] = json!(format!(
        "{} (edited)",
        turns[1]["content"].as_str().unwrap()
    ));
    let body = problem(
        app.append("c", json!([changed, turns[3]])).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(body["conflicting_ids"], json!([1]));
    problem(app.turn("c", 3).await, StatusCode::NOT_FOUND).await;
    assert_eq!(app.snapshot("c").await, before);
    let stored = expect(app.turn("c", 1).await, StatusCode::OK).await;
    assert_eq!(stored["content"], turns[1]["content"]);

    // Every field that makes a replay a replay: a difference in any one is a conflict.
    let variants: [(&str, Value); 5] = [
        ("role", json!("assistant")),
        ("tokens", json!(999)),
        ("anchors", json!(["ANCHOR-1", "EXTRA"])),
        ("external_id", json!("msg_other")),
        ("content", json!("")),
    ];
    for (field, value) in variants {
        let mut changed = turns[1].clone();
        changed[field] = value;
        let body = problem(
            app.append("c", json!([turns[0], changed, turns[2], turns[3]]))
                .await,
            StatusCode::CONFLICT,
        )
        .await;
        assert_eq!(body["conflicting_ids"], json!([1]), "{field}");
        assert_eq!(app.snapshot("c").await, before, "{field}");
    }
    // A stored external id that the replay omits differs too.
    let mut without = turns[1].clone();
    without.as_object_mut().unwrap().remove("external_id");
    let body = problem(
        app.append("c", json!([without])).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(body["conflicting_ids"], json!([1]));

    // Several conflicting ids are all listed, in order.
    let mut a = turns[2].clone();
    a["content"] = json!("different");
    let mut b = turns[0].clone();
    b["content"] = json!("different too");
    let body = problem(
        app.append("c", json!([a, turns[1], b, turns[3]])).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(body["conflicting_ids"], json!([0, 2]));
    assert_eq!(app.snapshot("c").await, before);
    problem(app.turn("c", 3).await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn the_same_new_id_twice_in_one_batch_with_different_turns_is_409_and_writes_nothing() {
    let app = spawn_app().await;
    let turns = tau_turns(2);
    let mut a = turns[0].clone();
    a["id"] = json!(0);
    let mut b = turns[1].clone();
    b["id"] = json!(0);
    let body = problem(app.append("c", json!([a, b])).await, StatusCode::CONFLICT).await;
    assert_eq!(body["conflicting_ids"], json!([0]));
    problem(app.conversation("c").await, StatusCode::NOT_FOUND).await;
    // The very same turn twice is harmless.
    let ok = expect(app.append("c", json!([a, a])).await, StatusCode::CREATED).await;
    assert_eq!(ok["next_id"], 1);
    assert_eq!(ok["appended"], 1);
}

#[tokio::test]
async fn an_id_that_is_not_the_next_one_is_409_and_writes_nothing() {
    let app = spawn_app().await;
    let turns = tau_turns(4);

    // The first append of a conversation must start at 0; a gap does not even create it.
    let mut late = turns[0].clone();
    late["id"] = json!(1);
    let body = problem(app.append("c", json!([late])).await, StatusCode::CONFLICT).await;
    assert_eq!(body["expected_id"], 0);
    problem(app.conversation("c").await, StatusCode::NOT_FOUND).await;

    expect(
        app.append("c", json!(turns[..2])).await,
        StatusCode::CREATED,
    )
    .await;
    let before = app.snapshot("c").await;

    let mut skip = turns[2].clone();
    skip["id"] = json!(3);
    let body = problem(app.append("c", json!([skip])).await, StatusCode::CONFLICT).await;
    assert_eq!(
        (body["id"].as_i64(), body["expected_id"].as_i64()),
        (Some(3), Some(2))
    );
    assert_eq!(app.snapshot("c").await, before);

    // The gap is the batch's second turn: its valid first turn is not written either.
    let mut next = turns[2].clone();
    next["id"] = json!(2);
    let mut gap = turns[3].clone();
    gap["id"] = json!(4);
    let body = problem(
        app.append("c", json!([next, gap])).await,
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(body["field"], "turns[1].id");
    assert_eq!(app.snapshot("c").await, before);
    problem(app.turn("c", 2).await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn nul_emoji_rtl_and_other_awkward_content_round_trips_byte_exactly() {
    let app = spawn_app().await;
    let real = tau_turns(1)[0]["content"].as_str().unwrap().to_owned();
    let contents: Vec<String> = vec![
        "before\u{0000}after".into(),
        "\u{0000}".into(),
        format!("{real}\u{0000}{real}"),
        "Family: 👩‍👩‍👧‍👦, flag 🇮🇱, rainbow 🏳️‍🌈, skin tone 👍🏽, astral 𝄞 𐍈".into(),
        "مرحبا، أريد تغيير حجزي رقم ZFA04Y إلى يوم الجمعة".into(),
        "שלום, אני רוצה לבטל את ההזמנה 8JX2WO בבקשה".into(),
        "mixed LTR \u{202B}عربي RTL embedding\u{202C} and \u{200F}marks\u{200E} and override \u{202E}txet\u{202C}".into(),
        // Composed and decomposed accents must stay as sent (no normalisation on storage).
        "caf\u{00E9} vs cafe\u{0301}, ﬁle ligature, full-width ＨＡＴ１２３".into(),
        "\u{FEFF}BOM first, CRLF\r\nline, tab\there, lone CR\r, trailing spaces   ".into(),
        "   ".into(),
        "".into(),
        "escapes \" \\ / \u{0008} \u{000C} \u{001F} \u{007F} \u{2028} \u{2029}".into(),
        "{\"reservation_id\": \"ZFA04Y\", \"nested\": {\"a\": [1, 2, 3]}}".into(),
    ];
    let turns: Vec<Value> = contents
        .iter()
        .enumerate()
        .map(|(i, c)| json!({ "role": if i % 2 == 0 { "user" } else { "tool" }, "content": c }))
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    for (i, content) in contents.iter().enumerate() {
        let stored = expect(app.turn("c", i as i64).await, StatusCode::OK).await;
        assert_eq!(
            stored["content"].as_str().unwrap().as_bytes(),
            content.as_bytes(),
            "turn {i}"
        );
        assert_eq!(
            stored["tokens"].as_u64(),
            Some(u64::from(count_tokens(content))),
            "turn {i}"
        );
        let live = expect(app.reconstruct("c", i as i64).await, StatusCode::OK).await;
        assert_eq!(
            live["text"].as_str().unwrap().as_bytes(),
            content.as_bytes(),
            "reconstructed turn {i}"
        );
    }
    // A byte-exact replay of the same content is recognised as a replay.
    let replay: Vec<Value> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut t = t.clone();
            t["id"] = json!(i);
            t
        })
        .collect();
    let again = expect(app.append("c", json!(replay)).await, StatusCode::OK).await;
    assert_eq!(again["replayed"].as_u64(), Some(contents.len() as u64));
}

#[tokio::test]
async fn a_one_megabyte_tool_output_round_trips_byte_exactly() {
    let app = spawn_app().await;
    let record = tau_tool_output();
    let mut content = String::with_capacity(1 << 20);
    while content.len() < (1 << 20) {
        content.push_str(&record);
        content.push('\n');
    }
    // Two of them in one request: a body past axum's 2 MB default, under the configured limit.
    let second = format!("{content}-");
    let turns = json!([
        { "role": "user", "content": "Look up everything." },
        { "role": "tool", "content": content },
        { "role": "tool", "content": second },
    ]);
    assert!(turns.to_string().len() > 2 * 1024 * 1024);
    let response = expect(app.append("big", turns).await, StatusCode::CREATED).await;
    assert_eq!(
        response["turns"][1]["tokens"].as_u64(),
        Some(u64::from(count_tokens(&content)))
    );
    let stored = expect(app.turn("big", 1).await, StatusCode::OK).await;
    assert_eq!(stored["content"].as_str().unwrap().len(), content.len());
    assert!(
        stored["content"].as_str().unwrap() == content,
        "1 MB tool output differs after the round trip"
    );
    let stored = expect(app.turn("big", 2).await, StatusCode::OK).await;
    assert!(stored["content"].as_str().unwrap() == second);
    let context = expect(app.context("big").await, StatusCode::OK).await;
    assert!(context["items"][1]["content"].as_str().unwrap() == content);
    let live = expect(app.reconstruct("big", 1).await, StatusCode::OK).await;
    assert!(live["text"].as_str().unwrap() == content);
}

#[tokio::test]
async fn an_empty_turns_list_is_422_and_creates_nothing() {
    let app = spawn_app().await;
    let body = problem(
        app.append("c", json!([])).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["field"], "turns");
    problem(app.conversation("c").await, StatusCode::NOT_FOUND).await;
}

#[tokio::test]
async fn unknown_fields_are_422_and_write_nothing() {
    let app = spawn_app().await;
    let turns = tau_turns(2);
    expect(
        app.append("c", json!(turns[..1])).await,
        StatusCode::CREATED,
    )
    .await;
    let before = app.snapshot("c").await;

    let top = json!({ "turns": [turns[1]], "dry_run": true });
    problem(
        app.post("/v1/conversations/c/turns", &top).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    let mut misspelled = turns[1].clone();
    misspelled["anchor"] = json!(["ZFA04Y"]);
    problem(
        app.append("c", json!([misspelled])).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    let mut misspelled = turns[1].clone();
    misspelled["token"] = json!(3);
    problem(
        app.append("c", json!([misspelled])).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(app.snapshot("c").await, before);
}

#[tokio::test]
async fn invalid_turn_fields_are_422_naming_the_field_and_write_nothing() {
    let app = spawn_app().await;
    let turns = tau_turns(2);
    expect(
        app.append("c", json!(turns[..1])).await,
        StatusCode::CREATED,
    )
    .await;
    let before = app.snapshot("c").await;
    let good = turns[1].clone();
    let with = |field: &str, value: Value| {
        let mut t = good.clone();
        t[field] = value;
        t
    };
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        ("negative id", with("id", json!(-1)), Some("turns[1].id")),
        (
            "empty anchor",
            with("anchors", json!(["ok", ""])),
            Some("turns[1].anchors[1]"),
        ),
        (
            "blank anchor",
            with("anchors", json!([" \n\t "])),
            Some("turns[1].anchors[0]"),
        ),
        (
            "control character in an anchor",
            with("anchors", json!(["a\u{0000}b"])),
            Some("turns[1].anchors[0]"),
        ),
        (
            "overlong anchor",
            with("anchors", json!(["x".repeat(257)])),
            Some("turns[1].anchors[0]"),
        ),
        (
            "too many anchors",
            with(
                "anchors",
                json!((0..65).map(|i| format!("A{i}")).collect::<Vec<_>>()),
            ),
            Some("turns[1].anchors"),
        ),
        (
            "overlong external id",
            with("external_id", json!("e".repeat(257))),
            Some("turns[1].external_id"),
        ),
        ("unknown role", with("role", json!("developer")), None),
        ("negative tokens", with("tokens", json!(-3)), None),
        ("content not a string", with("content", json!(["a"])), None),
        ("role missing", json!({ "content": "hello" }), None),
    ];
    for (name, bad, field) in cases {
        let body = problem(
            app.append("c", json!([good, bad])).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        if let Some(field) = field {
            assert_eq!(body["field"], field, "{name}: {body}");
        }
        assert_eq!(app.snapshot("c").await, before, "{name}");
    }
}

#[tokio::test]
async fn a_batch_over_the_configured_turn_limit_is_422_and_writes_nothing() {
    let app = spawn_app_with(ServeConfig {
        max_batch_turns: 3,
        max_anchors_per_turn: 2,
        // `serve` refuses to derive more anchors than a client may give.
        decision: gatekeeper::config::DecisionConfig {
            anchor_count: 2,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let body = problem(
        app.append("c", json!(tau_turns(4))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["field"], "turns");
    problem(app.conversation("c").await, StatusCode::NOT_FOUND).await;
    expect(
        app.append("c", json!(tau_turns(3))).await,
        StatusCode::CREATED,
    )
    .await;
    let mut many = tau_turns(1)[0].clone();
    many["anchors"] = json!(["A1", "A2", "A3"]);
    let body = problem(
        app.append("c", json!([many])).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(body["field"], "turns[0].anchors");
    assert_eq!(
        expect(app.conversation("c").await, StatusCode::OK).await["next_id"],
        3
    );
}

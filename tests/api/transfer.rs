//! Export and import: NDJSON that round-trips exactly, on one backend and across them, and an
//! import that refuses a bad file whole.

use crate::support::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A real conversation with everything an export carries: derived anchors (profiles ranked over
/// two batches), a pinned turn, two narrowed checkpoints built from the plan's anchors, and a
/// rejection counted by the churn guard. Returns how many turns it holds.
pub(crate) async fn lived_in(app: &TestApp, conversation: &str) -> usize {
    let turns = tau_conversation(3);
    let half = turns.len() / 2;
    expect(
        app.append(conversation, json!(turns[..half])).await,
        StatusCode::CREATED,
    )
    .await;
    expect(
        app.append(conversation, json!(turns[half..])).await,
        StatusCode::CREATED,
    )
    .await;
    expect(app.pin(conversation, 2, true).await, StatusCode::OK).await;
    let mut uncovered = 0;
    for _ in 0..2 {
        let path = format!("/v1/conversations/{conversation}/compaction-plan?summary_budget=600");
        let plan = expect(app.get(&path).await, StatusCode::OK).await;
        let planned = plan["turns"].as_array().unwrap();
        // The anchors of every other planned turn: what the others share with them is covered,
        // the rest not.
        let summary: Vec<&str> = (planned.iter().enumerate())
            .filter(|(i, _)| i % 2 == 0)
            .flat_map(|(_, t)| {
                t["anchors"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
            })
            .collect();
        let proposal = json!({ "from": plan["from"], "to": plan["to"], "summary": summary.join(" "), "summary_budget": 600 });
        let verdict = expect(
            app.propose(conversation, proposal).await,
            StatusCode::CREATED,
        )
        .await;
        uncovered += verdict["uncovered"].as_array().unwrap().len();
    }
    assert!(uncovered > 0, "the checkpoints narrowed");
    let next = expect(
        app.get(&format!("/v1/conversations/{conversation}")).await,
        StatusCode::OK,
    )
    .await;
    let from = next["latest_checkpoint"]["advanced_to"].as_i64().unwrap() + 1;
    let nothing = json!({ "from": from, "to": turns.len() - 1, "summary": "nothing that matters", "summary_budget": 1500 });
    problem(
        app.propose(conversation, nothing).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    turns.len()
}

/// Each answer equal to its counterpart, named by the read that differs.
fn assert_same(got: &[(String, Value)], want: &[(String, Value)]) {
    assert_eq!(got.len(), want.len());
    for ((read, got), (_, want)) in got.iter().zip(want) {
        assert_eq!(got, want, "{read}");
    }
}

/// Everything a reader can ask of the conversation.
async fn answers(app: &TestApp, conversation: &str, turns: usize) -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for turn in 0..turns {
        let answer = expect(
            app.reconstruct(conversation, turn as i64).await,
            StatusCode::OK,
        )
        .await;
        all.push((format!("reconstruct/{turn}"), answer));
    }
    for path in [
        "",
        "/context",
        "/context?max_tokens=2000",
        "/compactions",
        "/compactions/1",
        "/compactions/2",
        "/compaction-plan?summary_budget=500",
        "/search?q=reservation",
    ] {
        let mut answer = expect(
            app.get(&format!("/v1/conversations/{conversation}{path}"))
                .await,
            StatusCode::OK,
        )
        .await;
        if let Some(o) = answer.as_object_mut() {
            o.remove("conversation");
        }
        // Where a hit or a stub names its conversation, the copy names its own.
        for list in ["hits", "items"] {
            let entries = answer.get_mut(list).and_then(Value::as_array_mut);
            for entry in entries.into_iter().flatten() {
                let entry = entry.as_object_mut().unwrap();
                entry.remove("conversation");
                entry.remove("recall");
            }
        }
        all.push((path.to_owned(), answer));
    }
    all
}

#[tokio::test]
async fn export_import_export_gives_the_same_bytes_and_every_read_the_same_answer() {
    let app = spawn_app().await;
    let turns = lived_in(&app, "lived").await;
    let exported = app.export("lived").await;
    let lines: Vec<Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "conversation");
    assert_eq!(lines[0]["turns"], turns);
    assert_eq!(lines[0]["rejected_streak"], 1);
    assert_eq!(
        lines.len(),
        1 + turns + 2,
        "a header, the turns, the checkpoints"
    );
    assert!(lines[3]["pinned"].as_bool().unwrap());
    let before = answers(&app, "lived", turns).await;

    assert_eq!(app.erase("lived").await.status(), StatusCode::NO_CONTENT);
    let imported = expect(
        app.import("lived", exported.clone()).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(
        imported,
        json!({ "conversation": "lived", "turns": turns, "checkpoints": 2 })
    );
    assert_eq!(app.export("lived").await, exported, "byte for byte");
    assert_same(&answers(&app, "lived", turns).await, &before);

    // Under another name beside the original: the same conversation, its own name.
    expect(
        app.import("copy", exported.clone()).await,
        StatusCode::CREATED,
    )
    .await;
    assert_same(&answers(&app, "copy", turns).await, &before);
    let copy = app.export("copy").await;
    assert_eq!(
        copy.lines().skip(1).collect::<Vec<_>>(),
        exported.lines().skip(1).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn an_export_from_sqlite_imports_here_with_the_same_answers() {
    let source = spawn_app_on(TestDb::fresh_sqlite().await, defaults()).await;
    let turns = lived_in(&source, "moved").await;
    let exported = source.export("moved").await;
    let app = spawn_app().await;
    expect(
        app.import("moved", exported.clone()).await,
        StatusCode::CREATED,
    )
    .await;
    assert_same(
        &answers(&app, "moved", turns).await,
        &answers(&source, "moved", turns).await,
    );
    assert_eq!(app.export("moved").await, exported);
}

#[tokio::test]
async fn an_import_into_a_conversation_that_holds_turns_is_409_and_changes_nothing() {
    let app = spawn_app().await;
    let turns = lived_in(&app, "full").await;
    let exported = app.export("full").await;
    // One with checkpoints (the export's own), one with turns only.
    expect(
        app.append("turns-only", json!(tau_turns(2))).await,
        StatusCode::CREATED,
    )
    .await;
    for (conversation, held) in [("full", turns), ("turns-only", 2)] {
        let before = app.export(conversation).await;
        let refused = problem(
            app.import(conversation, exported.clone()).await,
            StatusCode::CONFLICT,
        )
        .await;
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains("already holds turns"),
            "{conversation}: {refused}"
        );
        assert_eq!(app.export(conversation).await, before, "{conversation}");
        let path = format!("/v1/conversations/{conversation}");
        let after = expect(app.get(&path).await, StatusCode::OK).await;
        assert_eq!(after["next_id"], held, "{conversation}");
    }
}

/// The export with line `n` (0-based) put through `edit`.
fn with_line(exported: &str, n: usize, edit: impl Fn(&mut Value)) -> String {
    let mut lines: Vec<String> = exported.lines().map(str::to_owned).collect();
    let mut line: Value = serde_json::from_str(&lines[n]).unwrap();
    edit(&mut line);
    lines[n] = line.to_string();
    lines.join("\n") + "\n"
}

#[tokio::test]
async fn a_refused_import_is_422_naming_its_line_and_writes_nothing() {
    let app = spawn_app().await;
    let turns = lived_in(&app, "source").await;
    let exported = app.export("source").await;
    let lines: Vec<&str> = exported.lines().collect();
    let first_checkpoint = 1 + turns;
    let cases: Vec<(&str, String, usize)> = vec![
        ("no header", lines[1..].join("\n"), 1),
        (
            "a turn missing",
            [&lines[..3], &lines[4..]].concat().join("\n"),
            4,
        ),
        (
            "cut short",
            lines[..lines.len() - 1].join("\n"),
            lines.len(),
        ),
        (
            "another version",
            with_line(&exported, 0, |h| h["version"] = json!(2)),
            1,
        ),
        (
            "an unknown member",
            with_line(&exported, 1, |t| t["extra"] = json!(1)),
            2,
        ),
        (
            "a profile that is not base64",
            with_line(&exported, 1, |t| t["profile"] = json!("%%%")),
            2,
        ),
        (
            "a profile that is not one",
            with_line(&exported, 1, |t| t["profile"] = json!("AAEC")),
            2,
        ),
        (
            "covered and uncovered overlap",
            with_line(&exported, first_checkpoint, |c| {
                c["verdict"]["uncovered"] = c["verdict"]["covered"].clone()
            }),
            first_checkpoint + 1,
        ),
        (
            "a range past the turns",
            with_line(&exported, first_checkpoint, |c| {
                c["verdict"]["to"] = json!(turns + 5)
            }),
            first_checkpoint + 1,
        ),
        (
            "a rejected verdict",
            with_line(&exported, first_checkpoint, |c| {
                c["verdict"]["outcome"] = json!("rejected")
            }),
            first_checkpoint + 1,
        ),
        (
            "not JSON",
            exported.replacen("{\"type\":\"turn\"", "{\"type\":turn", 1),
            2,
        ),
    ];
    for (case, body, line) in cases {
        let refused = problem(
            app.import("target", body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
        assert_eq!(refused["line"], line, "{case}: {refused}");
        problem(
            app.get("/v1/conversations/target").await,
            StatusCode::NOT_FOUND,
        )
        .await;
    }
    let wrong_type = app
        .post_raw(
            "/v1/conversations/target/import",
            "application/json",
            exported,
        )
        .await;
    problem(wrong_type, StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
}

#[tokio::test]
async fn an_export_of_several_pages_of_turns_and_checkpoints_imports_whole() {
    let app = spawn_app().await;
    // Three turns with given anchors, proposed over again: more checkpoints than a page holds
    // (50); then real turns, more than a page of turns (500).
    let checkpoints = 53;
    crate::bounded_cost::checkpoints_of_one_range(&app, checkpoints).await;
    for batch in tau_turns(640).chunks(320) {
        expect(app.append("c", json!(batch)).await, StatusCode::CREATED).await;
    }
    let turns = 3 + 640;

    let exported = app.export("c").await;
    let lines: Vec<Value> = (exported.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1 + turns + checkpoints);
    let ids = |kind: &str, field: &str| -> Vec<i64> {
        (lines.iter().filter(|l| l["type"] == kind))
            .map(|l| l[field].as_i64().unwrap())
            .collect()
    };
    assert_eq!(ids("turn", "id"), (0..turns as i64).collect::<Vec<_>>());
    let numbered = (1..=checkpoints as i64).collect::<Vec<_>>();
    assert_eq!(ids("checkpoint", "checkpoint_id"), numbered);

    expect(
        app.import("copy", exported.clone()).await,
        StatusCode::CREATED,
    )
    .await;
    let copy = app.export("copy").await;
    assert_eq!(
        copy.lines().skip(1).collect::<Vec<_>>(),
        exported.lines().skip(1).collect::<Vec<_>>()
    );
}

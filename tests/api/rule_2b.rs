//! Rule 2b through HTTP: the plan names the anchors the decision will check, a summary that
//! keeps only tokens several turns share covers none of them, and reconstruct shows the anchors
//! that decided.

use crate::support::*;
use gatekeeper::coverage::anchor_present;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_plan_names_the_anchors_the_decision_checks_for_its_range() {
    let app = spawn_app().await;
    let turns = tau_conversation(3);
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let plan = expect(app.plan("c", "summary_budget=100000").await, StatusCode::OK).await;
    let (from, to) = (plan["from"].as_i64().unwrap(), plan["to"].as_i64().unwrap());
    assert_eq!((from, to), (0, turns.len() as i64 - 1));
    let planned = plan["turns"].as_array().unwrap();
    assert_eq!(
        planned
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        (from..=to).collect::<Vec<_>>()
    );
    // A clean summary holding the planned anchors of every turn but a few.
    let anchored: Vec<i64> = planned
        .iter()
        .filter(|t| !t["anchors"].as_array().unwrap().is_empty())
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert!(
        anchored.len() * 10 >= planned.len() * 7,
        "most real turns have anchors: {plan}"
    );
    let left_out = [anchored[1], anchored[anchored.len() / 2]];
    let mut summary = String::from("<summary>\n");
    for t in planned
        .iter()
        .filter(|t| !left_out.contains(&t["id"].as_i64().unwrap()))
    {
        summary.push_str(&format!("- {}\n", strings(&t["anchors"]).join(", ")));
    }
    summary.push_str("</summary>");
    let verdict = expect(
        app.propose(
            "c",
            json!({ "from": from, "to": to, "summary": summary, "summary_budget": 100000 }),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    // Covered: exactly the turns whose planned anchors are all in the summary.
    let expected: Vec<i64> = planned
        .iter()
        .filter(|t| {
            let anchors = strings(&t["anchors"]);
            !anchors.is_empty() && anchors.iter().all(|a| anchor_present(a, &summary))
        })
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert_eq!(expand(&verdict["covered"]), expected);
    for id in left_out {
        assert!(
            !expected.contains(&id),
            "turn {id} was left out of the summary"
        );
    }
    // Every uncovered turn: the plan's reason when it named one, and the evidence the plan
    // named (each anchor with the turns of the range that hold it).
    for detail in verdict["turns"].as_array().unwrap() {
        let t = &planned[detail["id"].as_u64().unwrap() as usize];
        if !t["unanchored"].is_null() {
            assert_eq!(detail["reason"], t["unanchored"]);
        }
        assert_eq!(
            detail.get("evidence").unwrap_or(&json!([])),
            t.get("evidence").unwrap_or(&json!([])),
            "turn {}",
            t["id"]
        );
    }
    // Reconstruct shows, as evidence, the anchors the plan named.
    let covered = expected[0];
    let answer = expect(app.reconstruct("c", covered).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "summary");
    let mut evidence: Vec<String> = answer["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["anchor"].as_str().unwrap().to_owned())
        .collect();
    let mut planned_anchors = strings(&planned[covered as usize]["anchors"]);
    evidence.sort();
    planned_anchors.sort();
    assert_eq!(evidence, planned_anchors);
}

#[tokio::test]
async fn a_summary_that_keeps_only_what_several_turns_share_covers_none_of_them() {
    let app = spawn_app().await;
    let turns = json!([
        { "role": "user", "content": "Please look up reservation ZFA04Y." },
        { "role": "tool", "content": "{\"reservation_id\": \"ZFA04Y\", \"status\": \"confirmed\"}" },
        { "role": "assistant", "content": "Reservation ZFA04Y is confirmed." },
        { "role": "user", "content": "Then cancel the honeymoon booking." },
    ]);
    expect(app.append("c", turns).await, StatusCode::CREATED).await;
    // Before rule 2b, ZFA04Y alone covered the first three turns.
    let verdict = expect(
        app.propose(
            "c",
            json!({ "from": 0, "to": 3, "summary": "ZFA04Y; cancel the honeymoon booking.", "summary_budget": 1000 }),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(verdict["covered"], json!([[3, 3]]));
    assert_eq!(verdict["outcome"], "narrowed");
    let details = verdict["turns"].as_array().unwrap();
    assert_eq!(details.len(), 3);
    for detail in details {
        // ZFA04Y was checked (three turns hold it) and is there; what each turn says beyond it
        // (`look`, `confirmed`, `reservation`) is not.
        assert_eq!(detail["reason"], "anchor_missing", "{detail}");
        assert!(
            detail["evidence"]
                .as_array()
                .unwrap()
                .contains(&json!({ "anchor": "ZFA04Y", "turns_sharing": 3 })),
            "{detail}"
        );
        assert!(!strings(&detail["missing_anchors"]).is_empty(), "{detail}");
    }
    let reconstruct = expect(app.reconstruct("c", 1).await, StatusCode::OK).await;
    assert_eq!(reconstruct["source"], "raw_log");
}

#[tokio::test]
async fn a_turn_without_a_word_of_its_own_is_decided_by_its_least_shared_words() {
    let app = spawn_app().await;
    let turns = json!([
        { "role": "user", "content": "Rebook ZFA04Y for the honeymoon." },
        { "role": "assistant", "content": "ZFA04Y honeymoon" },
    ]);
    expect(app.append("c", turns).await, StatusCode::CREATED).await;
    let plan = expect(app.plan("c", "summary_budget=1000").await, StatusCode::OK).await;
    assert_eq!(
        plan["turns"][0]["anchors"],
        json!(["Rebook", "ZFA04Y", "honeymoon"]),
        "its own word first"
    );
    assert_eq!(
        plan["turns"][1]["evidence"],
        json!([
            { "anchor": "ZFA04Y", "turns_sharing": 2 },
            { "anchor": "honeymoon", "turns_sharing": 2 }
        ])
    );
    let verdict = expect(
        app.propose(
            "c",
            json!({ "from": 0, "to": 1, "summary": "ZFA04Y honeymoon.", "summary_budget": 1000 }),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(verdict["covered"], json!([[1, 1]]));
    assert_eq!(verdict["turns"][0]["missing_anchors"], json!(["Rebook"]));
}

#[tokio::test]
async fn counts_from_earlier_batches_rank_a_turns_candidates_and_grow_with_each_batch() {
    let app = spawn_app().await;
    let anchors = |response: &Value| strings(&response["turns"][0]["anchors"]);
    let append = |content: &str| app.append("c", json!([{"role": "user", "content": content}]));
    // HAT170 is an identifier: alone, it ranks before a plain word.
    let first = expect(append("HAT170 please").await, StatusCode::CREATED).await;
    assert_eq!(anchors(&first)[0], "HAT170");
    // Counted once by the first batch (a new count) and again by this one (an existing count
    // raised); the wheelchair is counted once.
    expect(append("HAT170 again").await, StatusCode::CREATED).await;
    expect(append("wheelchair").await, StatusCode::CREATED).await;
    let last = expect(append("HAT170 wheelchair").await, StatusCode::CREATED).await;
    assert_eq!(
        anchors(&last)[..2],
        ["wheelchair", "HAT170"],
        "seen in one earlier turn ranks before seen in two, whatever the tier"
    );
}

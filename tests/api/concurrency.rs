//! Racing requests: one decision per expected checkpoint, gap-free ids under concurrent appends.

use crate::support::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test]
async fn two_concurrent_proposals_with_the_same_expected_checkpoint_one_wins_and_the_other_is_409()
{
    let app = spawn_app().await;
    const ROUNDS: i64 = 10;
    let turns: Vec<Value> = tau_turns(ROUNDS as usize)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("RACE-{i}")]);
            t
        })
        .collect();
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;

    let mut expected: Value = Value::Null;
    for round in 0..ROUNDS {
        // Two different proposals over the same turn, both valid against the same state.
        let body = |variant: &str| {
            json!({
                "from": round, "to": round, "summary": format!("Round {variant}: RACE-{round}."),
                "summary_budget": 1000, "expected_checkpoint": expected
            })
        };
        let (left, right) = tokio::join!(
            app.propose("c", body("left")),
            app.propose("c", body("right"))
        );
        let mut statuses = [left.status(), right.status()];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::CREATED, StatusCode::CONFLICT],
            "round {round}"
        );
        let (winner, loser) = if left.status() == StatusCode::CREATED {
            (left, right)
        } else {
            (right, left)
        };
        let won = expect(winner, StatusCode::CREATED).await;
        assert_eq!(
            won["checkpoint_id"].as_i64(),
            Some(round + 1),
            "round {round}"
        );
        let lost = problem(loser, StatusCode::CONFLICT).await;
        assert_eq!(
            lost["latest_checkpoint"].as_i64(),
            Some(round + 1),
            "round {round}: {lost}"
        );
        expected = json!(round + 1);
    }
    let state = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(state["checkpoints"], ROUNDS);
    let list = expect(app.checkpoints("c").await, StatusCode::OK).await;
    let ids: Vec<i64> = list["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (1..=ROUNDS).rev().collect::<Vec<_>>());
}

#[tokio::test]
async fn many_concurrent_proposals_against_a_fresh_conversation_yield_exactly_one_checkpoint() {
    let app = spawn_app().await;
    let turns =
        json!([{ "role": "user", "content": tau_turns(1)[0]["content"], "anchors": ["SOLO-1"] }]);
    expect(app.append("c", turns).await, StatusCode::CREATED).await;
    let body = json!({ "from": 0, "to": 0, "summary": "SOLO-1.", "summary_budget": 1000, "expected_checkpoint": null });
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (app, body) = (app.clone(), body.clone());
            tokio::spawn(async move { app.propose("c", body).await.status() })
        })
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap());
    }
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CREATED)
            .count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CONFLICT)
            .count(),
        7,
        "{statuses:?}"
    );
    assert_eq!(
        expect(app.conversation("c").await, StatusCode::OK).await["checkpoints"],
        1
    );
}

#[tokio::test]
async fn concurrent_id_less_appends_end_with_gap_free_ids() {
    let app = spawn_app().await;
    const TASKS: usize = 8;
    const BATCHES: usize = 4;
    const PER_BATCH: usize = 3;
    let real = tau_turns(TASKS * BATCHES * PER_BATCH);
    // Every turn unique, so each one's final place can be found.
    let contents: Vec<String> = real
        .iter()
        .enumerate()
        .map(|(i, t)| format!("[{i}] {}", t["content"].as_str().unwrap()))
        .collect();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let app = app.clone();
        let mine: Vec<String> =
            contents[task * BATCHES * PER_BATCH..(task + 1) * BATCHES * PER_BATCH].to_vec();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for batch in mine.chunks(PER_BATCH) {
                let turns: Vec<Value> = batch
                    .iter()
                    .map(|c| json!({ "role": "user", "content": c }))
                    .collect();
                let response =
                    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
                let got: Vec<i64> = response["turns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["id"].as_i64().unwrap())
                    .collect();
                // A batch is placed contiguously.
                assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "{got:?}");
                ids.extend(got.into_iter().zip(batch.iter().cloned()));
            }
            ids
        }));
    }
    let mut placed: Vec<(i64, String)> = Vec::new();
    for task in tasks {
        placed.extend(task.await.unwrap());
    }
    let total = (TASKS * BATCHES * PER_BATCH) as i64;
    placed.sort();
    assert_eq!(
        placed.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        (0..total).collect::<Vec<_>>(),
        "gap-free, no id twice"
    );

    let state = expect(app.conversation("c").await, StatusCode::OK).await;
    assert_eq!(state["next_id"], total);
    let context = expect(app.context("c").await, StatusCode::OK).await;
    let items = context["items"].as_array().unwrap();
    assert_eq!(items.len() as i64, total);
    for (item, (id, content)) in items.iter().zip(&placed) {
        assert_eq!(item["id"].as_i64(), Some(*id));
        assert_eq!(
            item["content"].as_str(),
            Some(content.as_str()),
            "turn {id} holds what its append was told"
        );
    }
    let sum: u64 = items.iter().map(|i| i["tokens"].as_u64().unwrap()).sum();
    assert_eq!(state["total_tokens"].as_u64(), Some(sum));
}

#[tokio::test]
async fn racing_appends_of_the_same_explicit_id_are_one_write_and_a_replay_or_a_conflict() {
    let app = spawn_app().await;
    let real = tau_turns(2);
    for round in 0..5 {
        // Identical turns racing into a conversation that does not exist yet.
        let conversation = format!("same-{round}");
        let turn = json!([{ "id": 0, "role": "user", "content": real[0]["content"] }]);
        let (a, b) = tokio::join!(
            app.append(&conversation, turn.clone()),
            app.append(&conversation, turn.clone())
        );
        let mut statuses = [a.status(), b.status()];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::OK, StatusCode::CREATED],
            "round {round}"
        );
        let state = expect(app.conversation(&conversation).await, StatusCode::OK).await;
        assert_eq!(state["next_id"], 1);

        // Different turns under the same id: one is written, the other is a conflict.
        let conversation = format!("differ-{round}");
        let left = json!([{ "id": 0, "role": "user", "content": real[0]["content"] }]);
        let right = json!([{ "id": 0, "role": "user", "content": real[1]["content"] }]);
        let (a, b) = tokio::join!(
            app.append(&conversation, left.clone()),
            app.append(&conversation, right.clone())
        );
        let (sa, sb) = (a.status(), b.status());
        let mut statuses = [sa, sb];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::CREATED, StatusCode::CONFLICT],
            "round {round}"
        );
        let loser = if sa == StatusCode::CONFLICT { a } else { b };
        assert_eq!(
            problem(loser, StatusCode::CONFLICT).await["conflicting_ids"],
            json!([0])
        );
        let stored = expect(app.turn(&conversation, 0).await, StatusCode::OK).await;
        let winner = if sa == StatusCode::CREATED {
            &left
        } else {
            &right
        };
        assert_eq!(stored["content"], winner[0]["content"]);
        assert_eq!(
            expect(app.conversation(&conversation).await, StatusCode::OK).await["next_id"],
            1
        );
    }
}

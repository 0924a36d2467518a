//! The reconstruct answer cache keeps tenants apart: two tenants with a conversation of the same
//! name, the same checkpoint id and (forced here) the same incarnation each get their own answer,
//! however the requests interleave, so only the tenant in the cache's key tells them apart.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use gatekeeper_test_support::AnyStore;
use reqwest::StatusCode;
use serde_json::{Value, json};

const KEY_A: &str = "tenant-a-key-0123456789";
const KEY_B: &str = "tenant-b-key-9876543210";

/// Four real turns with anchors `K{i}`, starting `skip` turns into the data, so the tenants'
/// logs differ in content but not in shape.
async fn four_turns(app: &TestApp, skip: usize) -> Vec<Value> {
    let turns: Vec<Value> = tau_turns(skip + 4)[skip..]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut t = t.clone();
            t["anchors"] = json!([format!("K{i}")]);
            t
        })
        .collect();
    expect(
        app.append("shared", json!(turns)).await,
        StatusCode::CREATED,
    )
    .await;
    turns
}

/// Gives both tenants' "shared" one incarnation, as if their sequence or random draw agreed.
async fn same_incarnation(store: &AnyStore) {
    let sql = "UPDATE conversations SET incarnation = 4242 WHERE conversation = 'shared'";
    let updated = match store {
        AnyStore::Postgres(pg) => sqlx::query(sql)
            .execute(pg.pool())
            .await
            .unwrap()
            .rows_affected(),
        AnyStore::Sqlite(lite) => sqlx::query(sql)
            .execute(lite.pool())
            .await
            .unwrap()
            .rows_affected(),
    };
    assert_eq!(updated, 2, "one conversation per tenant");
}

#[tokio::test]
async fn two_tenants_with_the_same_conversation_and_checkpoint_id_each_get_their_own_cached_answer()
{
    let app = spawn_app_with(ServeConfig {
        api_keys: Some(format!("tenantA:{KEY_A},tenantB:{KEY_B}")),
        ..Default::default()
    })
    .await;
    assert!(app.cache.is_some(), "the answer cache is on");
    let (a, b) = (app.with_key(KEY_A), app.with_key(KEY_B));
    four_turns(&a, 0).await;
    let b_turns = four_turns(&b, 4).await;
    same_incarnation(&app.store).await;
    // Checkpoint 1 of each: A's covers turn 1, B's leaves it out.
    let a_summary = "Tenant A: K0, K1, K2 and K3.";
    let b_summary = "Tenant B: K0, K2 and K3.";
    for (tenant, summary) in [(&a, a_summary), (&b, b_summary)] {
        let body = json!({ "from": 0, "to": 3, "summary": summary, "summary_budget": 5000 });
        let verdict = expect(tenant.propose("shared", body).await, StatusCode::CREATED).await;
        assert_eq!(verdict["checkpoint_id"], 1);
    }

    let expected_a = |answer: &Value| {
        assert_eq!(
            (answer["source"].as_str(), answer["text"].as_str()),
            (Some("summary"), Some(a_summary)),
            "A's answer: {answer}"
        );
    };
    let expected_b = |answer: &Value| {
        assert_eq!(
            (answer["source"].as_str(), answer["reason"].as_str()),
            (Some("raw_log"), Some("anchor_missing")),
            "B's answer: {answer}"
        );
        assert_eq!(answer["text"], b_turns[1]["content"]);
    };
    // A first (its answer now cached), then B, then both again from memory; then turn 2,
    // which both summaries cover, B first.
    for _ in 0..2 {
        expected_a(&expect(a.reconstruct("shared", 1).await, StatusCode::OK).await);
        expected_b(&expect(b.reconstruct("shared", 1).await, StatusCode::OK).await);
    }
    for _ in 0..2 {
        let from_b = expect(b.reconstruct("shared", 2).await, StatusCode::OK).await;
        assert_eq!(from_b["text"], b_summary, "{from_b}");
        let from_a = expect(a.reconstruct("shared", 2).await, StatusCode::OK).await;
        assert_eq!(from_a["text"], a_summary, "{from_a}");
    }
}

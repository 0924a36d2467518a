//! Upgrading Idempotency-Key records from per-tenant keys to per-conversation keys: every record
//! an older release wrote still answers its retry after the upgrade.

use crate::support::*;
use crate::test_db::EmptyDb;
use gatekeeper_test_support::AnyStore;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Puts `idempotency_keys` back as the release before per-conversation keys left it (keyed by
/// tenant and key, no conversation column), and forgets that the migration ran.
async fn as_the_release_before_left_it(store: &AnyStore) {
    match store {
        AnyStore::Postgres(s) => sqlx::raw_sql(
            "ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
             ALTER TABLE idempotency_keys DROP COLUMN conversation;
             ALTER TABLE idempotency_keys ADD PRIMARY KEY (tenant, key);
             DELETE FROM _sqlx_migrations WHERE version = 8;",
        )
        .execute(s.pool())
        .await
        .map(|_| ()),
        AnyStore::Sqlite(s) => sqlx::raw_sql(
            "CREATE TABLE old_keys (tenant TEXT NOT NULL, key TEXT NOT NULL, fingerprint BLOB NOT NULL,
                 status INTEGER NOT NULL, response BLOB NOT NULL, created_at INTEGER NOT NULL,
                 PRIMARY KEY (tenant, key)) STRICT;
             INSERT INTO old_keys SELECT tenant, key, fingerprint, status, response, created_at
                 FROM idempotency_keys;
             DROP TABLE idempotency_keys;
             ALTER TABLE old_keys RENAME TO idempotency_keys;
             CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
             DELETE FROM _sqlx_migrations WHERE version = 6;",
        )
        .execute(s.pool())
        .await
        .map(|_| ()),
    }
    .unwrap();
}

async fn post_with_key(app: &TestApp, path: &str, key: &str, body: &Value) -> reqwest::Response {
    (app.client.post(app.url(path)))
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn answers_recorded_per_tenant_before_the_upgrade_still_answer_their_retries() {
    let empty = EmptyDb::new().await;
    let url = empty.url.clone();
    let app = spawn_app_on(empty.connect().await, defaults()).await;
    let turns = tau_turns(3);
    let append = json!({ "turns": turns[..2] });
    let later = json!({ "turns": turns[2..] });
    let proposal =
        json!({ "from": 0, "to": 1, "summary": turns[0]["content"], "summary_budget": 4096 });
    let appended = post_with_key(&app, "/v1/conversations/c/turns", "a", &append).await;
    let appended = expect(appended, StatusCode::CREATED).await;
    expect(app.append("d", json!(turns)).await, StatusCode::CREATED).await;
    let proposed = post_with_key(&app, "/v1/conversations/d/compactions", "p", &proposal).await;
    let proposed = expect(proposed, StatusCode::CREATED).await;
    // A rejection is recorded too: a summary that covers nothing.
    let nothing = json!({ "from": 2, "to": 2, "summary": "-", "summary_budget": 4096 });
    let rejected = post_with_key(&app, "/v1/conversations/d/compactions", "r", &nothing).await;
    let rejected = expect(rejected, StatusCode::UNPROCESSABLE_ENTITY).await;

    as_the_release_before_left_it(&app.store).await;
    let upgraded = app
        .restarted_on(AnyStore::connect(&url).await.unwrap())
        .await;

    let retries = [
        (
            "/v1/conversations/c/turns",
            "a",
            &append,
            StatusCode::CREATED,
            &appended,
        ),
        (
            "/v1/conversations/d/compactions",
            "p",
            &proposal,
            StatusCode::CREATED,
            &proposed,
        ),
        (
            "/v1/conversations/d/compactions",
            "r",
            &nothing,
            StatusCode::UNPROCESSABLE_ENTITY,
            &rejected,
        ),
    ];
    for (path, key, body, status, answer) in retries {
        let again = post_with_key(&upgraded, path, key, body).await;
        assert!(
            again.headers().get("idempotent-replayed").is_some(),
            "{key}"
        );
        assert_eq!(&expect(again, status).await, answer, "{key}");
    }
    // Each key now belongs to its conversation: on c, "a" still refuses another body, and on
    // another conversation it is a new request.
    let reused = post_with_key(&upgraded, "/v1/conversations/c/turns", "a", &later).await;
    expect(reused, StatusCode::UNPROCESSABLE_ENTITY).await;
    let elsewhere = post_with_key(&upgraded, "/v1/conversations/e/turns", "a", &append).await;
    expect(elsewhere, StatusCode::CREATED).await;
    assert_eq!(upgraded.snapshot("c").await.1["next_id"], 2);
    assert_eq!(upgraded.snapshot("d").await.1["checkpoints"], 1);
}

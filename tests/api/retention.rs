//! `GATEKEEPER_RETENTION_DAYS` and the keys file's `retention_days=`: idle conversations are
//! erased by a background task, each tenant by its own rule.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

/// Makes the conversation's last append `days` ago.
async fn age(store: &AnyStore, tenant: &str, conversation: &str, days: f64) {
    match store {
        AnyStore::Postgres(pg) => sqlx::query(
            "UPDATE conversations SET last_append_at = now() - make_interval(secs => $3 * 86400) \
             WHERE tenant = $1 AND conversation = $2",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(days)
        .execute(pg.pool())
        .await
        .map(|_| ()),
        AnyStore::Sqlite(lite) => sqlx::query(
            "UPDATE conversations SET last_append_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%f days', ?3)) \
             WHERE tenant = ?1 AND conversation = ?2",
        )
        .bind(tenant)
        .bind(conversation)
        .bind(days)
        .execute(lite.pool())
        .await
        .map(|_| ()),
    }
    .unwrap();
}

async fn exists(app: &TestApp, conversation: &str) -> bool {
    match app
        .get(&format!("/v1/conversations/{conversation}"))
        .await
        .status()
    {
        StatusCode::OK => true,
        StatusCode::NOT_FOUND => false,
        other => panic!("{conversation}: {other}"),
    }
}

/// Waits (at most 10 s) until `conversation` is gone.
async fn until_erased(app: &TestApp, conversation: &str) {
    for _ in 0..200 {
        if !exists(app, conversation).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{conversation} was not erased within 10 s");
}

const KEYS: &str = "keep:keep-key-0123456789abc retention_days=off,\
                    long:long-key-0123456789abc retention_days=2,\
                    plain:plain-key-0123456789ab";

#[tokio::test]
async fn each_tenants_idle_conversations_are_erased_by_its_own_rule() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some(KEYS.into()),
        retention_days: Some(1),
        retention_sweep_secs: 1,
        ..Default::default()
    })
    .await;
    let tenants = [
        ("keep", "keep-key-0123456789abc"),
        ("long", "long-key-0123456789abc"),
        ("plain", "plain-key-0123456789ab"),
    ];
    let erased_before = metric(
        &app.metrics_text().await,
        r#"gatekeeper_conversations_erased_total{cause="retention"}"#,
    );
    for (tenant, key) in tenants {
        let as_tenant = app.with_key(key);
        for (name, days) in [("old", 3.0), ("middling", 1.5), ("fresh", 0.0)] {
            expect(
                as_tenant.append(name, json!(tau_turns(2))).await,
                StatusCode::CREATED,
            )
            .await;
            age(&app.store, tenant, name, days).await;
        }
    }
    let (keep, long, plain) = (
        app.with_key(tenants[0].1),
        app.with_key(tenants[1].1),
        app.with_key(tenants[2].1),
    );
    until_erased(&plain, "middling").await;
    until_erased(&plain, "old").await;
    until_erased(&long, "old").await;
    // Another sweep or two, to see what stays.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        exists(&plain, "fresh").await,
        "the default keeps what is younger than a day"
    );
    assert!(
        exists(&long, "middling").await && exists(&long, "fresh").await,
        "2 days for this tenant"
    );
    for name in ["old", "middling", "fresh"] {
        assert!(exists(&keep, name).await, "retention_days=off keeps {name}");
    }
    let erased = metric(
        &app.metrics_text().await,
        r#"gatekeeper_conversations_erased_total{cause="retention"}"#,
    );
    assert!(erased >= erased_before + 3.0, "{erased_before} → {erased}");
}

#[tokio::test]
async fn without_retention_nothing_idle_is_erased() {
    let app = spawn_app_with(ServeConfig {
        retention_sweep_secs: 1,
        ..Default::default()
    })
    .await;
    expect(
        app.append("ancient", json!(tau_turns(1))).await,
        StatusCode::CREATED,
    )
    .await;
    age(&app.store, "default", "ancient", 3650.0).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(exists(&app, "ancient").await);
}

#[tokio::test]
async fn a_full_batch_is_followed_by_the_next_without_waiting_for_the_next_sweep() {
    let app = spawn_app().await;
    // One more than a batch (100), idle before the sweeper starts.
    let names: Vec<String> = (0..=100).map(|i| format!("idle-{i}")).collect();
    for name in &names {
        expect(
            app.append(name, json!(tau_turns(1))).await,
            StatusCode::CREATED,
        )
        .await;
        age(&app.store, "default", name, 3.0).await;
    }
    // Its first sweep runs as it starts; the next would come an hour later.
    let sweeper = app
        .another_process_with(ServeConfig {
            retention_days: Some(1),
            retention_sweep_secs: 3600,
            ..Default::default()
        })
        .await;
    for name in &names {
        until_erased(&sweeper, name).await;
    }
}

#[test]
fn retention_is_off_only_when_no_rule_keeps_a_number_of_days() {
    use gatekeeper::service::Retention;
    let tenant = |name: &str| gatekeeper::domain::TenantId::parse(name).unwrap();
    let cases = [
        (None, vec![], true),
        (None, vec![(tenant("keep"), None)], true),
        (Some(30), vec![], false),
        (Some(30), vec![(tenant("keep"), None)], false),
        (
            None,
            vec![(tenant("keep"), None), (tenant("short"), Some(1))],
            false,
        ),
    ];
    for (default_days, tenants, off) in cases {
        let retention = Retention {
            default_days,
            tenants,
        };
        assert_eq!(retention.is_off(), off, "{retention:?}");
    }
}

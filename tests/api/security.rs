//! Per-tenant rate limits: off by default; on, 429 with Retry-After for that tenant only.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;

#[tokio::test]
async fn a_tenant_over_its_rate_gets_429_with_retry_after_and_other_tenants_do_not() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("a:tenant-a-key-0123456789,b:tenant-b-key-0123456789".into()),
        rate_limit_per_sec: 0.5,
        rate_limit_burst: 3,
        ..Default::default()
    })
    .await;
    let (a, b) = (
        app.with_key("tenant-a-key-0123456789"),
        app.with_key("tenant-b-key-0123456789"),
    );
    for _ in 0..3 {
        assert_eq!(
            a.get("/v1/conversations/c").await.status(),
            StatusCode::NOT_FOUND,
            "within the burst"
        );
    }
    let limited = a.get("/v1/conversations/c").await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1..=2).contains(&retry_after),
        "one token every 2 s: {retry_after}"
    );
    let problem = expect(limited, StatusCode::TOO_MANY_REQUESTS).await;
    assert_eq!(problem["type"], "urn:gatekeeper:problem:rate-limited");
    assert_eq!(
        b.get("/v1/conversations/c").await.status(),
        StatusCode::NOT_FOUND,
        "b has its own bucket"
    );
    // Probes are never limited.
    for _ in 0..5 {
        assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn without_a_configured_rate_nothing_is_limited() {
    let app = spawn_app_with(ServeConfig {
        api_keys: Some("a:tenant-a-key-0123456789".into()),
        ..Default::default()
    })
    .await;
    let a = app.with_key("tenant-a-key-0123456789");
    for _ in 0..200 {
        assert_eq!(
            a.get("/v1/conversations/c").await.status(),
            StatusCode::NOT_FOUND
        );
    }
}

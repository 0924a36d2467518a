//! What a request may cost, whoever sends it (issue 13): label sets bounded, limits answered
//! before the work.

use crate::support::*;
use reqwest::{Method, StatusCode};

#[tokio::test]
async fn requests_with_unknown_methods_add_no_metric_labels() {
    let app = spawn_app().await;
    // Warm the `other` series, then count the series.
    let warm = Method::from_bytes(b"WARMUP").unwrap();
    app.client
        .request(warm, app.url("/healthz"))
        .send()
        .await
        .unwrap();
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    app.metrics_text().await; // the scrape's own series
    let before = app.metrics_text().await;
    for i in 0..300 {
        let method = Method::from_bytes(format!("X{i:04}YZ").as_bytes()).unwrap();
        let response = app
            .client
            .request(method, app.url("/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
    let after = app.metrics_text().await;
    assert!(!after.contains("X0001YZ"), "a method token became a label");
    assert!(
        series(&after) <= series(&before) + 4,
        "300 odd methods added {} series",
        series(&after) - series(&before)
    );
    assert!(metric(&after, "gatekeeper_http_requests_total{method=\"other\"}") >= 300.0);
}

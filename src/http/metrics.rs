//! Prometheus metrics: one recorder per process, and the request middleware that feeds it.

use super::Error;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The process-wide recorder, installed on first use (tests start many apps in one process).
pub fn handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("gatekeeper_http_request_duration_seconds".into()),
                    &[
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                        5.0, 10.0,
                    ],
                )
                .expect("static bucket list is not empty")
                .set_buckets_for_metric(
                    Matcher::Full("gatekeeper_write_lock_seconds".into()),
                    &[
                        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                        0.25, 0.5, 1.0, 2.5,
                    ],
                )
                .expect("static bucket list is not empty")
                .install_recorder()
                .expect("the metrics recorder is installed once per process")
        })
        .clone()
}

/// Keeps the histograms bounded when nothing scrapes `/metrics`: the exporter only drains them
/// on a render or an upkeep, so one task per process runs the upkeep every few seconds.
pub fn spawn_upkeep() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let handle = handle();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tick.tick().await;
                handle.run_upkeep();
            }
        });
    });
}

/// A method as a label: the standard ones by name, any other token (a client may send any) as
/// `other`, so no request can add label values.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method as M;
    match *method {
        M::GET => "GET",
        M::POST => "POST",
        M::PATCH => "PATCH",
        M::PUT => "PUT",
        M::DELETE => "DELETE",
        M::HEAD => "HEAD",
        M::OPTIONS => "OPTIONS",
        M::TRACE => "TRACE",
        M::CONNECT => "CONNECT",
        _ => "other",
    }
}

/// Counts and times every request by route and status, and bounds its duration.
pub async fn track(req: Request, next: Next, timeout: Duration) -> Response {
    let start = Instant::now();
    let method = method_label(req.method());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => Error::Timeout.into_response(),
    };
    let status = response.status().as_u16().to_string();
    let labels = [
        ("route", route),
        ("method", method.to_owned()),
        ("status", status),
    ];
    metrics::counter!("gatekeeper_http_requests_total", &labels).increment(1);
    metrics::histogram!("gatekeeper_http_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    response
}

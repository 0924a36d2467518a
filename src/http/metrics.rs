//! Prometheus metrics: one recorder per process, and the request middleware that feeds it.

use super::Error;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock, PoisonError, RwLock};
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
    let route = req.extensions().get::<MatchedPath>().cloned();
    let response = match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => Error::Timeout.into_response(),
    };
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let metrics = request_metrics(route, method, response.status().as_u16());
    metrics.count.increment(1);
    metrics.duration.record(start.elapsed().as_secs_f64());
    response
}

/// The request metrics of one route, method and status.
#[derive(Clone)]
struct RequestMetrics {
    count: metrics::Counter,
    duration: metrics::Histogram,
}

/// Each route, method and status's metrics, registered on its first request: registering
/// them on every request (labels built, keys looked up) cost about 20 allocations a request.
/// The set is bounded as the labels are: routes and methods are fixed lists, and statuses the
/// service's own.
fn request_metrics(route: &str, method: &'static str, status: u16) -> RequestMetrics {
    type Known = HashMap<String, Vec<(&'static str, u16, RequestMetrics)>>;
    static KNOWN: LazyLock<RwLock<Known>> = LazyLock::new(RwLock::default);
    let find = |known: &Known| {
        let of_route = known.get(route)?;
        of_route
            .iter()
            .find(|(m, s, _)| (*m, *s) == (method, status))
            .map(|(_, _, metrics)| metrics.clone())
    };
    if let Some(metrics) = find(&KNOWN.read().unwrap_or_else(PoisonError::into_inner)) {
        return metrics;
    }
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(metrics) = find(&known) {
        return metrics;
    }
    let labels = [
        ("route", route.to_owned()),
        ("method", method.to_owned()),
        ("status", status.to_string()),
    ];
    let metrics = RequestMetrics {
        count: metrics::counter!("gatekeeper_http_requests_total", &labels),
        duration: metrics::histogram!("gatekeeper_http_request_duration_seconds", &labels),
    };
    let of_route = known.entry(route.to_owned()).or_default();
    of_route.push((method, status, metrics.clone()));
    metrics
}

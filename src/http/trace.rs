//! The request span. While traces are exported (see `crate::telemetry`) it follows the HTTP
//! server semantic conventions and continues the caller's W3C `traceparent`; otherwise it is
//! the plain span every log line of the request carries, at no extra cost.

use axum::extract::MatchedPath;
use axum::http::{Request, Response};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tower_http::trace::{DefaultOnResponse, OnResponse};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Called once by the tracing setup when it installs an exporter.
pub fn export_traces() {
    EXPORTING.store(true, Ordering::Relaxed);
}

fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

pub fn request_span<B>(req: &Request<B>) -> Span {
    let id = req.headers().get(super::REQUEST_ID);
    let id = id.and_then(|v| v.to_str().ok()).unwrap_or("-");
    if !exporting() {
        return tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id);
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let name = match route {
        Some(route) => format!("{} {route}", req.method()),
        None => req.method().to_string(),
    };
    let span = tracing::info_span!(
        "request",
        otel.name = name,
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %req.method(),
        http.route = route,
        http.response.status_code = Empty,
        url.path = req.uri().path(),
        request_id = id,
        gatekeeper.tenant = Empty,
        gen_ai.conversation.id = Empty,
    );
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(req.headers()))
    });
    // Fails only without the OpenTelemetry layer, which `exporting()` rules out.
    let _ = span.set_parent(parent);
    span
}

/// The answer's status on the request span (a 5xx marks it failed), then the usual DEBUG line.
pub fn on_response<B>(res: &Response<B>, latency: Duration, span: &Span) {
    if exporting() {
        span.record("http.response.status_code", res.status().as_u16());
        if res.status().is_server_error() {
            span.record("otel.status_code", "error");
        }
    }
    DefaultOnResponse::default().on_response(res, latency, span);
}

/// Records `value` as `field` of the request span, while traces are exported.
pub fn record(field: &'static str, value: &str) {
    if exporting() {
        Span::current().record(field, value);
    }
}

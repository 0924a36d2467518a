//! Liveness, readiness and metrics: unauthenticated, for probes and scrapers.

use crate::api::Status;
use crate::http::openapi::ProblemDoc;
use crate::http::{AppState, Error, metrics};
use crate::store::Store;
use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    summary = "Liveness: the process is up",
    responses((status = 200, description = "Up", body = Status))
)]
pub async fn healthz() -> Json<Status> {
    Json(Status {
        status: "ok".into(),
    })
}

/// Ready when the database answers, the migrations are in and shutdown has not begun.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness: database reachable and migrated, not draining",
    responses(
        (status = 200, description = "Ready", body = Status),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    )
)]
pub async fn readyz<S: Store>(State(state): State<AppState<S>>) -> Result<Json<Status>, Error> {
    if state.is_draining() {
        return Err(Error::Unavailable("draining: shutdown has begun".into()));
    }
    state.readiness.check().map_err(Error::Unavailable)?;
    Ok(Json(Status {
        status: "ready".into(),
    }))
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain"))
)]
pub async fn metrics() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics::handle().render(),
    )
}

pub async fn not_found() -> Error {
    Error::NotFound("no such route; the API lives under /v1".into())
}

pub async fn method_not_allowed(method: axum::http::Method) -> Error {
    Error::MethodNotAllowed(format!("{method} is not allowed on this route"))
}

/// The OpenAPI document, built once.
pub async fn openapi_yaml() -> impl IntoResponse {
    static DOC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    (
        [(CONTENT_TYPE, "application/yaml")],
        DOC.get_or_init(crate::http::openapi::yaml).as_str(),
    )
}

pub async fn openapi_json() -> impl IntoResponse {
    static DOC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    (
        [(CONTENT_TYPE, "application/json")],
        DOC.get_or_init(crate::http::openapi::json).as_str(),
    )
}

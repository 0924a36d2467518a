//! Liveness, readiness and metrics: unauthenticated, for probes and scrapers.

use crate::http::{AppState, Error, metrics};
use crate::store::Storage;
use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use serde_json::{Value, json};

pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// Ready when the database answers, the migrations are in and shutdown has not begun.
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, Error> {
    if state.is_draining() {
        return Err(Error::Unavailable(sqlx::Error::PoolClosed));
    }
    match state.store.ready().await {
        Ok(true) => Ok(Json(json!({ "status": "ready" }))),
        Ok(false) => Err(Error::Unavailable(sqlx::Error::Protocol(
            "migrations are not applied yet".into(),
        ))),
        Err(e) => Err(Error::Unavailable(e)),
    }
}

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

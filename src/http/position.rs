//! Read-your-writes across replicas: every successful write answer carries the commit position
//! (`Gatekeeper-Position`), which a later read sends back as `Gatekeeper-Min-Position`
//! ([`Reads`](super::extract::Reads)) to be answered only from a state that holds the write.

use super::AppState;
use super::extract::POSITION;
use crate::store::Store;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by [`Reads`](super::extract::Reads) when a replica answers the request.
#[derive(Clone, Default)]
pub struct OnReplica(pub Arc<AtomicBool>);

/// Asks [`Reads`](super::extract::Reads) for the primary.
#[derive(Clone, Copy)]
pub struct PrimaryOnly;

/// A `/v1` request once admitted: a read that may go to a replica is retried on the primary
/// when the replica fails it, and a write's answer carries its commit position.
pub async fn run<S: Store>(state: &AppState<S>, request: Request, next: Next) -> Response {
    match *request.method() {
        Method::GET if state.service.reads_may_use_replicas() => {
            retry_on_primary(request, next).await
        }
        Method::POST | Method::PATCH => {
            let response = next.run(request).await;
            stamp(state, response).await
        }
        _ => next.run(request).await,
    }
}

/// A read a replica could not answer (down since its last poll) is answered again by the
/// primary, once: a replica going away costs a retry, never an error.
async fn retry_on_primary(request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let again = parts.clone();
    let on_replica = OnReplica::default();
    parts.extensions.insert(on_replica.clone());
    let response = next.clone().run(Request::from_parts(parts, body)).await;
    if response.status() != StatusCode::SERVICE_UNAVAILABLE || !on_replica.0.load(Ordering::Acquire)
    {
        return response;
    }
    metrics::counter!("gatekeeper_replica_read_retries_total").increment(1);
    let mut again = Request::from_parts(again, Body::empty());
    again.extensions_mut().insert(PrimaryOnly);
    next.run(again).await
}

async fn stamp<S: Store>(state: &AppState<S>, mut response: Response) -> Response {
    if response.status().is_success() {
        match state.service.position().await {
            Ok(Some(position)) => {
                let value = HeaderValue::from_str(&position.to_string())
                    .expect("a position is ASCII hex and a slash");
                response.headers_mut().insert(POSITION, value);
            }
            Ok(None) => {}
            // The write is committed: answer it, without a position (its reads may then go to
            // a replica that has not replayed it yet, as any read without one may).
            Err(e) => tracing::warn!(error = %e, "cannot read the commit position"),
        }
    }
    response
}

//! The HTTP service: state, router and the layers around it.

pub mod admission;
pub mod error;
mod extract;
pub(crate) mod handlers;
pub mod idempotency;
pub mod metrics;
pub mod openapi;
mod position;
pub mod rate_limit;
pub mod readiness;
pub mod reconstruct_cache;
mod strict_json;
pub mod trace;
pub mod ui;

pub use error::{Error, Result};

use crate::config::ApiKeys;
use crate::coverage::Mode;
use crate::domain::Limits;
use crate::service::Service;
use crate::store::{FeedHeartbeat, Store};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::HeaderName;
use axum::routing::{get, post};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

/// What every handler shares, behind one `Arc`: axum clones the state for every extractor and
/// middleware of every request, and a clone of the fields themselves was a dozen reference
/// counts bumped and dropped each time (2–3 % of the service's CPU under reconstruct load).
pub struct AppState<S>(Arc<Shared<S>>);

impl<S> Clone for AppState<S> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<S> std::ops::Deref for AppState<S> {
    type Target = Shared<S>;

    fn deref(&self) -> &Shared<S> {
        &self.0
    }
}

impl<S> From<Shared<S>> for AppState<S> {
    fn from(shared: Shared<S>) -> Self {
        Self(Arc::new(shared))
    }
}

/// The fields of [`AppState`].
pub struct Shared<S> {
    /// The flows, over the store.
    pub service: Service<S>,
    pub keys: Arc<ApiKeys>,
    /// For a proposal that names none.
    pub default_mode: Mode,
    pub limits: Limits,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    /// In-flight request bounds, overall and per tenant.
    pub admission: Arc<admission::Admission>,
    /// Per-tenant request rate limit; `None` (the default) for none.
    pub rate_limiter: Option<Arc<rate_limit::RateLimiter>>,
    /// Reconstruct answers in memory; `None` to always ask the database.
    pub reconstruct_cache: Option<Arc<reconstruct_cache::ReconstructCache>>,
    /// How the checkpoint feed that keeps `reconstruct_cache` true checks its connection.
    pub feed_heartbeat: FeedHeartbeat,
    /// How long an Idempotency-Key's answer is kept.
    pub idempotency_ttl: Duration,
    /// Set when shutdown starts: `/readyz` turns unready so traffic moves elsewhere.
    pub draining: Arc<AtomicBool>,
    /// The background probe's last verdict on the database, which `/readyz` answers.
    pub readiness: Arc<readiness::Readiness>,
    /// How long conversations are kept, and how often retention looks.
    pub retention: crate::service::Retention,
    pub retention_every: Duration,
}

impl<S> AppState<S> {
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The service: the REST API, and `/mcp`, whose tools the REST API answers in process.
pub fn router<S: Store>(state: AppState<S>) -> Router {
    // Install the recorder before the first request, or early counts would go nowhere.
    metrics::handle();
    let mcp = crate::mcp::http_service(rest(&state, Router::new()), state.keys.is_empty());
    let mcp =
        Router::new()
            .nest_service("/mcp", mcp)
            .route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                admission::authenticate::<S>,
            ));
    rest(&state, mcp)
}

/// The REST API's routes and `extra`, under the service's layers (metrics, timeout,
/// compression, tracing, request ids).
fn rest<S: Store>(state: &AppState<S>, extra: Router<AppState<S>>) -> Router {
    use handlers::*;
    let state = state.clone();
    let conversation = "/v1/conversations/{conversation}";
    let api = Router::new()
        .route("/v1/conversations", get(lifecycle::list::<S>))
        .route(
            conversation,
            get(turns::conversation::<S>).delete(lifecycle::erase::<S>),
        )
        .route(
            &format!("{conversation}/export"),
            get(lifecycle::export::<S>),
        )
        .route(
            &format!("{conversation}/import"),
            post(lifecycle::import::<S>),
        )
        .route(
            &format!("{conversation}/turns"),
            post(turns::append::<S>).get(turns::list::<S>),
        )
        .route(
            &format!("{conversation}/turns/{{id}}"),
            get(turns::turn::<S>).patch(turns::set_pinned::<S>),
        )
        .route(
            &format!("{conversation}/compactions"),
            post(compactions::propose::<S>).get(compactions::list::<S>),
        )
        .route(
            &format!("{conversation}/compactions/{{checkpoint_id}}"),
            get(compactions::one::<S>),
        )
        .route(
            &format!("{conversation}/reconstruct/{{turn}}"),
            get(reads::reconstruct::<S>),
        )
        .route(&format!("{conversation}/context"), get(reads::context::<S>))
        .route(
            &format!("{conversation}/compaction-plan"),
            get(reads::compaction_plan::<S>),
        )
        .route(
            &format!("{conversation}/search"),
            get(search::conversation::<S>),
        )
        .route("/v1/search", get(search::tenant::<S>))
        .route_layer(
            ServiceBuilder::new()
                .layer(DefaultBodyLimit::max(state.max_body_bytes))
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    admission::admit::<S>,
                )),
        );
    let timeout = state.request_timeout;
    Router::new()
        .merge(api)
        .merge(extra)
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz::<S>))
        .route("/metrics", get(health::metrics))
        .route("/openapi.yaml", get(health::openapi_yaml))
        .route("/openapi.json", get(health::openapi_json))
        .merge(ui::routes())
        .fallback(health::not_found)
        .method_not_allowed_fallback(health::method_not_allowed)
        // One layer of them all: each `Router::layer` boxes the routes beneath it again, and a
        // request clones every box of its route's chain at every level (quadratic: 28
        // allocations a request with these as five layers).
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(PropagateRequestIdLayer::new(REQUEST_ID))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(trace::request_span)
                        .on_response(trace::on_response),
                )
                .layer(CompressionLayer::new())
                .layer(axum::middleware::from_fn(move |req, next| {
                    metrics::track(req, next, timeout)
                })),
        )
        .with_state(state)
}

//! Admission: who is asking (the bearer key), whether they are within their rate, and whether
//! there is room, all before any work. In-flight requests are bounded per tenant and overall;
//! past either bound a request is shed with 503 and `Retry-After`, so one tenant's flood leaves
//! the others their share.

use super::{AppState, Error};
use crate::domain::TenantId;
use crate::service::TenantSlots;
use crate::store::Store;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct Admission {
    overall: Arc<Semaphore>,
    tenants: TenantSlots,
}

impl Admission {
    pub fn new(overall: usize, per_tenant: usize) -> Self {
        Self {
            overall: Arc::new(Semaphore::new(overall)),
            tenants: TenantSlots::new(per_tenant),
        }
    }

    /// Room for one more request of `tenant`, held until the permits drop.
    fn admit(&self, tenant: &TenantId) -> Result<[OwnedSemaphorePermit; 2], Error> {
        let own = self.tenants.of(tenant);
        let shed = |scope: &'static str, detail: String| {
            metrics::counter!("gatekeeper_requests_shed_total", "scope" => scope).increment(1);
            Error::Overloaded(detail)
        };
        let own = own.try_acquire_owned().map_err(|_| {
            shed(
                "tenant",
                "this tenant is at its in-flight request limit; retry after Retry-After".into(),
            )
        })?;
        let overall = self.overall.clone().try_acquire_owned().map_err(|_| {
            shed(
                "overall",
                "the service is at its in-flight request limit; retry after Retry-After".into(),
            )
        })?;
        Ok([own, overall])
    }
}

/// The middleware on every `/v1` route: authenticates (401), rate-limits (429) and admits (503),
/// then hands the tenant to the handler through the request's extensions. One layer, not one
/// per concern: each layer costs every request a boxed clone of the routes beneath it.
pub async fn admit<S: Store>(
    State(state): State<AppState<S>>,
    mut request: Request,
    next: Next,
) -> Response {
    let tenant = match tenant_of(&state, &request) {
        Ok(tenant) => tenant,
        Err(e) => return e.into_response(),
    };
    let _permits = match state.admission.admit(&tenant) {
        Ok(permits) => permits,
        Err(e) => return e.into_response(),
    };
    request.extensions_mut().insert(tenant);
    request
        .extensions_mut()
        .insert(super::extract::JsonBudget::for_limits(state.limits));
    super::position::run(&state, request, next).await
}

/// The middleware on `/mcp`: authenticates (401) and nothing else, since each tool call is a
/// REST request of its own, rate-limited and admitted as one.
pub async fn authenticate<S: Store>(
    State(state): State<AppState<S>>,
    request: Request,
    next: Next,
) -> Response {
    match key_owner(&state, &request) {
        Ok(_) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// The tenant the bearer key belongs to (the single tenant when no keys are configured), within
/// its rate.
fn tenant_of<S>(state: &AppState<S>, request: &Request) -> Result<TenantId, Error> {
    let tenant = key_owner(state, request)?;
    super::trace::record("gatekeeper.tenant", tenant.as_str());
    // Rate limits are per tenant, so only keyed services have them.
    if let Some(limiter) = &state.rate_limiter
        && let Err(wait) = limiter.check(&tenant, std::time::Instant::now())
    {
        return Err(Error::TooManyRequests(wait));
    }
    Ok(tenant)
}

/// The tenant the bearer key belongs to (the single tenant when no keys are configured).
fn key_owner<S>(state: &AppState<S>, request: &Request) -> Result<TenantId, Error> {
    if state.keys.is_empty() {
        return Ok(TenantId::single());
    }
    let presented = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110 §11.1).
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, key)| key.trim())
        .ok_or(Error::Unauthorized)?;
    state.keys.tenant_for(presented).ok_or(Error::Unauthorized)
}

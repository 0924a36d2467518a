//! Extractors that turn every rejection into our problem+json, and the tenant from the key.

use super::{AppState, Error};
use crate::domain::TenantId;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// A JSON body; malformed, mistyped, oversized or wrongly labelled bodies become clear 4xx.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_error(rejection)),
        }
    }
}

fn json_error(rejection: JsonRejection) -> Error {
    let detail = rejection.body_text();
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge(detail),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Error::UnsupportedMediaType(
            "expected a body with `Content-Type: application/json`".into(),
        ),
        StatusCode::UNPROCESSABLE_ENTITY => {
            Error::unprocessable(detail, serde_json::json!({ "field": "body" }))
        }
        _ => Error::BadRequest {
            detail,
            field: Some("body".into()),
        },
    }
}

/// Path parameters; a turn id that is not a number is a 400 naming the parameter.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(rejection) => Err(path_error(rejection)),
        }
    }
}

fn path_error(rejection: PathRejection) -> Error {
    Error::BadRequest {
        detail: rejection.body_text(),
        field: Some("path".into()),
    }
}

/// Query parameters, with the same treatment.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(query_error(rejection)),
        }
    }
}

fn query_error(rejection: QueryRejection) -> Error {
    Error::BadRequest {
        detail: rejection.body_text(),
        field: Some("query".into()),
    }
}

/// The tenant the request's bearer key belongs to (or the single tenant when no keys are set).
pub struct Tenant(pub TenantId);

impl FromRequestParts<AppState> for Tenant {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if state.keys.is_empty() {
            return Ok(Self(TenantId::single()));
        }
        let presented = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(Error::Unauthorized)?;
        state
            .keys
            .tenant_for(presented)
            .map(Self)
            .ok_or(Error::Unauthorized)
    }
}

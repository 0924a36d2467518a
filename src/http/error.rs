//! One error type for every handler, rendered as RFC 9457 `application/problem+json`.

use crate::api::VerdictResponse;
use crate::append::AppendConflict;
use crate::coverage::{IdRanges, ProposalError};
use crate::domain::{ExpectedCheckpoint, Invalid};
use crate::{service, store};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub const PROBLEM_JSON: &str = "application/problem+json";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("missing or malformed credentials")]
    Unauthorized,
    #[error("{0}")]
    NotFound(String),
    #[error("{detail}")]
    BadRequest {
        detail: String,
        field: Option<String>,
    },
    #[error("{0}")]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{detail}")]
    Conflict {
        detail: String,
        extra: Map<String, Value>,
    },
    #[error("{detail}")]
    Unprocessable {
        detail: String,
        extra: Map<String, Value>,
    },
    /// The decision rejected the proposal; the body carries the whole verdict.
    #[error("the proposal was rejected")]
    Rejected(Box<VerdictResponse>),
    /// The database could not be reached, did not answer in time, or the service is not ready
    /// (draining, migrations missing): retry later. The cause is logged, not shown.
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("this tenant is over its request rate; retry after the time in Retry-After")]
    TooManyRequests(std::time::Duration),
    #[error("request timed out")]
    Timeout,
    /// Too many requests in flight (all tenants, or this one): shed before any work.
    #[error("{0}")]
    Overloaded(String),
    #[error("internal error: {0:#}")]
    Internal(#[from] anyhow::Error),
}

impl From<store::Error> for Error {
    fn from(e: store::Error) -> Self {
        match e {
            store::Error::Unavailable(cause) => Error::Unavailable(cause.to_string()),
            other => Error::Internal(other.into()),
        }
    }
}

impl From<service::Error> for Error {
    fn from(e: service::Error) -> Self {
        use service::Error as E;
        match e {
            E::NoConversation(_)
            | E::TurnNotInLog { .. }
            | E::FromNotInLog { .. }
            | E::NoCheckpoint { .. } => Error::NotFound(e.to_string()),
            E::IdsNotInLog(missing) => Error::ids_not_in_log(&missing),
            E::Stale { expected, latest } => stale_checkpoint(expected, latest),
            E::Invalid(invalid) => invalid.into(),
            E::AppendConflict(conflict) => append_conflict(conflict),
            E::TooManyCheckpoints { max, .. } => Error::conflict(
                format!(
                    "{e}: new checkpoints are refused (GATEKEEPER_MAX_CHECKPOINTS_PER_CONVERSATION); nothing was persisted"
                ),
                json!({ "max_checkpoints": max }),
            ),
            E::PinCovered {
                checkpoint_id,
                turn,
            } => Error::conflict(
                format!(
                    "checkpoint {checkpoint_id} already covers turn {turn}: its summary stands for the turn, so it cannot be pinned; nothing changed"
                ),
                json!({ "checkpoint_id": checkpoint_id, "field": "pinned" }),
            ),
            E::Import(ref refused) => Error::unprocessable(
                format!("the import was refused at {refused}; nothing was imported"),
                json!({ "line": refused.line }),
            ),
            E::ImportOverExisting(_) => Error::conflict(
                format!("{e}; nothing was imported (erase it first, or import under another name)"),
                json!({}),
            ),
            E::Store(e) => e.into(),
            E::Blocking(_) => Error::Internal(e.into()),
        }
    }
}

fn stale_checkpoint(expected: ExpectedCheckpoint, latest: Option<i64>) -> Error {
    let expected = match expected {
        ExpectedCheckpoint::Latest(id) => json!(id),
        _ => json!(null),
    };
    Error::conflict(
        format!(
            "expected_checkpoint is {expected} but the latest checkpoint is {}",
            json!(latest)
        ),
        json!({ "expected_checkpoint": expected, "latest_checkpoint": latest, "field": "expected_checkpoint" }),
    )
}

fn append_conflict(conflict: AppendConflict) -> Error {
    match conflict {
        AppendConflict::Differs { ids } => Error::conflict(
            format!(
                "turns {ids:?} are already stored with different content; nothing of the batch was written"
            ),
            json!({ "conflicting_ids": ids }),
        ),
        AppendConflict::Gap {
            index,
            id,
            expected,
        } => Error::conflict(
            format!(
                "turns[{index}] has id {id} but the next id is {expected}; ids have no gaps, nothing was written"
            ),
            json!({ "id": id, "expected_id": expected, "field": format!("turns[{index}].id") }),
        ),
        AppendConflict::DuplicateInBatch { id } => Error::conflict(
            format!("id {id} appears twice in the batch with different turns; nothing was written"),
            json!({ "conflicting_ids": [id] }),
        ),
    }
}

impl From<ProposalError> for Error {
    fn from(e: ProposalError) -> Self {
        let mut extra = Map::new();
        let field = match &e {
            ProposalError::FromAfterTo { .. } => "to",
            ProposalError::NegativeFrom { .. } => "from",
            ProposalError::NonPositiveBudget { .. } => "summary_budget",
            ProposalError::MalformedConsumed { .. }
            | ProposalError::ConsumedOutsideRange { .. } => "consumed",
            ProposalError::TurnsDoNotMatchRange { missing, .. } => {
                extra.insert("missing_ids".into(), json!(missing));
                "to"
            }
        };
        extra.insert("field".into(), json!(field));
        Error::Unprocessable {
            detail: e.to_string(),
            extra,
        }
    }
}

impl Error {
    pub fn conflict(detail: impl Into<String>, extra: Value) -> Self {
        Error::Conflict {
            detail: detail.into(),
            extra: into_map(extra),
        }
    }

    pub fn unprocessable(detail: impl Into<String>, extra: Value) -> Self {
        Error::Unprocessable {
            detail: detail.into(),
            extra: into_map(extra),
        }
    }

    pub fn ids_not_in_log(missing: &IdRanges) -> Self {
        Self::unprocessable(
            format!("turn ids {missing} are not in the log"),
            json!({ "missing_ids": missing, "field": "to" }),
        )
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Error::Unauthorized => StatusCode::UNAUTHORIZED,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Error::Invalid(_) | Error::Unprocessable { .. } | Error::Rejected(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Error::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Error::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Conflict { .. } => StatusCode::CONFLICT,
            Error::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Error::Unavailable(_) | Error::Timeout | Error::Overloaded(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The last segment of the problem `type` URI; documented in the README.
    fn slug(&self) -> &'static str {
        match self {
            Error::Unauthorized => "unauthorized",
            Error::NotFound(_) => "not-found",
            Error::BadRequest { .. } => "bad-request",
            Error::Invalid(_) | Error::Unprocessable { .. } => "invalid-request",
            Error::Rejected(_) => "proposal-rejected",
            Error::MethodNotAllowed(_) => "method-not-allowed",
            Error::UnsupportedMediaType(_) => "unsupported-media-type",
            Error::PayloadTooLarge(_) => "payload-too-large",
            Error::Conflict { .. } => "conflict",
            Error::TooManyRequests(_) => "rate-limited",
            Error::Unavailable(_) | Error::Timeout => "unavailable",
            Error::Overloaded(_) => "overloaded",
            Error::Internal(_) => "internal",
        }
    }
}

fn into_map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry_after = match &self {
            Error::TooManyRequests(wait) => Some(wait.as_secs_f64().ceil().max(1.0) as u64),
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(1),
            _ => None,
        };
        let mut body = Map::new();
        body.insert(
            "type".into(),
            json!(format!("urn:gatekeeper:problem:{}", self.slug())),
        );
        body.insert(
            "title".into(),
            json!(status.canonical_reason().unwrap_or("Error")),
        );
        body.insert("status".into(), json!(status.as_u16()));
        let detail = match &self {
            // Causes of 5xx are logged once here and never shown to the client.
            Error::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "internal error");
                "an internal error occurred; it has been logged".to_owned()
            }
            Error::Unavailable(cause) => {
                tracing::warn!(error = %cause, "unavailable");
                "the database is unavailable; retry shortly".to_owned()
            }
            other => other.to_string(),
        };
        body.insert("detail".into(), json!(detail));
        match self {
            Error::Invalid(invalid) => {
                body.insert("field".into(), json!(invalid.field));
            }
            Error::BadRequest {
                field: Some(field), ..
            } => {
                body.insert("field".into(), json!(field));
            }
            Error::Conflict { extra, .. } | Error::Unprocessable { extra, .. } => {
                body.extend(extra)
            }
            Error::Rejected(verdict) => body.extend(verdict.rejection_problem()),
            _ => {}
        }
        let mut response = (status, axum::Json(Value::Object(body))).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(seconds) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

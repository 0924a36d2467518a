//! Extractors that turn every rejection into our problem+json, and the tenant from the key.

use super::Error;
use super::openapi::ConversationPath;
use super::strict_json::Strict;
use crate::domain::{ConversationId, TenantId};
use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A JSON body; malformed, mistyped, oversized or wrongly labelled bodies become clear 4xx:
/// bad JSON syntax is 400, JSON of the wrong shape 422 (naming the member), 413, 415.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<mime::Mime>().ok())
            .is_some_and(|m| {
                m.type_() == "application"
                    && (m.subtype() == "json" || m.suffix().is_some_and(|s| s == "json"))
            });
        if !is_json {
            return Err(Error::UnsupportedMediaType(
                "expected a body with `Content-Type: application/json`".into(),
            ));
        }
        let budget = req
            .extensions()
            .get::<JsonBudget>()
            .map_or(usize::MAX, |b| b.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            match rejection.status() {
                StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge(rejection.body_text()),
                _ => Error::BadRequest {
                    detail: rejection.body_text(),
                    field: Some("body".into()),
                },
            }
        })?;
        // Parsed here, on the async worker, even when large: parsing on the blocking pool
        // instead grew the service's RSS by ~35 MiB over six 10,000-turn batches (glibc gives
        // each thread its own arena) and made no measurable difference to other requests'
        // latency (docs/performance.md, the stall line).
        parse_body(&bytes, budget)
    }
}

/// The most JSON values (objects, arrays, strings, numbers, …) a body of this service may hold,
/// from the limits (turns per batch, anchors per turn); set by admission for every `/v1` route.
#[derive(Debug, Clone, Copy)]
pub struct JsonBudget(pub usize);

impl JsonBudget {
    pub fn for_limits(limits: crate::domain::Limits) -> Self {
        // A turn is an object of at most 7 members plus its anchors; the rest of a body is small.
        let per_turn = 16 + limits.max_anchors_per_turn;
        Self(
            limits
                .max_batch_turns
                .saturating_mul(per_turn)
                .saturating_add(1024),
        )
    }
}

fn parse_body<T: DeserializeOwned>(bytes: &[u8], budget: usize) -> Result<ApiJson<T>, Error> {
    // Most bodies are valid: they are parsed once without tracking the path (which allocates a
    // string for every member it passes). Only a body that fails is parsed again, tracked, so
    // that its error names the member; both passes accept exactly the same bodies.
    match parse_untracked(bytes, budget) {
        Some(parsed) => Ok(ApiJson(parsed)),
        None => parse_tracked(bytes, budget),
    }
}

/// [`parse_tracked`]'s checks without its paths: `None` wherever it fails.
fn parse_untracked<T: DeserializeOwned>(bytes: &[u8], budget: usize) -> Option<T> {
    use serde::de::DeserializeSeed;
    let budget = std::cell::Cell::new(budget);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut value = Strict { budget: &budget }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    if !value.is_object() || array_turn(&value).is_some() {
        return None;
    }
    integral_floats_to_integers(&mut value);
    T::deserialize(value).ok()
}

/// The first member of `turns` that is an array: serde would read it positionally into a turn.
fn array_turn(body: &Value) -> Option<usize> {
    body.get("turns")
        .and_then(Value::as_array)
        .and_then(|t| t.iter().position(Value::is_array))
}

fn parse_tracked<T: DeserializeOwned>(bytes: &[u8], budget: usize) -> Result<ApiJson<T>, Error> {
    // Syntax first (400), then shape (422): a body that is not JSON at all is a different
    // mistake from JSON with a wrong member.
    let mut value = parse_strict(bytes, budget)?;
    // Serde would read a JSON array positionally into a struct: the API takes objects only.
    if !value.is_object() {
        return Err(Error::unprocessable(
            "body: must be a JSON object",
            serde_json::json!({ "field": "body" }),
        ));
    }
    if let Some(i) = array_turn(&value) {
        return Err(Error::unprocessable(
            format!("turns[{i}]: must be a JSON object"),
            serde_json::json!({ "field": format!("turns[{i}]") }),
        ));
    }
    integral_floats_to_integers(&mut value);
    serde_path_to_error::deserialize(value)
        .map(ApiJson)
        .map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "body".to_owned() } else { path };
            Error::unprocessable(
                format!("{field}: {}", e.inner()),
                serde_json::json!({ "field": field }),
            )
        })
}

/// Syntax errors are 400; a member given twice is 422 naming it; more values than `budget`
/// is 422 on the body, found before the tree is built.
fn parse_strict(bytes: &[u8], budget: usize) -> Result<Value, Error> {
    use serde::de::DeserializeSeed;
    let syntax = |e: serde_json::Error| Error::BadRequest {
        detail: format!("the body is not valid JSON: {e}"),
        field: Some("body".into()),
    };
    let budget = std::cell::Cell::new(budget);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut track = serde_path_to_error::Track::new();
    let parsed = Strict { budget: &budget }
        .deserialize(serde_path_to_error::Deserializer::new(&mut de, &mut track))
        .map_err(|e| serde_path_to_error::Error::new(track.path(), e));
    match parsed {
        Ok(value) => {
            de.end().map_err(syntax)?;
            Ok(value)
        }
        Err(e) if budget.get() == 0 => Err(Error::unprocessable(
            format!("body: {}", e.inner()),
            serde_json::json!({ "field": "body" }),
        )),
        Err(e) if e.inner().classify() == serde_json::error::Category::Data => {
            let field = e.path().to_string();
            Err(Error::unprocessable(
                format!("{field}: {}", e.inner()),
                serde_json::json!({ "field": field }),
            ))
        }
        Err(e) => Err(syntax(e.into_inner())),
    }
}

/// `3.0` is the integer 3 in JSON Schema (and to many JSON encoders); take it as one, so
/// integer members accept every JSON spelling of an integer. Other floats stay floats.
fn integral_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f >= i64::MIN as f64
                && f < i64::MAX as f64
            {
                *n = serde_json::Number::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(members) => members.values_mut().for_each(integral_floats_to_integers),
        _ => {}
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

/// The `{conversation}` path parameter, parsed; a malformed one is a 400 naming it.
pub struct Conversation(pub ConversationId);

impl<S: Send + Sync> FromRequestParts<S> for Conversation {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ApiPath(path) = ApiPath::<ConversationPath>::from_request_parts(parts, state).await?;
        ConversationId::parse(&path.conversation)
            .inspect(|id| super::trace::record("gen_ai.conversation.id", id.as_str()))
            .map(Self)
            .map_err(|e| Error::BadRequest {
                detail: e.message,
                field: Some(e.field),
            })
    }
}

/// The tenant the request's bearer key belongs to (or the single tenant when no keys are set),
/// as admission found it ([`super::admission::admit`] runs before every `/v1` handler).
pub struct Tenant(pub TenantId);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<TenantId>()
            .cloned()
            .map(Self)
            .ok_or(Error::Unauthorized)
    }
}

/// The header a read carries to be answered from a state at least as new as a write it saw.
pub const MIN_POSITION: &str = "gatekeeper-min-position";
/// The header every write answer carries when reads may go to replicas.
pub const POSITION: &str = "gatekeeper-position";

/// The flows for a read: bound to a replica that has replayed the request's
/// `Gatekeeper-Min-Position` (or the primary); a malformed one is 400.
pub struct Reads<S>(pub crate::service::Service<S>);

impl<S: crate::store::Store> FromRequestParts<super::AppState<S>> for Reads<S> {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &super::AppState<S>,
    ) -> Result<Self, Self::Rejection> {
        let min = match parts.headers.get(MIN_POSITION) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| crate::domain::Invalid::new(MIN_POSITION, "not ASCII"))
                    .and_then(str::parse::<crate::domain::Position>)
                    .map_err(|e| Error::BadRequest {
                        detail: e.message,
                        field: Some("Gatekeeper-Min-Position".into()),
                    })?,
            ),
        };
        if parts
            .extensions
            .get::<super::position::PrimaryOnly>()
            .is_some()
        {
            return Ok(Reads(state.service.clone()));
        }
        let service = state.service.reading_at(min).await;
        if service.on_replica()
            && let Some(flag) = parts.extensions.get::<super::position::OnReplica>()
        {
            flag.0.store(true, std::sync::atomic::Ordering::Release);
        }
        Ok(Reads(service))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AppendTurnsRequest;

    /// Bodies each check of [`parse_tracked`] refuses, and bodies it accepts.
    const BODIES: &[(&str, bool)] = &[
        (
            r#"{"turns": [{"role": "user", "content": "My user id is mia_li_3668."}]}"#,
            true,
        ),
        (
            r#"{"turns": [{"role": "tool", "content": "{}", "tokens": 3.0, "id": 2.0}]}"#,
            true,
        ),
        (r#"{"turns": [{"role": "user", "content": "x"}]"#, false),
        (
            r#"{"turns": [{"role": "user", "content": "x"}]} trailing"#,
            false,
        ),
        (r#"[{"role": "user", "content": "x"}]"#, false),
        (r#"{"turns": [["user", "x"]]}"#, false),
        (
            r#"{"turns": [{"role": "user", "content": "x", "content": "y"}]}"#,
            false,
        ),
        (
            r#"{"turns": [{"role": "user", "content": "x", "tokens": 2.5}]}"#,
            false,
        ),
        (
            r#"{"turns": [{"role": "narrator", "content": "x"}]}"#,
            false,
        ),
        (
            r#"{"turns": [{"role": "user", "content": "x", "colour": "red"}]}"#,
            false,
        ),
    ];

    #[test]
    fn the_untracked_pass_accepts_exactly_the_bodies_the_tracked_pass_accepts() {
        for &(body, valid) in BODIES {
            let untracked = parse_untracked::<AppendTurnsRequest>(body.as_bytes(), 1_000);
            let tracked = parse_tracked::<AppendTurnsRequest>(body.as_bytes(), 1_000);
            assert_eq!(untracked.is_some(), valid, "{body}");
            assert_eq!(tracked.is_ok(), valid, "{body}");
        }
    }

    #[test]
    fn a_body_over_the_value_budget_is_refused_by_both_passes() {
        let body = BODIES[0].0.as_bytes();
        // 5 values: the body, `turns`, the turn and its two members' values.
        assert!(parse_untracked::<AppendTurnsRequest>(body, 5).is_some());
        assert!(parse_untracked::<AppendTurnsRequest>(body, 4).is_none());
        assert!(parse_tracked::<AppendTurnsRequest>(body, 4).is_err());
    }

    #[test]
    fn a_refused_body_is_answered_with_the_tracked_passs_error_naming_the_member() {
        let body = r#"{"turns": [{"role": "user", "content": "x"}, {"role": 7, "content": "y"}]}"#;
        let Err(Error::Unprocessable { detail, .. }) =
            parse_body::<AppendTurnsRequest>(body.as_bytes(), 1_000)
        else {
            panic!("a mistyped member is 422");
        };
        assert!(detail.starts_with("turns[1].role: "), "{detail}");
    }
}

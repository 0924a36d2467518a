//! Compaction proposals: decided against the log, persisted only as far as they hold.

use crate::api::{
    CheckpointListResponse, CheckpointResponse, CompactionRequestBody, VerdictResponse,
};
use crate::coverage::Outcome;
use crate::domain::CompactionRequest;
use crate::http::extract::{ApiJson, ApiPath, ApiQuery, Conversation, Reads, Tenant};
use crate::http::idempotency::{Prior, prior, replay};
use crate::http::openapi::{
    BodyProblems, CheckpointPath, ConversationPath, MinPosition, NotFound, ProblemDoc, Problems,
};
use crate::http::{AppState, Error, Result};
use crate::service::{Proposed, Reply};
use crate::store::Store;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

#[utoipa::path(
    post,
    path = "/v1/conversations/{conversation}/compactions",
    tag = "compactions",
    summary = "Propose a compaction",
    description = "Decides which turns of [from, to] the summary really covers and persists only that pointer set. A rejected verdict is 422 problem+json carrying the whole verdict, and persists nothing.",
    params(ConversationPath, ("Idempotency-Key" = Option<String>, Header, nullable = false, pattern = r"^[!-~]{1,255}$", description = "Makes a retry safe: the same key with the same body gets the stored answer (header `Idempotent-Replayed: true`) and changes nothing; with another body, 422. Kept per conversation for `GATEKEEPER_IDEMPOTENCY_TTL_SECS`.")),
    request_body = CompactionRequestBody,
    responses(
        (status = 201, description = "Decided and persisted", body = VerdictResponse, headers(("Gatekeeper-Position" = String, description = "With read replicas: the commit position to send back as Gatekeeper-Min-Position on reads that must see this write"))),
        (status = 200, description = "Dry run: decided, nothing persisted", body = VerdictResponse, headers(("Gatekeeper-Position" = String, description = "With read replicas: the commit position to send back as Gatekeeper-Min-Position on reads that must see this write"))),
        Problems, BodyProblems, NotFound,
        (status = 409, description = "Conflict", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "Invalid request, or a rejected verdict", body = ProblemDoc, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn propose<S: Store>(
    Tenant(tenant): Tenant,
    State(state): State<AppState<S>>,
    Conversation(conversation): Conversation,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CompactionRequestBody>,
) -> Result<Response> {
    let operation = ("propose", &conversation);
    let claim = match prior(&state, &tenant, &headers, operation, &body).await? {
        Prior::Answered(response) => return Ok(response),
        Prior::Fresh(claim) => claim,
    };
    let request = CompactionRequest::parse(body, state.default_mode, state.limits)?;
    let reply = (state.service)
        .propose(&tenant, &conversation, request, claim.as_ref())
        .await?;
    let Proposed {
        verdict,
        checkpoint_id,
        dry_run,
    } = match reply {
        Reply::New(proposed) => proposed,
        Reply::Stored(answer) => return replay(answer, claim.as_ref()),
    };
    if let (Some(cache), Some(_)) = (state.reconstruct_cache.as_deref(), checkpoint_id) {
        // This process answers from the new checkpoint at once; others once the feed tells them.
        cache.checkpoint_committed(&(tenant, conversation.clone()));
    }
    let response = VerdictResponse {
        conversation: conversation.to_string(),
        checkpoint_id,
        dry_run,
        verdict,
    };
    match (response.verdict.outcome, dry_run) {
        (Outcome::Rejected, _) => Err(Error::Rejected(Box::new(response))),
        (_, true) => Ok((StatusCode::OK, Json(response)).into_response()),
        (_, false) => Ok((StatusCode::CREATED, Json(response)).into_response()),
    }
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/compactions",
    tag = "compactions",
    summary = "List checkpoints, newest first, a page at a time",
    params(ConversationPath, ListQuery, MinPosition),
    responses(
        (status = 200, description = "The checkpoints", body = CheckpointListResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn list<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<CheckpointListResponse>> {
    let limit = super::page_limit(query.limit, DEFAULT_PAGE, MAX_PAGE)?;
    let (checkpoints, next_cursor) = service
        .checkpoints(&tenant, &conversation, query.cursor, limit)
        .await?;
    Ok(Json(CheckpointListResponse {
        conversation: conversation.to_string(),
        checkpoints,
        next_cursor,
    }))
}

const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Checkpoints per page (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page: only checkpoints older than it.
    cursor: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/compactions/{checkpoint_id}",
    tag = "compactions",
    summary = "One checkpoint with its summary and verdict",
    params(ConversationPath, CheckpointPath, MinPosition),
    responses(
        (status = 200, description = "The checkpoint", body = CheckpointResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn one<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiPath(path): ApiPath<CheckpointPath>,
) -> Result<Json<CheckpointResponse>> {
    let row = service
        .checkpoint(&tenant, &conversation, path.checkpoint_id)
        .await?;
    Ok(Json(CheckpointResponse {
        conversation: conversation.to_string(),
        checkpoint_id: row.checkpoint_id,
        created_at: row.created_at,
        summary: row.summary.unwrap_or_default(),
        verdict: row.verdict,
    }))
}

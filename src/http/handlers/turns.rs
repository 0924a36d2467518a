//! Appending to the raw log and reading it back.

use crate::api::{
    AppendTurnsRequest, AppendTurnsResponse, ConversationResponse, TurnListItem, TurnListResponse,
    TurnPatch, TurnResponse,
};
use crate::domain::AppendRequest;
use crate::http::extract::{ApiJson, ApiPath, ApiQuery, Conversation, Reads, Tenant};
use crate::http::idempotency::{Prior, prior, replay};
use crate::http::openapi::{
    BodyProblems, ConversationPath, MinPosition, NotFound, ProblemDoc, Problems, TurnIdPath,
};
use crate::http::{AppState, Error, Result};
use crate::service::Reply;
use crate::store::Store;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

#[utoipa::path(
    post,
    path = "/v1/conversations/{conversation}/turns",
    tag = "turns",
    summary = "Append raw turns",
    description = "Appends a batch, all or nothing. Ids are sequence numbers without gaps (omitted: assigned). A turn stored identically is an idempotent replay; the same id with anything different is 409 and nothing is written. Tokens and anchors are counted and derived when absent.",
    params(ConversationPath, ("Idempotency-Key" = Option<String>, Header, nullable = false, pattern = r"^[!-~]{1,255}$", description = "Makes a retry safe: the same key with the same body gets the stored answer (header `Idempotent-Replayed: true`) and changes nothing; with another body, 422. Kept per conversation for `GATEKEEPER_IDEMPOTENCY_TTL_SECS`.")),
    request_body = AppendTurnsRequest,
    responses(
        (status = 201, description = "Appended", body = AppendTurnsResponse, headers(("Gatekeeper-Position" = String, description = "With read replicas: the commit position to send back as Gatekeeper-Min-Position on reads that must see this write"))),
        (status = 200, description = "Every turn was a replay; nothing written", body = AppendTurnsResponse, headers(("Gatekeeper-Position" = String, description = "With read replicas: the commit position to send back as Gatekeeper-Min-Position on reads that must see this write"))),
        Problems, BodyProblems,
        (status = 409, description = "Conflict: an id already stored with other content, or a gap", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "Invalid request", body = ProblemDoc, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn append<S: Store>(
    Tenant(tenant): Tenant,
    State(state): State<AppState<S>>,
    Conversation(conversation): Conversation,
    headers: HeaderMap,
    ApiJson(body): ApiJson<AppendTurnsRequest>,
) -> Result<Response> {
    let operation = ("append", &conversation);
    let claim = match prior(&state, &tenant, &headers, operation, &body).await? {
        Prior::Answered(response) => return Ok(response),
        Prior::Fresh(claim) => claim,
    };
    let request = AppendRequest::parse(body, state.limits)?;
    let appended = match (state.service)
        .append(&tenant, &conversation, request, claim.as_ref())
        .await?
    {
        Reply::New(appended) => appended,
        Reply::Stored(answer) => return replay(answer, claim.as_ref()),
    };
    let response = AppendTurnsResponse::from_appended(conversation.as_str(), appended);
    let status = if response.appended == 0 {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(response)).into_response())
}

const DEFAULT_PAGE: u32 = 1000;
const MAX_PAGE: u32 = 10_000;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TurnListQuery {
    /// The first turn of the page (default 0); a page's `next_from` gives the next one.
    #[param(minimum = 0)]
    from: Option<i64>,
    /// Turns per page (default 1000, at most 10000).
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/turns",
    operation_id = "list_turns",
    tag = "turns",
    summary = "List the log's turns without their content, a page at a time",
    description = "Each turn's id, role, tokens and whether it is pinned, in id order: what it takes to draw a conversation to scale (the coverage map reads it). Read the content with `GET .../turns/{id}`.",
    params(ConversationPath, TurnListQuery, MinPosition),
    responses(
        (status = 200, description = "A page of turns", body = TurnListResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn list<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiQuery(query): ApiQuery<TurnListQuery>,
) -> Result<Json<TurnListResponse>> {
    let from = query.from.unwrap_or(0);
    if from < 0 {
        return Err(Error::BadRequest {
            detail: format!("from must not be negative, got {from}"),
            field: Some("from".into()),
        });
    }
    let limit = super::page_limit(query.limit, DEFAULT_PAGE, MAX_PAGE)?;
    let (turns, next_from) = service
        .turn_sizes(&tenant, &conversation, from, limit)
        .await?;
    Ok(Json(TurnListResponse {
        conversation: conversation.to_string(),
        turns: turns
            .into_iter()
            .map(|t| TurnListItem {
                id: t.id,
                role: t.role,
                tokens: t.tokens,
                pinned: t.pinned,
            })
            .collect(),
        next_from,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/turns/{id}",
    tag = "turns",
    summary = "Read a stored turn",
    params(ConversationPath, TurnIdPath, MinPosition),
    responses(
        (status = 200, description = "The stored turn, content byte-exact", body = TurnResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn turn<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiPath(path): ApiPath<TurnIdPath>,
) -> Result<Json<TurnResponse>> {
    Ok(Json(service.turn(&tenant, &conversation, path.id).await?))
}

#[utoipa::path(
    patch,
    path = "/v1/conversations/{conversation}/turns/{id}",
    tag = "turns",
    summary = "Pin or unpin a turn",
    description = "A pinned turn is never covered by a summary: every later verdict lists it uncovered with reason `pinned`, reconstruct answers it from the raw log, and the working context carries it verbatim. Unpinning lets later summaries cover it (checkpoints already made stay as they are). A turn that a checkpoint already covers cannot be pinned: 409.",
    params(ConversationPath, TurnIdPath),
    request_body = TurnPatch,
    responses(
        (status = 200, description = "The turn as it now is", body = TurnResponse, headers(("Gatekeeper-Position" = String, description = "With read replicas: the commit position to send back as Gatekeeper-Min-Position on reads that must see this write"))),
        Problems, BodyProblems, NotFound,
        (status = 409, description = "A checkpoint already covers the turn", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "Invalid request", body = ProblemDoc, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn set_pinned<S: Store>(
    Tenant(tenant): Tenant,
    State(state): State<AppState<S>>,
    Conversation(conversation): Conversation,
    ApiPath(path): ApiPath<TurnIdPath>,
    ApiJson(body): ApiJson<TurnPatch>,
) -> Result<Json<TurnResponse>> {
    let turn = (state.service)
        .set_pinned(&tenant, &conversation, path.id, body.pinned)
        .await?;
    Ok(Json(turn))
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}",
    tag = "turns",
    summary = "A conversation's log and latest checkpoint",
    params(ConversationPath, MinPosition),
    responses(
        (status = 200, description = "The conversation", body = ConversationResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn conversation<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
) -> Result<Json<ConversationResponse>> {
    Ok(Json(service.conversation(&tenant, &conversation).await?))
}

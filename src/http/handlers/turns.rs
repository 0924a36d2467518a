//! Appending to the raw log and reading it back.

use super::{conversation_id, conversation_not_found, cpu};
use crate::api::{
    AnchorOrigin, AppendTurnsRequest, AppendTurnsResponse, CheckpointRef, ConversationResponse,
    TurnPatch, TurnResponse,
};
use crate::append::{AppendConflict, PreparedTurn};
use crate::coverage::Role;
use crate::coverage::derive::{AnchorSource, Draft};
use crate::domain::{AppendRequest, NewTurn};
use crate::http::extract::{ApiJson, ApiPath, Tenant};
use crate::http::idempotency::{Prior, claim_fingerprint, prior, replay};
use crate::http::openapi::ProblemDoc;
use crate::http::{AppState, Error, Result};
use crate::store::{AppendResult, PinResult, Storage, StoredTurn};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[utoipa::path(
    post,
    path = "/v1/conversations/{conversation}/turns",
    tag = "turns",
    summary = "Append raw turns",
    description = "Appends a batch, all or nothing. Ids are sequence numbers without gaps (omitted: assigned). A turn stored identically is an idempotent replay; the same id with anything different is 409 and nothing is written. Tokens and anchors are counted and derived when absent.",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0"), ("Idempotency-Key" = Option<String>, Header, nullable = false, pattern = r"^[!-~]{1,255}$", description = "Makes a retry safe: the same key with the same body gets the stored answer (header `Idempotent-Replayed: true`) and changes nothing; with another body, 422. Kept per tenant for `GATEKEEPER_IDEMPOTENCY_TTL_SECS`.")),
    request_body = AppendTurnsRequest,
    responses(
        (status = 201, description = "Appended", body = AppendTurnsResponse),
        (status = 200, description = "Every turn was a replay; nothing written", body = AppendTurnsResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 409, description = "Conflict", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "Invalid request, or a rejected verdict", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn append(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath(conversation): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<AppendTurnsRequest>,
) -> Result<Response> {
    let conversation = conversation_id(&conversation)?;
    let claim = match prior(
        &state.store,
        &tenant,
        &headers,
        state.idempotency_ttl,
        ("append", conversation.as_str()),
        &body,
    )
    .await?
    {
        Prior::Answered(response) => return Ok(response),
        Prior::Fresh(claim) => claim,
    };
    let request = AppendRequest::parse(body, state.limits)?;
    let tokens = state.tokens;
    let prepared = cpu(move || {
        request
            .turns
            .into_iter()
            .map(|t| prepare(t, &tokens))
            .collect::<Vec<_>>()
    })
    .await?;
    let plan = match state
        .store
        .append(
            &tenant,
            &conversation,
            prepared,
            state.policy.anchor_count,
            claim.as_ref(),
        )
        .await?
    {
        AppendResult::Done(plan) => plan,
        AppendResult::Conflict(conflict) => return Err(conflict_error(conflict)),
        AppendResult::AlreadyAnswered(answer) => {
            return replay(answer, &claim_fingerprint(claim.as_ref()));
        }
    };
    let response = AppendTurnsResponse::from_plan(conversation.as_str(), &plan);
    metrics::counter!("gatekeeper_turns_appended_total").increment(response.appended);
    let status = if response.appended == 0 {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(response)).into_response())
}

/// Fills in what the client left out (tokens counted) and drafts the turn's term profile: its
/// candidate anchors (unless the client gave anchors) and term keys. The store ranks the
/// candidates by rarity in the conversation.
fn prepare(turn: NewTurn, tokens: &crate::tokens::TokenCounter) -> PreparedTurn {
    let source = if turn.role == Role::Tool {
        AnchorSource::ToolOutput
    } else {
        AnchorSource::Prose
    };
    let anchors: Option<Vec<String>> = turn
        .anchors
        .map(|anchors| anchors.into_iter().map(|a| a.into_inner()).collect());
    let draft = if anchors.is_some() {
        Draft::terms_only(&turn.content)
    } else {
        Draft::new(&turn.content, source)
    };
    PreparedTurn {
        id: turn.id,
        role: turn.role,
        tokens: turn.tokens.unwrap_or_else(|| tokens.count(&turn.content)),
        anchors,
        external_id: turn.external_id.map(|e| e.into_inner()),
        pinned: turn.pinned,
        draft,
        content: turn.content,
    }
}

fn conflict_error(conflict: AppendConflict) -> Error {
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

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/turns/{id}",
    tag = "turns",
    summary = "Read a stored turn",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0"), ("id" = i64, Path, description = "Turn id")),
    responses(
        (status = 200, description = "The stored turn, content byte-exact", body = TurnResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn turn(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath((conversation, id)): ApiPath<(String, i64)>,
) -> Result<Json<TurnResponse>> {
    let conversation = conversation_id(&conversation)?;
    let stored = state
        .store
        .turn(&tenant, &conversation, id)
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!(
                "turn {id} of conversation {conversation} is not in the log"
            ))
        })?;
    Ok(Json(turn_response(stored)))
}

fn turn_response(stored: StoredTurn) -> TurnResponse {
    let t = stored.turn;
    TurnResponse {
        id: t.id,
        role: t.role,
        content: t.content,
        tokens: t.tokens,
        anchors: t.anchors,
        anchor_origin: AnchorOrigin::of(t.anchors_given),
        pinned: t.pinned,
        external_id: t.external_id,
        created_at: stored.created_at,
    }
}

#[utoipa::path(
    patch,
    path = "/v1/conversations/{conversation}/turns/{id}",
    tag = "turns",
    summary = "Pin or unpin a turn",
    description = "A pinned turn is never covered by a summary: every later verdict lists it uncovered with reason `pinned`, reconstruct answers it from the raw log, and the working context carries it verbatim. Unpinning lets later summaries cover it (checkpoints already made stay as they are). A turn that a checkpoint already covers cannot be pinned: 409.",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0"), ("id" = i64, Path, description = "Turn id")),
    request_body = TurnPatch,
    responses(
        (status = 200, description = "The turn as it now is", body = TurnResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 409, description = "A checkpoint already covers the turn", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "Invalid request", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn set_pinned(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath((conversation, id)): ApiPath<(String, i64)>,
    ApiJson(body): ApiJson<TurnPatch>,
) -> Result<Json<TurnResponse>> {
    let conversation = conversation_id(&conversation)?;
    let not_in_log = || {
        Error::NotFound(format!(
            "turn {id} of conversation {conversation} is not in the log"
        ))
    };
    match state
        .store
        .set_pinned(&tenant, &conversation, id, body.pinned)
        .await?
    {
        PinResult::NotInLog => Err(not_in_log()),
        PinResult::Covered { checkpoint_id } => Err(Error::conflict(
            format!(
                "checkpoint {checkpoint_id} already covers turn {id}: its summary stands for the turn, so it cannot be pinned; nothing changed"
            ),
            json!({ "checkpoint_id": checkpoint_id, "field": "pinned" }),
        )),
        PinResult::Done(stored) => {
            let action = if body.pinned { "pin" } else { "unpin" };
            metrics::counter!("gatekeeper_turn_pins_total", "action" => action).increment(1);
            tracing::info!(tenant = %tenant, conversation = %conversation, turn = id, pinned = body.pinned, "turn pin set");
            Ok(Json(turn_response(stored)))
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}",
    tag = "turns",
    summary = "A conversation's log and latest checkpoint",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0")),
    responses(
        (status = 200, description = "The conversation", body = ConversationResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn conversation(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath(conversation): ApiPath<String>,
) -> Result<Json<ConversationResponse>> {
    let conversation = conversation_id(&conversation)?;
    let row = state
        .store
        .conversation(&tenant, &conversation)
        .await?
        .ok_or_else(|| conversation_not_found(&conversation))?;
    let latest_checkpoint = row.latest.map(|l| CheckpointRef {
        checkpoint_id: l.checkpoint_id,
        from: l.from,
        advanced_to: l.advanced_to,
        outcome: l.outcome,
    });
    Ok(Json(ConversationResponse {
        conversation: conversation.to_string(),
        next_id: row.next_id,
        total_tokens: row.total_tokens,
        checkpoints: row.checkpoint_count,
        latest_checkpoint,
    }))
}

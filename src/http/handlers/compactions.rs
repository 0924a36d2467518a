//! Compaction proposals: decided against the log, persisted only as far as they hold.

use super::{conversation_id, conversation_not_found, cpu};
use crate::api::{
    CheckpointItem, CheckpointListResponse, CheckpointResponse, CompactionRequestBody,
    VerdictResponse,
};
use crate::coverage::{Outcome, Proposal, TurnStatus, Verdict};
use crate::domain::{CompactionRequest, ConversationId, ExpectedCheckpoint};
use crate::http::extract::{ApiJson, ApiPath, Tenant};
use crate::http::idempotency::{Prior, claim_fingerprint, prior, replay};
use crate::http::openapi::ProblemDoc;
use crate::http::{AppState, Error, Result};
use crate::store::{ProposeInput, ProposeResult, Storage};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[utoipa::path(
    post,
    path = "/v1/conversations/{conversation}/compactions",
    tag = "compactions",
    summary = "Propose a compaction",
    description = "Decides which turns of [from, to] the summary really covers and persists only that pointer set. A rejected verdict is 422 problem+json carrying the whole verdict, and persists nothing.",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0"), ("Idempotency-Key" = Option<String>, Header, nullable = false, pattern = r"^[!-~]{1,255}$", description = "Makes a retry safe: the same key with the same body gets the stored answer (header `Idempotent-Replayed: true`) and changes nothing; with another body, 422. Kept per tenant for `GATEKEEPER_IDEMPOTENCY_TTL_SECS`.")),
    request_body = CompactionRequestBody,
    responses(
        (status = 201, description = "Decided and persisted", body = VerdictResponse),
        (status = 200, description = "Dry run: decided, nothing persisted", body = VerdictResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 409, description = "Conflict", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 415, description = "Not application/json", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "Invalid request, or a rejected verdict", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn propose(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath(conversation): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CompactionRequestBody>,
) -> Result<Response> {
    let conversation = conversation_id(&conversation)?;
    let claim = match prior(
        &state.store,
        &tenant,
        &headers,
        state.idempotency_ttl,
        ("propose", conversation.as_str()),
        &body,
    )
    .await?
    {
        Prior::Answered(response) => return Ok(response),
        Prior::Fresh(claim) => claim,
    };
    let request = CompactionRequest::parse(body)?;
    let tokens = state.tokens;
    let (request, summary_tokens) = cpu(move || {
        let n = tokens.count(&request.summary);
        (request, n)
    })
    .await?;

    let proposal = Proposal {
        from: request.from,
        to: request.to,
        summary: request.summary,
        summary_budget: request.summary_budget,
        summary_tokens,
        consumed: request.consumed,
        finish_reason: request.finish_reason.map(|r| r.into_inner()),
        end_marker: request.end_marker.map(|m| m.into_inner()),
        mode: request.mode.unwrap_or(state.default_mode),
    };
    let input = ProposeInput {
        proposal,
        policy: state.policy,
        expected: request.expected_checkpoint,
        dry_run: request.dry_run,
    };
    let (verdict, checkpoint_id) = match state
        .store
        .propose(&tenant, &conversation, input, claim.as_ref())
        .await?
    {
        ProposeResult::AlreadyAnswered(answer) => {
            return replay(answer, &claim_fingerprint(claim.as_ref()));
        }
        ProposeResult::Decided {
            verdict,
            checkpoint_id,
        } => (verdict, checkpoint_id),
        ProposeResult::NoConversation => return Err(conversation_not_found(&conversation)),
        ProposeResult::Stale { latest } => {
            return Err(stale_checkpoint(request.expected_checkpoint, latest));
        }
        ProposeResult::NotInLog { missing } => return Err(Error::ids_not_in_log(&missing)),
        ProposeResult::Invalid(invalid) => return Err(invalid.into()),
    };
    if let (Some(cache), Some(_)) = (state.reconstruct_cache.as_deref(), checkpoint_id) {
        // This process answers from the new checkpoint at once; others once the feed tells them.
        cache.checkpoint_committed(&(tenant.clone(), conversation.clone()));
    }
    record(&conversation, checkpoint_id, &verdict, request.dry_run);
    let response = VerdictResponse {
        conversation: conversation.to_string(),
        checkpoint_id,
        dry_run: request.dry_run,
        verdict,
    };
    match (response.verdict.outcome, request.dry_run) {
        (Outcome::Rejected, _) => Err(Error::Rejected(Box::new(response))),
        (_, true) => Ok((StatusCode::OK, Json(response)).into_response()),
        (_, false) => Ok((StatusCode::CREATED, Json(response)).into_response()),
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

/// Every decision is loud: one log event and the counters, whatever the outcome.
fn record(conversation: &ConversationId, checkpoint_id: Option<i64>, v: &Verdict, dry_run: bool) {
    if !dry_run {
        metrics::counter!("gatekeeper_compactions_total", "outcome" => v.outcome.as_str())
            .increment(1);
        // Turn counts describe persisted pointer sets; a rejected verdict persists none.
        if checkpoint_id.is_some() {
            metrics::counter!("gatekeeper_compaction_turns_total", "status" => "covered")
                .increment(v.covered.count());
            metrics::counter!("gatekeeper_compaction_turns_total", "status" => "uncovered")
                .increment(v.uncovered.count());
            metrics::counter!("gatekeeper_compaction_turns_total", "status" => "not_compacted")
                .increment(v.not_compacted.count());
        }
        for signal in &v.truncation_signals {
            metrics::counter!("gatekeeper_truncated_summaries_total", "signal" => signal.as_str())
                .increment(1);
        }
        metrics::counter!("gatekeeper_coverage_contradictions_total")
            .increment(v.contradictions.count());
    }
    let signals: Vec<&str> = v.truncation_signals.iter().map(|s| s.as_str()).collect();
    let not_compacted = v
        .turns
        .iter()
        .filter(|t| t.status == TurnStatus::NotCompacted)
        .count();
    macro_rules! event {
        ($level:ident) => {
            tracing::$level!(
                conversation = %conversation,
                checkpoint = ?checkpoint_id,
                outcome = v.outcome.as_str(),
                dry_run,
                from = v.from,
                to = v.to,
                advanced_to = ?v.advanced_to,
                covered = v.covered.count(),
                uncovered = v.uncovered.count(),
                not_compacted,
                contradictions = v.contradictions.count(),
                over_ceiling = v.over_ceiling,
                truncation_signals = ?signals,
                "compaction decided"
            )
        };
    }
    if v.outcome == Outcome::Accepted {
        event!(info);
    } else {
        event!(warn);
    }
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/compactions",
    tag = "compactions",
    summary = "List checkpoints, newest first",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0")),
    responses(
        (status = 200, description = "The checkpoints", body = CheckpointListResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn list(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath(conversation): ApiPath<String>,
) -> Result<Json<CheckpointListResponse>> {
    let conversation = conversation_id(&conversation)?;
    if state
        .store
        .conversation(&tenant, &conversation)
        .await?
        .is_none()
    {
        return Err(conversation_not_found(&conversation));
    }
    let checkpoints = state
        .store
        .checkpoints(&tenant, &conversation)
        .await?
        .into_iter()
        .map(|row| {
            let v = row.verdict;
            CheckpointItem {
                checkpoint_id: row.checkpoint_id,
                created_at: row.created_at,
                from: v.from,
                to: v.to,
                advanced_to: v.advanced_to.unwrap_or(v.to),
                outcome: v.outcome,
                covered: v.covered,
                uncovered: v.uncovered,
                not_compacted: v.not_compacted,
                summary_tokens: v.summary_tokens,
            }
        })
        .collect();
    Ok(Json(CheckpointListResponse {
        conversation: conversation.to_string(),
        checkpoints,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/compactions/{checkpoint_id}",
    tag = "compactions",
    summary = "One checkpoint with its summary and verdict",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0"), ("checkpoint_id" = i64, Path, description = "Checkpoint id (1, 2, ... per conversation)")),
    responses(
        (status = 200, description = "The checkpoint", body = CheckpointResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn one(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath((conversation, checkpoint_id)): ApiPath<(String, i64)>,
) -> Result<Json<CheckpointResponse>> {
    let conversation = conversation_id(&conversation)?;
    let row = state
        .store
        .checkpoint(&tenant, &conversation, checkpoint_id)
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!(
                "checkpoint {checkpoint_id} of conversation {conversation} does not exist"
            ))
        })?;
    Ok(Json(CheckpointResponse {
        conversation: conversation.to_string(),
        checkpoint_id: row.checkpoint_id,
        created_at: row.created_at,
        summary: row.summary.unwrap_or_default(),
        verdict: row.verdict,
    }))
}

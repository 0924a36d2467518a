//! Reconstruct, context and the compaction plan: reads that never return a false negative.

use crate::api::{CompactionPlanResponse, ContextResponse, ReconstructResponse};
use crate::http::extract::{ApiPath, ApiQuery, Conversation, Reads, Tenant};
use crate::http::openapi::{
    ConversationPath, MinPosition, NotFound, ProblemDoc, Problems, TurnPath,
};
use crate::http::reconstruct_cache::{self, Answer};
use crate::http::{AppState, Error, Result};
use crate::store::Store;
use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/reconstruct/{turn}",
    tag = "reads",
    summary = "Get a turn back, never a false negative",
    description = "The newest checkpoint whose [from, advanced_to] holds the turn decides: covered, the summary (with evidence); uncovered, the raw turn (with the reason); in no checkpoint, the raw turn (live). 404 means only that this tenant's log does not hold the turn; a database fault is 503. Through another service process than the one that made a checkpoint, answers reflect it once its notification arrives (Postgres; milliseconds), and until then stay as they were: still true, never a false negative.",
    params(ConversationPath, TurnPath, MinPosition),
    responses(
        (status = 200, description = "The answer and where it came from", body = ReconstructResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn reconstruct<S: Store>(
    Tenant(tenant): Tenant,
    State(state): State<AppState<S>>,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiPath(TurnPath { turn }): ApiPath<TurnPath>,
) -> Result<Response> {
    // A 404 means exactly "this tenant's log does not hold the turn": database faults surface
    // as 503, never as a missing row.
    let read = service.reconstruct(&tenant, &conversation, turn);
    let answer = match state.reconstruct_cache.as_deref() {
        None => reconstruct_cache::serialize(read.await?),
        Some(cache) => {
            let head = service.head(&tenant, &conversation, turn);
            let key = (tenant.clone(), conversation.clone());
            cache.answer(key, turn, head, read).await?
        }
    };
    Ok(respond(answer))
}

fn respond(answer: Answer) -> Response {
    metrics::counter!("gatekeeper_reconstructions_total", "source" => answer.source.as_str())
        .increment(1);
    ([(CONTENT_TYPE, "application/json")], answer.body).into_response()
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/context",
    tag = "reads",
    summary = "The working context to feed a model",
    description = "Without `max_tokens`: every deciding summary once, where its first covered turn stood, and every other turn verbatim. With `max_tokens`: summaries, pinned turns and live turns verbatim; the other turns verbatim newest first while they fit, the rest as stubs (`type: stub`, with the turn's size, a preview, its anchors and the `recall` path that answers it byte-exact). When the summaries, pinned and live turns alone (every other turn a stub) exceed the budget, the answer is that smallest context with `fits: false` and `smallest_max_tokens`: never a silent cut.",
    params(ConversationPath, ContextQuery, MinPosition),
    responses(
        (status = 200, description = "Summaries, turns and stubs in turn order", body = ContextResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn context<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiQuery(query): ApiQuery<ContextQuery>,
) -> Result<Json<ContextResponse>> {
    // An int64 in the contract, as every count of tokens: a negative one is refused here.
    let max_tokens = query
        .max_tokens
        .map(|n| {
            u64::try_from(n).map_err(|_| Error::BadRequest {
                detail: format!("max_tokens must not be negative, got {n}"),
                field: Some("max_tokens".into()),
            })
        })
        .transpose()?;
    let context = service.context(&tenant, &conversation, max_tokens).await?;
    Ok(Json(context))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ContextQuery {
    /// The most tokens the context may take; without it, the whole context.
    #[param(minimum = 0)]
    max_tokens: Option<i64>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PlanQuery {
    /// Summary budget in tokens.
    #[param(minimum = 1)]
    summary_budget: i64,
    /// First turn of the range; default: after the latest checkpoint's `advanced_to`.
    #[param(minimum = 0)]
    from: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/compaction-plan",
    tag = "reads",
    summary = "The largest range a summary budget can cover",
    params(ConversationPath, PlanQuery, MinPosition),
    responses(
        (status = 200, description = "The plan", body = CompactionPlanResponse),
        Problems,
        (status = 404, description = "No such conversation, or `from` is not in its log", body = ProblemDoc, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn compaction_plan<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiQuery(query): ApiQuery<PlanQuery>,
) -> Result<Json<CompactionPlanResponse>> {
    if query.summary_budget <= 0 {
        return Err(Error::BadRequest {
            detail: format!(
                "summary_budget must be positive, got {}",
                query.summary_budget
            ),
            field: Some("summary_budget".into()),
        });
    }
    let plan = service
        .compaction_plan(&tenant, &conversation, query.summary_budget, query.from)
        .await?;
    Ok(Json(plan))
}

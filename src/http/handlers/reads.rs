//! Reconstruct, context and the compaction plan: reads that never return a false negative.

use super::{conversation_id, conversation_not_found, cpu};
use crate::api::{
    AnchorOrigin, CompactionPlanResponse, ContextItem, ContextResponse, PlannedTurn,
    ReconstructResponse, Source,
};
use crate::coverage::{IdRanges, Policy, Reason, TurnFacts, distinctive, locate};
use crate::http::extract::{ApiPath, ApiQuery, Tenant};
use crate::http::openapi::ProblemDoc;
use crate::http::reconstruct_cache::{self, Answer, AnswerKey};
use crate::http::{AppState, Error, Result};
use crate::plan::{self, Rejections};
use crate::store::{ContextCheckpoint, ContextTurn, ReconstructRow, Storage};
use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::collections::HashMap;

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/reconstruct/{turn}",
    tag = "reads",
    summary = "Get a turn back, never a false negative",
    description = "The newest checkpoint whose [from, advanced_to] holds the turn decides: covered, the summary (with evidence); uncovered, the raw turn (with the reason); in no checkpoint, the raw turn (live). 404 means only that this tenant's log does not hold the turn; a database fault is 503. Through another service process than the one that made a checkpoint, answers reflect it once its notification arrives (Postgres; milliseconds), and until then stay as they were: still true, never a false negative.",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0"), ("turn" = i64, Path, description = "Turn id")),
    responses(
        (status = 200, description = "The answer and where it came from", body = ReconstructResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn reconstruct(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath((conversation, turn)): ApiPath<(String, i64)>,
) -> Result<Response> {
    let conversation = conversation_id(&conversation)?;
    let not_in_log = || {
        Error::NotFound(format!(
            "turn {turn} of conversation {conversation} is not in the log"
        ))
    };
    // A 404 here means exactly "this tenant's log does not hold the turn": database faults
    // surface as 503 through `?`, never as a missing row.
    let read = || async {
        let row = state
            .store
            .reconstruct(&tenant, &conversation, turn)
            .await?;
        Ok::<_, Error>(reconstruct_answer(turn, row.ok_or_else(not_in_log)?))
    };
    let Some(cache) = state.reconstruct_cache.as_deref() else {
        return Ok(answer(reconstruct_cache::serialize(read().await?)));
    };
    let conversation_key = (tenant.clone(), conversation.clone());
    let latest = match cache.known_latest(&conversation_key) {
        Some(latest) => latest,
        None => {
            let started = cache.read_started();
            let latest = state
                .store
                .latest_checkpoint(&tenant, &conversation)
                .await?
                .ok_or_else(not_in_log)?;
            cache.learn(&conversation_key, latest, started);
            latest
        }
    };
    let (tenant, conversation) = conversation_key;
    let key = AnswerKey {
        tenant,
        conversation,
        turn,
        latest_checkpoint: latest,
    };
    match cache.get(&key) {
        Some(hit) => Ok(answer(hit)),
        None => Ok(answer(cache.keep(key, read().await?))),
    }
}

fn answer(answer: Answer) -> Response {
    metrics::counter!("gatekeeper_reconstructions_total", "source" => answer.source.as_str())
        .increment(1);
    ([(CONTENT_TYPE, "application/json")], answer.body).into_response()
}

/// Covered: the summary, with where the turn's anchors stand in it. Spanned but not covered:
/// the raw turn and why. In no checkpoint: the raw turn.
fn reconstruct_answer(turn: i64, row: ReconstructRow) -> ReconstructResponse {
    match row.checkpoint {
        Some(checkpoint) if checkpoint.covered => {
            let summary = checkpoint.summary.unwrap_or_default();
            ReconstructResponse {
                turn,
                source: Source::Summary,
                checkpoint_id: Some(checkpoint.checkpoint_id),
                evidence: locate(&row.deciding_anchors, &summary),
                text: summary,
                role: row.role,
                reason: None,
            }
        }
        Some(checkpoint) => ReconstructResponse {
            turn,
            source: Source::RawLog,
            checkpoint_id: Some(checkpoint.checkpoint_id),
            text: row.content,
            role: row.role,
            reason: checkpoint.reason,
            evidence: Vec::new(),
        },
        None => ReconstructResponse {
            turn,
            source: Source::Live,
            checkpoint_id: None,
            text: row.content,
            role: row.role,
            reason: None,
            evidence: Vec::new(),
        },
    }
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/context",
    tag = "reads",
    summary = "The working context to feed a model",
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0")),
    responses(
        (status = 200, description = "Summaries and uncovered turns in turn order", body = ContextResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation or turn for this tenant", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn context(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath(conversation): ApiPath<String>,
) -> Result<Json<ContextResponse>> {
    let conversation = conversation_id(&conversation)?;
    let (turns, checkpoints) = state.store.context(&tenant, &conversation).await?;
    if turns.is_empty() {
        return Err(conversation_not_found(&conversation));
    }
    let items = working_context(turns, &checkpoints);
    let total_tokens = items
        .iter()
        .map(|item| match item {
            ContextItem::Summary { tokens, .. } | ContextItem::Turn { tokens, .. } => {
                u64::from(*tokens)
            }
        })
        .sum();
    Ok(Json(ContextResponse {
        conversation: conversation.to_string(),
        items,
        total_tokens,
    }))
}

/// Turn order; each deciding checkpoint's summary once, where its first covered turn stood, and
/// every turn that no checkpoint covers as itself.
fn working_context(turns: Vec<ContextTurn>, checkpoints: &[ContextCheckpoint]) -> Vec<ContextItem> {
    let mut items = Vec::new();
    let mut summary_at: HashMap<i64, usize> = HashMap::new();
    for turn in turns {
        let decider = checkpoints
            .iter()
            .rev()
            .find(|c| c.from <= turn.id && turn.id <= c.advanced_to);
        match decider {
            Some(c) if c.covered.contains(turn.id) => {
                let index = *summary_at.entry(c.checkpoint_id).or_insert_with(|| {
                    items.push(ContextItem::Summary {
                        checkpoint_id: c.checkpoint_id,
                        covers: IdRanges::new(),
                        text: c.summary.clone(),
                        tokens: c.summary_tokens,
                    });
                    items.len() - 1
                });
                if let ContextItem::Summary { covers, .. } = &mut items[index] {
                    covers.push(turn.id);
                }
            }
            decider => items.push(ContextItem::Turn {
                id: turn.id,
                role: turn.role,
                content: turn.content,
                source: if decider.is_some() {
                    Source::RawLog
                } else {
                    Source::Live
                },
                tokens: turn.tokens,
            }),
        }
    }
    items
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
    params(("conversation" = String, Path, description = "Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)", pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$", example = "airline-0-0"), PlanQuery),
    responses(
        (status = 200, description = "The plan", body = CompactionPlanResponse),
        (status = 400, description = "Malformed JSON, path or query", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown API key", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 429, description = "This tenant is over its rate limit (when one is configured); retry after Retry-After", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 404, description = "No such conversation, or `from` is not in its log", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "Database unavailable or request timed out; retry (see Retry-After)", body = ProblemDoc, content_type = "application/problem+json")
    ),
    security(("bearer" = []))
)]
pub async fn compaction_plan(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath(conversation): ApiPath<String>,
    ApiQuery(query): ApiQuery<PlanQuery>,
) -> Result<Json<CompactionPlanResponse>> {
    let conversation = conversation_id(&conversation)?;
    if query.summary_budget <= 0 {
        return Err(Error::BadRequest {
            detail: format!(
                "summary_budget must be positive, got {}",
                query.summary_budget
            ),
            field: Some("summary_budget".into()),
        });
    }
    let row = state
        .store
        .conversation(&tenant, &conversation)
        .await?
        .ok_or_else(|| conversation_not_found(&conversation))?;
    // By default, plan from the first turn the latest checkpoint did not advance over.
    let from = query
        .from
        .unwrap_or_else(|| row.latest.map_or(0, |l| l.advanced_to + 1));
    if from < 0 || from >= row.next_id {
        return Err(Error::NotFound(format!(
            "turn {from} of conversation {conversation} is not in the log, which holds turns 0 to {}",
            row.next_id - 1
        )));
    }
    let counts = state
        .store
        .token_counts_from(&tenant, &conversation, from)
        .await?;
    let policy = state.policy;
    let reach = plan::reach(from, counts, query.summary_budget, &policy);
    let facts = match reach.to() {
        Some(to) => {
            state
                .store
                .range_facts(&tenant, &conversation, from, to)
                .await?
        }
        None => Vec::new(),
    };
    let rejections = Rejections {
        from: row.rejected_from,
        streak: row.rejected_streak,
    };
    let (budget, tokens) = (query.summary_budget, state.tokens);
    let (plan, turns) = cpu(move || {
        let plan = plan::plan(&reach, &facts, budget, rejections, &policy, |a| {
            tokens.count(a)
        });
        let planned = plan.to.map_or(0, |to| (to - from + 1) as usize);
        let turns = planned_turns(&facts[..planned.min(facts.len())], &policy);
        (plan, turns)
    })
    .await?;
    metrics::counter!("gatekeeper_compaction_advice_total", "advice" => plan.advice.as_str())
        .increment(1);
    Ok(Json(CompactionPlanResponse {
        from,
        to: plan.to,
        prefix_tokens: plan.prefix_tokens,
        required_budget: plan.required_budget,
        summary_budget: query.summary_budget,
        anchor_tokens: plan.anchor_tokens,
        advice: plan.advice,
        advice_reason: plan.reason,
        recent_rejections: plan.recent_rejections,
        worthwhile_tokens: plan.worthwhile_tokens,
        turns,
    }))
}

/// What the decision will check for each turn of the planned range (rules 2, 2b and pins).
fn planned_turns(facts: &[TurnFacts], policy: &Policy) -> Vec<PlannedTurn> {
    let turns: Vec<&TurnFacts> = facts.iter().collect();
    distinctive::checks(&turns, policy)
        .into_iter()
        .zip(&turns)
        .map(|(check, turn)| {
            let unanchored = if turn.pinned {
                Some(Reason::Pinned)
            } else if check.is_empty() {
                Some(Reason::NoAnchors)
            } else {
                None
            };
            PlannedTurn {
                id: turn.id,
                anchors: if turn.pinned {
                    Vec::new()
                } else {
                    check.anchors().map(str::to_owned).collect()
                },
                anchor_origin: AnchorOrigin::of(!check.is_derived()),
                unanchored,
                evidence: check.evidence(),
            }
        })
        .collect()
}

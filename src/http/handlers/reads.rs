//! Reconstruct, context and the compaction plan: reads that never return a false negative.

use super::{conversation_id, conversation_not_found};
use crate::api::{
    CompactionPlanResponse, ContextItem, ContextResponse, ReconstructResponse, Source,
};
use crate::coverage::{IdRanges, Role, locate};
use crate::http::extract::{ApiPath, ApiQuery, Tenant};
use crate::http::{AppState, Error, Result};
use crate::store::{ContextCheckpoint, ContextTurn, Storage};
use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use std::collections::HashMap;

pub async fn reconstruct(
    Tenant(tenant): Tenant,
    State(state): State<AppState>,
    ApiPath((conversation, turn)): ApiPath<(String, i64)>,
) -> Result<Json<ReconstructResponse>> {
    let conversation = conversation_id(&conversation)?;
    // A 404 here means exactly "this tenant's log does not hold the turn": database faults
    // surface as 503 through `?`, never as a missing row.
    let row = state
        .store
        .reconstruct(&tenant, &conversation, turn)
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!(
                "turn {turn} of conversation {conversation} is not in the log"
            ))
        })?;
    let response = match row.checkpoint {
        Some(checkpoint) if checkpoint.covered => {
            let summary = checkpoint.summary.unwrap_or_default();
            ReconstructResponse {
                turn,
                source: Source::Summary,
                checkpoint_id: Some(checkpoint.checkpoint_id),
                evidence: locate(&row.anchors, &summary),
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
    };
    metrics::counter!("gatekeeper_reconstructions_total", "source" => response.source.as_str())
        .increment(1);
    Ok(Json(response))
}

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanQuery {
    summary_budget: i64,
    from: Option<i64>,
}

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
        return Err(Error::unprocessable(
            format!(
                "from ({from}) is not in the log, which holds turns 0 to {}",
                row.next_id - 1
            ),
            serde_json::json!({ "field": "from" }),
        ));
    }
    let counts = state
        .store
        .token_counts_from(&tenant, &conversation, from)
        .await?;
    let (mut prose, mut tool) = (0u64, 0u64);
    let mut fit: Option<(i64, u64, u64)> = None;
    let mut first: Option<(u64, u64)> = None;
    for (id, role, tokens) in counts {
        match role {
            Role::Tool => tool += u64::from(tokens),
            Role::System | Role::User | Role::Assistant => prose += u64::from(tokens),
        }
        let required = state.policy.required_budget(prose, tool);
        first.get_or_insert((prose + tool, required));
        if required > query.summary_budget as u64 {
            break;
        }
        fit = Some((id, prose + tool, required));
    }
    // When nothing fits, report what `from` alone would need.
    let (to, prefix_tokens, required_budget) = match (fit, first) {
        (Some((to, prefix, required)), _) => (Some(to), prefix, required),
        (None, Some((prefix, required))) => (None, prefix, required),
        (None, None) => (None, 0, 0),
    };
    Ok(Json(CompactionPlanResponse {
        from,
        to,
        prefix_tokens,
        required_budget,
        summary_budget: query.summary_budget,
    }))
}

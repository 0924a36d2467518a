//! The tenant's conversations: the list, erasure, export and import.

use crate::api::{ConversationListItem, ConversationListResponse, ImportResponse};
use crate::domain::ConversationId;
use crate::http::extract::{ApiQuery, Conversation, Reads, Tenant};
use crate::http::openapi::{ConversationPath, MinPosition, NotFound, ProblemDoc, Problems};
use crate::http::{AppState, Error, Result};
use crate::service::Erasure;
use crate::store::{ListPage, Store};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

/// The media type of an export, and of an import's body.
pub const NDJSON: &str = "application/x-ndjson";

const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ConversationListQuery {
    /// Conversations per page (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// Only conversations whose name starts with this (the alphabet of conversation ids).
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._:-]*$")]
    prefix: Option<String>,
    /// The `next_cursor` of the previous page: only conversations named after it.
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._:-]*$")]
    cursor: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/conversations",
    operation_id = "list_conversations",
    tag = "conversations",
    summary = "List the tenant's conversations, in name order, a page at a time",
    params(ConversationListQuery, MinPosition),
    responses(
        (status = 200, description = "A page of conversations", body = ConversationListResponse),
        Problems,
    ),
    security(("bearer" = []))
)]
pub async fn list<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    ApiQuery(query): ApiQuery<ConversationListQuery>,
) -> Result<Json<ConversationListResponse>> {
    let limit = super::page_limit(query.limit, DEFAULT_PAGE, MAX_PAGE)?;
    // A cursor is a conversation id; a prefix, the start of one.
    for (field, value) in [("cursor", &query.cursor), ("prefix", &query.prefix)] {
        if let Some(value) = value
            && (value.len() > 128 || !value.chars().all(ConversationId::is_id_char))
        {
            return Err(Error::BadRequest {
                detail: format!("{field} must be at most 128 of A-Z a-z 0-9 . _ : -"),
                field: Some(field.into()),
            });
        }
    }
    let page = ListPage {
        prefix: query.prefix.as_deref(),
        after: query.cursor.as_deref(),
        limit: limit + 1,
    };
    let mut rows = service.conversations(&tenant, page).await?;
    let next_cursor = (rows.len() > limit as usize).then(|| {
        rows.truncate(limit as usize);
        rows.last()
            .map(|r| r.conversation.clone())
            .unwrap_or_default()
    });
    let conversations = rows
        .into_iter()
        .map(|r| ConversationListItem {
            conversation: r.conversation,
            turns: r.next_id,
            latest_checkpoint_id: r.latest_checkpoint,
            last_append_at: r.last_append_at,
        })
        .collect();
    Ok(Json(ConversationListResponse {
        conversations,
        next_cursor,
    }))
}

#[utoipa::path(
    delete,
    path = "/v1/conversations/{conversation}",
    operation_id = "erase_conversation",
    tag = "conversations",
    summary = "Erase a conversation",
    description = "Deletes its turns, checkpoints, Idempotency-Key records, counts and search index entries in one transaction, at once (no grace period), after any write that holds its lock; every service process's reconstruct answers forget it. Afterwards every read of it is 404, and an append starts it again at id 0.",
    params(ConversationPath),
    responses(
        (status = 204, description = "Erased"),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn erase<S: Store>(
    Tenant(tenant): Tenant,
    State(state): State<AppState<S>>,
    Conversation(conversation): Conversation,
) -> Result<StatusCode> {
    (state.service)
        .erase(&tenant, &conversation, Erasure::Request)
        .await?;
    if let Some(cache) = &state.reconstruct_cache {
        cache
            .conversations_erased(vec![(tenant, conversation)])
            .await;
    }
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/export",
    operation_id = "export_conversation",
    tag = "conversations",
    summary = "Export a conversation as NDJSON",
    description = "A header line (`type: conversation`), then every turn in id order (with its term profile), then every checkpoint in id order (summary, verdict with every turn's detail, the candidates used): what existed when the export began, streamed a page at a time. `POST .../import` restores it exactly. If the conversation is erased meanwhile, the stream stops short of the counts its header announced.",
    params(ConversationPath, MinPosition),
    responses(
        (status = 200, description = "The conversation, one JSON value per line", content_type = "application/x-ndjson", body = String),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn export<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
) -> Result<Response> {
    let export = service.export(&tenant, &conversation).await?;
    // Fused: the compression layer may poll a body again after its end.
    let lines = futures_util::stream::unfold(Some(export), |export| async move {
        let mut export = export?;
        // A chunk is one unit of the task's budget: every page waits on the store anyway, and
        // so a stream that never waited would still give its worker back now and then.
        tokio::task::consume_budget().await;
        match export.next_chunk().await {
            Ok(Some(chunk)) => Some((Ok(Bytes::from(chunk)), Some(export))),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "export cut short");
                Some((Err(e), None))
            }
        }
    })
    .fuse();
    Ok(([(CONTENT_TYPE, NDJSON)], Body::from_stream(lines)).into_response())
}

#[utoipa::path(
    post,
    path = "/v1/conversations/{conversation}/import",
    operation_id = "import_conversation",
    tag = "conversations",
    summary = "Restore an export into a new conversation",
    description = "Into a conversation that does not exist (or holds nothing): 409 otherwise. Every line is checked (the header's format and counts; turn ids 0.. and checkpoint ids 1.. without gaps; each profile; each verdict's range within the turns and split exactly into covered, uncovered and not compacted) before anything is written, in one transaction: a refused import is 422 naming the line and changes nothing. Times and the churn guard's state are kept, so export → import → export gives the same bytes. The body is bounded by GATEKEEPER_MAX_BODY_BYTES.",
    params(ConversationPath),
    request_body(content = String, content_type = "application/x-ndjson", description = "An export"),
    responses(
        (status = 201, description = "Imported", body = ImportResponse),
        Problems,
        (status = 409, description = "The conversation already holds turns", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 415, description = "Not application/x-ndjson", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "A line is refused", body = ProblemDoc, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn import<S: Store>(
    Tenant(tenant): Tenant,
    State(state): State<AppState<S>>,
    Conversation(conversation): Conversation,
    headers: HeaderMap,
    body: std::result::Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response> {
    let is_ndjson = (headers.get(CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<mime::Mime>().ok())
        .is_some_and(|m| m.essence_str() == NDJSON);
    if !is_ndjson {
        return Err(Error::UnsupportedMediaType(format!(
            "expected a body with `Content-Type: {NDJSON}` (an export)"
        )));
    }
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge(rejection.body_text()),
        _ => Error::BadRequest {
            detail: rejection.body_text(),
            field: Some("body".into()),
        },
    })?;
    let header = (state.service).import(&tenant, &conversation, body).await?;
    if let Some(cache) = &state.reconstruct_cache {
        // No answer of it can be held (a 404 is never kept, and its incarnation is new): only
        // a head read while the import committed its checkpoints is forgotten, with no pass
        // over the answers.
        cache.checkpoint_committed(&(tenant, conversation.clone()));
    }
    let answer = ImportResponse {
        conversation: conversation.to_string(),
        turns: header.turns,
        checkpoints: header.checkpoints,
    };
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

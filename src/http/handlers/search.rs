//! Search over the raw log, within a conversation or across the tenant's conversations.

use crate::api::SearchResponse;
use crate::domain::ConversationId;
use crate::http::extract::{ApiQuery, Conversation, Reads, Tenant};
use crate::http::openapi::{ConversationPath, MinPosition, NotFound, Problems};
use crate::http::{Error, Result};
use crate::search::{self, DEFAULT_LIMIT, MAX_LIMIT, Query};
use crate::store::Store;
use axum::Json;
use serde::Deserialize;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// Words, numbers or identifiers (`ZFA04Y`, `src/store/mod.rs`, `get_user`, `HTTP 503`,
    /// `2024-05-15`); a turn holding more of them, and rarer ones, ranks higher. At most 1,024
    /// characters; stop words, single characters and terms past the 16th are not searched, and
    /// the answer lists them in `ignored`.
    #[param(min_length = 1, max_length = 1024)]
    q: String,
    /// Most hits to answer (default 10).
    #[param(minimum = 1, maximum = 50)]
    limit: Option<i64>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TenantSearchQuery {
    /// Words, numbers or identifiers, as for a conversation's search.
    #[param(min_length = 1, max_length = 1024)]
    q: String,
    /// Most hits to answer (default 10).
    #[param(minimum = 1, maximum = 50)]
    limit: Option<i64>,
    /// Only conversations whose id starts with this (the alphabet of conversation ids).
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._:-]*$")]
    conversation_prefix: Option<String>,
}

const DESCRIPTION: &str = "Finds turns by the words, numbers and identifiers they hold, in their raw text, whatever summary stands for them: a turn an agent can no longer see is found here. Hits are ranked by BM25 (more and rarer terms, shorter turns first; ties to the newer turn), each with a snippet, the matched spans (character offsets) and `source`, what `reconstruct` answers for it: `summary` (with `terms_in_summary`: whether the summary kept the words searched for), `raw_log` or `live`; `recall` is the path that answers the turn. A query reads at most 1,000 turns a term: `complete: false` says a term was held by more, and a rarer one finds the rest. Words it does not search (stop words, single characters, terms past the 16th) are listed in `ignored`.";

#[utoipa::path(
    get,
    path = "/v1/conversations/{conversation}/search",
    operation_id = "search_conversation",
    tag = "reads",
    summary = "Search a conversation's raw log",
    description = DESCRIPTION,
    params(ConversationPath, SearchQuery, MinPosition),
    responses(
        (status = 200, description = "Hits, best first", body = SearchResponse),
        Problems, NotFound,
    ),
    security(("bearer" = []))
)]
pub async fn conversation<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    Conversation(conversation): Conversation,
    ApiQuery(query): ApiQuery<SearchQuery>,
) -> Result<Json<SearchResponse>> {
    let terms = terms(&query.q)?;
    let limit = super::page_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let answer = service
        .search(&tenant, Some(&conversation), None, &query.q, terms, limit)
        .await?;
    Ok(Json(answer))
}

#[utoipa::path(
    get,
    path = "/v1/search",
    operation_id = "search_tenant",
    tag = "reads",
    summary = "Search every conversation of the tenant",
    description = DESCRIPTION,
    params(TenantSearchQuery, MinPosition),
    responses(
        (status = 200, description = "Hits, best first", body = SearchResponse),
        Problems,
    ),
    security(("bearer" = []))
)]
pub async fn tenant<S: Store>(
    Tenant(tenant): Tenant,
    Reads(service): Reads<S>,
    ApiQuery(query): ApiQuery<TenantSearchQuery>,
) -> Result<Json<SearchResponse>> {
    let terms = terms(&query.q)?;
    let limit = super::page_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let prefix = query.conversation_prefix.as_deref();
    if let Some(prefix) = prefix {
        if prefix.len() > 128 || !prefix.chars().all(ConversationId::is_id_char) {
            return Err(Error::BadRequest {
                detail: "conversation_prefix must be at most 128 of A-Z a-z 0-9 . _ : -".into(),
                field: Some("conversation_prefix".into()),
            });
        }
    }
    let answer = service
        .search(&tenant, None, prefix, &query.q, terms, limit)
        .await?;
    Ok(Json(answer))
}

fn terms(q: &str) -> Result<Query> {
    search::parse_query(q).map_err(|e| Error::BadRequest {
        detail: e.to_string(),
        field: Some("q".into()),
    })
}

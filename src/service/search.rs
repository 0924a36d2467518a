//! Search over the raw log: the scope's turns that hold the query's terms, ranked, each with
//! what `reconstruct` would answer for it. Never a false negative of its own making: a turn is
//! found by its raw text whatever summary stands for it.

use super::{CpuWork, Error, Result, Service};
use crate::api::{SearchHit, SearchMatch, SearchResponse, SearchSnippet, SearchTerm, Source};
use crate::coverage::locate;
use crate::domain::{ConversationId, TenantId};
use crate::search::{self, Query, Ranked, Scope, TERM_CANDIDATES};
use crate::store::{self, ReconstructRow, Store};

/// Ranked turns read per hit asked for, at most: a turn is dropped only when its text does not
/// hold the terms its keys promised (a hash collision), so this is never reached in practice.
const READS_PER_HIT: usize = 4;

impl<S: Store> Service<S> {
    /// The best `limit` turns of `conversation` (or of every conversation of the tenant whose
    /// name starts with `prefix`) holding `terms`.
    pub async fn search(
        &self,
        tenant: &TenantId,
        conversation: Option<&ConversationId>,
        prefix: Option<&str>,
        q: &str,
        query: Query,
        limit: u32,
    ) -> Result<SearchResponse> {
        let Query { terms, ignored } = query;
        // A conversation the log does not hold is 404, even for a query with nothing to search.
        let conversation_turns = match conversation {
            Some(c) => Some(
                (self.store.conversation(tenant, c).await?)
                    .ok_or_else(|| Error::NoConversation(c.clone()))?
                    .next_id
                    .max(0) as u64,
            ),
            None => None,
        };
        let keys: Vec<_> = terms.iter().map(|t| t.key).collect();
        if keys.is_empty() {
            // Nothing searchable: the answer lists what was ignored, and reads nothing more.
            return Ok(SearchResponse {
                query: q.to_owned(),
                terms: Vec::new(),
                ignored,
                hits: Vec::new(),
                complete: true,
            });
        }
        let (scope, scope_turns) = match (conversation, conversation_turns) {
            (Some(c), Some(turns)) => (Scope::Conversation(c.as_str()), turns),
            _ => {
                let scope = Scope::Tenant {
                    conversation_prefix: prefix,
                };
                (scope, self.store.tenant_turns(tenant, prefix).await?)
            }
        };
        // One more than is ranked shows whether a term is held by more turns.
        let mut postings = (self.store)
            .search_postings(tenant, scope, &keys, TERM_CANDIDATES + 1)
            .await?;
        let searched: Vec<SearchTerm> = (terms.iter().zip(&mut postings))
            .map(|(term, list)| {
                let complete = list.len() <= TERM_CANDIDATES as usize;
                list.truncate(TERM_CANDIDATES as usize);
                SearchTerm {
                    term: term.text.clone(),
                    turns: list.len() as u32,
                    complete,
                }
            })
            .collect();
        let ranked = (self.cpu(tenant, CpuWork::Search, move || {
            search::rank(&postings, scope_turns)
        }))
        .await?;
        let texts: Vec<String> = terms.into_iter().map(|t| t.text).collect();
        let mut hits = Vec::with_capacity(limit as usize);
        let readable = ranked.len().min(limit as usize * READS_PER_HIT);
        for batch in ranked[..readable].chunks(limit.max(1) as usize) {
            let mut rows = Vec::with_capacity(batch.len());
            for candidate in batch {
                let conversation = ConversationId::parse(&candidate.conversation)
                    .map_err(store::Error::invariant)?;
                if let Some(row) = self
                    .store
                    .reconstruct(tenant, &conversation, candidate.turn)
                    .await?
                {
                    rows.push((candidate.clone(), row));
                }
            }
            let texts = texts.clone();
            let found = (self.cpu(tenant, CpuWork::Search, move || {
                (rows.into_iter())
                    .filter_map(|(candidate, row)| hit(candidate, row, &texts))
                    .collect::<Vec<_>>()
            }))
            .await?;
            hits.extend(found);
            if hits.len() >= limit as usize {
                hits.truncate(limit as usize);
                break;
            }
        }
        metrics::counter!("gatekeeper_searches_total", "scope" => scope.as_str()).increment(1);
        Ok(SearchResponse {
            query: q.to_owned(),
            ignored,
            complete: searched.iter().all(|t| t.complete),
            terms: searched,
            hits,
        })
    }
}

/// A candidate as a hit, or `None` when its text holds none of the terms its keys promised.
fn hit(candidate: Ranked, row: ReconstructRow, texts: &[String]) -> Option<SearchHit> {
    let wanted: Vec<&str> = candidate.terms.iter().map(|&i| texts[i].as_str()).collect();
    let (held, snippet) = search::snippet(&row.content, &wanted)?;
    let (source, checkpoint_id, terms_in_summary) = match &row.checkpoint {
        Some(checkpoint) if checkpoint.covered => {
            let summary = checkpoint.summary.as_deref().unwrap_or_default();
            let kept = locate(&held, summary).len() == held.len();
            (Source::Summary, Some(checkpoint.checkpoint_id), Some(kept))
        }
        Some(checkpoint) => (Source::RawLog, Some(checkpoint.checkpoint_id), None),
        None => (Source::Live, None, None),
    };
    Some(SearchHit {
        recall: format!(
            "/v1/conversations/{}/reconstruct/{}",
            candidate.conversation, candidate.turn
        ),
        conversation: candidate.conversation,
        turn: candidate.turn,
        role: row.role,
        // Four decimals are all a ranking needs, and keep answers stable to compare.
        score: (candidate.score * 1e4).round() / 1e4,
        snippet: SearchSnippet {
            text: snippet.text,
            start: snippet.start,
            matches: (snippet.matches.into_iter())
                .map(|m| SearchMatch {
                    term: m.term,
                    start: m.start,
                    end: m.end,
                })
                .collect(),
        },
        source,
        checkpoint_id,
        terms_in_summary,
    })
}

//! Search over the raw log (pure): the terms a query asks for, the keys a turn is indexed
//! under, the ranking of the turns that hold them, and the snippet that shows a hit.
//!
//! A turn is indexed under the keys of its term profile ([`crate::coverage::terms`]): every
//! word and every identifier-joined run (`src/store/mod.rs`, `get_user`, `2024-05-15`) and each
//! contiguous part of one, so an identifier is found whole and by its parts, exactly as the
//! summary matcher reads text, plus its conversation's key, so that a conversation's search
//! reads only the conversation's turns. Keys are hashes: a posting's tenant and conversation are
//! checked, and a hit is shown only once its terms are found in its text, so a collision can
//! cost a wasted read, never a wrong hit.
//!
//! Ranking is BM25 over the turns that hold a query term, each term counted once a turn (a
//! turn's size in tokens is its length): the more and the rarer the terms a turn holds, and the
//! shorter it is, the higher it ranks; ties go to the newer turn.

use crate::coverage::Role;
use crate::coverage::normalize::{is_word_char, normalize_text};
use crate::coverage::terms::{MAX_KEY_CHARS, TermKey, is_joining, key_of_normalized};
use crate::coverage::{derive::is_stop_word, locate};
use foldhash::HashMap;

/// Longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 1024;
/// Most distinct terms a query may ask for.
pub const MAX_QUERY_TERMS: usize = 16;
pub const DEFAULT_LIMIT: u32 = 10;
pub const MAX_LIMIT: u32 = 50;
/// Most turns ranked per query term: what bounds a query's cost. A term held by more turns is
/// reported incomplete, so the caller knows to ask for something rarer.
pub const TERM_CANDIDATES: u32 = 1000;
/// Characters of a hit's text its snippet shows at most (more only for a longer match).
pub const SNIPPET_CHARS: usize = 240;
/// Characters of context the snippet keeps before its first match.
const SNIPPET_LEAD: usize = 60;

// BM25's constants: k1 as usual, b lower than the usual 0.75 since each term counts once a turn
// (a long turn's repeats earn it nothing), so length is not punished twice.
const K1: f64 = 1.2;
const B: f64 = 0.5;

/// A term of a query: its normalized text and the key turns holding it are indexed under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryTerm {
    pub text: String,
    pub key: TermKey,
}

/// A query's terms, and the words it holds that are not searched (stop words, single
/// characters, words longer than an index key, terms past [`MAX_QUERY_TERMS`]): an answer says
/// what it did not look for, never silently.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    pub terms: Vec<QueryTerm>,
    pub ignored: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("q must not be empty")]
    Empty,
    #[error("q is {chars} characters long; at most {MAX_QUERY_CHARS} are allowed")]
    TooLong { chars: usize },
}

/// The distinct terms of `q`, in order: each run of words joined by identifier punctuation is
/// one term (a run longer than an index key is taken word by word); lone single characters and
/// stop words are left out, as the index leaves them out, and listed as ignored.
pub fn parse_query(q: &str) -> Result<Query, QueryError> {
    let chars = q.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(QueryError::TooLong { chars });
    }
    if q.is_empty() {
        return Err(QueryError::Empty);
    }
    let text = normalize_text(q);
    let mut query = Query::default();
    for run in runs(&text) {
        if run.chars().count() <= MAX_KEY_CHARS {
            add(&mut query, run);
        } else {
            (run.split(|c: char| !is_word_char(c)))
                .filter(|w| !w.is_empty())
                .for_each(|word| add(&mut query, word));
        }
    }
    Ok(query)
}

/// Adds `term` to the query's terms, or to its ignored words when it cannot be searched.
fn add(query: &mut Query, term: &str) {
    let chars = term.chars().count();
    let single = term.chars().all(is_word_char);
    let searchable = chars <= MAX_KEY_CHARS && (!single || (chars > 1 && !is_stop_word(term)));
    let key = key_of_normalized(term);
    if query.terms.iter().any(|t| t.key == key) || query.ignored.iter().any(|i| i == term) {
        return;
    }
    if searchable && query.terms.len() < MAX_QUERY_TERMS {
        query.terms.push(QueryTerm {
            text: term.to_owned(),
            key,
        });
    } else {
        query.ignored.push(term.to_owned());
    }
}

/// The maximal runs of words joined by identifier punctuation, each from its first word
/// character to its last.
fn runs(text: &str) -> impl Iterator<Item = &str> {
    let mut runs = Vec::new();
    let (mut start, mut end): (Option<usize>, usize) = (None, 0);
    for (i, c) in text.char_indices() {
        if is_word_char(c) {
            start.get_or_insert(i);
            end = i + c.len_utf8();
        } else if !is_joining(c)
            && let Some(s) = start.take()
        {
            runs.push(&text[s..end]);
        }
    }
    if let Some(s) = start {
        runs.push(&text[s..end]);
    }
    runs.into_iter()
}

/// A conversation's key: every turn is indexed under it besides its terms, so a
/// conversation's search reads the turns indexed under both (the index intersects the two
/// lists). Prefixed so that no text a turn holds hashes the same way by construction.
pub fn conversation_key(tenant: &str, conversation: &str) -> TermKey {
    key_of_normalized(&format!(
        "\u{0}conversation\u{0}{tenant}\u{0}{conversation}"
    ))
}

/// Every key a turn is indexed under: its conversation's ([`conversation_key`]), then its
/// profile's terms.
pub fn index_keys(conversation: TermKey, terms: &[TermKey]) -> Vec<TermKey> {
    let mut keys = Vec::with_capacity(terms.len() + 1);
    keys.push(conversation);
    keys.extend_from_slice(terms);
    keys
}

/// A key as one token of a full-text index (SQLite's FTS5): `k` and eight hex digits.
pub fn key_token(key: TermKey) -> String {
    format!("k{:08x}", key.0)
}

/// The document a full-text index holds for a turn: its keys as tokens.
pub fn key_document(keys: &[TermKey]) -> String {
    let mut doc = String::with_capacity(keys.len() * 10);
    for (i, &key) in keys.iter().enumerate() {
        if i > 0 {
            doc.push(' ');
        }
        doc.push_str(&key_token(key));
    }
    doc
}

/// What a search reads across: one conversation, or every conversation of the tenant (whose
/// name starts with a prefix, when given).
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    Conversation(&'a str),
    Tenant {
        conversation_prefix: Option<&'a str>,
    },
}

impl Scope<'_> {
    pub fn as_str(&self) -> &'static str {
        match self {
            Scope::Conversation(_) => "conversation",
            Scope::Tenant { .. } => "tenant",
        }
    }

    /// The key the index narrows the scope by, besides a term's: a conversation's. A
    /// tenant-wide search reads a term's turns and the store keeps the tenant's (a tenant key
    /// would make the index intersect every term with all of the tenant's turns). Keys are
    /// hashes: the store checks each posting's tenant and conversation, and the flow its text.
    pub fn key(&self, tenant: &str) -> Option<TermKey> {
        match self {
            Scope::Conversation(conversation) => Some(conversation_key(tenant, conversation)),
            Scope::Tenant { .. } => None,
        }
    }
}

/// A turn the index holds under a term's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posting {
    pub conversation: String,
    pub turn: i64,
    pub role: Role,
    pub tokens: u32,
}

/// A candidate hit: the turn, its score, and which query terms (by index) it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    pub conversation: String,
    pub turn: i64,
    pub role: Role,
    pub score: f64,
    pub terms: Vec<usize>,
}

/// Ranks the turns of `postings` (one list a query term) by BM25, best first; `scope_turns`
/// is how many turns the scope holds.
pub fn rank(postings: &[Vec<Posting>], scope_turns: u64) -> Vec<Ranked> {
    let mut by_turn: HashMap<(&str, i64), (Role, u32, Vec<usize>)> = HashMap::default();
    for (term, list) in postings.iter().enumerate() {
        for p in list {
            let entry = by_turn
                .entry((p.conversation.as_str(), p.turn))
                .or_insert_with(|| (p.role, p.tokens, Vec::new()));
            if !entry.2.contains(&term) {
                entry.2.push(term);
            }
        }
    }
    if by_turn.is_empty() {
        return Vec::new();
    }
    let turns = (scope_turns as f64).max(by_turn.len() as f64);
    let idf: Vec<f64> = postings
        .iter()
        .map(|list| {
            let df = list.len() as f64;
            (1.0 + (turns - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let mean_tokens = (by_turn.values().map(|(_, t, _)| f64::from(*t)).sum::<f64>()
        / by_turn.len() as f64)
        .max(1.0);
    let mut ranked: Vec<Ranked> = by_turn
        .into_iter()
        .map(|((conversation, turn), (role, tokens, terms))| {
            let length = 1.0 - B + B * f64::from(tokens) / mean_tokens;
            let per_term = (K1 + 1.0) / (1.0 + K1 * length);
            Ranked {
                conversation: conversation.to_owned(),
                turn,
                role,
                score: terms.iter().map(|&t| idf[t] * per_term).sum(),
                terms,
            }
        })
        .collect();
    ranked.sort_by(|a, b| {
        (b.score.total_cmp(&a.score))
            .then(b.turn.cmp(&a.turn))
            .then_with(|| a.conversation.cmp(&b.conversation))
    });
    ranked
}

/// Where a hit's terms stand in its text. Offsets count characters (Unicode scalar values),
/// as evidence offsets do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// At most [`SNIPPET_CHARS`] characters of the text, around its first match.
    pub text: String,
    /// Character offset of `text` in the whole text.
    pub start: usize,
    /// Each term's first occurrence, when inside `text`, by character offsets into it, in text
    /// order.
    pub matches: Vec<SnippetMatch>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnippetMatch {
    pub term: String,
    pub start: usize,
    pub end: usize,
}

/// The terms of `terms` that `text` holds at word boundaries (as the summary matcher reads
/// it), and the snippet around the first; `None` when it holds none of them.
pub fn snippet(text: &str, terms: &[&str]) -> Option<(Vec<String>, Snippet)> {
    let mut found = locate(terms, text);
    found.sort_by_key(|e| (e.start, e.end));
    let first = found.first()?;
    let mut start = first.start.saturating_sub(SNIPPET_LEAD);
    if first.end - start > SNIPPET_CHARS {
        start = first.start;
    }
    let end = (start + SNIPPET_CHARS).max(first.end);
    let matches = (found.iter())
        .filter(|e| e.start >= start && e.end <= end)
        .map(|e| SnippetMatch {
            term: e.anchor.clone(),
            start: e.start - start,
            end: e.end - start,
        })
        .collect();
    let shown = text.chars().skip(start).take(end - start).collect();
    let held = found.into_iter().map(|e| e.anchor).collect();
    Some((
        held,
        Snippet {
            text: shown,
            start,
            matches,
        },
    ))
}

#[cfg(test)]
mod tests;

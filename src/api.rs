//! The wire contract: request and response bodies, shared by the server and its clients.
//!
//! JSON, snake_case. Requests reject unknown fields, so a misspelled `consumed` can never turn
//! a reported proposal into an unreported one.

use crate::coverage::{
    AnchorEvidence, Evidence, IdRange, IdRanges, Mode, Outcome, Reason, Role, Verdict,
};
pub use crate::plan::{Advice, AdviceReason};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"turns": [
    {"id": 0, "role": "user", "content": "Hi! I'm looking to book a flight from New York to Seattle on May 20th."},
    {"id": 1, "role": "assistant", "content": "To assist you with booking a flight, I'll need your user ID. Could you please provide that?"},
    {"id": 2, "role": "user", "content": "Sure, my user ID is mia_li_3668.", "external_id": "msg_03"}
]}))]
pub struct AppendTurnsRequest {
    /// At most `GATEKEEPER_MAX_BATCH_TURNS` (default 10,000).
    #[schema(min_items = 1, max_items = 10000)]
    pub turns: Vec<AppendTurn>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendTurn {
    /// The turn's sequence number; omitted, the service assigns the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub id: Option<i64>,
    pub role: Role,
    pub content: String,
    /// Omitted, the service counts them with its tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
    /// Omitted, the service derives them from the content. At most
    /// `GATEKEEPER_MAX_ANCHORS_PER_TURN` (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Anchor>>, max_items = 64)]
    pub anchors: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Label>)]
    pub external_id: Option<String>,
    /// A pending tool call, a standing instruction, a user constraint: a pinned turn is never
    /// covered by any summary, so it is always answered from the raw log and kept verbatim in
    /// the working context. Unpin it with `PATCH .../turns/{id}`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"conversation": "airline-0-0", "appended": 3, "replayed": 0, "next_id": 3, "turns": [
    {"id": 0, "tokens": 19, "anchors": ["Seattle", "York", "New"]},
    {"id": 1, "tokens": 20, "anchors": []},
    {"id": 2, "tokens": 12, "anchors": ["mia_li_3668"]}
]}))]
pub struct AppendTurnsResponse {
    pub conversation: String,
    pub appended: u64,
    pub replayed: u64,
    pub next_id: i64,
    pub turns: Vec<AppendedTurn>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AppendedTurn {
    pub id: i64,
    pub tokens: u32,
    /// The anchors the client sent, or the provisional derived ones: what is rarest in the turn
    /// so far. The decision checks derived anchors per range (rule 2b), so ask
    /// `compaction-plan` for the ones a given range needs.
    pub anchors: Vec<String>,
}

/// Who chose a turn's anchors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnchorOrigin {
    /// The client sent them: authoritative.
    Given,
    /// The service derived them from the content.
    Derived,
}

impl AnchorOrigin {
    pub fn of(given: bool) -> Self {
        if given {
            AnchorOrigin::Given
        } else {
            AnchorOrigin::Derived
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TurnResponse {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
    /// The client's anchors, or the provisional derived ones.
    pub anchors: Vec<String>,
    pub anchor_origin: AnchorOrigin,
    pub pinned: bool,
    pub external_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// `GET .../turns`: a page of the log's turns, without their content: what it takes to draw
/// the conversation to scale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TurnListResponse {
    pub conversation: String,
    pub turns: Vec<TurnListItem>,
    /// Pass as `from` for the next page; absent when this page reaches the end of the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_from: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TurnListItem {
    pub id: i64,
    pub role: Role,
    pub tokens: u32,
    pub pinned: bool,
}

/// `PATCH .../turns/{id}`: pin or unpin a turn.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"pinned": false}))]
pub struct TurnPatch {
    /// `false` lets later summaries cover the turn; `true` keeps every later one from it.
    pub pinned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"conversation": "airline-0-0", "next_id": 3, "total_tokens": 51, "checkpoints": 1,
    "latest_checkpoint": {"checkpoint_id": 1, "from": 0, "advanced_to": 2, "outcome": "narrowed"}}))]
pub struct ConversationResponse {
    pub conversation: String,
    pub next_id: i64,
    pub total_tokens: i64,
    pub checkpoints: i64,
    pub latest_checkpoint: Option<CheckpointRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckpointRef {
    pub checkpoint_id: i64,
    pub from: i64,
    pub advanced_to: i64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "from": 0, "to": 2, "summary_budget": 512, "finish_reason": "stop", "end_marker": "</summary>",
    "summary": "<summary>Mia (user mia_li_3668) wants a flight from New York to Seattle on May 20th.</summary>"
}))]
pub struct CompactionRequestBody {
    /// First turn of the range (inclusive).
    #[schema(minimum = 0)]
    pub from: i64,
    /// Last turn of the range (inclusive); not before `from`, and in the log.
    #[schema(minimum = 0)]
    pub to: i64,
    pub summary: String,
    /// The token budget the summary was written under.
    #[schema(minimum = 1)]
    pub summary_budget: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed: Option<Vec<IdRange>>,
    /// The summarizer's stop reason as its API returned it (`length`, `max_tokens`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Label>)]
    pub finish_reason: Option<String>,
    /// A string the complete summary must end with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Label>)]
    pub end_marker: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub dry_run: bool,
    /// Absent: no check. `null`: the conversation must have no checkpoint yet. A number: it must
    /// be the latest checkpoint's id.
    #[serde(
        default,
        deserialize_with = "present_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub expected_checkpoint: Option<Option<i64>>,
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
fn present_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    Option::<i64>::deserialize(d).map(Some)
}

/// A verdict as the API returns it: the decision plus where it was persisted, if anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({
    "conversation": "airline-0-0", "checkpoint_id": 1, "dry_run": false, "outcome": "narrowed",
    "rejection": null, "mode": "narrow", "from": 0, "to": 2, "advanced_to": 2,
    "covered": [[0, 0], [2, 2]], "uncovered": [[1, 1]], "not_compacted": [], "contradictions": [],
    "prefix_tokens": 51, "required_budget": 11, "summary_budget": 512, "summary_tokens": 28,
    "over_ceiling": false, "truncated": false, "truncation_signals": [], "coverage_path": "anchors",
    "turns": [{"id": 1, "status": "uncovered", "reason": "no_anchors", "missing_anchors": []}]
}))]
pub struct VerdictResponse {
    pub conversation: String,
    /// `null` for a dry run or a rejected verdict: nothing was persisted.
    pub checkpoint_id: Option<i64>,
    pub dry_run: bool,
    #[serde(flatten)]
    pub verdict: Verdict,
}

impl VerdictResponse {
    /// A rejected verdict as the problem+json body it is answered with (422): the problem's
    /// members and every field of the verdict. Also what an Idempotency-Key records for it.
    pub fn rejection_problem(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::{Value, json};
        let mut body = serde_json::Map::new();
        body.insert(
            "type".into(),
            json!("urn:gatekeeper:problem:proposal-rejected"),
        );
        body.insert("title".into(), json!("Unprocessable Entity"));
        body.insert("status".into(), json!(422));
        if let Value::Object(fields) = json!(self) {
            body.extend(fields);
        }
        let v = &self.verdict;
        let detail = match v.rejection {
            Some(crate::coverage::Rejection::StrictMode) => format!(
                "strict mode: the summary does not cover the whole range (uncovered {}, not compacted {}, truncated: {}); nothing was persisted",
                v.uncovered, v.not_compacted, v.truncated
            ),
            _ => format!(
                "the summary covers no turn of [{}, {}]; nothing was persisted",
                v.from, v.to
            ),
        };
        body.insert("detail".into(), json!(detail));
        body
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckpointListResponse {
    pub conversation: String,
    pub checkpoints: Vec<CheckpointItem>,
    /// Pass as `cursor` for the next, older page; absent when this page is the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckpointItem {
    pub checkpoint_id: i64,
    pub created_at: DateTime<Utc>,
    pub from: i64,
    pub to: i64,
    pub advanced_to: i64,
    pub outcome: Outcome,
    pub covered: IdRanges,
    pub uncovered: IdRanges,
    pub not_compacted: IdRanges,
    pub summary_tokens: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckpointResponse {
    pub conversation: String,
    pub checkpoint_id: i64,
    pub created_at: DateTime<Utc>,
    pub summary: String,
    #[serde(flatten)]
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A checkpoint covers the turn: the summary stands for it.
    Summary,
    /// A checkpoint spans the turn but does not cover it: the raw turn is the answer.
    RawLog,
    /// No checkpoint spans the turn yet.
    Live,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Summary => "summary",
            Source::RawLog => "raw_log",
            Source::Live => "live",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({
    "turn": 2, "source": "summary", "checkpoint_id": 1, "role": "user", "reason": null,
    "text": "<summary>Mia (user mia_li_3668) wants a flight from New York to Seattle on May 20th.</summary>",
    "evidence": [{"anchor": "mia_li_3668", "start": 19, "end": 30}]
}))]
pub struct ReconstructResponse {
    pub turn: i64,
    pub source: Source,
    pub checkpoint_id: Option<i64>,
    pub text: String,
    pub role: Role,
    /// Why a spanning checkpoint does not cover the turn (only for `raw_log`).
    pub reason: Option<Reason>,
    /// Where each anchor that decided the turn occurs in the summary (only for `summary`).
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"conversation": "airline-0-0", "total_tokens": 48, "items": [
    {"type": "summary", "checkpoint_id": 1, "covers": [[0, 0], [2, 2]], "tokens": 28,
     "text": "<summary>Mia (user mia_li_3668) wants a flight from New York to Seattle on May 20th.</summary>"},
    {"type": "turn", "id": 1, "role": "assistant", "source": "raw_log", "tokens": 20,
     "content": "To assist you with booking a flight, I'll need your user ID. Could you please provide that?"}
]}))]
pub struct ContextResponse {
    pub conversation: String,
    pub items: Vec<ContextItem>,
    /// Tokens of every item: summaries count their summary tokens, turns their own, stubs what
    /// the stub itself takes (`stub_tokens`).
    pub total_tokens: u64,
    /// With `max_tokens` only: the budget asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// With `max_tokens` only: whether the context fits it. `false` when the summaries, pinned
    /// turns and live tail alone (every other turn a stub) take more; the answer is then that
    /// smallest context, never a silent cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fits: Option<bool>,
    /// With `max_tokens` only: the smallest `max_tokens` that fits (every stubbable turn a stub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smallest_max_tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContextItem {
    Summary {
        checkpoint_id: i64,
        /// The turns this summary stands for in this context.
        covers: IdRanges,
        text: String,
        tokens: u32,
    },
    Turn {
        id: i64,
        role: Role,
        content: String,
        source: Source,
        tokens: u32,
    },
    /// A turn no summary covers, left out of a budgeted context: it exists, this is how big it
    /// is, and `recall` answers it byte-exact.
    Stub {
        id: i64,
        role: Role,
        /// The turn's own tokens: what recalling it brings back.
        tokens: u32,
        /// What this stub takes in the context (counted in `total_tokens`).
        stub_tokens: u32,
        /// The turn's first characters (at most 160).
        preview: String,
        /// The turn's anchors, to search or ask for it by.
        anchors: Vec<String>,
        /// The reconstruct path that answers it.
        recall: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"from": 0, "to": 2, "prefix_tokens": 320, "required_budget": 64, "summary_budget": 64,
    "anchor_tokens": 9, "advice": "compact", "advice_reason": "fits", "recent_rejections": 0, "worthwhile_tokens": 64,
    "budget_for_next_turn": null, "turns": [
        {"id": 0, "anchors": ["Seattle", "York", "May"], "anchor_origin": "derived", "unanchored": null,
         "evidence": [{"anchor": "Seattle", "turns_sharing": 1}, {"anchor": "York", "turns_sharing": 1}, {"anchor": "May", "turns_sharing": 1}]},
        {"id": 1, "anchors": ["assist", "provide", "booking"], "anchor_origin": "derived", "unanchored": null,
         "evidence": [{"anchor": "assist", "turns_sharing": 1}, {"anchor": "provide", "turns_sharing": 1}, {"anchor": "booking", "turns_sharing": 1}]},
        {"id": 2, "anchors": ["mia_li_3668"], "anchor_origin": "derived", "unanchored": null,
         "evidence": [{"anchor": "mia_li_3668", "turns_sharing": 1}]}
    ]}))]
pub struct CompactionPlanResponse {
    pub from: i64,
    /// The largest `to` whose range fits the budget; `null` when not even `from` fits.
    pub to: Option<i64>,
    pub prefix_tokens: u64,
    pub required_budget: u64,
    pub summary_budget: i64,
    /// Tokens the range's anchors take written out, a separator each. `to` is also held back so
    /// that they take at most half the budget: a summary needs room around them.
    pub anchor_tokens: u64,
    /// What to do now: `compact` this range, `raise_budget` (not even `from` fits, or the range
    /// is too small and its next turn does not fit the budget), or `wait` (the range is too small
    /// to be worth a summary and more turns may lengthen it, or the last proposals from `from`
    /// were rejected).
    pub advice: Advice,
    pub advice_reason: AdviceReason,
    /// Proposals from this `from` rejected in a row (dry runs aside); 3 or more advise `wait`.
    pub recent_rejections: u32,
    /// A range is worth a summary from this many tokens: the summary budget (below that, the
    /// summary may be no smaller than what it replaces).
    pub worthwhile_tokens: u64,
    /// Set when the budget cut the range short of the compactable turns: the summary budget
    /// that would take in its next turn (`advice_reason` `next_turn_over_budget` when the range
    /// is too small without it).
    pub budget_for_next_turn: Option<u64>,
    /// For each turn of `[from, to]`: what the summary must hold for the decision to count it
    /// covered, exactly as the decision will check it for this range.
    pub turns: Vec<PlannedTurn>,
}

/// One turn of a planned range and what the decision will check for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlannedTurn {
    pub id: i64,
    /// The anchors the summary must hold (all of them, or under the `any` rule one that only
    /// this turn holds), best first: the client's, or rule 2b's for this range.
    pub anchors: Vec<String>,
    pub anchor_origin: AnchorOrigin,
    /// Why no anchor can cover the turn: `pinned` (never covered) or `no_anchors` (covered only
    /// through a coverage report of an untruncated summary).
    pub unanchored: Option<Reason>,
    /// For derived anchors: each with the number of turns of the range that hold it (1: the
    /// turn's own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<AnchorEvidence>,
}

/// The answer of `/healthz` and `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Status {
    /// `ok` (live) or `ready`.
    pub status: String,
}

/// Characters short labels may not hold: C0 and C1 controls (`\u0000` included).
const NO_CONTROLS: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";

/// An anchor, as the OpenAPI document describes it: 1 to 256 characters, not only whitespace,
/// no control characters.
pub struct Anchor;

impl utoipa::PartialSchema for Anchor {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(256))
            .pattern(Some("^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"))
            .description(Some("A token the summary must preserve (matched after NFKC, case folding and whitespace collapsing, at word boundaries)."))
            .into()
    }
}

impl utoipa::ToSchema for Anchor {}

/// A short label (external id, finish reason, end marker): at most 256 characters, no control
/// characters.
pub struct Label;

impl utoipa::PartialSchema for Label {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .max_length(Some(256))
            .pattern(Some(NO_CONTROLS))
            .into()
    }
}

impl utoipa::ToSchema for Label {}

impl AppendTurnsResponse {
    /// The answer to an append: new and replayed turns alike, in id order, so a retried batch
    /// gets the answer the first try got.
    pub fn from_plan(conversation: &str, plan: &crate::append::Appended) -> Self {
        let turns = (plan.new.iter().map(|(t, _)| t))
            .chain(&plan.replayed)
            .map(|t| AppendedTurn {
                id: t.id,
                tokens: t.tokens,
                anchors: t.anchors.clone(),
            });
        Self::of_turns(conversation, Self::counts(plan), turns)
    }

    /// [`AppendTurnsResponse::from_plan`], moving the anchors rather than copying them (a
    /// few allocations a turn).
    pub fn from_appended(conversation: &str, plan: crate::append::Appended) -> Self {
        let counts = Self::counts(&plan);
        let turns = (plan.new.into_iter().map(|(t, _)| t))
            .chain(plan.replayed)
            .map(|t| AppendedTurn {
                id: t.id,
                tokens: t.tokens,
                anchors: t.anchors,
            });
        Self::of_turns(conversation, counts, turns)
    }

    /// Appended, replayed, next id.
    fn counts(plan: &crate::append::Appended) -> (u64, u64, i64) {
        let replayed = plan.replayed.len() as u64 + plan.repeated_in_batch;
        (plan.new.len() as u64, replayed, plan.next_id)
    }

    fn of_turns(
        conversation: &str,
        (appended, replayed, next_id): (u64, u64, i64),
        turns: impl Iterator<Item = AppendedTurn>,
    ) -> Self {
        let mut turns: Vec<AppendedTurn> = turns.collect();
        turns.sort_by_key(|t| t.id);
        turns.dedup_by_key(|t| t.id);
        Self {
            conversation: conversation.to_owned(),
            appended,
            replayed,
            next_id,
            turns,
        }
    }
}

/// Search hits over the raw log, best first, each with what `reconstruct` would answer for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"query": "HAT170", "complete": true,
    "terms": [{"term": "hat170", "turns": 1, "complete": true}], "ignored": [],
    "hits": [{"conversation": "airline-0-0", "turn": 7, "role": "tool", "score": 7.62,
      "snippet": {"text": "{\"flight_number\": \"HAT170\", \"origin\": \"LGA\"", "start": 0,
                  "matches": [{"term": "hat170", "start": 19, "end": 25}]},
      "source": "raw_log", "checkpoint_id": 1, "terms_in_summary": null,
      "recall": "/v1/conversations/airline-0-0/reconstruct/7"}]}))]
pub struct SearchResponse {
    pub query: String,
    /// The terms searched for: each run of words joined by identifier punctuation, normalized
    /// (stop words and single characters left out).
    pub terms: Vec<SearchTerm>,
    /// Words of the query not searched, normalized: stop words, single characters, words
    /// longer than 64 characters, terms past the 16th.
    pub ignored: Vec<String>,
    pub hits: Vec<SearchHit>,
    /// False when some term is held by more turns than a query ranks: the hits are the best of
    /// those it read, and a rarer term would find the rest.
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SearchTerm {
    pub term: String,
    /// Turns of the scope found holding it (at most the per-term limit, 1,000).
    pub turns: u32,
    /// False when more turns hold it than were read.
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SearchHit {
    pub conversation: String,
    pub turn: i64,
    pub role: Role,
    /// BM25 over the turns found (higher is better); comparable within one answer only.
    pub score: f64,
    pub snippet: SearchSnippet,
    /// What `reconstruct` answers for this turn: `summary` (a checkpoint covers it), `raw_log`
    /// (a checkpoint spans it without covering it) or `live`.
    pub source: Source,
    /// The checkpoint that decides the turn, unless it is live.
    pub checkpoint_id: Option<i64>,
    /// With `source: summary` only: whether every matched term is in that summary too. False
    /// means the summary stands for the turn without the words searched for: recall the turn.
    pub terms_in_summary: Option<bool>,
    /// The path whose answer is this turn (`reconstruct`); `GET .../turns/{turn}` gives it raw.
    pub recall: String,
}

/// Where the matched terms stand in the turn's text: offsets count characters, as evidence
/// offsets do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SearchSnippet {
    /// Up to 240 characters of the turn's text around its first match.
    pub text: String,
    /// Where `text` starts in the turn's text.
    pub start: usize,
    /// Each matched term's first occurrence inside `text`.
    pub matches: Vec<SearchMatch>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SearchMatch {
    pub term: String,
    pub start: usize,
    pub end: usize,
}

/// One page of a tenant's conversations, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConversationListResponse {
    pub conversations: Vec<ConversationListItem>,
    /// Pass as `cursor` for the next page; absent when this page is the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConversationListItem {
    pub conversation: String,
    /// How many turns the log holds (the next id).
    pub turns: i64,
    pub latest_checkpoint_id: Option<i64>,
    /// What retention measures the conversation's age by.
    pub last_append_at: DateTime<Utc>,
}

/// What an import restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportResponse {
    pub conversation: String,
    pub turns: i64,
    pub checkpoints: i64,
}

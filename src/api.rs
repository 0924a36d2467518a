//! The wire contract: request and response bodies, shared by the server and its clients.
//!
//! JSON, snake_case. Requests reject unknown fields, so a misspelled `consumed` can never turn
//! a reported proposal into an unreported one.

use crate::coverage::{Evidence, IdRange, IdRanges, Mode, Outcome, Reason, Role, Verdict};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendTurnsRequest {
    pub turns: Vec<AppendTurn>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendTurn {
    /// The turn's sequence number; omitted, the service assigns the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    pub role: Role,
    pub content: String,
    /// Omitted, the service counts them with its tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
    /// Omitted, the service derives them from the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchors: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendTurnsResponse {
    pub conversation: String,
    pub appended: u64,
    pub replayed: u64,
    pub next_id: i64,
    pub turns: Vec<AppendedTurn>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendedTurn {
    pub id: i64,
    pub tokens: u32,
    /// What the summary must preserve for this turn to count as covered.
    pub anchors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnResponse {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
    pub anchors: Vec<String>,
    pub external_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationResponse {
    pub conversation: String,
    pub next_id: i64,
    pub total_tokens: i64,
    pub checkpoints: i64,
    pub latest_checkpoint: Option<CheckpointRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRef {
    pub checkpoint_id: i64,
    pub from: i64,
    pub advanced_to: i64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionRequestBody {
    pub from: i64,
    pub to: i64,
    pub summary: String,
    pub summary_budget: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed: Option<Vec<IdRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictResponse {
    pub conversation: String,
    /// `null` for a dry run or a rejected verdict: nothing was persisted.
    pub checkpoint_id: Option<i64>,
    pub dry_run: bool,
    #[serde(flatten)]
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointListResponse {
    pub conversation: String,
    pub checkpoints: Vec<CheckpointItem>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointResponse {
    pub conversation: String,
    pub checkpoint_id: i64,
    pub created_at: DateTime<Utc>,
    pub summary: String,
    #[serde(flatten)]
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconstructResponse {
    pub turn: i64,
    pub source: Source,
    pub checkpoint_id: Option<i64>,
    pub text: String,
    pub role: Role,
    /// Why a spanning checkpoint does not cover the turn (only for `raw_log`).
    pub reason: Option<Reason>,
    /// Where each of the turn's anchors occurs in the summary (only for `summary`).
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextResponse {
    pub conversation: String,
    pub items: Vec<ContextItem>,
    /// Tokens of every item: summaries count their summary tokens, turns their own.
    pub total_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionPlanResponse {
    pub from: i64,
    /// The largest `to` whose range fits the budget; `null` when not even `from` fits.
    pub to: Option<i64>,
    pub prefix_tokens: u64,
    pub required_budget: u64,
    pub summary_budget: i64,
}

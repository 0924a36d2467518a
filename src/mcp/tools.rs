//! The tools (pure): their names, descriptions and input schemas as a model reads them, and
//! the REST reads that answer each call.

use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

/// What a model is told about the server as a whole.
pub const INSTRUCTIONS: &str = "The compaction gatekeeper keeps every turn of this conversation, \
including the ones a summary stands for and the ones your working context leaves out as stubs. \
Before you conclude that something was never said, search for it (search_history) and read the \
turn (recall_turn): an answer from here is never a false negative.";

/// Every tool: name, description for a model, JSON Schema of its arguments.
pub fn list() -> Vec<(&'static str, &'static str, Value)> {
    let conversation = json!({"type": "string", "description": "The conversation id."});
    vec![
        (
            "search_history",
            "Search the full history of a conversation (or of all your conversations) by words you remember: a name, an order or reservation number, a file path, an error code, a date. It reads the raw turns, including the ones a summary stands for and the ones your context left out as stubs. Call it when a stub or a summary lacks a detail you need, or before you conclude that something was never said. Hits come best first, each with the turn id, a snippet and `source` (what recall_turn answers for it; `terms_in_summary: false` means the summary dropped those words, so recall the turn).",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words, numbers or identifiers, e.g. `ZFA04Y`, `src/store/mod.rs`, `HTTP 503`."},
                    "conversation": {"type": "string", "description": "Search only this conversation; omitted, every conversation of yours."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most hits (default 10)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        (
            "recall_turn",
            "Read one turn of a conversation by its id (a stub's `id`, a search hit's `turn`). When a checkpoint's summary covers the turn, the answer is that summary, with evidence showing where the turn's facts stand in it; otherwise it is the turn itself, exactly as it was logged (`source: raw_log` or `live`).",
            json!({
                "type": "object",
                "properties": {
                    "conversation": conversation,
                    "turn": {"type": "integer", "minimum": 0, "description": "The turn id."}
                },
                "required": ["conversation", "turn"],
                "additionalProperties": false
            }),
        ),
        (
            "working_context",
            "The conversation's working context to continue from, in turn order: summaries, and turns verbatim. With `max_tokens`, it fits that budget: summaries, pinned turns and the newest turns stay verbatim and the turns that do not fit become stubs (id, size, a preview, anchors) that recall_turn reads back in full. `fits: false` means even the smallest context exceeds the budget.",
            json!({
                "type": "object",
                "properties": {
                    "conversation": conversation,
                    "max_tokens": {"type": "integer", "minimum": 0, "description": "The most tokens the context may take."}
                },
                "required": ["conversation"],
                "additionalProperties": false
            }),
        ),
        (
            "coverage",
            "What a compaction checkpoint's summary really covers: the covered turns, the uncovered ones with the reason (for example a fact the summary lost), and the turns not compacted. Without `checkpoint_id`, the latest checkpoint; a conversation without one answers its log's state (`latest_checkpoint: null`). Call it to judge whether a summary can stand for a turn before you rely on it.",
            json!({
                "type": "object",
                "properties": {
                    "conversation": conversation,
                    "checkpoint_id": {"type": "integer", "minimum": 1, "description": "The checkpoint; default the latest."}
                },
                "required": ["conversation"],
                "additionalProperties": false
            }),
        ),
    ]
}

/// The REST reads that answer a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// One GET, whose answer is the tool's.
    Get(String),
    /// The latest checkpoint's verdict: the conversation (`GET /v1/conversations/{c}`) names
    /// it, then `GET .../compactions/{id}` answers; without one, the conversation's answer.
    LatestCoverage { conversation: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    conversation: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    conversation: String,
    turn: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextArgs {
    conversation: String,
    max_tokens: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CoverageArgs {
    conversation: String,
    checkpoint_id: Option<i64>,
}

/// The reads a call of `tool` with `arguments` makes, or why the arguments are not its.
/// Values are checked by the REST endpoints, which answer a bad one with a problem.
pub fn call(tool: &str, arguments: Option<serde_json::Map<String, Value>>) -> Result<Call, String> {
    let arguments = Value::Object(arguments.unwrap_or_default());
    fn args<T: serde::de::DeserializeOwned>(tool: &str, v: Value) -> Result<T, String> {
        serde_json::from_value(v).map_err(|e| format!("bad arguments for {tool}: {e}"))
    }
    match tool {
        "search_history" => {
            let a: SearchArgs = args(tool, arguments)?;
            let mut url = match &a.conversation {
                Some(c) => path(&["v1", "conversations", c, "search"]),
                None => path(&["v1", "search"]),
            };
            url.query_pairs_mut().append_pair("q", &a.query);
            if let Some(limit) = a.limit {
                url.query_pairs_mut()
                    .append_pair("limit", &limit.to_string());
            }
            Ok(Call::Get(path_and_query(&url)))
        }
        "recall_turn" => {
            let a: RecallArgs = args(tool, arguments)?;
            let turn = a.turn.to_string();
            let url = path(&["v1", "conversations", &a.conversation, "reconstruct", &turn]);
            Ok(Call::Get(path_and_query(&url)))
        }
        "working_context" => {
            let a: ContextArgs = args(tool, arguments)?;
            let mut url = path(&["v1", "conversations", &a.conversation, "context"]);
            if let Some(max_tokens) = a.max_tokens {
                url.query_pairs_mut()
                    .append_pair("max_tokens", &max_tokens.to_string());
            }
            Ok(Call::Get(path_and_query(&url)))
        }
        "coverage" => {
            let a: CoverageArgs = args(tool, arguments)?;
            Ok(match a.checkpoint_id {
                Some(id) => Call::Get(checkpoint_path(&a.conversation, id)),
                None => Call::LatestCoverage {
                    conversation: a.conversation,
                },
            })
        }
        other => Err(format!(
            "no tool named {other:?}: the tools are search_history, recall_turn, working_context and coverage"
        )),
    }
}

pub fn conversation_path(conversation: &str) -> String {
    path_and_query(&path(&["v1", "conversations", conversation]))
}

pub fn checkpoint_path(conversation: &str, checkpoint_id: i64) -> String {
    let id = checkpoint_id.to_string();
    path_and_query(&path(&[
        "v1",
        "conversations",
        conversation,
        "compactions",
        &id,
    ]))
}

/// A path of percent-encoded segments: an argument can never reach another route.
fn path(segments: &[&str]) -> Url {
    let mut url = Url::parse("http://gatekeeper/").expect("a valid base");
    url.path_segments_mut()
        .expect("an http URL has segments")
        .pop_if_empty()
        .extend(segments);
    url
}

fn path_and_query(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

/// A tool's error text: the problem's status, title and detail.
pub fn problem_text(status: u16, problem: &Value) -> String {
    let field = |name: &str| problem.get(name).and_then(Value::as_str).unwrap_or("");
    format!("{status} {}: {}", field("title"), field("detail"))
}

#[cfg(test)]
mod tests;

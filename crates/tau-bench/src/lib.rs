//! Reader for the tau-bench airline transcripts (`shared/data/tau-bench-airline.jsonl.gz`).
//!
//! One JSON object per line: `{"conversation": "airline-<task>-<trial>", "reward": 1.0,
//! "turns": [{"role", "content", "tool_calls": [{"name", "arguments"}], "name"}]}`.
//! Unknown fields are ignored and missing optional fields default, so the reader also takes
//! hand-written fixtures.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use serde::{Deserialize, Deserializer, Serialize};

/// One recorded conversation: its id (`airline-<task>-<trial>`) and its turns in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub conversation: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub turns: Vec<TranscriptTurn>,
}

/// One turn of a transcript: `system`, `user`, `assistant` or `tool`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptTurn {
    pub role: String,
    /// Empty for assistant turns that only call tools.
    #[serde(default, deserialize_with = "null_as_default")]
    pub content: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub tool_calls: Vec<ToolCall>,
    /// The tool's name, on `tool` turns.
    #[serde(default)]
    pub name: Option<String>,
}

/// A tool call made by the assistant. `arguments` is JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// JSON text; an inline JSON value is accepted too and kept as its compact text.
    #[serde(default, deserialize_with = "json_text")]
    pub arguments: String,
}

impl TranscriptTurn {
    /// The turn's text: its content or, when the content is empty and the turn calls tools,
    /// one `name(arguments)` line per call, so tool-call-only turns still have text.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        if !self.content.is_empty() || self.tool_calls.is_empty() {
            return std::borrow::Cow::Borrowed(&self.content);
        }
        let mut out = String::new();
        for (i, call) in self.tool_calls.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            // Writing to a String cannot fail.
            let _ = write!(out, "{}({})", call.name, call.arguments);
        }
        std::borrow::Cow::Owned(out)
    }
}

/// Why the transcripts could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TauBenchError {
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot read line {line}: {source}")]
    Read { line: usize, source: io::Error },
    #[error("line {line} is not a conversation: {source}")]
    Parse {
        line: usize,
        source: serde_json::Error,
    },
}

/// Where the shared data lives: `$TAU_BENCH_DATA` when set (a copy of the tree elsewhere, as
/// `cargo mutants` makes, has no `../shared`), else `<repository>/../shared/data/`.
pub fn default_path() -> PathBuf {
    if let Some(path) = std::env::var_os("TAU_BENCH_DATA") {
        return PathBuf::from(path);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .join("shared")
        .join("data")
        .join("tau-bench-airline.jsonl.gz")
}

/// Reads the conversations at [`default_path`].
pub fn read_default() -> Result<Vec<Conversation>, TauBenchError> {
    read_gz(&default_path())
}

/// Reads a gzip-compressed JSON-lines file of conversations.
pub fn read_gz(path: &Path) -> Result<Vec<Conversation>, TauBenchError> {
    let file = File::open(path).map_err(|source| TauBenchError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    read_jsonl(BufReader::new(GzDecoder::new(file)))
}

/// Reads plain JSON lines of conversations; blank lines are skipped. Line numbers are 1-based.
pub fn read_jsonl(reader: impl BufRead) -> Result<Vec<Conversation>, TauBenchError> {
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let line = line.map_err(|source| TauBenchError::Read {
            line: line_no,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let conversation = serde_json::from_str(&line).map_err(|source| TauBenchError::Parse {
            line: line_no,
            source,
        })?;
        out.push(conversation);
    }
    Ok(out)
}

/// `null` reads as the type's default (recorders write `"content": null` for tool-only turns).
fn null_as_default<'de, D, T>(de: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(de)?.unwrap_or_default())
}

/// Tool-call arguments are JSON text in tau-bench, but some recorders inline the object.
fn json_text<'de, D>(de: D) -> Result<String, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(match serde_json::Value::deserialize(de)? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

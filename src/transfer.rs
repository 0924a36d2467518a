//! Export and import as NDJSON (pure): the lines, and the checks an import passes before
//! anything is written.
//!
//! An export is a header line, every turn in id order, then every checkpoint in id order. A
//! turn carries its term profile (base64), so an import keeps what the decisions used
//! (`candidates_used` indexes into it) instead of deriving it again; times are kept too, so
//! export → import → export gives the same bytes.

use crate::coverage::{IdRanges, Outcome, Role, Verdict};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The header's `format`.
pub const FORMAT: &str = "gatekeeper-export";
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Conversation(Header),
    Turn(TurnLine),
    Checkpoint(CheckpointLine),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// The exported conversation's name (an import may give it another).
    pub conversation: String,
    pub created_at: DateTime<Utc>,
    pub last_append_at: DateTime<Utc>,
    pub turns: i64,
    pub checkpoints: i64,
    pub rejected_from: Option<i64>,
    pub rejected_streak: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnLine {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
    pub anchors: Vec<String>,
    pub anchors_given: bool,
    pub external_id: Option<String>,
    pub pinned: bool,
    pub created_at: DateTime<Utc>,
    /// The term profile's bytes, base64 (standard alphabet, padded).
    pub profile: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointLine {
    pub checkpoint_id: i64,
    pub created_at: DateTime<Utc>,
    pub summary: String,
    /// Per turn of the range, which derived candidates decided it (bit i: candidate i).
    pub candidates_used: Vec<u16>,
    pub verdict: Verdict,
}

/// A line as an export writes it: JSON and a newline.
pub fn encode(line: &Line) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(line).expect("an export line always serializes");
    bytes.push(b'\n');
    bytes
}

pub fn encode_profile(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// Why an import is refused, with the 1-based line it stopped at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct ImportError {
    pub line: usize,
    pub what: String,
}

/// The import's checks, fed one line at a time in file order.
#[derive(Debug)]
pub struct Importer {
    header: Option<Header>,
    line: usize,
    next_turn: i64,
    next_checkpoint: i64,
}

/// A checked line, ready to write.
#[derive(Debug)]
pub enum Checked {
    Header(Header),
    Turn(TurnLine, Vec<u8>),
    Checkpoint(CheckpointLine),
}

impl Default for Importer {
    fn default() -> Self {
        Self {
            header: None,
            line: 0,
            next_turn: 0,
            next_checkpoint: 1,
        }
    }
}

impl Importer {
    /// The next line of the file (without its newline; blank lines are skipped).
    pub fn line(&mut self, raw: &[u8]) -> Result<Option<Checked>, ImportError> {
        self.line += 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let line: Line = serde_json::from_slice(raw).map_err(|e| self.refuse(e))?;
        match (line, &self.header) {
            (Line::Conversation(header), None) => {
                if header.format != FORMAT || header.version != VERSION {
                    return Err(self.refuse(format!(
                        "this service reads {FORMAT} version {VERSION}, not {} version {}",
                        header.format, header.version
                    )));
                }
                if header.turns < 0 || header.checkpoints < 0 {
                    return Err(self.refuse("the header's counts are negative"));
                }
                self.header = Some(header.clone());
                Ok(Some(Checked::Header(header)))
            }
            (_, None) => Err(self.refuse("the first line must be the conversation header")),
            (Line::Conversation(_), Some(_)) => Err(self.refuse("a second header")),
            (Line::Turn(turn), Some(header)) => {
                if self.next_checkpoint > 1 || turn.id != self.next_turn || turn.id >= header.turns
                {
                    return Err(self.refuse(format!(
                        "expected {}, found turn {}",
                        self.expected(header),
                        turn.id
                    )));
                }
                let profile = BASE64
                    .decode(&turn.profile)
                    .map_err(|e| self.refuse(format!("turn {}: profile: {e}", turn.id)))?;
                crate::coverage::TermProfile::from_bytes(&profile)
                    .map_err(|e| self.refuse(format!("turn {}: profile: {e}", turn.id)))?;
                self.next_turn += 1;
                Ok(Some(Checked::Turn(turn, profile)))
            }
            (Line::Checkpoint(checkpoint), Some(header)) => {
                if self.next_turn != header.turns
                    || checkpoint.checkpoint_id != self.next_checkpoint
                    || checkpoint.checkpoint_id > header.checkpoints
                {
                    return Err(self.refuse(format!(
                        "expected {}, found checkpoint {}",
                        self.expected(header),
                        checkpoint.checkpoint_id
                    )));
                }
                check_verdict(&checkpoint, header.turns).map_err(|what| {
                    self.refuse(format!("checkpoint {}: {what}", checkpoint.checkpoint_id))
                })?;
                self.next_checkpoint += 1;
                Ok(Some(Checked::Checkpoint(checkpoint)))
            }
        }
    }

    /// After the last line: everything the header announced was there.
    pub fn finish(&self) -> Result<&Header, ImportError> {
        let line = self.line + 1;
        let header = (self.header.as_ref()).ok_or_else(|| ImportError {
            line,
            what: "the file is empty".into(),
        })?;
        if self.next_turn != header.turns || self.next_checkpoint != header.checkpoints + 1 {
            return Err(ImportError {
                line,
                what: format!("the file ends where {} was expected", self.expected(header)),
            });
        }
        Ok(header)
    }

    fn expected(&self, header: &Header) -> String {
        if self.next_turn < header.turns {
            format!("turn {}", self.next_turn)
        } else if self.next_checkpoint <= header.checkpoints {
            format!("checkpoint {}", self.next_checkpoint)
        } else {
            "the end of the file".into()
        }
    }

    fn refuse(&self, what: impl std::fmt::Display) -> ImportError {
        ImportError {
            line: self.line,
            what: what.to_string(),
        }
    }
}

/// What the schema holds of every stored checkpoint: a range of logged turns it advances over,
/// split exactly into covered (never empty), uncovered and not compacted.
fn check_verdict(checkpoint: &CheckpointLine, turns: i64) -> Result<(), String> {
    let v = &checkpoint.verdict;
    let Some(advanced_to) = v.advanced_to else {
        return Err("a stored checkpoint advances; this verdict does not".into());
    };
    if v.outcome == Outcome::Rejected || v.rejection.is_some() {
        return Err("a rejected proposal is never stored as a checkpoint".into());
    }
    if !(0 <= v.from && v.from <= advanced_to && advanced_to <= v.to && v.to < turns) {
        return Err(format!(
            "its range {}..={} (advanced to {advanced_to}) is not within the {turns} turns",
            v.from, v.to
        ));
    }
    if v.covered.is_empty() {
        return Err("it covers no turn".into());
    }
    let span = (v.to - v.from + 1) as usize;
    // Each turn of the range once: covered or uncovered (within what it advanced over), or not
    // compacted.
    let mut seen = vec![false; span];
    let sets: [(&IdRanges, i64); 3] = [
        (&v.covered, advanced_to),
        (&v.uncovered, advanced_to),
        (&v.not_compacted, v.to),
    ];
    for (set, last) in sets {
        for id in set.ids() {
            if id < v.from
                || id > last
                || std::mem::replace(&mut seen[(id - v.from) as usize], true)
            {
                return Err(format!(
                    "turn {id} is outside its place or in two of covered, uncovered and not compacted"
                ));
            }
        }
    }
    if seen.contains(&false) {
        return Err(
            "its covered, uncovered and not compacted turns leave part of its range out".into(),
        );
    }
    if !checkpoint.candidates_used.is_empty() && checkpoint.candidates_used.len() != span {
        return Err(format!(
            "candidates_used has {} entries for {span} turns",
            checkpoint.candidates_used.len()
        ));
    }
    Ok(())
}

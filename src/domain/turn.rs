use super::Invalid;
use crate::api::{AppendTurn, AppendTurnsRequest};
use crate::coverage::Role;
use crate::coverage::normalize::normalize_text;

/// Bounds on what one request may carry; they come from configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_batch_turns: usize,
    pub max_anchors_per_turn: usize,
    /// A proposal's summary, in bytes: the decision normalizes it with an index entry per byte.
    pub max_summary_bytes: usize,
}

/// Longest anchor or external id, in characters.
pub const MAX_SHORT_TEXT_CHARS: usize = 256;

/// A short label (anchor, external id, finish reason, end marker): at most 256 characters and no
/// control characters, so it can be stored, logged and compared as plain text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShortText(String);

impl ShortText {
    pub fn parse(field: &str, raw: String) -> Result<Self, Invalid> {
        Self::parse_named(|| field.to_owned(), raw)
    }

    /// [`Self::parse`] with the field's name written only for an error: a batch names
    /// thousands of anchors that are almost all valid.
    fn parse_named(field: impl FnOnce() -> String, raw: String) -> Result<Self, Invalid> {
        if raw.chars().count() > MAX_SHORT_TEXT_CHARS {
            return Err(Invalid::new(
                field(),
                format!("is longer than {MAX_SHORT_TEXT_CHARS} characters"),
            ));
        }
        if raw.chars().any(char::is_control) {
            return Err(Invalid::new(
                field(),
                "must not contain control characters such as \\u0000",
            ));
        }
        Ok(Self(raw))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

/// A turn to append: valid, but possibly still without id, tokens or anchors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTurn {
    pub id: Option<i64>,
    pub role: Role,
    pub content: String,
    pub tokens: Option<u32>,
    pub anchors: Option<Vec<ShortText>>,
    pub external_id: Option<ShortText>,
    pub pinned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRequest {
    pub turns: Vec<NewTurn>,
}

impl AppendRequest {
    pub fn parse(body: AppendTurnsRequest, limits: Limits) -> Result<Self, Invalid> {
        if body.turns.is_empty() {
            return Err(Invalid::new("turns", "must hold at least one turn"));
        }
        if body.turns.len() > limits.max_batch_turns {
            return Err(Invalid::new(
                "turns",
                format!(
                    "holds {} turns; at most {} per request",
                    body.turns.len(),
                    limits.max_batch_turns
                ),
            ));
        }
        let turns = body
            .turns
            .into_iter()
            .enumerate()
            .map(|(i, t)| NewTurn::parse(i, t, limits))
            .collect::<Result<_, _>>()?;
        Ok(Self { turns })
    }
}

impl NewTurn {
    fn parse(index: usize, turn: AppendTurn, limits: Limits) -> Result<Self, Invalid> {
        let field = |name: &str| format!("turns[{index}].{name}");
        if let Some(id) = turn.id.filter(|id| *id < 0) {
            return Err(Invalid::new(
                field("id"),
                format!("{id} is negative; turn ids start at 0"),
            ));
        }
        let anchors = match turn.anchors {
            None => None,
            Some(anchors) if anchors.len() > limits.max_anchors_per_turn => {
                return Err(Invalid::new(
                    field("anchors"),
                    format!(
                        "holds {} anchors; at most {} per turn",
                        anchors.len(),
                        limits.max_anchors_per_turn
                    ),
                ));
            }
            Some(anchors) => Some(
                anchors
                    .into_iter()
                    .enumerate()
                    .map(|(j, a)| {
                        let name = || field(&format!("anchors[{j}]"));
                        // An ASCII letter or digit survives normalization; otherwise normalized
                        // only once its length is known to be short: normalizing costs memory
                        // in proportion to it.
                        if !a.bytes().any(|b| b.is_ascii_alphanumeric())
                            && a.chars().count() <= MAX_SHORT_TEXT_CHARS
                            && normalize_text(&a).is_empty()
                        {
                            return Err(Invalid::new(name(), "is empty or only whitespace"));
                        }
                        ShortText::parse_named(name, a)
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let external_id = turn
            .external_id
            .map(|e| ShortText::parse_named(|| field("external_id"), e))
            .transpose()?;
        Ok(Self {
            id: turn.id,
            role: turn.role,
            content: turn.content,
            tokens: turn.tokens,
            anchors,
            external_id,
            pinned: turn.pinned,
        })
    }
}

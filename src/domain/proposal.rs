use super::{Invalid, ShortText};
use crate::api::CompactionRequestBody;
use crate::coverage::{IdRange, Mode};

/// What the client believes the latest checkpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedCheckpoint {
    /// No expectation given: no check.
    Unchecked,
    /// The conversation must have no checkpoint yet.
    NoneYet,
    /// The latest checkpoint must be this one.
    Latest(i64),
}

impl ExpectedCheckpoint {
    pub fn admits(self, latest: Option<i64>) -> bool {
        match self {
            ExpectedCheckpoint::Unchecked => true,
            ExpectedCheckpoint::NoneYet => latest.is_none(),
            ExpectedCheckpoint::Latest(id) => latest == Some(id),
        }
    }
}

/// A compaction proposal whose shape is valid; the decision checks the rest against the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionRequest {
    pub from: i64,
    pub to: i64,
    pub summary: String,
    pub summary_budget: i64,
    pub consumed: Option<Vec<IdRange>>,
    pub finish_reason: Option<ShortText>,
    pub end_marker: Option<ShortText>,
    pub mode: Option<Mode>,
    pub dry_run: bool,
    pub expected_checkpoint: ExpectedCheckpoint,
}

impl CompactionRequest {
    pub fn parse(body: CompactionRequestBody) -> Result<Self, Invalid> {
        if body.from < 0 {
            return Err(Invalid::new(
                "from",
                format!("{} is negative; turn ids start at 0", body.from),
            ));
        }
        if body.from > body.to {
            return Err(Invalid::new(
                "to",
                format!("{} is before `from` ({})", body.to, body.from),
            ));
        }
        if body.summary_budget <= 0 {
            return Err(Invalid::new(
                "summary_budget",
                format!("must be positive, got {}", body.summary_budget),
            ));
        }
        for (i, r) in body.consumed.iter().flatten().enumerate() {
            if r.start > r.end {
                return Err(Invalid::new(
                    format!("consumed[{i}]"),
                    format!("[{}, {}] starts after it ends", r.start, r.end),
                ));
            }
            if r.start < body.from || r.end > body.to {
                return Err(Invalid::new(
                    format!("consumed[{i}]"),
                    format!(
                        "[{}, {}] reaches outside [{}, {}]",
                        r.start, r.end, body.from, body.to
                    ),
                ));
            }
        }
        let expected_checkpoint = match body.expected_checkpoint {
            None => ExpectedCheckpoint::Unchecked,
            Some(None) => ExpectedCheckpoint::NoneYet,
            Some(Some(id)) => ExpectedCheckpoint::Latest(id),
        };
        Ok(Self {
            from: body.from,
            to: body.to,
            summary: body.summary,
            summary_budget: body.summary_budget,
            consumed: body.consumed,
            finish_reason: body
                .finish_reason
                .map(|r| ShortText::parse("finish_reason", r))
                .transpose()?,
            end_marker: body
                .end_marker
                .map(|m| ShortText::parse("end_marker", m))
                .transpose()?,
            mode: body.mode,
            dry_run: body.dry_run,
            expected_checkpoint,
        })
    }
}

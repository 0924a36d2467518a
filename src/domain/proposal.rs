use super::{Invalid, Limits, ShortText};
use crate::api::CompactionRequestBody;
use crate::coverage::{Mode, Proposal};

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
    /// What the decision takes; `summary_tokens` is 0 until the service counts them.
    pub proposal: Proposal,
    pub expected_checkpoint: ExpectedCheckpoint,
    pub dry_run: bool,
}

impl CompactionRequest {
    /// A body without `mode` gets `default_mode`.
    pub fn parse(
        body: CompactionRequestBody,
        default_mode: Mode,
        limits: Limits,
    ) -> Result<Self, Invalid> {
        if body.summary.len() > limits.max_summary_bytes {
            return Err(Invalid::new(
                "summary",
                format!(
                    "is {} bytes; at most {} (GATEKEEPER_MAX_SUMMARY_BYTES)",
                    body.summary.len(),
                    limits.max_summary_bytes
                ),
            ));
        }
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
        let short = |field: &str, text: Option<String>| {
            text.map(|t| ShortText::parse(field, t).map(ShortText::into_inner))
                .transpose()
        };
        Ok(Self {
            proposal: Proposal {
                from: body.from,
                to: body.to,
                summary: body.summary,
                summary_budget: body.summary_budget,
                summary_tokens: 0,
                consumed: body.consumed,
                finish_reason: short("finish_reason", body.finish_reason)?,
                end_marker: short("end_marker", body.end_marker)?,
                mode: body.mode.unwrap_or(default_mode),
            },
            expected_checkpoint,
            dry_run: body.dry_run,
        })
    }
}

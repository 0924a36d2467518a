//! The values the decision takes and returns.

use super::profile::TermProfile;
use super::ranges::IdRanges;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "system" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            other => Err(format!(
                "unknown role {other:?}: expected system, user, assistant or tool"
            )),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the decision needs of a turn; its content is not needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFacts {
    pub id: i64,
    pub role: Role,
    pub tokens: u32,
    pub anchors: TurnAnchors,
    /// Never covered by any summary (rule 2c).
    pub pinned: bool,
    /// The turn's candidate anchors and term keys: rule 2b counts every turn's terms, whoever
    /// chose its anchors.
    pub profile: TermProfile,
}

/// Where a turn's anchors come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnAnchors {
    /// Sent by the client: authoritative (rule 2).
    Given(Vec<String>),
    /// Chosen by the decision from the turn's profile, for the proposal's range (rule 2b).
    Derived,
}

impl TurnAnchors {
    /// The client's anchors, if it sent them.
    pub fn given(&self) -> Option<&[String]> {
        match self {
            TurnAnchors::Given(anchors) => Some(anchors),
            TurnAnchors::Derived => None,
        }
    }
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Persist what the summary covers and route the rest to the raw log.
    #[default]
    Narrow,
    /// Reject any proposal that does not cover its whole range with an untruncated summary.
    Strict,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "narrow" => Ok(Mode::Narrow),
            "strict" => Ok(Mode::Strict),
            other => Err(format!("unknown mode {other:?}: expected narrow or strict")),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Narrow => "narrow",
            Mode::Strict => "strict",
        })
    }
}

/// A compaction proposal as the decision sees it: parsed, with the summary's token count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub from: i64,
    pub to: i64,
    pub summary: String,
    pub summary_budget: i64,
    pub summary_tokens: u32,
    pub consumed: Option<Vec<super::IdRange>>,
    pub finish_reason: Option<String>,
    pub end_marker: Option<String>,
    pub mode: Mode,
}

/// How many input tokens one summary token can faithfully stand for, in thousandths
/// (so `2.5` is allowed as well as `5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CompressionRatio(u32);

impl CompressionRatio {
    pub const PROSE_DEFAULT: Self = Self(5_000);
    pub const TOOL_DEFAULT: Self = Self(3_000);

    pub fn from_milli(milli: u32) -> Option<Self> {
        (milli > 0).then_some(Self(milli))
    }

    pub fn milli(self) -> u32 {
        self.0
    }
}

impl FromStr for CompressionRatio {
    type Err = String;
    /// Accepts a positive decimal with at most three fractional digits: `5`, `2.5`, `6.125`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || format!("compression ratio {s:?} must be a positive number like 5 or 2.5");
        let (whole, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
        if whole.is_empty() && frac.is_empty()
            || frac.len() > 3
            || !whole
                .bytes()
                .chain(frac.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return Err(err());
        }
        let whole: u32 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| err())?
        };
        let frac: u32 = format!("{frac:0<3}").parse().map_err(|_| err())?;
        whole
            .checked_mul(1000)
            .and_then(|w| w.checked_add(frac))
            .and_then(Self::from_milli)
            .ok_or_else(err)
    }
}

impl fmt::Display for CompressionRatio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1000, self.0 % 1000);
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            write!(f, "{}", format!("{whole}.{frac:03}").trim_end_matches('0'))
        }
    }
}

/// How many of a turn's anchors must appear in the summary for the turn to count as anchored.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AnchorRule {
    /// Every anchor must be present (the default, and the safe choice).
    #[default]
    All,
    /// One present anchor is enough.
    Any,
}

impl FromStr for AnchorRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all" => Ok(AnchorRule::All),
            "any" => Ok(AnchorRule::Any),
            other => Err(format!(
                "unknown anchor rule {other:?}: expected all or any"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Ratio for system, user and assistant turns.
    pub prose_ratio: CompressionRatio,
    /// Ratio for tool turns: structured output compresses worse.
    pub tool_ratio: CompressionRatio,
    pub anchor_rule: AnchorRule,
    /// How many derived anchors a turn gets at least (at append, and per range by rule 2b).
    pub anchor_count: usize,
    /// Rule 2b asks one derived anchor per this many tokens of a turn (at least
    /// `anchor_count`): a summary stands for a long turn only if it keeps more of it. 0: always
    /// `anchor_count`.
    pub tokens_per_anchor: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            prose_ratio: CompressionRatio::PROSE_DEFAULT,
            tool_ratio: CompressionRatio::TOOL_DEFAULT,
            anchor_rule: AnchorRule::All,
            anchor_count: super::derive::DEFAULT_ANCHOR_COUNT,
            tokens_per_anchor: Self::DEFAULT_TOKENS_PER_ANCHOR,
        }
    }
}

impl Policy {
    pub const DEFAULT_TOKENS_PER_ANCHOR: u32 = 40;

    /// How many derived anchors rule 2b checks for a turn of `tokens` tokens (before the
    /// profile's own limit of candidates).
    pub fn derived_anchors_for(&self, tokens: u32) -> usize {
        let by_size = match self.tokens_per_anchor {
            0 => 0,
            per => tokens.div_ceil(per) as usize,
        };
        self.anchor_count.max(by_size)
    }

    pub fn ratio_for(&self, role: Role) -> CompressionRatio {
        match role {
            Role::Tool => self.tool_ratio,
            Role::System | Role::User | Role::Assistant => self.prose_ratio,
        }
    }

    /// `ceil(Σ tokens_i / R(role_i))`, computed exactly (no floating point).
    pub fn required_budget(&self, prose_tokens: u64, tool_tokens: u64) -> u64 {
        let (rp, rt) = (
            u128::from(self.prose_ratio.milli()),
            u128::from(self.tool_ratio.milli()),
        );
        let numerator = (u128::from(prose_tokens) * rt + u128::from(tool_tokens) * rp) * 1000;
        let denominator = rp * rt;
        u64::try_from(numerator.div_ceil(denominator)).unwrap_or(u64::MAX)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Accepted,
    Narrowed,
    Partial,
    Rejected,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Narrowed => "narrowed",
            Outcome::Partial => "partial",
            Outcome::Rejected => "rejected",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CoveragePath {
    /// The summarizer reported what it consumed; the report was checked against the anchors.
    Reported,
    /// No report: coverage comes from the anchors alone.
    Anchors,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TruncationSignal {
    FinishReasonLength,
    EndMarkerMissing,
    AtBudget,
    MidClause,
}

impl TruncationSignal {
    pub fn as_str(self) -> &'static str {
        match self {
            TruncationSignal::FinishReasonLength => "finish_reason_length",
            TruncationSignal::EndMarkerMissing => "end_marker_missing",
            TruncationSignal::AtBudget => "at_budget",
            TruncationSignal::MidClause => "mid_clause",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Uncovered,
    NotCompacted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The summarizer's report does not include the turn.
    NotReported,
    /// The turn has anchors and the summary lacks some of them.
    AnchorMissing,
    /// The turn has no anchors, so nothing can show the summary covers it.
    NoAnchors,
    /// Fail-closed: the turn lies after the last anchored turn of an unreported, over-ceiling or
    /// truncated proposal, so the checkpoint does not advance over it.
    BeyondLastAnchor,
    /// The turn is pinned: no summary ever stands for it (rule 2c).
    Pinned,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotReported => "not_reported",
            Reason::AnchorMissing => "anchor_missing",
            Reason::NoAnchors => "no_anchors",
            Reason::BeyondLastAnchor => "beyond_last_anchor",
            Reason::Pinned => "pinned",
        }
    }
}

/// Why a verdict is `rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rejection {
    /// The summary covers no turn of the range.
    NothingCovered,
    /// Strict mode and the summary does not cover the whole range, or is truncated.
    StrictMode,
}

/// A turn the verdict does not cover, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TurnDetail {
    pub id: i64,
    pub status: TurnStatus,
    pub reason: Reason,
    // Compact strings: a verdict over thousands of turns lists thousands of short anchors, and
    // a heap allocation for each was a third of a decision's time.
    #[schema(value_type = Vec<String>)]
    pub missing_anchors: Vec<CompactString>,
    /// For a turn whose anchors the service derived: the anchors rule 2b checked, each with the
    /// number of turns of the range that hold it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<AnchorEvidence>,
}

/// A derived anchor rule 2b checked for a turn, and how many turns of the range hold it (this
/// one included): 1 is the turn's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AnchorEvidence {
    #[schema(value_type = String)]
    pub anchor: CompactString,
    pub turns_sharing: u32,
}

/// The decision: which turns the summary covers, and everything that explains it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Verdict {
    pub outcome: Outcome,
    pub rejection: Option<Rejection>,
    pub mode: Mode,
    pub from: i64,
    pub to: i64,
    /// Last turn the checkpoint advances over; `None` when it cannot advance at all.
    pub advanced_to: Option<i64>,
    pub covered: IdRanges,
    pub uncovered: IdRanges,
    pub not_compacted: IdRanges,
    pub contradictions: IdRanges,
    pub prefix_tokens: u64,
    pub required_budget: u64,
    pub summary_budget: i64,
    pub summary_tokens: u32,
    pub over_ceiling: bool,
    pub truncated: bool,
    pub truncation_signals: Vec<TruncationSignal>,
    pub coverage_path: CoveragePath,
    /// Only the turns that are not covered.
    pub turns: Vec<TurnDetail>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `as_str` names metric labels, log fields and stored values: each must be the wire name.
    fn wire_name(value: impl Serialize) -> String {
        serde_json::to_value(value)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn every_as_str_is_the_wire_name_and_roles_parse_back() {
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            assert_eq!(role.as_str(), wire_name(role));
            assert_eq!(role.to_string().parse::<Role>(), Ok(role));
        }
        for o in [
            Outcome::Accepted,
            Outcome::Narrowed,
            Outcome::Partial,
            Outcome::Rejected,
        ] {
            assert_eq!(o.as_str(), wire_name(o));
        }
        for s in [
            TruncationSignal::FinishReasonLength,
            TruncationSignal::EndMarkerMissing,
            TruncationSignal::AtBudget,
            TruncationSignal::MidClause,
        ] {
            assert_eq!(s.as_str(), wire_name(s));
        }
        for r in [
            Reason::NotReported,
            Reason::AnchorMissing,
            Reason::NoAnchors,
            Reason::BeyondLastAnchor,
            Reason::Pinned,
        ] {
            assert_eq!(r.as_str(), wire_name(r));
        }
        for mode in [Mode::Narrow, Mode::Strict] {
            assert_eq!(mode.to_string(), wire_name(mode));
            assert_eq!(mode.to_string().parse::<Mode>(), Ok(mode));
        }
        for rule in [AnchorRule::All, AnchorRule::Any] {
            assert_eq!(wire_name(rule).parse::<AnchorRule>(), Ok(rule));
        }
        for unknown in ["", "Strict", "none"] {
            assert!(unknown.parse::<Mode>().is_err(), "{unknown:?}");
            assert!(unknown.parse::<AnchorRule>().is_err(), "{unknown:?}");
            assert!(unknown.parse::<Role>().is_err(), "{unknown:?}");
        }
    }

    #[test]
    fn compression_ratios_parse_positive_decimals_of_up_to_three_places_and_print_them_back() {
        let cases: &[(&str, Option<u32>, &str)] = &[
            ("5", Some(5_000), "5"),
            ("2.5", Some(2_500), "2.5"),
            ("6.125", Some(6_125), "6.125"),
            ("2.05", Some(2_050), "2.05"),
            (".5", Some(500), "0.5"),
            ("5.", Some(5_000), "5"),
            (" 3 ", Some(3_000), "3"),
            ("0.001", Some(1), "0.001"),
            ("4294967.295", Some(u32::MAX), "4294967.295"),
            ("4294967.296", None, ""),
            ("4294968", None, ""),
            ("0", None, ""),
            ("0.000", None, ""),
            ("1.2345", None, ""),
            ("", None, ""),
            (".", None, ""),
            ("-1", None, ""),
            ("1e3", None, ""),
            ("1.5.2", None, ""),
        ];
        for &(text, milli, printed) in cases {
            let parsed = text.parse::<CompressionRatio>();
            assert_eq!(parsed.as_ref().ok().map(|r| r.milli()), milli, "{text:?}");
            if let Ok(ratio) = parsed {
                assert_eq!(ratio.to_string(), printed, "{text:?}");
            } else {
                assert!(parsed.unwrap_err().contains("positive number"), "{text:?}");
            }
        }
        assert_eq!(CompressionRatio::from_milli(0), None);
    }
}

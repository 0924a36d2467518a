//! The coverage decision: which turns does a summary really cover?
//!
//! Pure functions over parsed values; imports nothing from axum, sqlx or tokio, so the HTTP
//! service, the CLI and the benchmarks share exactly one implementation of the rules.

/// The rules (1–8): proposal + turns → verdict.
pub mod decide;
/// Deterministic anchors for turns that arrive without any.
pub mod derive;
/// Which anchors rule 2 checks per turn of a range: given, or distinctive derived ones (2b).
pub mod distinctive;
/// Word-bounded multi-anchor matching, its work bounded by its input.
pub mod matching;
/// Turns, proposals, policy and the verdict.
pub mod model;
/// NFKC + case folding + whitespace collapsing.
pub mod normalize;
/// A turn's candidate anchors and term keys, stored with it.
pub mod profile;
/// Sorted, disjoint, inclusive id ranges.
pub mod ranges;
/// Term keys: which turns contain a derived anchor (rule 2b).
pub mod terms;

pub use decide::{Decision, ProposalError, decide, decide_with_evidence, truncation_signals};
pub use matching::{Evidence, anchor_present, locate};
pub use model::*;
pub use profile::TermProfile;
pub use ranges::{IdRange, IdRanges};

//! The coverage decision: which turns does a summary really cover?
//!
//! Pure functions over parsed values; imports nothing from axum, sqlx or tokio, so the HTTP
//! service, the CLI and the benchmarks share exactly one implementation of the rules.

/// The rules (1–8): proposal + turns → verdict.
pub mod decide;
/// Deterministic anchors for turns that arrive without any.
pub mod derive;
/// Turns, proposals, policy and the verdict.
pub mod model;
/// NFKC + case folding + whitespace collapsing, and word-bounded multi-anchor matching.
pub mod normalize;
/// Sorted, disjoint, inclusive id ranges.
pub mod ranges;

pub use decide::{ProposalError, decide, truncation_signals};
pub use model::*;
pub use normalize::{Evidence, anchor_present, locate};
pub use ranges::{IdRange, IdRanges};

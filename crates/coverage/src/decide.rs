//! The rules: from a proposal and the raw turns of its range to a verdict.

use super::distinctive::{TurnCheck, checks};
use super::matching::{AnchorId, AnchorSet};
use super::model::{
    AnchorRule, CoveragePath, Mode, Outcome, Policy, Proposal, Reason, Rejection, Role,
    TruncationSignal, TurnDetail, TurnFacts, TurnStatus, Verdict,
};
use super::normalize::normalize_text;
use super::ranges::{IdRange, IdRanges};
use super::terms::terms_by_key;
use compact_str::CompactString;

/// A proposal that cannot be decided at all (rule 8): a client error, not a verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalError {
    #[error("`from` ({from}) is after `to` ({to})")]
    FromAfterTo { from: i64, to: i64 },
    #[error("`from` ({from}) is negative; turn ids start at 0")]
    NegativeFrom { from: i64 },
    #[error("`summary_budget` must be positive, got {budget}")]
    NonPositiveBudget { budget: i64 },
    #[error("`consumed` range [{}, {}] is malformed: its start is after its end", .range.start, .range.end)]
    MalformedConsumed { range: IdRange },
    #[error("`consumed` range [{}, {}] reaches outside [{from}, {to}]", .range.start, .range.end)]
    ConsumedOutsideRange { range: IdRange, from: i64, to: i64 },
    #[error("the turns do not match [{from}, {to}]: missing {missing}, unexpected {unexpected}")]
    TurnsDoNotMatchRange {
        from: i64,
        to: i64,
        missing: IdRanges,
        unexpected: IdRanges,
    },
}

const LENGTH_FINISH_REASONS: [&str; 3] = ["length", "max_tokens", "max_output_tokens"];

/// Rule 3: every truncation tell that fires, in a fixed order.
pub fn truncation_signals(proposal: &Proposal) -> Vec<TruncationSignal> {
    let mut signals = Vec::new();
    if proposal
        .finish_reason
        .as_deref()
        .is_some_and(|r| LENGTH_FINISH_REASONS.contains(&r.trim().to_ascii_lowercase().as_str()))
    {
        signals.push(TruncationSignal::FinishReasonLength);
    }
    let trimmed = proposal.summary.trim();
    if proposal
        .end_marker
        .as_deref()
        .is_some_and(|marker| !trimmed.ends_with(marker))
    {
        signals.push(TruncationSignal::EndMarkerMissing);
    }
    if i64::from(proposal.summary_tokens) >= proposal.summary_budget {
        signals.push(TruncationSignal::AtBudget);
    }
    if trimmed
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || matches!(c, ',' | ';' | ':' | '-'))
    {
        signals.push(TruncationSignal::MidClause);
    }
    signals
}

fn validate(proposal: &Proposal, turns: &[TurnFacts]) -> Result<(), ProposalError> {
    let (from, to) = (proposal.from, proposal.to);
    if from > to {
        return Err(ProposalError::FromAfterTo { from, to });
    }
    if from < 0 {
        return Err(ProposalError::NegativeFrom { from });
    }
    if proposal.summary_budget <= 0 {
        return Err(ProposalError::NonPositiveBudget {
            budget: proposal.summary_budget,
        });
    }
    for &range in proposal.consumed.iter().flatten() {
        if range.start > range.end {
            return Err(ProposalError::MalformedConsumed { range });
        }
        if range.start < from || range.end > to {
            return Err(ProposalError::ConsumedOutsideRange { range, from, to });
        }
    }
    // The turn ids must be exactly from..=to, each once.
    let expected_len = (to - from) as u64 + 1;
    if turns.len() as u64 == expected_len {
        let mut seen = vec![false; turns.len()];
        let exact = turns.iter().all(|t| {
            let slot = usize::try_from(t.id - from)
                .ok()
                .filter(|&i| i < seen.len());
            slot.is_some_and(|i| !std::mem::replace(&mut seen[i], true))
        });
        if exact {
            return Ok(());
        }
    }
    let mut ids: Vec<i64> = turns.iter().map(|t| t.id).collect();
    ids.sort_unstable();
    let duplicates = ids.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]);
    let outside = ids.iter().copied().filter(|&id| id < from || id > to);
    // Ids outside the range cannot fill a hole in it: the complement is taken within it.
    let present = IdRanges::from_ids(ids.iter().copied());
    Err(ProposalError::TurnsDoNotMatchRange {
        from,
        to,
        missing: present.complement_within(from, to),
        unexpected: IdRanges::from_ids(duplicates.chain(outside)),
    })
}

/// What the anchors say about one turn.
struct AnchorCheck<'c, 'a> {
    check: &'c TurnCheck<'a>,
    /// Which of its anchors the summary holds (bit i: anchor i; a turn has at most 64).
    present: u64,
    has_anchors: bool,
    anchored: bool,
}

impl<'c, 'a> AnchorCheck<'c, 'a> {
    fn new(check: &'c TurnCheck<'a>, present: u64, rule: AnchorRule) -> Self {
        let n = check.len();
        let has = |i: usize| present & (1 << i) != 0;
        let has_anchors = n > 0;
        let all = (0..n).all(has);
        let anchored = has_anchors
            && match rule {
                AnchorRule::All => all,
                // A derived anchor others share is evidence only together with the rest (2b).
                AnchorRule::Any if check.is_derived() => {
                    all || (0..n).any(|i| check.turns_sharing(i) == Some(1) && has(i))
                }
                AnchorRule::Any => (0..n).any(has),
            };
        AnchorCheck {
            check,
            present,
            has_anchors,
            anchored,
        }
    }

    /// The anchors the summary lacks, sorted and deduplicated so the verdict never depends on
    /// the order anchors were given in. Only uncovered turns ask, so covered ones allocate
    /// nothing.
    fn missing(&self) -> Vec<CompactString> {
        let mut missing: Vec<CompactString> = self
            .check
            .anchors()
            .enumerate()
            .filter(|(i, _)| self.present & (1 << i) == 0)
            .map(|(_, a)| CompactString::from(a))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        missing
    }
}

/// Which anchors of each check the summary holds (rule 2's matching): the client's anchors
/// through one search of the summary for all of them; derived anchors (single tokens, rule 2b)
/// by whether their normalized text is one of the summary's terms, which is the same test.
fn presence(checks: &[TurnCheck<'_>], summary: &str) -> (Vec<u64>, bool) {
    let normalized = normalize_text(summary);
    let mut set = AnchorSet::new();
    // The client's anchors' ids, back to back (one allocation, not one per turn).
    let given: Vec<AnchorId> = checks
        .iter()
        .filter(|c| !c.is_derived())
        .flat_map(|c| c.anchors())
        .map(|a| set.insert(a))
        .collect();
    let (found, cut) = if set.is_empty() {
        (Vec::new(), false)
    } else {
        let (found, work) = set.find_first_counting(&normalized);
        (found, work.cut)
    };
    // Only derived anchors are looked up among the summary's terms.
    let terms = if checks.iter().any(|c| c.is_derived()) {
        terms_by_key(normalized.as_str())
    } else {
        Default::default()
    };
    let mut next = 0;
    let masks = checks
        .iter()
        .map(|c| {
            let held = |i: usize| -> bool {
                if c.is_derived() {
                    c.derived(i)
                        .is_some_and(|a| terms.get(&a.key) == Some(&a.normalized))
                } else {
                    found[given[next + i]].is_some()
                }
            };
            // Client anchors beyond 64 (a configuration allows more) count as missing: a turn
            // is never covered on fewer than all of them.
            let mask = (0..c.len().min(64)).fold(0u64, |m, i| if held(i) { m | 1 << i } else { m });
            if !c.is_derived() {
                next += c.len();
            }
            mask
        })
        .collect();
    (masks, cut)
}

/// A verdict, and for the checkpoint that persists it, which derived anchors decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// For each turn of `[from, to]` in order: which of its profile's candidates were the
    /// anchors found in the summary (bit i: candidate i); 0 unless the turn is covered on
    /// derived anchors.
    pub candidates_used: Vec<u16>,
    /// The matcher ran out of its work budget ([`crate::matching::Work`]): some
    /// client anchors were counted absent without being looked for to the end, so their turns
    /// are uncovered (never claimed). Only adversarial summaries and anchors get here.
    pub matching_cut: bool,
}

/// Decides which turns of `[proposal.from, proposal.to]` the summary really covers.
///
/// `turns` must hold exactly the turns of that range, in any order.
pub fn decide(
    proposal: &Proposal,
    turns: &[TurnFacts],
    policy: &Policy,
) -> Result<Verdict, ProposalError> {
    decide_with_evidence(proposal, turns, policy).map(|d| d.verdict)
}

/// [`decide`], also saying which derived anchors decided each covered turn.
pub fn decide_with_evidence(
    proposal: &Proposal,
    turns: &[TurnFacts],
    policy: &Policy,
) -> Result<Decision, ProposalError> {
    validate(proposal, turns)?;
    let mut turns: Vec<&TurnFacts> = turns.iter().collect();
    turns.sort_unstable_by_key(|t| t.id);

    // Rule 1: the compression ceiling.
    let (mut prose_tokens, mut tool_tokens) = (0u64, 0u64);
    for t in &turns {
        match t.role {
            Role::Tool => tool_tokens += u64::from(t.tokens),
            Role::System | Role::User | Role::Assistant => prose_tokens += u64::from(t.tokens),
        }
    }
    let required_budget = policy.required_budget(prose_tokens, tool_tokens);
    let over_ceiling = required_budget > proposal.summary_budget as u64;

    // Rule 3: truncation tells.
    let truncation_signals = truncation_signals(proposal);
    let truncated = !truncation_signals.is_empty();

    // Rules 2 and 2b: which anchors to check, then one pass over the summary for all of them.
    let turn_checks = checks(&turns, policy);
    let mut used: Vec<u16> = turn_checks.iter().map(|c| c.candidates_used()).collect();
    let (present, matching_cut) = presence(&turn_checks, &proposal.summary);
    let checks: Vec<AnchorCheck> = turn_checks
        .iter()
        .zip(present)
        .map(|(c, present)| AnchorCheck::new(c, present, policy.anchor_rule))
        .collect();

    let mut covered = IdRanges::new();
    let mut uncovered = IdRanges::new();
    let mut not_compacted = IdRanges::new();
    let mut contradictions = IdRanges::new();
    // Sized once: a summary that lost most of a long range lists most of its turns.
    let mut details = Vec::with_capacity(turns.len());
    let mut mark = |id: i64, status: TurnStatus, reason: Reason, check: &AnchorCheck| {
        match status {
            TurnStatus::Uncovered => uncovered.push(id),
            TurnStatus::NotCompacted => not_compacted.push(id),
        }
        let pinned = reason == Reason::Pinned;
        details.push(TurnDetail {
            id,
            status,
            reason,
            missing_anchors: if pinned { Vec::new() } else { check.missing() },
            // What was checked matters for a turn the checkpoint spans; one it does not advance
            // over will be checked afresh with another range. (A pinned turn's check is empty.)
            evidence: if status == TurnStatus::NotCompacted {
                Vec::new()
            } else {
                check.check.evidence()
            },
        });
    };
    let unanchored_reason = |check: &AnchorCheck| {
        if check.has_anchors {
            Reason::AnchorMissing
        } else {
            Reason::NoAnchors
        }
    };

    let (coverage_path, advanced_to) = match &proposal.consumed {
        // Rule 4: the report is trusted only as far as the anchors bear it out.
        Some(consumed) => {
            let consumed = IdRanges::from_ranges(consumed.iter().copied());
            for (t, check) in turns.iter().zip(&checks) {
                let reported = consumed.contains(t.id);
                if t.pinned {
                    mark(t.id, TurnStatus::Uncovered, Reason::Pinned, check);
                } else if reported && (check.anchored || (!check.has_anchors && !truncated)) {
                    covered.push(t.id);
                } else if !reported {
                    mark(t.id, TurnStatus::Uncovered, Reason::NotReported, check);
                } else {
                    if check.has_anchors {
                        contradictions.push(t.id);
                    }
                    mark(t.id, TurnStatus::Uncovered, unanchored_reason(check), check);
                }
            }
            (CoveragePath::Reported, Some(proposal.to))
        }
        // Rule 5: nothing suggests the summary ran out; the anchors decide each turn.
        None if !over_ceiling && !truncated => {
            for (t, check) in turns.iter().zip(&checks) {
                if t.pinned {
                    mark(t.id, TurnStatus::Uncovered, Reason::Pinned, check);
                } else if check.anchored {
                    covered.push(t.id);
                } else {
                    mark(t.id, TurnStatus::Uncovered, unanchored_reason(check), check);
                }
            }
            (CoveragePath::Anchors, Some(proposal.to))
        }
        // Rule 6: fail closed; never advance past the last turn the summary demonstrably reached.
        None => {
            let last_anchored = turns
                .iter()
                .zip(&checks)
                .rev()
                .find(|(t, c)| c.anchored && !t.pinned)
                .map(|(t, _)| t.id);
            for (t, check) in turns.iter().zip(&checks) {
                if last_anchored.is_some_and(|last| t.id <= last) {
                    if t.pinned {
                        mark(t.id, TurnStatus::Uncovered, Reason::Pinned, check);
                    } else if check.anchored {
                        covered.push(t.id);
                    } else {
                        mark(t.id, TurnStatus::Uncovered, unanchored_reason(check), check);
                    }
                } else {
                    mark(
                        t.id,
                        TurnStatus::NotCompacted,
                        Reason::BeyondLastAnchor,
                        check,
                    );
                }
            }
            (CoveragePath::Anchors, last_anchored)
        }
    };
    // Derived anchors decided only the turns they cover (both in id order: one merge).
    {
        let mut covered_ids = covered.ids().peekable();
        for (slot, t) in used.iter_mut().zip(&turns) {
            while covered_ids.next_if(|&id| id < t.id).is_some() {}
            if covered_ids.peek() != Some(&t.id) {
                *slot = 0;
            }
        }
    }

    // Rule 7: the outcome.
    let rejection = if covered.is_empty() {
        Some(Rejection::NothingCovered)
    } else if proposal.mode == Mode::Strict
        && (!uncovered.is_empty() || !not_compacted.is_empty() || truncated)
    {
        Some(Rejection::StrictMode)
    } else {
        None
    };
    let outcome = match rejection {
        Some(_) => Outcome::Rejected,
        None if !not_compacted.is_empty() => Outcome::Partial,
        None if !uncovered.is_empty() => Outcome::Narrowed,
        None => Outcome::Accepted,
    };

    let verdict = Verdict {
        outcome,
        rejection,
        mode: proposal.mode,
        from: proposal.from,
        to: proposal.to,
        advanced_to,
        covered,
        uncovered,
        not_compacted,
        contradictions,
        prefix_tokens: prose_tokens + tool_tokens,
        required_budget,
        summary_budget: proposal.summary_budget,
        summary_tokens: proposal.summary_tokens,
        over_ceiling,
        truncated,
        truncation_signals,
        coverage_path,
        turns: details,
    };
    Ok(Decision {
        verdict,
        candidates_used: used,
        matching_cut,
    })
}

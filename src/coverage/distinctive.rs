//! Which anchors rule 2 checks for each turn of a range: the client's own, or (rule 2b) the
//! derived anchors that tell the turn apart from the other turns of the range.
//!
//! A turn's derived anchors for a range are its candidates ranked by how many turns of the range
//! contain each (fewest first; ties keep the profile's order: rarer in the conversation when the
//! turn arrived, then tier), one per [`Policy::tokens_per_anchor`] tokens of the turn, at least
//! [`Policy::anchor_count`] and at most the profile's 16. A token several turns share cannot show
//! which of them a summary kept, so it counts only after every token the turn has alone: a
//! summary that keeps a path or a date from one turn covers another turn that mentions it only
//! if it also keeps what is that turn's own. And a summary stands for a long turn only if it
//! keeps more of it.
//!
//! The decision and the compaction plan both read the anchors here, so an orchestrator is told
//! exactly what the decision will check.

use super::model::{AnchorEvidence, Policy, TurnAnchors, TurnFacts};
use super::profile::Candidate;
use super::terms::TermKey;
use foldhash::HashMap;

/// What rule 2 checks for one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCheck<'a> {
    /// The anchors the summary must hold: the client's, or the derived ones, rarest in the range
    /// first. Empty when nothing can anchor the turn.
    pub anchors: Vec<&'a str>,
    /// For derived anchors: how many turns of the range hold each (this one included). Under
    /// the `any` rule only an anchor no other turn holds is enough on its own.
    pub sharing: Vec<u32>,
    /// Whether the service derived them (rule 2b) rather than the client sending them.
    pub derived: bool,
    /// Which of the profile's candidates are `anchors` (bit i: candidate i), for derived turns.
    pub candidates_used: u16,
}

impl TurnCheck<'_> {
    /// The derived anchors with how many turns of the range hold each.
    pub fn evidence(&self) -> Vec<AnchorEvidence> {
        self.anchors
            .iter()
            .zip(&self.sharing)
            .map(|(a, n)| AnchorEvidence {
                anchor: (*a).to_owned(),
                turns_sharing: *n,
            })
            .collect()
    }
}

/// The checks for `turns` (the whole range, any order), in the same order.
pub fn checks<'a>(turns: &[&'a TurnFacts], policy: &Policy) -> Vec<TurnCheck<'a>> {
    let derived = |t: &&TurnFacts| t.anchors == TurnAnchors::Derived && !t.pinned;
    let sharing = count_sharing(turns, derived);
    turns
        .iter()
        .map(|turn| match &turn.anchors {
            TurnAnchors::Given(anchors) => TurnCheck {
                anchors: anchors.iter().map(String::as_str).collect(),
                sharing: Vec::new(),
                derived: false,
                candidates_used: 0,
            },
            TurnAnchors::Derived if turn.pinned => TurnCheck {
                anchors: Vec::new(),
                sharing: Vec::new(),
                derived: true,
                candidates_used: 0,
            },
            TurnAnchors::Derived => {
                rarest_in_range(turn, &sharing, policy.derived_anchors_for(turn.tokens))
            }
        })
        .collect()
}

/// For every candidate key of the range's derived turns, how many of the range's turns contain
/// it (a profile's terms hold its own candidates, so each count is at least 1).
fn count_sharing(
    turns: &[&TurnFacts],
    derived: impl Fn(&&TurnFacts) -> bool,
) -> HashMap<TermKey, u32> {
    let capacity = turns
        .iter()
        .filter(|t| derived(t))
        .map(|t| t.profile.candidate_count())
        .sum();
    let mut sharing: HashMap<TermKey, u32> =
        HashMap::with_capacity_and_hasher(capacity, Default::default());
    for turn in turns.iter().filter(|t| derived(t)) {
        for candidate in turn.profile.candidates() {
            sharing.insert(candidate.key, 0);
        }
    }
    if sharing.is_empty() {
        return sharing;
    }
    for turn in turns {
        for key in turn.profile.terms() {
            if let Some(count) = sharing.get_mut(&key) {
                *count += 1;
            }
        }
    }
    sharing
}

/// The turn's first `count` candidates, fewest turns of the range holding them first.
fn rarest_in_range<'a>(
    turn: &'a TurnFacts,
    sharing: &HashMap<TermKey, u32>,
    count: usize,
) -> TurnCheck<'a> {
    let turns_sharing = |key: &TermKey| sharing.get(key).copied().unwrap_or(0);
    let mut ranked: Vec<(u32, usize, Candidate<'a>)> = turn
        .profile
        .candidates()
        .enumerate()
        .map(|(i, c)| (turns_sharing(&c.key), i, c))
        .collect();
    // Ties keep the profile's order.
    ranked.sort_by_key(|&(count, i, _)| (count, i));
    ranked.truncate(count);
    TurnCheck {
        anchors: ranked.iter().map(|(_, _, c)| c.text).collect(),
        sharing: ranked.iter().map(|&(count, _, _)| count).collect(),
        derived: true,
        candidates_used: ranked.iter().fold(0, |mask, &(_, i, _)| mask | 1 << i),
    }
}

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
use super::profile::{MAX_CANDIDATES, TermProfile};
use super::terms::{TermKey, TermKeyMap};

/// What rule 2 checks for one turn. Small and allocation-free: a decision builds thousands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnCheck<'a>(Check<'a>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check<'a> {
    /// The client's anchors.
    Given(&'a [String]),
    /// Rule 2b: which of the profile's candidates, rarest in the range first, each with the
    /// number of turns of the range that hold it.
    Derived {
        profile: &'a TermProfile,
        picked: [(u8, u32); MAX_CANDIDATES],
        len: u8,
    },
    /// A pinned turn whose anchors the service derives: nothing to check.
    Pinned,
}

impl<'a> TurnCheck<'a> {
    /// How many anchors the summary must hold (all of them, or one under the `any` rule).
    pub fn len(&self) -> usize {
        match self.0 {
            Check::Given(anchors) => anchors.len(),
            Check::Derived { len, .. } => usize::from(len),
            Check::Pinned => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the service derived them (rule 2b) rather than the client sending them.
    pub fn is_derived(&self) -> bool {
        !matches!(self.0, Check::Given(_))
    }

    /// The anchors: the client's, or the derived ones, rarest in the range first.
    pub fn anchors(&self) -> impl ExactSizeIterator<Item = &'a str> + '_ {
        (0..self.len()).map(|i| self.anchor(i))
    }

    fn anchor(&self, i: usize) -> &'a str {
        match self.0 {
            Check::Given(anchors) => &anchors[i],
            Check::Derived {
                profile, picked, ..
            } => profile
                .candidate(usize::from(picked[i].0))
                .map_or("", |c| c.text),
            Check::Pinned => "",
        }
    }

    /// A derived anchor's text normalized as the summary matcher reads it.
    pub fn normalized(&self, i: usize) -> Option<&'a str> {
        match self.0 {
            Check::Derived {
                profile, picked, ..
            } => profile
                .candidate(usize::from(picked[i].0))
                .map(|c| c.normalized),
            _ => None,
        }
    }

    /// For a derived anchor: how many turns of the range hold it (this one included). Under the
    /// `any` rule only an anchor no other turn holds is enough on its own.
    pub fn turns_sharing(&self, i: usize) -> Option<u32> {
        match self.0 {
            Check::Derived { picked, .. } => Some(picked[i].1),
            _ => None,
        }
    }

    /// Which of the profile's candidates are the anchors (bit i: candidate i), for derived
    /// turns.
    pub fn candidates_used(&self) -> u16 {
        match self.0 {
            Check::Derived { picked, len, .. } => picked[..usize::from(len)]
                .iter()
                .fold(0, |mask, &(i, _)| mask | 1 << i),
            _ => 0,
        }
    }

    /// The derived anchors with how many turns of the range hold each (nothing for given ones).
    pub fn evidence(&self) -> Vec<AnchorEvidence> {
        (0..self.len())
            .filter_map(|i| {
                Some(AnchorEvidence {
                    anchor: self.anchor(i).to_owned(),
                    turns_sharing: self.turns_sharing(i)?,
                })
            })
            .collect()
    }
}

/// The checks for `turns` (the whole range, any order), in the same order.
pub fn checks<'a>(turns: &[&'a TurnFacts], policy: &Policy) -> Vec<TurnCheck<'a>> {
    let derived = |t: &&TurnFacts| t.anchors == TurnAnchors::Derived && !t.pinned;
    let sharing = Sharing::count(turns, derived);
    let mut next = 0;
    turns
        .iter()
        .map(|turn| match &turn.anchors {
            TurnAnchors::Given(anchors) => TurnCheck(Check::Given(anchors)),
            TurnAnchors::Derived if turn.pinned => TurnCheck(Check::Pinned),
            TurnAnchors::Derived => {
                let n = turn.profile.candidate_count();
                let counts = sharing.of(next..next + n);
                next += n;
                rarest_in_range(turn, counts, policy.derived_anchors_for(turn.tokens))
            }
        })
        .collect()
}

/// For every candidate of the range's derived turns (in turn order, each turn's in profile
/// order), how many of the range's turns contain it: a profile's terms hold its own
/// candidates, so each count is at least 1.
struct Sharing {
    /// Each candidate's counter.
    slots: Vec<u32>,
    counters: Vec<u32>,
}

impl Sharing {
    fn count(turns: &[&TurnFacts], derived: impl Fn(&&TurnFacts) -> bool) -> Self {
        let candidates: usize = turns
            .iter()
            .filter(|t| derived(t))
            .map(|t| t.profile.candidate_count())
            .sum();
        // One counter per distinct key; most terms of a range are nobody's candidate, so a
        // bitmap of the keys' low bits rules those out before the table is asked.
        let mut counter_of: TermKeyMap<u32> =
            TermKeyMap::with_capacity_and_hasher(candidates, Default::default());
        let mut maybe = vec![0u64; PREFILTER_WORDS];
        let mut slots = Vec::with_capacity(candidates);
        for turn in turns.iter().filter(|t| derived(t)) {
            for key in turn.profile.candidate_keys() {
                let next = counter_of.len() as u32;
                slots.push(*counter_of.entry(key).or_insert(next));
                let bit = prefilter_bit(key);
                maybe[bit / 64] |= 1 << (bit % 64);
            }
        }
        let mut counters = vec![0u32; counter_of.len()];
        if !counters.is_empty() {
            for turn in turns {
                for &key in turn.profile.terms() {
                    let bit = prefilter_bit(key);
                    if maybe[bit / 64] & (1 << (bit % 64)) == 0 {
                        continue;
                    }
                    if let Some(&counter) = counter_of.get(&key) {
                        counters[counter as usize] += 1;
                    }
                }
            }
        }
        Sharing { slots, counters }
    }

    /// The counts of the candidates at `slots` (one turn's).
    fn of(&self, slots: std::ops::Range<usize>) -> impl Iterator<Item = u32> + '_ {
        self.slots[slots]
            .iter()
            .map(|&counter| self.counters[counter as usize])
    }
}

/// Bits of the prefilter: 2^16, 8 KiB, well inside a cache.
const PREFILTER_WORDS: usize = 1 << 10;

fn prefilter_bit(key: TermKey) -> usize {
    (key.0 as usize) & (PREFILTER_WORDS * 64 - 1)
}

/// The turn's first `count` candidates, fewest turns of the range holding them first (ties
/// keep the profile's order).
fn rarest_in_range(
    turn: &TurnFacts,
    counts: impl Iterator<Item = u32>,
    count: usize,
) -> TurnCheck<'_> {
    let mut picked = [(0u8, 0u32); MAX_CANDIDATES];
    let mut n = 0;
    for (i, shared) in counts.take(MAX_CANDIDATES).enumerate() {
        picked[i] = (i as u8, shared);
        n += 1;
    }
    // Often every candidate is the turn's own (1) and the profile's order stands.
    if picked[..n].windows(2).any(|w| w[0].1 > w[1].1) {
        picked[..n].sort_by_key(|&(i, shared)| (shared, i));
    }
    let len = count.min(n);
    TurnCheck(Check::Derived {
        profile: &turn.profile,
        picked,
        len: len as u8,
    })
}

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
use super::profile::{Candidate, MAX_CANDIDATES, TermProfile};
use super::terms::TermKey;

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
        /// Candidate indexes, and how many turns hold each (two arrays: a decision keeps
        /// thousands of checks, and pairs would be padded to twice the size).
        picked: [u8; MAX_CANDIDATES],
        shared: [u32; MAX_CANDIDATES],
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
                .candidate(usize::from(picked[i]))
                .map_or("", |c| c.text),
            Check::Pinned => "",
        }
    }

    /// A derived anchor: its text, normalized text and key.
    pub fn derived(&self, i: usize) -> Option<Candidate<'a>> {
        match self.0 {
            Check::Derived {
                profile, picked, ..
            } => profile.candidate(usize::from(picked[i])),
            _ => None,
        }
    }

    /// For a derived anchor: how many turns of the range hold it (this one included). Under the
    /// `any` rule only an anchor no other turn holds is enough on its own.
    pub fn turns_sharing(&self, i: usize) -> Option<u32> {
        match self.0 {
            Check::Derived { shared, .. } => Some(shared[i]),
            _ => None,
        }
    }

    /// Which of the profile's candidates are the anchors (bit i: candidate i), for derived
    /// turns.
    pub fn candidates_used(&self) -> u16 {
        match self.0 {
            Check::Derived { picked, len, .. } => picked[..usize::from(len)]
                .iter()
                .fold(0, |mask, &i| mask | 1 << i),
            _ => 0,
        }
    }

    /// The derived anchors with how many turns of the range hold each (nothing for given ones).
    pub fn evidence(&self) -> Vec<AnchorEvidence> {
        (0..self.len())
            .filter_map(|i| {
                Some(AnchorEvidence {
                    anchor: self.anchor(i).into(),
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
        let mut counter_of = KeyTable::with_room_for(candidates);
        let mut slots = Vec::with_capacity(candidates);
        for turn in turns.iter().filter(|t| derived(t)) {
            slots.extend(
                turn.profile
                    .candidate_keys()
                    .map(|key| counter_of.insert(key)),
            );
        }
        let mut counters = vec![0u32; counter_of.len()];
        if !counters.is_empty() {
            // Which way the bitmap answers is a coin toss a branch would mispredict: the keys
            // it lets through are gathered without one, then looked up.
            let mut through = Vec::new();
            for turn in turns {
                let terms = turn.profile.terms();
                through.resize(terms.len(), TermKey(0));
                let mut n = 0;
                for &key in terms {
                    through[n] = key;
                    n += usize::from(counter_of.may_hold(key));
                }
                for &key in &through[..n] {
                    if let Some(counter) = counter_of.get(key) {
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

/// Term key → counter, numbered in insertion order. Most terms of a range are nobody's
/// candidate, so lookups mostly miss: a bitmap of the keys' low bits, small enough to stay in
/// the nearest cache, rules most of them out before the table is read. The keys are hashes
/// already: a multiplication spreads them over the table. (A `HashMap` in its place made
/// choosing the anchors of 2,000 turns 0.50 ms instead of 0.36: criterion, `rule_2b_anchors_alone`.)
struct KeyTable {
    maybe: Vec<u64>,
    /// Open addressing, at most half full: `key << 32 | counter + 1`; 0 is an empty slot.
    slots: Vec<u64>,
    shift: u32,
    len: u32,
}

/// Bits of the bitmap: 2^16, 8 KiB.
const MAYBE_WORDS: usize = 1 << 10;

impl KeyTable {
    fn with_room_for(keys: usize) -> Self {
        let size = (keys * 2).next_power_of_two().max(16);
        KeyTable {
            maybe: vec![0; MAYBE_WORDS],
            slots: vec![0; size],
            shift: 64 - size.trailing_zeros(),
            len: 0,
        }
    }

    fn home(&self, key: TermKey) -> usize {
        (u64::from(key.0).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    fn maybe_bit(key: TermKey) -> (usize, u64) {
        let bit = key.0 as usize & (MAYBE_WORDS * 64 - 1);
        (bit / 64, 1 << (bit % 64))
    }

    /// False when the table surely lacks the key.
    fn may_hold(&self, key: TermKey) -> bool {
        let (word, bit) = Self::maybe_bit(key);
        self.maybe[word] & bit != 0
    }

    /// The key's counter, numbering it if it is new.
    fn insert(&mut self, key: TermKey) -> u32 {
        let (word, bit) = Self::maybe_bit(key);
        self.maybe[word] |= bit;
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        // A probe of every slot at most, so that a table sized or walked wrongly fails loudly
        // rather than spinning.
        for _ in 0..self.slots.len() {
            match self.slots[at] {
                0 => {
                    self.slots[at] = u64::from(key.0) << 32 | u64::from(self.len + 1);
                    self.len += 1;
                    return self.len - 1;
                }
                slot if (slot >> 32) as u32 == key.0 => return slot as u32 - 1,
                _ => at = (at + 1) & mask,
            }
        }
        unreachable!("a table at most half full has an empty slot on every probe sequence")
    }

    fn get(&self, key: TermKey) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        for _ in 0..self.slots.len() {
            match self.slots[at] {
                0 => return None,
                slot if (slot >> 32) as u32 == key.0 => return Some(slot as u32 - 1),
                _ => at = (at + 1) & mask,
            }
        }
        unreachable!("a table at most half full has an empty slot on every probe sequence")
    }

    fn len(&self) -> usize {
        self.len as usize
    }
}

/// The turn's first `count` candidates, fewest turns of the range holding them first (ties
/// keep the profile's order).
fn rarest_in_range(
    turn: &TurnFacts,
    counts: impl Iterator<Item = u32>,
    count: usize,
) -> TurnCheck<'_> {
    let mut picked = [0u8; MAX_CANDIDATES];
    let mut shared = [0u32; MAX_CANDIDATES];
    let mut n = 0;
    for (i, holding) in counts.take(MAX_CANDIDATES).enumerate() {
        (picked[i], shared[i]) = (i as u8, holding);
        n += 1;
    }
    let len = count.min(n);
    // Only the first `len` are read: pick them one by one (a few passes over at most 16)
    // rather than sorting all, each ranked by one integer (count, then index).
    // Often every candidate is the turn's own (1) and the profile's order already stands.
    if shared[..n].windows(2).any(|w| w[0] > w[1]) {
        let mut ranks = [u64::MAX; MAX_CANDIDATES];
        for (rank, i) in ranks.iter_mut().zip(0..n) {
            *rank = u64::from(shared[i]) << 8 | i as u64;
        }
        for slot in 0..len {
            let rarest = (slot..n).fold(
                slot,
                |best, j| {
                    if ranks[j] < ranks[best] { j } else { best }
                },
            );
            ranks.swap(slot, rarest);
            (picked[slot], shared[slot]) = ((ranks[slot] & 0xff) as u8, (ranks[slot] >> 8) as u32);
        }
    }
    TurnCheck(Check::Derived {
        profile: &turn.profile,
        picked,
        shared,
        len: len as u8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_table_numbers_each_key_once_and_knows_which_it_lacks() {
        // Ten thousand keys in a table sized for them collide on their home slots many times.
        let keys: Vec<TermKey> = (0..10_000u32)
            .map(|i| TermKey(i.wrapping_mul(0x0100_0193)))
            .collect();
        let mut table = KeyTable::with_room_for(keys.len());
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(table.insert(key), i as u32);
        }
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(
                table.insert(key),
                i as u32,
                "a second insert numbers nothing"
            );
            assert_eq!(table.get(key), Some(i as u32));
        }
        assert_eq!(table.len(), keys.len());
        let absent = (10_000..20_000u32).map(|i| TermKey(i.wrapping_mul(0x0100_0193)));
        for key in absent {
            assert_eq!(table.get(key), None, "{key:?}");
        }
    }

    #[test]
    fn the_key_table_is_at_most_half_full_spreads_its_keys_and_its_bitmap_rules_out_most_misses() {
        // What makes it fast rather than what makes it right: every slot probed from its home,
        // and most lookups of a range's terms (nobody's candidate) answered by the bitmap.
        let key = |i: u32| crate::terms::key_of_normalized(&format!("term{i}"));
        let keys: Vec<TermKey> = (0..1_000).map(key).collect();
        let mut table = KeyTable::with_room_for(keys.len());
        assert!(
            table.slots.len() >= 2 * keys.len(),
            "{} slots",
            table.slots.len()
        );
        let homes: std::collections::HashSet<usize> = keys.iter().map(|&k| table.home(k)).collect();
        assert!(
            homes.len() > keys.len() / 2,
            "{} homes for {} keys",
            homes.len(),
            keys.len()
        );
        for &k in &keys {
            table.insert(k);
        }
        assert!(keys.iter().all(|&k| table.may_hold(k)));
        let let_through = (1_000..11_000)
            .map(key)
            .filter(|&k| table.may_hold(k))
            .count();
        assert!(
            let_through < 500,
            "{let_through} of 10,000 absent keys let through"
        );
    }

    #[test]
    fn a_check_is_empty_when_nothing_is_to_be_checked_and_says_who_chose_its_anchors() {
        use crate::derive::{AnchorSource, Draft};
        use crate::model::Role;
        let turn = |anchors: TurnAnchors, pinned: bool, text: &str| TurnFacts {
            id: 0,
            role: Role::User,
            tokens: 10,
            anchors,
            pinned,
            profile: Draft::new(text, AnchorSource::Prose).into_profile(),
        };
        let turns = [
            turn(
                TurnAnchors::Given(vec!["ZFA04Y".into()]),
                false,
                "Rebook ZFA04Y",
            ),
            turn(TurnAnchors::Given(Vec::new()), false, "Rebook ZFA04Y"),
            turn(TurnAnchors::Derived, false, "Rebook ZFA04Y"),
            turn(TurnAnchors::Derived, false, "ok"),
            turn(TurnAnchors::Derived, true, "Rebook ZFA04Y"),
        ];
        let refs: Vec<&TurnFacts> = turns.iter().collect();
        let seen: Vec<(bool, bool)> = checks(&refs, &Policy::default())
            .iter()
            .map(|c| (c.is_empty(), c.is_derived()))
            .collect();
        assert_eq!(
            seen,
            [
                (false, false),
                (true, false),
                (false, true),
                (true, true),
                (true, true)
            ]
        );
    }
}

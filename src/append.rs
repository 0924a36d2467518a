//! How a batch of turns fits the log: new turns, idempotent replays, conflicts and gaps.
//!
//! Pure: the store loads the conversation's next id, the stored turns the batch names and the
//! conversation's candidate counts, and this decides; nothing here touches the database.

use crate::coverage::Role;
use crate::coverage::derive::{AnchorSource, Draft, rank_by_rarity};
use crate::coverage::profile::TermProfile;
use crate::coverage::terms::TermKey;
use foldhash::HashMap;

/// A turn ready to store: tokens counted and its terms drafted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTurn {
    pub id: Option<i64>,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
    /// The anchors the client sent; `None`: the service derives them.
    pub anchors: Option<Vec<String>>,
    pub external_id: Option<String>,
    pub pinned: bool,
    pub draft: Draft,
}

impl PreparedTurn {
    /// Fills in what the client left out (tokens counted) and drafts the turn's term profile:
    /// its candidate anchors (unless the client gave anchors) and term keys. Candidates are
    /// ranked later, against the conversation's counts ([`AppendPlan::rank`]).
    pub fn new(turn: crate::domain::NewTurn, tokens: &crate::tokens::TokenCounter) -> Self {
        let source = if turn.role == Role::Tool {
            AnchorSource::ToolOutput
        } else {
            AnchorSource::Prose
        };
        let anchors: Option<Vec<String>> = turn
            .anchors
            .map(|anchors| anchors.into_iter().map(|a| a.into_inner()).collect());
        let draft = if anchors.is_some() {
            Draft::terms_only(&turn.content)
        } else {
            Draft::new(&turn.content, source)
        };
        Self {
            id: turn.id,
            role: turn.role,
            tokens: turn.tokens.unwrap_or_else(|| tokens.count(&turn.content)),
            anchors,
            external_id: turn.external_id.map(|e| e.into_inner()),
            pinned: turn.pinned,
            draft,
            content: turn.content,
        }
    }
}

/// A turn as the log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedTurn {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
    /// The client's anchors, or the provisional derived ones (rule 2b chooses per range).
    pub anchors: Vec<String>,
    pub anchors_given: bool,
    pub external_id: Option<String>,
    pub pinned: bool,
}

impl LoggedTurn {
    /// Whether `turn`, placed at this turn's id, is this turn sent again: the same role, content,
    /// tokens and external id, and the same anchors if the client sent any. Derived anchors
    /// depend on the turns around them, and pinning is state that may change, so neither makes a
    /// turn another one.
    pub fn is_sent_again_as(&self, turn: &PreparedTurn) -> bool {
        let same_anchors = match &turn.anchors {
            Some(given) => self.anchors_given && *given == self.anchors,
            None => !self.anchors_given,
        };
        self.role == turn.role
            && self.content == turn.content
            && self.tokens == turn.tokens
            && self.external_id == turn.external_id
            && same_anchors
    }
}

/// Where a batch goes, before its new turns are ranked against the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendPlan {
    /// Turns to insert, with their ids.
    pub new: Vec<(i64, PreparedTurn)>,
    /// Turns of the batch that are already stored identically, as stored.
    pub replayed: Vec<LoggedTurn>,
    /// Turns named twice in the batch, identically (the second is a replay of the first).
    pub repeated_in_batch: u64,
    /// The conversation's next id once the new turns are in.
    pub next_id: i64,
}

/// A batch placed and ranked: what to store and what to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// Turns to insert, with their term profiles.
    pub new: Vec<(LoggedTurn, TermProfile)>,
    pub replayed: Vec<LoggedTurn>,
    pub repeated_in_batch: u64,
    pub next_id: i64,
    /// What to add to the conversation's candidate counts.
    pub counts_added: CountsAdded,
}

/// What an append adds to the conversation's candidate counts, split by whether the
/// conversation counts a key already: the store raises those in place and inserts the others,
/// which costs Postgres half what an upsert of both does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CountsAdded {
    /// Keys the conversation counts already, ascending, with what to add.
    pub raised: Vec<(TermKey, u32)>,
    /// Keys it counts for the first time, ascending, with their counts.
    pub started: Vec<(TermKey, u32)>,
}

impl CountsAdded {
    /// `added` split by whether `seen` (the conversation's stored counts) holds each key.
    pub fn split(added: HashMap<TermKey, u32>, seen: &HashMap<TermKey, u32>) -> Self {
        let (mut raised, mut started): (Vec<_>, Vec<_>) = added
            .into_iter()
            .partition(|(key, _)| seen.contains_key(key));
        raised.sort_unstable();
        started.sort_unstable();
        Self { raised, started }
    }

    pub fn is_empty(&self) -> bool {
        self.raised.is_empty() && self.started.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendConflict {
    /// These ids are stored with different role, content, tokens, anchors or external id.
    Differs { ids: Vec<i64> },
    /// A turn's id is not the next one the log expects.
    Gap {
        index: usize,
        id: i64,
        expected: i64,
    },
    /// The same id appears twice in the batch with different turns.
    DuplicateInBatch { id: i64 },
}

/// Places `batch` after a log whose next id is `next_id`; `stored` holds the logged turns
/// whose ids the batch names below `next_id`.
pub fn plan_append(
    next_id: i64,
    batch: Vec<PreparedTurn>,
    stored: &[LoggedTurn],
) -> Result<AppendPlan, AppendConflict> {
    let mut cursor = next_id;
    let mut new: Vec<(i64, PreparedTurn)> = Vec::new();
    let mut replayed = Vec::new();
    let mut repeated_in_batch = 0;
    let mut differs = Vec::new();
    for (index, turn) in batch.into_iter().enumerate() {
        let id = turn.id.unwrap_or(cursor);
        if id < next_id {
            match stored.iter().find(|s| s.id == id) {
                Some(s) if s.is_sent_again_as(&turn) => replayed.push(s.clone()),
                _ => differs.push(id),
            }
        } else if id < cursor {
            // Named twice in this batch: harmless only if it is the very same turn.
            let earlier = new.iter().find(|(n, _)| *n == id).map(|(_, t)| t);
            if earlier.is_none_or(|earlier| !same_in_batch(earlier, &turn)) {
                return Err(AppendConflict::DuplicateInBatch { id });
            }
            repeated_in_batch += 1;
        } else if id == cursor {
            new.push((id, turn));
            cursor += 1;
        } else {
            return Err(AppendConflict::Gap {
                index,
                id,
                expected: cursor,
            });
        }
    }
    if !differs.is_empty() {
        differs.sort_unstable();
        differs.dedup();
        return Err(AppendConflict::Differs { ids: differs });
    }
    Ok(AppendPlan {
        new,
        replayed,
        repeated_in_batch,
        next_id: cursor,
    })
}

/// Two turns of one batch under one id: the same turn iff everything that defines it agrees
/// (ids aside: one may name it, the other take it by position).
fn same_in_batch(a: &PreparedTurn, b: &PreparedTurn) -> bool {
    a.role == b.role
        && a.content == b.content
        && a.tokens == b.tokens
        && a.anchors == b.anchors
        && a.external_id == b.external_id
        && a.pinned == b.pinned
}

impl AppendPlan {
    /// The candidate keys whose conversation counts [`AppendPlan::rank`] needs.
    pub fn candidate_keys(&self) -> Vec<TermKey> {
        let mut keys: Vec<TermKey> = self
            .new
            .iter()
            .flat_map(|(_, t)| t.draft.candidate_keys())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Ranks the new turns' candidates by rarity in the conversation (`seen`: the stored counts
    /// of [`AppendPlan::candidate_keys`]) and gives each derived turn its first `anchor_count`
    /// candidates as provisional anchors.
    pub fn rank(self, seen: &HashMap<TermKey, u32>, anchor_count: usize) -> Appended {
        let (ids, mut turns): (Vec<i64>, Vec<PreparedTurn>) = self.new.into_iter().unzip();
        let drafts: Vec<Draft> = turns
            .iter_mut()
            .map(|t| std::mem::take(&mut t.draft))
            .collect();
        let (profiles, counts_added) = rank_by_rarity(drafts, seen);
        let new = ids
            .into_iter()
            .zip(turns)
            .zip(profiles)
            .map(|((id, turn), profile)| {
                let anchors_given = turn.anchors.is_some();
                let anchors = turn.anchors.unwrap_or_else(|| {
                    profile
                        .candidates()
                        .take(anchor_count)
                        .map(|c| c.text.to_owned())
                        .collect()
                });
                let logged = LoggedTurn {
                    id,
                    role: turn.role,
                    content: turn.content,
                    tokens: turn.tokens,
                    anchors,
                    anchors_given,
                    external_id: turn.external_id,
                    pinned: turn.pinned,
                };
                (logged, profile)
            })
            .collect();
        Appended {
            new,
            replayed: self.replayed,
            repeated_in_batch: self.repeated_in_batch,
            next_id: self.next_id,
            counts_added: CountsAdded::split(counts_added, seen),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::derive::AnchorSource;

    fn prepared(id: Option<i64>, content: &str) -> PreparedTurn {
        PreparedTurn {
            id,
            role: Role::User,
            content: content.into(),
            tokens: 1,
            anchors: None,
            external_id: None,
            pinned: false,
            draft: Draft::new(content, AnchorSource::Prose),
        }
    }

    fn logged(id: i64, content: &str) -> LoggedTurn {
        LoggedTurn {
            id,
            role: Role::User,
            content: content.into(),
            tokens: 1,
            anchors: vec!["provisional".into()],
            anchors_given: false,
            external_id: None,
            pinned: false,
        }
    }

    fn new_ids(plan: &AppendPlan) -> Vec<i64> {
        plan.new.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn omitted_ids_take_the_next_ones() {
        let plan = plan_append(3, vec![prepared(None, "a"), prepared(None, "b")], &[]).unwrap();
        assert_eq!(new_ids(&plan), [3, 4]);
        assert_eq!(plan.next_id, 5);
    }

    #[test]
    fn an_identical_stored_turn_is_a_replay_and_a_different_one_a_conflict() {
        let stored = [logged(0, "a"), logged(1, "b")];
        let plan = plan_append(
            2,
            vec![
                prepared(Some(0), "a"),
                prepared(Some(1), "b"),
                prepared(Some(2), "c"),
            ],
            &stored,
        )
        .unwrap();
        assert_eq!(plan.replayed, stored, "answered as stored");
        assert_eq!(plan.new.len(), 1);
        let err = plan_append(
            2,
            vec![
                prepared(Some(0), "A"),
                prepared(Some(1), "b"),
                prepared(Some(1), "B"),
            ],
            &stored,
        )
        .unwrap_err();
        assert_eq!(err, AppendConflict::Differs { ids: vec![0, 1] });
    }

    #[test]
    fn given_anchors_are_part_of_a_turn_and_derived_ones_and_pins_are_not() {
        let stored = [logged(0, "a")];
        let pinned = PreparedTurn {
            pinned: true,
            ..prepared(Some(0), "a")
        };
        assert_eq!(
            plan_append(1, vec![pinned], &stored)
                .unwrap()
                .replayed
                .len(),
            1
        );
        let given = PreparedTurn {
            anchors: Some(vec!["provisional".into()]),
            ..prepared(Some(0), "a")
        };
        assert_eq!(
            plan_append(1, vec![given.clone()], &stored).unwrap_err(),
            AppendConflict::Differs { ids: vec![0] },
            "the stored anchors were derived, these are given"
        );
        let stored_given = LoggedTurn {
            anchors_given: true,
            ..logged(0, "a")
        };
        assert_eq!(
            plan_append(1, vec![given], std::slice::from_ref(&stored_given))
                .unwrap()
                .replayed,
            [stored_given]
        );
    }

    #[test]
    fn an_id_past_the_next_one_is_a_gap() {
        let err = plan_append(2, vec![prepared(Some(3), "x")], &[]).unwrap_err();
        assert_eq!(
            err,
            AppendConflict::Gap {
                index: 0,
                id: 3,
                expected: 2
            }
        );
    }

    #[test]
    fn a_batch_may_name_a_new_turn_twice_only_identically() {
        let plan =
            plan_append(0, vec![prepared(Some(0), "a"), prepared(Some(0), "a")], &[]).unwrap();
        assert_eq!((plan.new.len(), plan.repeated_in_batch), (1, 1));
        let err =
            plan_append(0, vec![prepared(Some(0), "a"), prepared(Some(0), "b")], &[]).unwrap_err();
        assert_eq!(err, AppendConflict::DuplicateInBatch { id: 0 });
    }

    #[test]
    fn ranking_gives_derived_turns_provisional_anchors_and_keeps_given_ones() {
        let given = PreparedTurn {
            anchors: Some(vec!["mine".into()]),
            draft: Draft::terms_only("Reservation ZFA04Y"),
            ..prepared(None, "Reservation ZFA04Y")
        };
        let plan = plan_append(
            0,
            vec![
                prepared(None, "Reservation ZFA04Y for the honeymoon"),
                given,
            ],
            &[],
        )
        .unwrap();
        let appended = plan.rank(&HashMap::default(), 2);
        let (first, profile) = &appended.new[0];
        assert_eq!(first.anchors, ["ZFA04Y", "Reservation"]);
        assert!(!first.anchors_given);
        assert_eq!(profile.candidate_count(), 3);
        let (second, profile) = &appended.new[1];
        assert_eq!(
            (second.anchors.as_slice(), second.anchors_given),
            (&["mine".to_string()][..], true)
        );
        assert_eq!(
            profile.candidate_count(),
            0,
            "a given turn keeps only its terms"
        );
        assert_eq!(appended.counts_added.started.len(), 3);
    }

    #[test]
    fn counts_the_conversation_holds_are_raised_and_the_others_started() {
        let (k1, k2, k3) = (TermKey(1), TermKey(2), TermKey(3));
        let added = HashMap::from_iter([(k3, 1), (k1, 2), (k2, 4)]);
        let seen = HashMap::from_iter([(k2, 7), (TermKey(9), 1)]);
        let split = CountsAdded::split(added, &seen);
        assert_eq!(split.raised, [(k2, 4)]);
        assert_eq!(split.started, [(k1, 2), (k3, 1)], "ascending");
        assert!(!split.is_empty());
        assert!(CountsAdded::default().is_empty());
    }
}

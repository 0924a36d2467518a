//! How a batch of turns fits the log: new turns, idempotent replays, conflicts and gaps.
//!
//! Pure: the store loads the conversation's next id and the stored turns the batch names, and
//! this decides; nothing here touches the database.

use crate::coverage::Role;

/// A turn ready to store: tokens counted and anchors derived where the client gave none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTurn {
    pub id: Option<i64>,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
    pub anchors: Vec<String>,
    pub external_id: Option<String>,
}

/// A turn as the log holds it (the fields that make a replay a replay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedTurn {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
    pub anchors: Vec<String>,
    pub external_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendPlan {
    /// Turns to insert, with their ids.
    pub new: Vec<LoggedTurn>,
    /// Turns of the batch that are already stored identically.
    pub replayed: Vec<LoggedTurn>,
    /// The conversation's next id once the new turns are in.
    pub next_id: i64,
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
    let mut new: Vec<LoggedTurn> = Vec::new();
    let mut replayed = Vec::new();
    let mut differs = Vec::new();
    for (index, turn) in batch.into_iter().enumerate() {
        let id = turn.id.unwrap_or(cursor);
        let logged = LoggedTurn {
            id,
            role: turn.role,
            content: turn.content,
            tokens: turn.tokens,
            anchors: turn.anchors,
            external_id: turn.external_id,
        };
        if id < next_id {
            match stored.iter().find(|s| s.id == id) {
                Some(s) if *s == logged => replayed.push(logged),
                _ => differs.push(id),
            }
        } else if id < cursor {
            // Named twice in this batch: harmless only if it is the very same turn.
            let earlier = new.iter().find(|n| n.id == id);
            if earlier != Some(&logged) {
                return Err(AppendConflict::DuplicateInBatch { id });
            }
            replayed.push(logged);
        } else if id == cursor {
            new.push(logged);
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
        next_id: cursor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(id: Option<i64>, content: &str) -> PreparedTurn {
        PreparedTurn {
            id,
            role: Role::User,
            content: content.into(),
            tokens: 1,
            anchors: vec![],
            external_id: None,
        }
    }

    fn logged(id: i64, content: &str) -> LoggedTurn {
        LoggedTurn {
            id,
            role: Role::User,
            content: content.into(),
            tokens: 1,
            anchors: vec![],
            external_id: None,
        }
    }

    #[test]
    fn omitted_ids_take_the_next_ones() {
        let plan = plan_append(3, vec![prepared(None, "a"), prepared(None, "b")], &[]).unwrap();
        assert_eq!(plan.new.iter().map(|t| t.id).collect::<Vec<_>>(), [3, 4]);
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
        assert_eq!(plan.replayed, stored);
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
        assert_eq!((plan.new.len(), plan.replayed.len()), (1, 1));
        let err =
            plan_append(0, vec![prepared(Some(0), "a"), prepared(Some(0), "b")], &[]).unwrap_err();
        assert_eq!(err, AppendConflict::DuplicateInBatch { id: 0 });
    }
}

//! Term profiles as both backends store them: decoding a turn's decision facts, the anchors that
//! decided a covered turn, and the backfill of turns stored before profiles existed.

use super::{Error, Result, decode};
use crate::append::CountsAdded;
use crate::coverage::derive::{AnchorSource, Draft, derive_anchors, rank_by_rarity};
use crate::coverage::profile::picked_candidates;
use crate::coverage::terms::TermKey;
use crate::coverage::{Role, TermProfile, TurnAnchors, TurnFacts};
use foldhash::HashMap;

/// A turn's decision facts from its stored columns. A turn stored before profiles existed
/// (`profile` NULL: only until the start-up backfill reaches it, or written meanwhile by an older
/// process) gets its profile from its content, which the query then reads. The query leaves out
/// the anchors of a turn known to be derived (`anchors_given` false): the decision chooses those
/// from the profile.
#[allow(clippy::too_many_arguments)]
pub(super) fn stored_facts(
    id: i64,
    role: Role,
    tokens: u32,
    anchors: Option<Vec<String>>,
    anchors_given: Option<bool>,
    pinned: bool,
    profile: Option<&[u8]>,
    content: Option<Vec<u8>>,
) -> Result<TurnFacts> {
    let (given, profile) = match (profile, content) {
        (Some(bytes), _) => {
            let profile = TermProfile::from_bytes(bytes).map_err(Error::invariant)?;
            (anchors_given.unwrap_or(true), profile)
        }
        (None, Some(content)) => {
            let content = decode::text(content)?;
            let given = anchors_given.unwrap_or_else(|| {
                !were_derived(&content, role, anchors.as_deref().unwrap_or_default())
            });
            (given, draft(&content, role, given).into_profile())
        }
        (None, None) => {
            return Err(Error::invariant(format!(
                "turn {id} has neither a profile nor its content in this read"
            )));
        }
    };
    let anchors = match (given, anchors) {
        (true, Some(anchors)) => TurnAnchors::Given(anchors),
        (true, None) => {
            return Err(Error::invariant(format!(
                "turn {id} has its client's anchors but they were not read"
            )));
        }
        (false, _) => TurnAnchors::Derived,
    };
    Ok(TurnFacts {
        id,
        role,
        tokens,
        anchors,
        pinned,
        profile,
    })
}

/// The anchor source for a role: tool output may be JSON.
pub(super) fn source_of(role: Role) -> AnchorSource {
    if role == Role::Tool {
        AnchorSource::ToolOutput
    } else {
        AnchorSource::Prose
    }
}

fn draft(content: &str, role: Role, anchors_given: bool) -> Draft {
    if anchors_given {
        Draft::terms_only(content)
    } else {
        Draft::new(content, source_of(role))
    }
}

/// Whether anchors stored before rule 2b are what the service then derived for the content
/// (the first of its ranking, however many it was configured to keep), i.e. the client did not
/// send them. Any other anchors stay authoritative. (A client that sent exactly the first few of
/// that ranking is taken for the service: its turn is then decided by rule 2b.)
fn were_derived(content: &str, role: Role, anchors: &[String]) -> bool {
    derive_anchors(content, source_of(role), anchors.len().max(1)) == anchors
}

/// The anchors that decided a covered turn, for its reconstruct evidence: the candidates the
/// checkpoint used, or the turn's stored anchors when it was given them or when the checkpoint
/// predates rule 2b (`used` NULL).
pub(super) fn deciding_anchors(
    anchors: Vec<String>,
    anchors_given: Option<bool>,
    profile: Option<Vec<u8>>,
    used: Option<Vec<u8>>,
) -> Result<Vec<String>> {
    let (Some(false), Some(profile), Some(used)) = (anchors_given, profile, used) else {
        return Ok(anchors);
    };
    let mask = match used.as_slice() {
        [lo, hi] => u16::from_le_bytes([*lo, *hi]),
        _ => return Err(Error::invariant("candidates_used is not one u16")),
    };
    picked_candidates(&profile, mask).map_err(Error::invariant)
}

/// `candidates_used` as stored: a little-endian u16 per turn of the range.
pub(super) fn encode_candidates_used(used: &[u16]) -> Vec<u8> {
    used.iter().flat_map(|u| u.to_le_bytes()).collect()
}

/// A term key as the database's 32-bit integer column holds it.
pub(super) fn term_column(key: TermKey) -> i32 {
    key.0 as i32
}

pub(super) fn term_from_column(column: i32) -> TermKey {
    TermKey(column as u32)
}

/// One stored turn as the backfill reads it.
pub(super) struct BackfillTurn {
    pub id: i64,
    pub role: Role,
    pub anchors: Vec<String>,
    /// Present when the turn has one already (appended after the upgrade).
    pub profile: Option<Vec<u8>>,
    /// Present when it has none.
    pub content: Option<Vec<u8>>,
}

/// The backfill of one conversation, turn by turn in id order: profiles for the turns without
/// one, ranked by rarity exactly as if they had been appended now, and the conversation's
/// candidate counts rebuilt from every turn.
#[derive(Default)]
pub(super) struct Backfill {
    counts: HashMap<TermKey, u32>,
}

/// What the backfill writes for one turn.
pub(super) struct Profiled {
    pub id: i64,
    pub anchors_given: bool,
    pub profile: TermProfile,
}

impl Backfill {
    /// The next turn; `Some` when it needs writing.
    pub fn next(&mut self, turn: BackfillTurn) -> Result<Option<Profiled>> {
        if let Some(bytes) = turn.profile {
            let profile = TermProfile::from_bytes(&bytes).map_err(Error::invariant)?;
            for c in profile.candidates() {
                *self.counts.entry(c.key).or_insert(0) += 1;
            }
            return Ok(None);
        }
        let content = decode::text(turn.content.unwrap_or_default())?;
        let anchors_given = !were_derived(&content, turn.role, &turn.anchors);
        let (mut profiles, added) =
            rank_by_rarity([draft(&content, turn.role, anchors_given)], &self.counts);
        for (key, n) in added {
            *self.counts.entry(key).or_insert(0) += n;
        }
        Ok(Some(Profiled {
            id: turn.id,
            anchors_given,
            profile: profiles.pop().unwrap_or_default(),
        }))
    }

    /// The conversation's candidate counts, every turn counted: all of them started, as the
    /// conversation's old counts are deleted first.
    pub fn counts(self) -> CountsAdded {
        CountsAdded::split(self.counts, &HashMap::default())
    }
}

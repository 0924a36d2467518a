//! Rarity within the conversation: a turn's candidates ranked by how many earlier turns of the
//! conversation already had them, so the anchors a turn gets are what is new in it.

use super::{AnchorSource, Candidate, candidates_of, ranked};
use crate::normalize::normalize_text;
use crate::profile::{MAX_CANDIDATES, TermProfile};
use crate::terms::{TermKey, countable_normalized, term_keys};
use foldhash::HashMap;
use std::borrow::Cow;

/// Candidates considered per turn before rarity picks the [`MAX_CANDIDATES`] it keeps.
const DRAFT_CANDIDATES: usize = 2 * MAX_CANDIDATES;

/// A turn's candidates in tier order and its term keys, before the conversation's counts rank
/// the candidates by rarity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draft {
    /// Every candidate's text and normalized text, back to back: one buffer a turn rather than
    /// two strings a candidate (allocation was a sixth of an append's CPU in the service).
    text: String,
    /// Each candidate's text and normalized text as byte ranges of `text`, and its key; in
    /// tier order.
    candidates: Vec<([usize; 3], TermKey)>,
    terms: Vec<TermKey>,
}

impl Draft {
    /// The draft of a turn whose anchors the service derives.
    pub fn new(content: &str, source: AnchorSource) -> Self {
        let any = |_: &Candidate<'_>| true;
        let mut draft = Self {
            terms: term_keys(content),
            ..Self::default()
        };
        // A candidate must occur in its own turn as the summary matcher reads it (NFKC can
        // compose a letter and a mark the tokenizer split: `cafe` is not a word of `café`).
        let ranked = ranked(
            content,
            candidates_of(content, source),
            any,
            DRAFT_CANDIDATES,
        );
        // Sized once for the texts below, back to back: an ASCII token's key is its normalized
        // text, so this is enough unless other tokens' normalized texts outgrow their keys.
        let bytes = ranked.iter().map(|(c, key)| c.text.len() + key.len());
        draft.text.reserve(bytes.sum());
        draft.candidates.reserve(ranked.len());
        for (c, match_key) in ranked {
            // An ASCII token's match key is its normalized text already (lower-cased; a token
            // holds no whitespace).
            let normalized = if c.text.is_ascii() {
                match_key.as_str().into()
            } else {
                Cow::Owned(normalize_text(&c.text))
            };
            let Some(key) = countable_normalized(&normalized) else {
                continue;
            };
            if draft.terms.binary_search(&key).is_ok() {
                let start = draft.text.len();
                draft.text.push_str(&c.text);
                let middle = draft.text.len();
                draft.text.push_str(&normalized);
                draft
                    .candidates
                    .push(([start, middle, draft.text.len()], key));
            }
        }
        draft
    }

    /// The draft of a turn whose anchors the client gave: its terms only (other turns' derived
    /// anchors are still counted against them).
    pub fn terms_only(content: &str) -> Self {
        Self {
            terms: term_keys(content),
            ..Self::default()
        }
    }

    /// The keys whose counts [`rank_by_rarity`] reads.
    pub fn candidate_keys(&self) -> impl Iterator<Item = TermKey> + '_ {
        self.candidates.iter().map(|&(_, key)| key)
    }

    /// The profile in tier order, for a turn read without the conversation's counts (stored
    /// before profiles existed).
    pub fn into_profile(self) -> TermProfile {
        let text = &self.text;
        TermProfile::from_parts(
            self.candidates.iter().map(|&([start, middle, end], key)| {
                (&text[start..middle], &text[middle..end], key)
            }),
            self.terms,
        )
    }
}

/// Ranks each draft's candidates by how many earlier turns of the conversation kept them as
/// candidates (fewest first; ties keep the tier order), keeps the best [`MAX_CANDIDATES`], and
/// counts those for the drafts after it. `seen` holds the counts before the first draft; the
/// second result holds what to add to the conversation's counts.
pub fn rank_by_rarity(
    drafts: impl IntoIterator<Item = Draft>,
    seen: &HashMap<TermKey, u32>,
) -> (Vec<TermProfile>, HashMap<TermKey, u32>) {
    let mut added: HashMap<TermKey, u32> = HashMap::default();
    let count = |key: &TermKey, added: &HashMap<TermKey, u32>| {
        seen.get(key).copied().unwrap_or(0) + added.get(key).copied().unwrap_or(0)
    };
    let profiles = drafts
        .into_iter()
        .map(|mut draft| {
            // Stable: equally rare candidates stay in tier order.
            draft
                .candidates
                .sort_by_cached_key(|(_, key)| count(key, &added));
            draft.candidates.truncate(MAX_CANDIDATES);
            for (_, key) in &draft.candidates {
                *added.entry(*key).or_insert(0) += 1;
            }
            draft.into_profile()
        })
        .collect();
    (profiles, added)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terms::countable_key;

    fn texts(profile: &TermProfile) -> Vec<&str> {
        profile.candidates().map(|c| c.text).collect()
    }

    #[test]
    fn a_candidate_seen_in_earlier_turns_ranks_below_a_new_one() {
        let drafts = [
            "Reservation ZFA04Y for the honeymoon",
            "Reservation ZFA04Y and a wheelchair",
        ]
        .map(|t| Draft::new(t, AnchorSource::Prose));
        let (profiles, added) = rank_by_rarity(drafts, &HashMap::default());
        assert_eq!(
            texts(&profiles[0])[0],
            "ZFA04Y",
            "tier order when nothing is seen"
        );
        assert_eq!(
            texts(&profiles[1])[0],
            "wheelchair",
            "ZFA04Y was already a candidate of the turn before"
        );
        assert_eq!(
            added.get(&countable_key("ZFA04Y").unwrap().1),
            Some(&2),
            "both turns count it"
        );
    }

    #[test]
    fn counts_from_storage_rank_like_earlier_turns_of_the_batch() {
        let key = countable_key("ZFA04Y").unwrap().1;
        let seen = HashMap::from_iter([(key, 5)]);
        let draft = Draft::new("Reservation ZFA04Y for the honeymoon", AnchorSource::Prose);
        let (profiles, _) = rank_by_rarity([draft], &seen);
        assert_eq!(texts(&profiles[0]), ["Reservation", "honeymoon", "ZFA04Y"]);
    }

    #[test]
    fn prose_turns_get_plain_words_as_candidates() {
        let draft = Draft::new(
            "Yes, please cancel it for my honeymoon.",
            AnchorSource::Prose,
        );
        let profile = draft.into_profile();
        assert!(texts(&profile).contains(&"honeymoon"), "{profile:?}");
        assert!(texts(&profile).contains(&"cancel"), "{profile:?}");
    }

    #[test]
    fn a_turn_with_given_anchors_keeps_only_its_terms() {
        let profile = Draft::terms_only("Reservation ZFA04Y").into_profile();
        assert_eq!(profile.candidate_count(), 0);
        assert!(profile.terms().len() >= 2);
    }
}

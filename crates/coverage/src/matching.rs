//! Word-bounded anchor matching on normalized text ([`super::normalize`]), with its work
//! bounded by its input: see [`Work`].

use super::normalize::{
    NormalizedText, at_word_boundary, is_word_char, normalize, normalize_text_into,
};
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use foldhash::HashMap;

/// A set of anchors, deduplicated after normalization, all searched for in one go.
#[derive(Debug, Default)]
pub struct AnchorSet {
    /// Normalized pattern to id (ids count up from 0); empty patterns can never be present.
    by_normalized: HashMap<String, AnchorId>,
    /// Reused by `insert`, so a repeated anchor costs no allocation.
    scratch: String,
}

/// Index of an anchor inside an [`AnchorSet`].
pub type AnchorId = usize;

impl AnchorSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an anchor (raw, as the client gave it) and returns its id; equal anchors after
    /// normalization share one id.
    pub fn insert(&mut self, anchor: &str) -> AnchorId {
        normalize_text_into(anchor, &mut self.scratch);
        if let Some(&id) = self.by_normalized.get(self.scratch.as_str()) {
            return id;
        }
        let id = self.by_normalized.len();
        self.by_normalized.insert(self.scratch.clone(), id);
        id
    }

    pub fn is_empty(&self) -> bool {
        self.by_normalized.is_empty()
    }

    /// The normalized patterns, by id.
    fn patterns(&self) -> Vec<&str> {
        let mut patterns = vec![""; self.by_normalized.len()];
        for (pattern, &id) in &self.by_normalized {
            patterns[id] = pattern;
        }
        patterns
    }

    /// For every anchor, the byte range of its first word-bounded occurrence in `haystack`.
    ///
    /// A word-bounded occurrence of an anchor that begins with a word character begins where a
    /// word of the haystack begins, and that word is exactly the anchor's first word. So such
    /// anchors (nearly all) are found through an index of the haystack's words, each in about
    /// constant time; the others go through one Aho-Corasick pass. The work is bounded: see
    /// [`Work`].
    pub fn find_first(&self, haystack: &NormalizedText) -> Vec<Option<(usize, usize)>> {
        self.find_first_counting(haystack.as_str()).0
    }

    /// [`Self::find_first`] in text normalized without an origin map (a decision needs no
    /// offsets into the original, and the map is 8 bytes a byte), and the work it took.
    pub fn find_first_counting(&self, text: &str) -> (Vec<Option<(usize, usize)>>, Work) {
        let patterns = self.patterns();
        let mut work = Work::for_input(text, &patterns);
        let mut found = vec![None; patterns.len()];
        // Each distinct word's first occurrence, and from each occurrence the next of the same
        // word: one allocation for all, where a list per word would be one each.
        let words: Vec<(usize, usize)> = words(text).collect();
        work.steps += words.len() as u64;
        let mut first_at: HashMap<&str, usize> = HashMap::default();
        let mut next_at = vec![usize::MAX; words.len()];
        for (i, &(start, end)) in words.iter().enumerate().rev() {
            if let Some(later) = first_at.insert(&text[start..end], i) {
                next_at[i] = later;
            }
        }
        let mut others = Vec::new();
        for (id, &pattern) in patterns.iter().enumerate() {
            let Some(first) = pattern.chars().next() else {
                continue; // normalizes to nothing: never present
            };
            if !is_word_char(first) {
                others.push(id);
                continue;
            }
            let first_word = &pattern[..pattern
                .find(|c: char| !is_word_char(c))
                .unwrap_or(pattern.len())];
            let mut at = first_at.get(first_word).copied();
            // Each occurrence of the first word costs a comparison of up to the pattern's
            // length; a pattern whose first word is everywhere and that is nowhere would cost
            // occurrences × length, so past the budget it goes to the automaton instead.
            let cost = pattern.len() as u64 + 1;
            while let Some(i) = at {
                if !work.spend(cost) {
                    others.push(id);
                    break;
                }
                let (start, end) = (words[i].0, words[i].0 + pattern.len());
                if text[start..].starts_with(pattern) && at_word_boundary(text, start, end) {
                    found[id] = Some((start, end));
                    break;
                }
                at = Some(next_at[i]).filter(|&n| n != usize::MAX);
            }
        }
        if !others.is_empty() {
            let others_patterns: Vec<&str> = others.iter().map(|&id| patterns[id]).collect();
            for (i, span) in find_first_by_automaton(&others_patterns, text, &mut work)
                .into_iter()
                .enumerate()
            {
                found[others[i]] = span;
            }
        }
        (found, work)
    }
}

/// The matcher's work, in steps of about one byte compared or one match looked at. The word
/// index may spend `budget` = [`Work::PER_BYTE`] steps per byte of its input (the summary and
/// the anchors) walking occurrences, and hands what it could not finish to the automaton; the
/// automaton's pass reads the text once and may look at `budget` matches. Past that an anchor
/// not yet found counts as absent (`cut`): its turn is uncovered and answered from the raw log,
/// never claimed, and the caller says so loudly. In all, at most 2 × budget + words + text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub steps: u64,
    pub budget: u64,
    pub cut: bool,
}

impl Work {
    pub const PER_BYTE: u64 = 16;

    fn for_input(text: &str, patterns: &[&str]) -> Self {
        let input = text.len() + patterns.iter().map(|p| p.len()).sum::<usize>();
        Self {
            steps: 0,
            budget: Self::PER_BYTE * (input as u64 + 1),
            cut: false,
        }
    }

    /// Takes `cost` steps if the budget has them.
    fn spend(&mut self, cost: u64) -> bool {
        if self.steps + cost > self.budget {
            return false;
        }
        self.steps += cost;
        true
    }
}

/// Byte ranges of the maximal runs of word characters in `text`.
fn words(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || {
        let (start, _) = chars.by_ref().find(|&(_, c)| is_word_char(c))?;
        let mut end = text.len();
        while let Some(&(i, c)) = chars.peek() {
            if !is_word_char(c) {
                end = i;
                break;
            }
            chars.next();
        }
        Some((start, end))
    })
}

/// The first word-bounded occurrence of each (non-empty) pattern, by one Aho-Corasick pass:
/// the text once, plus every overlapping match until all are found, each a step of `work`.
/// Matches go on being reported for patterns already found (up to one per pattern length at
/// each position), so past the budget the pass stops and the rest count as absent.
fn find_first_by_automaton(
    patterns: &[&str],
    text: &str,
    work: &mut Work,
) -> Vec<Option<(usize, usize)>> {
    let mut found = vec![None; patterns.len()];
    let automaton = AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        // Built once per decision and used for one pass: construction time dominates.
        .kind(Some(AhoCorasickKind::NoncontiguousNFA))
        .build(patterns)
        .expect("anchor patterns are plain strings; building the automaton cannot fail");
    // The automaton's own pass is linear in the text; the matches it reports have a budget of
    // their own, so that anchors the word index handed over are still looked for in full.
    work.steps += text.len() as u64;
    let mut remaining = patterns.len();
    for (seen, m) in (0u64..).zip(automaton.find_overlapping_iter(text)) {
        if seen == work.budget {
            work.cut = true;
            break;
        }
        work.steps += 1;
        let id = m.pattern().as_usize();
        if found[id].is_none() && at_word_boundary(text, m.start(), m.end()) {
            found[id] = Some((m.start(), m.end()));
            remaining -= 1;
            if remaining == 0 {
                break;
            }
        }
    }
    found
}

/// Where one anchor occurs in a summary, as character offsets `[start, end)` of the original.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Evidence {
    pub anchor: String,
    pub start: usize,
    pub end: usize,
}

/// Whether `anchor` occurs in `text` under the matching rules (convenience for single checks).
pub fn anchor_present(anchor: &str, text: &str) -> bool {
    !locate(&[anchor], text).is_empty()
}

/// The first word-bounded occurrence of each anchor that is present in `summary`.
pub fn locate(anchors: &[impl AsRef<str>], summary: &str) -> Vec<Evidence> {
    let mut set = AnchorSet::new();
    let ids: Vec<AnchorId> = anchors.iter().map(|a| set.insert(a.as_ref())).collect();
    let normalized = normalize(summary);
    let found = set.find_first(&normalized);
    anchors
        .iter()
        .zip(ids)
        .filter_map(|(anchor, id)| {
            let (start, end) = found[id]?;
            let (start, end) = normalized.original_span(start, end);
            Some(Evidence {
                anchor: anchor.as_ref().to_owned(),
                start,
                end,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_index_counts_a_step_per_word_and_a_patterns_length_plus_one_per_occurrence() {
        let mut set = AnchorSet::new();
        set.insert("ab");
        // Five words; `ab` is looked up as a whole word (`ab1` is another), found at once: 2 + 1.
        let (found, work) = set.find_first_counting("x ab1 y ab z");
        assert_eq!(found, [Some((8, 10))]);
        assert_eq!(work.steps, 5 + 3);
        let mut set = AnchorSet::new();
        set.insert("ab x");
        // Four words; both occurrences of the first word `ab` are looked at: 2 × (4 + 1).
        let (found, work) = set.find_first_counting("ab y ab x");
        assert_eq!(found, [Some((5, 9))]);
        assert_eq!((work.steps, work.cut), (4 + 10, false));
    }

    #[test]
    fn the_automaton_counts_the_text_and_a_step_per_match_and_stops_once_all_are_found() {
        let mut set = AnchorSet::new();
        set.insert("$1");
        set.insert("$2");
        // Four words; the pass reads 11 bytes and stops at its second match, both found.
        let (found, work) = set.find_first_counting("$1 $2 $1 $1");
        assert_eq!(found, [Some((0, 2)), Some((3, 5))]);
        assert_eq!((work.steps, work.cut), (4 + 11 + 2, false));
    }

    #[test]
    fn work_may_spend_its_budget_to_the_last_step_and_no_further() {
        let mut work = Work {
            steps: 0,
            budget: 10,
            cut: false,
        };
        assert!(work.spend(4));
        assert!(work.spend(6), "exactly the budget");
        assert!(!work.spend(1));
        assert_eq!(work.steps, 10, "a refused step takes nothing");
    }

    /// Text from a small alphabet of word characters, separators and a non-ASCII letter and
    /// mark, so words repeat, overlap and touch punctuation often.
    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex("[ab1$ .,-é\u{301}]{0,40}").unwrap()
    }

    proptest::proptest! {
        #[test]
        fn the_word_index_finds_exactly_what_one_automaton_pass_finds(
            summary in text(),
            anchors in proptest::collection::vec(text(), 1..12),
            cuts in proptest::collection::vec((0usize..40, 1usize..12), 0..6),
        ) {
            let normalized = normalize(&summary);
            let mut set = AnchorSet::new();
            for anchor in &anchors {
                set.insert(anchor);
            }
            // Pieces of the summary itself, so many anchors are present somewhere.
            let chars: Vec<char> = summary.chars().collect();
            for (at, len) in cuts {
                let piece: String = chars.iter().skip(at).take(len).collect();
                set.insert(&piece);
            }
            let patterns = set.patterns();
            let mut expected = vec![None; patterns.len()];
            let present: Vec<usize> = (0..patterns.len()).filter(|&i| !patterns[i].is_empty()).collect();
            if !present.is_empty() {
                let nonempty: Vec<&str> = present.iter().map(|&i| patterns[i]).collect();
                for (i, span) in find_first_by_automaton(&nonempty, normalized.as_str(), &mut Work::for_input(normalized.as_str(), &nonempty)).into_iter().enumerate() {
                    expected[present[i]] = span;
                }
            }
            let (found, work) = set.find_first_counting(normalized.as_str());
            proptest::prop_assume!(!work.cut);
            proptest::prop_assert_eq!(found, expected);
        }

        #[test]
        fn the_work_is_bounded_by_the_input(
            summary in text(),
            anchors in proptest::collection::vec(text(), 1..24),
            repeat in 1usize..200,
        ) {
            // The summary repeated, so words recur many times, and anchors that share its words.
            let summary = summary.repeat(repeat);
            let mut set = AnchorSet::new();
            for anchor in &anchors {
                set.insert(anchor);
            }
            let (_, work) = set.find_first_counting(normalize(&summary).as_str());
            proptest::prop_assert!(within_bound(&set, &summary, work), "{work:?}");
        }
    }

    /// The most [`AnchorSet::find_first_counting`] may take: its budget for the walks and one
    /// for the matches, plus one step per byte of the summary for the automaton's pass and one
    /// per word for the index.
    fn within_bound(set: &AnchorSet, summary: &str, work: Work) -> bool {
        let text = normalize(summary);
        let patterns: usize = set.patterns().iter().map(|p| p.len()).sum();
        let input = (text.as_str().len() + patterns) as u64;
        work.budget == Work::PER_BYTE * (input + 1) && work.steps <= 2 * work.budget + 2 * input
    }

    #[test]
    fn anchors_whose_first_word_is_everywhere_and_which_are_nowhere_cost_linear_work() {
        // 100,000 occurrences of `a`, and 2,000 anchors of 40 `a`s and a word that never
        // occurs: walked occurrence by occurrence, 2 × 10^8 occurrences of about 80 bytes.
        let summary = "a ".repeat(100_000);
        let mut set = AnchorSet::new();
        for i in 0..2_000 {
            set.insert(&format!("{}x{i}", "a ".repeat(40)));
        }
        let (found, work) = set.find_first_counting(normalize(&summary).as_str());
        assert!(found.iter().all(Option::is_none));
        assert!(!work.cut, "the automaton decides them exactly: {work:?}");
        assert!(within_bound(&set, &summary, work), "{work:?}");
    }

    #[test]
    fn anchors_the_word_index_hands_over_past_its_budget_are_still_found() {
        // 2,000 anchors `anchor-N`, all present: each walks the occurrences of `anchor` up to its
        // own, about 2,000 × 1,000 × 12 bytes in all, well past the budget; the automaton finds
        // the rest exactly.
        let summary: String = (0..2_000).map(|i| format!("anchor-{i} ")).collect();
        let mut set = AnchorSet::new();
        let ids: Vec<AnchorId> = (0..2_000)
            .map(|i| set.insert(&format!("anchor-{i}")))
            .collect();
        let (found, work) = set.find_first_counting(normalize(&summary).as_str());
        assert!(!work.cut, "{work:?}");
        assert!(
            work.steps > work.budget,
            "the walks used their budget: {work:?}"
        );
        assert!(ids.iter().all(|&id| found[id].is_some()));
        assert!(within_bound(&set, &summary, work), "{work:?}");
    }

    #[test]
    fn past_its_budget_the_automaton_stops_and_what_it_has_not_found_is_absent() {
        // Anchors that start with punctuation go through the automaton; 60 of them end at
        // nearly every `$a` of the summary, and `$zz` is nowhere, so the pass would report
        // about 60 matches per 3 bytes to the end of the summary.
        let summary = "$a ".repeat(50_000);
        let mut set = AnchorSet::new();
        let ids: Vec<AnchorId> = (1..=60)
            .map(|n| set.insert(vec!["$a"; n].join(" ").as_str()))
            .collect();
        let absent = set.insert("$zz");
        let (found, work) = set.find_first_counting(normalize(&summary).as_str());
        assert!(work.cut, "{work:?}");
        assert!(within_bound(&set, &summary, work), "{work:?}");
        assert_eq!(found[absent], None);
        // What it found before the cut is where it is.
        assert_eq!(found[ids[0]], Some((0, 2)));
    }

    #[test]
    fn evidence_offsets_point_into_the_original_text() {
        let summary = "Réservation  ZFA04Y confirmed";
        let found = locate(&["zfa04y"], summary);
        assert_eq!(found.len(), 1);
        let chars: Vec<char> = summary.chars().collect();
        let slice: String = chars[found[0].start..found[0].end].iter().collect();
        assert_eq!(slice, "ZFA04Y");
    }
}

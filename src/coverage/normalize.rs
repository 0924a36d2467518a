//! Text normalization and word-boundary anchor matching.
//!
//! Both anchors and summaries go through the same [`normalize`]: Unicode NFKC, full case
//! folding, and every run of whitespace collapsed to one space (ends trimmed). Matching is done
//! on the normalized text, and a match counts only at word boundaries.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use foldhash::HashMap;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;

/// Normalized text plus, for each of its bytes, the range of original characters it came from,
/// so matches can be reported as character offsets into the text the client sent.
#[derive(Debug, Clone, Default)]
pub struct NormalizedText {
    text: String,
    origin: Vec<(u32, u32)>,
}

impl NormalizedText {
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Character range `[start, end)` in the original text for a byte range of this text.
    fn original_span(&self, start: usize, end: usize) -> (usize, usize) {
        (
            self.origin[start].0 as usize,
            self.origin[end - 1].1 as usize,
        )
    }
}

/// Normalizes `text` (NFKC, full case folding, whitespace runs collapsed, ends trimmed).
///
/// Normalization runs per cluster (a starter and the characters that combine with it), which
/// keeps the origin map exact; ASCII, the common case, takes a fast path.
pub fn normalize(text: &str) -> NormalizedText {
    let mut out = NormalizedText {
        text: String::with_capacity(text.len()),
        origin: Vec::with_capacity(text.len()),
    };
    let mut pending_space = false;
    let mut chars = text.chars().enumerate().peekable();
    let mut cluster = String::new();
    while let Some((index, c)) = chars.next() {
        let index = index as u32;
        let simple = c.is_ascii()
            && chars
                .peek()
                .is_none_or(|&(_, next)| !continues_cluster(next));
        if simple {
            if c.is_whitespace() {
                pending_space = true;
            } else {
                let origin = (index, index + 1);
                push_char(&mut out, &mut pending_space, c.to_ascii_lowercase(), origin);
            }
            continue;
        }
        cluster.clear();
        cluster.push(c);
        while let Some(&(_, next)) = chars.peek() {
            if !continues_cluster(next) {
                break;
            }
            cluster.push(next);
            chars.next();
        }
        let origin = (index, index + cluster.chars().count() as u32);
        let folded = caseless::default_case_fold_str(&cluster.nfkc().collect::<String>());
        for n in folded.nfkc() {
            if n.is_whitespace() {
                pending_space = true;
            } else {
                push_char(&mut out, &mut pending_space, n, origin);
            }
        }
    }
    out
}

/// [`normalize`] without the origin map, for anchors; ASCII-only text takes a shortcut.
pub fn normalize_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    normalize_text_into(text, &mut out);
    out
}

/// [`normalize_text`] into a reused buffer (cleared first).
fn normalize_text_into(text: &str, out: &mut String) {
    out.clear();
    if text.is_ascii() {
        for word in text
            .split(|c: char| c.is_whitespace())
            .filter(|w| !w.is_empty())
        {
            if !out.is_empty() {
                out.push(' ');
            }
            out.extend(word.chars().map(|c| c.to_ascii_lowercase()));
        }
        return;
    }
    out.push_str(&normalize(text).text);
}

fn push_char(out: &mut NormalizedText, pending_space: &mut bool, c: char, origin: (u32, u32)) {
    if std::mem::take(pending_space) && !out.text.is_empty() {
        out.text.push(' ');
        // The collapsed run ends just before this character.
        let before = origin.0.saturating_sub(1);
        out.origin.push((before, origin.0));
    }
    out.text.push(c);
    out.origin.extend(std::iter::repeat_n(origin, c.len_utf8()));
}

/// Characters that compose with what precedes them: combining marks and Hangul vowel/final jamo.
fn continues_cluster(c: char) -> bool {
    !c.is_ascii() && canonical_combining_class(c) != 0
        || ('\u{1160}'..='\u{11FF}').contains(&c)
        || ('\u{D7B0}'..='\u{D7FF}').contains(&c)
}

/// A letter, digit or combining mark: the characters a word boundary may not cut through.
pub(crate) fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    c.is_alphanumeric() || canonical_combining_class(c) != 0
}

fn at_word_boundary(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
}

/// A set of anchors, deduplicated after normalization, all searched for in one go.
#[derive(Debug)]
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
        Self::with_capacity(0)
    }

    /// Room for `anchors` distinct anchors without growing.
    pub fn with_capacity(anchors: usize) -> Self {
        Self {
            by_normalized: HashMap::with_capacity_and_hasher(anchors, Default::default()),
            scratch: String::new(),
        }
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

    pub fn len(&self) -> usize {
        self.by_normalized.len()
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
    /// constant time; the others go through one Aho-Corasick pass.
    pub fn find_first(&self, haystack: &NormalizedText) -> Vec<Option<(usize, usize)>> {
        let text = haystack.as_str();
        let patterns = self.patterns();
        let mut found = vec![None; patterns.len()];
        // Each distinct word's first occurrence, and from each occurrence the next of the same
        // word: one allocation for all, where a list per word would be one each.
        let words: Vec<(usize, usize)> = words(text).collect();
        let mut first_at: HashMap<&str, usize> = HashMap::default();
        let mut next_at = vec![usize::MAX; words.len()];
        for (i, &(start, end)) in words.iter().enumerate().rev() {
            if let Some(later) = first_at.insert(&text[start..end], i) {
                next_at[i] = later;
            }
        }
        let occurrences = |first: usize| {
            std::iter::successors(Some(first), |&i| {
                Some(next_at[i]).filter(|&n| n != usize::MAX)
            })
            .map(|i| words[i].0)
        };
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
            found[id] = first_at.get(first_word).and_then(|&first| {
                occurrences(first)
                    .map(|start| (start, start + pattern.len()))
                    .find(|&(start, end)| {
                        text[start..].starts_with(pattern) && at_word_boundary(text, start, end)
                    })
            });
        }
        if !others.is_empty() {
            let others_patterns: Vec<&str> = others.iter().map(|&id| patterns[id]).collect();
            for (i, span) in find_first_by_automaton(&others_patterns, text)
                .into_iter()
                .enumerate()
            {
                found[others[i]] = span;
            }
        }
        found
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

/// The first word-bounded occurrence of each (non-empty) pattern, by one Aho-Corasick pass.
fn find_first_by_automaton(patterns: &[&str], text: &str) -> Vec<Option<(usize, usize)>> {
    let mut found = vec![None; patterns.len()];
    let automaton = AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        // Built once per decision and used for one pass: construction time dominates.
        .kind(Some(AhoCorasickKind::NoncontiguousNFA))
        .build(patterns)
        .expect("anchor patterns are plain strings; building the automaton cannot fail");
    let mut remaining = patterns.len();
    for m in automaton.find_overlapping_iter(text) {
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

impl Default for AnchorSet {
    fn default() -> Self {
        Self::new()
    }
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
    fn whitespace_runs_collapse_and_ends_are_trimmed() {
        assert_eq!(normalize("  New \n\t YORK  ").as_str(), "new york");
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
                for (i, span) in find_first_by_automaton(&nonempty, normalized.as_str()).into_iter().enumerate() {
                    expected[present[i]] = span;
                }
            }
            proptest::prop_assert_eq!(set.find_first(&normalized), expected);
        }
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

//! A turn's term profile: its candidate anchors, best first, and the keys of every term it
//! contains. Computed once when the turn is appended and stored with it, so a decision over
//! thousands of turns reads a few bytes per turn instead of re-reading their content.
//!
//! Stored as bytes (the database never parses it), version 1:
//! `[1][n: u8] n × ([key: u32 LE][len: u16 LE][text][len: u16 LE][normalized text]) [terms: u32 LE …]`
//! (texts in UTF-8), the terms sorted ascending without repeats and including every candidate's
//! key. Everything in it can be computed again from the turn's content.

use super::terms::TermKey;

const VERSION: u8 = 1;

/// Most candidates a profile keeps.
pub const MAX_CANDIDATES: usize = 16;

/// A turn's profile, decoded: reading it cannot fail and costs no parsing.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct TermProfile {
    /// Every candidate's text and normalized text, back to back.
    text: String,
    /// Each candidate's text and normalized text as byte ranges of `text`, and its key, best
    /// first.
    candidates: Vec<([u16; 3], TermKey)>,
    /// Sorted, without repeats, holding every candidate's key.
    terms: Vec<TermKey>,
}

/// Why stored bytes are not a profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a term profile: {0}")]
pub struct ProfileError(&'static str);

/// A candidate anchor: its text as it occurs in the turn, that text normalized as the summary
/// matcher reads it, and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub text: &'a str,
    pub normalized: &'a str,
    pub key: TermKey,
}

impl TermProfile {
    /// A profile from its parts: `candidates` (text, normalized text, key) best first (at most
    /// [`MAX_CANDIDATES`] are kept), `terms` in any order; every candidate key is added to the
    /// terms.
    pub fn from_parts<'a, C>(candidates: C, terms: impl IntoIterator<Item = TermKey>) -> Self
    where
        C: IntoIterator<Item = (&'a str, &'a str, TermKey)>,
        C::IntoIter: Clone,
    {
        let candidates = candidates.into_iter().take(MAX_CANDIDATES);
        // Sized once (every appended turn gets a profile): the texts, back to back.
        let sizes = candidates
            .clone()
            .map(|(text, normalized, _)| text.len() + normalized.len());
        let mut profile = Self {
            terms: terms.into_iter().collect(),
            text: String::with_capacity(sizes.clone().sum()),
            candidates: Vec::with_capacity(sizes.count()),
        };
        for (text, normalized, key) in candidates {
            profile.push_candidate(text, normalized, key);
        }
        // A draft's terms arrive sorted and holding its candidates: no sort needed then.
        let complete = profile.terms.is_sorted_by(|a, b| a < b)
            && (profile.candidate_keys()).all(|key| profile.contains(key));
        if !complete {
            profile
                .terms
                .extend(profile.candidates.iter().map(|&(_, key)| key));
            profile.terms.sort_unstable();
            profile.terms.dedup();
        }
        profile
    }

    /// [`TermProfile::from_parts`], normalizing each candidate's text.
    pub fn new<'a>(
        candidates: impl IntoIterator<Item = (&'a str, TermKey)>,
        terms: impl IntoIterator<Item = TermKey>,
    ) -> Self {
        let candidates: Vec<(&str, String, TermKey)> = candidates
            .into_iter()
            .map(|(text, key)| (text, super::normalize::normalize_text(text), key))
            .collect();
        Self::from_parts(
            candidates.iter().map(|(t, n, k)| (*t, n.as_str(), *k)),
            terms,
        )
    }

    fn push_candidate(&mut self, text: &str, normalized: &str, key: TermKey) {
        // Candidates are at most 64 characters: 16 of them, twice, fit u16 offsets many times
        // over.
        let offset = |text: &String| u16::try_from(text.len()).expect("candidates fit u16 offsets");
        let start = offset(&self.text);
        self.text.push_str(text);
        let middle = offset(&self.text);
        self.text.push_str(normalized);
        let end = offset(&self.text);
        self.candidates.push(([start, middle, end], key));
    }

    /// The stored form (see the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write_bytes(&mut bytes);
        bytes
    }

    /// Appends the stored form to `out`: a batch's profiles can share one buffer.
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        out.push(self.candidates.len() as u8);
        for c in self.candidates() {
            out.extend_from_slice(&c.key.0.to_le_bytes());
            for text in [c.text, c.normalized] {
                out.extend_from_slice(&(text.len() as u16).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
        for key in &self.terms {
            out.extend_from_slice(&key.0.to_le_bytes());
        }
    }

    /// A profile read back from storage, checked once so that reading it never fails.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ProfileError> {
        let (&version, rest) = bytes.split_first().ok_or(ProfileError("empty"))?;
        if version != VERSION {
            return Err(ProfileError("unknown version"));
        }
        let (&n, mut rest) = rest.split_first().ok_or(ProfileError("truncated"))?;
        if usize::from(n) > MAX_CANDIDATES {
            return Err(ProfileError("too many candidates"));
        }
        let mut profile = Self::default();
        for _ in 0..n {
            let (head, tail) = rest
                .split_at_checked(4)
                .ok_or(ProfileError("truncated candidate"))?;
            let key = TermKey(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
            let (text, tail) = read_text(tail)?;
            let (normalized, tail) = read_text(tail)?;
            profile.push_candidate(text, normalized, key);
            rest = tail;
        }
        if rest.len() % 4 != 0 {
            return Err(ProfileError("terms are not whole keys"));
        }
        profile.terms = rest
            .chunks_exact(4)
            .map(|k| TermKey(u32::from_le_bytes([k[0], k[1], k[2], k[3]])))
            .collect();
        if !profile.terms.windows(2).all(|w| w[0] < w[1]) {
            return Err(ProfileError("terms are not sorted"));
        }
        // The count of turns sharing a candidate relies on its own turn holding it.
        if profile.candidates().any(|c| !profile.contains(c.key)) {
            return Err(ProfileError("a candidate is missing from the terms"));
        }
        Ok(profile)
    }

    /// The candidate anchors, best first.
    pub fn candidates(&self) -> impl ExactSizeIterator<Item = Candidate<'_>> + '_ {
        self.candidates.iter().map(|&entry| self.read(entry))
    }

    /// The candidates' keys, best first (cheaper than [`TermProfile::candidates`]).
    pub fn candidate_keys(&self) -> impl ExactSizeIterator<Item = TermKey> + '_ {
        self.candidates.iter().map(|&(_, key)| key)
    }

    /// The candidate at `index` (best first).
    pub fn candidate(&self, index: usize) -> Option<Candidate<'_>> {
        self.candidates.get(index).map(|&entry| self.read(entry))
    }

    fn read(&self, ([start, middle, end], key): ([u16; 3], TermKey)) -> Candidate<'_> {
        Candidate {
            text: &self.text[usize::from(start)..usize::from(middle)],
            normalized: &self.text[usize::from(middle)..usize::from(end)],
            key,
        }
    }

    pub fn candidate_count(&self) -> usize {
        self.candidates.len()
    }

    /// Whether the turn contains the term.
    pub fn contains(&self, key: TermKey) -> bool {
        self.terms.binary_search(&key).is_ok()
    }

    /// Every term key, ascending.
    pub fn terms(&self) -> &[TermKey] {
        &self.terms
    }
}

/// The texts of the candidates `mask` picks (bit i: candidate i) straight from stored bytes,
/// without decoding the rest: what reconstruct needs of a profile.
pub fn picked_candidates(bytes: &[u8], mask: u16) -> Result<Vec<String>, ProfileError> {
    let (&version, rest) = bytes.split_first().ok_or(ProfileError("empty"))?;
    if version != VERSION {
        return Err(ProfileError("unknown version"));
    }
    let (&n, mut rest) = rest.split_first().ok_or(ProfileError("truncated"))?;
    let mut picked = Vec::with_capacity(mask.count_ones() as usize);
    for i in 0..usize::from(n).min(MAX_CANDIDATES) {
        let tail = rest.get(4..).ok_or(ProfileError("truncated candidate"))?;
        let (text, tail) = read_text(tail)?;
        let (_, tail) = read_text(tail)?;
        if mask & (1 << i) != 0 {
            picked.push(text.to_owned());
        }
        rest = tail;
    }
    Ok(picked)
}

/// A `[len: u16 LE][UTF-8]` text and what follows it.
fn read_text(bytes: &[u8]) -> Result<(&str, &[u8]), ProfileError> {
    let (len, rest) = bytes
        .split_at_checked(2)
        .ok_or(ProfileError("truncated candidate"))?;
    let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
    let (text, rest) = rest
        .split_at_checked(len)
        .ok_or(ProfileError("truncated candidate text"))?;
    let text = std::str::from_utf8(text).map_err(|_| ProfileError("candidate is not UTF-8"))?;
    Ok((text, rest))
}

impl std::fmt::Debug for TermProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TermProfile")
            .field(
                "candidates",
                &self.candidates().map(|c| c.text).collect::<Vec<_>>(),
            )
            .field("terms", &self.terms.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_round_trips_through_its_bytes() {
        let profile = TermProfile::new(
            [("ZFA04Y", TermKey(7)), ("HAT170", TermKey(3))],
            [TermKey(9), TermKey(3), TermKey(1)],
        );
        let read = TermProfile::from_bytes(&profile.to_bytes()).unwrap();
        assert_eq!(read, profile);
        let candidates: Vec<_> = read.candidates().map(|c| (c.text, c.key.0)).collect();
        assert_eq!(candidates, [("ZFA04Y", 7), ("HAT170", 3)]);
        assert_eq!(
            read.terms().iter().map(|k| k.0).collect::<Vec<_>>(),
            [1, 3, 7, 9],
            "sorted, without repeats, holding the candidates' keys"
        );
        assert_eq!(
            picked_candidates(&profile.to_bytes(), 0b10).unwrap(),
            ["HAT170"],
            "what reconstruct reads"
        );
        for (key, held) in [
            (0, false),
            (1, true),
            (3, true),
            (5, false),
            (7, true),
            (9, true),
            (10, false),
        ] {
            assert_eq!(read.contains(TermKey(key)), held, "{key}");
        }
    }

    #[test]
    fn terms_are_kept_sorted_once_each_with_every_candidate_in_whatever_order_they_arrive() {
        let keys = |ks: &[u32]| ks.iter().map(|&k| TermKey(k)).collect::<Vec<_>>();
        for (candidate, terms, expected) in [
            (None, vec![1, 2, 3], vec![1, 2, 3]),
            (None, vec![3, 2, 1], vec![1, 2, 3]),
            (None, vec![5, 5], vec![5]),
            (None, vec![1, 1, 2], vec![1, 2]),
            (Some(4), vec![1, 2, 3], vec![1, 2, 3, 4]),
            (Some(2), vec![1, 2, 3], vec![1, 2, 3]),
            (Some(0), vec![], vec![0]),
        ] {
            let candidates = candidate.map(|k| ("ZFA04Y", TermKey(k)));
            let profile = TermProfile::new(candidates, keys(&terms));
            assert_eq!(profile.terms(), keys(&expected), "{candidate:?} {terms:?}");
        }
    }

    #[test]
    fn damaged_bytes_are_refused() {
        let good = TermProfile::new([("ZFA04Y", TermKey(7))], [TermKey(9)]).to_bytes();
        assert!(TermProfile::from_bytes(&good).is_ok());
        assert!(TermProfile::from_bytes(&[]).is_err());
        assert!(TermProfile::from_bytes(&[2, 0]).is_err(), "unknown version");
        assert!(
            TermProfile::from_bytes(&[1, 17]).is_err(),
            "more than 16 candidates"
        );
        assert!(TermProfile::from_bytes(&good[..good.len() - 1]).is_err());
        assert!(TermProfile::from_bytes(&good[..5]).is_err());
        let mut unsorted = vec![1, 0];
        unsorted.extend_from_slice(&9u32.to_le_bytes());
        unsorted.extend_from_slice(&3u32.to_le_bytes());
        assert!(TermProfile::from_bytes(&unsorted).is_err());
        let mut repeated = vec![1, 0];
        repeated.extend_from_slice(&9u32.to_le_bytes());
        repeated.extend_from_slice(&9u32.to_le_bytes());
        assert!(TermProfile::from_bytes(&repeated).is_err(), "a term twice");
        let mut orphan = vec![1, 1, 7, 0, 0, 0, 1, 0, b'x', 1, 0, b'x'];
        orphan.extend_from_slice(&9u32.to_le_bytes());
        assert!(
            TermProfile::from_bytes(&orphan).is_err(),
            "a candidate whose key is not among the terms"
        );
    }

    #[test]
    fn a_profile_prints_its_candidates_and_how_many_terms_it_holds() {
        let profile = TermProfile::new([("ZFA04Y", TermKey(7))], [TermKey(9)]);
        assert_eq!(
            format!("{profile:?}"),
            r#"TermProfile { candidates: ["ZFA04Y"], terms: 2 }"#
        );
    }

    #[test]
    fn at_most_sixteen_candidates_are_kept() {
        let texts: Vec<String> = (0..20).map(|i| format!("c{i}")).collect();
        let profile = TermProfile::new(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| (t.as_str(), TermKey(i as u32))),
            [],
        );
        assert_eq!(profile.candidate_count(), MAX_CANDIDATES);
        assert_eq!(profile.terms().len(), MAX_CANDIDATES);
        let read = TermProfile::from_bytes(&profile.to_bytes());
        assert_eq!(read, Ok(profile), "the most a profile holds is read back");
    }
}

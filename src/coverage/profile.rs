//! A turn's term profile: its candidate anchors, best first, and the keys of every term it
//! contains. Computed once when the turn is appended and stored with it, so a decision over
//! thousands of turns reads bytes instead of re-reading their content.
//!
//! Stored as bytes (the database never parses it), version 1:
//! `[1][n: u8] n × ([key: u32 LE][len: u16 LE][text: len bytes of UTF-8]) [terms: u32 LE …]`,
//! the terms sorted ascending without repeats and including every candidate's key. Everything in
//! it can be computed again from the turn's content.

use super::terms::TermKey;

const VERSION: u8 = 1;

/// Most candidates a profile keeps.
pub const MAX_CANDIDATES: usize = 16;

/// A validated profile; reading it cannot fail.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct TermProfile {
    bytes: Vec<u8>,
    /// Where the sorted term keys begin.
    terms_at: usize,
}

/// Why stored bytes are not a profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a term profile: {0}")]
pub struct ProfileError(&'static str);

/// A candidate anchor: its text as it occurs in the turn, and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub text: &'a str,
    pub key: TermKey,
}

impl TermProfile {
    /// A profile from its parts: `candidates` best first (at most [`MAX_CANDIDATES`] are kept),
    /// `terms` in any order; every candidate key is added to the terms.
    pub fn new<'a>(
        candidates: impl IntoIterator<Item = (&'a str, TermKey)>,
        terms: impl IntoIterator<Item = TermKey>,
    ) -> Self {
        let candidates: Vec<(&str, TermKey)> =
            candidates.into_iter().take(MAX_CANDIDATES).collect();
        let mut keys: Vec<TermKey> = terms.into_iter().collect();
        keys.extend(candidates.iter().map(|&(_, key)| key));
        keys.sort_unstable();
        keys.dedup();
        let mut bytes = Vec::with_capacity(2 + candidates.len() * 16 + keys.len() * 4);
        bytes.push(VERSION);
        bytes.push(candidates.len() as u8);
        for (text, key) in &candidates {
            // Candidates are at most 64 characters, so at most 256 bytes.
            let len = u16::try_from(text.len()).expect("a candidate is at most 256 bytes");
            bytes.extend_from_slice(&key.0.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(text.as_bytes());
        }
        let terms_at = bytes.len();
        for key in keys {
            bytes.extend_from_slice(&key.0.to_le_bytes());
        }
        Self { bytes, terms_at }
    }

    /// A profile read back from storage, checked once so that reading it never fails.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, ProfileError> {
        let (&version, rest) = bytes.split_first().ok_or(ProfileError("empty"))?;
        if version != VERSION {
            return Err(ProfileError("unknown version"));
        }
        let (&n, mut rest) = rest.split_first().ok_or(ProfileError("truncated"))?;
        for _ in 0..n {
            let (head, tail) = rest
                .split_at_checked(6)
                .ok_or(ProfileError("truncated candidate"))?;
            let len = usize::from(u16::from_le_bytes([head[4], head[5]]));
            let (text, tail) = tail
                .split_at_checked(len)
                .ok_or(ProfileError("truncated candidate text"))?;
            std::str::from_utf8(text).map_err(|_| ProfileError("candidate is not UTF-8"))?;
            rest = tail;
        }
        if rest.len() % 4 != 0 {
            return Err(ProfileError("terms are not whole keys"));
        }
        let profile = Self {
            terms_at: bytes.len() - rest.len(),
            bytes,
        };
        let terms: Vec<TermKey> = profile.terms().collect();
        if !terms.windows(2).all(|w| w[0] < w[1]) {
            return Err(ProfileError("terms are not sorted"));
        }
        // The count of turns sharing a candidate relies on its own turn holding it.
        if profile
            .candidates()
            .any(|c| terms.binary_search(&c.key).is_err())
        {
            return Err(ProfileError("a candidate is missing from the terms"));
        }
        Ok(profile)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The candidate anchors, best first.
    pub fn candidates(&self) -> impl Iterator<Item = Candidate<'_>> + '_ {
        let n = self.bytes.get(1).copied().unwrap_or(0);
        let mut at = 2;
        (0..n).map(move |_| {
            let b = &self.bytes[at..];
            let key = TermKey(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            let len = usize::from(u16::from_le_bytes([b[4], b[5]]));
            // Checked as UTF-8 by `from_bytes` or written from a `&str` by `new`.
            let text = std::str::from_utf8(&b[6..6 + len]).unwrap_or_default();
            at += 6 + len;
            Candidate { text, key }
        })
    }

    pub fn candidate_count(&self) -> usize {
        usize::from(self.bytes.get(1).copied().unwrap_or(0))
    }

    /// Whether the turn contains the term (binary search over the sorted keys).
    pub fn contains(&self, key: TermKey) -> bool {
        let terms = self.bytes.get(self.terms_at..).unwrap_or_default();
        let (mut low, mut high) = (0, terms.len() / 4);
        while low < high {
            let mid = (low + high) / 2;
            let k = &terms[mid * 4..mid * 4 + 4];
            match u32::from_le_bytes([k[0], k[1], k[2], k[3]]).cmp(&key.0) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }

    /// Every term key, ascending.
    pub fn terms(&self) -> impl Iterator<Item = TermKey> + '_ {
        self.bytes
            .get(self.terms_at..)
            .unwrap_or_default()
            .chunks_exact(4)
            .map(|k| TermKey(u32::from_le_bytes([k[0], k[1], k[2], k[3]])))
    }
}

impl std::fmt::Debug for TermProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TermProfile")
            .field(
                "candidates",
                &self.candidates().map(|c| c.text).collect::<Vec<_>>(),
            )
            .field("terms", &self.terms().count())
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
        let read = TermProfile::from_bytes(profile.as_bytes().to_vec()).unwrap();
        assert_eq!(read, profile);
        let candidates: Vec<_> = read.candidates().map(|c| (c.text, c.key.0)).collect();
        assert_eq!(candidates, [("ZFA04Y", 7), ("HAT170", 3)]);
        assert_eq!(
            read.terms().map(|k| k.0).collect::<Vec<_>>(),
            [1, 3, 7, 9],
            "sorted, without repeats, holding the candidates' keys"
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
    fn damaged_bytes_are_refused() {
        let good = TermProfile::new([("ZFA04Y", TermKey(7))], [TermKey(9)]).into_bytes();
        assert!(TermProfile::from_bytes(Vec::new()).is_err());
        assert!(
            TermProfile::from_bytes(vec![2, 0]).is_err(),
            "unknown version"
        );
        assert!(TermProfile::from_bytes(good[..good.len() - 1].to_vec()).is_err());
        assert!(TermProfile::from_bytes(good[..5].to_vec()).is_err());
        let mut unsorted = vec![1, 0];
        unsorted.extend_from_slice(&9u32.to_le_bytes());
        unsorted.extend_from_slice(&3u32.to_le_bytes());
        assert!(TermProfile::from_bytes(unsorted).is_err());
        let mut orphan = vec![1, 1, 7, 0, 0, 0, 1, 0, b'x'];
        orphan.extend_from_slice(&9u32.to_le_bytes());
        assert!(
            TermProfile::from_bytes(orphan).is_err(),
            "a candidate whose key is not among the terms"
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
        assert_eq!(profile.terms().count(), MAX_CANDIDATES);
    }
}

//! Term keys: what a turn contains, in a form that counts sharing cheaply (rule 2b).
//!
//! A derived anchor is evidence for a turn only if no other turn of the proposal's range
//! contains it, where "contains" means exactly what the summary matcher means: the anchor
//! occurs in the turn's normalized text at word boundaries. Each turn therefore keeps the keys of
//! every text a derived anchor could match in it: every run of word characters joined by
//! identifier punctuation, and every contiguous part of such a run that begins and ends on a word
//! (`src/store/mod.rs` holds `store`, `store/mod`, `mod.rs`, ...), up to [`MAX_KEY_CHARS`].
//!
//! Keys are 32-bit hashes of the normalized text. A collision can only make an anchor look
//! shared when it is not (a turn left uncovered that could have been covered); it can never make
//! a shared anchor look distinctive, so hashing never produces a false coverage claim.

use super::derive::{is_inner, is_stop_word, stop_words};
use super::normalize::{is_word_char, normalize_text};

/// A hash of a normalized term (see the module docs for why 32 bits are enough).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TermKey(pub u32);

/// Hashes a [`TermKey`] for hash maps: the key is a hash already, so one multiplication spreads
/// it over the bits a table looks at (far cheaper than hashing it again).
#[derive(Debug, Clone, Copy, Default)]
pub struct TermKeyHasher(u64);

impl std::hash::Hasher for TermKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (u64::from(n) | u64::from(n) << 32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A hash map keyed by term keys.
pub type TermKeyMap<V> =
    std::collections::HashMap<TermKey, V, std::hash::BuildHasherDefault<TermKeyHasher>>;

/// Longest term, in characters of the normalized text: longer texts are never anchors.
pub const MAX_KEY_CHARS: usize = 64;

/// Characters that join words inside one term: the identifier punctuation of the anchor
/// tokenizer, plus `,` (as in `1,250`).
pub const fn is_joining(c: char) -> bool {
    is_inner(c) || c == ','
}

/// The key of an already normalized text (FNV-1a, 64 bits folded to 32: stable across builds
/// and platforms, which matters because keys are stored).
pub fn key_of_normalized(text: &str) -> TermKey {
    let mut hash = Fnv::default();
    hash.write(text.as_bytes());
    hash.key()
}

/// FNV-1a over bytes fed in pieces: the terms that begin at one word share their prefix, so
/// each is hashed by extending the one before.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Hashes ASCII letters lower-cased: normalized text has no upper-case ASCII letter, so
    /// this changes nothing there and lets ASCII content be hashed without normalizing it.
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte.to_ascii_lowercase());
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn key(self) -> TermKey {
        TermKey((self.0 ^ (self.0 >> 32)) as u32)
    }
}

/// The normalized form and key of a candidate anchor, or `None` when the term index cannot
/// count it exactly (so it must never be a derived anchor): its normalized text is empty, longer
/// than [`MAX_KEY_CHARS`], does not begin and end with a word character, holds a character that
/// is neither a word character nor joining punctuation, or is a stop-word.
pub fn countable_key(anchor: &str) -> Option<(String, TermKey)> {
    let normalized = normalize_text(anchor);
    let key = countable_normalized(&normalized)?;
    Some((normalized, key))
}

/// The key of an already normalized text, when [`countable_key`] would give one.
pub fn countable_normalized(normalized: &str) -> Option<TermKey> {
    let chars = normalized.chars().count();
    let countable = (2..=MAX_KEY_CHARS).contains(&chars)
        && normalized.starts_with(is_word_char)
        && normalized.ends_with(is_word_char)
        && normalized.chars().all(|c| is_word_char(c) || is_joining(c))
        && !is_stop_word(normalized);
    countable.then(|| key_of_normalized(normalized))
}

/// The keys of every term of `content`, sorted and without repeats.
///
/// Linear in the content's length: each word starts at most [`MAX_KEY_CHARS`] terms.
pub fn term_keys(content: &str) -> Vec<TermKey> {
    let mut keys = Vec::with_capacity(content.len() / 4);
    if content.is_ascii() {
        // Normalizing ASCII only lower-cases it and collapses whitespace, and no term holds
        // whitespace: the terms are those of the content itself, hashed lower-cased, with no
        // normalized copy to write.
        ascii_term_keys(content, &mut keys);
    } else {
        for_each_term(&normalize_text(content), true, |_, key| keys.push(key));
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Every term of an already normalized text (a summary), by key: a countable anchor is in the
/// text at word boundaries exactly when its key maps to its normalized form. Of terms that share
/// a key only the first is kept, so a collision can only make a present anchor look absent.
pub fn terms_by_key(text: &str) -> TermKeyMap<&str> {
    let mut terms = TermKeyMap::with_capacity_and_hasher(text.len() / 8, Default::default());
    // Lone words that cannot be anchors would never be looked up: no need to leave them out.
    for_each_term(text, false, |term, key| {
        terms.entry(key).or_insert(term);
    });
    terms
}

/// Calls `f` with every term of the normalized `text` (see the module docs) and its key; with
/// `compact`, not with lone words that can never be anchors.
fn for_each_term<'t>(text: &'t str, compact: bool, f: impl FnMut(&'t str, TermKey)) {
    if text.is_ascii() {
        // A byte is a character: no decoding (most content is ASCII).
        let chars = text
            .bytes()
            .enumerate()
            .map(|(i, b)| (i, (i, char::from(b))));
        terms_of_chars(text, chars, compact, f);
    } else {
        terms_of_chars(text, text.char_indices().enumerate(), compact, f);
    }
}

/// How the term scan treats an ASCII byte.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Word,
    Joining,
    Breaking,
}

/// Every ASCII byte's [`Class`] (the bytes of `is_word_char` and `is_joining`).
const ASCII_CLASSES: [Class; 128] = {
    let mut classes = [Class::Breaking; 128];
    let mut b = 0;
    while b < 128 {
        classes[b] = ascii_class(b as u8 as char);
        b += 1;
    }
    classes
};

const fn ascii_class(c: char) -> Class {
    if c.is_ascii_alphanumeric() {
        Class::Word
    } else if is_joining(c) {
        Class::Joining
    } else {
        Class::Breaking
    }
}

/// [`for_each_term`] of ASCII `text` with `compact`, keys only: a byte's class comes from a
/// table, and a run of one word (most runs) is hashed and checked without a list of its words.
/// A turn's keys are computed for every turn appended.
fn ascii_term_keys(text: &str, keys: &mut Vec<TermKey>) {
    let mut words: Vec<Word> = Vec::new();
    let mut word_start = None;
    let word = |start: usize, end: usize| Word {
        start,
        end,
        first_char: start,
        last_char: end - 1,
    };
    for (i, &b) in text.as_bytes().iter().enumerate() {
        let class = ASCII_CLASSES[usize::from(b & 0x7f)];
        if class == Class::Word {
            word_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = word_start.take() {
            words.push(word(start, i));
        }
        if class == Class::Breaking {
            ascii_run_keys(text, &words, keys);
            words.clear();
        }
    }
    if let Some(start) = word_start {
        words.push(word(start, text.len()));
    }
    ascii_run_keys(text, &words, keys);
}

fn ascii_run_keys(text: &str, words: &[Word], keys: &mut Vec<TermKey>) {
    // A lone word is run_terms' case of one word, taken without its loops.
    if let [word] = words {
        let term = &text.as_bytes()[word.start..word.end];
        if (2..=MAX_KEY_CHARS).contains(&term.len()) && !stop_words::is_ascii_stop_word(term) {
            let mut hash = Fnv::default();
            hash.write(term);
            keys.push(hash.key());
        }
    } else {
        run_terms(text, words, true, &mut |_, key| keys.push(key));
    }
}

/// [`for_each_term`] over `text`'s characters, each with its character and byte offsets.
fn terms_of_chars<'t>(
    text: &'t str,
    chars: impl Iterator<Item = (usize, (usize, char))>,
    compact: bool,
    mut f: impl FnMut(&'t str, TermKey),
) {
    // The current run of joined words: each word's byte range and character offset.
    let mut words: Vec<Word> = Vec::new();
    let mut in_word = false;
    for (char_index, (byte, c)) in chars {
        if is_word_char(c) {
            if !in_word {
                words.push(Word {
                    start: byte,
                    end: byte,
                    first_char: char_index,
                    last_char: char_index,
                });
                in_word = true;
            }
            let word = words.last_mut().expect("a word was just started");
            word.end = byte + c.len_utf8();
            word.last_char = char_index;
        } else {
            in_word = false;
            if !is_joining(c) {
                run_terms(text, &words, compact, &mut f);
                words.clear();
            }
        }
    }
    run_terms(text, &words, compact, &mut f);
}

#[derive(Debug, Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
    first_char: usize,
    last_char: usize,
}

/// Every contiguous run of `words` (one joined run of the text) short enough to be an anchor.
fn run_terms<'t>(
    text: &'t str,
    words: &[Word],
    compact: bool,
    f: &mut impl FnMut(&'t str, TermKey),
) {
    for (i, first) in words.iter().enumerate() {
        let (mut hash, mut hashed) = (Fnv::default(), first.start);
        for last in &words[i..] {
            if last.last_char + 1 - first.first_char > MAX_KEY_CHARS {
                break;
            }
            hash.write(&text.as_bytes()[hashed..last.end]);
            hashed = last.end;
            let term = &text[first.start..last.end];
            // Lone words that can never be anchors are left out to keep the index small.
            if compact
                && first.start == last.start
                && (first.last_char == first.first_char || is_stop_word(term))
            {
                continue;
            }
            f(term, hash.key());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hasher};

    #[test]
    fn the_term_key_hasher_hashes_distinct_keys_and_byte_strings_apart() {
        // A constant hash would leave every map right but slow: what it is for is spreading.
        let build = std::hash::BuildHasherDefault::<TermKeyHasher>::default();
        let hashes: std::collections::HashSet<u64> =
            (0..10_000u32).map(|k| build.hash_one(TermKey(k))).collect();
        assert_eq!(hashes.len(), 10_000);
        let of_bytes = |bytes: &[u8]| {
            let mut h = TermKeyHasher::default();
            h.write(bytes);
            h.finish()
        };
        let byte_hashes: std::collections::HashSet<u64> =
            (0..=255u8).map(|b| of_bytes(&[b])).collect();
        assert_eq!(byte_hashes.len(), 256);
        assert_ne!(of_bytes(b"ab"), of_bytes(b"ba"));
    }

    fn has(content: &str, term: &str) -> bool {
        let key = key_of_normalized(&normalize_text(term));
        term_keys(content).binary_search(&key).is_ok()
    }

    #[test]
    fn a_term_is_at_most_the_key_length_long_counted_in_characters() {
        let sixty_four = format!("{}-{}", "a".repeat(40), "é".repeat(23));
        let sixty_five = format!("{}-{}", "a".repeat(40), "é".repeat(24));
        let eighty_one = format!("{}-{}", "a".repeat(40), "b".repeat(40));
        let (one_word_64, one_word_65) = ("a".repeat(64), "a".repeat(65));
        for (content, term, held) in [
            (&one_word_64, one_word_64.as_str(), true),
            (&one_word_65, one_word_65.as_str(), false),
            (&sixty_four, sixty_four.as_str(), true),
            (&sixty_five, sixty_five.as_str(), false),
            (&eighty_one, eighty_one.as_str(), false),
            (&eighty_one, &eighty_one[..40], true),
        ] {
            assert_eq!(
                has(content, term),
                held,
                "{} characters",
                term.chars().count()
            );
        }
    }

    #[test]
    fn lone_words_that_can_never_be_anchors_are_left_out_of_a_turns_terms() {
        let content = "x the cat, the-cat";
        for (term, held) in [
            ("x", false),
            ("the", false),
            ("cat", true),
            ("the-cat", true),
        ] {
            assert_eq!(has(content, term), held, "{term}");
        }
        // A summary's terms keep them: looking one up costs nothing, leaving it out a check.
        let summary = normalize_text(content);
        let keys = terms_by_key(&summary);
        assert!(
            ["x", "the", "cat", "the-cat"]
                .iter()
                .all(|t| keys.contains_key(&key_of_normalized(t)))
        );
    }

    #[test]
    fn every_word_bounded_part_of_a_joined_run_is_a_term() {
        let content = "See src/store/mod.rs, then v1.2 and mia_li_3668.";
        for term in [
            "src",
            "store",
            "src/store",
            "store/mod",
            "mod.rs",
            "src/store/mod.rs",
            "v1.2",
            "mia_li_3668",
            "li_3668",
            "3668",
        ] {
            assert!(has(content, term), "{term}");
        }
        assert!(!has(content, "tore"));
        assert!(!has(content, "rs, then"));
    }

    #[test]
    fn terms_are_normalized_like_the_summary_matcher() {
        assert!(has("Straße ZFA04Y", "STRASSE"));
        assert!(has("ﬁle", "file"));
        assert!(has("ZFA04Y", "zfa04y"));
    }

    #[test]
    fn stop_words_and_single_characters_are_not_countable() {
        assert!(countable_key("the").is_none());
        assert!(countable_key("x").is_none());
        assert!(countable_key("(v1)").is_none());
        assert!(
            countable_key("½").is_none(),
            "normalizes to 1⁄2: not joining punctuation"
        );
        assert!(countable_key("HAT170").is_some());
    }

    proptest::proptest! {
        /// ASCII content is hashed without being normalized first: its keys must be those of
        /// its normalized text, whatever its case, whitespace and punctuation.
        #[test]
        fn ascii_content_has_the_keys_of_its_normalized_text(
            content in "([A-Za-z0-9]{1,12}|the|The|ID|I|yourselves|[ \t\n\x0b\x0c\r]{1,3}|[_./:@#,+~%&=?'\"()-]){0,60}",
        ) {
            proptest::prop_assert_eq!(term_keys(&content), keys_of_normalized(&content));
        }
    }

    /// The keys of `content` the general way: normalized first, then scanned by characters.
    fn keys_of_normalized(content: &str) -> Vec<TermKey> {
        let mut keys = Vec::new();
        for_each_term(&normalize_text(content), true, |_, key| keys.push(key));
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    #[test]
    fn every_tau_bench_turn_has_the_keys_of_its_normalized_text() {
        use gatekeeper_tau_bench as tau_bench;
        let data = tau_bench::read_gz(&tau_bench::default_path()).expect("tau-bench data");
        for turn in data.iter().flat_map(|c| &c.turns) {
            let content = turn.text();
            assert_eq!(
                term_keys(&content),
                keys_of_normalized(&content),
                "{content}"
            );
        }
    }

    #[test]
    fn keys_are_stable_across_builds() {
        // Stored in the database: a change here would need a data migration.
        assert_eq!(key_of_normalized("zfa04y"), TermKey(0x28df_d65e));
    }
}

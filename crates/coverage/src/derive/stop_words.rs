//! The built-in English stop-word list: words that are never anchors.

use unicode_normalization::UnicodeNormalization;

/// Whether `word` is on the built-in English stop-word list (case-insensitive). Stop-words are
/// never anchors.
pub fn is_stop_word(word: &str) -> bool {
    if word.is_ascii() {
        TABLE.contains(word.as_bytes())
    } else {
        // Compatibility characters can fold into ASCII (the Kelvin sign is a `k`); the list is
        // ASCII, so anything else is not on it.
        let folded = fold(word);
        folded.is_ascii() && TABLE.contains(folded.as_bytes())
    }
}

/// [`is_stop_word`] of ASCII bytes.
pub(crate) fn is_ascii_stop_word(word: &[u8]) -> bool {
    TABLE.contains(word)
}

/// The list as an open-addressing table of its words, placed by a hash of a word's length and
/// first, second and last bytes: this runs for every word of every turn appended. A hash set
/// of strings was a quarter of the cost of a turn's term keys, and a table of words packed into
/// integers stalled on the copy that packed each word looked up. Built at compile time with
/// each word inline in its slot, so a probe is one load: a lazily built table of slices cost
/// two more (the table's address, then the word's bytes), 14 % of a turn's derivation.
struct WordTable {
    /// Each slot a listed word's bytes, then zeros, with its length in the last byte (0: empty).
    slots: [[u8; SLOT_BYTES]; SLOTS],
    /// A bit per hash of a word's length, first and last bytes, set for the listed words'. Most
    /// content words find theirs clear in these 1 KiB, which stay cached, and never touch the
    /// 16 KiB of slots, where their probe was a cache miss (a quarter of the lookup's time).
    sketch: [u64; SKETCH_WORDS],
}

/// The sketch's size in 64-bit words: 8,192 bits for about 350 words set.
const SKETCH_WORDS: usize = 128;

/// Twice the list's length or more, a power of two: probes are short.
const SLOTS: usize = 1024;

/// A slot holds a word of up to [`STOP_WORD_MAX_LEN`] bytes and its length.
const SLOT_BYTES: usize = 16;
const _: () = assert!(
    STOP_WORD_MAX_LEN < SLOT_BYTES,
    "a word and its length fit a slot"
);

static TABLE: WordTable = WordTable::new(STOP_WORDS);

impl WordTable {
    /// The home slot of an ASCII word, case-insensitive; `None` for words longer than any
    /// listed one (most content words), which are not looked up at all.
    const fn slot(word: &[u8]) -> Option<usize> {
        let Some((first, last)) = Self::ends(word) else {
            return None;
        };
        let second = if word.len() > 1 { word[1] } else { 0 };
        let mixed = (word.len() as u64
            | first << 8
            | (second.to_ascii_lowercase() as u64) << 16
            | last << 24)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Some((mixed >> (64 - SLOTS.trailing_zeros())) as usize)
    }

    /// A word's bit in the sketch, case-insensitive (`None` as for [`Self::slot`]).
    const fn sketch_bit(word: &[u8]) -> Option<usize> {
        let Some((first, last)) = Self::ends(word) else {
            return None;
        };
        let mixed =
            (word.len() as u64 | first << 8 | last << 16).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Some((mixed >> (64 - (SKETCH_WORDS * 64).trailing_zeros())) as usize)
    }

    /// A word's first and last bytes, lower-cased; `None` for a word that no listed one could
    /// equal (empty, or longer than any).
    const fn ends(word: &[u8]) -> Option<(u64, u64)> {
        match word {
            [first, .., last] | [first @ last] if word.len() <= STOP_WORD_MAX_LEN => Some((
                first.to_ascii_lowercase() as u64,
                last.to_ascii_lowercase() as u64,
            )),
            _ => None,
        }
    }

    const fn new(words: &[&str]) -> Self {
        let mut slots = [[0; SLOT_BYTES]; SLOTS];
        let mut sketch = [0; SKETCH_WORDS];
        let mut w = 0;
        while w < words.len() {
            let word = words[w].as_bytes();
            let Some(bit) = Self::sketch_bit(word) else {
                panic!("stop words fit the sketch");
            };
            sketch[bit / 64] |= 1 << (bit % 64);
            let Some(mut i) = Self::slot(word) else {
                panic!("stop words fit the table");
            };
            while slots[i][SLOT_BYTES - 1] != 0 {
                i = (i + 1) % SLOTS;
            }
            let mut b = 0;
            while b < word.len() {
                slots[i][b] = word[b];
                b += 1;
            }
            slots[i][SLOT_BYTES - 1] = word.len() as u8;
            w += 1;
        }
        Self { slots, sketch }
    }

    fn contains(&self, word: &[u8]) -> bool {
        let Some(bit) = Self::sketch_bit(word) else {
            return false;
        };
        if self.sketch[bit / 64] & (1 << (bit % 64)) == 0 {
            return false;
        }
        let Some(mut i) = Self::slot(word) else {
            return false;
        };
        // At most every slot, so that a table walked wrongly fails loudly rather than spinning.
        for _ in 0..SLOTS {
            let slot = &self.slots[i];
            match usize::from(slot[SLOT_BYTES - 1]) {
                0 => return false,
                len if len == word.len() && slot[..len].eq_ignore_ascii_case(word) => return true,
                _ => i = (i + 1) % SLOTS,
            }
        }
        unreachable!("a table at most half full has an empty slot on every probe sequence")
    }
}

/// NFKC + default case folding: the form the summary matcher compares in.
fn fold(text: &str) -> String {
    caseless::default_case_fold_str(&text.nfkc().collect::<String>())
}

/// The longest listed word ("themselves"); longer words skip the table.
const STOP_WORD_MAX_LEN: usize = 10;

/// Common English function words plus chat filler ("hi", "thanks", "ok") and generic words that
/// are capitalized without being names ("I", "ID"). Sorted, lower-case (binary search).
#[rustfmt::skip]
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "ago", "all", "almost", "already",
    "also", "although", "always", "am", "among", "an", "and", "another", "any", "anyone",
    "anything", "anyway", "are", "aren", "around", "as", "at", "away", "back", "be", "because",
    "been", "before", "being", "below", "best", "better", "between", "both", "but", "by",
    "can", "cannot", "could", "couldn", "d", "dear", "did", "didn", "do", "does", "doesn",
    "doing", "don", "done", "down", "dr", "during", "each", "eg", "either", "else", "enough",
    "etc", "even", "ever", "every", "everyone", "everything", "few", "first", "five", "for",
    "four", "from", "further", "get", "gets", "getting", "give", "go", "going", "good", "got",
    "great", "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "hello", "her",
    "here", "hers", "herself", "hey", "hi", "him", "himself", "his", "hmm", "how", "however",
    "i", "id", "ids", "ie", "if", "in", "into", "is", "isn", "it", "its", "itself", "just",
    "last", "least", "less", "let", "like", "ll", "m", "made", "make", "many", "may", "maybe",
    "me", "might", "mine", "more", "most", "mr", "mrs", "ms", "much", "must", "mustn", "my",
    "myself", "need", "needn", "neither", "never", "next", "no", "nobody", "none", "nor",
    "not", "nothing", "now", "o", "of", "off", "oh", "ok", "okay", "on", "once", "one", "only",
    "or", "other", "others", "otherwise", "ought", "our", "ours", "ourselves", "out", "over",
    "own", "per", "perhaps", "please", "pm", "quite", "rather", "re", "really", "s", "same",
    "says", "see", "seem", "seems", "several", "shall", "shan", "she", "should", "shouldn",
    "since", "so", "some", "someone", "something", "soon", "still", "such", "sure", "t",
    "than", "thank", "thanks", "that", "the", "their", "theirs", "them", "themselves", "then",
    "there", "therefore", "these", "they", "thing", "things", "this", "those", "though",
    "three", "through", "thus", "to", "today", "together", "tomorrow", "tonight", "too", "two",
    "um", "under", "unless", "until", "up", "upon", "us", "use", "used", "using", "ve", "very",
    "via", "was", "wasn", "way", "we", "well", "were", "weren", "what", "whatever", "when",
    "whenever", "where", "whether", "which", "while", "who", "whoever", "whom", "whose", "why",
    "will", "with", "within", "without", "won", "would", "wouldn", "yeah", "yes", "yesterday",
    "yet", "you", "your", "yours", "yourself", "yourselves",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_word_list_is_sorted_lower_case_and_fits_the_table() {
        // The table's length cut-off and its probes rely on these.
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(
            STOP_WORDS
                .iter()
                .all(|w| w.bytes().all(|b| b.is_ascii_lowercase()))
        );
        assert!(STOP_WORDS.iter().all(|w| w.len() <= STOP_WORD_MAX_LEN));
        assert!(STOP_WORDS.iter().any(|w| w.len() == STOP_WORD_MAX_LEN));
        assert!(SLOTS >= 2 * STOP_WORDS.len());
    }

    #[test]
    fn the_table_spreads_the_list_over_its_slots_so_probes_are_short() {
        let homes: std::collections::HashSet<usize> = STOP_WORDS
            .iter()
            .map(|w| WordTable::slot(w.as_bytes()).unwrap())
            .collect();
        assert!(
            homes.len() * 10 >= STOP_WORDS.len() * 8,
            "{} homes",
            homes.len()
        );
    }

    #[test]
    fn the_sketch_has_the_listed_words_bits_only_so_most_other_words_skip_the_table() {
        let bits: std::collections::HashSet<usize> = STOP_WORDS
            .iter()
            .map(|w| WordTable::sketch_bit(w.as_bytes()).unwrap())
            .collect();
        let set: u32 = TABLE.sketch.iter().map(|w| w.count_ones()).sum();
        assert_eq!(set as usize, bits.len());
        assert!(set as usize * 16 <= SKETCH_WORDS * 64, "{set} bits set");
        // Spread: words that differ in length, first or last letter seldom share a bit, so a
        // word not listed seldom finds one set.
        let shapes: std::collections::HashSet<(usize, u8, u8)> = STOP_WORDS
            .iter()
            .map(|w| (w.len(), w.as_bytes()[0], w.as_bytes()[w.len() - 1]))
            .collect();
        assert!(
            bits.len() * 10 >= shapes.len() * 9,
            "{} bits for {} shapes",
            bits.len(),
            shapes.len()
        );
    }

    #[test]
    fn every_listed_word_is_a_stop_word_in_any_case_and_nothing_else_is() {
        for word in STOP_WORDS {
            assert!(is_stop_word(word), "{word}");
            assert!(is_stop_word(&word.to_ascii_uppercase()), "{word}");
            // One letter more or less, or another last letter: not on the list (unless it is).
            for other in [format!("{word}x"), word[..word.len() - 1].to_string()] {
                assert_eq!(
                    is_stop_word(&other),
                    STOP_WORDS.contains(&other.as_str()),
                    "{other}"
                );
            }
        }
        for word in [
            "",
            "ZFA04Y",
            "the\0",
            "thee",
            "themselvesx",
            "a_very_long_word_indeed",
        ] {
            assert!(!is_stop_word(word), "{word:?}");
        }
        assert!(
            is_stop_word("\u{FF34}\u{FF28}\u{FF25}"),
            "full-width THE folds to the"
        );
        assert!(is_stop_word("\u{2160}"), "the Roman numeral one folds to i");
        assert!(
            !is_stop_word("\u{212A}"),
            "the Kelvin sign folds to k, which is not listed"
        );
    }
}

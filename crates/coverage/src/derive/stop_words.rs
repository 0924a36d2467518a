//! The built-in English stop-word list: words that are never anchors.

use unicode_normalization::UnicodeNormalization;

/// Whether `word` is on the built-in English stop-word list (case-insensitive). Stop-words are
/// never anchors.
pub fn is_stop_word(word: &str) -> bool {
    if word.is_ascii() {
        stop_words().contains(word.as_bytes())
    } else {
        // Compatibility characters can fold into ASCII (the Kelvin sign is a `k`); the list is
        // ASCII, so anything else is not on it.
        let folded = fold(word);
        folded.is_ascii() && stop_words().contains(folded.as_bytes())
    }
}

/// [`is_stop_word`] of ASCII bytes.
pub(crate) fn is_ascii_stop_word(word: &[u8]) -> bool {
    stop_words().contains(word)
}

/// The list as an open-addressing table of its words, placed by a hash of a word's length and
/// first, second and last bytes: this runs for every word of every turn appended. A hash set
/// of strings was a quarter of the cost of a turn's term keys, and a table of words packed into
/// integers stalled on the copy that packed each word looked up.
struct WordTable {
    slots: Box<[&'static [u8]; SLOTS]>,
}

/// Twice the list's length or more, a power of two: probes are short.
const SLOTS: usize = 1024;

impl WordTable {
    /// The home slot of an ASCII word, case-insensitive; `None` for words longer than any
    /// listed one (most content words), which are not looked up at all.
    fn slot(word: &[u8]) -> Option<usize> {
        let (&first, &last) = (word.first()?, word.last()?);
        if word.len() > STOP_WORD_MAX_LEN {
            return None;
        }
        let second = word.get(1).copied().unwrap_or(0);
        let bytes = [first, second, last].map(|b| u64::from(b.to_ascii_lowercase()));
        let mixed = (word.len() as u64 | bytes[0] << 8 | bytes[1] << 16 | bytes[2] << 24)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Some((mixed >> (64 - SLOTS.trailing_zeros())) as usize)
    }

    fn new(words: &[&'static str]) -> Self {
        let mut slots = Box::new([&[][..]; SLOTS]);
        for word in words {
            let mut i = Self::slot(word.as_bytes()).expect("stop words fit the table");
            while !slots[i].is_empty() {
                i = (i + 1) % SLOTS;
            }
            slots[i] = word.as_bytes();
        }
        Self { slots }
    }

    fn contains(&self, word: &[u8]) -> bool {
        let Some(mut i) = Self::slot(word) else {
            return false;
        };
        // At most every slot, so that a table walked wrongly fails loudly rather than spinning.
        for _ in 0..SLOTS {
            match self.slots[i] {
                [] => return false,
                listed if listed.eq_ignore_ascii_case(word) => return true,
                _ => i = (i + 1) % SLOTS,
            }
        }
        unreachable!("a table at most half full has an empty slot on every probe sequence")
    }
}

fn stop_words() -> &'static WordTable {
    static SET: std::sync::LazyLock<WordTable> =
        std::sync::LazyLock::new(|| WordTable::new(STOP_WORDS));
    &SET
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

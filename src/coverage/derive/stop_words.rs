//! The built-in English stop-word list: words that are never anchors.

use unicode_normalization::UnicodeNormalization;

/// Whether `word` is on the built-in English stop-word list (case-insensitive). Stop-words are
/// never anchors.
pub fn is_stop_word(word: &str) -> bool {
    if word.is_ascii() {
        // Lower-case on the stack: this runs for every candidate word.
        let mut buf = [0u8; STOP_WORD_MAX_LEN];
        let Some(lower) = buf.get_mut(..word.len()) else {
            return false;
        };
        lower.copy_from_slice(word.as_bytes());
        lower.make_ascii_lowercase();
        // The bytes are ASCII, so this cannot fail.
        let lower = std::str::from_utf8(lower).unwrap_or_default();
        stop_words().contains(lower)
    } else {
        // Compatibility characters can fold into ASCII (the Kelvin sign is a `k`).
        stop_words().contains(fold(word).as_str())
    }
}

/// The list as a hash set: this runs for every word of every turn appended (a binary search
/// of string comparisons was most of the cost of profiling a turn).
fn stop_words() -> &'static foldhash::HashSet<&'static str> {
    static SET: std::sync::LazyLock<foldhash::HashSet<&'static str>> =
        std::sync::LazyLock::new(|| STOP_WORDS.iter().copied().collect());
    &SET
}

/// NFKC + default case folding: the form the summary matcher compares in.
fn fold(text: &str) -> String {
    caseless::default_case_fold_str(&text.nfkc().collect::<String>())
}

const STOP_WORD_MAX_LEN: usize = 16;

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
    fn the_stop_word_list_is_sorted_lower_case_and_fits_the_buffer() {
        // Binary search and the stack buffer in `is_stop_word` rely on all three.
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(
            STOP_WORDS
                .iter()
                .all(|w| w.bytes().all(|b| b.is_ascii_lowercase()))
        );
        assert!(STOP_WORDS.iter().all(|w| w.len() <= STOP_WORD_MAX_LEN));
    }
}

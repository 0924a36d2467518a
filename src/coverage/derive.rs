//! Deterministic anchors for turns that arrive without any.
//!
//! An anchor is a distinctive token of a turn (an id, a number, a path, a name) that a summary
//! covering the turn must preserve. [`derive_anchors`] picks up to `max` of them, the same ones
//! every time for the same input, so the orchestrator can be told what to keep.
//!
//! Tokens are maximal runs of alphanumerics and the identifier punctuation
//! `_ . / : - @ \ # + ~ % & = ?` (plus `,` between digits, as in `1,250`), trimmed to begin and
//! end with an alphanumeric character: `(v1.2,` gives `v1.2`, `HAT123.` gives `HAT123`. Quotes,
//! brackets, apostrophes and the like separate tokens, so `{"user_id":"mia_li_3668"}` yields
//! `mia_li_3668` rather than one blob. Candidates are ranked by tier:
//!
//! 0. (JSON only) values of identifying keys (`id`, `*_id`, `*_number`, `*_code`, ...), the
//!    record's own before nested ones: a reservation record is known by its reservation code,
//!    not by its longest timestamp;
//! 1. tokens with digits, at least 3 characters (no `12`, no `3rd`): ids, numbers, dates, versions;
//! 2. identifiers with inner punctuation: paths, URLs, code symbols (`srv/app`, `get_user`);
//! 3. CamelCase or ALL-CAPS words of at least 2 letters (`HashMap`, `JFK`);
//! 4. Capitalized words that do not start a sentence or a line (`Alice` in "then Alice said").
//!
//! Within a tier longer tokens come first, ties by first occurrence. Stop-words
//! ([`is_stop_word`]) never qualify, duplicates are dropped comparing NFKC + case folded text
//! (as the matcher does), and tokens longer than [`MAX_ANCHOR_CHARS`] are skipped. Every anchor
//! occurs verbatim in the content and begins and ends with an alphanumeric character, so it
//! can be matched in a summary on word boundaries.
//!
//! JSON content (any [`AnchorSource::ToolOutput`], or prose whose trimmed text starts with `{`
//! or `[`) contributes its string and number values, never its keys; content that does not
//! parse as JSON is read as prose.
//!
//! Pure: no IO, no async, no service types.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use unicode_normalization::UnicodeNormalization;

/// How many anchors to derive for a turn when the caller does not say.
pub const DEFAULT_ANCHOR_COUNT: usize = 3;

/// Longer tokens are never anchors: a 300-character URL is a blob, not something a summary
/// should be asked to repeat.
pub const MAX_ANCHOR_CHARS: usize = 64;

/// What kind of text the anchors are derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorSource {
    /// System, user and assistant text.
    Prose,
    /// A tool result: JSON when it parses as JSON, otherwise prose.
    ToolOutput,
}

/// Up to `max` distinctive tokens of `content`, best first (see the module docs for the order).
/// A turn with nothing distinctive gets none.
pub fn derive_anchors(content: &str, source: AnchorSource, max: usize) -> Vec<String> {
    if max == 0 {
        return Vec::new();
    }
    let try_json = match source {
        AnchorSource::ToolOutput => true,
        AnchorSource::Prose => content.trim_start().starts_with(['{', '[']),
    };
    let candidates = match try_json.then(|| json_candidates(content)).flatten() {
        Some(candidates) => candidates,
        None => prose_candidates(content),
    };
    select(content, candidates, max)
}

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
        STOP_WORDS.binary_search(&lower).is_ok()
    } else {
        // Compatibility characters can fold into ASCII (the Kelvin sign is a `k`).
        STOP_WORDS.binary_search(&fold(word).as_str()).is_ok()
    }
}

/// Ranking tiers, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    IdentifyingValue,
    Digits,
    Punctuated,
    CasedWord,
    Capitalized,
}

/// Sort key: tier, then (identifying values only) nesting depth, longer first, first occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    tier: Tier,
    depth: u32,
    chars: Reverse<usize>,
    order: usize,
}

struct Candidate<'a> {
    rank: Rank,
    /// Borrowed text is a slice of the content; owned text (unescaped JSON strings, rendered
    /// numbers) must still be found in the content before it can be an anchor.
    text: Cow<'a, str>,
}

fn select(content: &str, mut candidates: Vec<Candidate<'_>>, max: usize) -> Vec<String> {
    // `order` makes every key distinct, so the unstable sort is deterministic.
    candidates.sort_unstable_by_key(|c| c.rank);
    let mut anchors = Vec::with_capacity(max.min(candidates.len()));
    let mut seen: Vec<String> = Vec::with_capacity(max.min(candidates.len()));
    for candidate in candidates {
        if anchors.len() == max {
            break;
        }
        if let Cow::Owned(text) = &candidate.text
            && !content.contains(text.as_str())
        {
            continue;
        }
        // Matched after NFKC, which can turn an alphanumeric end into punctuation (`㈠` is
        // `(一)`); such a token could not be matched on word boundaries.
        let normalized: String = candidate.text.nfkc().collect();
        if !normalized.starts_with(char::is_alphanumeric)
            || !normalized.ends_with(char::is_alphanumeric)
        {
            continue;
        }
        let key = caseless::default_case_fold_str(&normalized);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        anchors.push(candidate.text.into_owned());
    }
    anchors
}

/// NFKC + default case folding: the form the summary matcher compares in.
fn fold(text: &str) -> String {
    caseless::default_case_fold_str(&text.nfkc().collect::<String>())
}

// ---------------------------------------------------------------------------------------------
// Tokens

/// Punctuation that may occur inside a token (paths, URLs, versions, emails, code symbols).
fn is_inner(c: char) -> bool {
    matches!(
        c,
        '_' | '.' | '/' | ':' | '-' | '@' | '\\' | '#' | '+' | '~' | '%' | '&' | '=' | '?'
    )
}

fn is_terminal(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
}

fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// Calls `emit(start, end, starts_sentence)` for each token of `text`, as byte ranges.
/// `sentence_start` says whether the text itself begins a sentence.
fn scan(text: &str, mut sentence_start: bool, mut emit: impl FnMut(usize, usize, bool)) {
    let mut run_start: Option<usize> = None;
    let mut prev: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let in_run = c.is_alphanumeric()
            || is_inner(c)
            // `1,250` is one number, `a,b` two words.
            || (c == ',' && run_start.is_some() && prev.is_some_and(char::is_numeric)
                && chars.peek().is_some_and(|&(_, n)| n.is_numeric()));
        if in_run {
            run_start.get_or_insert(i);
        } else {
            if let Some(start) = run_start.take() {
                sentence_start = finish_run(text, start, i, sentence_start, &mut emit);
            }
            if is_line_break(c) || is_terminal(c) {
                sentence_start = true;
            }
        }
        prev = Some(c);
    }
    if let Some(start) = run_start {
        finish_run(text, start, text.len(), sentence_start, &mut emit);
    }
}

/// Trims the run `text[start..end]` to its alphanumeric core, emits it, and returns whether the
/// next token starts a sentence.
fn finish_run(
    text: &str,
    start: usize,
    end: usize,
    sentence_start: bool,
    emit: &mut impl FnMut(usize, usize, bool),
) -> bool {
    let run = &text[start..end];
    let Some(first) = run.find(char::is_alphanumeric) else {
        // Pure punctuation such as `...` or `-`.
        return sentence_start || run.contains(is_terminal);
    };
    let last = run
        .char_indices()
        .rev()
        .find(|&(_, c)| c.is_alphanumeric())
        .map_or(run.len(), |(i, c)| i + c.len_utf8());
    emit(start + first, start + last, sentence_start);
    run[last..].contains(is_terminal) && !is_abbreviation(&run[first..last])
}

/// Titles whose period does not end a sentence ("Mr. Smith").
fn is_abbreviation(token: &str) -> bool {
    ["mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs"]
        .iter()
        .any(|a| token.eq_ignore_ascii_case(a))
}

/// The tier of a token (already trimmed to alphanumeric ends), or `None` if it is not
/// distinctive.
fn classify(token: &str, sentence_start: bool) -> Option<Tier> {
    let chars = token.chars().count();
    if chars > MAX_ANCHOR_CHARS {
        return None;
    }
    if token.chars().any(char::is_numeric) {
        return (chars >= 3 && !is_short_ordinal(token)).then_some(Tier::Digits);
    }
    if token.chars().any(|c| !c.is_alphanumeric()) {
        return punctuated(token).then_some(Tier::Punctuated);
    }
    if chars < 2 || is_stop_word(token) {
        return None;
    }
    let upper = token.chars().filter(|c| c.is_uppercase()).count();
    let mut pairs = token.chars().zip(token.chars().skip(1));
    let camel = pairs.any(|(a, b)| a.is_lowercase() && b.is_uppercase());
    // ALL-CAPS (`JFK`), CamelCase (`HashMap`, `iPhone`) or capitals inside (`McDonald`, `JFKs`).
    if upper >= 2 || camel {
        return Some(Tier::CasedWord);
    }
    let capitalized = upper == 1 && token.chars().next().is_some_and(char::is_uppercase);
    (capitalized && !sentence_start).then_some(Tier::Capitalized)
}

/// `1st`, `22nd`: ordinals of one or two digits are as trivial as the bare numbers.
fn is_short_ordinal(token: &str) -> bool {
    let digits = token.bytes().take_while(u8::is_ascii_digit).count();
    let suffix = &token[digits..];
    (1..=2).contains(&digits)
        && ["st", "nd", "rd", "th"]
            .iter()
            .any(|s| suffix.eq_ignore_ascii_case(s))
}

/// Whether a token with inner punctuation (and no digits) is an identifier rather than prose
/// such as `e.g`, `and/or` or `round-trip`.
fn punctuated(token: &str) -> bool {
    let mut segments = token
        .split(|c: char| !c.is_alphanumeric())
        .filter(|s| !s.is_empty());
    if !segments.clone().any(|s| s.chars().nth(1).is_some()) {
        return false;
    }
    if segments.all(is_stop_word) {
        return false;
    }
    // A lower-case hyphenated compound is an English word, not an identifier.
    let only_hyphens = token.chars().all(|c| c.is_alphanumeric() || c == '-');
    !(only_hyphens && token.chars().all(|c| c == '-' || c.is_lowercase()))
}

fn prose_candidates(content: &str) -> Vec<Candidate<'_>> {
    let mut candidates = Vec::new();
    scan(content, true, |start, end, sentence_start| {
        let token = &content[start..end];
        if is_quoted_key(content, start, end) {
            return;
        }
        if let Some(tier) = classify(token, sentence_start) {
            candidates.push(Candidate {
                rank: Rank {
                    tier,
                    depth: 0,
                    chars: Reverse(token.chars().count()),
                    order: start,
                },
                text: Cow::Borrowed(token),
            });
        }
    });
    candidates
}

/// Whether `content[start..end]` is a JSON key (`"user_id":`) inside prose, such as a rendered
/// tool call: keys name fields, they do not identify anything.
fn is_quoted_key(content: &str, start: usize, end: usize) -> bool {
    content[..start].ends_with('"')
        && content[end..]
            .strip_prefix('"')
            .is_some_and(|rest| rest.trim_start().starts_with(':'))
}

// ---------------------------------------------------------------------------------------------
// JSON

/// The candidates from the values of `content` as JSON, or `None` if it is not JSON.
fn json_candidates(content: &str) -> Option<Vec<Candidate<'_>>> {
    let mut sink = JsonSink {
        candidates: Vec::new(),
        order: 0,
        spans: Vec::new(),
    };
    let mut de = serde_json::Deserializer::from_str(content);
    let walk = Walk {
        sink: &mut sink,
        ctx: Ctx {
            depth: 0,
            identifying: false,
        },
    };
    // serde_json's recursion limit turns absurdly deep input into an error (read as prose).
    walk.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(sink.candidates)
}

struct JsonSink<'a> {
    candidates: Vec<Candidate<'a>>,
    /// Tokens seen so far, in document order.
    order: usize,
    /// Scratch space for one value's token spans, reused across values.
    spans: Vec<(usize, usize, bool)>,
}

/// Where a value sits: how many objects enclose it and whether its key identifies a record.
#[derive(Clone, Copy)]
struct Ctx {
    depth: u32,
    identifying: bool,
}

impl<'a> JsonSink<'a> {
    fn value(&mut self, value: Cow<'a, str>, ctx: Ctx) {
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        // A short value inside a record is a label, so its capital letter is not a sentence
        // start ("Mia", "San Francisco"); a top-level string or a longer text is prose.
        let label = ctx.depth > 0 && value.split_whitespace().nth(LABEL_WORDS).is_none();
        scan(&value, !label, |s, e, start| spans.push((s, e, start)));
        let whole = spans.len() == 1;
        for &(start, end, sentence_start) in &spans {
            let token = &value[start..end];
            let tier = if ctx.identifying && whole && is_identifying_value(token) {
                Some(Tier::IdentifyingValue)
            } else {
                classify(token, sentence_start)
            };
            if let Some(tier) = tier {
                let text = match &value {
                    Cow::Borrowed(v) => Cow::Borrowed(&v[start..end]),
                    Cow::Owned(v) => Cow::Owned(v[start..end].to_owned()),
                };
                self.candidates.push(Candidate {
                    rank: Rank {
                        tier,
                        depth: if tier == Tier::IdentifyingValue {
                            ctx.depth
                        } else {
                            0
                        },
                        chars: Reverse(token.chars().count()),
                        order: self.order,
                    },
                    text,
                });
            }
            self.order += 1;
        }
        self.spans = spans;
    }
}

/// String values of up to this many words are labels (names, places, addresses).
const LABEL_WORDS: usize = 4;

fn is_identifying_value(token: &str) -> bool {
    (3..=MAX_ANCHOR_CHARS).contains(&token.chars().count()) && !is_stop_word(token)
}

/// `id`, `reservation_id`, `userId`, `flight_number`, `promo_code`, `order_ids`, ...
fn is_identifying_key(key: &str) -> bool {
    const WHOLE: [&str; 5] = ["id", "ids", "uuid", "code", "number"];
    const SNAKE: [&str; 6] = ["_id", "-id", "_ids", "_uuid", "_code", "_number"];
    const CAMEL: [&str; 5] = ["Id", "ID", "Ids", "Code", "Number"];
    // Case-insensitive suffix test without allocating: this runs for every key.
    let tail = |suffix: &str| {
        key.len()
            .checked_sub(suffix.len())
            .and_then(|at| key.get(at..))
            .is_some_and(|t| t.eq_ignore_ascii_case(suffix))
    };
    WHOLE.iter().any(|w| key.eq_ignore_ascii_case(w))
        || SNAKE.iter().any(|s| tail(s))
        || CAMEL
            .iter()
            .any(|s| key.ends_with(s) && key.len() > s.len())
}

/// Walks a JSON value in document order, feeding its strings and numbers to the sink.
struct Walk<'s, 'a> {
    sink: &'s mut JsonSink<'a>,
    ctx: Ctx,
}

impl<'a> DeserializeSeed<'a> for Walk<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'a>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'a> Visitor<'a> for Walk<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'a str) -> Result<(), E> {
        self.sink.value(Cow::Borrowed(v), self.ctx);
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        // Escaped in the source: the unescaped text may not occur verbatim (checked later).
        self.sink.value(Cow::Owned(v.to_owned()), self.ctx);
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.sink.value(Cow::Owned(v.to_string()), self.ctx);
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.sink.value(Cow::Owned(v.to_string()), self.ctx);
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        // serde_json's own rendering (`255.0`), which matches the usual source text.
        if let Some(n) = serde_json::Number::from_f64(v) {
            self.sink.value(Cow::Owned(n.to_string()), self.ctx);
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<S: SeqAccess<'a>>(self, mut seq: S) -> Result<(), S::Error> {
        // Arrays do not nest records: `[{..}, {..}]` lists records at the same depth, and the
        // elements of `reservation_ids` are as identifying as their key.
        let sink = self.sink;
        while seq
            .next_element_seed(Walk {
                sink: &mut *sink,
                ctx: self.ctx,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<M: MapAccess<'a>>(self, mut map: M) -> Result<(), M::Error> {
        let sink = self.sink;
        let depth = self.ctx.depth.saturating_add(1);
        while let Some(identifying) = map.next_key_seed(KeyIsIdentifying)? {
            map.next_value_seed(Walk {
                sink: &mut *sink,
                ctx: Ctx { depth, identifying },
            })?;
        }
        Ok(())
    }
}

/// Reads an object key only to classify it: keys are never anchors.
struct KeyIsIdentifying;

impl<'a> DeserializeSeed<'a> for KeyIsIdentifying {
    type Value = bool;

    fn deserialize<D: Deserializer<'a>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIsIdentifying {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(is_identifying_key(v))
    }
}

// ---------------------------------------------------------------------------------------------
// Stop-words

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

    #[test]
    fn identifying_keys_are_recognised_in_snake_and_camel_case() {
        for key in [
            "id",
            "reservation_id",
            "userId",
            "flight_number",
            "promo_code",
            "ID",
        ] {
            assert!(is_identifying_key(key), "{key}");
        }
        for key in ["origin", "paid", "valid", "android", "first_name"] {
            assert!(!is_identifying_key(key), "{key}");
        }
    }

    #[test]
    fn tokens_are_trimmed_to_alphanumeric_ends() {
        let text = "(v1.2, HAT123. \"quoted\" {\"user_id\":\"mia_li_3668\"} 1,250 a,b";
        let mut tokens = Vec::new();
        scan(text, true, |s, e, _| tokens.push(&text[s..e]));
        assert_eq!(
            tokens,
            [
                "v1.2",
                "HAT123",
                "quoted",
                "user_id",
                "mia_li_3668",
                "1,250",
                "a",
                "b"
            ]
        );
    }
}

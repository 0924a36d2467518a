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

use unicode_normalization::UnicodeNormalization;

/// JSON content: the values (never the keys) as candidates, identifying values first.
mod json;
/// The built-in English stop-word list.
mod stop_words;
/// Splitting text into tokens trimmed to alphanumeric ends.
mod tokens;

pub use stop_words::is_stop_word;

use json::json_candidates;
use tokens::scan;

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

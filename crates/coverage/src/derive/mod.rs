//! Deterministic anchors for turns that arrive without any.
//!
//! An anchor is a distinctive token of a turn (an id, a number, a path, a name, a rare word) that
//! a summary covering the turn must preserve. A turn's candidates are ranked by tier (below), then
//! [`rank_by_rarity`] puts first what earlier turns of the conversation did not already have, and
//! the decision (rule 2b) keeps only those no other turn of the proposal's range contains.
//! [`derive_anchors`] is the tier ranking alone, without plain words: what the service derived
//! before rule 2b, kept to recognise such anchors in turns stored then.
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
//! 4. Capitalized words that do not start a sentence or a line (`Alice` in "then Alice said");
//! 5. any other word of at least 3 characters that is not a stop-word (`honeymoon`, `Seattle`
//!    opening a sentence, `round-trip`).
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

use compact_str::CompactString;

use unicode_normalization::UnicodeNormalization;

/// JSON content: the values (never the keys) as candidates, identifying values first.
mod json;
/// Ranking candidates by rarity within the conversation (rule 2b).
mod rarity;
/// The built-in English stop-word list.
pub(crate) mod stop_words;
/// Splitting text into tokens trimmed to alphanumeric ends.
mod tokens;

pub use rarity::{Draft, rank_by_rarity};
pub use stop_words::is_stop_word;
pub(crate) use tokens::is_inner;

use json::json_candidates;
use tokens::scan;

/// How many anchors to derive for a turn when the caller does not say.
pub const DEFAULT_ANCHOR_COUNT: usize = 4;

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
    // Plain words are candidates for rule 2b only; this ranking predates them.
    let not_plain = |c: &Candidate<'_>| c.rank.tier != Tier::Word;
    ranked(content, candidates_of(content, source), not_plain, max)
        .into_iter()
        .map(|(c, _)| c.text.into_owned())
        .collect()
}

/// The candidates of `content`, before ranking.
fn candidates_of(content: &str, source: AnchorSource) -> Vec<Candidate<'_>> {
    let try_json = match source {
        AnchorSource::ToolOutput => true,
        AnchorSource::Prose => content.trim_start().starts_with(['{', '[']),
    };
    match try_json.then(|| json_candidates(content)).flatten() {
        Some(candidates) => candidates,
        None => prose_candidates(content),
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
    /// Any other content word of at least 3 characters (`honeymoon`, `Seattle` opening a
    /// sentence, `round-trip`): common words are ranked down by rarity, not by tier.
    Word,
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

/// The first `limit` candidates in rank order that `keep` accepts, each once (compared as the
/// matcher compares: NFKC + case folding), and only those that occur verbatim in the content
/// and can be matched on word boundaries; each with its match key.
fn ranked<'a>(
    content: &str,
    candidates: Vec<Candidate<'a>>,
    keep: impl Fn(&Candidate<'a>) -> bool,
    limit: usize,
) -> Vec<(Candidate<'a>, CompactString)> {
    ranked_counting(content, candidates, keep, limit, &mut 0)
}

/// Owned candidates (unescaped strings, rendered numbers) looked for in the content and not
/// found, after which no further owned candidate is looked for. Each look scans the content, so
/// without this bound a turn of many numbers written otherwise than serde renders them (`1e5`,
/// rendered `100000.0`) cost content × candidates: 6.3 s for 200,000 of them.
const MAX_VERBATIM_MISSES: usize = 32;

/// [`ranked`], counting in `scans` how many times the content was searched: at most
/// [`MAX_VERBATIM_MISSES`] + `limit`, since a candidate already kept is recognised before its
/// look, and every look either misses or keeps.
fn ranked_counting<'a>(
    content: &str,
    mut candidates: Vec<Candidate<'a>>,
    keep: impl Fn(&Candidate<'a>) -> bool,
    limit: usize,
    scans: &mut usize,
) -> Vec<(Candidate<'a>, CompactString)> {
    let mut misses = 0;
    let mut kept = Vec::with_capacity(limit.min(candidates.len()));
    let mut sorted = 0;
    for next in 0..candidates.len() {
        if kept.len() == limit {
            break;
        }
        if next == sorted {
            // A long turn has hundreds of candidates and keeps a few dozen: order a prefix,
            // and more only when it runs out. `order` makes every key distinct, so the
            // unstable sorts are deterministic.
            let rest = &mut candidates[sorted..];
            let take = rest.len().min(4 * limit.max(8));
            if take < rest.len() {
                rest.select_nth_unstable_by_key(take - 1, |c| c.rank);
            }
            rest[..take].sort_unstable_by_key(|c| c.rank);
            sorted += take;
        }
        let candidate = &candidates[next];
        if !keep(candidate) {
            continue;
        }
        let Some(key) = match_key(&candidate.text) else {
            continue;
        };
        if kept.iter().any(|(_, seen)| *seen == key) {
            continue;
        }
        if let Cow::Owned(text) = &candidate.text {
            if misses == MAX_VERBATIM_MISSES {
                continue;
            }
            *scans += 1;
            if !content.contains(text.as_str()) {
                misses += 1;
                continue;
            }
        }
        let text = std::mem::replace(&mut candidates[next].text, Cow::Borrowed(""));
        let rank = candidates[next].rank;
        kept.push((Candidate { rank, text }, key));
    }
    kept
}

/// A candidate as the matcher compares it (NFKC + case folding), or `None` when it could not be
/// matched on word boundaries.
fn match_key(text: &str) -> Option<CompactString> {
    if text.is_ascii() {
        // Trimmed to alphanumeric ends already; NFKC leaves ASCII as it is. Inline up to 24
        // bytes: every candidate considered gets a key, and a heap string each was a quarter
        // of an append's allocations.
        let mut key = CompactString::from(text);
        key.make_ascii_lowercase();
        return Some(key);
    }
    // Matched after NFKC, which can turn an alphanumeric end into punctuation (`㈠` is `(一)`);
    // such a token could not be matched on word boundaries.
    let normalized: String = text.nfkc().collect();
    (normalized.starts_with(char::is_alphanumeric) && normalized.ends_with(char::is_alphanumeric))
        .then(|| caseless::default_case_fold_str(&normalized).into())
}

/// The tier of a token (already trimmed to alphanumeric ends), or `None` if it is not
/// distinctive.
fn classify(token: &str, sentence_start: bool) -> Option<Tier> {
    tier_of(&Shape::of(token), token, sentence_start)
}

/// What [`classify`] reads of a token's characters, gathered in one pass.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    chars: usize,
    numeric: bool,
    /// Any character that is not alphanumeric (inner punctuation).
    punctuated: bool,
    upper: usize,
    /// A lower-case letter followed by an upper-case one.
    camel: bool,
    capitalized: bool,
}

impl Shape {
    fn of(token: &str) -> Self {
        if token.is_ascii() {
            // Every token is looked at, most of them ASCII: a byte's classes from a table, with
            // no branch per byte, are several times cheaper than the chars below (and agree
            // with them on ASCII).
            let bytes = token.as_bytes();
            let (mut any, mut upper, mut camel, mut after_lower) = (0, 0, 0, 0);
            for &b in bytes {
                let class = ASCII_SHAPES[usize::from(b & 0x7f)];
                any |= class;
                let is_upper = (class & UPPER) >> 1;
                upper += usize::from(is_upper);
                camel |= after_lower & is_upper;
                after_lower = (class & LOWER) >> 2;
            }
            return Self {
                chars: bytes.len(),
                numeric: any & DIGIT != 0,
                punctuated: any & OTHER != 0,
                upper,
                camel: camel != 0,
                capitalized: bytes.first().is_some_and(u8::is_ascii_uppercase),
            };
        }
        Self::of_chars(token)
    }

    fn of_chars(token: &str) -> Self {
        let mut pairs = token.chars().zip(token.chars().skip(1));
        Self {
            chars: token.chars().count(),
            numeric: token.chars().any(char::is_numeric),
            punctuated: token.chars().any(|c| !c.is_alphanumeric()),
            upper: token.chars().filter(|c| c.is_uppercase()).count(),
            camel: pairs.any(|(a, b)| a.is_lowercase() && b.is_uppercase()),
            capitalized: token.chars().next().is_some_and(char::is_uppercase),
        }
    }
}

/// An ASCII byte's class bits for [`Shape::of`].
const DIGIT: u8 = 1;
const UPPER: u8 = 2;
const LOWER: u8 = 4;
const OTHER: u8 = 8;

const ASCII_SHAPES: [u8; 128] = {
    let mut table = [OTHER; 128];
    let mut b = 0;
    while b < 128 {
        let byte = b as u8;
        table[b] = if byte.is_ascii_digit() {
            DIGIT
        } else if byte.is_ascii_uppercase() {
            UPPER
        } else if byte.is_ascii_lowercase() {
            LOWER
        } else {
            OTHER
        };
        b += 1;
    }
    table
};

fn tier_of(shape: &Shape, token: &str, sentence_start: bool) -> Option<Tier> {
    let chars = shape.chars;
    if chars > MAX_ANCHOR_CHARS {
        return None;
    }
    if shape.numeric {
        return (chars >= 3 && !is_short_ordinal(token)).then_some(Tier::Digits);
    }
    if shape.punctuated {
        return match punctuated(token) {
            Punctuated::Identifier => Some(Tier::Punctuated),
            // Inner punctuation between alphanumeric ends: 3 characters at least already.
            Punctuated::Compound => Some(Tier::Word),
            Punctuated::Prose => None,
        };
    }
    if chars < 2 || is_stop_word(token) {
        return None;
    }
    // ALL-CAPS (`JFK`), CamelCase (`HashMap`, `iPhone`) or capitals inside (`McDonald`, `JFKs`).
    if shape.upper >= 2 || shape.camel {
        return Some(Tier::CasedWord);
    }
    // One capital (two returned above), and it comes first.
    if shape.capitalized && !sentence_start {
        return Some(Tier::Capitalized);
    }
    (chars >= 3).then_some(Tier::Word)
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

/// What a token with inner punctuation (and no digits) is.
enum Punctuated {
    /// A path, URL or code symbol (`srv/app`, `get_user`).
    Identifier,
    /// A lower-case hyphenated compound: an English word (`round-trip`).
    Compound,
    /// Function words joined by punctuation (`e.g`, `and/or`).
    Prose,
}

fn punctuated(token: &str) -> Punctuated {
    let mut segments = token
        .split(|c: char| !c.is_alphanumeric())
        .filter(|s| !s.is_empty());
    if !segments.clone().any(|s| s.chars().nth(1).is_some()) || segments.all(is_stop_word) {
        return Punctuated::Prose;
    }
    let only_hyphens = token.chars().all(|c| c.is_alphanumeric() || c == '-');
    if only_hyphens && token.chars().all(|c| c == '-' || c.is_lowercase()) {
        Punctuated::Compound
    } else {
        Punctuated::Identifier
    }
}

fn prose_candidates(content: &str) -> Vec<Candidate<'_>> {
    let mut candidates = Vec::new();
    scan(content, true, |start, end, sentence_start| {
        let token = &content[start..end];
        if is_quoted_key(content, start, end) {
            return;
        }
        let shape = Shape::of(token);
        if let Some(tier) = tier_of(&shape, token, sentence_start) {
            candidates.push(Candidate {
                rank: Rank {
                    tier,
                    depth: 0,
                    chars: Reverse(shape.chars),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tiers(content: &str) -> Vec<(String, Tier)> {
        (candidates_of(content, AnchorSource::ToolOutput).into_iter())
            .map(|c| (c.text.into_owned(), c.rank.tier))
            .collect()
    }

    #[test]
    fn a_short_string_inside_a_record_is_a_label_and_a_top_level_one_is_prose() {
        let word = |t: &str, tier| (t.to_owned(), tier);
        assert_eq!(
            tiers(r#"{"city": "Seattle"}"#),
            [word("Seattle", Tier::Capitalized)]
        );
        assert_eq!(tiers(r#""Seattle""#), [word("Seattle", Tier::Word)]);
    }

    #[test]
    fn an_identifying_key_makes_identifying_values_only_of_values_that_could_be_anchors() {
        assert_eq!(tiers(r#"{"id": "ab", "code": "the"}"#), []);
        assert_eq!(
            tiers(r#"{"reservation_id": "ZFA04Y"}"#),
            [("ZFA04Y".to_owned(), Tier::IdentifyingValue)]
        );
    }

    #[test]
    fn equal_candidates_of_a_tool_output_keep_their_document_order() {
        // Codes between words of a worse tier, so the sort has to move them.
        let words = ["kilted", "mirage", "parole", "quarry", "ribbon", "saddle"];
        let items: Vec<String> = (100..160)
            .flat_map(|n| [format!("\"HAT{n}\""), format!("\"{}\"", words[n % 6])])
            .collect();
        let content = format!("[{}]", items.join(", "));
        let anchors = derive_anchors(&content, AnchorSource::ToolOutput, 16);
        let expected: Vec<String> = (100..116).map(|n| format!("HAT{n}")).collect();
        assert_eq!(anchors, expected);
    }

    #[test]
    fn the_best_candidates_of_a_long_turn_are_found_wherever_they_stand() {
        // Far more candidates than the first ordered prefix holds, the best ones last; and the
        // same with the prefix taken up by one code repeated, so the next is found past it.
        let words = ["kilted", "mirage", "parole", "quarry", "ribbon", "saddle"];
        let filler: Vec<String> = (0..300)
            .map(|n| format!("{}{}", words[n % 6], "s".repeat(n / 6)))
            .collect();
        let filler = filler.join(" ");
        let repeated = "HAT170 ".repeat(200);
        for content in [
            format!("{filler} HAT170 ZFA04Y"),
            format!("{repeated} {filler} ZFA04Y"),
        ] {
            for limit in [1, 2, 4, 16] {
                let anchors = ranked(&content, prose_candidates(&content), |_| true, limit);
                let texts: Vec<&str> = anchors.iter().map(|(c, _)| c.text.as_ref()).collect();
                let best = limit.min(2);
                assert_eq!(texts[..best], ["HAT170", "ZFA04Y"][..best], "limit {limit}");
                assert_eq!(texts.len(), limit);
            }
        }
    }

    #[test]
    fn tokens_fall_into_their_tiers_at_the_edges_of_each_rule() {
        let longest = "a".repeat(MAX_ANCHOR_CHARS);
        let too_long = "a".repeat(MAX_ANCHOR_CHARS + 1);
        let cases: &[(&str, &str, bool, Option<Tier>)] = &[
            (
                "as long as an anchor may be",
                &longest,
                false,
                Some(Tier::Word),
            ),
            ("one character too long", &too_long, false, None),
            (
                "a hyphenated compound is a word",
                "round-trip",
                false,
                Some(Tier::Word),
            ),
            (
                "capitals make it an identifier",
                "Wi-Fi",
                false,
                Some(Tier::Punctuated),
            ),
            ("one letter is never an anchor", "Q", false, None),
            (
                "two capitals are a cased word",
                "UK",
                false,
                Some(Tier::CasedWord),
            ),
            ("two lower-case letters are too short", "ox", false, None),
            (
                "a capital inside a sentence",
                "Seattle",
                false,
                Some(Tier::Capitalized),
            ),
            (
                "a capital opening a sentence is a word",
                "Seattle",
                true,
                Some(Tier::Word),
            ),
            (
                "a short capitalized word opening a sentence",
                "Jo",
                true,
                None,
            ),
            ("a plain word", "honeymoon", false, Some(Tier::Word)),
        ];
        for (name, token, sentence_start, tier) in cases {
            assert_eq!(classify(token, *sentence_start), *tier, "{name}: {token:?}");
        }
    }

    #[test]
    fn numbers_written_otherwise_than_rendered_are_looked_for_a_bounded_number_of_times() {
        // 20,000 numbers in exponent form: serde renders each `100000.0`, never in the content.
        let content = format!("[{}]", vec!["1e5"; 20_000].join(","));
        for limit in [4, 16, 32] {
            let mut scans = 0;
            let candidates = candidates_of(&content, AnchorSource::ToolOutput);
            assert!(candidates.len() >= 20_000, "{}", candidates.len());
            let kept = ranked_counting(&content, candidates, |_| true, limit, &mut scans);
            assert_eq!(kept.len(), 0, "limit {limit}");
            assert_eq!(scans, MAX_VERBATIM_MISSES, "limit {limit}");
        }
    }

    /// JSON arrays and objects of numbers written many ways (most render otherwise than written),
    /// identifiers and words: the inputs whose candidates must each be looked for in the content.
    fn tool_output() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let number = "(1e5|2E\\+3|0\\.50|1\\.0e-7|-0|100000\\.0|12345)";
        let value = prop_oneof![
            number,
            "\"[A-Za-z0-9_/.-]{1,12}\"",
            "\"(Rebook|flight|HAT170|Straße|cafe\u{301})\"",
        ];
        let array = |values: Vec<String>| format!("[{}]", values.join(","));
        prop_oneof![
            proptest::collection::vec(number, 0..300).prop_map(array),
            proptest::collection::vec(value.clone(), 0..300).prop_map(array),
            proptest::collection::vec(("[a-z_]{1,6}", value), 0..100).prop_map(|kv| {
                let fields: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}", fields.join(", "))
            }),
        ]
    }

    proptest::proptest! {
        /// The byte shortcut must read an ASCII token exactly as the character path does.
        #[test]
        fn an_ascii_token_has_the_shape_its_characters_give(token in "[ -~]{0,80}") {
            proptest::prop_assert_eq!(Shape::of(&token), Shape::of_chars(&token));
        }
    }

    proptest::proptest! {
        /// Each look scans the content once, so a bounded number of looks is linear time.
        #[test]
        fn derivation_looks_in_the_content_a_bounded_number_of_times(
            content in tool_output(),
            limit in 1usize..=32,
        ) {
            for source in [AnchorSource::ToolOutput, AnchorSource::Prose] {
                let candidates = candidates_of(&content, source);
                proptest::prop_assert!(candidates.len() <= content.len(), "{} candidates", candidates.len());
                let mut scans = 0;
                let kept = ranked_counting(&content, candidates, |_| true, limit, &mut scans);
                proptest::prop_assert!(kept.len() <= limit);
                proptest::prop_assert!(scans <= MAX_VERBATIM_MISSES + limit, "{scans} looks, limit {limit}");
            }
        }
    }

    #[test]
    fn a_number_written_many_times_otherwise_than_rendered_is_looked_for_once() {
        // Every `1e5` renders `100000.0`, found once at the end: the first look keeps it, and
        // the 19,999 others are recognised as kept without a look.
        let content = format!("[{},100000.0]", vec!["1e5"; 20_000].join(","));
        let mut scans = 0;
        let candidates = candidates_of(&content, AnchorSource::ToolOutput);
        assert!(candidates.len() >= 20_000, "{}", candidates.len());
        let kept = ranked_counting(&content, candidates, |_| true, 16, &mut scans);
        let kept: Vec<&str> = kept.iter().map(|(c, _)| c.text.as_ref()).collect();
        assert_eq!(kept, ["100000.0"]);
        assert_eq!(scans, 1);
    }
}

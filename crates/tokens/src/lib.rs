//! Token counting with tiktoken's vocabularies, exactly as tiktoken counts, built once per
//! process and shared.
//!
//! The vocabularies are the ones tiktoken-rs bundles (nothing is downloaded). tiktoken-rs
//! itself spent most of a count in its backtracking pre-tokenizer, and on every thread but the
//! first it was slower still (its regex caches are shared); so ASCII text, nearly all of it, is
//! cut into the same pieces by hand ([`pieces`]), and the pieces are merged by tiktoken's own
//! algorithm over a compact table of the ranks ([`vocabulary`]), each thread remembering the
//! counts of the short pieces it saw last ([`memo`]). Text with other characters goes through
//! tiktoken's regex. A [`TokenCounter`] is a tag and a `&'static` reference: building
//! one after the first is free and cloning it copies two words.

mod memo;
mod pieces;
mod vocabulary;

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use fancy_regex::Regex;
use serde::{Deserialize, Serialize};

use memo::Memo;
use pieces::Pattern;
use vocabulary::Vocabulary;

/// Which BPE vocabulary to count with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Tokenizer {
    /// GPT-4o, GPT-4.1, o-series and GPT-5 models.
    #[default]
    #[serde(rename = "o200k_base")]
    O200kBase,
    /// GPT-4 and GPT-3.5-turbo models.
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
}

impl Tokenizer {
    /// Every supported tokenizer.
    pub const ALL: [Tokenizer; 2] = [Tokenizer::O200kBase, Tokenizer::Cl100kBase];

    /// The tiktoken name, as accepted by [`FromStr`].
    pub const fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tokenizer name that is not one of [`Tokenizer::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tokenizer {0:?} (expected o200k_base or cl100k_base)")]
pub struct UnknownTokenizer(pub String);

impl FromStr for Tokenizer {
    type Err = UnknownTokenizer;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tokenizer::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownTokenizer(s.to_owned()))
    }
}

/// Whitespace runs longer than this many characters are cut before counting (see
/// [`TokenCounter::count`]). Far above anything real text holds, far below the ~1,000,000 at
/// which tiktoken's pre-tokenizer fails.
pub const MAX_WHITESPACE_RUN: usize = 1 << 16;

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `text` cut after every [`MAX_WHITESPACE_RUN`]th whitespace character in a row; the pieces
/// are never empty and together they are the text.
fn whitespace_cuts(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // Too short to hold such a run: the common case, no scan.
        let cut = if rest.len() < MAX_WHITESPACE_RUN {
            rest.len()
        } else {
            let mut run = 0;
            rest.char_indices()
                .find_map(|(i, c)| {
                    run = if c.is_whitespace() { run + 1 } else { 0 };
                    (run == MAX_WHITESPACE_RUN).then(|| i + c.len_utf8())
                })
                .unwrap_or(rest.len())
        };
        let (piece, after) = rest.split_at(cut);
        rest = after;
        Some(piece)
    })
}

/// Counts tokens. Cheap to clone; the encoder behind it is built once per process.
#[derive(Clone)]
pub struct TokenCounter {
    tokenizer: Tokenizer,
    encoder: &'static Encoder,
}

impl TokenCounter {
    /// The counter for `tokenizer`. The first call per tokenizer builds its encoder (about a
    /// tenth of a second); later calls reuse it.
    pub fn new(tokenizer: Tokenizer) -> Self {
        static O200K: OnceLock<Encoder> = OnceLock::new();
        static CL100K: OnceLock<Encoder> = OnceLock::new();
        let encoder = match tokenizer {
            Tokenizer::O200kBase => O200K.get_or_init(|| Encoder::new(tokenizer)),
            Tokenizer::Cl100kBase => CL100K.get_or_init(|| Encoder::new(tokenizer)),
        };
        Self { tokenizer, encoder }
    }

    /// The number of tokens in `text`, saturating at `u32::MAX`.
    ///
    /// Uses ordinary encoding: text that looks like a special token (`<|endoftext|>`) is
    /// counted as the plain text it is, as a model would see it in a user message.
    ///
    /// Never panics: tiktoken's pre-tokenizer (the regex that cuts text that is not ASCII) gives
    /// up on a run of about a million spaces, where tiktoken-rs panicked; so runs longer than
    /// [`MAX_WHITESPACE_RUN`] characters are cut and the pieces counted separately. Text
    /// without such a run is counted exactly; with one, the count may be off by a token per cut.
    pub fn count(&self, text: &str) -> u32 {
        saturate(
            whitespace_cuts(text)
                .map(|piece| self.encoder.count(piece))
                .fold(0, usize::saturating_add),
        )
    }

    /// Which tokenizer this counter uses.
    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        Self::new(Tokenizer::default())
    }
}

impl fmt::Debug for TokenCounter {
    // The encoder is megabytes of tables; its name is all that is worth printing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCounter")
            .field("tokenizer", &self.tokenizer)
            .finish()
    }
}

/// A vocabulary with its pattern: the hand-written cut for ASCII text, tiktoken's regex for the
/// rest.
struct Encoder {
    /// Tells this vocabulary's entries in the thread's [`Memo`] from the other's.
    id: u8,
    pattern: Pattern,
    regex: Regex,
    vocabulary: Vocabulary,
}

/// tiktoken's cl100k_base pattern, as tiktoken-rs builds it (it exports only o200k's).
const CL100K_BASE_PAT_STR: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

impl Encoder {
    /// Reads tiktoken-rs' vocabulary for `tokenizer` and keeps only its ranks: the tokens it
    /// decodes, rank by rank from 0 (the special tokens come after a gap and are never counted
    /// by ordinary encoding). Its own encoder is then dropped.
    fn new(tokenizer: Tokenizer) -> Self {
        let (core, pattern, regex) = match tokenizer {
            Tokenizer::O200kBase => (
                tiktoken_rs::o200k_base(),
                Pattern::O200k,
                tiktoken_rs::O200K_BASE_PAT_STR,
            ),
            Tokenizer::Cl100kBase => (
                tiktoken_rs::cl100k_base(),
                Pattern::Cl100k,
                CL100K_BASE_PAT_STR,
            ),
        };
        let core = core.expect("tiktoken-rs' bundled vocabulary");
        let vocabulary = Vocabulary::new((0..).map_while(|rank| core.decode_bytes(&[rank]).ok()));
        drop(core);
        Self {
            id: tokenizer as u8,
            pattern,
            regex: Regex::new(regex).expect("tiktoken's pattern"),
            vocabulary,
        }
    }

    /// Text with a few characters that are not ASCII (a summary with a dash or a name) takes
    /// the regex's way only for the stretches around them: a piece never spans a space that
    /// follows a visible ASCII character (no alternative of either pattern carries a letter,
    /// digit or symbol run on over a space, and none looks behind), so the text is cut there
    /// and each stretch counted alone.
    fn count(&self, text: &str) -> usize {
        MEMO.with_borrow_mut(|memo| {
            self.count_with(text, memo.get_or_insert_with(Memo::per_thread))
        })
    }

    fn count_with(&self, text: &str, memo: &mut Memo) -> usize {
        let bytes = text.as_bytes();
        if text.is_ascii() {
            return self.count_ascii(bytes, memo);
        }
        let is_cut = |at: usize| bytes[at] == b' ' && bytes[at - 1].is_ascii_graphic();
        let (mut count, mut start) = (0, 0);
        // Each pass ends past a byte that is not ASCII, so there are fewer passes than bytes;
        // the bound turns a pass that does not move on into a panic, not a loop.
        for _ in 0..=bytes.len() {
            let Some(first) = bytes[start..].iter().position(|b| !b.is_ascii()) else {
                return count + self.count_ascii(&bytes[start..], memo);
            };
            let first = start + first;
            let from = (start + 1..first)
                .rev()
                .find(|&at| is_cut(at))
                .unwrap_or(start);
            let to = (first..bytes.len())
                .find(|&at| is_cut(at))
                .unwrap_or(bytes.len());
            count += self.count_ascii(&bytes[start..from], memo)
                + self.count_by_regex(&text[from..to], memo);
            start = to;
        }
        unreachable!("a pass of the count did not move past a byte that is not ASCII")
    }

    fn count_ascii(&self, text: &[u8], memo: &mut Memo) -> usize {
        pieces::pieces(self.pattern, text)
            .map(|piece| self.count_piece(piece, memo))
            .sum()
    }

    fn count_by_regex(&self, text: &str, memo: &mut Memo) -> usize {
        let mut count = 0;
        for piece in self.regex.find_iter(text) {
            match piece {
                Ok(piece) => count += self.count_piece(piece.as_str().as_bytes(), memo),
                // The regex gave up (its backtracking limit), which text below
                // MAX_WHITESPACE_RUN does not reach: count a token a byte, more than any
                // encoding makes, so a summary never looks smaller than it is; tiktoken-rs
                // panicked.
                Err(_) => return text.len(),
            }
        }
        count
    }

    /// A piece's count: remembered, or the vocabulary's.
    fn count_piece(&self, piece: &[u8], memo: &mut Memo) -> usize {
        if piece.len() < 2 {
            return piece.len(); // every byte is a token: not worth a hash
        }
        memo.count(self.id, piece, |piece| self.vocabulary.count(piece))
    }
}

thread_local! {
    /// This thread's counts of the pieces it has seen (see [`memo`]).
    static MEMO: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fragments that reach every alternative of both patterns: letter runs of each case,
    /// contractions and near-misses, digit runs, symbols with and without a space before,
    /// line breaks after symbols and slashes, whitespace runs with and without line breaks,
    /// control characters; and long runs, so pieces of 100 bytes and more occur.
    fn ascii_text() -> impl Strategy<Value = String> {
        const FRAGMENTS: &[&str] = &[
            "a", "Z", "hello", "HELLO", "World", "JSONData", "'s", "'S", "'re", "'Ve", "'ll",
            "'LL", "'d", "'m", "'t", "'x", "'r", "'", "1", "23", "4567", " ", "  ", "   ", "\t",
            "\n", "\r\n", "\x0b", "\x0c", "\r", "/", "//", "!", "?!", ".", ", ", "-", "=>", "{\"",
            "}", "\x01", "\x7f", "_", " /", "\n/",
        ];
        prop::collection::vec(
            prop_oneof![
                8 => prop::sample::select(FRAGMENTS).prop_map(str::to_owned),
                1 => (prop::sample::select(&["abcdefghijklmnopqrstuvwxyz", "=+", " ", "ABCdef"][..]), 4..12usize)
                    .prop_map(|(s, n)| s.repeat(n)),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    /// The pieces tiktoken's regex cuts, with the regex the encoder already compiled.
    fn regex_pieces(tokenizer: Tokenizer, text: &str) -> Vec<String> {
        TokenCounter::new(tokenizer)
            .encoder
            .regex
            .find_iter(text)
            .map(|m| m.unwrap().as_str().to_owned())
            .collect()
    }

    fn hand_pieces(tokenizer: Tokenizer, text: &str) -> Vec<String> {
        let pattern = TokenCounter::new(tokenizer).encoder.pattern;
        pieces::pieces(pattern, text.as_bytes())
            .map(|p| String::from_utf8(p.to_vec()).unwrap())
            .collect()
    }

    proptest! {
        #[test]
        fn ascii_text_is_cut_into_the_pieces_tiktokens_regex_cuts(text in ascii_text()) {
            prop_assert_eq!(hand_pieces(Tokenizer::O200kBase, &text), regex_pieces(Tokenizer::O200kBase, &text));
            prop_assert_eq!(hand_pieces(Tokenizer::Cl100kBase, &text), regex_pieces(Tokenizer::Cl100kBase, &text));
        }

        #[test]
        fn any_ascii_bytes_are_cut_as_the_regex_cuts_them(text in "[\\x00-\\x7f]{0,200}") {
            prop_assert_eq!(hand_pieces(Tokenizer::O200kBase, &text), regex_pieces(Tokenizer::O200kBase, &text));
            prop_assert_eq!(hand_pieces(Tokenizer::Cl100kBase, &text), regex_pieces(Tokenizer::Cl100kBase, &text));
        }
    }

    #[test]
    fn whitespace_runs_are_cut_after_every_max_run_th_character_in_a_row() {
        const RUN: usize = MAX_WHITESPACE_RUN;
        let cuts = |text: &str| whitespace_cuts(text).map(str::len).collect::<Vec<_>>();
        assert_eq!(cuts(""), Vec::<usize>::new());
        assert_eq!(cuts("a b"), [3]);
        // A run one short of the limit, broken by a word, then another: no cut.
        let short = format!("{}x{}", " ".repeat(RUN - 1), " ".repeat(RUN - 1));
        assert_eq!(cuts(&short), [2 * RUN - 1]);
        // Exactly the limit at the end of the text: the cut leaves nothing after it.
        assert_eq!(cuts(&" ".repeat(RUN)), [RUN]);
        // Runs of two and three times the limit, of a three-byte space (U+3000) then of tabs;
        // each piece ends just after its run's RUN-th character.
        let text = format!(
            "ab{}c{}d",
            "\u{3000}".repeat(2 * RUN + 1),
            "\t".repeat(3 * RUN)
        );
        assert_eq!(
            cuts(&text),
            [2 + 3 * RUN, 3 * RUN, 3 + 1 + RUN, RUN, RUN, 1]
        );
        assert_eq!(whitespace_cuts(&text).collect::<String>(), text);
    }

    #[test]
    fn the_vocabularies_hold_every_ordinary_token_and_no_special_one() {
        let o200k = TokenCounter::new(Tokenizer::O200kBase).encoder;
        let cl100k = TokenCounter::new(Tokenizer::Cl100kBase).encoder;
        assert_eq!(o200k.vocabulary.len(), 199_998);
        assert_eq!(cl100k.vocabulary.len(), 100_256);
        for encoder in [o200k, cl100k] {
            assert_eq!(encoder.vocabulary.rank(b"<|endoftext|>"), None);
            assert!(encoder.vocabulary.rank(b" hello").is_some());
            encoder.vocabulary.assert_probes_are_short();
        }
    }
}

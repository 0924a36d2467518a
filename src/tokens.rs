//! Token counting with a real tokenizer (tiktoken), built once per process and shared.
//!
//! The encoders come from tiktoken-rs' process-wide singletons (their vocabularies are bundled
//! in the crate, nothing is downloaded), so a [`TokenCounter`] is a tag plus a `&'static`
//! reference: building one after the first is free and cloning it copies two words.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

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

/// Counts tokens. Cheap to clone; the encoder behind it is built once per process.
#[derive(Clone)]
pub struct TokenCounter {
    tokenizer: Tokenizer,
    bpe: &'static CoreBPE,
}

impl TokenCounter {
    /// The counter for `tokenizer`. The first call per tokenizer builds its encoder (tens of
    /// milliseconds); later calls reuse it.
    pub fn new(tokenizer: Tokenizer) -> Self {
        let bpe = match tokenizer {
            Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        Self { tokenizer, bpe }
    }

    /// The number of tokens in `text`, saturating at `u32::MAX`.
    ///
    /// Uses ordinary encoding: text that looks like a special token (`<|endoftext|>`) is
    /// counted as the plain text it is, as a model would see it in a user message.
    ///
    /// Never panics: tiktoken's pre-tokenizer gives up (and tiktoken-rs panics) on a run of
    /// about a million spaces, so runs longer than [`MAX_WHITESPACE_RUN`] characters are cut
    /// and the pieces counted separately. Text without such a run is counted exactly; with one,
    /// the count may be off by a token per cut.
    pub fn count(&self, text: &str) -> u32 {
        if text.len() < MAX_WHITESPACE_RUN {
            // Too short to hold a long run: the common case, no scan.
            return saturate(self.count_piece(text));
        }
        let mut total = 0usize;
        let mut start = 0;
        let mut run = 0;
        for (i, c) in text.char_indices() {
            if !c.is_whitespace() {
                run = 0;
                continue;
            }
            run += 1;
            if run == MAX_WHITESPACE_RUN {
                let cut = i + c.len_utf8();
                total = total.saturating_add(self.count_piece(&text[start..cut]));
                start = cut;
                run = 0;
            }
        }
        saturate(total.saturating_add(self.count_piece(&text[start..])))
    }

    fn count_piece(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.bpe.encode_ordinary(text).len()
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

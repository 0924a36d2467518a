//! Token counting with the real tiktoken vocabularies.

use gatekeeper_tau_bench as tau_bench;
use gatekeeper_tokens::{MAX_WHITESPACE_RUN, TokenCounter, Tokenizer};
use proptest::prelude::*;

fn o200k() -> TokenCounter {
    TokenCounter::new(Tokenizer::O200kBase)
}

fn cl100k() -> TokenCounter {
    TokenCounter::new(Tokenizer::Cl100kBase)
}

#[test]
fn known_strings_have_their_known_counts() {
    // Reference counts from OpenAI's "How to count tokens with tiktoken" cookbook.
    for counter in [o200k(), cl100k()] {
        assert_eq!(counter.count("hello world"), 2, "{counter:?}");
        assert_eq!(counter.count("tiktoken is great!"), 6, "{counter:?}");
        assert_eq!(
            counter.count("antidisestablishmentarianism"),
            6,
            "{counter:?}"
        );
        assert_eq!(counter.count("2 + 2 = 4"), 7, "{counter:?}");
    }
}

#[test]
fn cl100k_and_o200k_differ_on_some_text() {
    // o200k's larger vocabulary covers Japanese better (cookbook: 9 vs 8 tokens).
    assert_eq!(cl100k().count("お誕生日おめでとう"), 9);
    assert_eq!(o200k().count("お誕生日おめでとう"), 8);
}

#[test]
fn text_without_an_ascii_character_counts_as_tiktoken_counts_it() {
    // Several of tiktoken's pieces (letters, an emoji, punctuation, runs of no-break spaces),
    // none of them ASCII: the regex's way from the first byte to the last. The last two count a
    // token less when taken as one piece.
    for text in [
        "日本語😀Ünïcödé’—\u{3000}東京",
        "é\u{a0}\u{a0}٣мир…",
        "東京…\u{a0}\u{a0}１２ñ",
    ] {
        for tokenizer in Tokenizer::ALL {
            let counter = TokenCounter::new(tokenizer);
            assert_eq!(
                counter.count(text) as usize,
                tiktoken(tokenizer, text),
                "{tokenizer}: {text}"
            );
        }
    }
}

#[test]
fn the_empty_string_is_zero_tokens() {
    assert_eq!(o200k().count(""), 0);
    assert_eq!(cl100k().count(""), 0);
}

#[test]
fn special_token_text_is_counted_as_plain_text() {
    // Ordinary encoding: `<|endoftext|>` in a message is text, several tokens, never a panic.
    for counter in [o200k(), cl100k()] {
        assert!(counter.count("<|endoftext|>") > 1);
        assert!(counter.count("a <|im_start|>system<|im_end|> b <|fim_prefix|>") > 5);
    }
}

#[test]
fn a_million_spaces_are_counted_without_panicking() {
    // tiktoken-rs panics near 1,000,000 consecutive spaces on o200k; the counter cuts the run.
    for counter in [o200k(), cl100k()] {
        let spaces = " ".repeat(1_000_000);
        let n = counter.count(&spaces);
        assert!(n > 0 && n < 100_000, "{counter:?}: {n}");
        let tabs_between_words = format!("a{}b", "\t".repeat(3 * MAX_WHITESPACE_RUN));
        assert!(counter.count(&tabs_between_words) >= 3);
    }
}

#[test]
fn text_below_the_whitespace_run_limit_is_counted_exactly() {
    // Cutting only starts at a run of MAX_WHITESPACE_RUN: a long ordinary text is one piece.
    let text = "Hello there, how are you? ".repeat(5_000);
    assert!(text.len() > MAX_WHITESPACE_RUN);
    let reference = tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(&text)
        .len();
    assert_eq!(o200k().count(&text) as usize, reference);
}

/// tiktoken-rs' own count: the reference every count here must equal.
fn tiktoken(tokenizer: Tokenizer, text: &str) -> usize {
    match tokenizer {
        Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
    }
    .encode_ordinary(text)
    .len()
}

#[test]
fn every_tau_bench_turn_and_summary_sized_text_counts_as_tiktoken_counts_it() {
    let conversations = tau_bench::read_gz(&tau_bench::default_path()).expect("tau-bench data");
    let texts: Vec<String> = conversations
        .iter()
        .flat_map(|c| &c.turns)
        .map(|t| t.text().into_owned())
        .collect();
    // A summary-sized text: many turns joined, so long pieces and every kind of break occur.
    let joined = texts[..200].join("\n\n");
    for tokenizer in Tokenizer::ALL {
        let counter = TokenCounter::new(tokenizer);
        for text in texts.iter().chain([&joined]) {
            assert_eq!(
                counter.count(text) as usize,
                tiktoken(tokenizer, text),
                "{tokenizer}: {text:?}"
            );
        }
    }
    // The real data holds non-ASCII turns too (names, symbols), which take the regex's way.
    assert!(texts.iter().any(|t| !t.is_ascii()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn generated_text_counts_as_tiktoken_counts_it(
        parts in prop::collection::vec(prop_oneof![
            4 => "[ -~]{0,12}",
            2 => prop::sample::select(&[
                " ", "  ", "\t", "\n", "\r\n", "\n\n  ", "\x0b", "\x0c", "'s", "'RE", "'ll",
                "'", "/", "//", "=>", "JSONData", "HELLO", "1234567", "\u{a0}", "\u{85}", "é",
                "Ünïcödé", "日本語", "😀", "ǅungla", "ⅫⅫ", "\u{301}", "\u{3000}",
            ][..]).prop_map(str::to_owned),
            1 => ("[a-z=]{1,3}", 30..60usize).prop_map(|(s, n)| s.repeat(n)),
            1 => "\\PC{0,20}",
        ], 0..30),
    ) {
        let text = parts.concat();
        for tokenizer in Tokenizer::ALL {
            prop_assert_eq!(TokenCounter::new(tokenizer).count(&text) as usize, tiktoken(tokenizer, &text), "{}", tokenizer);
        }
    }

    /// Mostly ASCII words, symbols and spaces with a few characters that are not ASCII beside
    /// them (a dash, a name, a combining mark or a digit of another script after a space,
    /// punctuation before one, as in a summary's `a; b`): only the
    /// stretches around those take the regex's way, and the sum is still tiktoken's count.
    #[test]
    fn mostly_ascii_text_with_a_few_other_characters_counts_as_tiktoken_counts_it(
        parts in prop::collection::vec(prop_oneof![
            6 => "[a-zA-Z0-9]{1,8}",
            5 => prop::sample::select(&[
                " ", " ", "  ", ", ", ". ", "; ", "/ ", ") ", "\n", " '", "'s ", "'LL", "-", " \n ",
                "\t", ".\n ",
            ][..]).prop_map(str::to_owned),
            1 => prop::sample::select(&[
                "é", "—", "’", "\u{a0}", "\u{301}", "日本", "😀", "Ⅻ", "\u{3000}", "٣", "Ünï",
            ][..]).prop_map(str::to_owned),
        ], 0..80),
    ) {
        let text = parts.concat();
        for tokenizer in Tokenizer::ALL {
            prop_assert_eq!(TokenCounter::new(tokenizer).count(&text) as usize, tiktoken(tokenizer, &text), "{}", tokenizer);
        }
    }
}

#[test]
fn every_non_empty_tau_bench_turn_has_tokens() {
    let conversations = tau_bench::read_gz(&tau_bench::default_path()).expect("tau-bench data");
    let (o200k, cl100k) = (o200k(), cl100k());
    let mut total = 0u64;
    for turn in conversations.iter().flat_map(|c| &c.turns) {
        let text = turn.text();
        let n = o200k.count(&text);
        // Real turns are far below the whitespace-run cut: the count is tiktoken's own.
        let reference = tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(&text)
            .len();
        assert_eq!(n as usize, reference);
        assert_eq!(n == 0, text.is_empty(), "{text:?}");
        assert_eq!(cl100k.count(&text) == 0, text.is_empty(), "{text:?}");
        total += u64::from(n);
    }
    // 5,308 turns, most of them a sentence or a JSON record (the system prompt is ~2k tokens).
    assert!((500_000..5_000_000).contains(&total), "{total}");
}

#[test]
fn counts_are_deterministic_across_clones() {
    let counter = o200k();
    let clone = counter.clone();
    let text = "Your reservation JG7FMM is confirmed for 2024-05-21.";
    assert_eq!(counter.count(text), clone.count(text));
    assert_eq!(clone.tokenizer(), Tokenizer::O200kBase);
    assert_eq!(cl100k().clone().tokenizer(), Tokenizer::Cl100kBase);
}

#[test]
fn tokenizer_names_round_trip_through_from_str_display_and_serde() {
    for tokenizer in Tokenizer::ALL {
        let name = tokenizer.to_string();
        assert_eq!(name.parse::<Tokenizer>(), Ok(tokenizer));
        assert_eq!(
            serde_json::to_string(&tokenizer).unwrap(),
            format!("\"{name}\"")
        );
        assert_eq!(
            serde_json::from_str::<Tokenizer>(&format!("\"{name}\"")).unwrap(),
            tokenizer
        );
    }
    assert_eq!(Tokenizer::O200kBase.to_string(), "o200k_base");
    assert_eq!(Tokenizer::Cl100kBase.to_string(), "cl100k_base");
}

#[test]
fn an_unknown_tokenizer_name_is_an_error() {
    assert!("gpt2".parse::<Tokenizer>().is_err());
    assert!("O200K_BASE".parse::<Tokenizer>().is_err());
    assert!(serde_json::from_str::<Tokenizer>("\"p50k_base\"").is_err());
}

#[test]
fn the_default_tokenizer_is_o200k_base() {
    assert_eq!(Tokenizer::default(), Tokenizer::O200kBase);
    assert_eq!(TokenCounter::default().tokenizer(), Tokenizer::O200kBase);
}

#[test]
fn debug_output_names_only_the_tokenizer() {
    assert_eq!(
        format!("{:?}", cl100k()),
        "TokenCounter { tokenizer: Cl100kBase }"
    );
}

//! Tokens: maximal runs of alphanumerics and identifier punctuation, trimmed to alphanumeric
//! ends, with a note of whether each starts a sentence.

/// Punctuation that may occur inside a token (paths, URLs, versions, emails, code symbols).
pub(crate) const fn is_inner(c: char) -> bool {
    matches!(
        c,
        '_' | '.' | '/' | ':' | '-' | '@' | '\\' | '#' | '+' | '~' | '%' | '&' | '=' | '?'
    )
}

const fn is_terminal(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
}

const fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// Calls `emit(start, end, starts_sentence)` for each token of `text`, as byte ranges.
/// `sentence_start` says whether the text itself begins a sentence.
pub(super) fn scan(text: &str, sentence_start: bool, emit: impl FnMut(usize, usize, bool)) {
    // Every appended turn is scanned, and most are ASCII: bytes through a table are several
    // times cheaper than decoding chars and asking Unicode's tables (they agree on ASCII).
    if text.is_ascii() {
        scan_ascii(text.as_bytes(), sentence_start, emit);
    } else {
        scan_chars(text, sentence_start, emit);
    }
}

/// What [`scan`] makes of an ASCII byte.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Byte {
    /// Alphanumeric or inner punctuation: part of a run.
    Run,
    /// Part of a run between two digits (`1,250`).
    Comma,
    /// Ends a run and starts a sentence: a line break, or `!` (`.` and `?` are inner).
    Break,
    /// Ends a run.
    Other,
}

const ASCII_BYTES: [Byte; 128] = {
    let mut table = [Byte::Other; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8 as char;
        table[b] = if c.is_ascii_alphanumeric() || is_inner(c) {
            Byte::Run
        } else if c == ',' {
            Byte::Comma
        } else if is_line_break(c) || is_terminal(c) {
            Byte::Break
        } else {
            Byte::Other
        };
        b += 1;
    }
    table
};

/// [`scan`] of ASCII text.
fn scan_ascii(text: &[u8], mut sentence_start: bool, mut emit: impl FnMut(usize, usize, bool)) {
    let mut run_start: Option<usize> = None;
    for (i, &b) in text.iter().enumerate() {
        let class = ASCII_BYTES[usize::from(b & 0x7f)];
        let in_run = class == Byte::Run
            || (class == Byte::Comma
                && run_start.is_some()
                && text[i - 1].is_ascii_digit()
                && text.get(i + 1).is_some_and(u8::is_ascii_digit));
        if in_run {
            run_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = run_start.take() {
            sentence_start = finish_ascii_run(text, start, i, sentence_start, &mut emit);
        }
        if class == Byte::Break {
            sentence_start = true;
        }
    }
    if let Some(start) = run_start {
        finish_ascii_run(text, start, text.len(), sentence_start, &mut emit);
    }
}

/// [`finish_run`] of an ASCII run.
fn finish_ascii_run(
    text: &[u8],
    start: usize,
    end: usize,
    sentence_start: bool,
    emit: &mut impl FnMut(usize, usize, bool),
) -> bool {
    let run = &text[start..end];
    let terminal = |b: &u8| is_terminal(char::from(*b));
    let Some(first) = run.iter().position(u8::is_ascii_alphanumeric) else {
        return sentence_start || run.iter().any(terminal);
    };
    let last = run
        .iter()
        .rposition(u8::is_ascii_alphanumeric)
        .map_or(run.len(), |i| i + 1);
    emit(start + first, start + last, sentence_start);
    run[last..].iter().any(terminal) && !is_abbreviation(&run[first..last])
}

/// [`scan`] of any text, char by char.
fn scan_chars(text: &str, mut sentence_start: bool, mut emit: impl FnMut(usize, usize, bool)) {
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
    run[last..].contains(is_terminal) && !is_abbreviation(&run.as_bytes()[first..last])
}

/// Titles whose period does not end a sentence ("Mr. Smith").
fn is_abbreviation(token: &[u8]) -> bool {
    ["mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs"]
        .iter()
        .any(|a| token.eq_ignore_ascii_case(a.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan, as the test calls it: text, sentence start, emit.
    type Scan = fn(&str, bool, &mut dyn FnMut(usize, usize, bool));

    fn tokens_of(text: &str, scan: Scan) -> Vec<(usize, usize, bool)> {
        let mut seen = Vec::new();
        scan(text, true, &mut |s, e, start| seen.push((s, e, start)));
        seen
    }

    proptest::proptest! {
        #[test]
        fn ascii_text_scans_by_bytes_as_it_does_by_chars(
            text in "([a-zA-Z0-9]{1,4}|[ ,.!?\\n\\r_/:@#'\"(){}-]|Mr|vs|1,2|[\\x00-\\x7f]){0,40}"
        ) {
            let by_bytes = tokens_of(&text, |t, s, emit| scan_ascii(t.as_bytes(), s, emit));
            let by_chars = tokens_of(&text, |t, s, emit| scan_chars(t, s, emit));
            proptest::prop_assert_eq!(by_bytes, by_chars);
        }
    }

    #[test]
    fn a_run_of_pure_punctuation_passes_a_sentence_start_on_or_ends_a_sentence() {
        let starts = |text: &str| {
            let mut seen = Vec::new();
            scan(text, true, |s, e, start| {
                seen.push((text[s..e].to_owned(), start))
            });
            seen
        };
        let word = |w: &str, start| (w.to_owned(), start);
        assert_eq!(
            starts("Hello ... World"),
            [word("Hello", true), word("World", true)],
            "an ellipsis ends a sentence"
        );
        assert_eq!(
            starts("Hi. - Seattle - Boston"),
            [
                word("Hi", true),
                word("Seattle", true),
                word("Boston", false)
            ],
            "a dash after a sentence's end leaves it ended, and ends none itself"
        );
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

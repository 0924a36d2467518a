//! Tokens: maximal runs of alphanumerics and identifier punctuation, trimmed to alphanumeric
//! ends, with a note of whether each starts a sentence.

/// Punctuation that may occur inside a token (paths, URLs, versions, emails, code symbols).
pub(crate) const fn is_inner(c: char) -> bool {
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
pub(super) fn scan(text: &str, mut sentence_start: bool, mut emit: impl FnMut(usize, usize, bool)) {
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

#[cfg(test)]
mod tests {
    use super::*;

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

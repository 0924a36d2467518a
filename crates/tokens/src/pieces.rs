//! tiktoken's pre-tokenizer for ASCII text, by hand: the pieces its regex would cut.
//!
//! tiktoken splits text with a backtracking regex (fancy-regex) before byte-pair encoding each
//! piece; that split was most of what counting cost. On ASCII text each alternative of the
//! pattern reduces to runs of character classes, so the same pieces can be found in one pass.
//! Each function below names the alternative it stands for; tests compare the pieces with the
//! regex's on generated and real text. Text with any non-ASCII byte goes through the regex.

/// The two patterns, which differ in their contractions, letter runs and trailing whitespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    O200k,
    Cl100k,
}

/// `\s` on ASCII (Unicode White_Space: tab, line feed, vertical tab, form feed, CR, space).
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is_line_break(b: u8) -> bool {
    b == b'\r' || b == b'\n'
}

/// `[^\r\n\p{L}\p{N}]`: what may stand before a letter run.
fn is_lead(b: u8) -> bool {
    !is_line_break(b) && !b.is_ascii_alphanumeric()
}

/// `[^\s\p{L}\p{N}]`: punctuation and symbols.
fn is_symbol(b: u8) -> bool {
    !is_space(b) && !b.is_ascii_alphanumeric()
}

/// The end of the run of `class` that starts at `i`.
fn run_end(s: &[u8], i: usize, class: impl Fn(u8) -> bool) -> usize {
    i + s[i..].iter().take_while(|&&b| class(b)).count()
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i`: where it ends.
fn contraction(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'\'') {
        return None;
    }
    let lower = |k: usize| s.get(k).map(u8::to_ascii_lowercase);
    match lower(i + 1)? {
        b's' | b't' | b'm' | b'd' => Some(i + 2),
        b'r' | b'v' if lower(i + 2) == Some(b'e') => Some(i + 3),
        b'l' if lower(i + 2) == Some(b'l') => Some(i + 3),
        _ => None,
    }
}

/// A letter run with the one lead character before it, if there is one (both patterns' second
/// kind of piece). o200k: `[lead]?[Lu]*[Ll]+('s…)?|[lead]?[Lu]+[Ll]*('s…)?`, an upper-case run
/// and the lower-case run after it, so `JSONData` is `JSONData` and `HELLOworld` one piece;
/// cl100k: `[lead]?+\p{L}++`, every letter.
fn word(pattern: Pattern, s: &[u8], i: usize) -> Option<usize> {
    let start = if is_lead(s[i]) { i + 1 } else { i };
    if !s.get(start)?.is_ascii_alphabetic() {
        return None;
    }
    match pattern {
        Pattern::O200k => {
            let lower = run_end(s, run_end(s, start, |b| b.is_ascii_uppercase()), |b| {
                b.is_ascii_lowercase()
            });
            Some(contraction(s, lower).unwrap_or(lower))
        }
        Pattern::Cl100k => Some(run_end(s, start, |b| b.is_ascii_alphabetic())),
    }
}

/// `\p{N}{1,3}`.
fn digits(s: &[u8], i: usize) -> Option<usize> {
    s[i].is_ascii_digit()
        .then(|| run_end(s, i, |b| b.is_ascii_digit()).min(i + 3))
}

/// ` ?[^\s\p{L}\p{N}]+` and the line breaks after it (`[\r\n/]*` in o200k, `[\r\n]*` in
/// cl100k).
fn symbols(pattern: Pattern, s: &[u8], i: usize) -> Option<usize> {
    let start = if s[i] == b' ' && s.get(i + 1).is_some_and(|&b| is_symbol(b)) {
        i + 1
    } else {
        i
    };
    if !is_symbol(s[start]) {
        return None;
    }
    let end = run_end(s, start, is_symbol);
    Some(match pattern {
        Pattern::O200k => run_end(s, end, |b| is_line_break(b) || b == b'/'),
        Pattern::Cl100k => run_end(s, end, is_line_break),
    })
}

/// The whitespace alternatives, at a whitespace byte. o200k: `\s*[\r\n]+|\s+(?!\S)|\s+`;
/// cl100k puts `\s++$` first, so a run that ends the text is one piece even after a line break.
fn whitespace(pattern: Pattern, s: &[u8], i: usize) -> usize {
    let end = run_end(s, i, is_space);
    if pattern == Pattern::Cl100k && end == s.len() {
        return end;
    }
    // `\s*[\r\n]+`: up to the run's last line break.
    if let Some(last) = s[i..end].iter().rposition(|&b| is_line_break(b)) {
        return i + last + 1;
    }
    // `\s+(?!\S)`: the run but its last space, which then leads the next piece; or all of it at
    // the end of the text. `\s+` (or cl100k's `\s`): a single space.
    if end == s.len() || end - i < 2 {
        end
    } else {
        end - 1
    }
}

/// Where the piece that starts at `i` ends (`i < s.len()`).
fn piece_end(pattern: Pattern, s: &[u8], i: usize) -> usize {
    let contracted = match pattern {
        // cl100k tries a contraction first, on its own.
        Pattern::Cl100k => contraction(s, i),
        Pattern::O200k => None,
    };
    contracted
        .or_else(|| word(pattern, s, i))
        .or_else(|| digits(s, i))
        .or_else(|| symbols(pattern, s, i))
        .unwrap_or_else(|| whitespace(pattern, s, i))
}

/// The pieces of ASCII `text`, in order; together they are the text.
pub fn pieces(pattern: Pattern, text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start == text.len() {
            return None;
        }
        let end = piece_end(pattern, text, start);
        // Every alternative takes at least one byte; a piece that took none would be cut again
        // forever.
        assert!(end > start, "an empty piece at byte {start}");
        let piece = &text[start..end];
        start = end;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pattern: Pattern, text: &str) -> Vec<&str> {
        pieces(pattern, text.as_bytes())
            .map(|p| std::str::from_utf8(p).unwrap())
            .collect()
    }

    #[test]
    fn o200k_cuts_words_numbers_symbols_and_whitespace_as_tiktoken_does() {
        let cases: &[(&str, &[&str])] = &[
            ("hello world", &["hello", " world"]),
            ("JSONData HELLOworld", &["JSONData", " HELLOworld"]),
            ("HELLO there", &["HELLO", " there"]),
            ("I'm here, they'RE", &["I'm", " here", ",", " they'RE"]),
            ("12345 x", &["123", "45", " x"]),
            ("a  b", &["a", " ", " b"]),
            ("a \n\n  b", &["a", " \n\n", " ", " b"]),
            ("end  ", &["end", "  "]),
            ("x\n  ", &["x", "\n", "  "]),
            ("path //a/b\n/c", &["path", " //", "a", "/b", "\n", "/c"]),
            ("=>\n\n/x", &["=>\n\n/", "x"]),
            ("'re", &["'re"]),
            ("\ttab", &["\ttab"]),
        ];
        for (text, want) in cases {
            assert_eq!(split(Pattern::O200k, text), *want, "{text:?}");
        }
    }

    #[test]
    fn cl100k_takes_contractions_first_and_a_trailing_run_whole() {
        let cases: &[(&str, &[&str])] = &[
            ("JSONData", &["JSONData"]),
            ("'re't", &["'re", "'t"]),
            ("I'm", &["I", "'m"]),
            ("x\n  ", &["x", "\n  "]),
            ("x\n  y", &["x", "\n", " ", " y"]),
            ("=>\n\n/x", &["=>\n\n", "/x"]),
        ];
        for (text, want) in cases {
            assert_eq!(split(Pattern::Cl100k, text), *want, "{text:?}");
        }
    }

    #[test]
    fn the_empty_text_has_no_pieces() {
        assert!(split(Pattern::O200k, "").is_empty());
        assert!(split(Pattern::Cl100k, "").is_empty());
    }
}

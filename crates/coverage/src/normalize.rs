//! Text normalization and word-boundary anchor matching.
//!
//! Both anchors and summaries go through the same [`normalize`]: Unicode NFKC, full case
//! folding, and every run of whitespace collapsed to one space (ends trimmed). Matching is done
//! on the normalized text ([`super::matching`]), and a match counts only at word boundaries.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;

/// Normalized text plus, for each of its bytes, the range of original characters it came from,
/// so matches can be reported as character offsets into the text the client sent.
#[derive(Debug, Clone, Default)]
pub struct NormalizedText {
    text: String,
    origin: Vec<(u32, u32)>,
}

impl NormalizedText {
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Character range `[start, end)` in the original text for a byte range of this text.
    pub(crate) fn original_span(&self, start: usize, end: usize) -> (usize, usize) {
        (
            self.origin[start].0 as usize,
            self.origin[end - 1].1 as usize,
        )
    }
}

/// Normalizes `text` (NFKC, full case folding, whitespace runs collapsed, ends trimmed).
///
/// Normalization runs per cluster (a starter and the characters that combine with it), which
/// keeps the origin map exact; ASCII, the common case, takes a fast path.
pub fn normalize(text: &str) -> NormalizedText {
    let mut out = NormalizedText {
        text: String::with_capacity(text.len()),
        origin: Vec::with_capacity(text.len()),
    };
    let mut pending_space = false;
    let mut chars = text.chars().enumerate().peekable();
    let mut cluster = String::new();
    while let Some((index, c)) = chars.next() {
        let index = index as u32;
        let simple = c.is_ascii()
            && chars
                .peek()
                .is_none_or(|&(_, next)| !continues_cluster(next));
        if simple {
            if c.is_whitespace() {
                pending_space = true;
            } else {
                let origin = (index, index + 1);
                push_char(&mut out, &mut pending_space, c.to_ascii_lowercase(), origin);
            }
            continue;
        }
        cluster.clear();
        cluster.push(c);
        while let Some(&(_, next)) = chars.peek() {
            if !continues_cluster(next) {
                break;
            }
            cluster.push(next);
            chars.next();
        }
        let origin = (index, index + cluster.chars().count() as u32);
        let folded = caseless::default_case_fold_str(&cluster.nfkc().collect::<String>());
        for n in folded.nfkc() {
            if n.is_whitespace() {
                pending_space = true;
            } else {
                push_char(&mut out, &mut pending_space, n, origin);
            }
        }
    }
    out
}

/// [`normalize`] without the origin map, for anchors; ASCII-only text takes a shortcut.
pub fn normalize_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    normalize_text_into(text, &mut out);
    out
}

/// [`normalize_text`] into a reused buffer (cleared first).
pub(crate) fn normalize_text_into(text: &str, out: &mut String) {
    out.clear();
    if text.is_ascii() {
        // Byte by byte: splitting into words and extending by chars cost twice as much.
        let mut bytes = std::mem::take(out).into_bytes();
        bytes.reserve(text.len());
        let mut pending_space = false;
        for b in text.bytes() {
            if b.is_ascii_whitespace() || b == 0x0b {
                pending_space = true;
                continue;
            }
            if std::mem::take(&mut pending_space) && !bytes.is_empty() {
                bytes.push(b' ');
            }
            bytes.push(b.to_ascii_lowercase());
        }
        *out = String::from_utf8(bytes).expect("ASCII in, ASCII out");
        return;
    }
    out.push_str(&normalize(text).text);
}

fn push_char(out: &mut NormalizedText, pending_space: &mut bool, c: char, origin: (u32, u32)) {
    if std::mem::take(pending_space) && !out.text.is_empty() {
        out.text.push(' ');
        // The collapsed run ends just before this character.
        let before = origin.0.saturating_sub(1);
        out.origin.push((before, origin.0));
    }
    out.text.push(c);
    out.origin.extend(std::iter::repeat_n(origin, c.len_utf8()));
}

/// Characters that compose with what precedes them: combining marks and Hangul vowel/final jamo.
fn continues_cluster(c: char) -> bool {
    !c.is_ascii() && canonical_combining_class(c) != 0
        || ('\u{1160}'..='\u{11FF}').contains(&c)
        || ('\u{D7B0}'..='\u{D7FF}').contains(&c)
}

/// A letter, digit or combining mark: the characters a word boundary may not cut through.
pub fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    c.is_alphanumeric() || canonical_combining_class(c) != 0
}

pub(crate) fn at_word_boundary(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_runs_collapse_and_ends_are_trimmed() {
        assert_eq!(normalize("  New \n\t YORK  ").as_str(), "new york");
    }

    #[test]
    fn the_ascii_shortcut_agrees_with_the_full_normalization() {
        // Every ASCII character, alone and between letters: the shortcut must treat exactly
        // the characters `char::is_whitespace` does as whitespace.
        for b in 0u8..128 {
            let c = char::from(b);
            for text in [format!("{c}"), format!("A{c}b"), format!(" {c}{c} X ")] {
                assert_eq!(normalize_text(&text), normalize(&text).text, "{b:#x}");
            }
        }
    }
}

use super::Invalid;
use std::fmt;

/// A conversation id: `^[A-Za-z0-9._:-]{1,128}$`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConversationId(String);

impl ConversationId {
    /// A character a conversation id may hold.
    pub fn is_id_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
    }

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let valid_char = Self::is_id_char;
        // `.` and `..` match the alphabet but are dot segments: clients resolve them away in
        // URLs, so such an id could never be addressed reliably.
        let dot_segment = raw.chars().all(|c| c == '.') && raw.len() <= 2;
        if raw.is_empty() || raw.len() > 128 || !raw.chars().all(valid_char) || dot_segment {
            return Err(Invalid::new(
                "conversation",
                format!(
                    "{:?} is not a conversation id: use 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)",
                    truncate_for_message(raw)
                ),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Echoing a hostile 100 KB id back in an error helps nobody.
pub(crate) fn truncate_for_message(raw: &str) -> String {
    match raw.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &raw[..i]),
        None => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_documented_alphabet() {
        for ok in ["a", "airline-12-0", "A.b_c:d-e", "...", &"x".repeat(128)] {
            assert!(ConversationId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "%2F",
            "é",
            "a\0",
            &"x".repeat(129),
        ] {
            assert!(ConversationId::parse(bad).is_err(), "{bad:?}");
        }
    }
}

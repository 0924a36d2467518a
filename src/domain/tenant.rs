use super::Invalid;
use std::fmt;

/// The tenant a key belongs to; every stored row carries one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

impl TenantId {
    /// The tenant used when no keys are configured.
    pub fn single() -> Self {
        Self("default".to_owned())
    }

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if raw.is_empty() || raw.len() > 64 || !raw.chars().all(valid_char) {
            return Err(Invalid::new(
                "tenant",
                format!("{raw:?} is not a tenant name: use 1 to 64 of A-Z a-z 0-9 . _ -"),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

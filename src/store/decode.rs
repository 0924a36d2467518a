//! Column values both backends store the same way, decoded; a value that does not decode breaks
//! an invariant (the service wrote it).

use super::{Error, Result};
use crate::coverage::{Outcome, Role};

pub(super) fn role(raw: &str) -> Result<Role> {
    raw.parse().map_err(Error::invariant)
}

pub(super) fn outcome(raw: &str) -> Result<Outcome> {
    serde_json::from_value(serde_json::Value::String(raw.to_owned())).map_err(Error::invariant)
}

/// Content is stored as bytes (so `\u0000` survives); it was UTF-8 when it arrived.
pub(super) fn text(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(Error::invariant)
}

pub(super) fn tokens(raw: i64) -> Result<u32> {
    u32::try_from(raw).map_err(Error::invariant)
}

pub(super) fn json<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T> {
    serde_json::from_str(raw).map_err(Error::invariant)
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(Error::invariant)
}

/// `candidates_used` as stored (a little-endian u16 per turn of the range; NULL before they
/// were kept).
pub(super) fn candidates_used(bytes: Option<&[u8]>) -> Result<Vec<u16>> {
    let bytes = bytes.unwrap_or_default();
    if bytes.len() % 2 != 0 {
        return Err(Error::invariant("candidates_used has an odd length"));
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect())
}

/// A stored (tenant, conversation) pair.
pub(super) fn conversation_key(
    (tenant, conversation): (String, String),
) -> Result<(crate::domain::TenantId, crate::domain::ConversationId)> {
    Ok((
        crate::domain::TenantId::parse(&tenant).map_err(Error::invariant)?,
        crate::domain::ConversationId::parse(&conversation).map_err(Error::invariant)?,
    ))
}

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

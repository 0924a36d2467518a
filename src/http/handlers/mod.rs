//! Handlers: parse → call a flow of [`crate::service`] → map to a response; nothing else.

pub mod compactions;
pub mod health;
pub mod lifecycle;
pub mod reads;
pub mod search;
pub mod turns;

use crate::http::{Error, Result};

/// A page size from a query: `default` when absent, else 1 to `max` or a 400 naming `limit`.
fn page_limit(limit: Option<i64>, default: u32, max: u32) -> Result<u32> {
    match limit {
        None => Ok(default),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|l| (1..=max).contains(l))
            .ok_or_else(|| Error::BadRequest {
                detail: format!("limit must be between 1 and {max}, got {n}"),
                field: Some("limit".into()),
            }),
    }
}

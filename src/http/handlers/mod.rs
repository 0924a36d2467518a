//! Handlers: parse → call a flow of [`crate::service`] → map to a response; nothing else.

pub mod compactions;
pub mod health;
pub mod lifecycle;
pub mod reads;
pub mod search;
pub mod turns;

//! Parsed request values: once a handler holds one of these, it is valid.

mod conversation_id;
mod position;
mod proposal;
mod tenant;
mod turn;

pub use conversation_id::ConversationId;
pub use position::Position;
pub use proposal::{CompactionRequest, ExpectedCheckpoint};
pub use tenant::TenantId;
pub use turn::{AppendRequest, Limits, NewTurn, ShortText};

/// Why a value was refused, naming the field so the problem+json can point at it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

impl Invalid {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

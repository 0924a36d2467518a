//! What can go wrong in the store, classified once: the service and the HTTP layer decide what
//! to do from the kind, never from a database's own codes.

use std::sync::Arc;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Cloned when one statement answers several requests (reconstruct batches): the cause is
/// shared, not copied.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// The database cannot be reached, is overloaded, restarting, or busy past the timeout: a
    /// retry may succeed.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] Arc<sqlx::Error>),
    /// A unique constraint refused a write: another transaction committed the same row first.
    #[error("conflicting write: {0}")]
    Conflict(#[source] Arc<sqlx::Error>),
    /// What is stored breaks an invariant of the service: a value that does not decode, a row
    /// a statement needed that is not there.
    #[error("stored data breaks an invariant: {0}")]
    Invariant(String),
    #[error("database error: {0}")]
    Other(#[source] Arc<sqlx::Error>),
}

impl Error {
    pub fn invariant(what: impl std::fmt::Display) -> Self {
        Error::Invariant(what.to_string())
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        use sqlx::Error as E;
        match &e {
            E::Io(_) | E::Tls(_) | E::PoolTimedOut | E::PoolClosed | E::WorkerCrashed => {
                Error::Unavailable(Arc::new(e))
            }
            E::Database(db) if db.is_unique_violation() => Error::Conflict(Arc::new(e)),
            // Each backend classifies its own codes, beside its SQL.
            E::Database(db) if super::postgres::is_transient(&**db) => {
                Error::Unavailable(Arc::new(e))
            }
            E::Database(db) if super::sqlite::is_transient(&**db) => {
                Error::Unavailable(Arc::new(e))
            }
            E::Decode(_)
            | E::ColumnDecode { .. }
            | E::ColumnNotFound(_)
            | E::ColumnIndexOutOfBounds { .. }
            | E::RowNotFound
            | E::TypeNotFound { .. }
            | E::Encode(_) => Error::Invariant(e.to_string()),
            _ => Error::Other(Arc::new(e)),
        }
    }
}

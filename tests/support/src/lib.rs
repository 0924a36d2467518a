//! What the gatekeeper's test binaries share, as one crate: a fresh database per test on the
//! backend the environment selects ([`db`]), the app built exactly as `serve` builds it and
//! served on port 0 ([`app`]), real data and request builders ([`data`]), more requests and raw-socket ones
//! ([`requests`]), a conversation's lock held from outside ([`locks`]).

pub mod app;
pub mod data;
pub mod db;
pub mod locks;
pub mod requests;

pub use app::*;
pub use data::*;
pub use db::{AnyStore, EmptyDb, TestDb, backend, terminate_backends};
pub use locks::HeldLock;
pub use requests::*;

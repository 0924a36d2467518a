#![forbid(unsafe_code)]
//! The compaction gatekeeper: persists only the pointer set a summary really covers.
//!
//! A guided tour, in reading order:

/// The wire contract: request and response bodies.
pub mod api;
/// How a batch of turns fits the log: new turns, replays, conflicts, gaps (pure).
pub mod append;
/// The `gatekeeper` command line: serve, migrate, and client commands.
pub mod cli;
/// A typed client for the API, with retries that reuse the Idempotency-Key.
pub mod client;
/// Typed configuration from flags and environment, validated at start.
pub mod config;
/// The coverage decision: pure functions from turns + proposal to a verdict (no IO).
pub mod coverage;
/// Parsed request values (conversation ids, turns, proposals): valid once constructed.
pub mod domain;
/// The HTTP service: router, handlers, errors, auth, metrics.
pub mod http;
/// The compaction plan and its advice (compact, raise the budget, or wait) (pure).
pub mod plan;
/// Starting, serving on a given listener, and draining on shutdown.
pub mod server;
/// Postgres: the raw log and the checkpoints, migrations embedded.
pub mod store;
/// Reader for the tau-bench airline transcripts used by tests, benchmarks and the CLI.
pub mod tau_bench;
/// Token counting with a real tokenizer (tiktoken), built once and shared.
pub mod tokens;

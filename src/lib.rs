#![forbid(unsafe_code)]
//! The compaction gatekeeper: persists only the pointer set a summary really covers.
//!
//! A guided tour, in reading order:
//! 1. the pure core: [`domain`] (parsed values), [`coverage`] (the decision), [`append`] (how a
//!    batch fits the log), [`plan`] (the compaction plan), [`context`] (the working context), [`search`],
//!    [`tokens`], [`transfer`] (export and import), and the wire types in [`api`];
//! 2. [`service`]: the flows that use the core, written once;
//! 3. [`store`] beneath them (SQL only) and [`http`] above them (parse, call a flow, respond);
//! 4. how it starts: [`config`], [`server`], [`cli`]; and [`client`], for callers.
//!
//! docs/architecture.md says which layer may import which.

/// The wire contract: request and response bodies.
pub mod api;
/// How a batch of turns fits the log: new turns, replays, conflicts, gaps (pure).
pub mod append;
/// The working context: which summaries and turns it holds, in turn order (pure).
pub mod context;
/// The coverage decision: pure functions from turns + proposal to a verdict (no IO), in a crate
/// of its own (`crates/coverage`) so that nothing impure can be imported into it.
pub use gatekeeper_coverage as coverage;
/// Parsed request values (conversation ids, turns, proposals): valid once constructed.
pub mod domain;
/// The compaction plan and its advice (compact, raise the budget, or wait) (pure).
pub mod plan;
/// Search over the raw log: query terms, index keys, ranking and snippets (pure).
pub mod search;
/// Token counting, exactly as tiktoken counts (its vocabularies; ASCII text pre-tokenized by
/// hand, the rest by its regex), built once and shared; a crate of its own (`crates/tokens`).
pub use gatekeeper_tokens as tokens;
/// Export and import as NDJSON: the lines, and the checks an import passes (pure).
pub mod transfer;

/// The HTTP service: router, handlers, errors, auth, metrics. Handlers parse, call a flow of
/// [`service`], and map the result.
pub mod http;
/// The MCP server: recall tools for agents, over streamable HTTP at `/mcp` or over stdio.
pub mod mcp;
/// The request flows (append, propose, pin, reads), written once over any [`store::Store`]:
/// they call the pure core and the store.
pub mod service;
/// The raw log and the checkpoints: SQL and row decoding only, behind the `Store` and
/// `WriteTx` traits, on Postgres or embedded SQLite, migrations embedded.
pub mod store;

/// The `gatekeeper` command line: serve, migrate, and client commands.
pub mod cli;
/// A typed client for the API, with retries that reuse the Idempotency-Key.
pub mod client;
/// Typed configuration from flags and environment, validated at start.
pub mod config;
/// Starting (the backend chosen once, by URL), serving on a given listener, draining.
pub mod server;
/// Reader for the tau-bench airline transcripts used by tests, benchmarks and the CLI
/// (`crates/tau-bench`).
pub use gatekeeper_tau_bench as tau_bench;
/// Logs, and OpenTelemetry traces over OTLP/HTTP when an endpoint is set.
pub mod telemetry;

//! HTTP tests against the real router on port 0 and a fresh database per test, on SQLite or
//! Postgres (see the support crate's `db.rs`).

use gatekeeper_test_support as support;
use gatekeeper_test_support::db as test_db;

mod advice;
mod appends;
mod auth;
mod bounded_cost;
mod budgeted_context;
mod compactions;
mod concurrency;
mod context_plan;
mod cross_process;
mod erasure;
mod errors;
mod hostile;
mod idempotency;
mod idempotency_reuse;
mod listing;
mod outside_the_lock;
mod partial_context;
mod partitions;
mod pins;
mod positions;
mod reconstruct;
mod reconstruct_batches;
mod refusals;
mod retention;
mod rule_2b;
mod rules;
mod search;
mod search_scores;
mod security;
mod tenant_cache;
mod transfer;
mod turn_list;
mod turns_read;
mod upgrade;
mod upgrade_counts;
mod upgrade_keys;
mod upgrade_search;
mod upgrade_verdicts;

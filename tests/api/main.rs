//! HTTP tests against the real router on port 0 and a fresh Postgres database per test.

mod support;

mod appends;
mod auth;
mod compactions;
mod concurrency;
mod context_plan;
mod errors;
mod reconstruct;
mod rules;
mod turns_read;

//! Fault injection against the real binary: Postgres restarted (and its backends terminated)
//! under load, the service killed with SIGKILL in the middle of writes, two service processes on
//! one database, and a bounded soak.
//!
//! Every test is ignored by a plain `cargo test`: they restart the shared Postgres, kill
//! processes and run for minutes. `.ci/run` runs them in a step of their own, one at a time:
//! `cargo test --test faults -- --ignored --test-threads=1`. Each prints one summary line with
//! its figures (see docs/reliability.md). Loopback only; every loop is bounded in count and time.
//! `GATEKEEPER_FAULT_SEED` replays a run's random choices; `GATEKEEPER_SOAK_SECS` (default 120)
//! and `GATEKEEPER_SOAK_RATE` (default 200 requests/s) size the soak.
//!
//! One file per fault: `postgres_restart.rs` (Postgres restarted, stopped, its backends
//! terminated), `sigkill.rs` (SIGKILL mid-writes on Postgres and SQLite), `two_processes.rs` (two
//! processes on one database), `replicas.rs` (reads from a streaming replica) and `soak.rs`, and `noisy_neighbour.rs` (one tenant's worst requests beside another's workload). What they share is in `harness.rs` (randomness,
//! tau-bench data, formatting, violations) and `harness/`: `service.rs` (the binary, ports, HTTP
//! calls), `postgres.rs` (the shared cluster, per-test databases), `db.rs` (either backend, scratch
//! folders) and `checks.rs` (whole checkpoints and appends, turns stored byte-exact).

mod harness;

mod noisy_neighbour;
mod postgres_restart;
mod replicas;
mod sigkill;
mod soak;
mod two_processes;

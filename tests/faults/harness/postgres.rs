//! The shared Postgres: its cluster restarted, stopped and started, brought back after a test, and
//! a uniquely named database per test.

use gatekeeper_test_support::db::PgDatabase;
use sqlx::Connection;
use std::process::Stdio;
use std::time::{Duration, Instant};

const PG_SERVER: &str = "postgres://postgres@127.0.0.1:5432";

fn pg_version() -> String {
    let mut versions: Vec<String> = std::fs::read_dir("/etc/postgresql")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions.into_iter().next().unwrap_or_else(|| "15".into())
}

fn pg_isready() -> bool {
    std::process::Command::new("pg_isready")
        .args(["-h", "127.0.0.1", "-p", "5432", "-q"])
        .status()
        .is_ok_and(|s| s.success())
}

/// `pg_ctlcluster --skip-systemctl-redirect <version> main <action>`; how long it took.
pub(crate) fn pg_ctlcluster(action: &str) -> Duration {
    let started = Instant::now();
    let status = std::process::Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &pg_version(), "main", action])
        .stdout(Stdio::null())
        .status()
        .expect("pg_ctlcluster runs");
    assert!(status.success(), "pg_ctlcluster {action}: {status}");
    started.elapsed()
}

/// Brings the shared Postgres back if a test left it down; waits up to a minute.
pub(crate) fn ensure_postgres_up() {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut started = false;
    while !pg_isready() {
        if !started {
            started = true;
            let _ = std::process::Command::new("pg_ctlcluster")
                .args(["--skip-systemctl-redirect", &pg_version(), "main", "start"])
                .status();
        }
        if Instant::now() > deadline {
            eprintln!("faults: Postgres is still not accepting connections after 60 s");
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Whatever happens in the test, Postgres is up again when it ends.
pub(crate) struct PostgresBackUp;

impl Drop for PostgresBackUp {
    fn drop(&mut self) {
        ensure_postgres_up();
    }
}

pub(crate) async fn pg_admin() -> Result<sqlx::PgConnection, sqlx::Error> {
    sqlx::PgConnection::connect(&format!("{PG_SERVER}/postgres")).await
}

/// A uniquely named database on the local server (the service creates it), dropped afterwards,
/// with Postgres brought back up first if the test left it down.
pub(crate) struct PgDb(PgDatabase);

impl PgDb {
    pub(crate) fn new(tag: &str) -> PgDb {
        PgDb(PgDatabase::named(
            &format!("{PG_SERVER}/postgres"),
            &format!("gk_faults_{tag}"),
        ))
    }

    pub(crate) fn url(&self) -> String {
        self.0.url()
    }

    pub(crate) fn name(&self) -> &str {
        self.0.name()
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        // Runs before the database itself is dropped.
        ensure_postgres_up();
    }
}

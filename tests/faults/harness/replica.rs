//! A streaming replica of the shared Postgres, made for one test: `pg_basebackup -R` into a
//! scratch folder, a second cluster on a free port with the machine's binaries (run as the
//! `postgres` user), stopped and removed when dropped. The primary must allow replication from
//! loopback (`host replication all 127.0.0.1/32 trust` in pg_hba.conf; `.ci/run` adds it).

use super::postgres::pg_admin;
use gatekeeper_test_support::db::{run_aside, unique_name};
use gatekeeper_test_support::free_port;
use sqlx::Connection;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = "/usr/lib/postgresql/15/bin";

pub(crate) struct Replica {
    pub(crate) port: u16,
    folder: PathBuf,
}

fn as_postgres(program: &str, args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--", &format!("{BIN}/{program}")])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("runuser {program}: {e}"))
}

impl Replica {
    pub(crate) fn start() -> Replica {
        let port = free_port();
        let folder = std::env::temp_dir().join(format!("gk-replica-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&folder).expect("the replica's folder");
        let status = Command::new("chown")
            .args(["postgres:postgres", &folder.display().to_string()])
            .status()
            .expect("chown runs");
        assert!(status.success(), "chown the replica's folder");
        let replica = Replica { port, folder };
        let data = replica.data();
        let backup = as_postgres(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                "5432",
                "-U",
                "postgres",
                "-D",
                &data,
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
            ],
        );
        assert!(
            backup.status.success(),
            "pg_basebackup failed (does pg_hba.conf allow `host replication all 127.0.0.1/32 trust`?): {}",
            String::from_utf8_lossy(&backup.stderr)
        );
        // Debian keeps the cluster's configuration outside its data folder: the copy gets its own.
        let conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             hot_standby = on\nssl = off\nmax_connections = 100\nshared_buffers = 32MB\n\
             fsync = off\n",
            replica.folder.display()
        );
        for (file, text) in [
            ("postgresql.conf", conf.as_str()),
            (
                "pg_hba.conf",
                "local all all trust\nhost all all 127.0.0.1/32 trust\n",
            ),
        ] {
            std::fs::write(format!("{data}/{file}"), text).expect("the replica's configuration");
        }
        let status = Command::new("chown")
            .args([
                "-R",
                "postgres:postgres",
                &replica.folder.display().to_string(),
            ])
            .status()
            .expect("chown runs");
        assert!(status.success());
        replica.pg_ctl(&["start", "-w", "-t", "60", "-l", &replica.log()]);
        replica
    }

    fn data(&self) -> String {
        self.folder.join("data").display().to_string()
    }

    fn log(&self) -> String {
        self.folder.join("log").display().to_string()
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data();
        let mut all = vec!["-D", data.as_str()];
        all.extend_from_slice(args);
        let out = as_postgres("pg_ctl", &all);
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            std::fs::read_to_string(self.log()).unwrap_or_default()
        );
    }

    /// The URL of `database` on the replica.
    pub(crate) fn url(&self, database: &str) -> String {
        self.url_as("postgres", database)
    }

    /// The URL of `database` on the replica, connecting as `user`.
    pub(crate) fn url_as(&self, user: &str, database: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{database}", self.port)
    }

    /// Ends every session `user` has on the replica, as a replica restart would.
    pub(crate) async fn end_sessions_of(&self, user: &str) {
        let mut c = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("the replica");
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1")
            .bind(user)
            .execute(&mut c)
            .await
            .expect("its sessions ended");
    }

    /// Waits until the replica has replayed everything the primary had when called (so a
    /// database the test just created is there).
    pub(crate) async fn catch_up(&self) {
        let lsn: String = {
            let mut primary =
                sqlx::PgConnection::connect("postgres://postgres@127.0.0.1:5432/postgres")
                    .await
                    .expect("the primary");
            sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
                .fetch_one(&mut primary)
                .await
                .expect("its position")
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(mut c) = sqlx::PgConnection::connect(&self.url("postgres")).await {
                let done: Option<bool> =
                    sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn")
                        .bind(&lsn)
                        .fetch_one(&mut c)
                        .await
                        .ok();
                if done == Some(true) {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the replica did not catch up in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Pauses (`true`) or resumes its replay: paused, it answers from a state that stops
    /// moving, as a replica far behind would.
    pub(crate) async fn pause_replay(&self, paused: bool) {
        let mut c = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("the replica");
        let sql = if paused {
            "SELECT pg_wal_replay_pause()"
        } else {
            "SELECT pg_wal_replay_resume()"
        };
        sqlx::query(sql)
            .execute(&mut c)
            .await
            .expect("replay paused or resumed");
    }

    /// Stops it at once, as a crash would.
    pub(crate) fn stop(&self) {
        self.pg_ctl(&["stop", "-m", "immediate", "-w"]);
    }

    pub(crate) fn start_again(&self) {
        self.pg_ctl(&["start", "-w", "-t", "60", "-l", &self.log()]);
    }

    /// Makes it a primary of its own: it stops following, and must no longer answer reads.
    pub(crate) fn promote(&self) {
        self.pg_ctl(&["promote", "-w"]);
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let data = self.data();
        let _ = as_postgres("pg_ctl", &["-D", &data, "stop", "-m", "immediate", "-w"]);
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// A login role of its own, created on the primary (and so on its replicas), not a superuser:
/// Postgres holds it to a connection limit. Declare it before the database it reads, so that it
/// is dropped after (the database holds its grants).
pub(crate) struct ReadOnlyRole(pub(crate) String);

impl ReadOnlyRole {
    pub(crate) async fn create() -> ReadOnlyRole {
        let role = ReadOnlyRole(unique_name("gk_faults_reader"));
        let mut primary = pg_admin().await.expect("the primary");
        sqlx::query(&format!("CREATE ROLE {} LOGIN", role.0))
            .execute(&mut primary)
            .await
            .expect("the role is created");
        role
    }

    /// Lets it read every table of `database` (run once its tables exist).
    pub(crate) async fn grant_reads(&self, database_url: &str) {
        let mut c = sqlx::PgConnection::connect(database_url)
            .await
            .expect("the database");
        sqlx::query(&format!(
            "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}",
            self.0
        ))
        .execute(&mut c)
        .await
        .expect("reads granted");
    }

    /// How many sessions it may open from now on (-1: no limit); sessions it has stay open.
    pub(crate) async fn limit_connections(&self, limit: i32) {
        let mut primary = pg_admin().await.expect("the primary");
        sqlx::query(&format!("ALTER ROLE {} CONNECTION LIMIT {limit}", self.0))
            .execute(&mut primary)
            .await
            .expect("the limit is set");
    }
}

impl Drop for ReadOnlyRole {
    fn drop(&mut self) {
        let name = self.0.clone();
        run_aside(async move {
            if let Ok(mut primary) = pg_admin().await {
                let _ = sqlx::query(&format!("DROP ROLE IF EXISTS {name}"))
                    .execute(&mut primary)
                    .await;
            }
        });
    }
}

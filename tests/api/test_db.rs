//! One fresh database per test, on the backend the environment selects:
//! `GATEKEEPER_TEST_BACKEND=postgres|sqlite`, or else Postgres when `DATABASE_URL` is a
//! `postgres://` URL (its server hosts the per-test databases) and SQLite otherwise.
#![allow(dead_code)]

use gatekeeper::store::{Backend, Store};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub struct TestDb {
    pub store: Store,
    cleanup: Cleanup,
}

enum Cleanup {
    None,
    Postgres { admin_url: String, name: String },
    Sqlite { dir: PathBuf },
}

pub fn backend() -> Backend {
    match std::env::var("GATEKEEPER_TEST_BACKEND").as_deref() {
        Ok("postgres") => Backend::Postgres,
        Ok("sqlite") => Backend::Sqlite,
        Ok(other) => panic!("GATEKEEPER_TEST_BACKEND={other}: expected postgres or sqlite"),
        Err(_) => match std::env::var("DATABASE_URL") {
            Ok(url) if Backend::of_url(&url) == Ok(Backend::Postgres) => Backend::Postgres,
            _ => Backend::Sqlite,
        },
    }
}

/// `postgres://u@h:5432/any?x` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let path_start = url[authority_start..]
        .find('/')
        .map_or(url.len(), |i| authority_start + i);
    let query = url[path_start..]
        .find('?')
        .map_or("", |i| &url[path_start + i..]);
    format!("{}/{name}{query}", &url[..path_start])
}

/// A database that exists but holds nothing yet (no migrations applied), removed when dropped.
pub struct EmptyDb {
    pub url: String,
    cleanup: Cleanup,
}

impl EmptyDb {
    pub async fn new() -> EmptyDb {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "gk_test_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        match backend() {
            Backend::Postgres => {
                let admin_url = std::env::var("DATABASE_URL")
                    .expect("the Postgres test backend needs DATABASE_URL=postgres://… of a server to create databases on");
                let url = with_database(&admin_url, &name);
                use sqlx::migrate::MigrateDatabase;
                sqlx::Postgres::create_database(&url)
                    .await
                    .expect("a fresh Postgres test database");
                EmptyDb {
                    url,
                    cleanup: Cleanup::Postgres { admin_url, name },
                }
            }
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(&name);
                std::fs::create_dir_all(&dir).unwrap();
                let url = format!("sqlite://{}?mode=rwc", dir.join("gatekeeper.db").display());
                EmptyDb {
                    url,
                    cleanup: Cleanup::Sqlite { dir },
                }
            }
        }
    }

    /// Connects as the service does: the migrations it lacks are applied.
    pub async fn connect(mut self) -> TestDb {
        let store = Store::connect(&self.url, 5, Duration::from_secs(10))
            .await
            .expect("the test database migrates");
        let cleanup = std::mem::replace(&mut self.cleanup, Cleanup::None);
        TestDb { store, cleanup }
    }
}

impl Drop for EmptyDb {
    fn drop(&mut self) {
        self.cleanup.run();
    }
}

impl TestDb {
    pub async fn fresh() -> TestDb {
        EmptyDb::new().await.connect().await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        self.cleanup.run();
    }
}

impl Cleanup {
    fn run(&self) {
        match self {
            Cleanup::None => {}
            Cleanup::Sqlite { dir } => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Postgres { admin_url, name } => {
                // Drop runs inside the test's runtime, which cannot be blocked on: use a thread.
                let (admin_url, name) = (admin_url.clone(), name.clone());
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async {
                        use sqlx::Connection;
                        if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                            )))
                            .execute(&mut conn)
                            .await;
                        }
                    });
                })
                .join();
            }
        }
    }
}

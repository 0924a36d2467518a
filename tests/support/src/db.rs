//! One fresh database per test, on the backend the environment selects:
//! `GATEKEEPER_TEST_BACKEND=postgres|sqlite`, or else Postgres when `DATABASE_URL` is a
//! `postgres://` URL (its server hosts the per-test databases) and SQLite otherwise.

use gatekeeper::config::DatabaseConfig;
use gatekeeper::store::{self, Backend, PgStore, SqliteStore, Store};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct TestDb {
    pub store: AnyStore,
    _cleanup: Cleanup,
}

/// The store of whichever backend a test runs on. The service itself never needs this: it
/// picks its backend once at start and is generic over it from there.
#[derive(Clone, Debug)]
pub enum AnyStore {
    Postgres(PgStore),
    Sqlite(SqliteStore),
}

impl AnyStore {
    /// Connects as `serve` does (the migrations it lacks are applied). On Postgres,
    /// `GATEKEEPER_TEST_PG_PARTITIONS=N` runs the tests on a database partitioned N ways.
    pub async fn connect(url: &str) -> Result<Self, String> {
        let partitions = std::env::var("GATEKEEPER_TEST_PG_PARTITIONS")
            .ok()
            .filter(|_| Backend::of_url(url) == Ok(Backend::Postgres))
            .map(|n| n.parse().expect("GATEKEEPER_TEST_PG_PARTITIONS is a count"));
        Self::connect_with(url, partitions).await
    }

    /// Connects as `serve` does with `GATEKEEPER_PG_PARTITIONS` set to `partitions`.
    pub async fn connect_with(url: &str, partitions: Option<u32>) -> Result<Self, String> {
        let db = DatabaseConfig {
            database_url: Some(url.to_owned()),
            pool_size: 5,
            acquire_timeout_secs: 10,
            startup_wait_secs: 0,
            pg_partitions: partitions,
            ..DatabaseConfig::default()
        };
        Ok(match Backend::of_url(url)? {
            Backend::Postgres => {
                AnyStore::Postgres(PgStore::connect(&db).await.map_err(|e| e.to_string())?)
            }
            Backend::Sqlite => {
                AnyStore::Sqlite(SqliteStore::connect(&db).await.map_err(|e| e.to_string())?)
            }
        })
    }

    pub fn backend(&self) -> Backend {
        match self {
            AnyStore::Postgres(_) => Backend::Postgres,
            AnyStore::Sqlite(_) => Backend::Sqlite,
        }
    }

    pub async fn close(&self) {
        match self {
            AnyStore::Postgres(s) => s.close().await,
            AnyStore::Sqlite(s) => s.close().await,
        }
    }

    /// What the working context reads of a single-tenant conversation.
    pub async fn context(&self, conversation: &str) -> store::Result<store::StoredContext> {
        let tenant = gatekeeper::domain::TenantId::single();
        let conversation = gatekeeper::domain::ConversationId::parse(conversation).unwrap();
        match self {
            AnyStore::Postgres(s) => s.context(&tenant, &conversation).await,
            AnyStore::Sqlite(s) => s.context(&tenant, &conversation).await,
        }
    }

    pub async fn backfill_profiles(&self) -> store::Result<u64> {
        match self {
            AnyStore::Postgres(s) => s.backfill_profiles().await,
            AnyStore::Sqlite(s) => s.backfill_profiles().await,
        }
    }

    pub async fn backfill_search(&self) -> store::Result<u64> {
        match self {
            AnyStore::Postgres(s) => s.backfill_search().await,
            AnyStore::Sqlite(s) => s.backfill_search().await,
        }
    }
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

/// A name no other test, process or run uses: `{prefix}_{pid}_{counter}_{nanos}`.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A temporary folder, removed with everything in it when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(prefix: &str) -> ScratchDir {
        let dir = std::env::temp_dir().join(unique_name(prefix));
        std::fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A uniquely named Postgres database on the server at `admin_url` (created here, or by the
/// service), dropped `WITH (FORCE)` when this is dropped.
pub struct PgDatabase {
    admin_url: String,
    name: String,
}

impl PgDatabase {
    pub fn named(admin_url: &str, prefix: &str) -> PgDatabase {
        PgDatabase {
            admin_url: admin_url.to_owned(),
            name: unique_name(prefix),
        }
    }

    pub fn url(&self) -> String {
        with_database(&self.admin_url, &self.name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub async fn create(&self) {
        use sqlx::migrate::MigrateDatabase;
        sqlx::Postgres::create_database(&self.url())
            .await
            .expect("a fresh Postgres test database");
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        run_aside(async move {
            use sqlx::Connection;
            if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .execute(&mut conn)
                    .await;
            }
        });
    }
}

/// Runs `cleanup` to its end on a thread and runtime of its own: a `Drop` runs inside the
/// test's runtime, which cannot be blocked on.
pub fn run_aside(cleanup: impl std::future::Future<Output = ()> + Send + 'static) {
    let _ = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(cleanup)
    })
    .join();
}

/// What a test database is kept alive by: removed when it is dropped.
#[allow(dead_code)] // held for its Drop
enum Cleanup {
    None,
    Postgres(PgDatabase),
    Sqlite(ScratchDir),
}

/// A database that exists but holds nothing yet (no migrations applied), removed when dropped.
pub struct EmptyDb {
    pub url: String,
    cleanup: Cleanup,
}

impl EmptyDb {
    pub async fn new() -> EmptyDb {
        Self::on(backend()).await
    }

    /// On the given backend, whichever the tests run on (Postgres needs `DATABASE_URL`).
    pub async fn on(backend: Backend) -> EmptyDb {
        match backend {
            Backend::Postgres => {
                let admin_url = std::env::var("DATABASE_URL")
                    .expect("the Postgres test backend needs DATABASE_URL=postgres://… of a server to create databases on");
                let db = PgDatabase::named(&admin_url, "gk_test");
                db.create().await;
                EmptyDb {
                    url: db.url(),
                    cleanup: Cleanup::Postgres(db),
                }
            }
            Backend::Sqlite => {
                let dir = ScratchDir::new("gk_test");
                let url = format!(
                    "sqlite://{}?mode=rwc",
                    dir.path().join("gatekeeper.db").display()
                );
                EmptyDb {
                    url,
                    cleanup: Cleanup::Sqlite(dir),
                }
            }
        }
    }

    /// Connects as the service does: the migrations it lacks are applied.
    pub async fn connect(self) -> TestDb {
        let store = AnyStore::connect(&self.url)
            .await
            .expect("the test database migrates");
        self.with(store)
    }

    /// Like [`EmptyDb::connect`], with `GATEKEEPER_PG_PARTITIONS` set to `partitions`.
    pub async fn connect_with(self, partitions: Option<u32>) -> TestDb {
        let store = AnyStore::connect_with(&self.url, partitions)
            .await
            .expect("the test database migrates");
        self.with(store)
    }

    fn with(mut self, store: AnyStore) -> TestDb {
        let cleanup = std::mem::replace(&mut self.cleanup, Cleanup::None);
        TestDb {
            store,
            _cleanup: cleanup,
        }
    }
}

impl TestDb {
    pub async fn fresh() -> TestDb {
        EmptyDb::new().await.connect().await
    }

    /// A fresh SQLite database, whichever backend the tests run on.
    pub async fn fresh_sqlite() -> TestDb {
        EmptyDb::on(Backend::Sqlite).await.connect().await
    }
}

/// Terminates the backends of this store's database whose `application_name` is `name`, as a
/// server restart or an idle timeout would; returns how many.
pub async fn terminate_backends(pg: &PgStore, name: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = $1) AS t",
    )
    .bind(name)
    .fetch_one(pg.pool())
    .await
    .expect("pg_stat_activity")
}

//! One fresh database of either backend: a Postgres database or a SQLite file in a scratch folder.

use crate::harness::postgres::PgDb;
use gatekeeper_test_support::db::ScratchDir;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Postgres,
    Sqlite,
}

/// One fresh database of either backend, and the service configuration that points at it.
pub(crate) enum Db {
    Postgres(PgDb),
    Sqlite(ScratchDir),
}

impl Db {
    pub(crate) fn fresh(backend: Backend, tag: &str) -> Db {
        match backend {
            Backend::Postgres => Db::Postgres(PgDb::new(tag)),
            Backend::Sqlite => Db::Sqlite(ScratchDir::new(&format!("gk-faults-{tag}"))),
        }
    }

    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            Db::Postgres(db) => vec![("DATABASE_URL", db.url())],
            Db::Sqlite(dir) => vec![("GATEKEEPER_DATA_DIR", dir.path().display().to_string())],
        }
    }
}

pub(crate) fn backend_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "postgres",
        Backend::Sqlite => "sqlite",
    }
}

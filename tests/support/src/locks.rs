//! A conversation's write lock held from outside the service, as a concurrent writer would hold
//! it, so a test can make requests wait for it and change things meanwhile.

use crate::AnyStore;
use sqlx::{Postgres, Sqlite, Transaction};
use std::time::Duration;

pub enum HeldLock {
    Postgres(Transaction<'static, Postgres>, sqlx::PgPool),
    Sqlite(Transaction<'static, Sqlite>),
}

impl HeldLock {
    /// Locks the conversation (it must exist): its row on Postgres; on SQLite the database's
    /// write lock, which is how the service serializes writers there.
    pub async fn take(store: &AnyStore, tenant: &str, conversation: &str) -> HeldLock {
        match store {
            AnyStore::Postgres(pg) => {
                let mut tx = pg.pool().begin().await.unwrap();
                let locked = sqlx::query(
                    "SELECT 1 FROM conversations WHERE tenant = $1 AND conversation = $2 FOR UPDATE",
                )
                .bind(tenant)
                .bind(conversation)
                .fetch_optional(&mut *tx)
                .await
                .unwrap();
                assert!(locked.is_some(), "conversation {conversation} exists");
                HeldLock::Postgres(tx, pg.pool().clone())
            }
            AnyStore::Sqlite(lite) => {
                HeldLock::Sqlite(lite.pool().begin_with("BEGIN IMMEDIATE").await.unwrap())
            }
        }
    }

    /// Returns once `n` requests wait for a lock. Postgres shows its waiters; SQLite cannot, so
    /// there this gives them 2 s to get there (they wait up to the 10 s busy timeout).
    pub async fn wait_for_waiters(&self, n: usize) {
        match self {
            HeldLock::Postgres(_, pool) => {
                for _ in 0..500 {
                    let waiting: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                         AND wait_event_type = 'Lock'",
                    )
                    .fetch_one(pool)
                    .await
                    .unwrap();
                    if waiting as usize >= n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("{n} requests did not reach the lock within 5 s");
            }
            HeldLock::Sqlite(_) => tokio::time::sleep(Duration::from_secs(2)).await,
        }
    }

    /// Runs `sql` in the lock's transaction: a change committed with it.
    pub async fn execute(&mut self, sql: &'static str) {
        match self {
            HeldLock::Postgres(tx, _) => sqlx::query(sql).execute(&mut **tx).await.map(|_| ()),
            HeldLock::Sqlite(tx) => sqlx::query(sql).execute(&mut **tx).await.map(|_| ()),
        }
        .unwrap();
    }

    /// Commits, letting the waiters in.
    pub async fn release(self) {
        match self {
            HeldLock::Postgres(tx, _) => tx.commit().await,
            HeldLock::Sqlite(tx) => tx.commit().await,
        }
        .unwrap();
    }
}

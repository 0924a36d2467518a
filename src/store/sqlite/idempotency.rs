//! Idempotency-Key records, read and written inside the transaction of the change they guard.

use super::SqliteStore;
use crate::domain::TenantId;
use crate::store::{IdempotencyClaim, StoredAnswer};
use sqlx::{Row, Sqlite, SqliteConnection, Transaction};

impl SqliteStore {
    pub(super) async fn read_answer(
        &self,
        tenant: &TenantId,
        key: &str,
        not_before: i64,
    ) -> Result<Option<StoredAnswer>, sqlx::Error> {
        let mut conn = self.pool.acquire().await?;
        find_answer(&mut conn, tenant, key, not_before).await
    }
}

pub(super) async fn find_answer(
    conn: &mut SqliteConnection,
    tenant: &TenantId,
    key: &str,
    not_before: i64,
) -> Result<Option<StoredAnswer>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT fingerprint, status, response FROM idempotency_keys \
         WHERE tenant = ?1 AND key = ?2 AND created_at >= ?3",
    )
    .bind(tenant.as_str())
    .bind(key)
    .bind(not_before)
    .fetch_optional(conn)
    .await?;
    row.map(|row| {
        Ok(StoredAnswer {
            fingerprint: row.try_get("fingerprint")?,
            status: u16::try_from(row.try_get::<i64, _>("status")?)
                .map_err(|e| sqlx::Error::Decode(e.into()))?,
            body: row.try_get("response")?,
        })
    })
    .transpose()
}

/// Records the answer (and forgets this tenant's expired records while at it).
pub(super) async fn record_answer(
    tx: &mut Transaction<'_, Sqlite>,
    tenant: &TenantId,
    claim: &IdempotencyClaim,
    status: u16,
    body: &[u8],
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM idempotency_keys WHERE tenant = ?1 AND created_at < ?2")
        .bind(tenant.as_str())
        .bind(claim.not_before)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, status, response, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .bind(tenant.as_str())
    .bind(&claim.key)
    .bind(&claim.fingerprint[..])
    .bind(i64::from(status))
    .bind(body)
    .bind(claim.now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

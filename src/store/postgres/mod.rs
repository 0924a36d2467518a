//! The Postgres backend: for teams that share one gatekeeper database across many agents.
//! [`Store`](super::Store) is implemented in `reads.rs`, [`WriteTx`](super::WriteTx) in `tx.rs`.

mod backfill;
mod feed;
mod layout;
mod lifecycle;
mod reads;
mod reasons;
mod reconstructs;
mod replicas;
mod search;
mod term_buckets;
mod tx;

pub use layout::{MAX_PARTITIONS, PARTITIONED_TABLES};
pub use tx::PgTx;

use sqlx::PgPool;
use sqlx::error::DatabaseError;
use sqlx::migrate::{MigrateDatabase, Migrator};
use sqlx::postgres::{PgConnectOptions, PgDatabaseError, PgPoolOptions, PgSslMode};
use std::str::FromStr;
use std::time::Duration;

pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Clone, Debug)]
pub struct PgStore {
    /// Where reads go: the primary, or the replica [`Store::for_reads`](super::Store::for_reads)
    /// chose.
    read_pool: PgPool,
    /// The reconstruct lookups bound for `read_pool`, sent in batches.
    reconstructs: std::sync::Arc<reconstructs::Reconstructs>,
    /// Writes, locks, the feed, migrations.
    primary: PgPool,
    replicas: Option<std::sync::Arc<replicas::Replicas>>,
    on_replica: bool,
    /// Whether the big tables are hash-partitioned (and so every connection plans generically).
    partitioned: bool,
}

impl PgStore {
    /// The `application_name` of each process's checkpoint feed connection, as
    /// `pg_stat_activity` shows it.
    pub const FEED_APPLICATION_NAME: &str = feed::APPLICATION_NAME;

    /// The `application_name` of the connections that carry reconstruct's batched lookups.
    pub const RECONSTRUCT_APPLICATION_NAME: &str = reconstructs::APPLICATION_NAME;

    /// Connects, creating the database if it does not exist, applies the migrations and the
    /// partition layout (`None`: left as it is). While the server is not up yet (a container
    /// starting beside it), retries with backoff for up to `startup_wait`, saying what it waits
    /// for.
    pub async fn connect_waiting(
        url: &str,
        pool_size: u32,
        acquire_timeout: Duration,
        startup_wait: Duration,
        partitions: Option<u32>,
    ) -> anyhow::Result<Self> {
        let url = &plaintext_on_loopback_by_default(url)?;
        let options = PgConnectOptions::from_str(url)?;
        check_certificate_files(url, options.get_ssl_mode())?;
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(250);
        let exists = loop {
            match sqlx::Postgres::database_exists(url).await {
                Ok(exists) => break exists,
                Err(e) if is_not_up_yet(&e) && started.elapsed() + pause <= startup_wait => {
                    tracing::warn!(
                        server = format!("{}:{}", options.get_host(), options.get_port()),
                        error = %e,
                        retry_in_ms = pause.as_millis() as u64,
                        "waiting for Postgres to accept connections"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(connect_error(&options, started.elapsed(), e)),
            }
        };
        if !exists {
            tracing::info!(
                database = options.get_database().unwrap_or_default(),
                "creating the database"
            );
            // Another process may create it at the same moment; that is fine.
            if let Err(e) = sqlx::Postgres::create_database(url).await
                && !sqlx::Postgres::database_exists(url).await.unwrap_or(false)
            {
                return Err(e.into());
            }
        }
        // The schema first, on a connection of its own: the pool's settings depend on its layout.
        let setup = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(acquire_timeout)
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&setup).await?;
        if let Some(partitions) = partitions {
            layout::apply(&setup, partitions).await?;
        }
        let partitioned = layout::is_partitioned(&setup).await?;
        setup.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(acquire_timeout)
            .connect_with(layout::session_options(options.clone(), partitioned))
            .await?;
        let store = Self {
            partitioned,
            ..Self::from_pool(pool)
        };
        store.log_transport(&options).await;
        Ok(store)
    }

    /// Whether a pooled connection is encrypted, as the server sees it (`pg_stat_ssl`).
    pub async fn connection_encrypted(&self) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_optional(&self.read_pool)
            .await
            .map(|ssl: Option<bool>| ssl.unwrap_or(false))
    }

    /// Says once, at start, whether the connection is encrypted and its certificate checked:
    /// under the default `sslmode=prefer` a server without TLS is used in plaintext, and that
    /// should not go unnoticed when the server is on another host.
    async fn log_transport(&self, options: &PgConnectOptions) {
        let server = format!("{}:{}", options.get_host(), options.get_port());
        let sslmode = ssl_mode_name(options.get_ssl_mode());
        let verified = matches!(
            options.get_ssl_mode(),
            PgSslMode::VerifyCa | PgSslMode::VerifyFull
        );
        let local = is_local(options);
        match self.connection_encrypted().await {
            Ok(true) => tracing::info!(
                server,
                sslmode,
                certificate_verified = verified,
                "connected to Postgres over TLS"
            ),
            // Nothing crosses a network, or plaintext was asked for (`sslmode=disable`).
            Ok(false) if local || matches!(options.get_ssl_mode(), PgSslMode::Disable) => {
                tracing::info!(server, sslmode, "connected to Postgres without TLS")
            }
            Ok(false) => tracing::warn!(
                server,
                sslmode,
                "the connection to Postgres is NOT encrypted; set \
                 sslmode=verify-full&sslrootcert=<CA file> in DATABASE_URL to refuse plaintext \
                 and check the server's certificate"
            ),
            Err(e) => tracing::debug!(
                server,
                error = %e,
                "cannot tell whether the connection to Postgres is encrypted"
            ),
        }
    }

    /// Wraps a pool whose database is already migrated.
    pub fn from_pool(pool: PgPool) -> Self {
        Self {
            primary: pool.clone(),
            reconstructs: reconstructs::Reconstructs::new(&pool),
            read_pool: pool,
            replicas: None,
            on_replica: false,
            partitioned: false,
        }
    }

    /// The primary's pool.
    pub fn pool(&self) -> &PgPool {
        &self.primary
    }

    /// Sends reads to these streaming replicas when they can answer them (see `replicas.rs`).
    pub fn with_replicas(
        mut self,
        urls: &[String],
        pool_size: u32,
        acquire_timeout: Duration,
        max_wait: Duration,
        max_lag: u64,
    ) -> anyhow::Result<Self> {
        if !urls.is_empty() {
            self.replicas = Some(replicas::Replicas::start(
                &self.primary,
                urls,
                self.partitioned,
                pool_size,
                acquire_timeout,
                max_wait,
                max_lag,
            )?);
        }
        Ok(self)
    }
}

/// Errors that mean "the server is not accepting connections yet": refused, reset, or starting up.
/// A failed TLS handshake (a certificate refused: an I/O error of kind `InvalidData` from rustls,
/// or sqlx's own TLS error) will not heal by waiting.
fn is_not_up_yet(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(io) => io.kind() != std::io::ErrorKind::InvalidData,
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| c == "57P03"),
        _ => false,
    }
}

fn is_tls_failure(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Tls(_) => true,
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::InvalidData,
        _ => false,
    }
}

/// Why the first connection failed, naming the server, and for a TLS failure the `sslmode`.
fn connect_error(options: &PgConnectOptions, waited: Duration, e: sqlx::Error) -> anyhow::Error {
    let server = format!("{}:{}", options.get_host(), options.get_port());
    if !is_tls_failure(&e) {
        return anyhow::anyhow!(
            "cannot reach Postgres at {server} (waited {:.1}s): {e}",
            waited.as_secs_f64()
        );
    }
    // A refused certificate comes from rustls as an I/O error (`InvalidData`).
    let certificate = matches!(e, sqlx::Error::Io(_));
    let hint = match options.get_ssl_mode() {
        _ if !certificate => "",
        PgSslMode::VerifyCa => {
            "; sslrootcert must hold the CA that signed the server's certificate"
        }
        PgSslMode::VerifyFull => {
            "; sslrootcert must hold the CA that signed the server's certificate, and the \
             certificate must name the host of DATABASE_URL"
        }
        _ => "",
    };
    anyhow::anyhow!(
        "cannot connect to Postgres at {server} over TLS (sslmode={}): {e}{hint}",
        ssl_mode_name(options.get_ssl_mode())
    )
}

/// Reads the certificate files that `DATABASE_URL` (or `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`)
/// names, up front: a missing or unreadable one is a configuration error, said with its path,
/// not a server to wait for (sqlx would report a bare I/O error, retried as "not up yet"). The
/// root certificate only where it is read: under `verify-ca` and `verify-full`.
fn check_certificate_files(url: &str, mode: PgSslMode) -> anyhow::Result<()> {
    let url = url::Url::parse(url)?;
    let verifies = matches!(mode, PgSslMode::VerifyCa | PgSslMode::VerifyFull);
    let settings = [
        (
            "sslrootcert",
            &["sslrootcert", "ssl-root-cert", "ssl-ca"][..],
            "PGSSLROOTCERT",
        ),
        ("sslcert", &["sslcert", "ssl-cert"][..], "PGSSLCERT"),
        ("sslkey", &["sslkey", "ssl-key"][..], "PGSSLKEY"),
    ];
    for (name, keys, env) in settings {
        if name == "sslrootcert" && !verifies {
            continue;
        }
        let in_url = url
            .query_pairs()
            .filter(|(key, _)| keys.contains(&key.as_ref()))
            .map(|(_, value)| value.into_owned())
            .last();
        let Some(path) = in_url.or_else(|| std::env::var(env).ok()) else {
            continue;
        };
        if let Err(e) = std::fs::File::open(&path) {
            anyhow::bail!(
                "cannot read the {name} file {path} named for the Postgres connection: {e}"
            );
        }
    }
    Ok(())
}

/// The `sslmode` as it is spelled in a URL.
fn ssl_mode_name(mode: PgSslMode) -> &'static str {
    match mode {
        PgSslMode::Disable => "disable",
        PgSslMode::Allow => "allow",
        PgSslMode::Prefer => "prefer",
        PgSslMode::Require => "require",
        PgSslMode::VerifyCa => "verify-ca",
        PgSslMode::VerifyFull => "verify-full",
    }
}

/// The URL with `sslmode=disable` added when it names no `sslmode` (nor does `PGSSLMODE`) and
/// the server is on this machine: TLS there protects nothing, and on loopback it cost nearly
/// half of the reconstruct throughput that reaches the database (bench/load.sh, scale 0.2:
/// 13,244 req/s with TLS, 24,453 without). Any other host keeps sqlx's and libpq's `prefer`.
fn plaintext_on_loopback_by_default(url: &str) -> anyhow::Result<std::borrow::Cow<'_, str>> {
    let parsed = url::Url::parse(url)?;
    let named = parsed
        .query_pairs()
        .any(|(key, _)| key == "sslmode" || key == "ssl-mode")
        || std::env::var_os("PGSSLMODE").is_some();
    if named || !is_local(&PgConnectOptions::from_str(url)?) {
        return Ok(url.into());
    }
    let joint = if parsed.query().is_some() { '&' } else { '?' };
    Ok(format!("{url}{joint}sslmode=disable").into())
}

/// A Unix socket or a loopback address: nothing crosses a network.
fn is_local(options: &PgConnectOptions) -> bool {
    options.get_socket().is_some()
        || options.get_host().starts_with('/')
        || options.get_host().eq_ignore_ascii_case("localhost")
        || options
            .get_host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Postgres faults a retry may fix: 08xxx connection exceptions, 57P01..03 shutdown or not
/// accepting connections yet, 53300 too many connections, 40001/40P01 serialization failure or
/// deadlock.
pub(super) fn is_transient(e: &dyn DatabaseError) -> bool {
    e.try_downcast_ref::<PgDatabaseError>().is_some_and(|pg| {
        let code = pg.code();
        code.starts_with("08")
            || code.starts_with("57P")
            || matches!(code, "53300" | "40001" | "40P01")
    })
}

#[cfg(test)]
mod tests {
    use super::plaintext_on_loopback_by_default as defaulted;

    #[test]
    fn a_loopback_server_without_a_named_sslmode_is_reached_in_plaintext() {
        for (url, expected) in [
            (
                "postgres://u@127.0.0.1:5432/gk",
                "postgres://u@127.0.0.1:5432/gk?sslmode=disable",
            ),
            (
                "postgres://u@localhost/gk?application_name=a",
                "postgres://u@localhost/gk?application_name=a&sslmode=disable",
            ),
            (
                "postgres://u@[::1]:5432/gk",
                "postgres://u@[::1]:5432/gk?sslmode=disable",
            ),
            (
                "postgres:///gk?host=/var/run/postgresql",
                "postgres:///gk?host=/var/run/postgresql&sslmode=disable",
            ),
        ] {
            assert_eq!(defaulted(url).unwrap(), expected);
        }
    }

    #[test]
    fn a_named_sslmode_or_another_host_keeps_the_url_as_it_is() {
        for url in [
            "postgres://u@127.0.0.1/gk?sslmode=prefer",
            "postgres://u@127.0.0.1/gk?sslmode=require&sslrootcert=/ca.pem",
            "postgres://u@localhost/gk?ssl-mode=verify-full",
            "postgres://u@db.internal:5432/gk",
            "postgres://u@10.1.2.3/gk?application_name=a",
        ] {
            assert_eq!(defaulted(url).unwrap(), url);
        }
    }
}

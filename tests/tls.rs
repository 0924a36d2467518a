//! TLS to Postgres, through the service's own store (`PgStore::connect`, as `serve` connects):
//!
//! - on the local server (`ssl = on`, Debian's snakeoil certificate), `sslmode=require` and
//!   `prefer` really encrypt, as the server sees it (`pg_stat_ssl`); `disable` does not, nor does
//!   a URL naming no `sslmode` on a loopback address (the service's default there);
//!   an `sslrootcert` file that is not there is refused at once, naming it;
//! - on a throwaway cluster started here with a CA and a server certificate made here (the
//!   `openssl` CLI), `verify-full` with that CA succeeds by name and by address, and is refused
//!   at once, saying why, with the wrong root, or with a host the certificate does not name;
//!   so does `verify-ca` (sqlx 0.8.6 fails it closed); `require` checks no certificate; and on the same server with
//!   TLS turned off, `require` is refused and `prefer` falls back to plaintext.
//!
//! Needs the local Postgres (`GATEKEEPER_TLS_TEST_SERVER`, default
//! `postgres://postgres@127.0.0.1:5432`) and the Postgres server binaries (`initdb`, `pg_ctl`;
//! run as the `postgres` user when the tests run as root). Outside CI (`CI` unset), a machine
//! without a Postgres there skips these tests, saying so; under CI they fail instead.

use gatekeeper::config::DatabaseConfig;
use gatekeeper::store::{PgStore, Store};
use gatekeeper_test_support::db::{PgDatabase, ScratchDir};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const SNAKEOIL: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

fn server() -> String {
    std::env::var("GATEKEEPER_TLS_TEST_SERVER")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// Whether the local Postgres is there; outside CI, its absence skips the test (loudly).
fn local_postgres_or_skip(test: &str) -> bool {
    let server = server();
    let address = server
        .rsplit_once('@')
        .map_or(server.as_str(), |(_, address)| address);
    let reachable = address
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .is_some_and(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
    if !reachable {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: no Postgres at {server} (set GATEKEEPER_TLS_TEST_SERVER)"
        );
        eprintln!("{test}: SKIPPED, no Postgres at {server}");
    }
    reachable
}

/// Connects as `serve` does; `startup_wait` long enough that a retried failure would show.
async fn connect(url: &str) -> anyhow::Result<PgStore> {
    PgStore::connect(&DatabaseConfig {
        database_url: Some(url.to_owned()),
        pool_size: 2,
        acquire_timeout_secs: 10,
        startup_wait_secs: 30,
        ..DatabaseConfig::default()
    })
    .await
}

/// `pg_stat_ssl` for the connection the query runs on: what the server sees.
async fn server_sees_tls(store: &PgStore) -> bool {
    let ssl: Option<bool> =
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(store.pool())
            .await
            .expect("pg_stat_ssl is readable");
    ssl.expect("the backend has a pg_stat_ssl row")
}

#[tokio::test]
async fn require_and_prefer_encrypt_on_the_local_server_and_the_loopback_default_does_not() {
    if !local_postgres_or_skip(
        "require_and_prefer_encrypt_on_the_local_server_and_the_loopback_default_does_not",
    ) {
        return;
    }
    for (query, encrypted) in [
        ("?sslmode=require", true),
        ("?sslmode=prefer", true), // this server offers TLS
        ("", false), // the default on a loopback address: plaintext (nothing crosses a network)
        ("?sslmode=disable", false),
    ] {
        let db = PgDatabase::named(&format!("{}/postgres{query}", server()), "gk_tls");
        let store = connect(&db.url())
            .await
            .unwrap_or_else(|e| panic!("{query:?} connects: {e:#}"));
        assert!(store.ready().await.unwrap(), "{query:?}: migrated");
        assert_eq!(server_sees_tls(&store).await, encrypted, "{query:?}");
        assert_eq!(
            store.connection_encrypted().await.unwrap(),
            encrypted,
            "{query:?}"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn a_missing_root_certificate_file_is_refused_at_once_naming_it() {
    if !local_postgres_or_skip("a_missing_root_certificate_file_is_refused_at_once_naming_it") {
        return;
    }
    let started = Instant::now();
    let url = format!(
        "{}/postgres?sslmode=verify-full&sslrootcert=/nonexistent/gk-ca.pem",
        server()
    );
    let error = format!("{:#}", connect(&url).await.expect_err("no such CA file"));
    eprintln!("verify-full with a missing sslrootcert: {error}");
    assert!(
        error.contains("sslrootcert") && error.contains("/nonexistent/gk-ca.pem"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "not retried");
}

#[tokio::test]
async fn verify_full_accepts_only_the_ca_and_the_names_of_the_servers_certificate() {
    if !local_postgres_or_skip(
        "verify_full_accepts_only_the_ca_and_the_names_of_the_servers_certificate",
    ) {
        return;
    }
    let cluster = TempCluster::start();
    let ca = cluster.ca.display().to_string();
    let port = cluster.port;

    // The CA that signed the server's certificate: accepted by name and by address.
    for host in ["localhost", "127.0.0.1"] {
        let url = format!(
            "postgres://postgres@{host}:{port}/gatekeeper?sslmode=verify-full&sslrootcert={ca}"
        );
        let store = connect(&url)
            .await
            .unwrap_or_else(|e| panic!("verify-full to {host} with the right CA: {e:#}"));
        assert!(store.ready().await.unwrap());
        assert!(server_sees_tls(&store).await, "verify-full to {host}");
        store.close().await;
    }

    // Another root (the local server's snakeoil certificate): refused at once, saying why,
    // not retried for the start-up wait as if the server were still starting.
    let started = Instant::now();
    let url = format!(
        "postgres://postgres@localhost:{port}/gatekeeper?sslmode=verify-full&sslrootcert={SNAKEOIL}"
    );
    let error = format!(
        "{:#}",
        connect(&url)
            .await
            .expect_err("verify-full with the wrong root must be refused")
    );
    eprintln!("verify-full with the wrong root: {error}");
    assert!(
        error.contains("over TLS (sslmode=verify-full)")
            && error.contains("invalid peer certificate")
            && error.contains("UnknownIssuer")
            && error.contains(&format!("localhost:{port}")),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "not retried");

    // The right CA but a host the certificate does not name (127.0.0.2 reaches the same server):
    // verify-full refuses it. So does verify-ca, stricter than libpq's (which checks only the
    // CA): sqlx 0.8.6 lets only rustls' older form of the name error through, so the mode fails
    // closed. The README says so.
    let url = format!(
        "postgres://postgres@127.0.0.2:{port}/gatekeeper?sslmode=verify-full&sslrootcert={ca}"
    );
    let error = format!(
        "{:#}",
        connect(&url)
            .await
            .expect_err("verify-full to a host the certificate does not name")
    );
    eprintln!("verify-full to a name the certificate lacks: {error}");
    assert!(error.contains("certificate not valid for name"), "{error}");
    let url = format!(
        "postgres://postgres@127.0.0.2:{port}/gatekeeper?sslmode=verify-ca&sslrootcert={ca}"
    );
    let error = format!(
        "{:#}",
        connect(&url)
            .await
            .expect_err("verify-ca to a host the certificate does not name")
    );
    assert!(
        error.contains("over TLS (sslmode=verify-ca)")
            && error.contains("certificate not valid for name"),
        "{error}"
    );
    // verify-ca by a name the certificate holds connects.
    let url = format!(
        "postgres://postgres@localhost:{port}/gatekeeper?sslmode=verify-ca&sslrootcert={ca}"
    );
    let store = connect(&url).await.expect("verify-ca with the right CA");
    assert!(server_sees_tls(&store).await);
    store.close().await;

    // As in sqlx (unlike libpq), `require` encrypts but never checks the certificate, even with
    // an sslrootcert: the wrong root connects. The README says so; verify-* is what checks.
    let url = format!(
        "postgres://postgres@localhost:{port}/gatekeeper?sslmode=require&sslrootcert={SNAKEOIL}"
    );
    let store = connect(&url).await.expect("require does not verify");
    assert!(server_sees_tls(&store).await);
    store.close().await;

    // A server without TLS: `require` is refused, saying so; the default `prefer` falls back to
    // plaintext (and the service logs it).
    cluster.psql("ALTER SYSTEM SET ssl = off");
    cluster.psql("SELECT pg_reload_conf()");
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.psql("SHOW ssl") != "off" {
        assert!(Instant::now() < deadline, "ssl = off took effect");
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!("postgres://postgres@127.0.0.1:{port}/gatekeeper?sslmode=require");
    let error = format!(
        "{:#}",
        connect(&url).await.expect_err("require without TLS")
    );
    eprintln!("require to a server without TLS: {error}");
    assert!(error.contains("server does not support TLS"), "{error}");
    let url = format!("postgres://postgres@127.0.0.1:{port}/gatekeeper?sslmode=prefer");
    let store = connect(&url).await.expect("prefer falls back");
    assert!(!server_sees_tls(&store).await);
    store.close().await;
}

/// A throwaway Postgres cluster on a free port, with `ssl = on` and a certificate for
/// `localhost` and `127.0.0.1` signed by a CA made for it; stopped (and its folder removed) when
/// dropped, whatever the test did.
struct TempCluster {
    dir: ScratchDir,
    bin: PathBuf,
    port: u16,
    ca: PathBuf,
}

impl TempCluster {
    fn start() -> TempCluster {
        let bin = postgres_bin();
        let dir = ScratchDir::new("gk_tls_cluster");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let certs = dir.path().join("certs");
        let data = dir.path().join("data");
        std::fs::create_dir(&certs).unwrap();
        make_certificates(&certs);
        chown_to_postgres(dir.path());
        chown_to_postgres(&certs);
        for file in ["server.crt", "server.key"] {
            chown_to_postgres(&certs.join(file));
        }
        let cluster = TempCluster {
            ca: certs.join("ca.pem"),
            dir,
            bin,
            port,
        };
        cluster.as_postgres(
            "initdb",
            &[
                "-D",
                &data.display().to_string(),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
        );
        let settings = format!(
            "\nport = {port}\nlisten_addresses = '127.0.0.1,127.0.0.2'\n\
             unix_socket_directories = '{socket}'\nssl = on\n\
             ssl_cert_file = '{certs}/server.crt'\nssl_key_file = '{certs}/server.key'\n\
             fsync = off\nshared_buffers = 16MB\nmax_connections = 20\n",
            socket = cluster.dir.path().display(),
            certs = certs.display(),
        );
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("initdb wrote postgresql.conf");
        text.push_str(&settings);
        std::fs::write(&conf, text).unwrap();
        cluster.as_postgres(
            "pg_ctl",
            &[
                "-D",
                &data.display().to_string(),
                "-l",
                &cluster.dir.path().join("server.log").display().to_string(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        cluster
    }

    /// Runs a server binary as the `postgres` user (initdb and the server refuse root).
    fn as_postgres(&self, program: &str, args: &[&str]) -> Output {
        let program = self.bin.join(program);
        let output = if running_as_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .current_dir(self.dir.path())
                .output()
        } else {
            Command::new(&program)
                .args(args)
                .current_dir(self.dir.path())
                .output()
        }
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        assert!(
            output.status.success(),
            "{} {args:?}: {}\n{}\n{}\nserver log:\n{log}",
            program.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        output
    }

    /// One statement through psql over the cluster's socket; its output, trimmed.
    fn psql(&self, sql: &str) -> String {
        let output = Command::new("psql")
            .args(["-h", &self.dir.path().display().to_string()])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
            ])
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            output.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let pg_ctl = self.bin.join("pg_ctl");
        let args = [
            "-D",
            &data.display().to_string(),
            "-m",
            "immediate",
            "-w",
            "stop",
        ];
        let stopped = if running_as_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&pg_ctl)
                .args(args)
                .output()
        } else {
            Command::new(&pg_ctl).args(args).output()
        };
        if !stopped.is_ok_and(|o| o.status.success()) && data.join("postmaster.pid").exists() {
            eprintln!("the temporary cluster in {} did not stop", data.display());
        }
        // The ScratchDir field removes the folder after this.
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` (Debian), else the folder of `initdb` on the
/// PATH.
fn postgres_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let initdb = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
        .expect("sh runs");
    let path = String::from_utf8_lossy(&initdb.stdout).trim().to_owned();
    assert!(
        !path.is_empty(),
        "the Postgres server binaries (initdb) are installed"
    );
    Path::new(&path).parent().unwrap().to_path_buf()
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `chown postgres:postgres`, when running as root (otherwise the files are already ours).
fn chown_to_postgres(path: &Path) {
    if running_as_root() {
        let status = Command::new("chown")
            .arg("postgres:postgres")
            .arg(path)
            .status()
            .expect("chown runs");
        assert!(status.success(), "chown {}", path.display());
    }
}

/// A CA (`ca.pem`) and a server certificate it signs for `localhost` and `127.0.0.1`
/// (`server.crt`, key `server.key` with mode 0600), P-256, valid for two days.
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let output = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl CLI runs");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2"],
            &["-subj", "/CN=gatekeeper test CA"],
            &["-addext", "basicConstraints=critical,CA:TRUE"],
            &["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &["-keyout", "server.key", "-out", "server.csr"],
            &["-subj", "/CN=localhost"],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints = CA:FALSE\nkeyUsage = critical, digitalSignature\n\
         extendedKeyUsage = serverAuth\nsubjectAltName = DNS:localhost, IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.crt",
    ]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.join("server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
}

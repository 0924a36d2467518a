//! The real binary's life: configuration errors, draining on SIGTERM, waiting for Postgres.

use gatekeeper_test_support::free_port;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gatekeeper"));
    command
        .env_remove("DATABASE_URL")
        .env_remove("GATEKEEPER_API_KEYS")
        .env("GATEKEEPER_LOG", "info")
        .kill_on_drop(true);
    command
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gk-lifecycle-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn start(data_dir: &PathBuf, port: u16, extra_env: &[(&str, &str)]) -> Child {
    start_logging_to(data_dir, port, extra_env, Stdio::null()).await
}

/// [`start`], its log (stdout) written to `log`.
async fn start_logging_to(
    data_dir: &PathBuf,
    port: u16,
    extra_env: &[(&str, &str)],
    log: Stdio,
) -> Child {
    let mut command = binary();
    command
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("GATEKEEPER_DATA_DIR", data_dir)
        .stdout(log)
        .stderr(Stdio::null());
    for (k, v) in extra_env {
        command.env(k, v);
    }
    let child = command.spawn().expect("the binary starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if reqwest::get(format!("http://127.0.0.1:{port}/readyz"))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service did not become ready");
}

fn sigterm(child: &Child) {
    let pid = child.id().expect("still running").to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Real turns from the tau-bench data, as an append body.
fn append_body(n: usize) -> Vec<u8> {
    let data = gatekeeper::tau_bench::read_default().unwrap();
    let turns: Vec<Value> = data
        .iter()
        .flat_map(|c| &c.turns)
        .take(n)
        .enumerate()
        .map(|(i, t)| json!({ "id": i, "role": t.role, "content": t.text() }))
        .collect();
    serde_json::to_vec(&json!({ "turns": turns })).unwrap()
}

#[tokio::test]
async fn a_request_in_flight_when_sigterm_arrives_completes_and_is_kept() {
    let dir = scratch_dir("drain");
    let port = free_port();
    let log_path = dir.with_extension("log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = start_logging_to(&dir, port, &[], log.into()).await;

    // Send the headers and half the body, so the request is in flight for sure.
    let body = append_body(50);
    let mut socket = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = format!(
        "POST /v1/conversations/drain/turns HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let (first, rest) = body.split_at(body.len() / 2);
    socket.write_all(first).await.unwrap();
    // A probe on a connection of its own, its request line sent: the listener stops accepting
    // at the signal, but a connection with a request under way is served to the end.
    let mut probe = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    probe
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    sigterm(&child);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Draining: the probe is answered, and the answer is "not ready", for the drain's reason.
    probe.write_all(b"Connection: close\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    probe.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 503"),
        "a draining service answers 503: {answer}"
    );
    assert!(
        answer.contains("urn:gatekeeper:problem:unavailable"),
        "{answer}"
    );
    assert!(answer.contains("retry-after: 1"), "{answer}");

    socket.write_all(rest).await.unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).await.unwrap();
    assert!(
        response.starts_with("HTTP/1.1 201"),
        "the in-flight append completed: {response}"
    );
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits after draining")
        .unwrap();
    assert!(status.success(), "a drained shutdown exits 0: {status:?}");
    // The 503's body is the same for every unavailability; the log says it was the drain.
    let log = std::fs::read_to_string(&log_path).unwrap();
    let _ = std::fs::remove_file(&log_path);
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("draining: shutdown has begun")),
        "the 503 was the drain's: {log}"
    );

    // What was acknowledged is there after a restart.
    let child = start(&dir, port, &[]).await;
    let conversation: Value =
        reqwest::get(format!("http://127.0.0.1:{port}/v1/conversations/drain"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(conversation["next_id"], 50);
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_request_that_never_finishes_does_not_hold_the_shutdown_past_the_drain_timeout() {
    let dir = scratch_dir("stuck");
    let port = free_port();
    let mut child = start(&dir, port, &[("GATEKEEPER_DRAIN_TIMEOUT_SECS", "1")]).await;
    let mut socket = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = "POST /v1/conversations/stuck/turns HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"turns\":";
    socket.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    sigterm(&child);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits")
        .unwrap();
    assert!(status.success());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the drain timeout"
    );
    // The half-sent batch was never acknowledged, and nothing of it was written.
    let child = start(&dir, port, &[]).await;
    let answer = reqwest::get(format!("http://127.0.0.1:{port}/v1/conversations/stuck"))
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_postgres_that_is_not_up_is_waited_for_with_backoff_and_then_given_up_on_in_one_line() {
    let port = free_port(); // nothing listens there
    let output = binary()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env(
            "DATABASE_URL",
            format!("postgres://postgres@127.0.0.1:{port}/gatekeeper"),
        )
        .env("GATEKEEPER_DB_STARTUP_WAIT_SECS", "2")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout.contains("waiting for Postgres to accept connections"),
        "it says what it waits for: {stdout}"
    );
    assert!(
        stdout.matches("waiting for Postgres").count() >= 2,
        "it retried: {stdout}"
    );
    let last = stderr.trim();
    assert_eq!(last.lines().count(), 1, "one clear line: {last}");
    assert!(
        last.starts_with("gatekeeper: cannot reach Postgres at 127.0.0.1:"),
        "{last}"
    );
}

#[tokio::test]
async fn invalid_configuration_stops_the_start_with_one_clear_line() {
    // (arguments, environment, what the one line must say)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (&["serve", "--prose-ratio", "abc"], &[], "compression ratio"),
        (
            &["serve"],
            &[("GATEKEEPER_TOKENIZER", "gpt2")],
            "unknown tokenizer",
        ),
        (
            &["serve"],
            &[("GATEKEEPER_DEFAULT_MODE", "lenient")],
            "unknown mode",
        ),
        (
            &["serve", "--listen", "0.0.0.0:0"],
            &[],
            "no API keys are configured",
        ),
        (
            &["serve"],
            &[("GATEKEEPER_API_KEYS", "acme:short")],
            "shorter than 16",
        ),
        (
            &["serve"],
            &[("DATABASE_URL", "mysql://x")],
            "DATABASE_URL must start with",
        ),
        (&["serve"], &[("GATEKEEPER_LOG", "[[[")], "log level"),
        (
            &["serve"],
            &[("GATEKEEPER_RATE_LIMIT_PER_SEC", "1e-300")],
            "rate limit must be 0 (off) or at least",
        ),
        (
            &["serve"],
            &[("GATEKEEPER_IDEMPOTENCY_TTL_SECS", "18446744073709551615")],
            "Idempotency-Key TTL must be between",
        ),
        (
            &["serve"],
            &[(
                "GATEKEEPER_API_KEYS",
                "a:0123456789abcdef,b:0123456789abcdef",
            )],
            "repeats an earlier entry's key",
        ),
        (
            &["serve"],
            &[("GATEKEEPER_RETENTION_DAYS", "0")],
            "retention days and the retention sweep interval must be positive",
        ),
        (
            &["serve"],
            &[("GATEKEEPER_RETENTION_SWEEP_SECS", "0")],
            "retention days and the retention sweep interval must be positive",
        ),
        (
            &["serve"],
            &[(
                "GATEKEEPER_API_KEYS",
                "acme:0123456789abcdef retention_days=soon",
            )],
            "only `retention_days=N` (N ≥ 1) or `retention_days=off` may follow",
        ),
        (
            &["serve"],
            &[("GATEKEEPER_PG_PARTITIONS", "4")],
            "GATEKEEPER_PG_PARTITIONS applies to a Postgres DATABASE_URL only",
        ),
        (
            &["serve"],
            &[
                ("DATABASE_URL", "postgres://127.0.0.1:1/x"),
                ("GATEKEEPER_PG_PARTITIONS", "257"),
            ],
            "--pg-partitions <PG_PARTITIONS>': 257 is not in 0..=256",
        ),
        (
            &["serve"],
            &[("GATEKEEPER_READ_DATABASE_URLS", "postgres://127.0.0.1:1/x")],
            "must be postgres:// URLs, beside a Postgres DATABASE_URL",
        ),
        (
            &["serve"],
            &[
                ("DATABASE_URL", "postgres://127.0.0.1:1/x"),
                ("GATEKEEPER_READ_DATABASE_URLS", "sqlite://replica.db"),
                ("GATEKEEPER_DB_STARTUP_WAIT_SECS", "0"),
            ],
            "read replicas (sqlite://replica.db) must be postgres:// URLs",
        ),
    ];
    for (args, env, expected) in cases {
        let mut command = binary();
        command.args(*args);
        for (k, v) in *env {
            command.env(k, v);
        }
        let output = command.output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} {env:?} must not start");
        assert_eq!(
            stderr.trim().lines().count(),
            1,
            "one line for {args:?} {env:?}: {stderr}"
        );
        assert!(stderr.contains(expected), "{args:?} {env:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[tokio::test]
async fn keys_summaries_and_contents_never_reach_the_logs_at_info() {
    let dir = scratch_dir("logs");
    let port = free_port();
    let log = dir.with_extension("log");
    std::fs::create_dir_all(&dir).unwrap();
    let key = "secret-key-5d1e0c9a8b7f6e5d";
    let mut child = binary()
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("GATEKEEPER_DATA_DIR", &dir)
        .env("GATEKEEPER_API_KEYS", format!("ops:{key}"))
        .env("DATABASE_URL", "")
        .env("GATEKEEPER_LOG_FORMAT", "json")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}/v1/conversations/logs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while client
        .get(format!("http://127.0.0.1:{port}/readyz"))
        .send()
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the service did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let turns = json!({ "turns": [
        { "id": 0, "role": "user", "content": "secret-content-a1b2c3 about INV-77", "anchors": ["INV-77"] },
        { "id": 1, "role": "tool", "content": "{\"secret\": \"secret-content-d4e5f6\"}", "anchors": ["secret-anchor-x9"] }
    ]});
    let ok = client
        .post(format!("{base}/turns"))
        .bearer_auth(key)
        .json(&turns)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 201);
    // A conflicting replay, a narrowed proposal, a rejected one and a wrong key: every path
    // that logs.
    let mut conflicting = turns.clone();
    conflicting["turns"][0]["content"] = json!("secret-content-changed");
    assert_eq!(
        client
            .post(format!("{base}/turns"))
            .bearer_auth(key)
            .json(&conflicting)
            .send()
            .await
            .unwrap()
            .status(),
        409
    );
    let proposal = json!({ "from": 0, "to": 1, "summary": "secret-summary-q7 mentions INV-77 and", "summary_budget": 100, "finish_reason": "length" });
    assert_eq!(
        client
            .post(format!("{base}/compactions"))
            .bearer_auth(key)
            .json(&proposal)
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    let rejected = json!({ "from": 0, "to": 1, "summary": "secret-summary-r8", "summary_budget": 100, "mode": "strict" });
    assert_eq!(
        client
            .post(format!("{base}/compactions"))
            .bearer_auth(key)
            .json(&rejected)
            .send()
            .await
            .unwrap()
            .status(),
        422
    );
    assert_eq!(
        client
            .get(format!("{base}/reconstruct/1"))
            .bearer_auth("secret-wrong-key-0000")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        client
            .get(format!("{base}/reconstruct/1"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    sigterm(&child);
    child.wait().await.unwrap();
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(
        logs.contains("compaction decided"),
        "the decision was logged: {logs}"
    );
    assert!(
        logs.lines()
            .filter(|l| l.contains("compaction decided"))
            .all(|l| l.contains("tenant") && l.contains("ops")),
        "each decision names its tenant: {logs}"
    );
    for secret in [
        "secret-key",
        "secret-wrong-key",
        "secret-content",
        "secret-summary",
        "secret-anchor",
    ] {
        assert!(
            !logs.contains(secret),
            "{secret} leaked into the logs:\n{logs}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_sqlite_database_locked_by_another_writer_answers_503_then_recovers() {
    use sqlx::Connection;
    let dir = scratch_dir("locked");
    let port = free_port();
    let child = start(&dir, port, &[("GATEKEEPER_DB_ACQUIRE_TIMEOUT_SECS", "1")]).await;
    // Another process's writer holds SQLite's write lock longer than the busy timeout.
    let url = format!("sqlite://{}", dir.join("gatekeeper.db").display());
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let append = |id: i64| {
        client
            .post(format!("http://127.0.0.1:{port}/v1/conversations/locked/turns"))
            .json(&json!({ "turns": [{ "id": id, "role": "user", "content": "Is my flight HAT170 on time?" }] }))
            .send()
    };
    let busy = append(0).await.unwrap();
    assert_eq!(
        busy.status(),
        503,
        "a locked database is a retryable 503, never a 500"
    );
    assert!(busy.headers().contains_key("retry-after"));
    assert_eq!(busy.headers()["content-type"], "application/problem+json");
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    assert_eq!(
        append(0).await.unwrap().status(),
        201,
        "the retry with the same id succeeds"
    );
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

//! The service under test: the real binary on a free loopback port, and the HTTP calls made to it.

use gatekeeper_test_support::free_port;
use reqwest::Method;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// A service's output, removed when the last holder is dropped, unless a test is failing.
#[derive(Debug)]
pub(crate) struct LogFile(pub(crate) PathBuf);

impl Drop for LogFile {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// The real binary, on a free loopback port, its output in a log file (kept if the test fails).
pub(crate) struct Service {
    child: Child,
    pub(crate) base: String,
    pub(crate) log: Arc<LogFile>,
}

impl Service {
    pub(crate) async fn start(name: &str, env: &[(&str, String)]) -> Service {
        let port = free_port();
        let log = std::env::temp_dir().join(format!(
            "gk-faults-{name}-{}-{port}.log",
            std::process::id()
        ));
        let file = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_gatekeeper"));
        command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .env_remove("DATABASE_URL")
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .kill_on_drop(true);
        // Nothing of the caller's configuration leaks in: only what the test sets.
        for (key, _) in std::env::vars() {
            if key.starts_with("GATEKEEPER_") {
                command.env_remove(key);
            }
        }
        command.env("GATEKEEPER_LOG", "warn");
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the binary starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = client(Duration::from_secs(2));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{name} exited at start ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if http
                .get(format!("{base}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name} was not ready within 60 s; log {}",
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Service {
            child,
            base,
            log: Arc::new(LogFile(log)),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the service is running")
    }

    /// `kill -9`: no drain, no goodbye.
    pub(crate) async fn sigkill(&mut self) {
        self.child.start_kill().expect("SIGKILL is delivered");
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }

    pub(crate) fn rss_kib(&self) -> Option<u64> {
        rss_of(self.pid())
    }

    /// Reads this service's RSS later, from another task.
    pub(crate) fn rss_probe(&self) -> impl Fn() -> Option<u64> + Send + 'static {
        let pid = self.pid();
        move || rss_of(pid)
    }

    pub(crate) fn conversation_url(&self, conversation: &str, rest: &str) -> String {
        format!("{}/v1/conversations/{conversation}{rest}", self.base)
    }
}

fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

pub(crate) fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("a plain HTTP client")
}

/// One HTTP answer, with what the fault checks look at.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) retry_after: Option<String>,
    pub(crate) replayed: bool,
    /// `Gatekeeper-Position`, on write answers when reads may go to replicas.
    pub(crate) position: Option<String>,
    pub(crate) body: Value,
}

pub(crate) async fn call(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    body: Option<&Value>,
    idempotency_key: Option<&str>,
) -> Result<Answer, reqwest::Error> {
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request.json(body);
    }
    if let Some(key) = idempotency_key {
        request = request.header("Idempotency-Key", key);
    }
    answer(request.send().await?).await
}

/// A response as an [`Answer`], its body read.
async fn answer(response: reqwest::Response) -> Result<Answer, reqwest::Error> {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header("content-type").unwrap_or_default();
    let retry_after = header("retry-after");
    let replayed = header("idempotent-replayed").is_some_and(|v| v == "true");
    let position = header("gatekeeper-position");
    let status = response.status().as_u16();
    let text = response.text().await?;
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok(Answer {
        status,
        content_type,
        retry_after,
        replayed,
        position,
        body,
    })
}

/// [`call`] as a client library makes it: an outage answer (`503` with `Retry-After`, which
/// changed nothing) is retried after its pause, at most `MAX_OUTAGE_RETRIES` times. Returns the
/// last answer and how many outage answers came before it.
pub(crate) async fn call_retrying_outages(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    body: Option<&Value>,
) -> (Result<Answer, reqwest::Error>, u32) {
    const MAX_OUTAGE_RETRIES: u32 = 5;
    let mut retries = 0;
    loop {
        let answer = call(http, method.clone(), url, body, None).await;
        match &answer {
            Ok(a) if retries < MAX_OUTAGE_RETRIES && outage_issue(a).is_none() => {
                retries += 1;
                tokio::time::sleep(retry_pause(a)).await;
            }
            _ => return (answer, retries),
        }
    }
}

/// A GET that must be answered from a state at least as new as `position`.
pub(crate) async fn get_at(
    http: &reqwest::Client,
    url: &str,
    position: &str,
) -> Result<Answer, reqwest::Error> {
    let request = http.get(url).header("Gatekeeper-Min-Position", position);
    answer(request.send().await?).await
}

pub(crate) async fn get(http: &reqwest::Client, url: &str) -> Result<Answer, reqwest::Error> {
    call(http, Method::GET, url, None, None).await
}

/// Every checkpoint a `/compactions` list URL names, newest first, page after page (the list
/// answers 100 a page): a run that makes more must still see its oldest.
pub(crate) async fn all_checkpoints(
    http: &reqwest::Client,
    list_url: &str,
) -> Result<Vec<Value>, String> {
    let mut all = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let url = match cursor {
            Some(c) => format!("{list_url}?cursor={c}"),
            None => list_url.to_owned(),
        };
        let page = match get(http, &url).await {
            Ok(a) if a.status == 200 => a.body,
            other => return Err(format!("listing checkpoints: {other:?}")),
        };
        all.extend(page["checkpoints"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_i64() {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// What is wrong with an answer that should be an outage answer: `503` problem+json of type
/// `unavailable` with a numeric `Retry-After`.
pub(crate) fn outage_issue(a: &Answer) -> Option<String> {
    let mut issues = Vec::new();
    if a.status != 503 {
        issues.push(format!("status {}", a.status));
    }
    if !a.content_type.starts_with("application/problem+json") {
        issues.push(format!("content type {:?}", a.content_type));
    }
    if a.retry_after
        .as_deref()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_none()
    {
        issues.push(format!("Retry-After {:?}", a.retry_after));
    }
    if a.body["status"] != 503
        || !a.body["type"]
            .as_str()
            .is_some_and(|t| t.ends_with(":unavailable"))
    {
        issues.push(format!("body {}", a.body));
    }
    (!issues.is_empty()).then(|| issues.join(", "))
}

/// How long to wait before retrying a `503`: its `Retry-After`, at most a second.
pub(crate) fn retry_pause(a: &Answer) -> Duration {
    a.retry_after
        .as_deref()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_millis(500), Duration::from_secs)
        .min(Duration::from_secs(1))
}

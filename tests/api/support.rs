//! `spawn_app`: the real router on port 0 against a fresh database, and a reqwest client.
#![allow(dead_code)]

pub use crate::test_db::TestDb;
use gatekeeper::config::{ApiKeys, DecisionConfig};
use gatekeeper::domain::Limits;
use gatekeeper::http::AppState;
use gatekeeper::http::reconstruct_cache::ReconstructCache;
use gatekeeper::store::Store;
use gatekeeper::tau_bench::{self, Conversation};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

#[derive(Clone)]
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    /// Sent as the bearer key on every request, when set.
    pub key: Option<String>,
    pub store: Store,
    /// This service's reconstruct answers, to see whether its checkpoint feed is up.
    pub cache: Option<Arc<ReconstructCache>>,
    /// Keeps the test's database alive as long as any handle to the app.
    _db: Arc<TestDb>,
}

pub struct Options {
    pub keys: &'static str,
    pub decision: DecisionConfig,
    pub limits: Limits,
    pub max_body_bytes: usize,
    pub idempotency_ttl: Duration,
    /// Requests per second per tenant (0: no limit) and burst.
    pub rate_limit: (f64, u32),
}

impl Default for Options {
    fn default() -> Self {
        Self {
            keys: "",
            decision: DecisionConfig::default(),
            limits: Limits {
                max_batch_turns: 10_000,
                max_anchors_per_turn: 64,
            },
            max_body_bytes: 32 * 1024 * 1024,
            idempotency_ttl: gatekeeper::server::DEFAULT_IDEMPOTENCY_TTL,
            rate_limit: (0.0, 0),
        }
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(Options::default()).await
}

pub async fn spawn_app_with(options: Options) -> TestApp {
    spawn_app_on(TestDb::fresh().await, options).await
}

/// The app on a database the test prepared.
pub async fn spawn_app_on(db: TestDb, options: Options) -> TestApp {
    let keys = ApiKeys::parse(&options.keys.replace(',', "\n")).expect("test keys parse");
    let mut state = AppState::with_decision(
        db.store.clone(),
        keys,
        &options.decision,
        options.limits,
        options.max_body_bytes,
        Duration::from_secs(30),
    );
    state.idempotency_ttl = options.idempotency_ttl;
    state.rate_limiter =
        gatekeeper::http::rate_limit::RateLimiter::new(options.rate_limit.0, options.rate_limit.1)
            .map(Arc::new);
    let (base, cache) = serve_on_port_0(state).await;
    TestApp {
        base,
        client: reqwest::Client::new(),
        key: None,
        store: db.store.clone(),
        cache,
        _db: Arc::new(db),
    }
}

/// Serves `state` on a free loopback port until the test ends; its base URL and answer cache.
async fn serve_on_port_0(state: AppState) -> (String, Option<Arc<ReconstructCache>>) {
    let cache = state.reconstruct_cache.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(gatekeeper::server::serve(
        listener,
        state,
        std::future::pending(),
        Duration::from_secs(5),
    ));
    (base, cache)
}

impl TestApp {
    /// A second service on the same database, with its own memory (caches, rate buckets), as
    /// a second process would have.
    pub async fn another_process(&self) -> TestApp {
        let state = AppState::with_decision(
            self.store.clone(),
            ApiKeys::default(),
            &DecisionConfig::default(),
            Options::default().limits,
            32 * 1024 * 1024,
            Duration::from_secs(30),
        );
        let (base, cache) = serve_on_port_0(state).await;
        TestApp {
            base,
            cache,
            ..self.clone()
        }
    }

    /// Waits (at most 10 s) until this service's checkpoint feed is up, on a backend that has
    /// one; returns whether it is.
    pub async fn feed_up(&self) -> bool {
        if self.store.backend() != gatekeeper::store::Backend::Postgres {
            return false;
        }
        let cache = self
            .cache
            .as_ref()
            .expect("the answer cache is on by default");
        for _ in 0..1000 {
            if cache.feed_is_up() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the checkpoint feed did not come up within 10 s");
    }

    pub fn with_key(&self, key: &str) -> TestApp {
        TestApp {
            key: Some(key.to_owned()),
            ..self.clone()
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn authed(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    pub async fn get(&self, path: &str) -> Response {
        self.authed(self.client.get(self.url(path)))
            .send()
            .await
            .expect("request sent")
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.authed(self.client.post(self.url(path)).json(body))
            .send()
            .await
            .expect("request sent")
    }

    /// POSTs raw bytes with the given content type.
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> Response {
        self.authed(
            self.client
                .post(self.url(path))
                .header("content-type", content_type)
                .body(body),
        )
        .send()
        .await
        .expect("request sent")
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Response {
        self.authed(self.client.patch(self.url(path)).json(body))
            .send()
            .await
            .expect("request sent")
    }

    /// `PATCH .../turns/{id}` with `{"pinned": pinned}`.
    pub async fn pin(&self, conversation: &str, id: i64, pinned: bool) -> Response {
        self.patch(
            &format!("/v1/conversations/{conversation}/turns/{id}"),
            &json!({ "pinned": pinned }),
        )
        .await
    }

    pub async fn metrics_text(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("request sent")
            .text()
            .await
            .expect("metrics text")
    }

    pub async fn append(&self, conversation: &str, turns: Value) -> Response {
        self.post(
            &format!("/v1/conversations/{conversation}/turns"),
            &json!({ "turns": turns }),
        )
        .await
    }

    pub async fn propose(&self, conversation: &str, proposal: Value) -> Response {
        self.post(
            &format!("/v1/conversations/{conversation}/compactions"),
            &proposal,
        )
        .await
    }

    pub async fn reconstruct(&self, conversation: &str, turn: i64) -> Response {
        self.get(&format!(
            "/v1/conversations/{conversation}/reconstruct/{turn}"
        ))
        .await
    }
}

/// Reads a response's JSON body after checking its status; on a mismatch the body is shown.
pub async fn expect(response: Response, status: StatusCode) -> Value {
    let actual = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = response.text().await.expect("body read");
    assert_eq!(actual, status, "unexpected status; body: {text}");
    if actual.is_client_error() || actual.is_server_error() {
        assert_eq!(
            content_type, "application/problem+json",
            "errors are problem+json; body: {text}"
        );
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text}"))
}

/// The 200 real tau-bench conversations, read once per test process.
pub fn tau() -> &'static [Conversation] {
    static DATA: OnceLock<Vec<Conversation>> = OnceLock::new();
    DATA.get_or_init(|| tau_bench::read_default().expect("tau-bench data beside the repository"))
}

/// Real turns as append JSON (no ids, tokens or anchors: the service fills them in), cycling
/// through the tau-bench conversations until `n` turns.
pub fn tau_turns(n: usize) -> Vec<Value> {
    tau()
        .iter()
        .flat_map(|c| &c.turns)
        .filter(|t| !t.text().trim().is_empty())
        .cycle()
        .take(n)
        .map(|t| json!({ "role": t.role, "content": t.text() }))
        .collect()
}

/// Reads a counter's value (summed over matching label sets) from the Prometheus text.
pub fn metric(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let (name, labels) = name_and_labels
                .split_once('{')
                .unwrap_or((name_and_labels, ""));
            let labels = labels.trim_end_matches('}');
            series.split('{').next() == Some(name)
                && labels
                    .split(',')
                    .filter(|l| !l.is_empty())
                    .all(|l| series.contains(l))
        })
        .filter_map(|(_, value)| value.parse::<f64>().ok())
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the HTTP test modules.
// ---------------------------------------------------------------------------------------------

/// Checks an error response: its status, `application/problem+json`, and the RFC 9457 members
/// `type`, `title`, `status` and `detail`.
pub async fn problem(response: Response, status: StatusCode) -> Value {
    let body = expect(response, status).await;
    check_problem(&body, status);
    body
}

pub fn check_problem(body: &Value, status: StatusCode) {
    assert!(
        body["type"].as_str().is_some_and(|t| !t.is_empty()),
        "problem `type` in {body}"
    );
    assert!(
        body["title"].as_str().is_some_and(|t| !t.is_empty()),
        "problem `title` in {body}"
    );
    assert_eq!(
        body["status"],
        json!(status.as_u16()),
        "problem `status` in {body}"
    );
    assert!(
        body["detail"].as_str().is_some_and(|t| !t.is_empty()),
        "problem `detail` in {body}"
    );
}

/// The o200k_base count the service uses by default.
pub fn count_tokens(text: &str) -> u32 {
    gatekeeper::tokens::TokenCounter::new(Default::default()).count(text)
}

fn anchor_source(role: &str) -> gatekeeper::coverage::derive::AnchorSource {
    use gatekeeper::coverage::derive::AnchorSource;
    if role == "tool" {
        AnchorSource::ToolOutput
    } else {
        AnchorSource::Prose
    }
}

/// The anchors the service derived before rule 2b (the tier ranking alone): tests that are not
/// about derivation send these as given anchors, so their turns are decided by rule 2 alone.
pub fn legacy_anchors(role: &str, content: &str) -> Vec<String> {
    use gatekeeper::coverage::derive::{DEFAULT_ANCHOR_COUNT, derive_anchors};
    derive_anchors(content, anchor_source(role), DEFAULT_ANCHOR_COUNT)
}

/// The provisional anchors an append of `turns` (append JSON, the first batch of a new
/// conversation) answers: given anchors as sent; derived ones ranked by rarity over the turns
/// before them, as the service ranks them.
pub fn provisional_anchors(turns: &[Value]) -> Vec<Vec<String>> {
    use gatekeeper::coverage::derive::{DEFAULT_ANCHOR_COUNT, Draft, rank_by_rarity};
    let drafts = turns.iter().map(|t| {
        let content = t["content"].as_str().unwrap();
        match t.get("anchors") {
            Some(_) => Draft::terms_only(content),
            None => Draft::new(content, anchor_source(t["role"].as_str().unwrap())),
        }
    });
    let (profiles, _) = rank_by_rarity(drafts, &Default::default());
    turns
        .iter()
        .zip(profiles)
        .map(|(t, profile)| match t.get("anchors") {
            Some(given) => serde_json::from_value(given.clone()).unwrap(),
            None => profile
                .candidates()
                .take(DEFAULT_ANCHOR_COUNT)
                .map(|c| c.text.to_owned())
                .collect(),
        })
        .collect()
}

/// One whole tau-bench conversation as append JSON (turns without text are skipped: the
/// service has nothing to store for them).
pub fn tau_conversation(index: usize) -> Vec<Value> {
    tau()[index]
        .turns
        .iter()
        .filter(|t| !t.text().trim().is_empty())
        .map(|t| json!({ "role": t.role, "content": t.text() }))
        .collect()
}

/// A real tau-bench tool result (JSON text).
pub fn tau_tool_output() -> String {
    tau()
        .iter()
        .flat_map(|c| &c.turns)
        .find(|t| t.role == "tool" && t.content.len() > 500)
        .map(|t| t.content.clone())
        .expect("the data holds tool results")
}

/// `ceil(prose / 5 + tool / 3)` without floating point: the default policy's ceiling.
pub fn default_required_budget(prose: u64, tool: u64) -> u64 {
    (3 * prose + 5 * tool).div_ceil(15)
}

/// `[[0,2],[5,5]]` → `[0, 1, 2, 5]`.
pub fn expand(ranges: &Value) -> Vec<i64> {
    ranges
        .as_array()
        .unwrap_or_else(|| panic!("id ranges, got {ranges}"))
        .iter()
        .flat_map(|r| r[0].as_i64().unwrap()..=r[1].as_i64().unwrap())
        .collect()
}

/// `[0, 1, 2, 5]` → `[[0,2],[5,5]]`.
pub fn ranges_of(ids: &[i64]) -> Value {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<[i64; 2]> = Vec::new();
    for id in ids {
        match out.last_mut() {
            Some(last) if last[1] + 1 == id => last[1] = id,
            _ => out.push([id, id]),
        }
    }
    json!(out)
}

/// A turn for append JSON with explicit tokens and anchors (for tests about a rule itself).
pub fn turn(role: &str, content: &str, tokens: u32, anchors: &[&str]) -> Value {
    json!({ "role": role, "content": content, "tokens": tokens, "anchors": anchors })
}

/// Whatever came back from a request made over a raw socket.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Like [`expect`] + [`problem`] for a raw response.
    pub fn problem(&self, status: StatusCode) -> Value {
        assert_eq!(
            self.status,
            status.as_u16(),
            "unexpected status; body: {}",
            self.body
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "errors are problem+json: {self:?}"
        );
        let body: Value = serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body));
        check_problem(&body, status);
        body
    }
}

impl TestApp {
    pub async fn conversation(&self, conversation: &str) -> Response {
        self.get(&format!("/v1/conversations/{conversation}")).await
    }

    /// The conversation's state as `(status, body)`, to show that a request changed nothing.
    pub async fn snapshot(&self, conversation: &str) -> (StatusCode, Value) {
        let response = self.conversation(conversation).await;
        let status = response.status();
        (status, response.json().await.expect("JSON body"))
    }

    pub async fn turn(&self, conversation: &str, id: i64) -> Response {
        self.get(&format!("/v1/conversations/{conversation}/turns/{id}"))
            .await
    }

    pub async fn checkpoints(&self, conversation: &str) -> Response {
        self.get(&format!("/v1/conversations/{conversation}/compactions"))
            .await
    }

    pub async fn checkpoint(&self, conversation: &str, id: i64) -> Response {
        self.get(&format!(
            "/v1/conversations/{conversation}/compactions/{id}"
        ))
        .await
    }

    pub async fn context(&self, conversation: &str) -> Response {
        self.get(&format!("/v1/conversations/{conversation}/context"))
            .await
    }

    /// `query` without the `?`, e.g. `summary_budget=100&from=3`.
    pub async fn plan(&self, conversation: &str, query: &str) -> Response {
        self.get(&format!(
            "/v1/conversations/{conversation}/compaction-plan?{query}"
        ))
        .await
    }

    /// Sends a request over a plain socket, with the request target exactly as given (no URL
    /// normalisation: `..` stays `..`). The bearer key is sent when set.
    pub async fn raw(
        &self,
        method: &str,
        target: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> RawResponse {
        use std::io::{Read, Write};
        let addr = self.base.trim_start_matches("http://").to_owned();
        let mut request =
            format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        if let Some(key) = &self.key {
            request.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        if let Some(content_type) = content_type {
            request.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        let raw = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).expect("connect");
            stream.write_all(&bytes).expect("request written");
            let mut out = Vec::new();
            stream.read_to_end(&mut out).expect("response read");
            out
        })
        .await
        .unwrap();
        let text = String::from_utf8(raw).expect("UTF-8 response");
        let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        };
        RawResponse {
            status,
            headers,
            body,
        }
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    out
}

impl TestApp {
    /// Everything a client can read of a conversation, to show that a request changed nothing:
    /// the conversation (next_id, total_tokens, checkpoint count, latest checkpoint), the list
    /// of checkpoints, each checkpoint with its summary and verdict, and every stored turn
    /// (content, role, tokens, anchors, external id, created_at).
    pub async fn full_snapshot(&self, conversation: &str) -> Value {
        let (status, summary) = self.snapshot(conversation).await;
        assert_eq!(status, StatusCode::OK, "{conversation}: {summary}");
        let list = expect(self.checkpoints(conversation).await, StatusCode::OK).await;
        let mut checkpoints = Vec::new();
        for item in list["checkpoints"].as_array().expect("a checkpoint list") {
            let id = item["checkpoint_id"].as_i64().expect("a checkpoint id");
            checkpoints.push(expect(self.checkpoint(conversation, id).await, StatusCode::OK).await);
        }
        let next_id = summary["next_id"].as_i64().expect("next_id");
        let mut turns = Vec::new();
        for id in 0..next_id {
            turns.push(expect(self.turn(conversation, id).await, StatusCode::OK).await);
        }
        json!({
            "conversation": summary,
            "list": list,
            "checkpoints": checkpoints,
            "turns": turns,
        })
    }
}

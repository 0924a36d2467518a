//! `spawn_app`: the real router on port 0 against a fresh database, built exactly as `serve`
//! builds it ([`AppState::from_config`]), and a reqwest client.

use crate::db::{AnyStore, TestDb};
use gatekeeper::config::ServeConfig;
use gatekeeper::http::AppState;
use gatekeeper::http::reconstruct_cache::ReconstructCache;
use gatekeeper::store::Store;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    /// Sent as the bearer key on every request, when set.
    pub key: Option<String>,
    pub store: AnyStore,
    /// This service's reconstruct answers, to see whether its checkpoint feed is up.
    pub cache: Option<Arc<ReconstructCache>>,
    /// Keeps the test's database alive as long as any handle to the app.
    _db: Arc<TestDb>,
}

/// The settings `serve` starts with when no flag or environment variable is set.
pub fn defaults() -> ServeConfig {
    ServeConfig::default()
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(defaults()).await
}

pub async fn spawn_app_with(config: ServeConfig) -> TestApp {
    spawn_app_on(TestDb::fresh().await, config).await
}

/// The app on a database the test prepared.
pub async fn spawn_app_on(db: TestDb, config: ServeConfig) -> TestApp {
    let (base, cache) = serve_on_port_0(&db.store, &config).await;
    TestApp {
        base,
        client: reqwest::Client::new(),
        key: None,
        store: db.store.clone(),
        cache,
        _db: Arc::new(db),
    }
}

/// Serves the app on a free loopback port until the test ends; its base URL and answer cache.
async fn serve_on_port_0(
    store: &AnyStore,
    config: &ServeConfig,
) -> (String, Option<Arc<ReconstructCache>>) {
    match store {
        AnyStore::Postgres(s) => serve(s.clone(), config).await,
        AnyStore::Sqlite(s) => serve(s.clone(), config).await,
    }
}

async fn serve<S: Store>(
    store: S,
    config: &ServeConfig,
) -> (String, Option<Arc<ReconstructCache>>) {
    let state = AppState::from_config(store, config).expect("the test settings are valid");
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
        self.another_process_with(defaults()).await
    }

    /// [`Self::another_process`] with settings of its own.
    pub async fn another_process_with(&self, config: ServeConfig) -> TestApp {
        let (base, cache) = serve_on_port_0(&self.store, &config).await;
        TestApp {
            base,
            cache,
            ..self.clone()
        }
    }

    /// The service started again on `store` (the same database, connected anew, so the
    /// migrations it lacks were applied), as after an upgrade.
    pub async fn restarted_on(&self, store: AnyStore) -> TestApp {
        let (base, cache) = serve_on_port_0(&store, &defaults()).await;
        TestApp {
            base,
            cache,
            store,
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

    pub async fn delete(&self, path: &str) -> Response {
        self.authed(self.client.delete(self.url(path)))
            .send()
            .await
            .expect("request sent")
    }

    /// `DELETE /v1/conversations/{conversation}`.
    pub async fn erase(&self, conversation: &str) -> Response {
        self.delete(&format!("/v1/conversations/{conversation}"))
            .await
    }

    /// `GET .../export`: the NDJSON, after checking it is a 200 of that type.
    /// The whole export; one that never ends fails within 10 s instead of hanging.
    pub async fn export(&self, conversation: &str) -> String {
        let url = self.url(&format!("/v1/conversations/{conversation}/export"));
        let request = self.client.get(url).timeout(Duration::from_secs(10));
        let response = self.authed(request).send().await.expect("request sent");
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "export of {conversation}"
        );
        assert_eq!(
            response.headers()["content-type"],
            "application/x-ndjson",
            "an export is NDJSON"
        );
        response.text().await.expect("the export's text")
    }

    /// `POST .../import` with `ndjson`.
    pub async fn import(&self, conversation: &str, ndjson: impl Into<reqwest::Body>) -> Response {
        self.post_raw(
            &format!("/v1/conversations/{conversation}/import"),
            "application/x-ndjson",
            ndjson,
        )
        .await
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

/// A loopback port free now, for a process the test starts itself (the real binary): the
/// in-process app binds port 0 instead.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

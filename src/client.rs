//! A typed Rust client for the gatekeeper API (reqwest), sharing the server's wire types.
//!
//! Errors come back typed: a problem+json answer is a [`ClientError::Problem`], and a rejected
//! verdict is a [`ClientError::Rejected`] carrying the whole verdict. `503` and `429` answers are
//! retried with exponential backoff (honouring `Retry-After`); every POST carries an
//! `Idempotency-Key` (generated when the caller gives none) that all its retries reuse. Each
//! conversation's reads carry the commit position its writes answered (`Gatekeeper-Position` →
//! `Gatekeeper-Min-Position`), so with read replicas a read never sees an older state.

use crate::api::*;
use crate::domain::Position;
use reqwest::{Method, RequestBuilder, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

/// An RFC 9457 problem as the service sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Everything else the service added: `field`, `conflicting_ids`, `missing_ids`, ...
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Problem {
    /// The last segment of `type`, e.g. `conflict` or `not-found`.
    pub fn slug(&self) -> &str {
        self.kind.rsplit(':').next().unwrap_or(&self.kind)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the proposal was rejected: {}", .0.verdict.outcome.as_str())]
    Rejected(Box<VerdictResponse>),
    #[error("{} {}: {}", .0.status, .0.title, .0.detail)]
    Problem(Problem),
    #[error("{0:?} is not a usable base URL (expected e.g. http://127.0.0.1:8080)")]
    InvalidUrl(String),
    #[error("cannot reach the gatekeeper")]
    Transport(#[from] reqwest::Error),
    #[error("unexpected answer ({status}): {body}")]
    Unexpected { status: u16, body: String },
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// The longest single wait between retries, whatever `Retry-After` says.
const MAX_PAUSE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
    retries: u32,
    first_backoff: Duration,
    positions: std::sync::Arc<std::sync::Mutex<Positions>>,
}

/// Read-your-writes with read replicas: the newest `Gatekeeper-Position` each conversation's
/// writes answered, sent back as `Gatekeeper-Min-Position` on its reads (a tenant-wide read
/// sends the newest of all).
#[derive(Debug, Default)]
struct Positions {
    by_conversation: std::collections::HashMap<String, Position>,
    newest: Option<Position>,
}

impl Positions {
    fn for_read(&self, conversation: Option<&str>) -> Option<Position> {
        match conversation {
            Some(c) => self.by_conversation.get(c).copied(),
            None => self.newest,
        }
    }

    fn saw(&mut self, conversation: &str, position: Position) {
        let seen = self
            .by_conversation
            .entry(conversation.to_owned())
            .or_insert(position);
        *seen = (*seen).max(position);
        self.newest = self.newest.max(Some(position));
    }
}

/// The conversation a `/v1/conversations/{c}/...` URL is about.
fn conversation_of(url: &Url) -> Option<String> {
    let mut segments = url.path_segments()?.skip_while(|s| *s != "v1");
    (segments.next() == Some("v1") && segments.next() == Some("conversations"))
        .then(|| segments.next().map(str::to_owned))
        .flatten()
}

impl Client {
    /// A client for the service at `base` (e.g. `http://127.0.0.1:8080`), with a bearer key.
    pub fn new(base: impl Into<String>, key: Option<String>) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("a plain HTTP client builds"),
            base: base.into().trim_end_matches('/').to_owned(),
            key,
            retries: 5,
            first_backoff: Duration::from_millis(200),
            positions: Default::default(),
        }
    }

    /// How often to retry a `503`/`429`, and the first wait (doubled each time).
    pub fn with_retries(mut self, retries: u32, first_backoff: Duration) -> Self {
        self.retries = retries;
        self.first_backoff = first_backoff;
        self
    }

    /// `{base}/v1/conversations/{conversation}/{rest...}`, each piece one percent-encoded
    /// segment: a name holding `/`, `?` or `#` can never address another resource.
    fn url(&self, conversation: &str, rest: &[&str]) -> Result<Url> {
        let mut url = self.base_url()?;
        url.path_segments_mut()
            .map_err(|()| ClientError::InvalidUrl(self.base.clone()))?
            .extend(["v1", "conversations", conversation])
            .extend(rest);
        Ok(url)
    }

    fn positions(&self) -> std::sync::MutexGuard<'_, Positions> {
        // A panic while the map was held leaves it usable: positions only ever grow.
        self.positions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn base_url(&self) -> Result<Url> {
        let mut url =
            Url::parse(&self.base).map_err(|_| ClientError::InvalidUrl(self.base.clone()))?;
        url.path_segments_mut()
            .map_err(|()| ClientError::InvalidUrl(self.base.clone()))?
            .pop_if_empty();
        Ok(url)
    }

    pub async fn append(
        &self,
        conversation: &str,
        request: &AppendTurnsRequest,
    ) -> Result<AppendTurnsResponse> {
        self.send(
            Method::POST,
            self.url(conversation, &["turns"])?,
            Some(request),
            None,
        )
        .await
    }

    /// Proposes a compaction. A rejected verdict is `Err(ClientError::Rejected)`.
    pub async fn propose(
        &self,
        conversation: &str,
        request: &CompactionRequestBody,
        idempotency_key: Option<&str>,
    ) -> Result<VerdictResponse> {
        let url = self.url(conversation, &["compactions"])?;
        self.send(Method::POST, url, Some(request), idempotency_key)
            .await
    }

    pub async fn conversation(&self, conversation: &str) -> Result<ConversationResponse> {
        self.get(self.url(conversation, &[])?).await
    }

    pub async fn turn(&self, conversation: &str, id: i64) -> Result<TurnResponse> {
        self.get(self.url(conversation, &["turns", &id.to_string()])?)
            .await
    }

    /// Pins (`true`) or unpins a turn: a pinned turn is never covered by a summary.
    pub async fn set_pinned(
        &self,
        conversation: &str,
        id: i64,
        pinned: bool,
    ) -> Result<TurnResponse> {
        let url = self.url(conversation, &["turns", &id.to_string()])?;
        self.send(Method::PATCH, url, Some(&TurnPatch { pinned }), None)
            .await
    }

    pub async fn checkpoints(&self, conversation: &str) -> Result<CheckpointListResponse> {
        self.get(self.url(conversation, &["compactions"])?).await
    }

    pub async fn checkpoint(
        &self,
        conversation: &str,
        checkpoint_id: i64,
    ) -> Result<CheckpointResponse> {
        self.get(self.url(conversation, &["compactions", &checkpoint_id.to_string()])?)
            .await
    }

    pub async fn reconstruct(&self, conversation: &str, turn: i64) -> Result<ReconstructResponse> {
        self.get(self.url(conversation, &["reconstruct", &turn.to_string()])?)
            .await
    }

    /// The working context; with `max_tokens`, within that budget (stubs for the turns left out).
    pub async fn context(
        &self,
        conversation: &str,
        max_tokens: Option<u64>,
    ) -> Result<ContextResponse> {
        let mut url = self.url(conversation, &["context"])?;
        if let Some(max_tokens) = max_tokens {
            url.query_pairs_mut()
                .append_pair("max_tokens", &max_tokens.to_string());
        }
        self.get(url).await
    }

    /// Turns holding the words of `q`, best first: within `conversation`, or across the tenant's
    /// conversations (those whose id starts with `prefix`, when given).
    pub async fn search(&self, query: &SearchQuery<'_>) -> Result<SearchResponse> {
        let mut url = match query.conversation {
            Some(conversation) => self.url(conversation, &["search"])?,
            None => {
                let mut url = self.base_url()?;
                url.path_segments_mut()
                    .map_err(|()| ClientError::InvalidUrl(self.base.clone()))?
                    .extend(["v1", "search"]);
                url
            }
        };
        url.query_pairs_mut().append_pair("q", query.q);
        if let Some(limit) = query.limit {
            url.query_pairs_mut()
                .append_pair("limit", &limit.to_string());
        }
        if let Some(prefix) = query.conversation_prefix {
            url.query_pairs_mut()
                .append_pair("conversation_prefix", prefix);
        }
        self.get(url).await
    }

    pub async fn plan(
        &self,
        conversation: &str,
        summary_budget: i64,
        from: Option<i64>,
    ) -> Result<CompactionPlanResponse> {
        let mut url = self.url(conversation, &["compaction-plan"])?;
        url.query_pairs_mut()
            .append_pair("summary_budget", &summary_budget.to_string());
        if let Some(from) = from {
            url.query_pairs_mut().append_pair("from", &from.to_string());
        }
        self.get(url).await
    }

    /// `/readyz`: whether the service can serve (database reachable and migrated).
    pub async fn ready(&self) -> Result<bool> {
        let mut url = self.base_url()?;
        url.path_segments_mut()
            .map_err(|()| ClientError::InvalidUrl(self.base.clone()))?
            .push("readyz");
        let response = self.http.get(url).send().await?;
        Ok(response.status().is_success())
    }

    async fn get<T: DeserializeOwned>(&self, url: Url) -> Result<T> {
        self.send::<(), T>(Method::GET, url, None, None).await
    }

    /// Erases the conversation and everything of it.
    pub async fn erase(&self, conversation: &str) -> Result<()> {
        let url = self.url(conversation, &[])?;
        self.exchange(Method::DELETE, url, None, None).await?;
        Ok(())
    }

    /// The conversation as NDJSON (`POST .../import` restores it).
    pub async fn export(&self, conversation: &str) -> Result<String> {
        let url = self.url(conversation, &["export"])?;
        Ok(self.exchange(Method::GET, url, None, None).await?.1)
    }

    /// Restores an export into a conversation that does not exist yet.
    pub async fn import(&self, conversation: &str, ndjson: String) -> Result<ImportResponse> {
        let url = self.url(conversation, &["import"])?;
        let body = ("application/x-ndjson", ndjson.into_bytes());
        let (status, text) = self.exchange(Method::POST, url, Some(body), None).await?;
        parse_answer(status, text)
    }

    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
        idempotency_key: Option<&str>,
    ) -> Result<T> {
        let body = body.map(|body| {
            let json = serde_json::to_vec(body).expect("a request body always serializes");
            ("application/json", json)
        });
        let (status, text) = self.exchange(method, url, body, idempotency_key).await?;
        parse_answer(status, text)
    }

    /// One request, retried on `503`/`429` under one Idempotency-Key (a POST without one gets
    /// a new one); the text of a successful answer, or the problem.
    async fn exchange(
        &self,
        method: Method,
        url: Url,
        body: Option<(&'static str, Vec<u8>)>,
        idempotency_key: Option<&str>,
    ) -> Result<(StatusCode, String)> {
        let key = match (&method, idempotency_key) {
            (_, Some(key)) => Some(key.to_owned()),
            (&Method::POST, None) => Some(uuid::Uuid::new_v4().to_string()),
            _ => None,
        };
        let conversation = conversation_of(&url);
        let min_position = (method == Method::GET)
            .then(|| self.positions().for_read(conversation.as_deref()))
            .flatten();
        let mut wait = self.first_backoff;
        let mut attempt = 0;
        loop {
            let mut request: RequestBuilder = self.http.request(method.clone(), url.clone());
            if let Some(p) = min_position {
                request = request.header("Gatekeeper-Min-Position", p.to_string());
            }
            if let Some(k) = &self.key {
                request = request.bearer_auth(k);
            }
            if let Some(k) = &key {
                request = request.header("Idempotency-Key", k);
            }
            if let Some((content_type, bytes)) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, *content_type)
                    .body(bytes.clone());
            }
            let response = request.send().await?;
            let position = response
                .headers()
                .get("gatekeeper-position")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<Position>().ok());
            if let (Some(c), Some(p)) = (&conversation, position) {
                self.positions().saw(c, p);
            }
            let status = response.status();
            if matches!(
                status,
                StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
            ) && attempt < self.retries
            {
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    .map(Duration::from_secs);
                // A hostile or confused Retry-After must not stall the caller for an hour.
                let pause = retry_after.unwrap_or(wait).max(wait).min(MAX_PAUSE);
                tokio::time::sleep(pause).await;
                wait *= 2;
                attempt += 1;
                continue;
            }
            let text = response.text().await?;
            if status.is_success() {
                return Ok((status, text));
            }
            return Err(problem_error(status, text));
        }
    }
}

/// A successful answer's JSON.
fn parse_answer<T: DeserializeOwned>(status: StatusCode, text: String) -> Result<T> {
    serde_json::from_str(&text).map_err(|_| ClientError::Unexpected {
        status: status.as_u16(),
        body: text,
    })
}

fn problem_error(status: StatusCode, text: String) -> ClientError {
    let Ok(problem) = serde_json::from_str::<Problem>(&text) else {
        return ClientError::Unexpected {
            status: status.as_u16(),
            body: text,
        };
    };
    if problem.slug() == "proposal-rejected"
        && let Ok(verdict) = serde_json::from_str::<VerdictResponse>(&text)
    {
        return ClientError::Rejected(Box::new(verdict));
    }
    ClientError::Problem(problem)
}

/// A search: its words, and where to look.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchQuery<'a> {
    pub q: &'a str,
    /// One conversation; `None`: every conversation of the tenant.
    pub conversation: Option<&'a str>,
    /// Tenant-wide only: conversations whose id starts with this.
    pub conversation_prefix: Option<&'a str>,
    pub limit: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_route_names_its_conversation_and_a_tenant_route_none() {
        let of = |u: &str| conversation_of(&Url::parse(u).unwrap());
        assert_eq!(
            of("http://h:1/v1/conversations/c%2F1/reconstruct/3").as_deref(),
            Some("c%2F1")
        );
        assert_eq!(
            of("http://h:1/base/v1/conversations/c").as_deref(),
            Some("c")
        );
        assert_eq!(of("http://h:1/v1/search?q=x"), None);
        assert_eq!(of("http://h:1/v1/conversations"), None);
    }

    #[test]
    fn reads_get_the_newest_position_of_their_conversation_or_of_all() {
        let mut positions = Positions::default();
        positions.saw("a", Position(5));
        positions.saw("b", Position(9));
        positions.saw("a", Position(3));
        assert_eq!(positions.for_read(Some("a")), Some(Position(5)));
        assert_eq!(positions.for_read(Some("b")), Some(Position(9)));
        assert_eq!(positions.for_read(Some("c")), None);
        assert_eq!(positions.for_read(None), Some(Position(9)));
    }
}

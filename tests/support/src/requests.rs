//! More of the API's requests as `TestApp` methods, and requests over a raw socket for what
//! reqwest will not send (malformed HTTP, odd framing).

use crate::{TestApp, check_problem, expect};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

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

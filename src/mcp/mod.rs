//! The MCP server: four tools for an agent to recall what compaction left out
//! ([`tools::list`]), each answering exactly what its REST endpoint answers, as structured
//! content and as text. Over streamable HTTP at `/mcp` on the service's own listener, the REST
//! router answers each call in process with the caller's credentials (so auth, rate limits,
//! cost bounds and metrics are the REST API's); over stdio, `gatekeeper mcp` calls a running
//! service's REST API. Either way a failed read is a tool error carrying the problem, never a
//! broken session.

pub mod tools;

use axum::Router;
use axum::body::Body;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderValue, Request};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use std::sync::Arc;
use tools::Call;
use tower::ServiceExt;

/// Largest REST answer a tool passes on (a working context of a long conversation is the
/// biggest): past it the call is a tool error, not a process holding it all.
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Where the tools' REST reads go.
#[derive(Clone)]
pub enum Upstream {
    /// The service's own REST router, with each MCP request's `Authorization` header.
    InProcess(Router),
    /// A running service, with one key.
    Remote {
        client: reqwest::Client,
        base: String,
        key: Option<String>,
    },
}

impl Upstream {
    async fn get(&self, path: &str, auth: Option<&HeaderValue>) -> Result<(u16, Vec<u8>), String> {
        match self {
            Upstream::InProcess(router) => {
                let mut request = Request::get(path);
                if let Some(auth) = auth {
                    request = request.header(AUTHORIZATION, auth);
                }
                let request = request.body(Body::empty()).map_err(|e| e.to_string())?;
                let response = router
                    .clone()
                    .oneshot(request)
                    .await
                    .map_err(|e| e.to_string())?;
                let status = response.status().as_u16();
                let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok((status, body.to_vec()))
            }
            Upstream::Remote { client, base, key } => {
                let mut request = client.get(format!("{}{path}", base.trim_end_matches('/')));
                if let Some(key) = key {
                    request = request.bearer_auth(key);
                }
                let response = request.send().await.map_err(|e| e.to_string())?;
                let status = response.status().as_u16();
                let body = response.bytes().await.map_err(|e| e.to_string())?;
                if body.len() > MAX_ANSWER_BYTES {
                    return Err(format!(
                        "an answer of {} bytes is too big to pass on",
                        body.len()
                    ));
                }
                Ok((status, body.to_vec()))
            }
        }
    }

    /// The answer, as JSON and as the text the REST API sent: `Ok` for 2xx, a problem
    /// otherwise.
    async fn json(&self, path: &str, auth: Option<&HeaderValue>) -> Result<Answer, Failure> {
        let (status, body) = self.get(path, auth).await.map_err(Failure::Unreachable)?;
        let text = String::from_utf8(body).map_err(|e| {
            Failure::Unreachable(format!("{status} with a body that is not UTF-8: {e}"))
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            Failure::Unreachable(format!("{status} with a body that is not JSON: {e}"))
        })?;
        if (200..300).contains(&status) {
            Ok(Answer { value, text })
        } else {
            Err(Failure::Problem(status, value))
        }
    }
}

struct Answer {
    value: Value,
    text: String,
}

enum Failure {
    Problem(u16, Value),
    Unreachable(String),
}

/// The MCP server handler.
#[derive(Clone)]
pub struct Recall {
    upstream: Arc<Upstream>,
}

impl Recall {
    pub fn new(upstream: Upstream) -> Self {
        Self {
            upstream: Arc::new(upstream),
        }
    }

    async fn answer(&self, call: Call, auth: Option<&HeaderValue>) -> Result<Answer, Failure> {
        match call {
            Call::Get(path) => self.upstream.json(&path, auth).await,
            Call::LatestCoverage { conversation } => {
                let state = (self.upstream)
                    .json(&tools::conversation_path(&conversation), auth)
                    .await?;
                match state.value["latest_checkpoint"]["checkpoint_id"].as_i64() {
                    Some(id) => {
                        let path = tools::checkpoint_path(&conversation, id);
                        self.upstream.json(&path, auth).await
                    }
                    None => Ok(state),
                }
            }
        }
    }
}

impl ServerHandler for Recall {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("gatekeeper", env!("CARGO_PKG_VERSION")))
            .with_instructions(tools::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = (tools::list().into_iter())
            .map(|(name, description, schema)| {
                let Value::Object(schema) = schema else {
                    unreachable!("every input schema is an object")
                };
                Tool::new(name, description, schema)
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let auth = (context.extensions.get::<axum::http::request::Parts>())
            .and_then(|parts| parts.headers.get(AUTHORIZATION));
        let call = match tools::call(&request.name, request.arguments) {
            Ok(call) => call,
            Err(message) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into());
            }
        };
        let result = match self.answer(call, auth).await {
            Ok(Answer { value, text }) => {
                let mut result = CallToolResult::structured(value);
                result.content = vec![ContentBlock::text(text)];
                result
            }
            Err(Failure::Problem(status, problem)) => {
                let mut result = CallToolResult::structured_error(problem);
                let text = tools::problem_text(
                    status,
                    result.structured_content.as_ref().unwrap_or(&Value::Null),
                );
                result.content.insert(0, ContentBlock::text(text));
                result
            }
            Err(Failure::Unreachable(why)) => {
                tracing::warn!(tool = %request.name, error = %why, "an MCP tool could not reach the REST API");
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "the gatekeeper could not be reached: {why}"
                ))])
            }
        };
        metrics::counter!("gatekeeper_mcp_tool_calls_total", "tool" => tool_label(&request.name), "error" => if result.is_error == Some(true) { "true" } else { "false" }).increment(1);
        Ok(result.into())
    }
}

/// A tool name as a metric label: one of the four, or `other` (no request adds label values).
fn tool_label(name: &str) -> &'static str {
    tools::list()
        .into_iter()
        .map(|(n, _, _)| n)
        .find(|n| *n == name)
        .unwrap_or("other")
}

/// `/mcp` over streamable HTTP, answering from `rest` (the service's REST router), stateless
/// (each request stands alone, so nothing is kept between them), JSON answers.
pub fn http_service(
    rest: Router,
    check_hosts: bool,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    Recall,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    // Loopback-only services keep rmcp's DNS-rebinding guard; keyed ones are reached by name.
    if !check_hosts {
        config = config.disable_allowed_hosts();
    }
    let recall = Recall::new(Upstream::InProcess(rest));
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || Ok(recall.clone()),
        Default::default(),
        config,
    )
}

/// `gatekeeper mcp`: serves the tools on stdin/stdout until the client closes them.
pub async fn serve_stdio(base: String, key: Option<String>) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let upstream = Upstream::Remote {
        client: reqwest::Client::new(),
        base,
        key,
    };
    let running = Recall::new(upstream)
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}

//! OpenTelemetry traces from the real binary: an OTLP/HTTP receiver in the test takes what it
//! exports, and a request's spans must continue the caller's `traceparent`, carry the HTTP
//! attributes, the tenant and the conversation, and hold the database, decision and token
//! counting spans beneath them. Without an endpoint nothing is sent.

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use gatekeeper_test_support::free_port;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::json;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const APPEND_PARENT: &str = "00f067aa0ba902b7";
const PROPOSE_PARENT: &str = "b7ad6b7169203331";
const KEY: &str = "acme:a-key-long-enough-for-the-service";

/// Every span the receiver was sent, with the service name of its batch.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

/// An OTLP/HTTP collector on `address`: `POST /v1/traces` with protobuf bodies.
async fn receiver(address: &str) -> (SocketAddr, Received) {
    async fn export(State(received): State<Received>, body: Bytes) -> Vec<u8> {
        let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
        let mut spans = received.0.lock().unwrap();
        for batch in request.resource_spans {
            let mut service = batch.resource.iter().flat_map(|r| &r.attributes);
            let service = service.find(|a| a.key == "service.name").map(text);
            for scope in batch.scope_spans {
                let named = scope
                    .spans
                    .into_iter()
                    .map(|s| (service.clone().unwrap(), s));
                spans.extend(named);
            }
        }
        Vec::new() // an empty ExportTraceServiceResponse: everything accepted
    }
    let received = Received::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(export))
        .with_state(received.clone());
    let listener = (tokio::net::TcpListener::bind(address).await)
        .unwrap_or_else(|e| panic!("the receiver cannot listen on {address}: {e}"));
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, received)
}

fn text(attribute: &opentelemetry_proto::tonic::common::v1::KeyValue) -> String {
    match attribute.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        other => panic!("{}: unexpected value {other:?}", attribute.key),
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|a| a.key == key).map(text)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The service binary on `port`, on a fresh SQLite folder unless `env` names a database.
async fn start(name: &str, port: u16, env: &[(&str, String)]) -> (Child, PathBuf) {
    let dir = std::env::temp_dir().join(format!("gk-traces-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut command = Command::new(env!("CARGO_BIN_EXE_gatekeeper"));
    command
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env_remove("DATABASE_URL")
        .env("GATEKEEPER_DATA_DIR", &dir)
        .env("GATEKEEPER_API_KEYS", KEY)
        .env("GATEKEEPER_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    for (variable, _) in std::env::vars().filter(|(v, _)| v.starts_with("OTEL_")) {
        command.env_remove(variable);
    }
    for (variable, value) in env {
        command.env(variable, value);
    }
    let child = command.spawn().expect("the binary starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if reqwest::get(format!("http://127.0.0.1:{port}/readyz"))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return (child, dir);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service did not become ready");
}

/// An append and a compaction proposal, each under the caller's span of one trace, then a
/// SIGTERM and the drained exit.
async fn traced_requests(mut child: Child, port: u16) {
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://127.0.0.1:{port}/v1/conversations/airline-7{path}");
    let key = KEY.split_once(':').unwrap().1;
    let turns = json!({"turns": [
        {"role": "user", "content": "I want to cancel reservation ZFA04Y, flight HAT170 on 2024-05-15."},
        {"role": "assistant", "content": "Reservation ZFA04Y is cancelled; 312 USD will be refunded."},
        {"role": "tool", "content": "{\"reservation\":\"ZFA04Y\",\"status\":\"cancelled\",\"refund\":312,\"currency\":\"USD\"}"},
    ]});
    let proposal = json!({"from": 0, "to": 2, "summary_budget": 100, "finish_reason": "stop",
        "summary": "Customer cancelled ZFA04Y; 312 USD refunded."});
    for (path, body, parent, status) in [
        ("/turns", turns, APPEND_PARENT, 201),
        ("/compactions", proposal, PROPOSE_PARENT, 201),
    ] {
        let answer = client
            .post(url(path))
            .bearer_auth(key)
            .header("traceparent", format!("00-{TRACE}-{parent}-01"))
            .header("tracestate", "vendor=caller")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer.status(),
            status,
            "{path}: {}",
            answer.text().await.unwrap()
        );
    }
    let pid = child.id().expect("still running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(killed.unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("exits after draining")
        .unwrap();
    assert!(status.success(), "a drained shutdown exits 0: {status:?}");
}

/// Checks one request's span and its children; returns the children's names.
fn request_and_children(spans: &[(String, Span)], parent: &str, route: &str) -> Vec<String> {
    let of_trace: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| hex(&s.trace_id) == TRACE)
        .collect();
    let request = of_trace
        .iter()
        .find(|s| hex(&s.parent_span_id) == parent)
        .unwrap_or_else(|| panic!("no span continues the caller's span {parent}: {spans:#?}"));
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(request.name, format!("POST {route}"));
    assert_eq!(
        request.trace_state, "vendor=caller",
        "the caller's tracestate is kept"
    );
    for (key, value) in [
        ("http.request.method", "POST"),
        ("http.route", route),
        ("http.response.status_code", "201"),
        ("url.path", &route.replace("{conversation}", "airline-7")),
        ("gatekeeper.tenant", "acme"),
        ("gen_ai.conversation.id", "airline-7"),
    ] {
        assert_eq!(
            attribute(request, key).as_deref(),
            Some(value),
            "{key} of {request:#?}"
        );
    }
    let children: Vec<&&Span> = of_trace
        .iter()
        .filter(|s| s.parent_span_id == request.span_id)
        .collect();
    for child in &children {
        let during = request.start_time_unix_nano..=request.end_time_unix_nano;
        assert!(
            during.contains(&child.start_time_unix_nano),
            "{} starts during the request",
            child.name
        );
    }
    children.iter().map(|s| s.name.clone()).collect()
}

/// Asserts what a run with an endpoint exported, on a backend whose `db.system` is `system`.
fn check_exported(spans: &[(String, Span)], system: &str) {
    assert!(
        spans.iter().all(|(service, _)| service == "gatekeeper"),
        "OTEL_SERVICE_NAME defaults to gatekeeper"
    );
    let append = request_and_children(
        spans,
        APPEND_PARENT,
        "/v1/conversations/{conversation}/turns",
    );
    let propose = request_and_children(
        spans,
        PROPOSE_PARENT,
        "/v1/conversations/{conversation}/compactions",
    );
    for (children, expected) in [
        (
            &append,
            &[
                "lock_or_create_conversation",
                "insert_turns",
                "commit",
                "count_tokens",
            ][..],
        ),
        (
            &propose,
            &[
                "conversation",
                "range_facts",
                "lock_conversation",
                "insert_checkpoint",
                "commit",
                "count_tokens",
                "decide",
            ],
        ),
    ] {
        for name in expected {
            assert!(
                children.iter().any(|c| c == name),
                "{name} among {children:?}"
            );
        }
    }
    let database: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "range_facts")
        .collect();
    assert!(!database.is_empty());
    for span in database {
        assert_eq!(attribute(span, "db.system").as_deref(), Some(system));
        assert_eq!(
            attribute(span, "db.operation.name").as_deref(),
            Some("range_facts")
        );
    }
}

fn otlp(receiver: SocketAddr) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{receiver}")),
        // Longer than the test: only the flush on shutdown can deliver the spans.
        ("OTEL_BSP_SCHEDULE_DELAY", "600000".to_owned()),
    ]
}

#[tokio::test]
async fn a_request_continues_the_callers_trace_with_database_decision_and_token_spans_beneath() {
    let (receiver, received) = receiver("127.0.0.1:0").await;
    let port = free_port();
    let (child, dir) = start("sqlite", port, &otlp(receiver)).await;
    traced_requests(child, port).await;
    check_exported(&received.0.lock().unwrap(), "sqlite");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn without_an_otlp_endpoint_nothing_is_exported() {
    // Where the SDK would send spans by default, were exporting on without an endpoint.
    let (_, received) = receiver("127.0.0.1:4318").await;
    let port = free_port();
    let (child, dir) = start("off", port, &[]).await;
    traced_requests(child, port).await;
    assert!(received.0.lock().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn on_postgres_the_database_spans_name_postgresql() {
    let server = "127.0.0.1:5432";
    let up = TcpStream::connect_timeout(&server.parse().unwrap(), Duration::from_secs(2)).is_ok();
    if !up {
        assert!(std::env::var_os("CI").is_none(), "no Postgres at {server}");
        eprintln!(
            "on_postgres_the_database_spans_name_postgresql: SKIPPED, no Postgres at {server}"
        );
        return;
    }
    let name = format!("gk_traces_{}", std::process::id());
    let (receiver, received) = receiver("127.0.0.1:0").await;
    let port = free_port();
    let mut env = otlp(receiver);
    env.push((
        "DATABASE_URL",
        format!("postgres://postgres@{server}/{name}"),
    ));
    let (child, dir) = start("postgres", port, &env).await;
    traced_requests(child, port).await;
    let admin = format!("postgres://postgres@{server}/postgres");
    let pool = sqlx::PgPool::connect(&admin).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&pool)
        .await
        .unwrap();
    check_exported(&received.0.lock().unwrap(), "postgresql");
    let _ = std::fs::remove_dir_all(dir);
}

//! Logs, and OpenTelemetry traces when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) names a collector: OTLP over HTTP with protobuf, the
//! SDK reading the standard `OTEL_*` variables. Without either, the subscriber is the plain log
//! one and no span is built for traces alone.

use crate::config::LogFormat;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_subscriber::filter::{EnvFilter, FilterFn, LevelFilter};
use tracing_subscriber::prelude::*;

const ENDPOINTS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// The exporter, while there is one; [`Telemetry::shutdown`] sends what it still holds.
pub struct Telemetry(Option<SdkTracerProvider>);

/// Installs the global subscriber: logs in `format` filtered by `filter`, plus the trace
/// exporter when an OTLP endpoint is set. An endpoint it cannot export to stops the start.
pub fn init(format: LogFormat, filter: &str) -> Result<Telemetry, String> {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| "info".into());
    let Some((variable, endpoint)) = endpoint() else {
        let builder = tracing_subscriber::fmt().with_env_filter(filter);
        let _ = match format {
            LogFormat::Json => builder.json().try_init(),
            LogFormat::Text => builder.try_init(),
        };
        return Ok(Telemetry(None));
    };
    // This build's HTTP client has no TLS: a collector beside the service (a sidecar or the
    // node's agent) takes plain HTTP and forwards over TLS.
    if !endpoint.starts_with("http://") {
        return Err(format!(
            "{variable}={endpoint:?}: traces are exported over plain http:// only (no TLS in this build); send them to a collector beside the service"
        ));
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| format!("{variable}: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let traces = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("gatekeeper"))
        .with_filter(FilterFn::new(exported).with_max_level_hint(LevelFilter::DEBUG));
    let logs = match format {
        LogFormat::Json => tracing_subscriber::fmt::layer().json().boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer().boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(traces)
        .try_init();
    crate::http::trace::export_traces();
    tracing::info!(%endpoint, "exporting traces over OTLP/HTTP");
    Ok(Telemetry(Some(provider)))
}

impl Telemetry {
    /// Exports the spans still queued and stops the exporter, so a stop loses none.
    pub async fn shutdown(self) {
        let Some(provider) = self.0 else { return };
        // It blocks until the last batch is sent (or its timeout passes).
        match tokio::task::spawn_blocking(move || provider.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the last spans may not have been exported"),
            Err(e) => tracing::warn!(error = %e, "the trace exporter's shutdown failed"),
        }
    }
}

/// The first endpoint variable set (the traces one wins, as in the SDK), unless
/// `OTEL_SDK_DISABLED=true`.
fn endpoint() -> Option<(&'static str, String)> {
    if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    ENDPOINTS.into_iter().find_map(|variable| {
        let value = std::env::var(variable).ok().filter(|v| !v.is_empty())?;
        Some((variable, value))
    })
}

/// The SDK's resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), named `gatekeeper`
/// when neither names the service.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::new("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    if named {
        detected
    } else {
        Resource::builder().with_service_name("gatekeeper").build()
    }
}

/// What a trace holds: the service's own spans (requests, database calls, CPU work, some at
/// DEBUG so that logs at INFO never build them), its INFO events, and anyone's warnings and
/// errors, each as an event of the span it happened in.
fn exported(meta: &Metadata<'_>) -> bool {
    let ours = meta.target().starts_with("gatekeeper");
    if meta.is_span() {
        ours
    } else {
        *meta.level() <= Level::WARN || (ours && *meta.level() <= Level::INFO)
    }
}

//! The OpenAPI document, generated from the handlers' annotations and the wire types.
//! `openapi.yaml` at the repository root is this document; a test fails when they differ.

use crate::api::*;
use crate::coverage::{
    AnchorEvidence, CoveragePath, Evidence, IdRange, IdRanges, Mode, Outcome, Reason, Rejection,
    Role, TruncationSignal, TurnDetail, TurnStatus, Verdict,
};
use crate::http::handlers;
use serde::{Deserialize, Serialize};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, IntoResponses, Modify, OpenApi, ToSchema};

/// An RFC 9457 problem. Other members name what went wrong (`field`, `conflicting_ids`,
/// `missing_ids`, `expected_id`, `latest_checkpoint`); a rejected proposal (`type` ending in
/// `proposal-rejected`) carries every field of the verdict too.
#[derive(Serialize, ToSchema)]
#[schema(
    as = Problem,
    example = json!({
        "type": "urn:gatekeeper:problem:conflict",
        "title": "Conflict",
        "status": 409,
        "detail": "turns [2] are already stored with different content; nothing of the batch was written",
        "conflicting_ids": [2]
    })
)]
pub struct ProblemDoc {
    /// `urn:gatekeeper:problem:<slug>`.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The request member or parameter that failed, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// The problems every `/v1` route can answer.
#[derive(IntoResponses)]
#[allow(dead_code)] // a documentation type: never built
pub enum Problems {
    /// Malformed JSON, path or query
    #[response(status = 400, content_type = "application/problem+json")]
    BadRequest(ProblemDoc),
    /// Missing or unknown API key
    #[response(status = 401, content_type = "application/problem+json")]
    Unauthorized(ProblemDoc),
    /// This tenant is over its rate limit (when one is configured); retry after Retry-After
    #[response(status = 429, content_type = "application/problem+json")]
    TooManyRequests(ProblemDoc),
    /// Database unavailable or request timed out; retry (see Retry-After)
    #[response(status = 503, content_type = "application/problem+json")]
    Unavailable(ProblemDoc),
}

/// The problems of a route that takes a JSON body.
#[derive(IntoResponses)]
#[allow(dead_code)] // a documentation type: never built
pub enum BodyProblems {
    /// Body over the limit
    #[response(status = 413, content_type = "application/problem+json")]
    PayloadTooLarge(ProblemDoc),
    /// Not application/json
    #[response(status = 415, content_type = "application/problem+json")]
    UnsupportedMediaType(ProblemDoc),
}

/// No such conversation or turn for this tenant
#[derive(IntoResponses)]
#[response(status = 404, content_type = "application/problem+json")]
#[allow(dead_code)] // a documentation type: never built
pub struct NotFound(ProblemDoc);

/// Read-your-writes across replicas (parsed by the `Reads` extractor).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // a documentation type: never built
pub struct MinPosition {
    /// The `Gatekeeper-Position` of a write this read must see: with read replicas, it is
    /// answered only from a state at least that new (a replica that has replayed it, or the
    /// primary). Written `X/Y` in hex as Postgres writes an LSN, or as one hex number (one past
    /// every real position is answered by the primary). Without
    /// replicas every read sees every write.
    #[serde(rename = "Gatekeeper-Min-Position")]
    #[param(
        nullable = false,
        pattern = r"^[0-9A-Fa-f]+(/[0-9A-Fa-f]+)?$",
        example = "0/16B3D48"
    )]
    pub gatekeeper_min_position: Option<String>,
}

/// The conversation a route is about (parsed by the `Conversation` extractor).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ConversationPath {
    /// Conversation id: 1 to 128 of A-Z a-z 0-9 . _ : - (not `.` or `..`)
    #[param(
        pattern = r"^(?!\.{1,2}$)[A-Za-z0-9._:-]{1,128}$",
        example = "airline-0-0"
    )]
    pub conversation: String,
}

/// The turn a route is about.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TurnIdPath {
    /// Turn id
    pub id: i64,
}

/// The turn reconstruct answers for.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TurnPath {
    /// Turn id
    pub turn: i64,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct CheckpointPath {
    /// Checkpoint id (1, 2, ... per conversation)
    pub checkpoint_id: i64,
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("`Authorization: Bearer <key>`; keys are configured as `tenant:key` pairs. Without configured keys the service is single-tenant and needs none."))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "gatekeeper",
        description = "Guards the compaction checkpoints of LLM agents: persists only the pointer set a summary really covers, and answers every turn from the summary when covered and from the raw log otherwise.",
        license(name = "MIT")
    ),
    paths(
        handlers::turns::append,
        handlers::turns::conversation,
        handlers::lifecycle::list,
        handlers::lifecycle::erase,
        handlers::lifecycle::export,
        handlers::lifecycle::import,
        handlers::turns::list,
        handlers::turns::turn,
        handlers::turns::set_pinned,
        handlers::compactions::propose,
        handlers::compactions::list,
        handlers::compactions::one,
        handlers::reads::reconstruct,
        handlers::reads::context,
        handlers::reads::compaction_plan,
        handlers::search::conversation,
        handlers::search::tenant,
        handlers::health::healthz,
        handlers::health::readyz,
        handlers::health::metrics,
    ),
    components(schemas(
        ProblemDoc, Status, Anchor, Label, AppendTurnsRequest, AppendTurn, AppendTurnsResponse, AppendedTurn, TurnResponse,
        ConversationResponse, CheckpointRef, CompactionRequestBody, VerdictResponse, Verdict, TurnDetail,
        CheckpointListResponse, CheckpointItem, CheckpointResponse, ReconstructResponse, Source, Evidence,
        ContextResponse, ContextItem, CompactionPlanResponse, IdRange, IdRanges, Role, Mode, Outcome,
        CoveragePath, TruncationSignal, TurnStatus, Reason, Rejection, TurnPatch, AnchorOrigin,
        Advice, AdviceReason, PlannedTurn, AnchorEvidence, SearchResponse, SearchTerm, SearchHit,
        SearchSnippet, SearchMatch, ConversationListResponse, ConversationListItem, ImportResponse,
        TurnListResponse, TurnListItem
    )),
    modifiers(&BearerAuth),
    tags(
        (name = "turns", description = "The raw turn log"),
        (name = "conversations", description = "The tenant's conversations: list, erase, export and import"),
        (name = "compactions", description = "Compaction proposals and the checkpoints they persist"),
        (name = "reads", description = "Reconstruct, context, search and the compaction plan"),
        (name = "operations", description = "Probes and metrics; no key needed")
    )
)]
pub struct ApiDoc;

/// The document as YAML, exactly as committed in `openapi.yaml`.
pub fn yaml() -> String {
    ApiDoc::openapi()
        .to_yaml()
        .expect("the OpenAPI document serializes to YAML")
}

pub fn json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serializes to JSON")
}

//! The OpenAPI document, generated from the handlers' annotations and the wire types.
//! `openapi.yaml` at the repository root is this document; a test fails when they differ.

use crate::api::*;
use crate::coverage::{
    AnchorEvidence, CoveragePath, Evidence, IdRange, IdRanges, Mode, Outcome, Reason, Rejection,
    Role, TruncationSignal, TurnDetail, TurnStatus, Verdict,
};
use crate::http::handlers;
use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

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
        handlers::turns::turn,
        handlers::turns::set_pinned,
        handlers::compactions::propose,
        handlers::compactions::list,
        handlers::compactions::one,
        handlers::reads::reconstruct,
        handlers::reads::context,
        handlers::reads::compaction_plan,
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
        Advice, AdviceReason, PlannedTurn, AnchorEvidence
    )),
    modifiers(&BearerAuth),
    tags(
        (name = "turns", description = "The raw turn log"),
        (name = "compactions", description = "Compaction proposals and the checkpoints they persist"),
        (name = "reads", description = "Reconstruct, context and the compaction plan"),
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

//! `Idempotency-Key`: a retried POST with the same key and body gets the answer the first one got
//! and changes nothing; the same key with another body is refused with 422.

use super::{AppState, Error};
use crate::domain::{ConversationId, TenantId};
use crate::store::{IdempotencyClaim, Store, StoredAnswer};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const HEADER: &str = "idempotency-key";
pub const REPLAYED: &str = "idempotent-replayed";

/// A client's key: 1 to 255 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, Error> {
        let Some(value) = headers.get(HEADER) else {
            return Ok(None);
        };
        let invalid = || Error::BadRequest {
            detail: "Idempotency-Key must be 1 to 255 visible ASCII characters".into(),
            field: Some("Idempotency-Key".into()),
        };
        let key = value.to_str().map_err(|_| invalid())?;
        if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid());
        }
        Ok(Some(Self(key.to_owned())))
    }

    /// The claim to record with the change, now, expiring after `ttl`.
    pub fn claim(&self, fingerprint: [u8; 32], ttl: Duration) -> IdempotencyClaim {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        IdempotencyClaim {
            key: self.0.clone(),
            fingerprint,
            now,
            not_before: now.saturating_sub(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What makes two requests "the same": the operation, the conversation and the canonical body
/// (whitespace and member order do not matter).
pub fn fingerprint(operation: &str, conversation: &str, body: &impl Serialize) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(operation.as_bytes());
    hasher.update([0]);
    hasher.update(conversation.as_bytes());
    hasher.update([0]);
    hasher.update(serde_json::to_vec(body).unwrap_or_default());
    hasher.finalize().into()
}

/// The stored answer, or 422 if the key was used for another request. A flow only reports an
/// earlier answer for a request that carried a claim, so without one nothing can match.
pub fn replay(answer: StoredAnswer, claim: Option<&IdempotencyClaim>) -> Result<Response, Error> {
    if claim.is_none_or(|c| answer.fingerprint != c.fingerprint) {
        return Err(Error::unprocessable(
            "this Idempotency-Key was already used with a different request; use a new key for a new request",
            serde_json::json!({ "field": "Idempotency-Key" }),
        ));
    }
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut response = (status, answer.body).into_response();
    let headers = response.headers_mut();
    let content_type = if status.is_client_error() {
        super::error::PROBLEM_JSON
    } else {
        "application/json"
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    Ok(response)
}

/// What an incoming POST's `Idempotency-Key` says before any work is done.
pub enum Prior {
    /// Go ahead; record the answer with this claim (none without a key).
    Fresh(Option<IdempotencyClaim>),
    /// The key was already answered: this is the answer (or a 422 for another body).
    Answered(Response),
}

/// Reads the key, and only when there is one fingerprints the body and looks for its answer,
/// so requests without a key pay nothing.
pub async fn prior<S: Store>(
    state: &AppState<S>,
    tenant: &TenantId,
    headers: &HeaderMap,
    (operation, conversation): (&str, &ConversationId),
    body: &impl Serialize,
) -> Result<Prior, Error> {
    let Some(key) = IdempotencyKey::from_headers(headers)? else {
        return Ok(Prior::Fresh(None));
    };
    let claim = key.claim(
        fingerprint(operation, conversation.as_str(), body),
        state.idempotency_ttl,
    );
    let store = state.service.store();
    match store
        .stored_answer(tenant, conversation, key.as_str(), claim.not_before)
        .await?
    {
        Some(answer) => Ok(Prior::Answered(replay(answer, Some(&claim))?)),
        None => Ok(Prior::Fresh(Some(claim))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_ttl_keeps_every_record_instead_of_wrapping() {
        let key = IdempotencyKey("k".into());
        let claim = key.claim([0; 32], Duration::from_secs(u64::MAX));
        assert!(claim.not_before <= claim.now, "{claim:?}");
        assert_eq!(claim.not_before, claim.now.saturating_sub(i64::MAX));
    }
}

//! Reconstruct answers kept in memory, keyed by what cannot change.
//!
//! A turn never changes once logged, and neither does a checkpoint; what can change is which
//! checkpoint decides a turn, and only by a newer checkpoint of its conversation. So an answer is
//! keyed by (tenant, conversation, turn, the conversation's latest checkpoint id), and each
//! request reads that id first (one primary-key read). Another process that adds a checkpoint
//! moves the id, and every cached answer of the conversation stops matching: correct across
//! processes, without invalidation messages.

use crate::api::Source;
use crate::domain::{ConversationId, TenantId};
use axum::body::Bytes;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AnswerKey {
    pub tenant: TenantId,
    pub conversation: ConversationId,
    pub turn: i64,
    pub latest_checkpoint: Option<i64>,
}

/// The serialized answer, ready to send, and where it came from (for the metrics).
#[derive(Debug, Clone)]
pub struct CachedAnswer {
    pub body: Bytes,
    pub source: Source,
}

#[derive(Debug, Clone)]
struct ByBytes;

impl Weighter<AnswerKey, CachedAnswer> for ByBytes {
    fn weight(&self, key: &AnswerKey, answer: &CachedAnswer) -> u64 {
        (answer.body.len() + key.conversation.as_str().len() + key.tenant.as_str().len() + 64)
            as u64
    }
}

/// Bounded by bytes: summaries repeat in every answer they cover, so counting entries would not
/// bound memory.
pub struct ReconstructCache {
    answers: Cache<AnswerKey, CachedAnswer, ByBytes>,
}

impl ReconstructCache {
    /// A cache of at most `max_bytes`; `None` when `max_bytes` is 0.
    pub fn new(max_bytes: u64) -> Option<Self> {
        (max_bytes > 0).then(|| Self {
            answers: Cache::with_weighter((max_bytes / 1024).max(16) as usize, max_bytes, ByBytes),
        })
    }

    pub fn get(&self, key: &AnswerKey) -> Option<CachedAnswer> {
        self.answers.get(key)
    }

    pub fn insert(&self, key: AnswerKey, answer: CachedAnswer) {
        self.answers.insert(key, answer);
    }
}

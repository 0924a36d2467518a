//! Serialized reconstruct answers, bounded by bytes, with each checkpoint's summary kept once
//! however many answers quote it (a summary answer is the summary plus a few small members, and
//! a checkpoint's summary answers every turn it covers).

use crate::api::{ReconstructResponse, Source};
use crate::domain::{ConversationId, TenantId};
use axum::body::Bytes;
use quick_cache::sync::Cache;
use quick_cache::{Equivalent, Weighter};
use std::hash::{Hash, Hasher};

/// What an answer is keyed by: nothing in it can change once written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AnswerKey {
    pub tenant: TenantId,
    pub conversation: ConversationId,
    /// Which life of the conversation: one erased and created again has another.
    pub incarnation: i64,
    pub turn: i64,
    pub latest_checkpoint: Option<i64>,
}

/// An answer ready to send, and where it came from (for the metrics).
#[derive(Debug, Clone)]
pub struct Answer {
    pub body: Bytes,
    pub source: Source,
}

/// A checkpoint's summary, shared by the answers that quote it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SummaryKey {
    tenant: TenantId,
    conversation: ConversationId,
    incarnation: i64,
    checkpoint_id: i64,
}

/// [`SummaryKey`] borrowed, to look one up without copying its strings; same fields, same hash.
#[derive(Hash)]
struct SummaryKeyRef<'a> {
    tenant: &'a TenantId,
    conversation: &'a ConversationId,
    incarnation: i64,
    checkpoint_id: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Answer(AnswerKey),
    Summary(SummaryKey),
}

// Each variant hashes as its inner key alone, so an `AnswerKey` or a `SummaryKeyRef` looks an
// entry up directly (see the `Equivalent` impls).
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Key::Answer(key) => key.hash(state),
            Key::Summary(key) => key.hash(state),
        }
    }
}

impl Equivalent<Key> for AnswerKey {
    fn equivalent(&self, key: &Key) -> bool {
        matches!(key, Key::Answer(k) if k == self)
    }
}

impl Equivalent<Key> for SummaryKeyRef<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        matches!(key, Key::Summary(k) if &k.tenant == self.tenant
            && &k.conversation == self.conversation
            && k.incarnation == self.incarnation
            && k.checkpoint_id == self.checkpoint_id)
    }
}

#[derive(Debug, Clone)]
enum Value {
    Answer(Stored),
    /// A summary as a JSON string, quotes included.
    Summary(Bytes),
}

/// An answer's JSON in one buffer: the whole answer, or a summary answer without its summary.
#[derive(Debug, Clone)]
struct Stored {
    json: Bytes,
    /// Where in `json` the summary of which checkpoint goes, when it was left out.
    summary: Option<(usize, i64)>,
    source: Source,
}

/// What an entry costs beyond its strings' bytes: the key and value structs, the map's slot,
/// and three heap blocks with their allocator headers (measured: RSS grew about 1.8x the
/// counted bytes when this was 128).
const ENTRY_OVERHEAD: usize = 320;

#[derive(Debug, Clone)]
struct ByBytes;

impl Weighter<Key, Value> for ByBytes {
    fn weight(&self, key: &Key, value: &Value) -> u64 {
        let key_bytes = match key {
            Key::Answer(k) => k.tenant.as_str().len() + k.conversation.as_str().len(),
            Key::Summary(k) => k.tenant.as_str().len() + k.conversation.as_str().len(),
        };
        let value_bytes = match value {
            Value::Answer(stored) => stored.json.len(),
            Value::Summary(text) => text.len(),
        };
        (key_bytes + value_bytes + ENTRY_OVERHEAD) as u64
    }
}

pub struct Answers {
    cache: Cache<Key, Value, ByBytes>,
}

impl Answers {
    pub fn new(max_bytes: u64) -> Self {
        // quick_cache sizes its tables from an expected count: about 300 bytes an entry.
        let expected_entries = (max_bytes / 300).max(16) as usize;
        Self {
            cache: Cache::with_weighter(expected_entries, max_bytes, ByBytes),
        }
    }

    pub fn get(&self, key: &AnswerKey) -> Option<Answer> {
        let Some(Value::Answer(stored)) = self.cache.get(key) else {
            return None;
        };
        let body = match stored.summary {
            None => stored.json,
            Some((at, checkpoint_id)) => {
                let summary = SummaryKeyRef {
                    tenant: &key.tenant,
                    conversation: &key.conversation,
                    incarnation: key.incarnation,
                    checkpoint_id,
                };
                // Evicted before the answer: a miss, and the answer is read again.
                let Some(Value::Summary(summary)) = self.cache.get(&summary) else {
                    return None;
                };
                insert_at(&stored.json, at, &summary)
            }
        };
        Some(Answer {
            body,
            source: stored.source,
        })
    }

    /// Keeps the answer (a summary answer shares its summary with the checkpoint's other
    /// answers) and returns it serialized.
    pub fn keep(&self, key: AnswerKey, response: ReconstructResponse) -> Answer {
        let source = response.source;
        let (answer, stored) = match (source, response.checkpoint_id) {
            (Source::Summary, Some(checkpoint_id)) => {
                let (json, at, summary) = without_text(response);
                let body = insert_at(&json, at, &summary);
                let kept = SummaryKeyRef {
                    tenant: &key.tenant,
                    conversation: &key.conversation,
                    incarnation: key.incarnation,
                    checkpoint_id,
                };
                if self.cache.get(&kept).is_none() {
                    let summary_key = SummaryKey {
                        tenant: key.tenant.clone(),
                        conversation: key.conversation.clone(),
                        incarnation: key.incarnation,
                        checkpoint_id,
                    };
                    self.cache
                        .insert(Key::Summary(summary_key), Value::Summary(summary));
                }
                let stored = Stored {
                    json,
                    summary: Some((at, checkpoint_id)),
                    source,
                };
                (Answer { body, source }, stored)
            }
            _ => {
                let answer = serialize(response);
                let stored = Stored {
                    json: answer.body.clone(),
                    summary: None,
                    source,
                };
                (answer, stored)
            }
        };
        self.cache.insert(Key::Answer(key), Value::Answer(stored));
        answer
    }

    /// Drops every answer and summary of these conversations (any incarnation): one pass over
    /// the cache, however many, each entry looked up in a set of them (compared with each of
    /// them, a retention batch of 100 took 69 ms over a full 64 MiB cache; in a set, 16 ms).
    pub fn forget(&self, conversations: &[(TenantId, ConversationId)]) {
        let erased: foldhash::HashSet<(&TenantId, &ConversationId)> =
            conversations.iter().map(|(t, c)| (t, c)).collect();
        self.cache.retain(|key, _| {
            let of = match key {
                Key::Answer(k) => (&k.tenant, &k.conversation),
                Key::Summary(k) => (&k.tenant, &k.conversation),
            };
            !erased.contains(&of)
        });
    }

    pub fn clear(&self) {
        self.cache.clear();
    }

    /// Whether any answer or summary of the conversation is held (any incarnation).
    pub fn holds(&self, tenant: &TenantId, conversation: &ConversationId) -> bool {
        self.cache.iter().any(|(key, _)| match key {
            Key::Answer(k) => &k.tenant == tenant && &k.conversation == conversation,
            Key::Summary(k) => &k.tenant == tenant && &k.conversation == conversation,
        })
    }
}

/// The answer serialized, in a buffer of its own size.
pub fn serialize(response: ReconstructResponse) -> Answer {
    let source = response.source;
    Answer {
        body: exact(serde_json::to_vec(&response).expect("an answer always serializes")),
        source,
    }
}

/// The answer serialized with an empty text and that text taken out, where it went, and the
/// text as a JSON string.
fn without_text(mut response: ReconstructResponse) -> (Bytes, usize, Bytes) {
    let text = std::mem::take(&mut response.text);
    let mut json = serde_json::to_vec(&response).expect("an answer always serializes");
    // The members before `text` are numbers and fixed words, so this finds the member itself.
    const EMPTY_TEXT: &[u8] = br#""text":"""#;
    let at = json
        .windows(EMPTY_TEXT.len())
        .position(|w| w == EMPTY_TEXT)
        .expect("an answer has a text member")
        + EMPTY_TEXT.len()
        - 2;
    json.drain(at..at + 2);
    let text = serde_json::to_vec(&text).expect("a string always serializes");
    (exact(json), at, exact(text))
}

/// A Vec grown by doubling can hold twice its length; kept as is, that slack would be memory
/// the cache holds but does not count.
fn exact(mut bytes: Vec<u8>) -> Bytes {
    bytes.shrink_to_fit();
    Bytes::from(bytes)
}

fn insert_at(json: &[u8], at: usize, text: &[u8]) -> Bytes {
    let mut body = Vec::with_capacity(json.len() + text.len());
    body.extend_from_slice(&json[..at]);
    body.extend_from_slice(text);
    body.extend_from_slice(&json[at..]);
    body.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::{Evidence, Reason, Role};

    fn key(turn: i64) -> AnswerKey {
        AnswerKey {
            tenant: TenantId::single(),
            conversation: ConversationId::parse("c").unwrap(),
            incarnation: 1,
            turn,
            latest_checkpoint: Some(1),
        }
    }

    fn summary_answer(turn: i64, summary: &str) -> ReconstructResponse {
        ReconstructResponse {
            turn,
            source: Source::Summary,
            checkpoint_id: Some(1),
            text: summary.into(),
            role: Role::User,
            reason: None,
            evidence: vec![Evidence {
                anchor: "\"text\":\"\"".into(),
                start: 0,
                end: 3,
            }],
        }
    }

    fn parsed(answer: &Answer) -> ReconstructResponse {
        serde_json::from_slice(&answer.body).unwrap()
    }

    #[test]
    fn a_kept_answer_comes_back_byte_for_byte_as_its_plain_serialization() {
        let answers = Answers::new(1 << 20);
        let raw = ReconstructResponse {
            turn: 2,
            source: Source::RawLog,
            checkpoint_id: Some(1),
            text: "line\n\"quoted\" \u{0} é".into(),
            role: Role::Tool,
            reason: Some(Reason::AnchorMissing),
            evidence: vec![],
        };
        for response in [raw, summary_answer(3, "The summary, \"quoted\".")] {
            let turn = response.turn;
            let plain = serde_json::to_vec(&response).unwrap();
            let kept = answers.keep(key(turn), response.clone());
            let again = answers.get(&key(turn)).expect("kept");
            assert_eq!(parsed(&kept), response);
            assert_eq!(again.body, kept.body);
            assert_eq!(plain, kept.body, "the same bytes as serializing it whole");
        }
    }

    #[test]
    fn summary_answers_of_one_checkpoint_share_its_summary() {
        let summary = "S".repeat(10_000);
        let answers = Answers::new(1 << 20);
        for turn in 0..50 {
            answers.keep(key(turn), summary_answer(turn, &summary));
        }
        for turn in 0..50 {
            assert_eq!(parsed(&answers.get(&key(turn)).unwrap()).text, summary);
        }
        // 50 copies would be 500 KB; one copy and 50 small heads are far less.
        assert!(
            answers.cache.weight() < 50_000,
            "{}",
            answers.cache.weight()
        );
    }

    #[test]
    fn an_answer_whose_summary_was_evicted_is_a_miss_not_a_wrong_answer() {
        let answers = Answers::new(1 << 20);
        answers.keep(key(0), summary_answer(0, "kept once"));
        let summary = SummaryKeyRef {
            tenant: &TenantId::single(),
            conversation: &ConversationId::parse("c").unwrap(),
            incarnation: 1,
            checkpoint_id: 1,
        };
        assert!(answers.cache.remove(&summary).is_some());
        assert!(answers.get(&key(0)).is_none());
    }
}

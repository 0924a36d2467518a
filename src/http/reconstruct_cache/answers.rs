//! Serialized reconstruct answers, bounded by bytes, with each checkpoint's summary kept once
//! however many answers quote it (a summary answer is the summary plus a few small members, and
//! a checkpoint's summary answers every turn it covers).

use crate::api::{ReconstructResponse, Source};
use crate::domain::{ConversationId, TenantId};
use axum::body::Bytes;
use quick_cache::Weighter;
use quick_cache::sync::Cache;

/// What an answer is keyed by: nothing in it can change once written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AnswerKey {
    pub tenant: TenantId,
    pub conversation: ConversationId,
    pub turn: i64,
    pub latest_checkpoint: Option<i64>,
}

/// An answer ready to send, and where it came from (for the metrics).
#[derive(Debug, Clone)]
pub struct Answer {
    pub body: Bytes,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Answer(AnswerKey),
    Summary {
        tenant: TenantId,
        conversation: ConversationId,
        checkpoint_id: i64,
    },
}

#[derive(Debug, Clone)]
enum Value {
    Answer(Stored),
    /// A summary as a JSON string, quotes included.
    Summary(Bytes),
}

/// An answer's JSON cut around the value of its `text` member.
#[derive(Debug, Clone)]
struct Stored {
    /// Up to and including `"text":`.
    head: Bytes,
    /// The text as a JSON string; `None` when it is the summary of `checkpoint_id`.
    text: Option<Bytes>,
    /// After the text, to the closing brace.
    tail: Bytes,
    checkpoint_id: Option<i64>,
    source: Source,
}

#[derive(Debug, Clone)]
struct ByBytes;

impl Weighter<Key, Value> for ByBytes {
    fn weight(&self, key: &Key, value: &Value) -> u64 {
        let key_bytes = match key {
            Key::Answer(k) => k.tenant.as_str().len() + k.conversation.as_str().len(),
            Key::Summary {
                tenant,
                conversation,
                ..
            } => tenant.as_str().len() + conversation.as_str().len(),
        };
        let value_bytes = match value {
            Value::Answer(s) => s.head.len() + s.tail.len() + s.text.as_ref().map_or(0, Bytes::len),
            Value::Summary(text) => text.len(),
        };
        // Plus what the entry itself, its strings' headers and the map cost.
        (key_bytes + value_bytes + 128) as u64
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

    pub fn get(&self, key: AnswerKey) -> Result<Answer, AnswerKey> {
        let key = Key::Answer(key);
        let Some(Value::Answer(stored)) = self.cache.get(&key) else {
            return Err(into_answer_key(key));
        };
        let key = into_answer_key(key);
        let text = match (&stored.text, stored.checkpoint_id) {
            (Some(text), _) => text.clone(),
            (None, Some(checkpoint_id)) => {
                match self.cache.get(&summary_key(&key, checkpoint_id)) {
                    Some(Value::Summary(text)) => text,
                    // The summary was evicted first: read the answer again.
                    _ => return Err(key),
                }
            }
            (None, None) => return Err(key),
        };
        Ok(Answer {
            body: join(&stored.head, &text, &stored.tail),
            source: stored.source,
        })
    }

    /// Keeps the answer (sharing its summary with the checkpoint's other answers) and returns
    /// it serialized.
    pub fn keep(&self, key: AnswerKey, response: ReconstructResponse) -> Answer {
        let (stored, text) = cut(response);
        let body = join(&stored.head, &text, &stored.tail);
        let source = stored.source;
        match (stored.source, stored.checkpoint_id) {
            (Source::Summary, Some(checkpoint_id)) => {
                let summary = summary_key(&key, checkpoint_id);
                if self.cache.get(&summary).is_none() {
                    self.cache.insert(summary, Value::Summary(text));
                }
                self.cache.insert(Key::Answer(key), Value::Answer(stored));
            }
            _ => self.cache.insert(
                Key::Answer(key),
                Value::Answer(Stored {
                    text: Some(text),
                    ..stored
                }),
            ),
        }
        Answer { body, source }
    }
}

/// The answer serialized, without the cache.
pub fn serialize(response: ReconstructResponse) -> Answer {
    let (stored, text) = cut(response);
    Answer {
        body: join(&stored.head, &text, &stored.tail),
        source: stored.source,
    }
}

fn into_answer_key(key: Key) -> AnswerKey {
    match key {
        Key::Answer(key) => key,
        Key::Summary { .. } => unreachable!("only answer keys are looked up by turn"),
    }
}

fn summary_key(key: &AnswerKey, checkpoint_id: i64) -> Key {
    Key::Summary {
        tenant: key.tenant.clone(),
        conversation: key.conversation.clone(),
        checkpoint_id,
    }
}

/// Serializes the answer with an empty text and cuts it there; the text is serialized apart.
fn cut(mut response: ReconstructResponse) -> (Stored, Bytes) {
    let text = std::mem::take(&mut response.text);
    let json = serde_json::to_vec(&response).expect("an answer always serializes");
    // The members before `text` are numbers and fixed words, so this finds the member itself.
    const EMPTY_TEXT: &[u8] = br#""text":"""#;
    let at = json
        .windows(EMPTY_TEXT.len())
        .position(|w| w == EMPTY_TEXT)
        .expect("an answer has a text member");
    let json = Bytes::from(json);
    let stored = Stored {
        head: json.slice(..at + EMPTY_TEXT.len() - 2),
        text: None,
        tail: json.slice(at + EMPTY_TEXT.len()..),
        checkpoint_id: response.checkpoint_id,
        source: response.source,
    };
    let text = Bytes::from(serde_json::to_vec(&text).expect("a string always serializes"));
    (stored, text)
}

fn join(head: &[u8], text: &[u8], tail: &[u8]) -> Bytes {
    let mut body = Vec::with_capacity(head.len() + text.len() + tail.len());
    body.extend_from_slice(head);
    body.extend_from_slice(text);
    body.extend_from_slice(tail);
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
            let again = answers.get(key(turn)).expect("kept");
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
            assert_eq!(parsed(&answers.get(key(turn)).unwrap()).text, summary);
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
        answers.cache.remove(&summary_key(&key(0), 1));
        assert!(answers.get(key(0)).is_err());
    }
}

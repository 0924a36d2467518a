//! JSON content: string and number values become candidates, keys never do; values of
//! identifying keys rank first, the record's own before nested ones.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::tokens::scan;
use super::{Candidate, MAX_ANCHOR_CHARS, Rank, Tier, classify, is_stop_word};

/// The candidates from the values of `content` as JSON, or `None` if it is not JSON.
pub(super) fn json_candidates(content: &str) -> Option<Vec<Candidate<'_>>> {
    let mut sink = JsonSink {
        candidates: Vec::new(),
        order: 0,
        spans: Vec::new(),
    };
    let mut de = serde_json::Deserializer::from_str(content);
    let walk = Walk {
        sink: &mut sink,
        ctx: Ctx {
            depth: 0,
            identifying: false,
        },
    };
    // serde_json's recursion limit turns absurdly deep input into an error (read as prose).
    walk.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(sink.candidates)
}

struct JsonSink<'a> {
    candidates: Vec<Candidate<'a>>,
    /// Tokens seen so far, in document order.
    order: usize,
    /// Scratch space for one value's token spans, reused across values.
    spans: Vec<(usize, usize, bool)>,
}

/// Where a value sits: how many objects enclose it and whether its key identifies a record.
#[derive(Clone, Copy)]
struct Ctx {
    depth: u32,
    identifying: bool,
}

impl<'a> JsonSink<'a> {
    fn value(&mut self, value: Cow<'a, str>, ctx: Ctx) {
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        // A short value inside a record is a label, so its capital letter is not a sentence
        // start ("Mia", "San Francisco"); a top-level string or a longer text is prose.
        let label = ctx.depth > 0 && value.split_whitespace().nth(LABEL_WORDS).is_none();
        scan(&value, !label, |s, e, start| spans.push((s, e, start)));
        let whole = spans.len() == 1;
        for &(start, end, sentence_start) in &spans {
            let token = &value[start..end];
            let tier = if ctx.identifying && whole && is_identifying_value(token) {
                Some(Tier::IdentifyingValue)
            } else {
                classify(token, sentence_start)
            };
            if let Some(tier) = tier {
                let text = match &value {
                    Cow::Borrowed(v) => Cow::Borrowed(&v[start..end]),
                    Cow::Owned(v) => Cow::Owned(v[start..end].to_owned()),
                };
                self.candidates.push(Candidate {
                    rank: Rank {
                        tier,
                        depth: if tier == Tier::IdentifyingValue {
                            ctx.depth
                        } else {
                            0
                        },
                        chars: Reverse(token.chars().count()),
                        order: self.order,
                    },
                    text,
                });
            }
            self.order += 1;
        }
        self.spans = spans;
    }
}

/// String values of up to this many words are labels (names, places, addresses).
const LABEL_WORDS: usize = 4;

fn is_identifying_value(token: &str) -> bool {
    (3..=MAX_ANCHOR_CHARS).contains(&token.chars().count()) && !is_stop_word(token)
}

/// `id`, `reservation_id`, `userId`, `flight_number`, `promo_code`, `order_ids`, ...
fn is_identifying_key(key: &str) -> bool {
    const WHOLE: [&str; 5] = ["id", "ids", "uuid", "code", "number"];
    const SNAKE: [&str; 6] = ["_id", "-id", "_ids", "_uuid", "_code", "_number"];
    const CAMEL: [&str; 5] = ["Id", "ID", "Ids", "Code", "Number"];
    // Case-insensitive suffix test without allocating: this runs for every key.
    let tail = |suffix: &str| {
        key.len()
            .checked_sub(suffix.len())
            .and_then(|at| key.get(at..))
            .is_some_and(|t| t.eq_ignore_ascii_case(suffix))
    };
    WHOLE.iter().any(|w| key.eq_ignore_ascii_case(w))
        || SNAKE.iter().any(|s| tail(s))
        // Each suffix alone is one of the whole keys already.
        || CAMEL.iter().any(|s| key.ends_with(s))
}

/// Walks a JSON value in document order, feeding its strings and numbers to the sink.
struct Walk<'s, 'a> {
    sink: &'s mut JsonSink<'a>,
    ctx: Ctx,
}

impl<'a> DeserializeSeed<'a> for Walk<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'a>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'a> Visitor<'a> for Walk<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'a str) -> Result<(), E> {
        self.sink.value(Cow::Borrowed(v), self.ctx);
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        // Escaped in the source: the unescaped text may not occur verbatim (checked later).
        self.sink.value(Cow::Owned(v.to_owned()), self.ctx);
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.sink.value(Cow::Owned(v.to_string()), self.ctx);
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.sink.value(Cow::Owned(v.to_string()), self.ctx);
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        // serde_json's own rendering (`255.0`), which matches the usual source text.
        if let Some(n) = serde_json::Number::from_f64(v) {
            self.sink.value(Cow::Owned(n.to_string()), self.ctx);
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<S: SeqAccess<'a>>(self, mut seq: S) -> Result<(), S::Error> {
        // Arrays do not nest records: `[{..}, {..}]` lists records at the same depth, and the
        // elements of `reservation_ids` are as identifying as their key.
        let sink = self.sink;
        while seq
            .next_element_seed(Walk {
                sink: &mut *sink,
                ctx: self.ctx,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<M: MapAccess<'a>>(self, mut map: M) -> Result<(), M::Error> {
        let sink = self.sink;
        let depth = self.ctx.depth.saturating_add(1);
        while let Some(identifying) = map.next_key_seed(KeyIsIdentifying)? {
            map.next_value_seed(Walk {
                sink: &mut *sink,
                ctx: Ctx { depth, identifying },
            })?;
        }
        Ok(())
    }
}

/// Reads an object key only to classify it: keys are never anchors.
struct KeyIsIdentifying;

impl<'a> DeserializeSeed<'a> for KeyIsIdentifying {
    type Value = bool;

    fn deserialize<D: Deserializer<'a>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIsIdentifying {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(is_identifying_key(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifying_keys_are_recognised_in_snake_and_camel_case() {
        for key in [
            "id",
            "reservation_id",
            "userId",
            "flight_number",
            "promo_code",
            "ID",
        ] {
            assert!(is_identifying_key(key), "{key}");
        }
        for key in ["origin", "paid", "valid", "android", "first_name"] {
            assert!(!is_identifying_key(key), "{key}");
        }
    }

    fn texts(content: &str) -> Vec<String> {
        let candidates = json_candidates(content).expect("JSON");
        candidates
            .into_iter()
            .map(|c| c.text.into_owned())
            .collect()
    }

    #[test]
    fn escaped_strings_and_negative_numbers_give_candidates_too() {
        assert_eq!(
            texts(r#"{"note": "rebook \"ZFA04Y\" today"}"#),
            ["rebook", "ZFA04Y"]
        );
        assert_eq!(texts(r#"{"delta": -4521}"#), ["4521"]);
    }
}

//! JSON parsed strictly: a member given twice is an error, not "the last one wins" (a second
//! `consumed` must never silently replace the first); and boundedly: at most a budget of values,
//! counted while parsing, so a body of millions of tiny elements is refused before its tree is
//! built (each value costs 32 bytes or more in memory, several times its text).

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::cell::Cell;
use std::fmt;

/// Parses a value, refusing duplicate members and more than `budget` values in all.
pub struct Strict<'b> {
    pub budget: &'b Cell<usize>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor {
            budget: self.budget,
        })
    }
}

struct StrictVisitor<'b> {
    budget: &'b Cell<usize>,
}

impl StrictVisitor<'_> {
    /// One more value, if the budget has room.
    fn spend<E: serde::de::Error>(&self) -> Result<(), E> {
        match self.budget.get().checked_sub(1) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => Err(E::custom(
                "the body holds more JSON values than any valid request can",
            )),
        }
    }

    fn seed(&self) -> Strict<'_> {
        Strict {
            budget: self.budget,
        }
    }
}

/// Fails on the duplicate member's value, so the error's path names the member.
struct Duplicate(String);

impl<'de> DeserializeSeed<'de> for Duplicate {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(D::Error::custom(format!(
            "the member `{}` appears more than once",
            self.0
        )))
    }
}

impl<'de> Visitor<'de> for StrictVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend()?;
        Ok(v.into())
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend()?;
        Ok(v.into())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend()?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.spend()?;
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self.seed())? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.spend()?;
        let mut members = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                map.next_value_seed(Duplicate(key.clone()))?;
                return Err(A::Error::custom(format!(
                    "the member `{key}` appears more than once"
                )));
            }
            let v = map.next_value_seed(self.seed())?;
            members.insert(key, v);
        }
        Ok(Value::Object(members))
    }
}

//! Verbatim JSON: tool arguments and results exactly as the producer sent them.
//!
//! The ledger keeps what the tool received and returned byte for byte — numbers are not rounded
//! through `f64`, key order and spelling are not normalised — and the hot path neither builds a
//! tree for a result nor escapes it again on output: the text is validated once on the way in and
//! copied on the way out. Arguments are parsed only when their checksum has to be computed.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;

/// A JSON value kept as its text. Equality compares the text.
#[derive(Clone)]
pub struct Json(Box<RawValue>);

impl Json {
    /// Wraps JSON text, checking that it is one JSON value.
    pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
        RawValue::from_string(text.to_owned()).map(Json)
    }

    /// The compact text of a value.
    pub fn from_value(value: &Value) -> Json {
        Json(serde_json::value::to_raw_value(value).expect("a Value always serializes"))
    }

    /// The text as sent.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The value as a tree (parses the text).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).expect("Json holds valid JSON")
    }
}

impl From<Value> for Json {
    fn from(value: Value) -> Json {
        Json::from_value(&value)
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Json {}

impl PartialEq<Value> for Json {
    fn eq(&self, other: &Value) -> bool {
        &self.to_value() == other
    }
}

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(Json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_text_exactly() {
        let text = r#"{"n": 12345678901234567890123, "f": 1.0, "b": "a", "a": [1e2]}"#;
        let j: Json = serde_json::from_str(text).unwrap();
        assert_eq!(j.as_str(), text);
        assert_eq!(serde_json::to_string(&j).unwrap(), text);
        let nested: Vec<Json> = serde_json::from_str(&format!("[{text}, null]")).unwrap();
        assert_eq!(nested[0], j);
        assert_eq!(nested[1].as_str(), "null");
    }

    #[test]
    fn converts_from_and_to_values() {
        let v = json!({"b": [1, 2], "a": "ü"});
        let j = Json::from(v.clone());
        assert_eq!(j.to_value(), v);
        assert!(j == v);
        assert!(Json::parse("{oops").is_err());
        assert_eq!(Json::parse(" 1 ").unwrap().to_value(), json!(1));
    }
}

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

/// How deep a value may nest: serde_json's own limit for the rest of a message, so that every
/// `Json` can also be read as a [`Value`].
pub const MAX_DEPTH: usize = 128;

/// A JSON value kept as its text. Equality compares the text.
///
/// Invariant: the text is one valid JSON value nesting at most [`MAX_DEPTH`] levels, so
/// [`Json::to_value`] cannot fail.
#[derive(Clone)]
pub struct Json(Box<RawValue>);

impl Json {
    /// Wraps JSON text, checking that it is one JSON value of at most [`MAX_DEPTH`] levels.
    pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
        let raw = RawValue::from_string(text.to_owned())?;
        check_depth(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(Json(raw))
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
        let raw = Box::<RawValue>::deserialize(d)?;
        check_depth(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(Json(raw))
    }
}

/// Fails when valid JSON `text` nests deeper than [`MAX_DEPTH`] (brackets inside strings do not
/// count).
fn check_depth(text: &str) -> Result<(), String> {
    // A value cannot nest deeper than it has opening brackets, nor deeper than half its length
    // (every bracket is closed). Counting the brackets is a branch-free pass the compiler
    // vectorizes (in chunks small enough to count in bytes); together the two spare almost every
    // value the exact scan below.
    if text.len() < 2 * (MAX_DEPTH + 1) {
        return Ok(());
    }
    let openers: usize = text
        .as_bytes()
        .chunks(255)
        .map(|chunk| {
            let n = chunk
                .iter()
                .fold(0u8, |n, &b| n + u8::from(b == b'[' || b == b'{'));
            usize::from(n)
        })
        .sum();
    if openers <= MAX_DEPTH {
        return Ok(());
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!(
                        "recursion limit exceeded: the value nests deeper than {MAX_DEPTH} levels"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
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

    #[test]
    fn refuses_values_too_deep_to_read_back() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(Json::parse(&deep(MAX_DEPTH)).is_ok());
        let e = Json::parse(&deep(MAX_DEPTH + 1)).unwrap_err().to_string();
        assert!(e.contains("recursion limit"), "{e}");
        // Inside a larger message, too (serde's RawValue itself has no depth limit).
        let msg = format!("[{}]", deep(MAX_DEPTH + 5));
        assert!(serde_json::from_str::<Vec<Json>>(&msg).is_err());
        // Brackets inside strings are text, not nesting.
        let text = format!("\"{}\\\"{}\"", "[".repeat(500), "{".repeat(500));
        assert!(Json::parse(&text).is_ok(), "{text}");
        // Many brackets, little depth.
        let wide = format!("[{}]", vec!["[{}]"; 300].join(","));
        assert!(Json::parse(&wide).is_ok());
        let deep_among_many = format!("[{},{}]", vec!["[]"; 300].join(","), deep(MAX_DEPTH));
        assert!(Json::parse(&deep_among_many).is_err());
    }
}

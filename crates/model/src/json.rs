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

/// How deep a value may nest (arrays and objects, counted from 1 for the value itself).
///
/// JavaScript's `JSON.parse` has no such limit, and @nhtio/adk hashes what its recursive
/// `canonicalStringify` can walk: on node 20's default stack about 2,460 levels of arrays and
/// 2,340 of objects (deeper, it throws `RangeError` and the call gets no checksum). 4,096 covers
/// every value the ADK can hash. Everything this program does with a `Json` past its decoding —
/// checking the bound, canonical text and checksum, the record encoder copying the text — is a
/// loop, never a recursion, so the bound is about memory and time, not the stack. Beyond it a
/// value is refused when it is read, with a "recursion limit exceeded" error (the event's
/// `too_deep` reason). serde_json captures a `RawValue` (how a `Json` inside a message is read
/// when serde reads the message) by skipping it in a loop, with no depth limit and taking lone
/// surrogates and any number, so the bound is checked here, on the captured text; the event
/// decoder's direct reader checks the same grammar and the same bound as it reads the text.
///
/// serde_json's own parser stops at 128 levels: [`Json::try_to_value`] fails on such values,
/// and [`Json::to_value`] cuts them (see there). The rest of an event (its envelope,
/// `attributes`, `hookContext`) is held to that limit as serde_json reads it.
pub const MAX_DEPTH: usize = 4096;

/// How deep serde_json nests a [`Value`] it builds: its recursion limit of 128 refuses a 128th
/// level.
const VALUE_DEPTH: usize = 127;

/// A JSON value kept as its text. Equality compares the text.
///
/// Invariant: the text is one valid JSON value nesting at most [`MAX_DEPTH`] levels. It may hold
/// what JavaScript's `JSON.parse` takes and a [`Value`] cannot: a lone surrogate escape
/// (`"\ud800"`), a number beyond the range of a double (`1e400`), 128 levels or more; hence
/// [`Json::try_to_value`] can fail, and [`Json::to_value`] is lossy.
#[derive(Clone)]
pub struct Json(Box<str>);

impl Json {
    /// Wraps JSON text, checking that it is one JSON value of at most [`MAX_DEPTH`] levels.
    pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
        let raw = RawValue::from_string(text.to_owned())?;
        check_depth(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(Json(raw.into()))
    }

    /// The compact text of a value.
    pub fn from_value(value: &Value) -> Json {
        Json(
            serde_json::value::to_raw_value(value)
                .expect("a Value always serializes")
                .into(),
        )
    }

    /// Text already checked to be one JSON value of at most [`MAX_DEPTH`] levels, by the grammar
    /// serde_json checks a `RawValue` by (`jsonscan::value_end`).
    pub(crate) fn from_checked(text: &str) -> Json {
        Json(text.into())
    }

    /// The text as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value as a tree, exactly; fails where a [`Value`] cannot hold the text: a lone
    /// surrogate escape, a number beyond the range of a double, nesting 128 levels or more.
    pub fn try_to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }

    /// The value as a tree, lossy where a [`Value`] cannot hold the text (never panics):
    ///
    /// - a lone surrogate becomes U+FFFD (as `String::from_utf16_lossy` makes it);
    /// - a number beyond the range of a double becomes `null` (what `JSON.stringify` writes for
    ///   the `Infinity` `JSON.parse` makes of it);
    /// - a value nested deeper than 127 levels (the most serde_json builds, and what its
    ///   recursive functions over a `Value` — drop, compare, serialize — are safe within)
    ///   becomes `null`.
    ///
    /// Everything else is exact, as [`Json::try_to_value`] gives it.
    pub fn to_value(&self) -> Value {
        match self.try_to_value() {
            Ok(value) => value,
            Err(_) => lossy_value(self.as_str()),
        }
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
    /// Equal when the text reads as exactly that value (never for text a `Value` cannot hold).
    fn eq(&self, other: &Value) -> bool {
        self.try_to_value().is_ok_and(|value| &value == other)
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
        // serde_json writes a `RawValue` as it stands. Making one reads the text again (borrowed,
        // not copied); the text is kept as a `str` so that the event decoder, which checks it
        // as it reads it, can make a `Json` without that second reading.
        let raw: &RawValue = serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        check_depth(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(Json(raw.into()))
    }
}

/// [`Json::to_value`] for text serde_json refuses: read as JavaScript reads it, then made a
/// [`Value`] bottom-up in one loop (children come after their parent in the arena, so walking it
/// backwards meets every child before its parent).
fn lossy_value(text: &str) -> Value {
    use crate::jstext::JsNode;
    let Ok(tree) = crate::jstext::parse(text, MAX_DEPTH) else {
        return Value::Null;
    };
    // Depth of each node, parents first.
    let mut depth = vec![1usize; tree.nodes.len()];
    for (index, node) in tree.nodes.iter().enumerate() {
        let children: Vec<usize> = match node {
            JsNode::Array(items) => items.clone(),
            JsNode::Object(entries) => entries.iter().map(|(_, child)| *child).collect(),
            _ => continue,
        };
        let below = depth[index] + 1;
        for child in children {
            if let Some(d) = depth.get_mut(child) {
                *d = below;
            }
        }
    }
    let mut values: Vec<Option<Value>> = vec![None; tree.nodes.len()];
    for index in (0..tree.nodes.len()).rev() {
        if depth[index] > VALUE_DEPTH {
            // Cut: nothing below 127 levels is built, so no deep `Value` ever exists.
            values[index] = Some(Value::Null);
            continue;
        }
        let mut take = |child: usize| values.get_mut(child).and_then(Option::take);
        let value = match &tree.nodes[index] {
            JsNode::Null => Value::Null,
            JsNode::Bool(b) => Value::Bool(*b),
            JsNode::Number(literal) => serde_json::from_str::<serde_json::Number>(literal)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            JsNode::Str(s) => Value::String(s.to_string_lossy()),
            JsNode::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|&i| take(i).unwrap_or(Value::Null))
                    .collect(),
            ),
            JsNode::Object(entries) => {
                let mut map = serde_json::Map::new();
                for (key, child) in entries {
                    // The last of duplicate keys wins, as in `JSON.parse` and serde_json.
                    map.insert(key.to_string_lossy(), take(*child).unwrap_or(Value::Null));
                }
                Value::Object(map)
            }
        };
        values[index] = Some(value);
    }
    values
        .first_mut()
        .and_then(Option::take)
        .unwrap_or(Value::Null)
}

/// Fails when valid JSON `text` nests deeper than [`MAX_DEPTH`] (brackets inside strings do not
/// count).
pub fn check_depth(text: &str) -> Result<(), String> {
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
        let text = format!("\"{}\\\"{}\"", "[".repeat(MAX_DEPTH), "{".repeat(MAX_DEPTH));
        assert!(Json::parse(&text).is_ok(), "{text}");
        // Many brackets, little depth.
        let wide = format!("[{}]", vec!["[{}]"; MAX_DEPTH].join(","));
        assert!(Json::parse(&wide).is_ok());
        let deep_among_many = format!("[{},{}]", vec!["[]"; MAX_DEPTH].join(","), deep(MAX_DEPTH));
        assert!(Json::parse(&deep_among_many).is_err());
    }

    #[test]
    fn holds_what_javascript_parses_and_a_value_cannot() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        for text in [
            r#""\ud800""#,
            "1e400",
            "-1e400",
            &deep(128),
            &deep(MAX_DEPTH),
        ] {
            let json = Json::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(json.try_to_value().is_err(), "{text}");
            // Lossy, never a panic.
            let _ = json.to_value();
            assert!(json != Value::Null);
        }
        let lossy = Json::parse(r#"{"a":"x\ud800y\ud83d\ude00","b":[1e400,-1e-400,7],"a":1}"#)
            .unwrap()
            .to_value();
        assert_eq!(lossy, json!({"a": 1, "b": [null, -0.0, 7]}));
        let lossy = Json::parse(r#"["x\udc00", 1e999]"#).unwrap().to_value();
        assert_eq!(lossy, json!(["x\u{FFFD}", null]));
        // Nesting is cut where serde_json stops.
        let cut = Json::parse(&deep(MAX_DEPTH)).unwrap().to_value();
        let mut depth = 0;
        let mut v = &cut;
        while let Value::Array(items) = v {
            depth += 1;
            v = items.first().unwrap_or(&Value::Null);
        }
        assert_eq!(depth, VALUE_DEPTH);
        let exact = Json::parse(&deep(VALUE_DEPTH)).unwrap();
        assert_eq!(exact.to_value(), exact.try_to_value().unwrap());
        assert!(Json::parse(&deep(VALUE_DEPTH + 1))
            .unwrap()
            .try_to_value()
            .is_err());
    }
}

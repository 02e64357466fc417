//! Canonical JSON text, byte-for-byte what @nhtio/adk's `canonicalStringify` produces.
//!
//! The ADK derives the tool-call checksum from `canonicalStringify({ tool, args })` (see
//! `NHTIO/ADK`, `src/lib/utils/canonical_json.ts`). Its rules, all inherited from JavaScript:
//!
//! - Scalars are printed by `JSON.stringify`: `null`, `true`, `false`, numbers as
//!   `Number.prototype.toString` prints them, strings with `JSON.stringify` escaping.
//! - Arrays keep their order, elements joined by `,`, no whitespace.
//! - Object keys are sorted by `Array.prototype.sort()`'s default comparator, which compares
//!   **UTF-16 code units**, then printed as `"key":value` joined by `,`.
//!
//! Where JavaScript and Rust differ, this module follows JavaScript:
//!
//! - **Numbers.** A JS number is an IEEE-754 double. `JSON.parse` rounds integers beyond 2^53 to
//!   the nearest double, so `9007199254740993` hashes as `9007199254740992` and
//!   `12345678901234567890` as `12345678901234567000`. Doubles print in the shortest form that
//!   round-trips, with JS's switch to exponent form (`1e+21`, `1e-7`) — see [`write_js_number`].
//!   `-0` prints as `0`, `1.0` as `1`.
//! - **Key order.** `serde_json::Map` is a `BTreeMap` ordered by UTF-8 bytes (code points). That is
//!   the UTF-16 order too, except when a key holds an astral character (U+10000 and above, a
//!   surrogate pair in UTF-16) and is compared with one holding U+E000..=U+FFFF: UTF-16 puts the
//!   astral one first (`"\u{1F600}" < "\u{FB01}"`), UTF-8 puts it last. Objects whose keys are all
//!   free of astral characters (nearly all of them) are written straight from the map in one pass;
//!   the rest are sorted with [`cmp_utf16`].
//! - **Strings.** `"` and `\` are escaped, control characters become `\b \f \n \r \t` or
//!   `\u00xx` (lowercase hex). Nothing else is escaped: not `/`, not DEL, not U+2028/U+2029, not
//!   non-ASCII — except a **lone surrogate**, which `JSON.stringify` (well-formed since ES2019)
//!   writes as a lowercase `\udxxx` escape. A JavaScript string is UTF-16 and can hold one (the
//!   text `"\ud800"` is valid JSON, and what `JSON.stringify` writes for it); a Rust string cannot,
//!   so [`write_canonical_text`] reads such text as UTF-16 code units: an escaped pair
//!   (`\ud83d\ude00`) is one character, written as itself; a lone half is written as its escape,
//!   and sorts among keys by its code unit.
//! - **Numbers beyond a double.** `JSON.parse("1e400")` is `Infinity` (and `-1e400` `-Infinity`),
//!   which `JSON.stringify` writes as `null`; `1e-400` is `0`.
//! - **Depth.** `JSON.parse` and `canonicalStringify` take values nested far deeper than
//!   serde_json's 128 levels (`canonicalStringify` recurses, and runs out of stack near 2,400
//!   levels on node 20's default stack). [`write_canonical_text`] reads and writes without
//!   recursion up to [`crate::json::MAX_DEPTH`] levels.
//!
//! The three are what serde_json refuses and `JSON.parse` takes, so [`write_canonical_text`]
//! handles them on a path that reads the text as JavaScript does (`crate::jstext`), taken only
//! when serde_json refuses the text; most text it writes straight from the text, without a tree
//! (`crate::canonical_direct`). [`write_canonical`] works on a `serde_json::Value`,
//! which cannot hold any of the three; it recurses over the value, which serde_json builds at most
//! 128 levels deep.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::jsnumber::write_f64;
pub use crate::jsnumber::write_js_number;
pub(crate) use crate::jsstring::needs_escape;
pub use crate::jsstring::{cmp_utf16, write_js_string};
use crate::jstext::{JsNode, JsStr, JsTree};

/// Returns the canonical JSON text of `value` (see the [module docs](self)).
///
/// Allocates a fresh string; hot paths should reuse a buffer with [`write_canonical`].
#[must_use]
pub fn canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Appends the canonical JSON text of `value` to `out` (see the [module docs](self)).
///
/// Allocates nothing beyond growing `out`, except for objects with astral-plane keys, which need
/// a small vector of key references to sort. Recursion follows the nesting of `value`; values
/// parsed by `serde_json` are at most 128 levels deep.
pub fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_js_number(n, out),
        Value::String(s) => write_js_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(map, out),
    }
}

/// Writes an object with keys in UTF-16 order.
///
/// Fast path: the map already iterates in code point order, which is UTF-16 order unless a key
/// holds an astral character, so entries are written as they come. Should an astral key turn up,
/// the partial output is rolled back and the object is written again from a sorted list.
fn write_object(map: &Map<String, Value>, out: &mut String) {
    let start = out.len();
    if map_iterates_sorted() {
        out.push('{');
        for (i, (key, value)) in map.iter().enumerate() {
            if has_astral(key) {
                out.truncate(start);
                write_object_sorted(map, out);
                return;
            }
            write_entry(i, key, value, out);
        }
        out.push('}');
    } else {
        write_object_sorted(map, out);
    }
}

/// Writes an object after sorting its keys with [`cmp_utf16`].
fn write_object_sorted(map: &Map<String, Value>, out: &mut String) {
    let mut entries: Vec<(&str, &Value)> = map.iter().map(|(k, v)| (k.as_str(), v)).collect();
    // Keys are unique, so an unstable sort is deterministic.
    entries.sort_unstable_by(|x, y| cmp_utf16(x.0, y.0));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        write_entry(i, key, value, out);
    }
    out.push('}');
}

/// Whether `key` holds a character outside the Basic Multilingual Plane.
fn has_astral(key: &str) -> bool {
    // A UTF-8 lead byte >= 0xF0 starts a four-byte (astral) sequence.
    !key.is_ascii() && key.bytes().any(|b| b >= 0xF0)
}

/// Whether `serde_json::Map` iterates in key order in this build.
///
/// It is a `BTreeMap` unless some crate in the build enables `serde_json`'s `preserve_order`
/// feature, which turns it into an insertion-ordered map; features are unified across the whole
/// build, so this is checked once at run time rather than assumed.
fn map_iterates_sorted() -> bool {
    static SORTED: OnceLock<bool> = OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut probe = Map::new();
        probe.insert("b".to_owned(), Value::Null);
        probe.insert("a".to_owned(), Value::Null);
        probe.keys().next().is_some_and(|k| k == "a")
    })
}

fn write_entry(index: usize, key: &str, value: &Value, out: &mut String) {
    if index > 0 {
        out.push(',');
    }
    write_js_string(key, out);
    out.push(':');
    write_canonical(value, out);
}

/// Why [`write_canonical_text`] could not read its text: not one JSON value, or nested deeper than
/// [`crate::json::MAX_DEPTH`].
pub use crate::jstext::ParseError as TextError;

/// Appends the canonical JSON text of the JSON value in `text`, as `canonicalStringify` writes
/// what JavaScript's `JSON.parse` makes of `text` — without building a `Value`, and also for the
/// texts `JSON.parse` takes and `serde_json` refuses (see the [module docs](self)).
///
/// Three paths give the same bytes. The first writes straight from the text in one pass, with
/// no tree (`crate::canonical_direct`); it leaves to the others what is rare: a lone surrogate, an
/// escape in a key, duplicate keys, a number beyond a double, more than 127 levels. The second
/// reads the text with serde_json into a tree that borrows strings without escapes from `text`
/// and sorts objects as vectors; it covers every text serde_json reads (at most 128 levels, no
/// lone surrogate, numbers within range of a double). When serde_json refuses the text, the
/// JavaScript reader (`crate::jstext`) takes over: UTF-16 strings, numbers from their literal
/// text, an explicit stack instead of recursion.
///
/// # Errors
///
/// Only when `text` is not one JSON value, or nests deeper than [`crate::json::MAX_DEPTH`]
/// levels; `out` is then left as it was.
pub fn write_canonical_text(text: &str, out: &mut String) -> Result<(), TextError> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<crate::canonical_direct::Scratch> = Default::default();
    }
    let direct = SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => crate::canonical_direct::write(text, out, &mut scratch),
        Err(_) => crate::canonical_direct::write(text, out, &mut Default::default()),
    });
    if direct {
        return Ok(());
    }
    write_canonical_text_by_tree(text, out)
}

/// [`write_canonical_text`] through a tree: serde_json's, else (for what serde_json refuses)
/// the JavaScript reader's.
pub(crate) fn write_canonical_text_by_tree(text: &str, out: &mut String) -> Result<(), TextError> {
    let start = out.len();
    if let Ok(node) = serde_json::from_str::<Node<'_>>(text) {
        node.write(out);
        return Ok(());
    }
    out.truncate(start);
    let tree = crate::jstext::parse(text, crate::json::MAX_DEPTH)?;
    write_tree(&tree, out);
    Ok(())
}

/// Appends the canonical text of a tree read by [`crate::jstext::parse`], in one loop over an
/// explicit stack: any depth the tree has costs heap, not stack.
fn write_tree(tree: &JsTree<'_>, out: &mut String) {
    /// A container being written: what is left of it.
    enum Frame<'t> {
        Array(&'t [usize], usize),
        Object(Vec<&'t (JsStr<'t>, usize)>, usize),
    }
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = if tree.nodes.is_empty() { None } else { Some(0) };
    loop {
        if let Some(index) = next.take() {
            match tree.nodes.get(index) {
                None | Some(JsNode::Null) => out.push_str("null"),
                Some(JsNode::Bool(true)) => out.push_str("true"),
                Some(JsNode::Bool(false)) => out.push_str("false"),
                // `JSON.parse` rounds the literal to the nearest double (beyond the range:
                // Infinity, which `JSON.stringify` writes as `null`); so does `str::parse`.
                Some(JsNode::Number(literal)) => {
                    write_f64(literal.parse::<f64>().unwrap_or(f64::NAN), out);
                }
                Some(JsNode::Str(s)) => s.write_js(out),
                Some(JsNode::Array(items)) => {
                    out.push('[');
                    stack.push(Frame::Array(items, 0));
                }
                Some(JsNode::Object(entries)) => {
                    out.push('{');
                    stack.push(Frame::Object(JsTree::sorted_entries(entries), 0));
                }
            }
        }
        let Some(frame) = stack.last_mut() else {
            return;
        };
        match frame {
            Frame::Array(items, i) => match items.get(*i) {
                Some(&item) => {
                    if *i > 0 {
                        out.push(',');
                    }
                    *i += 1;
                    next = Some(item);
                }
                None => {
                    out.push(']');
                    stack.pop();
                }
            },
            Frame::Object(entries, i) => match entries.get(*i) {
                Some(&(key, value)) => {
                    if *i > 0 {
                        out.push(',');
                    }
                    *i += 1;
                    key.write_js(out);
                    out.push(':');
                    next = Some(*value);
                }
                None => {
                    out.push('}');
                    stack.pop();
                }
            },
        }
    }
}

/// A JSON value borrowed from its text, as [`write_canonical_text`] reads it. Numbers arrive
/// exactly as serde_json hands them to a `Value` (non-negative integers as `u64`, negative ones
/// as `i64`, the rest as `f64`), so they print as [`write_js_number`] prints the `Value`'s.
enum Node<'a> {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Entries in the order of the text; duplicate keys included (the last one wins, as in a
    /// `Value` and in JavaScript's `JSON.parse`).
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl Node<'_> {
    fn write(&self, out: &mut String) {
        match self {
            Node::Null => out.push_str("null"),
            Node::Bool(true) => out.push_str("true"),
            Node::Bool(false) => out.push_str("false"),
            Node::U64(u) => write_js_number(&Number::from(*u), out),
            Node::I64(i) => write_js_number(&Number::from(*i), out),
            Node::F64(f) => write_f64(*f, out),
            Node::Str(s) => write_js_string(s, out),
            Node::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Node::Object(entries) => {
                let mut sorted: Vec<&(Cow<'_, str>, Node<'_>)> = entries.iter().collect();
                // Stable, so among equal keys the last in the text stays last.
                sorted.sort_by(|x, y| cmp_utf16(&x.0, &y.0));
                out.push('{');
                let mut first = true;
                for (i, (key, value)) in sorted.iter().map(|e| (&e.0, &e.1)).enumerate() {
                    if sorted.get(i + 1).is_some_and(|next| next.0 == *key) {
                        continue;
                    }
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    write_js_string(key, out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A string that borrows from the text when it holds no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
                Ok(Node::Bool(b))
            }
            fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
                Ok(Node::U64(u))
            }
            fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
                Ok(Node::I64(i))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Self::Value, E> {
                Ok(Node::F64(f))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Node::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Node::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Node::Str(Cow::Owned(s)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((Text(key), value)) = map.next_entry()? {
                    entries.push((key, value));
                }
                Ok(Node::Object(entries))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn number(text: &str) -> String {
        let n: Number = serde_json::from_str(text).expect("valid number");
        let mut out = String::new();
        write_js_number(&n, &mut out);
        out
    }

    #[test]
    fn numbers_print_as_javascript_does() {
        let cases = [
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1.0", "1"),
            ("-1", "-1"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("1e-7", "1e-7"),
            ("1e-6", "0.000001"),
            ("0.30000000000000004", "0.30000000000000004"),
            ("9007199254740992", "9007199254740992"),
            ("9007199254740993", "9007199254740992"),
            ("-9007199254740993", "-9007199254740992"),
            ("12345678901234567890", "12345678901234567000"),
            ("18446744073709551615", "18446744073709552000"),
            ("-9223372036854775808", "-9223372036854776000"),
            ("123456789012345678901234567890", "1.2345678901234568e+29"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("1E2", "100"),
            ("123.456", "123.456"),
        ];
        for (input, expected) in cases {
            assert_eq!(number(input), expected, "for {input}");
        }
    }

    #[test]
    fn strings_escape_as_json_stringify_does() {
        let mut out = String::new();
        write_js_string(
            "a\"b\\c/\u{0}\u{1}\u{8}\u{c}\n\r\t\u{1f}\u{7f}\u{2028}\u{2029}é😀",
            &mut out,
        );
        assert_eq!(
            out,
            "\"a\\\"b\\\\c/\\u0000\\u0001\\b\\f\\n\\r\\t\\u001f\u{7f}\u{2028}\u{2029}é😀\""
        );
    }

    /// Per-character reference for the eight-bytes-at-a-time scan in `write_js_string`.
    fn reference_escape(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn every_special_byte_is_escaped_at_every_position() {
        let specials = (0u8..0x20).chain([b'"', b'\\', b' ', b'!', b'#', b'[', b']', 0x7f]);
        for special in specials {
            for len in [1, 7, 8, 9, 16, 17, 25] {
                for position in 0..len {
                    let mut bytes = vec![b'x'; len];
                    bytes[position] = special;
                    let s = String::from_utf8(bytes).expect("ascii");
                    let mut out = String::new();
                    write_js_string(&s, &mut out);
                    assert_eq!(out, reference_escape(&s), "{s:?}");
                }
            }
        }
        let mixed =
            "ab\u{e9}\u{1F600}\"\u{2028}ccc\u{0}\u{FB01}\\dddddddd\u{1f}e\u{7f}\u{80}\u{10FFFF}";
        let mut out = String::new();
        write_js_string(mixed, &mut out);
        assert_eq!(out, reference_escape(mixed));
    }

    #[test]
    fn objects_sort_keys_and_arrays_keep_order() {
        let value = json!({"b": [3, 1, {"z": null, "a": true}], "a": {}, "": []});
        assert_eq!(
            canonical_string(&value),
            r#"{"":[],"a":{},"b":[3,1,{"a":true,"z":null}]}"#
        );
    }

    #[test]
    fn astral_keys_sort_before_high_bmp_keys() {
        let value = json!({"\u{FB01}": 1, "\u{1F600}": 2, "a": 3, "\u{D7FF}": 4, "\u{E000}": 5});
        assert_eq!(
            canonical_string(&value),
            "{\"a\":3,\"\u{D7FF}\":4,\"\u{1F600}\":2,\"\u{E000}\":5,\"\u{FB01}\":1}"
        );
    }

    #[test]
    fn utf16_comparison_matches_code_unit_order() {
        let keys = [
            "",
            "a",
            "ab",
            "a\u{0}",
            "B",
            "\u{7F}",
            "é",
            "\u{D7FF}",
            "\u{E000}",
            "\u{FFFF}",
            "\u{10000}",
            "\u{1F600}",
            "\u{10FFFF}",
            "a\u{1F600}",
            "a\u{FB01}",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(
                    cmp_utf16(a, b),
                    a.encode_utf16().cmp(b.encode_utf16()),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }
}

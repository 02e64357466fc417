//! JSON text read the way JavaScript's `JSON.parse` reads it, without recursion.
//!
//! `serde_json` refuses three kinds of text that `JSON.parse` takes, and that @nhtio/adk therefore
//! hashes: a `\ud800` escape that is not half of a surrogate pair (a JavaScript string is UTF-16
//! and holds it; a Rust `String` cannot), a number beyond the range of a double (`1e400`, which
//! `JSON.parse` makes `Infinity`), and nesting deeper than 128 levels. This reader takes all three:
//!
//! - strings are kept as the text between their quotes when they hold no escape (the common case),
//!   else as their UTF-16 code units, lone surrogates included;
//! - numbers are kept as their literal text; each reader of the tree decides what to make of it;
//! - containers are built with an explicit stack, never by recursion, up to a caller's bound.
//!
//! The tree is an arena: a node's children always come after it, so every pass over the tree
//! (canonical writing in `canonical.rs`, the lossy [`serde_json::Value`] of
//! `Json::to_value`) is a loop, never a recursion, whatever the depth.

use std::cmp::Ordering;
use std::fmt;

/// A JSON string as JavaScript holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JsStr<'a> {
    /// The text between the quotes, which holds no escape.
    Plain(&'a str),
    /// The UTF-16 code units of a string that held escapes; lone surrogates may be among them.
    Units(Vec<u16>),
}

impl JsStr<'_> {
    /// Compares two strings as JavaScript's default sort does: by UTF-16 code units.
    pub(crate) fn cmp_utf16(&self, other: &JsStr<'_>) -> Ordering {
        match (self, other) {
            (JsStr::Plain(a), JsStr::Plain(b)) => crate::jsstring::cmp_utf16(a, b),
            (JsStr::Units(a), JsStr::Units(b)) => a.cmp(b),
            (JsStr::Plain(a), JsStr::Units(b)) => a.encode_utf16().cmp(b.iter().copied()),
            (JsStr::Units(a), JsStr::Plain(b)) => a.iter().copied().cmp(b.encode_utf16()),
        }
    }

    /// The string as Rust text; a lone surrogate becomes U+FFFD.
    pub(crate) fn to_string_lossy(&self) -> String {
        match self {
            JsStr::Plain(s) => (*s).to_owned(),
            JsStr::Units(units) => String::from_utf16_lossy(units),
        }
    }

    /// Appends the string as `JSON.stringify` writes it (well-formed since ES2019): `"`, `\` and
    /// the C0 controls escaped, a surrogate pair as its character, a lone surrogate as a lowercase
    /// `\udxxx` escape, everything else as is.
    pub(crate) fn write_js(&self, out: &mut String) {
        let units = match self {
            JsStr::Plain(s) => return crate::jsstring::write_js_string(s, out),
            JsStr::Units(units) => units,
        };
        out.reserve(units.len() + 2);
        out.push('"');
        let mut i = 0;
        while let Some(&unit) = units.get(i) {
            i += 1;
            match unit {
                0xD800..=0xDBFF => {
                    if let Some(&low @ 0xDC00..=0xDFFF) = units.get(i) {
                        i += 1;
                        let code = 0x10000
                            + ((u32::from(unit) - 0xD800) << 10)
                            + (u32::from(low) - 0xDC00);
                        out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                    } else {
                        push_unit_escape(unit, out);
                    }
                }
                0xDC00..=0xDFFF => push_unit_escape(unit, out),
                _ => match u8::try_from(unit) {
                    Ok(byte) if byte.is_ascii() => crate::jsstring::write_js_ascii(byte, out),
                    _ => out.push(
                        char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER),
                    ),
                },
            }
        }
        out.push('"');
    }
}

/// Appends `\uxxxx` with lowercase hex digits, as `JSON.stringify` escapes a lone surrogate.
fn push_unit_escape(unit: u16, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(char::from(HEX[usize::from((unit >> shift) & 0xF)]));
    }
}

/// One value of the tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsNode<'a> {
    Null,
    Bool(bool),
    /// The number's literal text, checked against the JSON grammar.
    Number(&'a str),
    Str(JsStr<'a>),
    /// Indexes of the elements in the arena, in order.
    Array(Vec<usize>),
    /// Keys and indexes of the values in the arena, in the order of the text (duplicates
    /// included: readers keep the last, as `JSON.parse` does).
    Object(Vec<(JsStr<'a>, usize)>),
}

/// A parsed JSON value: an arena of nodes, the root first.
#[derive(Debug, Clone)]
pub(crate) struct JsTree<'a> {
    pub(crate) nodes: Vec<JsNode<'a>>,
}

/// Why a text is not one JSON value (or nests deeper than the bound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// What is wrong there.
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// An open container while parsing: its arena index, and for an object the key waiting for its
/// value.
enum Open<'a> {
    Array(usize),
    Object(usize, Option<JsStr<'a>>),
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn error<T>(&self, what: &'static str) -> Result<T, ParseError> {
        Err(ParseError {
            offset: self.pos,
            what,
        })
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn literal(&mut self, word: &'static str, node: JsNode<'a>) -> Result<JsNode<'a>, ParseError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(node)
        } else {
            self.error("expected a value")
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<JsNode<'a>, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.error("expected a digit"),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return self.error("expected a digit after the decimal point");
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return self.error("expected a digit in the exponent");
            }
        }
        Ok(JsNode::Number(&self.text[start..self.pos]))
    }

    fn hex4(&mut self) -> Result<u16, ParseError> {
        let Some(hex) = self.bytes.get(self.pos..self.pos + 4) else {
            return self.error("unexpected end of a \\u escape");
        };
        let mut unit = 0u16;
        for &b in hex {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return self.error("invalid \\u escape"),
            };
            unit = (unit << 4) | u16::from(digit);
        }
        self.pos += 4;
        Ok(unit)
    }

    /// Reads a string; `self.pos` is just past the opening quote.
    fn string(&mut self) -> Result<JsStr<'a>, ParseError> {
        let start = self.pos;
        loop {
            match self.peek() {
                None => return self.error("unterminated string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(JsStr::Plain(&self.text[start..self.pos - 1]));
                }
                Some(b'\\') => break,
                Some(b) if b < 0x20 => return self.error("control character in a string"),
                Some(_) => self.pos += 1,
            }
        }
        // The string holds escapes: read it as UTF-16 code units.
        let mut units: Vec<u16> = self.text[start..self.pos].encode_utf16().collect();
        loop {
            match self.peek() {
                None => return self.error("unterminated string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(JsStr::Units(units));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let unit = match self.peek() {
                        Some(b'"') => u16::from(b'"'),
                        Some(b'\\') => u16::from(b'\\'),
                        Some(b'/') => u16::from(b'/'),
                        Some(b'b') => 0x08,
                        Some(b'f') => 0x0C,
                        Some(b'n') => u16::from(b'\n'),
                        Some(b'r') => u16::from(b'\r'),
                        Some(b't') => u16::from(b'\t'),
                        Some(b'u') => {
                            self.pos += 1;
                            units.push(self.hex4()?);
                            continue;
                        }
                        _ => return self.error("invalid escape"),
                    };
                    self.pos += 1;
                    units.push(unit);
                }
                Some(b) if b < 0x20 => return self.error("control character in a string"),
                Some(_) => {
                    // A run of plain text up to the next quote, backslash or control character.
                    let run = self.pos;
                    while self
                        .peek()
                        .is_some_and(|b| b != b'"' && b != b'\\' && b >= 0x20)
                    {
                        self.pos += 1;
                    }
                    units.extend(self.text[run..self.pos].encode_utf16());
                }
            }
        }
    }
}

/// Parses `text` as one JSON value nesting at most `max_depth` containers.
pub(crate) fn parse(text: &str, max_depth: usize) -> Result<JsTree<'_>, ParseError> {
    let mut r = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let mut nodes: Vec<JsNode<'_>> = Vec::new();
    let mut stack: Vec<Open<'_>> = Vec::new();
    // Whether the next token must be a value (after `[`, `,` or `:`), as opposed to a `,` or a
    // closing bracket.
    let mut want_value = true;
    loop {
        r.skip_whitespace();
        if want_value {
            // An object wants a key before its value.
            if let Some(Open::Object(_, key @ None)) = stack.last_mut() {
                match r.peek() {
                    Some(b'"') => {
                        r.pos += 1;
                        *key = Some(r.string()?);
                        r.skip_whitespace();
                        if r.peek() != Some(b':') {
                            return r.error("expected `:`");
                        }
                        r.pos += 1;
                        r.skip_whitespace();
                    }
                    _ => return r.error("expected a string key"),
                }
            }
            let index = nodes.len();
            let node = match r.peek() {
                Some(b'{' | b'[') if stack.len() >= max_depth => {
                    return r.error("nesting deeper than the limit")
                }
                Some(b'{') => {
                    r.pos += 1;
                    r.skip_whitespace();
                    if r.peek() == Some(b'}') {
                        r.pos += 1;
                        JsNode::Object(Vec::new())
                    } else {
                        attach(&mut nodes, &mut stack, index, JsNode::Object(Vec::new()));
                        stack.push(Open::Object(index, None));
                        continue;
                    }
                }
                Some(b'[') => {
                    r.pos += 1;
                    r.skip_whitespace();
                    if r.peek() == Some(b']') {
                        r.pos += 1;
                        JsNode::Array(Vec::new())
                    } else {
                        attach(&mut nodes, &mut stack, index, JsNode::Array(Vec::new()));
                        stack.push(Open::Array(index));
                        continue;
                    }
                }
                Some(b'"') => {
                    r.pos += 1;
                    JsNode::Str(r.string()?)
                }
                Some(b'-' | b'0'..=b'9') => r.number()?,
                Some(b't') => r.literal("true", JsNode::Bool(true))?,
                Some(b'f') => r.literal("false", JsNode::Bool(false))?,
                Some(b'n') => r.literal("null", JsNode::Null)?,
                None => return r.error("unexpected end of the text"),
                Some(_) => return r.error("expected a value"),
            };
            attach(&mut nodes, &mut stack, index, node);
            want_value = false;
            continue;
        }
        // After a value: a separator, a closing bracket, or the end of the text.
        match (stack.last(), r.peek()) {
            (None, None) => return Ok(JsTree { nodes }),
            (None, Some(_)) => return r.error("trailing characters after the value"),
            (Some(_), Some(b',')) => {
                r.pos += 1;
                want_value = true;
            }
            (Some(Open::Array(_)), Some(b']')) | (Some(Open::Object(..)), Some(b'}')) => {
                r.pos += 1;
                stack.pop();
            }
            (Some(_), None) => return r.error("unexpected end of the text"),
            (Some(_), Some(_)) => return r.error("expected `,` or a closing bracket"),
        }
    }
}

/// Puts `node` at `index` of the arena and files it under the innermost open container (taking
/// that object's pending key).
fn attach<'a>(nodes: &mut Vec<JsNode<'a>>, stack: &mut [Open<'a>], index: usize, node: JsNode<'a>) {
    nodes.push(node);
    match stack.last_mut() {
        None => {}
        Some(Open::Array(parent)) => {
            if let Some(JsNode::Array(items)) = nodes.get_mut(*parent) {
                items.push(index);
            }
        }
        Some(Open::Object(parent, key)) => {
            let key = key.take().unwrap_or(JsStr::Plain(""));
            if let Some(JsNode::Object(entries)) = nodes.get_mut(*parent) {
                entries.push((key, index));
            }
        }
    }
}

impl JsTree<'_> {
    /// The entries of an object as `JSON.parse` then `Object.keys(…).sort()` see them: sorted by
    /// UTF-16 code units, the last of duplicate keys kept.
    pub(crate) fn sorted_entries<'t>(
        entries: &'t [(JsStr<'t>, usize)],
    ) -> Vec<&'t (JsStr<'t>, usize)> {
        let mut sorted: Vec<&(JsStr<'_>, usize)> = entries.iter().collect();
        // Stable: among equal keys the last in the text stays last.
        sorted.sort_by(|x, y| x.0.cmp_utf16(&y.0));
        let mut kept: Vec<&(JsStr<'_>, usize)> = Vec::with_capacity(sorted.len());
        for entry in sorted {
            match kept.last_mut() {
                Some(last) if last.0.cmp_utf16(&entry.0) == Ordering::Equal => *last = entry,
                _ => kept.push(entry),
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(s: &str) -> JsStr<'static> {
        JsStr::Units(s.encode_utf16().collect())
    }

    #[test]
    fn reads_what_json_parse_reads() {
        let tree = parse(
            r#" {"a": [1, -0.5e+3, "x\ud800y"], "b": {}, "c": [], "d": true} "#,
            8,
        )
        .unwrap();
        let JsNode::Object(entries) = &tree.nodes[0] else {
            panic!("{tree:?}")
        };
        assert_eq!(entries.len(), 4);
        let JsNode::Array(items) = &tree.nodes[entries[0].1] else {
            panic!("{tree:?}")
        };
        assert_eq!(tree.nodes[items[1]], JsNode::Number("-0.5e+3"));
        assert_eq!(
            tree.nodes[items[2]],
            JsNode::Str(JsStr::Units(vec![0x78, 0xD800, 0x79]))
        );
        assert_eq!(
            parse("1e400", 1).unwrap().nodes,
            vec![JsNode::Number("1e400")]
        );
    }

    #[test]
    fn refuses_what_json_parse_refuses() {
        for bad in [
            "",
            " ",
            "{",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{1:2}",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a",
            "\"\u{1}\"",
            "nul",
            "[1 2]",
            "1 2",
            "{\"a\":1,}",
            "[}",
            "{]",
            "tru",
            "NaN",
            "Infinity",
        ] {
            assert!(parse(bad, 8).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep(100_000), 100_000).is_ok());
        assert!(parse(&deep(11), 10).is_err());
        assert!(parse(&deep(10), 10).is_ok());
    }

    #[test]
    fn strings_write_as_json_stringify_does() {
        let cases = [
            (units("a\"\\\n\u{1}/é😀"), "\"a\\\"\\\\\\n\\u0001/é😀\""),
            (JsStr::Units(vec![0xD800]), "\"\\ud800\""),
            (JsStr::Units(vec![0xDE00, 0xD83D]), "\"\\ude00\\ud83d\""),
            (JsStr::Units(vec![0xD83D, 0xDE00]), "\"😀\""),
            (
                JsStr::Units(vec![0xD800, 0xD83D, 0xDE00, 0xDC00]),
                "\"\\ud800😀\\udc00\"",
            ),
            (JsStr::Plain("plain"), "\"plain\""),
        ];
        for (s, expected) in cases {
            let mut out = String::new();
            s.write_js(&mut out);
            assert_eq!(out, expected, "{s:?}");
        }
    }

    #[test]
    fn keys_compare_by_utf16_code_units() {
        let lone = JsStr::Units(vec![0xD800]);
        assert_eq!(lone.cmp_utf16(&JsStr::Plain("\u{FFFF}")), Ordering::Less);
        assert_eq!(lone.cmp_utf16(&JsStr::Plain("\u{D7FF}")), Ordering::Greater);
        assert_eq!(lone.cmp_utf16(&JsStr::Plain("😀")), Ordering::Less);
        assert_eq!(units("é").cmp_utf16(&JsStr::Plain("é")), Ordering::Equal);
    }
}

//! Canonical text written straight from JSON text, in one pass and without a tree: the fast path
//! of [`crate::canonical::write_canonical_text`], which the checksum of every announce goes
//! through.
//!
//! Scalars are written as they are read; an object's entries are written in the order of the text
//! and, when their keys are not in UTF-16 order already, the written entries are put in order
//! (one copy of the object's text). A string with no escape is copied as it stands: valid JSON
//! holds no `"`, `\` or control character raw in a string, and `JSON.stringify` escapes nothing
//! else. The reader checks the JSON grammar as it goes, so text it takes is text serde_json takes.
//!
//! It gives up — and the caller takes the tree path, whose rules the module docs of
//! [`crate::canonical`] give — on what is rare and has rules of its own: a lone surrogate escape,
//! an escape in a key, duplicate keys, a number beyond a double, nesting deeper than serde_json
//! reads, and anything that is not JSON. What it writes is byte for byte what the tree path writes
//! (the differential tests below and the model fuzz check that).

use crate::jsnumber::write_js_number;
use crate::jsonscan::{string_stop, unicode_escape, Cursor};
use crate::jsstring::{cmp_utf16, write_js_ascii};
use std::cmp::Ordering;

/// Deepest nesting taken here (serde_json's, where the tree path switches readers).
const MAX_DEPTH: usize = 127;

/// Room the writer reuses from call to call: the entries of the objects being read, and a copy
/// of an object's entries while they are put in order.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    entries: Vec<Entry>,
    text: String,
}

/// Appends the canonical text of `text` to `out`; `false` (with `out` as it was) when this path
/// gives up.
pub(crate) fn write(text: &str, out: &mut String, scratch: &mut Scratch) -> bool {
    let start = out.len();
    scratch.entries.clear();
    let mut w = Writer {
        cur: Cursor::new(text),
        out,
        scratch: &mut scratch.text,
        entries: &mut scratch.entries,
    };
    let ok = w.value(0) && w.cur.at_end();
    if !ok {
        out.truncate(start);
    }
    ok
}

/// One written entry of an object being read: where its key is in the text, and where
/// `"key":value` is in the output.
#[derive(Debug)]
struct Entry {
    key: (usize, usize),
    start: usize,
    end: usize,
}

struct Writer<'t, 'o> {
    cur: Cursor<'t>,
    out: &'o mut String,
    scratch: &'o mut String,
    /// The entries of the objects being read, innermost last.
    entries: &'o mut Vec<Entry>,
}

impl<'t> Writer<'t, '_> {
    fn value(&mut self, depth: usize) -> bool {
        self.cur.skip_whitespace();
        match self.cur.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string(),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    fn literal(&mut self, word: &'static str) -> bool {
        if !self.cur.bytes[self.cur.pos..].starts_with(word.as_bytes()) {
            return false;
        }
        self.cur.pos += word.len();
        self.out.push_str(word);
        true
    }

    fn array(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        self.cur.pos += 1;
        self.out.push('[');
        self.cur.skip_whitespace();
        if self.cur.eat(b']') {
            self.out.push(']');
            return true;
        }
        loop {
            if !self.value(depth) {
                return false;
            }
            self.cur.skip_whitespace();
            if self.cur.eat(b',') {
                self.out.push(',');
            } else if self.cur.eat(b']') {
                self.out.push(']');
                return true;
            } else {
                return false;
            }
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        self.cur.pos += 1;
        let open = self.out.len();
        self.out.push('{');
        let base = self.entries.len();
        self.cur.skip_whitespace();
        if self.cur.eat(b'}') {
            self.out.push('}');
            return true;
        }
        loop {
            self.cur.skip_whitespace();
            let Some(key) = self.cur.plain_key() else {
                return false;
            };
            let text = self.cur.text;
            self.cur.skip_whitespace();
            if !self.cur.eat(b':') {
                return false;
            }
            let start = self.out.len();
            self.out.push('"');
            self.out.push_str(&text[key.0..key.1]);
            self.out.push_str("\":");
            if !self.value(depth) {
                return false;
            }
            let end = self.out.len();
            self.entries.push(Entry { key, start, end });
            self.cur.skip_whitespace();
            if self.cur.eat(b',') {
                self.out.push(',');
            } else if self.cur.eat(b'}') {
                break;
            } else {
                return false;
            }
        }
        let ordered = self.order(base, open);
        self.entries.truncate(base);
        ordered && {
            self.out.push('}');
            true
        }
    }

    /// Puts the entries from `base` on, written after `{` at `open`, in UTF-16 order of their
    /// keys; `false` for duplicate keys (the tree path keeps the last of them).
    fn order(&mut self, base: usize, open: usize) -> bool {
        let text = self.cur.text;
        let key = |entry: &Entry| &text[entry.key.0..entry.key.1];
        let entries = &mut self.entries[base..];
        let mut sorted = true;
        for pair in entries.windows(2) {
            match cmp_utf16(key(&pair[0]), key(&pair[1])) {
                Ordering::Less => {}
                Ordering::Equal => return false,
                Ordering::Greater => sorted = false,
            }
        }
        if sorted {
            return true;
        }
        entries.sort_unstable_by(|a, b| cmp_utf16(key(a), key(b)));
        if entries
            .windows(2)
            .any(|pair| key(&pair[0]) == key(&pair[1]))
        {
            return false;
        }
        let body = open + 1;
        self.scratch.clear();
        self.scratch.push_str(&self.out[body..]);
        self.out.truncate(body);
        for (i, entry) in entries.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.out
                .push_str(&self.scratch[entry.start - body..entry.end - body]);
        }
        true
    }

    /// Reads and writes a string; `self.cur.pos` is at its opening quote.
    fn string(&mut self) -> bool {
        self.cur.pos += 1;
        self.out.push('"');
        loop {
            let run = self.cur.pos;
            let Some(stop) = string_stop(self.cur.bytes, run) else {
                return false;
            };
            self.out.push_str(&self.cur.text[run..stop]);
            self.cur.pos = stop + 1;
            if self.cur.bytes[stop] == b'"' {
                self.out.push('"');
                return true;
            }
            if !self.escape() {
                return false;
            }
        }
    }

    /// Reads the escape after a `\` and writes its character as `JSON.stringify` does.
    fn escape(&mut self) -> bool {
        let Some(b) = self.cur.peek() else {
            return false;
        };
        self.cur.pos += 1;
        let byte = match b {
            b'"' | b'\\' | b'/' => b,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unicode_escape(),
            _ => return false,
        };
        write_js_ascii(byte, self.out);
        true
    }

    /// Reads `XXXX` (and, after a high surrogate, the `\uXXXX` of its low half) and writes the
    /// character; a lone surrogate is left to the tree path.
    fn unicode_escape(&mut self) -> bool {
        let Some(c) = unicode_escape(self.cur.bytes, &mut self.cur.pos) else {
            return false;
        };
        match u8::try_from(c) {
            Ok(byte) if byte.is_ascii() => write_js_ascii(byte, self.out),
            _ => self.out.push(c),
        }
        true
    }

    /// Reads a number by the JSON grammar. A plain integer of up to 15 digits (an exact double)
    /// is written as it stands; any other goes through the number type the tree path uses.
    fn number(&mut self) -> bool {
        let start = self.cur.pos;
        self.cur.eat(b'-');
        let int_start = self.cur.pos;
        match self.cur.peek() {
            Some(b'0') => self.cur.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return false,
        }
        let int_digits = self.cur.pos - int_start;
        let mut plain = true;
        if self.cur.eat(b'.') {
            plain = false;
            if !self.some_digits() {
                return false;
            }
        }
        if let Some(b'e' | b'E') = self.cur.peek() {
            self.cur.pos += 1;
            plain = false;
            if let Some(b'+' | b'-') = self.cur.peek() {
                self.cur.pos += 1;
            }
            if !self.some_digits() {
                return false;
            }
        }
        let literal = &self.cur.text[start..self.cur.pos];
        if plain && int_digits <= 15 && literal != "-0" {
            self.out.push_str(literal);
            return true;
        }
        match serde_json::from_str::<serde_json::Number>(literal) {
            Ok(n) => {
                write_js_number(&n, self.out);
                true
            }
            // Beyond a double: the tree path writes what `JSON.parse` makes of it.
            Err(_) => false,
        }
    }

    fn digits(&mut self) {
        while self.cur.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.cur.pos += 1;
        }
    }

    /// Reads one or more digits.
    fn some_digits(&mut self) -> bool {
        let start = self.cur.pos;
        self.digits();
        self.cur.pos > start
    }
}

#[cfg(test)]
mod tests {
    use crate::canonical::write_canonical_text;
    use crate::test_json::{json_value, spelled, ODD_TEXTS};
    use proptest::prelude::*;

    /// The tree path alone, as it was before this path existed.
    fn tree(text: &str) -> Option<String> {
        let mut out = String::new();
        crate::canonical::write_canonical_text_by_tree(text, &mut out)
            .ok()
            .map(|()| out)
    }

    fn direct(text: &str) -> Option<String> {
        let (mut out, mut scratch) = (String::from("prefix"), super::Scratch::default());
        let ok = super::write(text, &mut out, &mut scratch);
        if !ok {
            assert_eq!(out, "prefix", "a failed write leaves the output as it was");
            return None;
        }
        Some(out["prefix".len()..].to_owned())
    }

    /// Where the direct path writes, it writes what the tree path writes; where it gives up, the
    /// public function still gives the tree path's answer.
    fn agree(text: &str) {
        let by_tree = tree(text);
        if let Some(by_direct) = direct(text) {
            assert_eq!(Some(&by_direct), by_tree.as_ref(), "{text:?}");
        }
        let mut out = String::new();
        let public = write_canonical_text(text, &mut out).ok().map(|()| out);
        assert_eq!(public, by_tree, "{text:?}");
    }

    #[test]
    fn writes_what_the_tree_path_writes() {
        for text in [
            r#"{"b":1,"a":[true,false,null],"c":{"z":"x","y":-0.0}}"#,
            r#" { "command" : "ls -la\n" , "description":"List \"all\" files\t\u00e9\/" } "#,
            r#"{"url":"https://x/y?q=1","prompt":"é ✓ \ud83d\ude00 \u2028 \u007f \u0000 \u001f"}"#,
            r#"[1, -5, 0, -0, 1.0, 1.5e3, 1E-7, 123456789012345, 1234567890123456, 12345678901234567890, -9007199254740993]"#,
            r#"{"\ud83d\ude00":1,"\ufb01":2}"#,
            r#"{"😀":1,"ﬁ":2,"a":3}"#,
            r#"{"a":1,"a":2}"#,
            r#""\ud800""#,
            r#"["\udc00x"]"#,
            "1e400",
            "-1e400",
            "1e-400",
            r#"{"a":{"c":[{"e":1,"d":2}],"b":0}}"#,
            "\"\u{7f}\"",
        ]
        .iter()
        .chain(ODD_TEXTS)
        {
            agree(text);
        }
    }

    #[test]
    fn gives_up_at_serde_jsons_depth_and_the_tree_path_goes_on() {
        for n in [126, 127, 128, 129, 500] {
            let text = format!("{}1{}", "[".repeat(n), "]".repeat(n));
            agree(&text);
            assert_eq!(direct(&text).is_some(), n <= super::MAX_DEPTH, "{n}");
        }
    }

    proptest! {
        #[test]
        fn any_value_in_any_spelling(value in json_value(), ascii in any::<bool>(), pretty in any::<bool>()) {
            let mut text = spelled(&value, pretty);
            if ascii {
                // The same value with every non-ASCII character escaped.
                text = text
                    .encode_utf16()
                    .map(|unit| match u8::try_from(unit) {
                        Ok(b) if b.is_ascii() => char::from(b).to_string(),
                        _ => format!("\\u{unit:04x}"),
                    })
                    .collect();
            }
            agree(&text);
            // Keys need no escape unless spelled in ASCII: nothing here is left to the tree.
            prop_assert!(ascii || direct(&text).is_some(), "{}", text);
        }

        #[test]
        fn any_text(text in "[\\[\\]{}\",:0-9a-z\\\\. \u{e9}\u{1F600}-]{0,24}") {
            agree(&text);
        }
    }
}

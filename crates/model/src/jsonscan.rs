//! The steps shared by the one-pass readers of JSON text (`canonical_direct`, `event::direct`):
//! a place in the text, whitespace, keys without escapes, where a run of a string's characters
//! stops, `\u` escapes, and the end of a value taken verbatim.

use crate::json::MAX_DEPTH;

/// A place in JSON text.
pub(crate) struct Cursor<'t> {
    pub text: &'t str,
    pub bytes: &'t [u8],
    pub pos: usize,
}

impl<'t> Cursor<'t> {
    pub fn new(text: &'t str) -> Self {
        Cursor {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    pub fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub fn skip_whitespace(&mut self) {
        self.pos = skip_whitespace(self.bytes, self.pos);
    }

    /// Takes `byte` if it comes next.
    pub fn eat(&mut self, byte: u8) -> bool {
        let next = self.peek() == Some(byte);
        self.pos += usize::from(next);
        next
    }

    /// Whether only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.skip_whitespace();
        self.pos == self.bytes.len()
    }

    /// Reads a key that holds no escape, from its opening quote; gives where its characters are.
    pub fn plain_key(&mut self) -> Option<(usize, usize)> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.pos;
        let end = string_stop(self.bytes, start)?;
        if self.bytes[end] != b'"' {
            return None;
        }
        self.pos = end + 1;
        Some((start, end))
    }
}

/// Where the run of plain characters of a string that starts at `from` stops: the index of the
/// next `"` or `\`. `None` when the text ends first or the run holds a control character (never
/// raw in a JSON string).
pub(crate) fn string_stop(bytes: &[u8], from: usize) -> Option<usize> {
    // Eight bytes at a time: the strings of an event are mostly short, and a run between two
    // escapes of a long one is some tens of bytes, where a vector search's setup costs more than
    // it saves.
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // A byte's high bit is set where it is below 0x20, or equal to `"` or `\` (a borrow
        // can mark a byte after a match as well, never one before: the lowest mark is exact).
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        let marks = (word.wrapping_sub(ONES * 0x20)
            | quote.wrapping_sub(ONES)
            | backslash.wrapping_sub(ONES))
            & !word
            & HIGH;
        if marks != 0 {
            return stop_at(bytes, at + marks.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    let rest = bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    stop_at(bytes, at + rest)
}

/// The stop at `at`, which holds `"`, `\` or a control character.
fn stop_at(bytes: &[u8], at: usize) -> Option<usize> {
    (bytes[at] >= 0x20).then_some(at)
}

/// The end of the JSON value that starts at `at` (no whitespace before it), checked by the
/// grammar serde_json checks a `RawValue` by — any `\uXXXX` escape, lone surrogates too; any
/// number, however large — and nesting at most [`MAX_DEPTH`] levels, as a [`Json`] may. `None`
/// for anything else.
///
/// [`Json`]: crate::json::Json
pub(crate) fn value_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    // Whether each open container is an object, innermost last: one bit a level.
    let mut objects = [0u64; MAX_DEPTH.div_ceil(64)];
    let (mut depth, max_depth) = (0, MAX_DEPTH);
    loop {
        // A value.
        match *bytes.get(at)? {
            b'"' => at = string_end(bytes, at + 1)?,
            open @ (b'{' | b'[') => {
                if depth == max_depth {
                    return None;
                }
                let object = open == b'{';
                let (word, bit) = (depth / 64, 1u64 << (depth % 64));
                objects[word] = if object {
                    objects[word] | bit
                } else {
                    objects[word] & !bit
                };
                depth += 1;
                at = skip_whitespace(bytes, at + 1);
                let close = if object { b'}' } else { b']' };
                if bytes.get(at) == Some(&close) {
                    depth -= 1;
                    at += 1;
                } else {
                    if object {
                        at = member_key(bytes, at)?;
                    }
                    continue;
                }
            }
            b't' => at = literal(bytes, at, b"true")?,
            b'f' => at = literal(bytes, at, b"false")?,
            b'n' => at = literal(bytes, at, b"null")?,
            _ => at = number_end(bytes, at)?,
        }
        // What follows a value: the end, or the next member, or the close of its container.
        loop {
            if depth == 0 {
                return Some(at);
            }
            let object = objects[(depth - 1) / 64] & (1 << ((depth - 1) % 64)) != 0;
            at = skip_whitespace(bytes, at);
            match *bytes.get(at)? {
                b',' => {
                    at = skip_whitespace(bytes, at + 1);
                    if object {
                        at = member_key(bytes, at)?;
                    }
                    break;
                }
                b'}' if object => {}
                b']' if !object => {}
                _ => return None,
            }
            depth -= 1;
            at += 1;
        }
    }
}

/// Past the JSON whitespace at `at`.
pub(crate) fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// Past `"key":` and the whitespace after it, from the key's opening quote.
fn member_key(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let at = skip_whitespace(bytes, string_end(bytes, at + 1)?);
    (bytes.get(at) == Some(&b':')).then(|| skip_whitespace(bytes, at + 1))
}

/// Past the closing quote of the string whose characters start at `from`.
/// The length of the JSON string token `bytes` starts with (its quotes included); `None` when
/// it is not one.
pub(crate) fn string_len(bytes: &[u8]) -> Option<usize> {
    (bytes.first() == Some(&b'"'))
        .then(|| string_end(bytes, 1))
        .flatten()
}

fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut stop = string_stop(bytes, from)?;
    while bytes[stop] == b'\\' {
        let next = match *bytes.get(stop + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => stop + 2,
            b'u' if bytes
                .get(stop + 2..stop + 6)?
                .iter()
                .all(u8::is_ascii_hexdigit) =>
            {
                stop + 6
            }
            _ => return None,
        };
        stop = string_stop(bytes, next)?;
    }
    Some(stop + 1)
}

fn literal(bytes: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    bytes[at..].starts_with(word).then_some(at + word.len())
}

/// Past a number: `-`, an integer without leading zeros, an optional fraction and exponent.
fn number_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    let digits = |at: usize| {
        at + bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    match bytes.get(at)? {
        b'0' => at += 1,
        b'1'..=b'9' => at = digits(at),
        _ => return None,
    }
    if bytes.get(at) == Some(&b'.') {
        let end = digits(at + 1);
        if end == at + 1 {
            return None;
        }
        at = end;
    }
    if let Some(b'e' | b'E') = bytes.get(at) {
        at += 1;
        if let Some(b'+' | b'-') = bytes.get(at) {
            at += 1;
        }
        let end = digits(at);
        if end == at {
            return None;
        }
        at = end;
    }
    // A digit after a leading zero (`01`) ends up where no digit may follow a value.
    Some(at)
}

/// Reads the `XXXX` of a `\uXXXX` escape at `*pos` (and, after a high surrogate, the `\uXXXX` of
/// its low half) and gives its character; `None` for a lone surrogate or a digit that is not hex.
pub(crate) fn unicode_escape(bytes: &[u8], pos: &mut usize) -> Option<char> {
    let unit = hex4(bytes, pos)?;
    let code = match unit {
        0xD800..=0xDBFF => {
            if !bytes[*pos..].starts_with(b"\\u") {
                return None;
            }
            *pos += 2;
            match hex4(bytes, pos)? {
                low @ 0xDC00..=0xDFFF => {
                    0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
                }
                _ => return None,
            }
        }
        0xDC00..=0xDFFF => return None,
        _ => u32::from(unit),
    };
    char::from_u32(code)
}

fn hex4(bytes: &[u8], pos: &mut usize) -> Option<u16> {
    let hex = bytes.get(*pos..*pos + 4)?;
    let mut unit = 0u16;
    for &b in hex {
        let digit = char::from(b).to_digit(16)?;
        unit = (unit << 4) | digit as u16;
    }
    *pos += 4;
    Some(unit)
}

#[cfg(test)]
mod tests {
    use super::{string_stop, unicode_escape, value_end};
    use crate::json::{Json, MAX_DEPTH};
    use crate::test_json::{json_value, spelled, ODD_TEXTS};
    use proptest::prelude::*;

    /// `value_end` takes a value where serde_json reading a `Json` takes it, and ends it where
    /// serde_json does.
    fn agree(text: &str) {
        let by_serde = {
            let mut values = serde_json::Deserializer::from_str(text).into_iter::<Json>();
            match values.next() {
                Some(Ok(json)) => Some((values.byte_offset(), json)),
                _ => None,
            }
        };
        let start = text.len() - text.trim_start_matches([' ', '\t', '\n', '\r']).len();
        let bytes = text.as_bytes();
        match value_end(bytes, start) {
            // A number or literal run on by a letter: the caller refuses what follows it, as
            // serde_json's stream reader does.
            Some(end)
                if !matches!(bytes[start], b'[' | b'{' | b'"')
                    && !matches!(
                        bytes.get(end),
                        None | Some(b' ' | b'\n' | b'\t' | b'\r' | b'"' | b'[' | b']' | b'{')
                            | Some(b'}' | b',' | b':')
                    ) =>
            {
                assert!(by_serde.is_none(), "{text:?}");
            }
            Some(end) => {
                let (serde_end, json) = by_serde.unwrap_or_else(|| panic!("taken: {text:?}"));
                assert_eq!(end, serde_end, "{text:?}");
                assert_eq!(json.as_str(), &text[start..end], "{text:?}");
            }
            // Past a value serde_json's stream reader asks for a delimiter; a value cut short
            // anywhere else is refused by both.
            None => assert!(by_serde.is_none(), "refused: {text:?}"),
        }
    }

    #[test]
    fn ends_values_as_serde_json_does() {
        for text in [
            r#"{"a":[1,-0,0.5,1e400,-1E-3,true,false,null],"b":{},"c":[],"d":"\ud800\"\/"}"#,
            " [ 1 , { \"a\" : [ ] } ] ",
            "\"\\u12AB\"",
            "{1:2}",
            "{",
            "[}",
            "{]",
        ]
        .iter()
        .chain(ODD_TEXTS)
        {
            agree(text);
        }
    }

    #[test]
    fn nests_as_deep_as_a_json_may() {
        for n in [1, 127, 128, 129, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1] {
            let arrays = format!("{}{}", "[".repeat(n), "]".repeat(n));
            let objects = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
            for text in [arrays, objects] {
                assert_eq!(
                    value_end(text.as_bytes(), 0).is_some(),
                    n <= MAX_DEPTH,
                    "{n}"
                );
                agree(&text);
            }
        }
    }

    proptest! {
        /// Eight bytes at a time finds what one byte at a time finds, wherever the stop is.
        #[test]
        fn finds_the_first_stop(
            text in prop::collection::vec(
                prop_oneof![
                    8 => 0x20u8..=0xff,
                    1 => prop::sample::select(vec![b'"', b'\\', 0, 0x1f, 0x7f, 0x80, 0xa2, 0xdc]),
                ],
                0..40,
            ),
            from in any::<prop::sample::Index>(),
        ) {
            let from = if text.is_empty() { 0 } else { from.index(text.len()) };
            let one_by_one = text[from..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .map(|i| from + i)
                .filter(|&i| text[i] >= 0x20);
            prop_assert_eq!(string_stop(&text, from), one_by_one);
        }

        #[test]
        fn any_text(text in "[\\[\\]{}\",:0-9a-z\\\\. \u{e9}\u{1F600}-]{0,24}") {
            agree(&text);
        }

        #[test]
        fn any_value(value in json_value(), pretty in any::<bool>()) {
            let text = spelled(&value, pretty);
            prop_assert_eq!(value_end(text.as_bytes(), 0), Some(text.len()));
            agree(&text);
        }
    }

    #[test]
    fn a_run_stops_at_a_quote_or_a_backslash_and_not_across_a_control_character() {
        assert_eq!(string_stop(br#"abc"d"#, 0), Some(3));
        assert_eq!(string_stop(br#"ab\"c""#, 1), Some(2));
        assert_eq!(string_stop(b"abc", 0), None);
        assert_eq!(string_stop(b"a\nb\"", 0), None);
        assert_eq!(
            string_stop(b"\"a\nb", 0),
            Some(0),
            "a control character after the stop"
        );
        assert_eq!(
            string_stop("é\u{7f}\"".as_bytes(), 0),
            Some(3),
            "DEL is not a control here"
        );
    }

    #[test]
    fn unicode_escapes_pair_their_surrogates() {
        let read = |text: &str| {
            let mut pos = 0;
            unicode_escape(text.as_bytes(), &mut pos).map(|c| (c, pos))
        };
        assert_eq!(read("00e9x"), Some(('é', 4)));
        assert_eq!(read("00E9"), Some(('é', 4)));
        assert_eq!(read("d83d\\ude00"), Some(('😀', 10)));
        assert_eq!(read("d83d"), None, "a high surrogate alone");
        assert_eq!(
            read("d83d\\u0041"),
            None,
            "a high surrogate before another character"
        );
        assert_eq!(read("de00"), None, "a low surrogate alone");
        assert_eq!(read("12G4"), None);
        assert_eq!(read("12"), None);
    }
}

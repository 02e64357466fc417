//! The steps shared by the one-pass readers of JSON text (`canonical_direct`, `event::direct`):
//! a place in the text, whitespace, keys without escapes, where a run of a string's characters
//! stops, and `\u` escapes.

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
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
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
    use super::{string_stop, unicode_escape};
    use proptest::prelude::*;

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

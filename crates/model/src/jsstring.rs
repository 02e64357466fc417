//! JavaScript's strings as `JSON.stringify` writes them and `Array.prototype.sort` orders them:
//! the escaping of a string literal, and the comparison by UTF-16 code units. Shared by the
//! canonical writer of `serde_json` values and the reader of JSON text as JavaScript reads it.

use std::cmp::Ordering;

/// Appends `s` as a JSON string literal with `JSON.stringify` escaping (see `crate::canonical`).
pub fn write_js_string(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push('"');
    // Runs of bytes that need no escaping (usually the whole string) are copied in one go.
    let mut run_start = 0;
    let mut next = find_escape(bytes, 0);
    while let Some(i) = next {
        // `i` is an ASCII byte, hence a char boundary.
        out.push_str(&s[run_start..i]);
        write_escape(bytes[i], out);
        run_start = i + 1;
        next = find_escape(bytes, run_start);
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

/// Whether any byte of `bytes` needs escaping in a JSON string (the same bytes for
/// `JSON.stringify` and serde_json: `"`, `\\` and the C0 controls).
pub(crate) fn needs_escape(bytes: &[u8]) -> bool {
    find_escape(bytes, 0).is_some()
}

/// Index of the first byte at or after `from` that needs escaping.
fn find_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    // Eight bytes at a time while none needs escaping; the word tests are exact, so a flagged
    // word holds the byte the scan below finds.
    while let Some(chunk) = bytes.get(i..i + 8) {
        if word_needs_escape(u64::from_le_bytes(
            chunk.try_into().expect("slice of eight bytes"),
        )) {
            break;
        }
        i += 8;
    }
    bytes[i..]
        .iter()
        .position(|&b| byte_needs_escape(b))
        .map(|offset| i + offset)
}

/// Whether `JSON.stringify` escapes this byte: `"`, `\` and the C0 controls. Bytes of multi-byte
/// UTF-8 sequences are all >= 0x80 and never escaped.
fn byte_needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any of the eight bytes packed in `word` needs escaping, with the classic exact
/// "has a zero byte" / "has a byte less than n" bit tricks.
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let quote = has_zero(word ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
    (below_space | quote | backslash) != 0
}

/// Appends one ASCII character as `JSON.stringify` writes it inside a string.
pub(crate) fn write_js_ascii(b: u8, out: &mut String) {
    if byte_needs_escape(b) {
        write_escape(b, out);
    } else {
        out.push(char::from(b));
    }
}

/// Appends the `JSON.stringify` escape of a byte for which [`byte_needs_escape`] holds.
fn write_escape(b: u8, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match b {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        b'\n' => "\\n",
        b'\r' => "\\r",
        b'\t' => "\\t",
        0x08 => "\\b",
        0x0c => "\\f",
        _ => "",
    };
    if short.is_empty() {
        out.push_str("\\u00");
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    } else {
        out.push_str(short);
    }
}

/// Compares two strings the way JavaScript's default `Array.prototype.sort()` does: by UTF-16
/// code units.
///
/// This equals Rust's `str` ordering (by code point) except where the first differing characters
/// are an astral one (U+10000 and above, encoded as a surrogate pair D800..DFFF) and one in
/// U+E000..=U+FFFF: in UTF-16 the astral character sorts first.
#[must_use]
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let Some(first_diff) = ab.iter().zip(bb).position(|(x, y)| x != y) else {
        // One is a prefix of the other: the shorter sorts first in either encoding.
        return ab.len().cmp(&bb.len());
    };
    // Both strings share the bytes before `first_diff`, so they share a char boundary at the start
    // of the character containing it; the characters starting there are the first that differ.
    let mut start = first_diff;
    while !a.is_char_boundary(start) {
        start -= 1;
    }
    let ca = a[start..].chars().next().map_or(0, u32::from);
    let cb = b[start..].chars().next().map_or(0, u32::from);
    match (ca >= 0x1_0000, cb >= 0x1_0000) {
        // Same plane class: surrogate pairs preserve code point order among astral characters.
        (false, false) | (true, true) => ca.cmp(&cb),
        // A leading surrogate (D800..DBFF) is above U+0000..=U+D7FF and below U+E000..=U+FFFF.
        (true, false) => {
            if cb >= 0xE000 {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        (false, true) => {
            if ca >= 0xE000 {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

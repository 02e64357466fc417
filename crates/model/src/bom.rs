//! The UTF-8 byte order mark (U+FEFF, bytes EF BB BF) that some editors and shells write at the
//! start of a file saved as "UTF-8 with BOM". RFC 8259 lets a reader of JSON text ignore it there,
//! and every reader of input files here does, so such a file gives the events it gives without
//! the mark. Anywhere else it is a character JSON does not allow outside strings: a line or a
//! message that starts with one is refused, and [`Event::decode`](crate::Event::decode) says why.

/// The mark's bytes.
pub const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// `bytes` without a byte order mark at their start.
pub fn strip(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(&UTF8_BOM).unwrap_or(bytes)
}

/// Whether `bytes` start with a byte order mark.
pub fn starts(bytes: &[u8]) -> bool {
    bytes.starts_with(&UTF8_BOM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_mark_at_the_start_is_stripped() {
        assert_eq!(strip(b"\xEF\xBB\xBF{}\n"), b"{}\n");
        assert_eq!(strip("\u{feff}{}".as_bytes()), b"{}");
        assert_eq!(strip(b"\xEF\xBB\xBF"), b"");
        // Once: a second mark is the file's own text.
        assert_eq!(strip(b"\xEF\xBB\xBF\xEF\xBB\xBF{}"), b"\xEF\xBB\xBF{}");
        // Not after whitespace, and not a part of one.
        assert_eq!(strip(b" \xEF\xBB\xBF{}"), b" \xEF\xBB\xBF{}");
        assert_eq!(strip(b"\xEF\xBB{}"), b"\xEF\xBB{}");
        assert_eq!(strip(b""), b"");
        assert!(starts("\u{feff}x".as_bytes()) && !starts(b"x\xEF\xBB\xBF"));
    }
}

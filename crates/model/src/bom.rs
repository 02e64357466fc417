//! Byte order marks at the start of a file.
//!
//! Some editors and shells save "UTF-8 with BOM": U+FEFF, bytes EF BB BF, before the text. RFC
//! 8259 lets a reader of JSON text ignore it there, and every reader of input files here does, so
//! such a file gives the events it gives without the mark. Anywhere else it is a character JSON
//! does not allow outside strings: a line or a message that starts with one is refused, and
//! [`Event::decode`](crate::Event::decode) says why.
//!
//! The marks of UTF-16 and UTF-32 name encodings this program does not read ([`foreign`]): a
//! file that starts with one is refused whole, with the encoding named.

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

/// The encoding other than UTF-8 that a byte order mark at the start of `bytes` announces, by
/// the name `iconv` knows it by: what Windows PowerShell 5 writes for `>` (UTF-16LE), for one.
/// Such a file is no UTF-8 JSON text, and read as lines it would be every line a bad one.
pub fn foreign(bytes: &[u8]) -> Option<&'static str> {
    // UTF-32LE's mark starts with UTF-16LE's: test it first.
    const MARKS: [(&[u8], &str); 4] = [
        (&[0xFF, 0xFE, 0x00, 0x00], "UTF-32LE"),
        (&[0x00, 0x00, 0xFE, 0xFF], "UTF-32BE"),
        (&[0xFF, 0xFE], "UTF-16LE"),
        (&[0xFE, 0xFF], "UTF-16BE"),
    ];
    MARKS
        .iter()
        .find(|(mark, _)| bytes.starts_with(mark))
        .map(|&(_, name)| name)
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

    #[test]
    fn the_marks_of_other_encodings_are_named() {
        let utf16 = |big: bool| -> Vec<u8> {
            "\u{feff}{}"
                .encode_utf16()
                .flat_map(|u| {
                    if big {
                        u.to_be_bytes()
                    } else {
                        u.to_le_bytes()
                    }
                })
                .collect()
        };
        assert_eq!(foreign(&utf16(false)), Some("UTF-16LE"));
        assert_eq!(foreign(&utf16(true)), Some("UTF-16BE"));
        assert_eq!(
            foreign(&[0xFF, 0xFE, 0, 0, b'{', 0, 0, 0]),
            Some("UTF-32LE")
        );
        assert_eq!(
            foreign(&[0, 0, 0xFE, 0xFF, 0, 0, 0, b'{']),
            Some("UTF-32BE")
        );
        for utf8 in ["\u{feff}{}", "{}", "", "\u{fffe}"] {
            assert_eq!(foreign(utf8.as_bytes()), None, "{utf8:?}");
        }
    }
}

//! How much of a file being written can be read: complete lines for the line formats (a last
//! line without its newline is held until it has one), the whole file for a document (a Gemini
//! CLI session, a pretty-printed body) once it is one complete JSON value — a document caught
//! half-written is read at the next poll.

use toolcalls_adapters::Format;
use toolcalls_model::bom;

/// The length of the part of `bytes` ready to be parsed as `format`; `None` while none is. A byte
/// order mark at the start is the file's, not the document's (the adapters skip it).
pub fn ready(format: Format, bytes: &[u8]) -> Option<usize> {
    if is_document(format, bytes) {
        return serde_json::from_slice::<serde::de::IgnoredAny>(bom::strip(bytes))
            .is_ok()
            .then_some(bytes.len());
    }
    bytes.iter().rposition(|&b| b == b'\n').map(|i| i + 1)
}

/// Whether the file is one JSON document rather than lines: Gemini CLI sessions always are; a
/// format that may be a document is when it opens with `{` or `[` and its first line is not a JSON
/// value. A line format never is: its first line may be cut or corrupt, and the lines after it are
/// read all the same.
pub fn is_document(format: Format, bytes: &[u8]) -> bool {
    if format == Format::GeminiCli {
        return true;
    }
    if !format.reads_documents() {
        return false;
    }
    let bytes = bom::strip(bytes);
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let rest = &bytes[start..];
    if !matches!(rest.first(), Some(b'{' | b'[')) {
        return false;
    }
    match rest.iter().position(|&b| b == b'\n') {
        // The first line is complete: a document unless it is a value of its own.
        Some(end) => serde_json::from_slice::<serde::de::IgnoredAny>(&rest[..end]).is_err(),
        // One line so far: a document only if it is one already; else wait for its newline.
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wait_for_their_newline_and_documents_for_their_end() {
        let f = Format::ClaudeCode;
        assert_eq!(ready(f, b""), None);
        assert_eq!(ready(f, b"{\"a\":1}"), None);
        assert_eq!(ready(f, b"{\"a\":1}\n{\"b\""), Some(8));
        let g = Format::GeminiCli;
        assert_eq!(ready(g, b"{\n  \"messages\": [\n"), None);
        assert_eq!(ready(g, b"{\n  \"messages\": []\n}\n"), Some(21));
        let pretty = b"{\n  \"resourceSpans\": []\n}";
        assert_eq!(ready(Format::Otel, &pretty[..12]), None);
        assert_eq!(ready(Format::Otel, pretty), Some(pretty.len()));
    }

    #[test]
    fn a_document_saved_with_a_byte_order_mark_is_one_once_complete() {
        let doc = "\u{feff}{\n  \"resourceSpans\": []\n}";
        assert!(is_document(Format::Otel, doc.as_bytes()));
        assert_eq!(ready(Format::Otel, &doc.as_bytes()[..12]), None);
        assert_eq!(ready(Format::Otel, doc.as_bytes()), Some(doc.len()));
        let g = "\u{feff}{\"messages\": []}";
        assert_eq!(ready(Format::GeminiCli, g.as_bytes()), Some(g.len()));
    }

    #[test]
    fn a_line_format_whose_first_line_is_cut_is_still_read_by_line() {
        let file = b"{\"type\":\"user\",\"mess\n{\"type\":\"user\"}\n{\"type\":";
        for format in [Format::ClaudeCode, Format::Codex, Format::Adk, Format::Mcp] {
            assert!(!is_document(format, file), "{format:?}");
            assert_eq!(ready(format, file), Some(37), "{format:?}");
        }
        // A format that may be a document waits for it to be one.
        assert!(is_document(Format::Otel, file));
        assert_eq!(ready(Format::Otel, file), None);
    }
}

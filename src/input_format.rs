//! The format of an input file in a native format, as `local`, `ingest` and `audit` read it:
//! named with `--format`, or told from the file's start (`--format auto`).

use anyhow::Context;
use toolcalls_adapters::Format;
use toolcalls_model::bom;

/// The format to read file `name` (all of it in `bytes`) in: `forced`, or the one its start
/// tells. `None` for a file that holds nothing but whitespace, which has no format to tell and
/// no event to read: an empty transcript among many is no reason to stop. An error for a file
/// in another encoding than UTF-8, or one whose format cannot be told.
pub fn of(forced: Option<Format>, name: &str, bytes: &[u8]) -> anyhow::Result<Option<Format>> {
    crate::encoding::refuse_foreign(name, bytes)?;
    if forced.is_some() {
        return Ok(forced);
    }
    if bom::strip(bytes).iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let format = Format::detect(name, &bytes[..bytes.len().min(1 << 16)]).with_context(|| {
        format!("cannot tell the format of {name}; name it with --format (see docs/ADAPTERS.md)")
    })?;
    Ok(Some(format))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_file_has_no_format_and_an_unknown_one_is_refused() {
        let hooks = br#"{"session_id":"s","hook_event_name":"PreToolUse"}"#;
        assert_eq!(
            of(None, "h.jsonl", hooks).unwrap(),
            Some(Format::ClaudeCodeHooks)
        );
        for blank in [&b""[..], b"\n\n", b" \t\r\n", b"\xEF\xBB\xBF\n"] {
            assert_eq!(of(None, "b.jsonl", blank).unwrap(), None, "{blank:?}");
            assert_eq!(
                of(Some(Format::Codex), "b.jsonl", blank).unwrap(),
                Some(Format::Codex)
            );
        }
        let e = of(None, "x.jsonl", b"{\"what\":1}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot tell the format of x.jsonl"), "{e}");
        let e = of(Some(Format::Codex), "u.jsonl", &[0xFF, 0xFE, b'{', 0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("u.jsonl is UTF-16LE text"), "{e}");
    }
}

//! The format of an input file, as `local`, `ingest` and `audit` read it: `--format` parsed,
//! and a native file's format named there or told from the file's start (`--format auto`).

use crate::say::say;
use anyhow::bail;
use toolcalls_adapters::{Format, Parsed};
use toolcalls_model::bom;

/// `--format` of `local` and `audit`: `v1` (`None`), `auto` (`Some(None)`) or a native format.
pub fn parse_with_v1(name: &str) -> anyhow::Result<Option<Option<Format>>> {
    if name == "v1" {
        return Ok(None);
    }
    parse(name, "v1 (the default), auto").map(Some)
}

/// `--format` of `ingest`: `auto` (`None`) or a native format.
pub fn parse_native(name: &str) -> anyhow::Result<Option<Format>> {
    parse(name, "auto (the default)")
}

/// `auto` or a native format's name; `also` names what else the option takes.
fn parse(name: &str, also: &str) -> anyhow::Result<Option<Format>> {
    if name == "auto" {
        return Ok(None);
    }
    match name.parse::<Format>() {
        Ok(format) => Ok(Some(format)),
        Err(_) => {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            bail!(
                "unknown format `{name}`; --format takes {also} or one of {}",
                names.join(", ")
            )
        }
    }
}

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
    let Some(format) = Format::detect_file(name, bytes) else {
        if holds_v1_events(bytes) {
            bail!("{name} holds v1 events, not a native format: `local` and `audit` read v1 files without --format (v1 is their default), so give v1 and native files in separate runs; `ingest` takes native files only");
        }
        bail!("cannot tell the format of {name}; name it with --format (see docs/ADAPTERS.md)");
    };
    Ok(Some(format))
}

/// File `name` (all of it in `bytes`) read in its format ([`of`]): the format, and what its
/// adapter made of it. A file read in the format `--format` named that gives no event, where
/// its start tells another format, is said on stderr — an error with `strict`: `--format codex`
/// on a Claude Code transcript skips every line as none of codex's, and would end with no event
/// and no error.
pub fn read(
    forced: Option<Format>,
    name: &str,
    bytes: &[u8],
    opts: &toolcalls_adapters::Options,
    strict: bool,
) -> anyhow::Result<(Option<Format>, Parsed)> {
    let Some(format) = of(forced, name, bytes)? else {
        return Ok((None, Parsed::default()));
    };
    let parsed = toolcalls_adapters::parse(format, name, bytes, opts);
    if forced.is_some() && parsed.events.is_empty() {
        let told = Format::detect_file(name, bytes);
        if let Some(told) = told.filter(|&told| told != format) {
            let said = format!(
                "{name}: no events read as {} (--format); its start reads as {}: give --format {} or auto",
                format.name(),
                told.name(),
                told.name()
            );
            if strict {
                bail!("{said}; stopping because of --strict");
            }
            say!("{said}");
        }
    }
    Ok((Some(format), parsed))
}

/// What to say of file `name`, given as v1 events, whose `start` holds no v1 event but reads as
/// a native format: `--format` was left out, and every line of it would be a bad line.
pub fn native_given_as_v1(name: &str, start: &[u8]) -> Option<String> {
    if holds_v1_events(start) {
        return None;
    }
    let told = Format::detect_file(name, start)?;
    Some(format!(
        "{name}: its first line is no v1 event and its start reads as {}: give --format {} (or auto) to read it in that format",
        told.name(),
        told.name()
    ))
}

/// Whether the first line with anything on it is a valid v1 event.
fn holds_v1_events(bytes: &[u8]) -> bool {
    bom::strip(bytes)
        .split(|&b| b == b'\n')
        .find(|line| !line.iter().all(u8::is_ascii_whitespace))
        .is_some_and(|line| toolcalls_model::Event::decode(line).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_parse_and_a_wrong_one_lists_every_right_one() {
        assert_eq!(parse_with_v1("v1").unwrap(), None);
        assert_eq!(parse_with_v1("auto").unwrap(), Some(None));
        assert_eq!(parse_with_v1("mcp").unwrap(), Some(Some(Format::Mcp)));
        assert_eq!(parse_native("auto").unwrap(), None);
        assert_eq!(parse_native("codex").unwrap(), Some(Format::Codex));
        let e = parse_with_v1("claude").unwrap_err().to_string();
        assert!(
            e.contains("unknown format `claude`") && e.contains("v1 (the default), auto"),
            "{e}"
        );
        for f in Format::ALL {
            assert!(e.contains(f.name()), "{e}");
        }
        let e = parse_native("v1").unwrap_err().to_string();
        assert!(
            e.contains("auto (the default) or one of claude-code"),
            "{e}"
        );
    }

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
        let v1 = b"\n{\"v\":1,\"kind\":\"announce\",\"source\":\"s\",\"session\":\"x\",\"callId\":\"a\",\"time\":\"2026-01-01T00:00:00Z\",\"tool\":\"T\"}\n";
        let e = of(None, "v1.jsonl", v1).unwrap_err().to_string();
        assert!(
            e.contains("v1.jsonl holds v1 events, not a native format"),
            "{e}"
        );
        let e = of(Some(Format::Codex), "u.jsonl", &[0xFF, 0xFE, b'{', 0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("u.jsonl is UTF-16LE text"), "{e}");
    }
}

//! Native agent-framework formats → toolcalls v1 events.
//!
//! Every agent framework records tool calls its own way: Claude Code writes a transcript row per
//! content block and links results by `tool_use.id`, Codex links `function_call_output` by
//! `call_id`, `codex exec --json` restarts `item_N` per thread, Gemini CLI stores call and result
//! merged, OpenAI streams send the call id only in the first chunk, MCP JSON-RPC ids are only unique
//! per session, @nhtio/adk ties a call's emissions by a stream id but its execution events only by
//! checksum, and many formats have no ids at all. This crate turns each of them into the same
//! v1 [`Event`]s (`announce`, `completion`, `turn_end`, `turn_aborted`, …) so the correlation core
//! never sees a native format.
//!
//! It is pure parsing: bytes in, events out. No Kafka, no async runtime, no clock — where a format
//! gives no time the event time comes from a documented deterministic rule (see [`Options::base_time`]),
//! so parsing the same file twice gives the same events.
//!
//! # Use
//!
//! ```
//! use toolcalls_adapters::{parse, Format, Options};
//! let line = br#"{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1"}"#;
//! let parsed = parse(Format::ClaudeCodeHooks, "hooks.jsonl", line, &Options::default());
//! assert_eq!(parsed.events.len(), 1);
//! assert!(parsed.errors.is_empty());
//! ```
//!
//! # Guarantees
//!
//! - A malformed line (or a malformed part of a document) becomes a [`LineError`] naming the file
//!   and line, and parsing goes on with the next one. So does a field a call is known by (id,
//!   session, turn, tool, time) holding a value of the wrong type: the line, block or part that
//!   holds it is left out, never read as another call.
//! - Events come out in input order (OpenTelemetry spans, which are not written in time order, are
//!   sorted by event time).
//! - Native ids are never unique beyond their scope; adapters put the scope (`session`, `thread`)
//!   on every event, and rename an id that a format reuses for a second call inside one scope
//!   (`call_0` twice in one session becomes `call_0` and `call_0#2`) so that the processor does not
//!   mistake the second call for a repeat of the first.
//! - What each format cannot provide is listed per format in `docs/ADAPTERS.md`.

mod adk;
mod anthropic;
mod bodies;
mod claude;
mod codex;
mod common;
mod depth;
mod detect;
mod fields;
mod format;
/// The fuzz harness the workspace's fuzz tests share, for the in-process ones here.
#[cfg(test)]
#[path = "../../model/tests/support/fuzz.rs"]
mod fuzz_support;
mod gemini;
mod line_reader;
mod mcp;
mod openai;
mod otel;
mod parsed;
pub mod raw;
mod stamps;
mod stream;
#[cfg(test)]
mod test_support;
pub mod value;

use toolcalls_model::Event;

pub use format::{Format, UnknownFormat};
/// What the otel adapter reads of a span (see [`Format::Otel`]).
pub use otel::{SPAN_ATTRIBUTES as OTEL_SPAN_ATTRIBUTES, SPAN_FIELDS as OTEL_SPAN_FIELDS};
pub use parsed::{LineError, Options, Parsed};
pub use stream::Stream;

/// Parses one file. `name` is used in error messages and, for formats that name no session, as the
/// session (its file name without directories and extensions). A byte order mark at the start of
/// the file is skipped ([`toolcalls_model::bom`]).
pub fn parse(format: Format, name: &str, input: &[u8], opts: &Options) -> Parsed {
    let input = toolcalls_model::bom::strip(input);
    let mut ctx = common::Ctx::new(format, name, opts);
    match format {
        Format::ClaudeCode
        | Format::ClaudeCodeStream
        | Format::ClaudeCodeHooks
        | Format::Codex
        | Format::CodexExec
        | Format::Mcp => {
            if let Some(mut reader) = stream::line_reader(format) {
                line_reader::read_lines(&mut ctx, input, &mut *reader);
            }
        }
        Format::Anthropic => anthropic::parse(&mut ctx, input),
        Format::OpenaiChat => openai::chat(&mut ctx, input),
        Format::OpenaiResponses => openai::responses(&mut ctx, input),
        Format::GeminiCli => gemini::cli_session(&mut ctx, input),
        Format::Gemini => gemini::api(&mut ctx, input),
        Format::Otel => otel::parse(&mut ctx, input),
        Format::Adk => adk::parse(&mut ctx, input),
    }
    ctx.finish()
}

/// The Kafka key of an event: its session, so one partition holds a whole session. Producers must
/// use the partitioner the processor documents.
pub fn partition_key(event: &Event) -> &[u8] {
    event.session.as_str().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
            assert_eq!(f.to_string(), f.name());
        }
        let e = "claude".parse::<Format>().unwrap_err().to_string();
        assert!(
            e.contains("unknown format `claude`") && e.contains("claude-code"),
            "{e}"
        );
    }

    #[test]
    fn options_override_source_and_session_and_drop_ids() {
        let line = br#"{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1"}"#;
        let opts = Options {
            drop_ids: true,
            source: Some("claude-code-ci".into()),
            session: Some("run-42".into()),
            base_time: None,
        };
        let p = parse(Format::ClaudeCodeHooks, "hooks.jsonl", line, &opts);
        let e = &p.events[0];
        assert_eq!(
            (e.source.as_str(), e.session.as_str(), e.call_id.as_ref()),
            ("claude-code-ci", "run-42", None)
        );
        let toolcalls_model::EventBody::Announce(a) = &e.body else {
            panic!()
        };
        assert!(a.checksum.is_some(), "dropping ids keeps the checksum");
        assert_eq!(partition_key(e), b"run-42");
    }

    #[test]
    fn line_error_names_file_line_and_place() {
        let e = LineError {
            file: "a.jsonl".into(),
            line: 3,
            at: None,
            message: "line is not JSON".into(),
        };
        assert_eq!(e.to_string(), "a.jsonl:3: line is not JSON");
        let e = LineError {
            at: Some("messages[2]".into()),
            ..e
        };
        assert_eq!(e.to_string(), "a.jsonl:3 (messages[2]): line is not JSON");
    }
}

//! Native agent-framework formats → toolcalls v1 events.
//!
//! Every agent framework records tool calls its own way: Claude Code writes a transcript row per
//! content block and links results by `tool_use.id`, Codex links `function_call_output` by
//! `call_id`, `codex exec --json` restarts `item_N` per thread, Gemini CLI stores call and result
//! merged, OpenAI streams send the call id only in the first chunk, MCP JSON-RPC ids are only unique
//! per session, and many formats have no ids at all. This crate turns each of them into the same
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
//!   and line, and parsing goes on with the next one.
//! - Events come out in input order (OpenTelemetry spans, which are not written in time order, are
//!   sorted by event time).
//! - Native ids are never unique beyond their scope; adapters put the scope (`session`, `thread`)
//!   on every event, and rename an id that a format reuses for a second call inside one scope
//!   (`call_0` twice in one session becomes `call_0` and `call_0#2`) so that the processor does not
//!   mistake the second call for a repeat of the first.
//! - What each format cannot provide is listed per format in `docs/ADAPTERS.md`.

mod anthropic;
mod claude;
mod codex;
mod common;
mod detect;
mod gemini;
mod mcp;
mod openai;
mod otel;

use std::fmt;
use std::str::FromStr;

use toolcalls_model::{Event, Timestamp};

/// The native formats this crate reads. The names ([`Format::name`]) are the values of `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// Claude Code session transcripts (`~/.claude/projects/*/<session>.jsonl`, subagent files).
    ClaudeCode,
    /// `claude -p --output-format stream-json` output.
    ClaudeCodeStream,
    /// Claude Code hook payloads (PreToolUse, PostToolUse, PostToolUseFailure, …) logged one per line.
    ClaudeCodeHooks,
    /// Anthropic Messages API request / response bodies (and its SSE stream).
    Anthropic,
    /// OpenAI Chat Completions: requests, whole responses and streamed chunks.
    OpenaiChat,
    /// OpenAI Responses API: requests, response objects and the SSE event stream.
    OpenaiResponses,
    /// Codex rollout files (`~/.codex/sessions/**/rollout-*.jsonl`).
    Codex,
    /// `codex exec --json` event stream.
    CodexExec,
    /// Gemini CLI session files (`~/.gemini/tmp/*/chats/session-*.json`).
    GeminiCli,
    /// Gemini API `generateContent` bodies and Google ADK events / sessions.
    Gemini,
    /// MCP JSON-RPC message logs (`tools/call` requests and their responses).
    Mcp,
    /// OpenTelemetry GenAI `execute_tool` spans in OTLP JSON.
    Otel,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 12] = [
        Format::ClaudeCode,
        Format::ClaudeCodeStream,
        Format::ClaudeCodeHooks,
        Format::Anthropic,
        Format::OpenaiChat,
        Format::OpenaiResponses,
        Format::Codex,
        Format::CodexExec,
        Format::GeminiCli,
        Format::Gemini,
        Format::Mcp,
        Format::Otel,
    ];

    /// The `--format` name (kebab-case).
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::ClaudeCodeStream => "claude-code-stream",
            Format::ClaudeCodeHooks => "claude-code-hooks",
            Format::Anthropic => "anthropic",
            Format::OpenaiChat => "openai-chat",
            Format::OpenaiResponses => "openai-responses",
            Format::Codex => "codex",
            Format::CodexExec => "codex-exec",
            Format::GeminiCli => "gemini-cli",
            Format::Gemini => "gemini",
            Format::Mcp => "mcp",
            Format::Otel => "otel",
        }
    }

    /// The `source` the events get: the framework, shared by every format of one framework so that
    /// (for example) Claude Code hook payloads and transcript rows of one session correlate.
    pub fn source(self) -> &'static str {
        match self {
            Format::ClaudeCode | Format::ClaudeCodeStream | Format::ClaudeCodeHooks => {
                "claude-code"
            }
            Format::Anthropic => "anthropic",
            Format::OpenaiChat | Format::OpenaiResponses => "openai",
            Format::Codex | Format::CodexExec => "codex",
            Format::GeminiCli => "gemini-cli",
            Format::Gemini => "gemini",
            Format::Mcp => "mcp",
            Format::Otel => "otel",
        }
    }

    /// The format of a file when its name and first bytes leave no doubt; `None` otherwise (the
    /// caller then asks for `--format`). `first_bytes` should be the first 64 KiB or so.
    pub fn detect(path: &str, first_bytes: &[u8]) -> Option<Format> {
        detect::detect(path, first_bytes)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--format` got a name that is not one of [`Format::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}`; expected one of claude-code, claude-code-stream, claude-code-hooks, anthropic, openai-chat, openai-responses, codex, codex-exec, gemini-cli, gemini, mcp, otel")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// How to parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Remove native call ids from every event (`callId` = none), to measure how well the
    /// processor's fallbacks (checksum, tool FIFO, oldest) do for frameworks without ids. Tool names,
    /// arguments and checksums stay.
    pub drop_ids: bool,
    /// Use this `source` instead of the framework name ([`Format::source`]).
    pub source: Option<String>,
    /// Use this session for every event, instead of the one the file names (or, when it names
    /// none, the file name without its extensions).
    pub session: Option<String>,
    /// The time of the first line for formats that carry no time at all (`codex exec --json`,
    /// `claude -p` stream-json, API bodies): line *i* (0-based) gets `base_time + i` ms. Lines
    /// after a line that did carry a time get that time plus the number of lines since it, in ms.
    /// Default: the Unix epoch. Never the wall clock, so parsing is deterministic.
    pub base_time: Option<Timestamp>,
}

/// What a file turned into.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// The events, in input order.
    pub events: Vec<Event>,
    /// Lines (or parts of a document) that could not be read; parsing went on after each.
    pub errors: Vec<LineError>,
    /// Rows read that describe no tool call and no turn boundary (assistant text, token counts,
    /// snapshots, progress rows whose data was attached to their call, …).
    pub skipped: usize,
}

/// A line or part of a document that could not be turned into events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LineError {
    /// The file name as given to [`parse`].
    pub file: String,
    /// 1-based line number; for single-document formats the line the document starts on.
    pub line: usize,
    /// Where inside a document (a JSON path such as `messages[3].toolCalls[0]`), when the format is
    /// one document rather than one object per line.
    pub at: Option<String>,
    /// What was wrong, and what to do about it.
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(at) = &self.at {
            write!(f, " ({at})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Parses one file. `name` is used in error messages and, for formats that name no session, as the
/// session (its file name without directories and extensions).
pub fn parse(format: Format, name: &str, input: &[u8], opts: &Options) -> Parsed {
    let mut ctx = common::Ctx::new(format, name, opts);
    match format {
        Format::ClaudeCode => claude::transcript(&mut ctx, input),
        Format::ClaudeCodeStream => claude::stream_json(&mut ctx, input),
        Format::ClaudeCodeHooks => claude::hooks(&mut ctx, input),
        Format::Anthropic => anthropic::parse(&mut ctx, input),
        Format::OpenaiChat => openai::chat(&mut ctx, input),
        Format::OpenaiResponses => openai::responses(&mut ctx, input),
        Format::Codex => codex::rollout(&mut ctx, input),
        Format::CodexExec => codex::exec_json(&mut ctx, input),
        Format::GeminiCli => gemini::cli_session(&mut ctx, input),
        Format::Gemini => gemini::api(&mut ctx, input),
        Format::Mcp => mcp::parse(&mut ctx, input),
        Format::Otel => otel::parse(&mut ctx, input),
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

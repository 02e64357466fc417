//! The native formats this crate reads, by the names `--format` takes.

use std::fmt;
use std::str::FromStr;

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
    /// @nhtio/adk bus events (`toolCall`, `toolExecutionStart` / `End`, `turnStart` / `End`) logged
    /// one per line.
    Adk,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 13] = [
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
        Format::Adk,
    ];

    /// Whether a file of this format may be one JSON document (pretty-printed, or an array of
    /// bodies) rather than one value per line: Gemini CLI sessions always are, and API bodies and
    /// OTLP exports may be (`bodies::each_value`, `otel::parse`). The other formats are read line
    /// by line, whatever their first line holds.
    pub fn reads_documents(self) -> bool {
        matches!(
            self,
            Format::GeminiCli
                | Format::Gemini
                | Format::Anthropic
                | Format::OpenaiChat
                | Format::OpenaiResponses
                | Format::Otel
        )
    }

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
            Format::Adk => "adk",
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
            Format::Adk => "adk",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--format` got a name that is not one of [`Format::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}`; expected one of claude-code, claude-code-stream, claude-code-hooks, anthropic, openai-chat, openai-responses, codex, codex-exec, gemini-cli, gemini, mcp, otel, adk")]
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

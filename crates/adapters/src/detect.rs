//! Format detection from a file's name and first bytes — only when there is no doubt.
//!
//! The first complete line decides for line-based formats; single-document formats (Gemini CLI
//! sessions, pretty-printed OTLP or API bodies) are recognised by keys near the start. Inputs that
//! several formats share (a bare `{"model", "messages"}` request fits both Anthropic and OpenAI)
//! give `None`, and the caller asks for `--format`.

use serde_json::Value;

use crate::common::{lines, sse, str_field, Sse};
use crate::Format;

impl Format {
    /// The format of a file when its name and first bytes leave no doubt; `None` otherwise (the
    /// caller then asks for `--format`). `first_bytes` should be the first 64 KiB or so; a byte
    /// order mark at their start is skipped.
    pub fn detect(path: &str, first_bytes: &[u8]) -> Option<Format> {
        detect(path, toolcalls_model::bom::strip(first_bytes))
    }

    /// The format of file `path` from what it holds (all of it, or as much as is written):
    /// [`Format::detect`] of its first 64 KiB or, when its first line goes on past them (a first
    /// prompt with a large paste, instructions quoted whole in a session's first record), of
    /// everything up to that line's end — cut off, the line would parse as no format at all.
    pub fn detect_file(path: &str, bytes: &[u8]) -> Option<Format> {
        Format::detect(path, detection_window(bytes))
    }
}

/// How much of a file detection reads: its first [`DETECTION_WINDOW`] bytes, or up to the end
/// of its first line with anything on it when that line is longer (all of it when that line has
/// no end yet, as in a file being written).
fn detection_window(bytes: &[u8]) -> &[u8] {
    let head = &bytes[..bytes.len().min(DETECTION_WINDOW)];
    let Some(start) = bytes.iter().position(|b| !b.is_ascii_whitespace()) else {
        return head;
    };
    match bytes[start..].iter().position(|&b| b == b'\n') {
        Some(end) if start + end < head.len() => head,
        Some(end) => &bytes[..start + end + 1],
        None => bytes,
    }
}

/// The bytes of a file [`Format::detect_file`] reads at least: enough for any first line but a
/// long one, and for the keys near the start of a document.
const DETECTION_WINDOW: usize = 1 << 16;

fn detect(path: &str, first: &[u8]) -> Option<Format> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    for (_, line) in lines(first) {
        // The last piece may be cut off by the buffer; only trust it when it parses.
        let data = match sse(line) {
            Sse::Data(d) => d,
            Sse::Skip => continue,
        };
        return match crate::value::parse(data) {
            Ok(v @ Value::Object(_)) => object(&v).or_else(|| by_name(name)),
            Ok(Value::Array(items)) => items.first().and_then(object).or_else(|| by_name(name)),
            Ok(_) => None,
            // A pretty-printed document, or a line longer than the buffer.
            Err(_) => document_prefix(first).or_else(|| by_name(name)),
        };
    }
    None
}

/// Names that only one tool writes.
fn by_name(name: &str) -> Option<Format> {
    if name.starts_with("rollout-") && name.ends_with(".jsonl") {
        return Some(Format::Codex);
    }
    None
}

fn object(v: &Value) -> Option<Format> {
    let ty = str_field(v, "type").unwrap_or("");
    let has = |k: &str| v.get(k).is_some();
    if has("hook_event_name") {
        return Some(Format::ClaudeCodeHooks);
    }
    if has("resourceSpans") {
        return Some(Format::Otel);
    }
    if has("jsonrpc")
        || ["message", "payload"]
            .iter()
            .any(|k| v.get(*k).is_some_and(|m| m.get("jsonrpc").is_some()))
    {
        return Some(Format::Mcp);
    }
    if crate::adk::looks_like(v) {
        return Some(Format::Adk);
    }
    if has("payload")
        && matches!(
            ty,
            "session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted"
        )
    {
        return Some(Format::Codex);
    }
    if ty.starts_with("thread.") || ty.starts_with("turn.") || ty.starts_with("item.") {
        return Some(Format::CodexExec);
    }
    if matches!(
        ty,
        "file-history-snapshot" | "summary" | "queue-operation" | "progress"
    ) || (matches!(ty, "user" | "assistant" | "system") && has("sessionId") && has("uuid"))
    {
        return Some(Format::ClaudeCode);
    }
    if matches!(
        ty,
        "system" | "assistant" | "user" | "result" | "stream_event"
    ) && has("session_id")
    {
        return Some(Format::ClaudeCodeStream);
    }
    if ty.starts_with("response.") || str_field(v, "object") == Some("response") {
        return Some(Format::OpenaiResponses);
    }
    if str_field(v, "object").is_some_and(|o| o.starts_with("chat.completion")) {
        return Some(Format::OpenaiChat);
    }
    if matches!(
        ty,
        "message_start" | "content_block_start" | "content_block_delta" | "message_delta"
    ) || (ty == "message" && has("content") && has("role"))
    {
        return Some(Format::Anthropic);
    }
    if has("projectHash") && has("messages") {
        return Some(Format::GeminiCli);
    }
    if has("candidates")
        || has("contents")
        || (has("invocationId") && has("author"))
        || (has("appName") && has("events"))
    {
        return Some(Format::Gemini);
    }
    if let Some(messages) = v.get("messages").and_then(Value::as_array) {
        return request_messages(messages);
    }
    if let Some(items) = v.get("input").and_then(Value::as_array) {
        let responses_item = items.iter().any(|i| {
            str_field(i, "type")
                .is_some_and(|t| t.ends_with("_call") || t.ends_with("_call_output"))
        });
        return responses_item.then_some(Format::OpenaiResponses);
    }
    None
}

/// A bare request body: Anthropic and OpenAI only differ in how tool traffic looks.
fn request_messages(messages: &[Value]) -> Option<Format> {
    let anthropic = messages.iter().any(|m| {
        m.get("content").and_then(Value::as_array).is_some_and(|c| {
            c.iter().any(|b| {
                str_field(b, "type").is_some_and(|t| t == "tool_use" || t == "tool_result")
            })
        })
    });
    let openai = messages
        .iter()
        .any(|m| m.get("tool_calls").is_some() || str_field(m, "role") == Some("tool"));
    match (anthropic, openai) {
        (true, false) => Some(Format::Anthropic),
        (false, true) => Some(Format::OpenaiChat),
        _ => None,
    }
}

/// Keys that only one single-document format puts near its start.
fn document_prefix(first: &[u8]) -> Option<Format> {
    let text = String::from_utf8_lossy(first);
    let has = |k: &str| text.contains(&format!("\"{k}\""));
    if has("projectHash") && has("messages") {
        Some(Format::GeminiCli)
    } else if has("resourceSpans") {
        Some(Format::Otel)
    } else if has("candidates") || has("contents") || (has("appName") && has("events")) {
        Some(Format::Gemini)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A first line longer than the 64 KiB detection reads at least is read to its end: cut off,
    /// it would parse as nothing.
    #[test]
    fn a_first_line_longer_than_the_window_is_read_whole() {
        let paste = "x".repeat(100_000);
        let first = format!(
            r#"{{"type":"user","sessionId":"s","uuid":"u","timestamp":"2025-01-01T00:00:00Z","message":{{"role":"user","content":"{paste}"}}}}"#
        );
        let file = format!("{first}\n{first}\n");
        assert_eq!(Format::detect("t.jsonl", &file.as_bytes()[..1 << 16]), None);
        assert_eq!(
            Format::detect_file("t.jsonl", file.as_bytes()),
            Some(Format::ClaudeCode)
        );
        // Still being written: everything there is, which tells nothing yet.
        assert_eq!(
            Format::detect_file("t.jsonl", &first.as_bytes()[..80_000]),
            None
        );
        assert_eq!(
            Format::detect_file("t.jsonl", first.as_bytes()),
            Some(Format::ClaudeCode)
        );
        // Short first lines: the window.
        let short = "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n".repeat(10_000);
        assert_eq!(detection_window(short.as_bytes()).len(), 1 << 16);
        assert_eq!(
            Format::detect_file("e.jsonl", short.as_bytes()),
            Some(Format::CodexExec)
        );
    }

    #[test]
    fn detects_line_formats_from_the_first_line() {
        let cases: [(&str, &str, Option<Format>); 14] = [
            (
                "t.jsonl",
                r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#,
                Some(Format::ClaudeCode),
            ),
            (
                "t.jsonl",
                r#"{"type":"system","subtype":"init","session_id":"s"}"#,
                Some(Format::ClaudeCodeStream),
            ),
            (
                "h.jsonl",
                r#"{"session_id":"s","hook_event_name":"PreToolUse"}"#,
                Some(Format::ClaudeCodeHooks),
            ),
            (
                "r.jsonl",
                r#"{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x"}}"#,
                Some(Format::Codex),
            ),
            (
                "e.jsonl",
                r#"{"type":"thread.started","thread_id":"t"}"#,
                Some(Format::CodexExec),
            ),
            (
                "c.txt",
                r#"{"type":"response.created","sequence_number":0,"response":{}}"#,
                Some(Format::OpenaiResponses),
            ),
            (
                "c.sse",
                "\ndata: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[]}",
                Some(Format::OpenaiChat),
            ),
            (
                "m.jsonl",
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
                Some(Format::Mcp),
            ),
            (
                "m.jsonl",
                r#"{"timestamp":1,"message":{"jsonrpc":"2.0","id":1}}"#,
                Some(Format::Mcp),
            ),
            ("o.jsonl", r#"{"resourceSpans":[]}"#, Some(Format::Otel)),
            ("a.jsonl", r#"event: message_start"#, None),
            (
                "q.jsonl",
                r#"{"model":"x","messages":[{"role":"user","content":"hi"}]}"#,
                None,
            ),
            (
                "q.jsonl",
                r#"{"model":"x","messages":[{"role":"tool","tool_call_id":"c","content":"1"}]}"#,
                Some(Format::OpenaiChat),
            ),
            (
                "rollout-2025.jsonl",
                r#"{"model":"x"}"#,
                Some(Format::Codex),
            ),
        ];
        for (path, text, want) in cases {
            assert_eq!(detect(path, text.as_bytes()), want, "{text}");
            // Saved "with BOM": the same answer.
            let marked = format!("\u{feff}{text}");
            assert_eq!(Format::detect(path, marked.as_bytes()), want, "{marked}");
        }
    }

    #[test]
    fn detects_adk_bus_events_wrapped_or_bare() {
        let cases = [
            r#"{"event":"toolCall","payload":{"id":"c1","tool":"add","args":{},"checksum":"","isComplete":false}}"#,
            r#"{"event":"turnStart","session":"s","payload":{"turnId":"t","startedAt":"2026-05-04T10:00:00.000+02:00"}}"#,
            r#"{"id":"c1","tool":"add","args":{"a":1},"checksum":"","createdAt":"2026-05-04T10:00:00.000+02:00","updatedAt":"2026-05-04T10:00:00.000+02:00","isComplete":false,"isError":false}"#,
            r#"{"toolName":"add","turnId":"d","callId":"","args":{},"startedAt":"2026-05-04T10:00:00.000+02:00"}"#,
            r#"{"turnId":"t","startedAt":"2026-05-04T10:00:00.000+02:00"}"#,
        ];
        for text in cases {
            assert_eq!(
                detect("bus.jsonl", text.as_bytes()),
                Some(Format::Adk),
                "{text}"
            );
        }
        // Other events of the buses say nothing about the format on their own.
        let message = r#"{"event":"message","payload":{"id":"m","aDelta":"hi"}}"#;
        assert_eq!(detect("bus.jsonl", message.as_bytes()), None);
    }

    #[test]
    fn detects_documents_from_their_keys() {
        let gemini_cli =
            "{\n  \"sessionId\": \"x\",\n  \"projectHash\": \"y\",\n  \"messages\": [\n";
        assert_eq!(
            detect("session.json", gemini_cli.as_bytes()),
            Some(Format::GeminiCli)
        );
        let otlp = "{\n \"resourceSpans\": [\n";
        assert_eq!(detect("t.json", otlp.as_bytes()), Some(Format::Otel));
        assert_eq!(detect("x.json", b"{\n \"foo\": 1,\n"), None);
        assert_eq!(detect("x.json", b""), None);
    }
}

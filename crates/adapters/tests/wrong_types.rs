//! A field a call is known by (its id, session, turn, tool, time) that holds a value of the wrong
//! type is an error naming the field, and the line (or the block, or the part of a document) is
//! left out: read leniently, it would quietly become another call — one without its id, or at a
//! time made up by the clock rule.

use toolcalls_adapters::{parse, Format, Options, Parsed};
use toolcalls_model::{EventKind, Timestamp};

fn read(format: Format, input: &str) -> Parsed {
    let opts = Options {
        base_time: Some(Timestamp::from_millis(1_780_000_000_000)),
        ..Options::default()
    };
    parse(format, "input", input.as_bytes(), &opts)
}

/// The events' kinds and call ids.
fn calls(p: &Parsed) -> Vec<(EventKind, Option<&str>)> {
    p.events
        .iter()
        .map(|e| (e.kind(), e.call_id.as_ref().map(|c| c.0.as_str())))
        .collect()
}

/// Checks that `input` gives exactly one error, on `line` (at `at` when given), naming what is
/// wrong, and then the `events` given.
fn refused(
    format: Format,
    input: &str,
    line: usize,
    at: Option<&str>,
    says: &str,
    events: &[(EventKind, Option<&str>)],
) {
    let p = read(format, input);
    assert_eq!(p.errors.len(), 1, "{format:?}: {:?}", p.errors);
    let e = &p.errors[0];
    assert_eq!((e.line, e.at.as_deref()), (line, at), "{format:?}: {e}");
    assert!(e.message.contains(says), "{format:?}: {e}");
    assert_eq!(calls(&p), events, "{format:?}");
}

use EventKind::{Announce, Completion};

#[test]
fn codex_rollout_ids_and_times() {
    let head = r#"{"timestamp":"2025-09-25T01:22:20.083Z","type":"session_meta","payload":{"id":"sess-1"}}"#;
    let call = |id: &str, time: &str| {
        format!(
            r#"{{"timestamp":{time},"type":"response_item","payload":{{"type":"function_call","name":"shell","arguments":"{{}}","call_id":{id}}}}}"#
        )
    };
    let ok = call(r#""call_a""#, r#""2025-09-25T01:22:21.000Z""#);
    let out = r#"{"timestamp":"2025-09-25T01:22:22.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_a","output":"x"}}"#;
    let valid = [head, &ok, out].join("\n");
    assert!(read(Format::Codex, &valid).errors.is_empty());
    assert_eq!(
        calls(&read(Format::Codex, &valid)),
        [(Announce, Some("call_a")), (Completion, Some("call_a"))]
    );

    let number = [head, &call("123", r#""2025-09-25T01:22:21.000Z""#), out].join("\n");
    refused(
        Format::Codex,
        &number,
        2,
        None,
        "`call_id` must be text, got `123`",
        &[(Completion, Some("call_a"))],
    );
    let garbage = [head, &call(r#""call_a""#, r#""garbage""#), out].join("\n");
    refused(
        Format::Codex,
        &garbage,
        2,
        None,
        "`timestamp` must be an RFC 3339 time, got `\"garbage\"`",
        &[(Completion, Some("call_a"))],
    );
    // `null` is no value, as a missing field is.
    let null = [head, &call(r#""call_a""#, "null"), out].join("\n");
    assert!(read(Format::Codex, &null).errors.is_empty());
    let session = r#"{"timestamp":"2025-09-25T01:22:20.083Z","type":"session_meta","payload":{"id":{"uuid":"s"}}}"#;
    refused(
        Format::Codex,
        &[session, &ok, out].join("\n"),
        1,
        None,
        "`id` must be text",
        &[(Announce, Some("call_a")), (Completion, Some("call_a"))],
    );
}

#[test]
fn codex_exec_item_ids() {
    let lines = [
        r#"{"type":"thread.started","thread_id":"th-1"}"#,
        r#"{"type":"item.started","item":{"id":7,"type":"command_execution","command":"ls","status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls","aggregated_output":"","exit_code":0,"status":"completed"}}"#,
    ];
    refused(
        Format::CodexExec,
        &lines.join("\n"),
        2,
        None,
        "`id` must be text, got `7`",
        &[(Announce, Some("item_1")), (Completion, Some("item_1"))],
    );
}

#[test]
fn claude_code_blocks_are_refused_one_by_one() {
    let row = r#"{"type":"assistant","sessionId":"s","timestamp":"2026-01-05T10:00:00.000Z","uuid":"u1","message":{"role":"assistant","content":[{"type":"tool_use","id":7,"name":"Bash","input":{}},{"type":"tool_use","id":"toolu_2","name":"Read","input":{}}]}}"#;
    let result = r#"{"type":"user","sessionId":"s","timestamp":"2026-01-05T10:00:01.000Z","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":{"id":"toolu_2"},"content":"x"}]}}"#;
    let p = read(Format::ClaudeCode, &[row, result].join("\n"));
    let got: Vec<_> = p
        .errors
        .iter()
        .map(|e| (e.line, e.at.clone().unwrap_or_default(), e.message.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                1,
                "message.content[0]".to_owned(),
                "`id` must be text, got `7`; skipped".to_owned()
            ),
            (
                2,
                "message.content[0]".to_owned(),
                "`tool_use_id` must be text, got `{\"id\":\"toolu_2\"}`; skipped".to_owned()
            ),
        ]
    );
    assert_eq!(calls(&p), [(Announce, Some("toolu_2"))]);

    let session = row.replace(r#""sessionId":"s""#, r#""sessionId":5"#);
    refused(
        Format::ClaudeCode,
        &session,
        1,
        None,
        "`sessionId` must be text, got `5`",
        &[],
    );
}

#[test]
fn claude_code_hooks_and_stream_json() {
    let pre = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":9}"#;
    refused(
        Format::ClaudeCodeHooks,
        pre,
        1,
        None,
        "`tool_use_id` must be text, got `9`",
        &[],
    );
    let time = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{},"tool_use_id":"toolu_1","timestamp":"yesterday"}"#;
    refused(
        Format::ClaudeCodeHooks,
        time,
        1,
        None,
        "`timestamp` must be a time",
        &[],
    );
    let stream = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}]},"session_id":true}"#;
    refused(
        Format::ClaudeCodeStream,
        stream,
        1,
        None,
        "`session_id` must be text, got `true`",
        &[],
    );
}

#[test]
fn gemini_cli_and_api() {
    let doc = r#"{"sessionId":"g-1","startTime":"2025-10-27T19:56:01.701Z","messages":[
      {"id":"u1","timestamp":"2025-10-27T19:56:01.701Z","type":"user","content":"go"},
      {"id":"m1","timestamp":"2025-10-27T19:56:04.625Z","type":"gemini","content":"","toolCalls":[
        {"id":1,"name":"ls","args":{},"status":"success","timestamp":"2025-10-27T19:56:05.000Z","result":[]},
        {"id":"ls-2","name":"ls","args":{"p":1},"status":"success","timestamp":"2025-10-27T19:56:05.000Z","result":[]}]}]}"#;
    refused(
        Format::GeminiCli,
        doc,
        1,
        Some("messages[1].toolCalls[0]"),
        "`id` must be text, got `1`",
        &[(Announce, Some("ls-2")), (Completion, Some("ls-2"))],
    );
    let api = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":3,"name":"ls","args":{}}}]}}]}"#;
    refused(
        Format::Gemini,
        api,
        1,
        Some("candidates[0].content.parts[0]"),
        "`id` must be text, got `3`",
        &[],
    );
    let adk = r#"{"invocationId":"inv-1","author":"agent","timestamp":"soon","content":{"parts":[{"functionCall":{"id":"c1","name":"ls","args":{}}}]}}"#;
    refused(
        Format::Gemini,
        adk,
        1,
        Some("events[0]"),
        "`timestamp` must be a number of seconds since the epoch",
        &[],
    );
}

#[test]
fn openai_chat_and_responses() {
    let chat = r#"{"messages":[{"role":"assistant","tool_calls":[{"id":4,"type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_x","content":"ok"}]}"#;
    refused(
        Format::OpenaiChat,
        chat,
        1,
        Some("messages[0].tool_calls[0]"),
        "`id` must be text, got `4`",
        &[(Completion, Some("call_x"))],
    );
    let result = r#"{"messages":[{"role":"tool","tool_call_id":["call_x"],"content":"ok"}]}"#;
    refused(
        Format::OpenaiChat,
        result,
        1,
        Some("messages[0]"),
        "`tool_call_id` must be text",
        &[],
    );
    let responses = r#"{"object":"response","output":[{"type":"function_call","id":"fc_1","call_id":5,"name":"ls","arguments":"{}"}]}"#;
    refused(
        Format::OpenaiResponses,
        responses,
        1,
        Some("output[0]"),
        "`call_id` must be text, got `5`",
        &[],
    );
}

#[test]
fn anthropic_blocks() {
    let response = r#"{"type":"message","role":"assistant","content":[{"type":"tool_use","id":[1],"name":"ls","input":{}},{"type":"tool_use","id":"toolu_2","name":"ls","input":{"a":1}}]}"#;
    refused(
        Format::Anthropic,
        response,
        1,
        Some("content.content[0]"),
        "`id` must be text, got `[1]`",
        &[(Announce, Some("toolu_2"))],
    );
}

#[test]
fn mcp_ids_may_be_numbers_but_nothing_else() {
    let call = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ls","arguments":{{}}}}}}"#
        )
    };
    let p = read(Format::Mcp, &call("12"));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(calls(&p), [(Announce, Some("12"))]);
    refused(
        Format::Mcp,
        &call(r#"{"n":12}"#),
        1,
        None,
        "`id` must be text or a number",
        &[],
    );
    let wrapped = r#"{"timestamp":"2026-01-01T00:00:00Z","sessionId":7,"message":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ls"}}}"#;
    refused(
        Format::Mcp,
        wrapped,
        1,
        None,
        "`sessionId` must be text, got `7`",
        &[],
    );
}

#[test]
fn otel_call_ids_may_be_integers_but_not_flags() {
    let span = |id: &str| {
        format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"execute_tool ls","startTimeUnixNano":"1780000000000000000","endTimeUnixNano":"1780000001000000000","attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"execute_tool"}}}},{{"key":"gen_ai.tool.call.id","value":{id}}}]}}]}}]}}]}}"#
        )
    };
    let p = read(Format::Otel, &span(r#"{"intValue":"42"}"#));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(
        calls(&p),
        [(Announce, Some("42")), (Completion, Some("42"))]
    );
    refused(
        Format::Otel,
        &span(r#"{"boolValue":true}"#),
        1,
        Some("resourceSpans[0].scopeSpans[0].spans[0]"),
        "`gen_ai.tool.call.id` must be text or a number, got `true`",
        &[],
    );
}

//! Codex: rollout files and `codex exec --json` output.

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use toolcalls_model::Completion;

use crate::common::{
    hints, rfc3339_field, str_field, text_field, ArgsWire, Ctx, Envelope, IdScope,
};
use crate::line_reader::LineReader;

/// Codex rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
///
/// - `session_meta.payload.id` is the session.
/// - `response_item` `function_call` / `custom_tool_call` / `local_shell_call` are announces keyed
///   by `call_id`; `function_call_output` / `custom_tool_call_output` are completions by `call_id`.
///   Arguments are kept as Codex wrote them (a JSON string for function calls, free text for
///   custom tools).
/// - A turn is `turn_context.turn_id` / `task_started.turn_id` when the version writes one, else
///   the count of `user_message` events (`"1"`, `"2"`, …). `turn_aborted` → a `turn_aborted`
///   event, `task_complete` → `turn_end`.
/// - The rollout has no success flag on outputs. A result is an error when its JSON
///   `metadata.exit_code` (or a leading `Exit code: N` line) is not 0, or when a shell tool's output
///   is not such a report at all (Codex writes plain text only for sandbox failures, rejected
///   patches and timeouts).
/// - Older rollouts without the `{timestamp, type, payload}` wrapper (bare response items) are read
///   too.
#[derive(Default)]
pub(crate) struct Rollout {
    session: Option<String>,
    turn: Option<String>,
    native_turns: bool,
    prompts: usize,
    /// Tool names by call id, for the outputs.
    tools: HashMap<String, String>,
}

impl LineReader for Rollout {
    fn line(&mut self, ctx: &mut Ctx, line: usize, bytes: &[u8]) {
        let Some(row) = ctx.json_object_line(line, bytes, "a Codex rollout line") else {
            return;
        };
        if let Err(problem) = self.row(ctx, line, &row) {
            ctx.error(line, problem);
        }
    }
}

impl Rollout {
    /// Reads one rollout line; a field the line's call is known by holding a value of the wrong
    /// type is the error returned.
    fn row(&mut self, ctx: &mut Ctx, line: usize, row: &Value) -> Result<(), String> {
        let time = ctx.clock.at(line - 1, rfc3339_field(row, "timestamp")?);
        let (kind, payload) = match (str_field(row, "type"), row.get("payload")) {
            (Some(k), Some(p)) => (k, p),
            // Bare response items of older rollouts.
            (Some(_), None) => ("response_item", row),
            (None, _) => {
                if row.get("record_type").is_some() || row.get("instructions").is_some() {
                    ctx.skip();
                } else {
                    ctx.error(line, "line has no `type`; expected a Codex rollout line ({timestamp, type, payload})");
                }
                return Ok(());
            }
        };
        let env = Envelope {
            session: self.session.clone(),
            turn: self.turn.clone(),
            time,
            ..Envelope::default()
        };
        let ptype = str_field(payload, "type").unwrap_or("");
        match (kind, ptype) {
            ("session_meta", _) => {
                let meta = match payload.get("meta") {
                    Some(m) => text_field(m, "id")?,
                    None => None,
                };
                self.session = text_field(payload, "id")?.or(meta).map(str::to_owned);
                ctx.skip();
            }
            ("turn_context", _) | ("event_msg", "task_started") => {
                if let Some(t) = text_field(payload, "turn_id")? {
                    self.turn = Some(t.to_owned());
                    self.native_turns = true;
                }
                ctx.skip();
            }
            ("event_msg", "user_message") => {
                if !self.native_turns {
                    self.prompts += 1;
                    self.turn = Some(self.prompts.to_string());
                }
                ctx.skip();
            }
            ("event_msg", "turn_aborted") => {
                let env = Envelope {
                    turn: text_field(payload, "turn_id")?
                        .map(str::to_owned)
                        .or(env.turn),
                    ..env
                };
                ctx.turn_aborted(env, str_field(payload, "reason").map(str::to_owned));
            }
            ("event_msg", "task_complete") => {
                let env = Envelope {
                    turn: text_field(payload, "turn_id")?
                        .map(str::to_owned)
                        .or(env.turn),
                    ..env
                };
                ctx.turn_end(env, Some("task_complete".into()));
            }
            ("response_item", "function_call" | "custom_tool_call" | "local_shell_call") => {
                let call_id = match text_field(payload, "call_id")? {
                    Some(id) => Some(id),
                    None => text_field(payload, "id")?,
                };
                // `function_call` arguments are JSON text; a custom tool's input is the argument.
                let (tool, args, wire) = match ptype {
                    "function_call" => (
                        text_field(payload, "name")?,
                        payload.get("arguments"),
                        ArgsWire::Encoded,
                    ),
                    "custom_tool_call" => (
                        text_field(payload, "name")?,
                        payload.get("input"),
                        ArgsWire::Value,
                    ),
                    _ => (Some("local_shell"), payload.get("action"), ArgsWire::Value),
                };
                let Some(tool) = tool else {
                    ctx.error(
                        line,
                        format!("{ptype} has no `name`; the line is truncated"),
                    );
                    return Ok(());
                };
                if let Some(id) = call_id {
                    self.tools.insert(id.to_owned(), tool.to_owned());
                }
                let env = Envelope {
                    call_id: call_id.map(str::to_owned),
                    ..env
                };
                ctx.announce_as(env, tool, args.cloned(), wire);
            }
            ("response_item", "function_call_output" | "custom_tool_call_output") => {
                let Some(call_id) = text_field(payload, "call_id")? else {
                    ctx.error(
                        line,
                        format!("{ptype} has no `call_id`; it cannot name its call"),
                    );
                    return Ok(());
                };
                let output = payload.get("output").cloned().unwrap_or(Value::Null);
                let failed = payload.get("success").and_then(Value::as_bool) == Some(false)
                    || output_failed(self.tools.get(call_id).map(String::as_str), &output);
                let env = Envelope {
                    call_id: Some(call_id.to_owned()),
                    ..env
                };
                let c = Completion {
                    result: Some(toolcalls_model::Json::from(output)),
                    is_error: failed,
                    ..Completion::default()
                };
                ctx.complete(env, c);
            }
            _ => ctx.skip(),
        }
        Ok(())
    }
}

/// Tools whose successful output Codex always wraps in an exit-code report.
const SHELL_TOOLS: [&str; 6] = [
    "shell",
    "container.exec",
    "local_shell",
    "exec_command",
    "shell_command",
    "unified_exec",
];

/// Whether a rollout output reports a failure (see [`rollout`]).
fn output_failed(tool: Option<&str>, output: &Value) -> bool {
    let text = match output {
        Value::String(s) => s.as_str(),
        Value::Object(o) => {
            return o
                .get("metadata")
                .and_then(|m| m.get("exit_code"))
                .and_then(Value::as_i64)
                .is_some_and(|c| c != 0)
        }
        _ => return false,
    };
    if let Ok(Value::Object(o)) = crate::value::parse(text.as_bytes()) {
        if let Some(code) = o
            .get("metadata")
            .and_then(|m| m.get("exit_code"))
            .and_then(Value::as_i64)
        {
            return code != 0;
        }
    }
    if let Some(rest) = text.strip_prefix("Exit code: ") {
        let code: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        if let Ok(code) = code.parse::<i64>() {
            return code != 0;
        }
    }
    tool.is_some_and(|t| SHELL_TOOLS.contains(&t))
}

/// `codex exec --json` events.
///
/// - `thread.started.thread_id` is the event's `thread`; `item_N` ids restart per thread, so they
///   are only compared inside it. The file names no session: the session is `--session` or the file
///   name (one file may hold several runs, each its own thread).
/// - `turn.started` numbers turns per thread; `turn.completed` → `turn_end`, `turn.failed` →
///   `turn_aborted`.
/// - Tool items (`command_execution`, `file_change`, `mcp_tool_call`, `web_search`):
///   `item.started` → announce, `item.completed` → completion (with the tool and arguments again,
///   so it carries the checksum). An item that only completes (file changes usually do) gives an
///   announce and a completion at the same time. `exit_code` ≠ 0 or status `failed` / `declined`
///   is an error.
/// - There are no timestamps: see [`crate::Options::base_time`].
#[derive(Default)]
pub(crate) struct ExecJson {
    thread: Option<String>,
    turns: usize,
    turn: Option<String>,
    ids: IdScope,
}

impl LineReader for ExecJson {
    fn line(&mut self, ctx: &mut Ctx, line: usize, bytes: &[u8]) {
        let Some(row) = ctx.json_line(line, bytes) else {
            return;
        };
        if let Err(problem) = self.row(ctx, line, &row) {
            ctx.error(line, problem);
        }
    }
}

impl ExecJson {
    /// Reads one event; a field the line's call is known by holding a value of the wrong type is
    /// the error returned.
    fn row(&mut self, ctx: &mut Ctx, line: usize, row: &Value) -> Result<(), String> {
        let Some(kind) = str_field(row, "type") else {
            ctx.error(
                line,
                "line has no `type`; expected `codex exec --json` output",
            );
            return Ok(());
        };
        let time = ctx.clock.at(line - 1, None);
        let env = Envelope {
            thread: self.thread.clone(),
            turn: self.turn.clone(),
            time,
            ..Envelope::default()
        };
        match kind {
            "thread.started" => {
                self.thread = text_field(row, "thread_id")?.map(str::to_owned);
                if self.thread.is_none() {
                    ctx.error(
                        line,
                        "thread.started has no `thread_id`; item ids of this run cannot be scoped",
                    );
                }
                self.turns = 0;
                self.turn = None;
                ctx.skip();
            }
            "turn.started" => {
                self.turns += 1;
                self.turn = Some(self.turns.to_string());
                ctx.skip();
            }
            "turn.completed" => {
                ctx.turn_end(env, Some("completed".into()));
            }
            "turn.failed" => {
                let reason = row
                    .get("error")
                    .and_then(|e| str_field(e, "message"))
                    .unwrap_or("failed")
                    .to_owned();
                ctx.turn_aborted(env, Some(reason));
            }
            "item.started" | "item.completed" => {
                let Some(item) = row.get("item").filter(|i| i.is_object()) else {
                    ctx.error(line, format!("{kind} has no `item` object"));
                    return Ok(());
                };
                let Some(call) = tool_item(item)? else {
                    ctx.skip();
                    return Ok(());
                };
                let Some(native) = text_field(item, "id")? else {
                    ctx.error(line, format!("{kind} {} item has no `id`", call.tool));
                    return Ok(());
                };
                let scope = self.thread.clone().unwrap_or_default();
                if kind == "item.started" {
                    let id = self.ids.open(&scope, native);
                    let env = Envelope {
                        call_id: Some(id),
                        attributes: call.attributes.clone(),
                        ..env
                    };
                    ctx.announce(env, &call.tool, call.args.clone());
                    return Ok(());
                }
                if !self.ids.pending(&scope, native) {
                    let id = self.ids.open(&scope, native);
                    let env = Envelope {
                        call_id: Some(id),
                        attributes: call.attributes.clone(),
                        ..env.clone()
                    };
                    ctx.announce(env, &call.tool, call.args.clone());
                }
                let id = self.ids.close(&scope, native);
                let env = Envelope {
                    call_id: Some(id),
                    ..env
                };
                let c = Completion {
                    result: (call.result).map(toolcalls_model::Json::from),
                    is_error: call.failed,
                    ..hints(Some(&call.tool), call.args)
                };
                ctx.complete(env, c);
            }
            _ => ctx.skip(),
        }
        Ok(())
    }
}

/// The tool-call view of an exec item.
struct ToolItem {
    tool: String,
    args: Option<Value>,
    result: Option<Value>,
    failed: bool,
    attributes: Option<Map<String, Value>>,
}

/// The tool call an exec item is (`None` for an item that is none), or what is wrong with it.
fn tool_item(item: &Value) -> Result<Option<ToolItem>, String> {
    let status = str_field(item, "status").unwrap_or("");
    let bad_status = matches!(status, "failed" | "declined");
    let Some(t) = str_field(item, "type") else {
        return Ok(None);
    };
    let it = match t {
        "command_execution" => ToolItem {
            tool: t.to_owned(),
            args: Some(json!({ "command": item.get("command").cloned().unwrap_or(Value::Null) })),
            result: item.get("aggregated_output").cloned(),
            failed: bad_status
                || item
                    .get("exit_code")
                    .and_then(Value::as_i64)
                    .is_some_and(|c| c != 0),
            attributes: None,
        },
        "file_change" => ToolItem {
            tool: t.to_owned(),
            args: Some(json!({ "changes": item.get("changes").cloned().unwrap_or(Value::Null) })),
            result: Some(Value::from(status)),
            failed: bad_status,
            attributes: None,
        },
        "mcp_tool_call" => {
            let mut attributes = Map::new();
            if let Some(server) = item.get("server") {
                attributes.insert("mcpServer".into(), server.clone());
            }
            ToolItem {
                tool: text_field(item, "tool")?
                    .unwrap_or("mcp_tool_call")
                    .to_owned(),
                args: item.get("arguments").cloned(),
                result: item.get("result").or_else(|| item.get("error")).cloned(),
                failed: bad_status || item.get("error").is_some_and(|e| !e.is_null()),
                attributes: Some(attributes),
            }
        }
        "web_search" => ToolItem {
            tool: t.to_owned(),
            args: Some(json!({ "query": item.get("query").cloned().unwrap_or(Value::Null) })),
            result: None,
            failed: bad_status,
            attributes: None,
        },
        _ => return Ok(None),
    };
    Ok(Some(it))
}

#[cfg(test)]
mod tests {
    use crate::test_support::parse_str;
    use crate::Format;
    use toolcalls_model::{EventBody, EventKind};

    #[test]
    fn rollout_links_by_call_id_numbers_turns_and_aborts() {
        let s = [
            r#"{"timestamp":"2025-09-25T01:22:20.083Z","type":"session_meta","payload":{"id":"sess-1","cwd":"/w","cli_version":"0.40.0"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:20.084Z","type":"event_msg","payload":{"type":"user_message","message":"fix it","kind":"plain"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:21.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"ls\"]}","call_id":"call_a"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:21.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_a","output":"{\"output\":\"x\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.1}}"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:22.000Z","type":"response_item","payload":{"type":"custom_tool_call","status":"completed","call_id":"call_b","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:23.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"rm x\"]}","call_id":"call_c"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:23.500Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_b","output":"{\"output\":\"Success.\",\"metadata\":{\"exit_code\":0}}"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:24.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_c","output":"failed in sandbox: denied"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:25.000Z","type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:26.000Z","type":"event_msg","payload":{"type":"user_message","message":"go on","kind":"plain"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:27.000Z","type":"response_item","payload":{"type":"function_call","name":"update_plan","arguments":"{}","call_id":"call_d"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:27.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_d","output":"Plan updated"}}"#,
            r#"{"timestamp":"2025-09-25T01:22:28.000Z","type":"response_item","payload":{"type":"function_call_output","output":"?"}}"#,
        ];
        let p = parse_str(Format::Codex, "rollout.jsonl", &s.join("\n"));
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].line, 13);
        use EventKind::*;
        let got: Vec<_> = p
            .events
            .iter()
            .map(|e| {
                (
                    e.kind(),
                    e.call_id.as_ref().map(|c| c.0.as_str()),
                    e.turn.as_ref().map(toolcalls_model::TurnId::as_str),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Announce, Some("call_a"), Some("1")),
                (Completion, Some("call_a"), Some("1")),
                (Announce, Some("call_b"), Some("1")),
                (Announce, Some("call_c"), Some("1")),
                (Completion, Some("call_b"), Some("1")),
                (Completion, Some("call_c"), Some("1")),
                (TurnAborted, None, Some("1")),
                (Announce, Some("call_d"), Some("2")),
                (Completion, Some("call_d"), Some("2")),
            ]
        );
        let errors: Vec<bool> = p
            .events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Completion(c) => Some(c.is_error),
                _ => None,
            })
            .collect();
        assert_eq!(
            errors,
            [false, false, true, false],
            "plain text from shell is a failure, from update_plan not"
        );
        assert!(p.events.iter().all(|e| e.session.as_str() == "sess-1"));
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert!(
            a.args.as_ref().unwrap().to_value().is_string(),
            "arguments are kept as sent"
        );
    }

    #[test]
    fn exit_code_rules() {
        use super::output_failed;
        use serde_json::json;
        assert!(output_failed(
            Some("shell"),
            &json!("{\"output\":\"\",\"metadata\":{\"exit_code\":2}}")
        ));
        assert!(!output_failed(
            Some("shell"),
            &json!("Exit code: 0\nWall time: 1s\nOutput:\nok")
        ));
        assert!(output_failed(
            Some("shell"),
            &json!("Exit code: 127\nOutput:\nnot found")
        ));
        assert!(output_failed(
            Some("shell"),
            &json!("patch rejected by user")
        ));
        assert!(
            !output_failed(None, &json!("patch rejected by user")),
            "unknown tool: no guess"
        );
    }

    #[test]
    fn exec_json_scopes_item_ids_by_thread() {
        let s = [
            r#"{"type":"thread.started","thread_id":"th-1"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1}}"#,
            r#"{"type":"thread.started","thread_id":"th-2"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/a","kind":"add"}],"status":"completed"}}"#,
            r#"{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"false","aggregated_output":"","status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"done"}}"#,
            r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#,
        ];
        let p = parse_str(Format::CodexExec, "exec.jsonl", &s.join("\n"));
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        use EventKind::*;
        let got: Vec<_> = p
            .events
            .iter()
            .map(|e| {
                (
                    e.kind(),
                    e.thread.as_ref().map(|t| t.as_str()),
                    e.call_id.as_ref().map(|c| c.0.as_str()),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Announce, Some("th-1"), Some("item_1")),
                (Completion, Some("th-1"), Some("item_1")),
                (TurnEnd, Some("th-1"), None),
                (Announce, Some("th-2"), Some("item_1")),
                (Completion, Some("th-2"), Some("item_1")),
                (Announce, Some("th-2"), Some("item_2")),
                (Completion, Some("th-2"), Some("item_2")),
                (TurnAborted, Some("th-2"), None),
            ]
        );
        let EventBody::Completion(c) = &p.events[6].body else {
            panic!()
        };
        assert!(c.is_error);
        let EventBody::Completion(c) = &p.events[4].body else {
            panic!()
        };
        let EventBody::Announce(a) = &p.events[3].body else {
            panic!()
        };
        assert_eq!(
            c.checksum, a.checksum,
            "the completed item repeats the arguments"
        );
        assert!(p.events.iter().all(|e| e.session.as_str() == "exec"));
        assert_eq!(p.events[0].time.millis(), 2, "no times: line index in ms");
    }
}

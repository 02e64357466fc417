//! Claude Code hook payloads.

use serde_json::Value;
use toolcalls_model::{
    Approval, ApprovalDecision, Completion, EventBody, HookDecision, HookVerdict, Timestamp,
};

use crate::common::{first_of, hints, loose_time_field, str_field, text_field, Ctx, Envelope};
use crate::line_reader::LineReader;

/// Claude Code hook payloads, one JSON object per line as a logging hook writes them (the hook's
/// stdin, optionally with a `timestamp` the logger added and the hook's output merged in).
///
/// - `PreToolUse` → announce (`tool_name`, `tool_input`, `tool_use_id`); when the logged line holds
///   the hook's `hookSpecificOutput.permissionDecision` (`allow` / `deny`), also a hook decision.
/// - `PostToolUse` → completion with `tool_response`; `PostToolUseFailure` → failed completion
///   with `error` (`is_interrupt` → cancelled). Both repeat `tool_name` and `tool_input`, so the
///   completion carries the checksum even when `tool_use_id` is missing (older versions, some modes).
/// - `PermissionRequest` → approval requested; `Stop` and `SessionEnd` → `turn_end` of the session.
///
/// Hook payloads carry no turn id and, unless the logger adds one, no time.
#[derive(Default)]
pub(crate) struct Hooks;

impl LineReader for Hooks {
    fn line(&mut self, ctx: &mut Ctx, line: usize, bytes: &[u8]) {
        let Some(p) = ctx.json_line(line, bytes) else {
            return;
        };
        let Some(event) = str_field(&p, "hook_event_name") else {
            ctx.error(line, "payload has no `hook_event_name`; expected Claude Code hook input (one JSON object per line)");
            return;
        };
        let Fields {
            time,
            session,
            call_id,
            tool,
            agent,
        } = match Fields::of(&p) {
            Ok(fields) => fields,
            Err(problem) => {
                ctx.error(line, problem);
                return;
            }
        };
        let time = ctx.clock.at(line - 1, time);
        let mut env = Envelope {
            session: session.map(str::to_owned),
            call_id: call_id.map(str::to_owned),
            time,
            ..Envelope::default()
        };
        let args = p.get("tool_input").cloned();
        let needs_tool = matches!(
            event,
            "PreToolUse" | "PostToolUse" | "PostToolUseFailure" | "PermissionRequest"
        );
        if needs_tool && tool.is_none() {
            ctx.error(
                line,
                format!("{event} payload has no `tool_name`; the payload is truncated"),
            );
            return;
        }
        match event {
            "PreToolUse" => {
                let tool = tool.unwrap_or_default();
                let i = ctx.announce(env.clone(), tool, args.clone());
                if let Some(agent) = agent {
                    if let EventBody::Announce(a) = &mut ctx.events_mut()[i].body {
                        a.agent = Some(agent.to_owned());
                    }
                }
                let output = p.get("hookSpecificOutput").unwrap_or(&Value::Null);
                let verdict = match str_field(output, "permissionDecision") {
                    Some("allow") => Some(HookVerdict::Allow),
                    Some("deny") => Some(HookVerdict::Deny),
                    _ => None,
                };
                if let Some(decision) = verdict {
                    let hint = hints(Some(tool), args);
                    let d = HookDecision {
                        tool: hint.tool,
                        args: hint.args,
                        checksum: hint.checksum,
                        hook: "PreToolUse".into(),
                        decision,
                        policy_id: None,
                        policy_version: None,
                        reason: str_field(output, "permissionDecisionReason").map(str::to_owned),
                    };
                    env.attributes = None;
                    ctx.emit(env, EventBody::HookDecision(d));
                }
            }
            "PostToolUse" => {
                let response = p.get("tool_response").cloned();
                let interrupted = response
                    .as_ref()
                    .and_then(|r| r.get("interrupted"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let c = Completion {
                    result: (response).map(toolcalls_model::Json::from),
                    cancelled: interrupted,
                    ..hints(tool, args)
                };
                ctx.complete(env, c);
            }
            "PostToolUseFailure" => {
                let c = Completion {
                    result: (p.get("error").cloned()).map(toolcalls_model::Json::from),
                    is_error: true,
                    cancelled: p
                        .get("is_interrupt")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    ..hints(tool, args)
                };
                ctx.complete(env, c);
            }
            "PermissionRequest" => {
                let hint = hints(tool, args);
                let a = Approval {
                    tool: hint.tool,
                    args: hint.args,
                    checksum: hint.checksum,
                    decision: ApprovalDecision::Requested,
                    by: None,
                    reason: None,
                };
                ctx.emit(env, EventBody::Approval(a));
            }
            "Stop" | "SessionEnd" => {
                env.call_id = None;
                let reason = str_field(&p, "reason").unwrap_or(event).to_owned();
                ctx.turn_end(env, Some(reason));
            }
            _ => ctx.skip(),
        }
    }
}

/// What a payload's call is known by.
struct Fields<'p> {
    time: Option<Timestamp>,
    session: Option<&'p str>,
    call_id: Option<&'p str>,
    tool: Option<&'p str>,
    agent: Option<&'p str>,
}

impl<'p> Fields<'p> {
    /// The fields, or the one of them that holds a value of the wrong type.
    fn of(p: &'p Value) -> Result<Fields<'p>, String> {
        Ok(Fields {
            time: first_of(p, &["timestamp", "time", "ts"], loose_time_field)?,
            session: text_field(p, "session_id")?,
            call_id: text_field(p, "tool_use_id")?,
            tool: text_field(p, "tool_name")?,
            agent: first_of(p, &["agent_id", "agent_type"], text_field)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{kinds_and_ids as kinds, parse_str};
    use crate::Format;
    use toolcalls_model::{EventBody, EventKind};

    #[test]
    fn hooks_with_and_without_tool_use_id() {
        let s = [
            r#"{"session_id":"s","transcript_path":"/t.jsonl","cwd":"/","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1","timestamp":"2026-01-01T00:00:00.000Z"}"#,
            r#"{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_response":{"stdout":"a","stderr":"","interrupted":false},"tool_use_id":"toolu_1","timestamp":"2026-01-01T00:00:01.000Z"}"#,
            r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/x","content":"y"},"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"protected path"}}"#,
            r#"{"session_id":"s","hook_event_name":"PostToolUseFailure","tool_name":"Write","tool_input":{"file_path":"/x","content":"y"},"error":"denied by hook","is_interrupt":false}"#,
            r#"{"session_id":"s","hook_event_name":"PostToolUse","tool_input":{}}"#,
            r#"{"session_id":"s","hook_event_name":"Stop","stop_hook_active":false}"#,
            r#"{"session_id":"s","hook_event_name":"Notification","message":"waiting"}"#,
        ];
        let p = parse_str(Format::ClaudeCodeHooks, "hooks.jsonl", &s.join("\n"));
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].line, 5);
        assert!(p.errors[0].message.contains("no `tool_name`"));
        use EventKind::*;
        let got: Vec<_> = kinds(&p).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            got,
            [
                Announce,
                Completion,
                Announce,
                HookDecision,
                Completion,
                TurnEnd
            ]
        );
        let EventBody::Completion(ok) = &p.events[1].body else {
            panic!()
        };
        assert_eq!(ok.tool.as_deref(), Some("Bash"));
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(
            ok.checksum, a.checksum,
            "tool_name + tool_input give the announce's checksum"
        );
        let EventBody::Completion(failed) = &p.events[4].body else {
            panic!()
        };
        assert!(failed.is_error && failed.checksum.is_some());
        assert_eq!(p.events[4].call_id, None, "no tool_use_id in this payload");
        // No time on the third line: the second line's time plus one line.
        assert_eq!(p.events[2].time.to_rfc3339(), "2026-01-01T00:00:01.001Z");
    }
}

//! Claude Code: session transcripts, `stream-json` output and hook payloads.
//!
//! All three share the source `claude-code`, so hook payloads and transcript rows of one session
//! correlate with each other.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use toolcalls_model::{
    Approval, ApprovalDecision, Checksum, Completion, EventBody, HookDecision, HookVerdict,
    Timestamp,
};

use crate::anthropic::{blocks, result_completion, Block};
use crate::common::{hints, lines, loose_time, rfc3339_field, str_field, Ctx, Env};

/// Turn state of one conversation stream: the main agent, or one subagent.
#[derive(Default)]
struct TurnState {
    turn: Option<String>,
    /// The turn was aborted; no `turn_end` follows for it.
    aborted: bool,
}

/// Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`, and subagent
/// files `agent-*.jsonl` / `subagents/agent-*.jsonl`).
///
/// - Each row is one content block of a message. Parallel calls are separate `assistant` rows
///   sharing `message.id`; calls are keyed by `tool_use.id`, never by message id.
/// - `user` rows with `tool_result` blocks are completions (`tool_use_id`, `is_error`); a result
///   whose text is `[Request interrupted by user…]` is a cancelled call.
/// - A `user` row with the user's own text starts a turn (turn id = the row's `uuid`) and ends the
///   previous one (`turn_end`); `[Request interrupted by user]` aborts the current turn.
/// - Sidechain rows (`isSidechain: true`, subagent files) keep the parent `sessionId` and name the
///   subagent (`agentId`) as the announce's agent; their turns are tracked apart from the main one.
/// - `progress` rows (hook runs, subagent progress, long-running bash output) are not calls: their
///   `data` is attached to the call named by `parentToolUseID`, as the attribute `progress` of its
///   completion (or of its announce when it has no completion in the file).
/// - The structured `toolUseResult` of a result row is kept as the completion attribute
///   `toolUseResult`; the completion's `result` is the `tool_result` content the model saw.
/// - Claude Code 2.1+ names the assistant row a result answers (`sourceToolAssistantUUID`); since
///   that row holds one call, the completion also carries the call's tool and checksum.
pub(crate) fn transcript(ctx: &mut Ctx<'_>, input: &[u8]) {
    let mut turns: HashMap<(String, String), TurnState> = HashMap::new();
    let mut announced: HashSet<(String, String)> = HashSet::new();
    let mut completed: HashSet<(String, String)> = HashSet::new();
    let mut progress: Vec<(String, String, Value)> = Vec::new();
    // Tool calls by the uuid of the assistant row that holds them, for `sourceToolAssistantUUID`.
    let mut calls_of_row: HashMap<String, Vec<(String, Option<Checksum>)>> = HashMap::new();

    for (line, bytes) in lines(input) {
        let Some(row) = ctx.json_line(line, bytes) else {
            continue;
        };
        if !row.is_object() {
            ctx.error(
                line,
                "expected a JSON object per line (a Claude Code transcript row)",
            );
            continue;
        }
        let Some(kind) = row.get("type").and_then(Value::as_str) else {
            ctx.error(line, "row has no `type`; is this a Claude Code transcript? try --format claude-code-stream or claude-code-hooks");
            continue;
        };
        let time = ctx.clock.at(line - 1, rfc3339_field(&row, "timestamp"));
        let session = str_field(&row, "sessionId")
            .unwrap_or(ctx.default_session())
            .to_owned();
        let sidechain = row
            .get("isSidechain")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let agent = sidechain.then(|| str_field(&row, "agentId").unwrap_or("sidechain").to_owned());
        let stream_key = (session.clone(), agent.clone().unwrap_or_default());

        match kind {
            "assistant" => {
                let Some(content) = row.get("message").and_then(|m| m.get("content")) else {
                    ctx.error(
                        line,
                        "assistant row has no `message.content`; the row is truncated",
                    );
                    continue;
                };
                let turn = turns.get(&stream_key).and_then(|t| t.turn.clone());
                let mut any = false;
                for b in blocks(content) {
                    let Block::Call {
                        id,
                        name,
                        input,
                        kind,
                        index,
                    } = b
                    else {
                        continue;
                    };
                    any = true;
                    let Some(name) = name else {
                        ctx.error_at(
                            line,
                            format!("message.content[{index}]"),
                            format!("`{kind}` block has no `name`; skipped"),
                        );
                        continue;
                    };
                    if let Some(id) = &id {
                        if !announced.insert((session.clone(), id.clone())) {
                            // The same block written twice (streaming rewrites); one call.
                            ctx.skip();
                            continue;
                        }
                    }
                    let env = Env {
                        session: Some(session.clone()),
                        turn: turn.clone(),
                        call_id: id,
                        time,
                        ..Env::default()
                    };
                    let i = ctx.announce(env, name, input.cloned());
                    if let EventBody::Announce(a) = &mut ctx.events_mut()[i].body {
                        a.agent.clone_from(&agent);
                        if let Some(uuid) = str_field(&row, "uuid") {
                            calls_of_row
                                .entry(uuid.to_owned())
                                .or_default()
                                .push((name.to_owned(), a.checksum.clone()));
                        }
                    }
                }
                if !any {
                    ctx.skip();
                }
            }
            "user" => {
                let Some(content) = row.get("message").and_then(|m| m.get("content")) else {
                    ctx.error(
                        line,
                        "user row has no `message.content`; the row is truncated",
                    );
                    continue;
                };
                let state = turns.entry(stream_key).or_default();
                let found = blocks(content);
                if found.is_empty() {
                    user_text(ctx, &row, content, &session, state, time);
                    continue;
                }
                let single = found.len() == 1;
                for b in found {
                    let Block::Result {
                        id,
                        content,
                        is_error,
                        ..
                    } = b
                    else {
                        continue;
                    };
                    if let Some(id) = &id {
                        if !completed.insert((session.clone(), id.clone())) {
                            ctx.skip();
                            continue;
                        }
                    }
                    let mut attributes = Map::new();
                    if single {
                        if let Some(r) = row.get("toolUseResult") {
                            attributes.insert("toolUseResult".into(), r.clone());
                        }
                    }
                    let env = Env {
                        session: Some(session.clone()),
                        turn: state.turn.clone(),
                        call_id: id,
                        time,
                        attributes: Some(attributes),
                        ..Env::default()
                    };
                    let mut c = result_completion(content, is_error);
                    // Claude Code 2.1+ names the assistant row of the call; when that row holds one
                    // call, the result can carry its tool and checksum (what the fallbacks use when
                    // ids are missing). Older versions only chain rows with `parentUuid`, which is
                    // wrong for parallel calls, so it is not used.
                    let source = str_field(&row, "sourceToolAssistantUUID")
                        .and_then(|u| calls_of_row.get(u));
                    if let (true, Some([(tool, checksum)])) = (single, source.map(Vec::as_slice)) {
                        c.tool = Some(tool.clone());
                        c.checksum.clone_from(checksum);
                    }
                    ctx.complete(env, c);
                }
            }
            "progress" => {
                let tool_id =
                    str_field(&row, "parentToolUseID").or_else(|| str_field(&row, "toolUseID"));
                if let (Some(tool_id), Some(data)) = (tool_id, row.get("data")) {
                    progress.push((session, tool_id.to_owned(), data.clone()));
                }
                ctx.skip();
            }
            _ => ctx.skip(),
        }
    }

    attach_progress(ctx, progress);
}

/// A `user` row without tool results: the user's prompt, an interruption marker, or bookkeeping.
fn user_text(
    ctx: &mut Ctx<'_>,
    row: &Value,
    content: &Value,
    session: &str,
    state: &mut TurnState,
    time: Timestamp,
) {
    let text = match content {
        Value::String(s) => s.as_str(),
        Value::Array(items) => items
            .iter()
            .find_map(|b| b.get("text").and_then(Value::as_str))
            .unwrap_or(""),
        _ => "",
    };
    let flag = |k: &str| row.get(k).and_then(Value::as_bool).unwrap_or(false);
    if text
        .trim_start()
        .starts_with("[Request interrupted by user")
    {
        if state.turn.is_some() && !state.aborted {
            let env = Env {
                session: Some(session.to_owned()),
                turn: state.turn.clone(),
                time,
                ..Env::default()
            };
            ctx.turn_aborted(env, Some("interrupted".into()));
            state.aborted = true;
        } else {
            ctx.skip();
        }
        return;
    }
    // Meta rows, compaction summaries and local slash-command echoes are not prompts.
    let bookkeeping = flag("isMeta")
        || flag("isCompactSummary")
        || flag("isVisibleInTranscriptOnly")
        || text.starts_with("<command-")
        || text.starts_with("<local-command-");
    if bookkeeping || text.trim().is_empty() {
        ctx.skip();
        return;
    }
    if let (Some(prev), false) = (&state.turn, state.aborted) {
        let env = Env {
            session: Some(session.to_owned()),
            turn: Some(prev.clone()),
            time,
            ..Env::default()
        };
        ctx.turn_end(env, Some("next prompt".into()));
    } else {
        ctx.skip();
    }
    let uuid = str_field(row, "uuid").map(str::to_owned);
    state.turn = Some(uuid.unwrap_or_else(|| format!("t{}", time.millis())));
    state.aborted = false;
}

/// Puts each progress row's `data` on its call: the completion when there is one, else the
/// announce. Rows whose tool id names no call of the file (session hooks) stay counted as skipped.
fn attach_progress(ctx: &mut Ctx<'_>, progress: Vec<(String, String, Value)>) {
    if progress.is_empty() {
        return;
    }
    let mut target: HashMap<(String, String), usize> = HashMap::new();
    for (i, e) in ctx.events_mut().iter().enumerate() {
        let Some(id) = &e.call_id else { continue };
        let key = (e.session.0.clone(), id.0.clone());
        match e.body {
            EventBody::Completion(_) => {
                target.insert(key, i);
            }
            EventBody::Announce(_) => {
                target.entry(key).or_insert(i);
            }
            _ => {}
        }
    }
    let events = ctx.events_mut();
    for (session, id, data) in progress {
        if let Some(&i) = target.get(&(session, id)) {
            let attrs = events[i].attributes.get_or_insert_with(Map::new);
            let list = attrs
                .entry("progress")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(items) = list {
                items.push(data);
            }
        }
    }
}

/// `claude -p --output-format stream-json [--verbose]` output.
///
/// `assistant` lines carry `tool_use` blocks, `user` lines the `tool_result` blocks; `session_id` is
/// on every line; a subagent's lines name the Task call in `parent_tool_use_id` (kept as the
/// attribute `parentToolUseId`). The final `result` line ends the run: a `turn_end` for the session.
/// The format has no timestamps (see [`crate::Options::base_time`]) and no turn ids.
pub(crate) fn stream_json(ctx: &mut Ctx<'_>, input: &[u8]) {
    for (line, bytes) in lines(input) {
        let Some(row) = ctx.json_line(line, bytes) else {
            continue;
        };
        let Some(kind) = row.get("type").and_then(Value::as_str) else {
            ctx.error(
                line,
                "line has no `type`; expected `claude -p --output-format stream-json` output",
            );
            continue;
        };
        let time = ctx
            .clock
            .at(line - 1, row.get("timestamp").and_then(loose_time));
        let session = str_field(&row, "session_id").map(str::to_owned);
        let mut attributes = Map::new();
        if let Some(p) = str_field(&row, "parent_tool_use_id") {
            attributes.insert("parentToolUseId".into(), Value::from(p));
        }
        let env = Env {
            session,
            time,
            attributes: Some(attributes),
            ..Env::default()
        };
        match kind {
            "assistant" | "user" => {
                let Some(content) = row.get("message").and_then(|m| m.get("content")) else {
                    ctx.error(
                        line,
                        format!("{kind} line has no `message.content`; the line is truncated"),
                    );
                    continue;
                };
                let found = blocks(content);
                if found.is_empty() {
                    ctx.skip();
                }
                let single = found.len() == 1;
                for b in found {
                    match b {
                        Block::Call {
                            id,
                            name,
                            input,
                            kind,
                            index,
                        } => {
                            let Some(name) = name else {
                                ctx.error_at(
                                    line,
                                    format!("message.content[{index}]"),
                                    format!("`{kind}` block has no `name`; skipped"),
                                );
                                continue;
                            };
                            let env = Env {
                                call_id: id,
                                ..env.clone()
                            };
                            ctx.announce(env, name, input.cloned());
                        }
                        Block::Result {
                            id,
                            content,
                            is_error,
                            ..
                        } => {
                            let mut env = Env {
                                call_id: id,
                                ..env.clone()
                            };
                            if single {
                                if let Some(r) = row.get("tool_use_result") {
                                    env.attributes
                                        .get_or_insert_with(Map::new)
                                        .insert("toolUseResult".into(), r.clone());
                                }
                            }
                            ctx.complete(env, result_completion(content, is_error));
                        }
                    }
                }
            }
            "result" => {
                let reason = str_field(&row, "subtype").unwrap_or("result").to_owned();
                ctx.turn_end(env, Some(reason));
            }
            _ => ctx.skip(),
        }
    }
}

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
pub(crate) fn hooks(ctx: &mut Ctx<'_>, input: &[u8]) {
    for (line, bytes) in lines(input) {
        let Some(p) = ctx.json_line(line, bytes) else {
            continue;
        };
        let Some(event) = str_field(&p, "hook_event_name") else {
            ctx.error(line, "payload has no `hook_event_name`; expected Claude Code hook input (one JSON object per line)");
            continue;
        };
        let native = ["timestamp", "time", "ts"]
            .iter()
            .find_map(|k| p.get(*k).and_then(loose_time));
        let time = ctx.clock.at(line - 1, native);
        let mut env = Env {
            session: str_field(&p, "session_id").map(str::to_owned),
            call_id: str_field(&p, "tool_use_id").map(str::to_owned),
            time,
            ..Env::default()
        };
        let tool = str_field(&p, "tool_name");
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
            continue;
        }
        match event {
            "PreToolUse" => {
                let tool = tool.unwrap_or_default();
                let i = ctx.announce(env.clone(), tool, args.clone());
                if let Some(agent) =
                    str_field(&p, "agent_id").or_else(|| str_field(&p, "agent_type"))
                {
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

#[cfg(test)]
mod tests {
    use crate::{parse, Format, Options};
    use serde_json::json;
    use toolcalls_model::{EventBody, EventKind};

    fn kinds(p: &crate::Parsed) -> Vec<(EventKind, Option<String>)> {
        p.events
            .iter()
            .map(|e| (e.kind(), e.call_id.as_ref().map(|c| c.0.clone())))
            .collect()
    }

    const SID: &str = "11111111-2222-3333-4444-555555555555";

    fn row(extra: serde_json::Value) -> String {
        let mut base = json!({"sessionId": SID, "isSidechain": false, "timestamp": "2026-01-05T10:00:00.000Z", "uuid": "u0"});
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        base.to_string()
    }

    #[test]
    fn transcript_keys_parallel_calls_by_tool_use_id_and_tracks_turns() {
        let lines = [
            row(
                json!({"type": "user", "uuid": "p1", "message": {"role": "user", "content": "find the bug"}}),
            ),
            row(
                json!({"type": "assistant", "uuid": "row-a", "timestamp": "2026-01-05T10:00:01.000Z", "message": {"id": "msg_1", "content": [{"type": "tool_use", "id": "toolu_a", "name": "Grep", "input": {"pattern": "x"}}]}}),
            ),
            row(
                json!({"type": "assistant", "timestamp": "2026-01-05T10:00:01.100Z", "message": {"id": "msg_1", "content": [{"type": "tool_use", "id": "toolu_b", "name": "Read", "input": {"file_path": "/a"}}]}}),
            ),
            row(
                json!({"type": "progress", "parentToolUseID": "toolu_b", "toolUseID": "toolu_b", "data": {"type": "hook_progress", "hookEvent": "PreToolUse"}}),
            ),
            row(
                json!({"type": "user", "timestamp": "2026-01-05T10:00:02.000Z", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "file body"}]}, "toolUseResult": {"type": "text"}}),
            ),
            row(
                json!({"type": "user", "timestamp": "2026-01-05T10:00:03.000Z", "sourceToolAssistantUUID": "row-a", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "no match", "is_error": true}]}}),
            ),
            row(
                json!({"type": "user", "uuid": "p2", "timestamp": "2026-01-05T10:01:00.000Z", "message": {"content": [{"type": "text", "text": "again"}]}}),
            ),
            row(
                json!({"type": "assistant", "timestamp": "2026-01-05T10:01:01.000Z", "message": {"id": "msg_2", "content": [{"type": "tool_use", "id": "toolu_c", "name": "Bash", "input": {"command": "sleep 100"}}]}}),
            ),
            row(
                json!({"type": "user", "timestamp": "2026-01-05T10:01:05.000Z", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_c", "content": "[Request interrupted by user for tool use]", "is_error": true}]}}),
            ),
            row(
                json!({"type": "user", "timestamp": "2026-01-05T10:01:05.001Z", "message": {"content": [{"type": "text", "text": "[Request interrupted by user for tool use]"}]}}),
            ),
            r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#.to_owned(),
        ];
        let p = parse(
            Format::ClaudeCode,
            "t.jsonl",
            lines.join("\n").as_bytes(),
            &Options::default(),
        );
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        use EventKind::*;
        let s = |x: &str| Some(x.to_owned());
        assert_eq!(
            kinds(&p),
            [
                (Announce, s("toolu_a")),
                (Announce, s("toolu_b")),
                (Completion, s("toolu_b")),
                (Completion, s("toolu_a")),
                (TurnEnd, None),
                (Announce, s("toolu_c")),
                (Completion, s("toolu_c")),
                (TurnAborted, None),
            ]
        );
        assert!(p
            .events
            .iter()
            .all(|e| e.session.as_str() == SID && e.source.as_str() == "claude-code"));
        assert_eq!(p.events[0].turn.as_ref().unwrap().as_str(), "p1");
        assert_eq!(
            p.events[4].turn.as_ref().unwrap().as_str(),
            "p1",
            "turn_end closes the previous turn"
        );
        assert_eq!(p.events[5].turn.as_ref().unwrap().as_str(), "p2");
        // The progress row's data rides on its call's completion, with the structured result.
        let attrs = p.events[2].attributes.as_ref().unwrap();
        assert_eq!(attrs["progress"][0]["hookEvent"], "PreToolUse");
        assert_eq!(attrs["toolUseResult"]["type"], "text");
        let EventBody::Completion(c) = &p.events[3].body else {
            panic!()
        };
        assert!(c.is_error && !c.cancelled);
        let EventBody::Announce(grep) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(
            c.tool.as_deref(),
            Some("Grep"),
            "sourceToolAssistantUUID names the call's row"
        );
        assert_eq!(c.checksum, grep.checksum);
        let EventBody::Completion(no_source) = &p.events[2].body else {
            panic!()
        };
        assert_eq!(
            (no_source.tool.as_ref(), no_source.checksum.as_ref()),
            (None, None)
        );
        let EventBody::Completion(c) = &p.events[6].body else {
            panic!()
        };
        assert!(c.cancelled, "an interrupted tool is cancelled");
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(
            a.checksum,
            Some(toolcalls_model::checksum_of(
                "Grep",
                Some(&json!({"pattern": "x"}))
            ))
        );
        assert_eq!(p.events[0].time.to_rfc3339(), "2026-01-05T10:00:01.000Z");
    }

    #[test]
    fn sidechain_rows_name_the_subagent_and_keep_their_own_turns() {
        let lines = [
            row(json!({"type": "user", "uuid": "main1", "message": {"content": "go"}})),
            row(
                json!({"type": "user", "isSidechain": true, "agentId": "a7", "uuid": "sub1", "message": {"content": "search the repo"}}),
            ),
            row(
                json!({"type": "assistant", "isSidechain": true, "agentId": "a7", "message": {"content": [{"type": "tool_use", "id": "toolu_s", "name": "Glob", "input": {"pattern": "*.rs"}}]}}),
            ),
        ];
        let p = parse(
            Format::ClaudeCode,
            "agent-a7.jsonl",
            lines.join("\n").as_bytes(),
            &Options::default(),
        );
        assert_eq!(
            p.events.len(),
            1,
            "the subagent's prompt does not end the main turn"
        );
        let EventBody::Announce(a) = &p.events[0].body else {
            panic!()
        };
        assert_eq!(a.agent.as_deref(), Some("a7"));
        assert_eq!(p.events[0].turn.as_ref().unwrap().as_str(), "sub1");
        assert_eq!(
            p.events[0].session.as_str(),
            SID,
            "subagent rows keep the parent session"
        );
    }

    #[test]
    fn transcript_reports_bad_rows_and_goes_on() {
        let lines = [
            "{not json".to_owned(),
            row(json!({"type": "assistant"})),
            r#"{"foo": 1}"#.to_owned(),
            row(
                json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "toolu_z", "input": {}}]}}),
            ),
            row(
                json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "toolu_ok", "name": "LS", "input": {}}]}}),
            ),
        ];
        let p = parse(
            Format::ClaudeCode,
            "bad.jsonl",
            lines.join("\n").as_bytes(),
            &Options::default(),
        );
        let lines_with_errors: Vec<_> = p.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines_with_errors, [1, 2, 3, 4]);
        assert!(p.errors[0]
            .to_string()
            .starts_with("bad.jsonl:1: line is not JSON"));
        assert!(p.errors[1].message.contains("no `message.content`"));
        assert!(p.errors[2].message.contains("no `type`"));
        assert!(p.errors[3].message.contains("no `name`"));
        assert_eq!(p.events.len(), 1);
    }

    #[test]
    fn stream_json_lines() {
        let s = [
            r#"{"type":"system","subtype":"init","session_id":"s-1","tools":["Bash"],"model":"claude-sonnet-4-5"}"#,
            r#"{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},"parent_tool_use_id":null,"session_id":"s-1"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"a\nb","is_error":false}]},"parent_tool_use_id":null,"session_id":"s-1","tool_use_result":{"stdout":"a\nb"}}"#,
            r#"{"type":"assistant","message":{"id":"msg_2","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"/x"}}]},"parent_tool_use_id":"toolu_task","session_id":"s-1"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":2000,"num_turns":2,"result":"done","session_id":"s-1"}"#,
        ];
        let opts = Options {
            base_time: Some(toolcalls_model::Timestamp::from_millis(1_700_000_000_000)),
            ..Options::default()
        };
        let p = parse(
            Format::ClaudeCodeStream,
            "run.jsonl",
            s.join("\n").as_bytes(),
            &opts,
        );
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        use EventKind::*;
        let got: Vec<_> = kinds(&p).into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, [Announce, Completion, Announce, TurnEnd]);
        assert_eq!(
            p.events[0].time.millis(),
            1_700_000_000_001,
            "base time + line index"
        );
        assert_eq!(
            p.events[1].attributes.as_ref().unwrap()["toolUseResult"]["stdout"],
            "a\nb"
        );
        assert_eq!(
            p.events[2].attributes.as_ref().unwrap()["parentToolUseId"],
            "toolu_task"
        );
        assert!(p.events.iter().all(|e| e.session.as_str() == "s-1"));
    }

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
        let p = parse(
            Format::ClaudeCodeHooks,
            "hooks.jsonl",
            s.join("\n").as_bytes(),
            &Options::default(),
        );
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

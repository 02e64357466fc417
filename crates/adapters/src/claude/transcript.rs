//! Claude Code session transcripts.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use toolcalls_model::{Checksum, EventBody, Timestamp};

use super::content::message_content;
use crate::anthropic::{blocks, Block};
use crate::common::{rfc3339_field, text_field, Ctx, Envelope};
use crate::line_reader::LineReader;

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
///   completion. Claude Code writes them while the call runs, before its result; rows after the
///   result, or of a call without one, are not attached (an event once read is final, so that a
///   transcript read as it grows gives what it gives read whole).
/// - The structured `toolUseResult` of a result row is kept as the completion attribute
///   `toolUseResult`; the completion's `result` is the `tool_result` content the model saw.
/// - Claude Code 2.1+ names the assistant row a result answers (`sourceToolAssistantUUID`); since
///   that row holds one call, the completion also carries the call's tool and checksum.
#[derive(Default)]
pub(crate) struct Transcript {
    turns: HashMap<(String, String), TurnState>,
    announced: HashSet<(String, String)>,
    completed: HashSet<(String, String)>,
    /// Progress rows by (session, tool id), until the call's result.
    progress: HashMap<(String, String), Vec<Value>>,
    /// Tool calls by the uuid of the assistant row that holds them, for `sourceToolAssistantUUID`.
    calls_of_row: HashMap<String, Vec<(String, Option<Checksum>)>>,
}

impl LineReader for Transcript {
    fn line(&mut self, ctx: &mut Ctx, line: usize, bytes: &[u8]) {
        let Some(row) = ctx.json_object_line(line, bytes, "a Claude Code transcript row") else {
            return;
        };
        if let Err(problem) = self.row(ctx, line, &row) {
            ctx.error(line, problem);
        }
    }
}

impl Transcript {
    /// Reads one row; a field the row's calls are known by holding a value of the wrong type is
    /// the error returned. A content block with one is reported on its own (`anthropic::blocks`).
    fn row(&mut self, ctx: &mut Ctx, line: usize, row: &Value) -> Result<(), String> {
        let Some(kind) = row.get("type").and_then(Value::as_str) else {
            ctx.error(line, "row has no `type`; is this a Claude Code transcript? try --format claude-code-stream or claude-code-hooks");
            return Ok(());
        };
        let time = ctx.clock.at(line - 1, rfc3339_field(row, "timestamp")?);
        let session = text_field(row, "sessionId")?
            .unwrap_or(ctx.default_session())
            .to_owned();
        let sidechain = row
            .get("isSidechain")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let agent = match sidechain {
            true => Some(
                text_field(row, "agentId")?
                    .unwrap_or("sidechain")
                    .to_owned(),
            ),
            false => None,
        };
        let uuid = text_field(row, "uuid")?;
        let stream_key = (session.clone(), agent.clone().unwrap_or_default());

        match kind {
            "assistant" => {
                let Some(content) = message_content(ctx, line, row, kind, "row") else {
                    return Ok(());
                };
                let turn = self.turns.get(&stream_key).and_then(|t| t.turn.clone());
                let mut any = false;
                for b in blocks(content) {
                    let Block::Call(call) = b else {
                        continue;
                    };
                    any = true;
                    let Some(name) = call.name_or_report(ctx, line, "message") else {
                        continue;
                    };
                    if let Some(id) = &call.id {
                        if !self.announced.insert((session.clone(), id.clone())) {
                            // The same block written twice (streaming rewrites); one call.
                            ctx.skip();
                            continue;
                        }
                    }
                    let env = Envelope {
                        session: Some(session.clone()),
                        turn: turn.clone(),
                        call_id: call.id,
                        time,
                        ..Envelope::default()
                    };
                    let i = ctx.announce(env, name, call.input.cloned());
                    if let EventBody::Announce(a) = &mut ctx.events_mut()[i].body {
                        a.agent.clone_from(&agent);
                        if let Some(uuid) = uuid {
                            self.calls_of_row
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
                let Some(content) = message_content(ctx, line, row, kind, "row") else {
                    return Ok(());
                };
                let found = blocks(content);
                let source = text_field(row, "sourceToolAssistantUUID")?;
                let state = self.turns.entry(stream_key).or_default();
                if found.is_empty() {
                    user_text(ctx, row, content, &session, state, time, uuid);
                    return Ok(());
                }
                let single = found.len() == 1;
                for b in found {
                    let Block::Result(result) = b else {
                        continue;
                    };
                    if !result.readable_or_report(ctx, line, "message") {
                        continue;
                    }
                    if let Some(id) = &result.id {
                        if !self.completed.insert((session.clone(), id.clone())) {
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
                    if let Some(id) = &result.id {
                        if let Some(data) = self.progress.remove(&(session.clone(), id.clone())) {
                            attributes.insert("progress".into(), Value::Array(data));
                        }
                    }
                    let env = Envelope {
                        session: Some(session.clone()),
                        turn: state.turn.clone(),
                        call_id: result.id.clone(),
                        time,
                        attributes: Some(attributes),
                        ..Envelope::default()
                    };
                    let mut c = result.completion();
                    // Claude Code 2.1+ names the assistant row of the call; when that row holds one
                    // call, the result can carry its tool and checksum (what the fallbacks use when
                    // ids are missing). Older versions only chain rows with `parentUuid`, which is
                    // wrong for parallel calls, so it is not used.
                    let source = source.and_then(|u| self.calls_of_row.get(u));
                    if let (true, Some([(tool, checksum)])) = (single, source.map(Vec::as_slice)) {
                        c.tool = Some(tool.clone());
                        c.checksum.clone_from(checksum);
                    }
                    ctx.complete(env, c);
                }
            }
            "progress" => {
                let tool_id = match text_field(row, "parentToolUseID")? {
                    Some(id) => Some(id),
                    None => text_field(row, "toolUseID")?,
                };
                if let (Some(tool_id), Some(data)) = (tool_id, row.get("data")) {
                    self.progress
                        .entry((session, tool_id.to_owned()))
                        .or_default()
                        .push(data.clone());
                }
                ctx.skip();
            }
            _ => ctx.skip(),
        }
        Ok(())
    }
}

/// A `user` row without tool results: the user's prompt, an interruption marker, or bookkeeping.
fn user_text(
    ctx: &mut Ctx,
    row: &Value,
    content: &Value,
    session: &str,
    state: &mut TurnState,
    time: Timestamp,
    uuid: Option<&str>,
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
            let env = Envelope {
                session: Some(session.to_owned()),
                turn: state.turn.clone(),
                time,
                ..Envelope::default()
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
        let env = Envelope {
            session: Some(session.to_owned()),
            turn: Some(prev.clone()),
            time,
            ..Envelope::default()
        };
        ctx.turn_end(env, Some("next prompt".into()));
    } else {
        ctx.skip();
    }
    state.turn = Some(uuid.map_or_else(|| format!("t{}", time.millis()), str::to_owned));
    state.aborted = false;
}

#[cfg(test)]
mod tests {
    use crate::test_support::{kinds_and_ids as kinds, parse_str};
    use crate::Format;
    use serde_json::json;
    use toolcalls_model::{EventBody, EventKind};

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
        let p = parse_str(Format::ClaudeCode, "t.jsonl", &lines.join("\n"));
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        use EventKind::*;
        let s = |x: &'static str| Some(x);
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
        let p = parse_str(Format::ClaudeCode, "agent-a7.jsonl", &lines.join("\n"));
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
        let p = parse_str(Format::ClaudeCode, "bad.jsonl", &lines.join("\n"));
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
}

//! `claude -p --output-format stream-json` output.

use serde_json::{Map, Value};

use super::content::message_content;
use crate::anthropic::{blocks, Block};
use crate::common::{loose_time_field, str_field, text_field, Ctx, Envelope};
use crate::line_reader::LineReader;

/// `claude -p --output-format stream-json [--verbose]` output.
///
/// `assistant` lines carry `tool_use` blocks, `user` lines the `tool_result` blocks; `session_id` is
/// on every line; a subagent's lines name the Task call in `parent_tool_use_id` (kept as the
/// attribute `parentToolUseId`). The final `result` line ends the run: a `turn_end` for the session.
/// The format has no timestamps (see [`crate::Options::base_time`]) and no turn ids.
#[derive(Default)]
pub(crate) struct StreamJson;

impl LineReader for StreamJson {
    fn line(&mut self, ctx: &mut Ctx, line: usize, bytes: &[u8]) {
        let Some(row) = ctx.json_line(line, bytes) else {
            return;
        };
        let Some(kind) = row.get("type").and_then(Value::as_str) else {
            ctx.error(
                line,
                "line has no `type`; expected `claude -p --output-format stream-json` output",
            );
            return;
        };
        let (time, session, parent) = match (
            loose_time_field(&row, "timestamp"),
            text_field(&row, "session_id"),
            text_field(&row, "parent_tool_use_id"),
        ) {
            (Ok(time), Ok(session), Ok(parent)) => (time, session, parent),
            (Err(problem), _, _) | (_, Err(problem), _) | (_, _, Err(problem)) => {
                ctx.error(line, problem);
                return;
            }
        };
        let time = ctx.clock.at(line - 1, time);
        let session = session.map(str::to_owned);
        let mut attributes = Map::new();
        if let Some(p) = parent {
            attributes.insert("parentToolUseId".into(), Value::from(p));
        }
        let env = Envelope {
            session,
            time,
            attributes: Some(attributes),
            ..Envelope::default()
        };
        match kind {
            "assistant" | "user" => {
                let Some(content) = message_content(ctx, line, &row, kind, "line") else {
                    return;
                };
                let found = blocks(content);
                if found.is_empty() {
                    ctx.skip();
                }
                let single = found.len() == 1;
                for b in found {
                    match b {
                        Block::Call(call) => {
                            let Some(name) = call.name_or_report(ctx, line, "message") else {
                                continue;
                            };
                            let env = Envelope {
                                call_id: call.id,
                                ..env.clone()
                            };
                            ctx.announce(env, name, call.input.cloned());
                        }
                        Block::Result(result) => {
                            if !result.readable_or_report(ctx, line, "message") {
                                continue;
                            }
                            let mut env = Envelope {
                                call_id: result.id.clone(),
                                ..env.clone()
                            };
                            if single {
                                if let Some(r) = row.get("tool_use_result") {
                                    env.attributes
                                        .get_or_insert_with(Map::new)
                                        .insert("toolUseResult".into(), r.clone());
                                }
                            }
                            ctx.complete(env, result.completion());
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

#[cfg(test)]
mod tests {
    use crate::test_support::kinds_and_ids as kinds;
    use crate::{parse, Format, Options};
    use toolcalls_model::EventKind;

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
}
